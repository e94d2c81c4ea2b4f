/*
 * Multicast through the library on the simulated fabric: a forked child on
 * node 2 joins a group and receives, the test process on node 1 joins
 * (full member, or send-only) and sends; the MULTICAST_JOIN event's
 * param.ud (MGID with the RDMA CM signature, MLID, QPN 0xFFFFFF, Q_Key,
 * the join's context), QP attach (a full member hears itself, a send-only
 * member does not), leave and the SA group going away; on IB and RoCE.
 * Failures: the SA refuses (MULTICAST_ERROR -EINVAL), the SA is silent
 * (-ETIMEDOUT), the id's Q_Key differs from the group's (-EINVAL); bad
 * arguments and states.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "libtest.h"

#define GROUP "239.1.2.3"
#define GRH 40
#define NMSG 3

TestSuite(mcast, .init = lt_init_ib, .fini = lt_fini, .timeout = 120);
TestSuite(mcast_roce, .init = lt_init_roce, .fini = lt_fini, .timeout = 120);

/* The group's MGID: IB (IPoIB mapping, P_Key ffff, RDMA CM signature 0x01
 * in byte 3 for RDMA_PS_UDP) or RoCE (::ffff:239.1.2.3). */
static void group_mgid(int roce, uint8_t mgid[16])
{
	static const uint8_t ib[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0,
					0,    0,    0,    0,    0x0f, 1,    2, 3 };
	static const uint8_t ro[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3 };

	memcpy(mgid, roce ? ro : ib, 16);
}

struct node {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char buf[NMSG][256];
};

