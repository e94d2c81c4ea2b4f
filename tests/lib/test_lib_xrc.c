/*
 * XRC through uscm's librdmacm: Debian's unmodified
 * rdma_xserver / rdma_xclient (rdmacm-utils) in XRC mode (-c x) on the
 * simulated fabric, IB and RoCE, server on node 1, client on node 2. The
 * server's library makes an XRC target QP in the device's XRC domain and,
 * at rdma_create_srq, an XRC SRQ on a receive CQ; the client's an XRC
 * initiator QP; the REQ says XRC (transport 3, extended 1), the REP names
 * the target QP in its Local EECN and carries the SRQ number as private
 * data; the client's inline SEND names that SRQ (XRCETH) and the server
 * gets it from rdma_get_recv_comp. Both must print "end 0" and exit 0.
 * RC mode (-c r) is checked too. CTest runs this once more in daemon mode
 * (USCM_TEST_DAEMON=1). Skipped when rdmacm-utils is missing.
 */
#include <rdma/rdma_verbs.h>
#include <signal.h>
#include <sys/prctl.h>

#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(xrc, .fini = teardown, .timeout = 120);

/* Runs `rdma_xserver <mode>` on node1 in the background and the client on
 * node2 until it gets past "not listening yet"; checks both. capture
 * (or NULL): the fabric records its MADs into that pcap. */
static void xpair(const char *link, const char *mode, const char *capture)
{
	char *out = NULL, *sout = NULL, *rc = NULL, opts[600];
	const char *d = getenv("USCM_TEST_DAEMON");
	int st = -1;

	if (lt_sh(NULL, "command -v rdma_xserver >/dev/null && command -v rdma_xclient >/dev/null"))
		tf_skip_missing("rdma_xserver / rdma_xclient (Debian rdmacm-utils) are not installed");
	/* lt_fabric_start with a capture: the pcap goes next to the fabric */
	snprintf(opts, sizeof(opts), "%s%s%s", d && atoi(d) ? "" : "--no-uscmd ",
		 capture ? "--pcap " : "", capture ? capture : "");
	lt_fabric_start_opts(link, 2, opts);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 %s timeout 60 rdma_xserver -c %s >%s/server.out 2>&1;"
			   " echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_util_env(), mode, lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "USCM_SIM_NODE=node2 %s timeout 60 rdma_xclient -c %s -s 127.10.0.1 2>&1",
			   lt_util_env(), mode);
		/* REJECTED / "Connection refused": the server is not listening yet */
		if (st == 0 || strstr(out, "end 0") ||
		    (!strstr(out, "REJECTED") && !strstr(out, "Connection refused") &&
		     !strstr(out, "rdma_connect")))
			break;
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "rdma_xclient -c %s exited %d:\n%s", mode, st, out);
	cr_expect(strstr(out, "rdma_xclient: end 0"), "%s", out);
	for (int i = 0; i < 100; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/server.rc 2>/dev/null", lt_dir) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(rc && rc[0] == '0', "rdma_xserver -c %s exited %s:\n%s", mode, rc ? rc : "?", sout);
	cr_expect(sout && strstr(sout, "rdma_xserver: end 0"), "%s", sout ? sout : "");
	free(out);
	free(sout);
	free(rc);
}

Test(xrc, xserver_xclient_xrc_ib)
{
	xpair("ib", "x", NULL);
}

Test(xrc, xserver_xclient_xrc_roce)
{
	xpair("roce", "x", NULL);
}

Test(xrc, xserver_xclient_rc_ib)
{
	xpair("ib", "r", NULL);
}

/* The wire: uscm-decode shows the REQ as XRC (transport 3, extended 1) and
 * the REP's target QPN in its Local EECN (Local QPN 0), and the verbose
 * decode the fields the kernel leaves zero for an XRC initiator. */
Test(xrc, capture_decodes_as_xrc)
{
	char pcap[128], *out = NULL;

	snprintf(pcap, sizeof(pcap), "/tmp/uscm-xrc-%d.pcap", (int)getpid());
	xpair("roce", "x", pcap);
	lt_fabric_stop(); /* the capture is complete */
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode %s", lt_bin(), pcap), 0, "%s", out);
	cr_expect(strstr(out, "REQ(0x0010)") && strstr(out, " type XRC"), "%s", out);
	cr_expect(strstr(out, "REP(0x0013)") && strstr(out, "qpn 0x000000") && strstr(out, " eecn 0x"),
		  "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode -v %s", lt_bin(), pcap), 0, "%s", out);
	cr_expect(strstr(out, "transport_service_type: 3"), "%s", out);
	cr_expect(strstr(out, "extended_transport_type: 1"), "%s", out);
	cr_expect(strstr(out, "responder_resources: 0"), "%s", out);
	free(out);
	unlink(pcap);
}