/* Channel, UD id resolved to the group (as mckey does), QP, receives. */
static int node_up(struct node *n, const char *me, int post)
{
	struct sockaddr_in src = lt_sin(me, 0), grp = lt_sin(GROUP, 0);
	struct ibv_qp_init_attr qa;
	struct rdma_cm_event *ev;

	memset(n, 0, sizeof(*n));
	if (!(n->ch = rdma_create_event_channel()) ||
	    rdma_create_id(n->ch, &n->id, NULL, RDMA_PS_UDP) ||
	    rdma_resolve_addr(n->id, (struct sockaddr *)&src, (struct sockaddr *)&grp, 2000))
		return -1;
	ev = lt_event(n->ch, 2000);
	if (!ev || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		return -1;
	rdma_ack_cm_event(ev);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = NMSG + 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	if (rdma_create_qp(n->id, NULL, &qa) || !(n->mr = rdma_reg_msgs(n->id, n->buf, sizeof(n->buf))))
		return -1;
	for (int i = 0; post && i < NMSG; i++)
		if (rdma_post_recv(n->id, NULL, n->buf[i], sizeof(n->buf[i]), n->mr))
			return -1;
	return 0;
}

static void node_down(struct node *n)
{
	rdma_dereg_mr(n->mr);
	rdma_destroy_qp(n->id);
	rdma_destroy_id(n->id);
	rdma_destroy_event_channel(n->ch);
}

/* ---- the receiver (a child on node 2) ---------------------------------------------- */

static void receiver(int roce, struct lt_pipes *p)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0);
	struct rdma_cm_event *ev;
	struct ibv_wc wc;
	struct node n;
	uint8_t mgid[16];
	uint16_t mlid;
	int tag = 5;
	char c;

	lt_node(2);
	LT_CK(node_up(&n, "127.10.0.2", 1) == 0);
	LT_CK(rdma_join_multicast(n.id, (struct sockaddr *)&grp, &tag) == 0);
	ev = lt_event(n.ch, 10000);
	LT_CK(ev && ev->event == RDMA_CM_EVENT_MULTICAST_JOIN && ev->status == 0);
	LT_CK(ev->param.ud.private_data == &tag);
	LT_CK(ev->param.ud.qp_num == 0xFFFFFF && ev->param.ud.qkey == RDMA_UDP_QKEY);
	group_mgid(roce, mgid);
	LT_CK(!memcmp(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16));
	mlid = ev->param.ud.ah_attr.dlid;
	rdma_ack_cm_event(ev);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(write(p->ready[1], &mlid, sizeof(mlid)) == sizeof(mlid));
	for (int i = 0; i < NMSG; i++) {
		LT_CK(lt_wait_cq(n.id->recv_cq, &wc, 10000) == 1);
		LT_CK(wc.status == IBV_WC_SUCCESS && wc.byte_len == GRH + 8);
		LT_CK(wc.wc_flags & IBV_WC_GRH);
		LT_CK(!strcmp(n.buf[i] + GRH, "mcast 0") || !strcmp(n.buf[i] + GRH, "mcast 1") ||
		   !strcmp(n.buf[i] + GRH, "mcast 2"));
	}
	LT_CK(write(p->ready[1], "d", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	LT_CK(rdma_leave_multicast(n.id, (struct sockaddr *)&grp) == 0);
	node_down(&n);
	_exit(0);
}

/* The fabric's multicast group table (uscm-sim status). */
static char *groups(void)
{
	char *out = NULL;

	lt_sh(&out, "%s/uscm-sim status --dir %s | sed -n '/^multicast groups:/,$p'", lt_bin(),
	      getenv("USCM_SIM_DIR"));
	return out;
}

/* ---- the sender (the test process, node 1) ---------------------------------------------- */

static void send_to_group(int roce, int send_only)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0);
	struct rdma_cm_join_mc_attr_ex attr;
	struct rdma_cm_event *ev;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct node n;
	struct lt_pipes p;
	int tag = 9, heard = 0;
	uint8_t mgid[16];
	uint16_t mlid;
	uint32_t qkey;
	char c, *g;
	pid_t pid;

	pid = lt_spawn(receiver, roce, &p);
	cr_assert_eq(read(p.ready[0], &mlid, sizeof(mlid)), (ssize_t)sizeof(mlid));
	cr_assert_eq(node_up(&n, "127.10.0.1", 1), 0, "%s", strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	attr.join_flags = send_only ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
				    : RDMA_MC_JOIN_FLAG_FULLMEMBER;
	attr.addr = (struct sockaddr *)&grp;
	cr_assert_eq(rdma_join_multicast_ex(n.id, &attr, &tag), 0, "%s", strerror(errno));
	ev = lt_expect(n.ch, RDMA_CM_EVENT_MULTICAST_JOIN, 10000);
	cr_expect_eq(ev->status, 0);
	cr_expect_eq(ev->id, n.id);
	cr_expect_eq(ev->param.ud.private_data, &tag, "the join's context");
	cr_expect_eq(ev->param.ud.qp_num, 0xFFFFFF);
	cr_expect_eq(ev->param.ud.qkey, RDMA_UDP_QKEY);
	cr_expect(ev->param.ud.ah_attr.is_global);
	cr_expect_eq(ev->param.ud.ah_attr.port_num, 1);
	group_mgid(roce, mgid);
	cr_expect_arr_eq(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16);
	if (roce) {
		cr_expect_eq(ev->param.ud.ah_attr.dlid, 0);
	} else {
		cr_expect_geq(ev->param.ud.ah_attr.dlid, 0xC000, "MLID 0x%x",
			      ev->param.ud.ah_attr.dlid);
		cr_expect_eq(ev->param.ud.ah_attr.dlid, mlid, "both sides see one MLID");
	}
	qkey = ev->param.ud.qkey;
	ah = ibv_create_ah(n.id->pd, &ev->param.ud.ah_attr);
	cr_assert(ah, "%s", strerror(errno));
	rdma_ack_cm_event(ev);
	if (!roce) {
		g = groups();
		cr_expect(strstr(g, "ff12:4001:ffff::f01:203"), "%s", g);
		cr_expect(strstr(g, send_only ? "node1(0x8)" : "node1(0x1)"), "%s", g);
		cr_expect(strstr(g, "node2(0x1)"), "%s", g);
		free(g);
	}
	for (int i = 0; i < NMSG; i++) {
		struct ibv_sge sge;
		struct ibv_send_wr wr, *bad;

		snprintf(n.buf[i] + 128, 16, "mcast %d", i);
		sge.addr = (uintptr_t)(n.buf[i] + 128);
		sge.length = 8;
		sge.lkey = n.mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xFFFFFF;
		wr.wr.ud.remote_qkey = qkey;
		cr_assert_eq(ibv_post_send(n.id->qp, &wr, &bad), 0);
		cr_assert_eq(lt_wait_cq(n.id->send_cq, &wc, 5000), 1);
		cr_expect_eq(wc.status, IBV_WC_SUCCESS);
	}
	cr_assert_eq(read(p.ready[0], &c, 1), 1, "the receiver got them");
	/* A full member's QP is attached: it hears its own sends. */
	while (lt_wait_cq(n.id->recv_cq, &wc, heard < NMSG && !send_only ? 2000 : 200) == 1)
		heard++;
	cr_expect_eq(heard, send_only ? 0 : NMSG, "heard %d of our own", heard);
	ibv_destroy_ah(ah);
	cr_expect_eq(rdma_leave_multicast(n.id, (struct sockaddr *)&grp), 0, "%s",
		     strerror(errno));
	errno = 0;
	cr_expect_eq(rdma_leave_multicast(n.id, (struct sockaddr *)&grp), -1, "left already");
	cr_expect_eq(errno, EADDRNOTAVAIL);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
	if (!roce) {
		/* Both left: the SA deleted the group. */
		for (int i = 0; i < 50; i++) {
			g = groups();
			if (!strstr(g, "f01:203"))
				break;
			free(g);
			g = NULL;
			usleep(20000);
		}
		cr_expect(g, "the group is still there");
		free(g);
	}
	node_down(&n);
}

Test(mcast, join_send_receive_leave)
{
	send_to_group(0, 0);
}

Test(mcast, send_only_full_member)
{
	send_to_group(0, 1);
}

Test(mcast_roce, join_send_receive_leave)
{
	send_to_group(1, 0);
}

Test(mcast_roce, send_only_full_member)
{
	send_to_group(1, 1);
}

/* An MGID the SA refuses (not a multicast GID): MULTICAST_ERROR -EINVAL. */
Test(mcast, sa_refusal_is_multicast_error_einval)
{
	struct sockaddr_ib sib;
	struct rdma_cm_event *ev;
	struct node n;
	int tag = 3;

	cr_assert_eq(node_up(&n, "127.10.0.1", 0), 0);
	memset(&sib, 0, sizeof(sib));
	sib.sib_family = AF_IB;
	sib.sib_addr.sib_raw[0] = 0xFE;
	sib.sib_addr.sib_raw[1] = 0x80;
	sib.sib_addr.sib_raw[15] = 7;
	cr_assert_eq(rdma_join_multicast(n.id, (struct sockaddr *)&sib, &tag), 0);
	ev = lt_expect(n.ch, RDMA_CM_EVENT_MULTICAST_ERROR, 10000);
	cr_expect_eq(ev->status, -EINVAL);
	cr_expect_eq(ev->param.ud.private_data, &tag);
	rdma_ack_cm_event(ev);
	/* A failed join is still the id's until it is left. */
	cr_expect_eq(rdma_leave_multicast(n.id, (struct sockaddr *)&sib), 0);
	node_down(&n);
}

Test(mcast, sa_silence_is_multicast_error_etimedout)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0);
	struct rdma_cm_event *ev;
	struct node n;
	uint64_t t0, dt;

	setenv("USCM_SA_MCM_TIMEOUT_MS", "50", 1);
	lt_knobs_changed();
	cr_assert_eq(node_up(&n, "127.10.0.1", 0), 0);
	cr_assert_eq(lt_sh(NULL, "%s/uscm-sim fault --dir %s 'drop=100%%,class=0x03' >/dev/null 2>&1",
			   lt_bin(), getenv("USCM_SIM_DIR")), 0);
	t0 = lt_now_ms();
	cr_assert_eq(rdma_join_multicast(n.id, (struct sockaddr *)&grp, NULL), 0);
	ev = lt_expect(n.ch, RDMA_CM_EVENT_MULTICAST_ERROR, 5000);
	dt = lt_now_ms() - t0;
	cr_expect_eq(ev->status, -ETIMEDOUT);
	/* 1 + 3 tries of 50 ms */
	cr_expect_geq(dt, 150u, "%llu ms", (unsigned long long)dt);
	cr_expect_leq(dt, 2000u, "%llu ms", (unsigned long long)dt);
	rdma_ack_cm_event(ev);
	node_down(&n);
}

/* The id keeps one Q_Key: a group whose Q_Key differs from the one its QP
 * already has is MULTICAST_ERROR -EINVAL (the kernel's cma_set_qkey). */
Test(mcast, qkey_mismatch_is_multicast_error)
{
	struct sockaddr_ib sib;
	struct sockaddr_in me = lt_sin("127.10.0.1", 0);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *ipoib;
	struct node n;

	cr_assert_eq(node_up(&n, "127.10.0.1", 0), 0); /* UDP: QP Q_Key 0x01234567 */
	memset(&sib, 0, sizeof(sib));
	sib.sib_family = AF_IB;
	memcpy(sib.sib_addr.sib_raw, "\xff\x12\x40\x1b\xff\xff\0\0\0\0\0\0\0\x01\x02\x03", 16);
	/* An IPoIB id creates the group with its Q_Key (0x0B1B). */
	cr_assert_eq(rdma_create_id(n.ch, &ipoib, NULL, RDMA_PS_IPOIB), 0);
	cr_assert_eq(rdma_bind_addr(ipoib, (struct sockaddr *)&me), 0);
	cr_assert_eq(rdma_join_multicast(ipoib, (struct sockaddr *)&sib, NULL), 0);
	ev = lt_expect(n.ch, RDMA_CM_EVENT_MULTICAST_JOIN, 10000);
	cr_expect_eq(ev->param.ud.qkey, 0x0B1B);
	rdma_ack_cm_event(ev);
	cr_assert_eq(rdma_join_multicast(n.id, (struct sockaddr *)&sib, NULL), 0);
	ev = lt_expect(n.ch, RDMA_CM_EVENT_MULTICAST_ERROR, 10000);
	cr_expect_eq(ev->id, n.id);
	cr_expect_eq(ev->status, -EINVAL);
	rdma_ack_cm_event(ev);
	/* Destroying the id leaves its groups. */
	cr_assert_eq(rdma_destroy_id(ipoib), 0);
	for (int i = 0; i < 50; i++) {
		char *g = groups();
		int gone = !strstr(g, "ff12:401b:ffff::1:203");
		free(g);
		if (gone)
			break;
		cr_expect_lt(i, 49, "the group outlived its last member");
		usleep(20000);
	}
	node_down(&n);
}