/* ---- the API directly: what the library makes for each XRC id --------------------------- */

TestSuite(xrc_api, .init = lt_init_ib, .fini = lt_fini, .timeout = 60);

static void xrc_server(int mode, struct lt_pipes *p)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *lid, *id;
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa;
	struct rdma_conn_param cp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint32_t srqn;
	__be32 wire;
	char buf[16];

	(void)mode;
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with a failed test's worker */
	lt_node(2);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_IB;
	hints.ai_qp_type = IBV_QPT_XRC_RECV;
	LT_CK(rdma_getaddrinfo(NULL, "7490", &hints, &res) == 0);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_recv_wr = 1;
	qa.cap.max_recv_sge = 1;
	LT_CK(rdma_create_ep(&lid, res, NULL, &qa) == 0);
	rdma_freeaddrinfo(res);
	LT_CK(rdma_listen(lid, 0) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(rdma_get_request(lid, &id) == 0);
	/* an XRC target: no CQs of its own, a PD for the id's memory */
	LT_CK(id->qp && id->qp->qp_type == IBV_QPT_XRC_RECV && id->pd);
	LT_CK(!id->recv_cq && !id->send_cq && !id->srq);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 1;
	sa.attr.max_sge = 1;
	LT_CK(rdma_create_srq(id, NULL, &sa) == 0);
	LT_CK(id->srq && id->recv_cq && id->recv_cq_channel);
	LT_CK(rdma_create_srq(id, NULL, &sa) == -1 && errno == EINVAL); /* one per id */
	LT_CK(ibv_get_srq_num(id->srq, &srqn) == 0 && srqn);
	LT_CK((mr = rdma_reg_msgs(id, buf, sizeof(buf))));
	LT_CK(rdma_post_recv(id, NULL, buf, sizeof(buf), mr) == 0); /* to id->srq */
	wire = htobe32(srqn);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &wire;
	cp.private_data_len = sizeof(wire);
	LT_CK(rdma_accept(id, &cp) == 0);
	LT_CK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	LT_CK(wc.qp_num == id->qp->qp_num && wc.byte_len == 5 && !strcmp(buf, "xrc!"));
	LT_CK(write(p->ready[1], "d", 1) == 1);
	/* as rdma_xserver: both sides disconnect (an in-process CM answers
	 * the peer's DREQ only while its program calls into the library) */
	LT_CK(rdma_disconnect(id) == 0);
	LT_CK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_ep(id); /* QP, SRQ, then the SRQ's CQ */
	rdma_destroy_ep(lid);
	_exit(0);
}

/* The initiator has a send CQ only; the REP's private data is the SRQ
 * number; an inline SEND naming it lands in the server's XRC SRQ. */
Test(xrc_api, initiator_and_target_ids)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr_ex sx;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct lt_pipes p;
	char buf[16] = "xrc!";
	uint32_t srqn;
	pid_t pid;

	pid = lt_spawn(xrc_server, 0, &p);
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_IB;
	hints.ai_qp_type = IBV_QPT_XRC_SEND;
	cr_assert_eq(rdma_getaddrinfo("127.10.0.2", "7490", &hints, &res), 0);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.sq_sig_all = 1;
	cr_assert_eq(rdma_create_ep(&id, res, NULL, &qa), 0, "%s", strerror(errno));
	rdma_freeaddrinfo(res);
	cr_assert(id->qp && id->qp->qp_type == IBV_QPT_XRC_SEND && id->send_cq && !id->recv_cq);
	/* tag-matching SRQs are not done */
	memset(&sx, 0, sizeof(sx));
	sx.attr.max_wr = 1;
	sx.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
	sx.srq_type = IBV_SRQT_TM;
	errno = 0;
	cr_assert_eq(rdma_create_srq_ex(id, &sx), -1);
	cr_assert_eq(errno, EOPNOTSUPP);
	cr_assert_eq(rdma_connect(id, NULL), 0, "%s", strerror(errno));
	cr_assert(id->event && id->event->param.conn.private_data);
	/* as rdma_xclient reads it: a word in place, so the data is aligned */
	cr_assert_eq((uintptr_t)id->event->param.conn.private_data % 4, 0);
	srqn = be32toh(*(const __be32 *)id->event->param.conn.private_data);
	sge.addr = (uintptr_t)buf;
	sge.length = 5;
	sge.lkey = 0;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE;
	wr.qp_type.xrc.remote_srqn = srqn;
	cr_assert_eq(ibv_post_send(id->qp, &wr, &bad), 0);
	cr_assert_eq(rdma_get_send_comp(id, &wc), 1);
	cr_assert_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_eq(lt_child_says(&p, 10000, "the server got no message"), 'd');
	cr_assert_eq(rdma_disconnect(id), 0);
	rdma_destroy_ep(id);
	lt_reap(pid);
}