/* A synchronous id waits in the join for its event; leaving right after
 * (its MULTICAST_JOIN still held on the id) does not wait for itself. */
Test(mcast, synchronous_join_and_leave)
{
	struct sockaddr_in src = lt_sin("127.10.0.1", 0), grp = lt_sin(GROUP, 0);
	struct sockaddr_ib sib;
	struct rdma_cm_id *id;

	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), 0);
	cr_assert_eq(rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&grp, 2000),
		     0);
	cr_assert_eq(rdma_join_multicast(id, (struct sockaddr *)&grp, NULL), 0, "%s",
		     strerror(errno));
	cr_assert(id->event);
	cr_expect_eq(id->event->event, RDMA_CM_EVENT_MULTICAST_JOIN);
	cr_expect_eq(id->event->param.ud.qp_num, 0xFFFFFF);
	cr_expect_eq(rdma_leave_multicast(id, (struct sockaddr *)&grp), 0);
	memset(&sib, 0, sizeof(sib));
	sib.sib_family = AF_IB;
	sib.sib_addr.sib_raw[0] = 0xFE; /* the SA refuses it */
	errno = 0;
	cr_expect_eq(rdma_join_multicast(id, (struct sockaddr *)&sib, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_eq(rdma_destroy_id(id), 0);
}

static void bad_arguments(int roce)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0), me = lt_sin("127.10.0.1", 0);
	struct sockaddr_in6 grp6;
	struct rdma_cm_join_mc_attr_ex attr;
	struct rdma_cm_id *id;
	struct node n;

	(void)roce;
	/* Not bound to a device yet / not UD. */
	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), 0);
	errno = 0;
	cr_expect_eq(rdma_join_multicast(id, (struct sockaddr *)&grp, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);
	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(id, (struct sockaddr *)&me), 0);
	errno = 0;
	cr_expect_eq(rdma_join_multicast(id, (struct sockaddr *)&grp, NULL), -1, "RC id");
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);

	cr_assert_eq(node_up(&n, "127.10.0.1", 0), 0);
	memset(&attr, 0, sizeof(attr));
	attr.addr = (struct sockaddr *)&grp;
	attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED | RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	errno = 0;
	cr_expect_eq(rdma_join_multicast_ex(n.id, &attr, NULL), -1);
	cr_expect_eq(errno, ENOTSUP);
	attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	errno = 0;
	cr_expect_eq(rdma_join_multicast_ex(n.id, &attr, NULL), -1, "no join flags");
	cr_expect_eq(errno, EINVAL);
	attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	attr.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	errno = 0;
	cr_expect_eq(rdma_join_multicast_ex(n.id, &attr, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_join_multicast_ex(n.id, NULL, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_leave_multicast(n.id, (struct sockaddr *)&grp), -1, "never joined");
	cr_expect_eq(errno, EADDRNOTAVAIL);
	if (roce) {
		/* RoCE v2 has no mapping for an IPv6 group (the kernel: ENOTSUPP). */
		memset(&grp6, 0, sizeof(grp6));
		grp6.sin6_family = AF_INET6;
		inet_pton(AF_INET6, "ff0e::1:2", &grp6.sin6_addr);
		errno = 0;
		cr_expect_eq(rdma_join_multicast(n.id, (struct sockaddr *)&grp6, NULL), -1);
		cr_expect_eq(errno, EOPNOTSUPP);
	}
	node_down(&n);
}

Test(mcast, bad_arguments_and_states)
{
	bad_arguments(0);
}

Test(mcast_roce, bad_arguments_and_states)
{
	bad_arguments(1);
}
