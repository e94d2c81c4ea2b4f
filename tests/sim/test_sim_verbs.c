/*
 * test_sim_verbs.c - the drop-in libibverbs.so.1 of the simulated fabric
 * (sim/verbs). Every test starts its own fabric with `uscm-sim start` in a
 * fresh directory and stops it afterwards. The test process itself never
 * attaches to the fabric (`uscm-sim stop` kills the processes attached as a
 * node): the verbs work happens in forked children, one per node, which
 * die with the test (PR_SET_PDEATHSIG) and report through their exit code.
 * The unmodified Debian ibverbs-utils binaries run with LD_LIBRARY_PATH
 * pointing at the drop-in ($USCM_SIM_LIBDIR, else $USCM_BIN_DIR/../sim/lib).
 * USCM_SVT_PCAP=DIR keeps a capture of every fabric for tshark.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/simf.h"
#include "simtest.h"

/* ---- fabric --------------------------------------------------------------- */

static char g_dir[128];
static char g_sim[512];
static char g_libdir[512];
static int g_up;

static int run_argv(char *const argv[], const char *out_path, int quiet)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			if (quiet)
				dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Starts a 2-node fabric; seed 0 means the default, fault NULL none. */
static void fabric_start_opts(const char *link, unsigned seed, const char *fault)
{
	const char *bin = getenv("USCM_BIN_DIR");
	const char *lib = getenv("USCM_SIM_LIBDIR");
	char watch[32], seedbuf[32];
	int ai = 9;

	snprintf(g_sim, sizeof(g_sim), "%s/uscm-sim", bin ? bin : "build/bin");
	if (access(g_sim, X_OK))
		tf_skip_missing("no %s: the fabric tool is not built", g_sim);
	if (lib)
		snprintf(g_libdir, sizeof(g_libdir), "%s", lib);
	else
		snprintf(g_libdir, sizeof(g_libdir), "%s/../sim/lib", bin ? bin : "build/bin");
	snprintf(g_dir, sizeof(g_dir), "/tmp/uscm-svt.XXXXXX");
	cr_assert_not_null(mkdtemp(g_dir));
	char *argv[16] = {g_sim, "start", "--dir", g_dir, "--nodes", "2", "--link", (char *)link, "--no-uscmd"};
	char pcap[512];

	/* USCM_SVT_PCAP=DIR keeps a capture of every fabric (for tshark) */
	if (getenv("USCM_SVT_PCAP")) {
		snprintf(pcap, sizeof(pcap), "%s/%s-%d.pcap", getenv("USCM_SVT_PCAP"), link, (int)getpid());
		argv[ai++] = "--pcap";
		argv[ai++] = pcap;
	}
	if (seed) {
		snprintf(seedbuf, sizeof(seedbuf), "%u", seed);
		argv[ai++] = "--seed";
		argv[ai++] = seedbuf;
	}
	if (fault) {
		argv[ai++] = "--fault";
		argv[ai++] = (char *)fault;
	}
	argv[ai] = NULL;
	/* the fabric (its SM) goes away with this test process, even when it
	 * crashes or times out */
	snprintf(watch, sizeof(watch), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", watch, 1);

	cr_assert_eq(run_argv(argv, NULL, 0), 0, "uscm-sim start failed");
	g_up = 1;
	setenv("USCM_SIM_DIR", g_dir, 1);
	unsetenv("USCM_SIM_NODE");
}

static void fabric_start(const char *link)
{
	fabric_start_opts(link, 0, NULL);
}

static void fabric_stop(void)
{
	if (g_up) {
		char *argv[] = {g_sim, "stop", "--dir", g_dir, NULL};

		run_argv(argv, NULL, 1);
		rmdir(g_dir);
		g_up = 0;
	}
}

static void fabric_fault(const char *spec)
{
	char *argv[] = {g_sim, "fault", "--dir", g_dir, (char *)spec, NULL};

	cr_assert_eq(run_argv(argv, NULL, 0), 0, "uscm-sim fault %s", spec);
}

/* ---- children ------------------------------------------------------------------- */

#define CHK(c)                                                                              \
	do {                                                                                \
		if (!(c)) {                                                                 \
			fprintf(stderr, "%s:%d: check failed: %s (errno %d %s)\n", __FILE__, \
				__LINE__, #c, errno, strerror(errno));                      \
			_exit(100);                                                         \
		}                                                                           \
	} while (0)

typedef void (*child_fn)(int fd, void *arg);

static pid_t spawn(const char *node, child_fn fn, int fd, int other, void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (other >= 0)
			close(other);   /* so the peer's exit reads as EOF */
		setenv("USCM_SIM_NODE", node, 1);
		fn(fd, arg);
		_exit(0);
	}
	cr_assert_gt(pid, 0);
	return pid;
}

/* Waits for pid up to ms; kills it after. Returns its exit code (or 128+sig). */
static int reap(pid_t pid, int ms)
{
	int st, waited = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		if (waited >= ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 999;
		}
		usleep(10000);
		waited += 10;
	}
}

/* Runs a and b (node1, node2) connected by a socketpair. */
static void run_pair(child_fn a, child_fn b, void *arg, int ms)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pa = spawn("node1", a, sv[0], sv[1], arg);
	pid_t pb = spawn("node2", b, sv[1], sv[0], arg);

	close(sv[0]);
	close(sv[1]);
	int ra = reap(pa, ms), rb = reap(pb, ms);

	cr_assert_eq(ra, 0, "node1 side failed (%d)", ra);
	cr_assert_eq(rb, 0, "node2 side failed (%d)", rb);
}

static void run_one(const char *node, child_fn fn, void *arg)
{
	int r = reap(spawn(node, fn, -1, -1, arg), 20000);

	cr_assert_eq(r, 0, "child failed (%d)", r);
}

/* ---- verbs helpers (children) ------------------------------------------------------ */

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	struct ibv_port_attr port;
};

struct info {
	uint16_t lid;
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static void ep_open(struct ep *e, enum ibv_qp_type t, size_t len, int channel)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	memset(e, 0, sizeof(*e));
	CHK(l && n == 1);
	e->ctx = ibv_open_device(l[0]);
	CHK(e->ctx);
	ibv_free_device_list(l);
	CHK(ibv_query_port(e->ctx, 1, &e->port) == 0);
	e->pd = ibv_alloc_pd(e->ctx);
	CHK(e->pd);
	e->len = len;
	e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	CHK(e->buf);
	memset(e->buf, 0, len);
	e->mr = ibv_reg_mr(e->pd, e->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHK(e->mr);
	if (channel) {
		e->ch = ibv_create_comp_channel(e->ctx);
		CHK(e->ch);
	}
	e->cq = ibv_create_cq(e->ctx, 1024, e, e->ch, 0);
	CHK(e->cq);
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = t,
		.cap = {.max_send_wr = 256, .max_recv_wr = 256, .max_send_sge = 4, .max_recv_sge = 4,
			.max_inline_data = 64},
	};
	e->qp = ibv_create_qp(e->pd, &ia);
	CHK(e->qp);
}

static void ep_close(struct ep *e)
{
	CHK(ibv_destroy_qp(e->qp) == 0);
	CHK(ibv_destroy_cq(e->cq) == 0);
	if (e->ch)
		CHK(ibv_destroy_comp_channel(e->ch) == 0);
	CHK(ibv_dereg_mr(e->mr) == 0);
	CHK(ibv_dealloc_pd(e->pd) == 0);
	CHK(ibv_close_device(e->ctx) == 0);
	free(e->buf);
}

static void xchg(int fd, const struct ep *e, struct info *remote)
{
	struct info me;
	union ibv_gid g;

	memset(&me, 0, sizeof(me));
	me.lid = e->port.lid;
	me.qpn = e->qp->qp_num;
	me.psn = (uint32_t)(getpid() * 7919) & 0xFFFFFF;
	me.rkey = e->mr->rkey;
	me.addr = (uintptr_t)e->buf;
	CHK(ibv_query_gid(e->ctx, 1, 0, &g) == 0);
	memcpy(me.gid, g.raw, 16);
	CHK(write(fd, &me, sizeof(me)) == sizeof(me));
	CHK(read(fd, remote, sizeof(*remote)) == sizeof(*remote));
}

static void sync_fd(int fd)
{
	char c = 'x';

	CHK(write(fd, &c, 1) == 1);
	CHK(read(fd, &c, 1) == 1);
}

static uint32_t my_psn(void)
{
	return (uint32_t)(getpid() * 7919) & 0xFFFFFF;
}

static void fill_av(const struct ep *e, const struct info *r, struct ibv_ah_attr *av, int grh)
{
	memset(av, 0, sizeof(*av));
	av->dlid = r->lid;
	av->port_num = 1;
	av->sl = 3;
	if (grh || e->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		av->is_global = 1;
		av->grh.hop_limit = 64;
		memcpy(av->grh.dgid.raw, r->gid, 16);
	}
}

static int rc_connect(struct ep *e, const struct info *r, uint8_t timeout, uint8_t retry,
		      uint8_t rnr_retry, uint8_t min_rnr)
{
	struct ibv_qp_attr a;
	int uc = e->qp->qp_type == IBV_QPT_UC;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    (uc ? 0 : IBV_ACCESS_REMOTE_ATOMIC);
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = min_rnr;
	fill_av(e, r, &a.ah_attr, 0);
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN |
				       (uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return -2;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.sq_psn = my_psn();
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				       (uc ? 0 : IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
							 IBV_QP_MAX_QP_RD_ATOMIC)))
		return -3;
	return 0;
}

static int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
		usleep(100);
	}
}

static void post_recv(struct ep *e, uint64_t id, size_t off, size_t len)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf + off, .length = (uint32_t)len, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;

	CHK(ibv_post_recv(e->qp, &wr, &bad) == 0);
}

static int post_send(struct ep *e, enum ibv_wr_opcode op, uint64_t id, size_t off, size_t len,
		     uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned flags)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf + off, .length = (uint32_t)len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED | flags, .imm_data = htobe32(imm)},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* ---- device and port ------------------------------------------------------------------ */

/* IBVERBS_PRIVATE_34 (sim/verbs/sv_private.c) */
struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);

static void child_query_ib(int fd, void *arg)
{
	struct ibv_device **l;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	union ibv_gid gid;
	__be16 pkey;
	int n = -1;

	(void)fd;
	(void)arg;
	l = ibv_get_device_list(&n);
	CHK(l && n == 1 && l[1] == NULL);
	CHK(strcmp(ibv_get_device_name(l[0]), "uscm_node1") == 0);
	CHK(l[0]->node_type == IBV_NODE_CA && l[0]->transport_type == IBV_TRANSPORT_IB);
	ctx = ibv_open_device(l[0]);
	CHK(ctx);
	CHK(ibv_query_device(ctx, &da) == 0);
	CHK(da.node_guid == ibv_get_device_guid(l[0]) && da.node_guid != 0);
	/* a ConnectX-6's limits (sv.h) */
	CHK(da.max_qp_wr == 32768 && da.max_sge == 30 && da.max_sge_rd == 30 &&
	    da.max_qp_rd_atom == 16 && da.max_qp_init_rd_atom == 16 &&
	    da.local_ca_ack_delay == 15 && da.phys_port_cnt == 1);
	CHK(da.atomic_cap == IBV_ATOMIC_HCA && da.max_cqe == 4194303 && da.max_cq == 16777216 &&
	    da.max_srq_wr == 32767 && da.max_srq_sge == 31 && da.max_pd == 16777216 &&
	    da.max_mr > 0 && da.max_qp > 0);
	{
		/* what is advertised is honoured: a CQ of 262144 entries (libfabric's
		 * ofi_rxm asks for that) and one of max_cqe; a QP with max_qp_wr WRs
		 * and max_sge SGEs each way; an SRQ at its maxima */
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_cq *big = ibv_create_cq(ctx, 262144, NULL, NULL, 0);
		struct ibv_cq *max = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, 0);

		CHK(pd && big && big->cqe >= 262144 && max && max->cqe >= da.max_cqe);
		CHK(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0) == NULL && errno == EINVAL);
		struct ibv_qp_init_attr qa = {.send_cq = big, .recv_cq = big, .qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = da.max_qp_wr, .max_recv_wr = da.max_qp_wr,
				.max_send_sge = da.max_sge, .max_recv_sge = da.max_sge}};
		struct ibv_qp *qp = ibv_create_qp(pd, &qa);

		CHK(qp && qa.cap.max_send_wr >= (uint32_t)da.max_qp_wr &&
		    qa.cap.max_recv_sge >= (uint32_t)da.max_sge);
		qa.cap.max_send_sge = da.max_sge + 1;
		CHK(ibv_create_qp(pd, &qa) == NULL);
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = da.max_srq_wr,
							.max_sge = da.max_srq_sge}};
		struct ibv_srq *srq = ibv_create_srq(pd, &sa);

		CHK(srq);
		CHK(ibv_destroy_srq(srq) == 0 && ibv_destroy_qp(qp) == 0);
		CHK(ibv_destroy_cq(big) == 0 && ibv_destroy_cq(max) == 0 && ibv_dealloc_pd(pd) == 0);
	}
	CHK(ibv_query_port(ctx, 1, &pa) == 0);
	CHK(pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_INFINIBAND);
	CHK(pa.lid != 0 && pa.sm_lid != 0 && pa.max_mtu == IBV_MTU_4096 &&
	    pa.active_mtu == IBV_MTU_4096);
	CHK(pa.gid_tbl_len > 0 && pa.pkey_tbl_len > 0 && (pa.port_cap_flags & IBV_PORT_CM_SUP));
	CHK(ibv_query_port(ctx, 2, &pa) != 0);
	CHK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	CHK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80);
	CHK(memcmp(gid.raw + 8, &da.node_guid, 8) == 0);
	CHK(ibv_query_gid(ctx, 1, pa.gid_tbl_len, &gid) != 0);
	CHK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && be16toh(pkey) == 0xFFFF);
	CHK(ibv_get_pkey_index(ctx, 1, htobe16(0xFFFF)) == 0);
	struct ibv_gid_entry ge;

	CHK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_IB);
	CHK(ibv_query_gid_ex(ctx, 1, 1, &ge, 0) == ENODATA);
	struct ibv_device_attr_ex dx;

	CHK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.orig_attr.max_qp_wr == 32768);
	CHK(strcmp(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded") == 0);
	CHK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "PORT_ACTIVE") == 0);
	CHK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && ibv_rate_to_mbps(IBV_RATE_25_GBPS) == 25781);
	/* IBVERBS_PRIVATE_34's verbs_open_device (mlx5dv_open_device's core)
	 * opens the sim's device like ibv_open_device; the provider private
	 * data has no provider to go to */
	struct ibv_context *vc = verbs_open_device(l[0], NULL);

	CHK(vc && vc->device == l[0] && ibv_query_port(vc, 1, &pa) == 0 && pa.lid != 0);
	CHK(ibv_close_device(vc) == 0);
	CHK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(l);
}

Test(sim_verbs, device_and_port_ib, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_one("node1", child_query_ib, NULL);
}

static void child_query_roce(int fd, void *arg)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ep e;
	struct ibv_ah_attr av;

	(void)fd;
	(void)arg;
	ep_open(&e, IBV_QPT_UD, 4096, 0);
	CHK(strcmp(ibv_get_device_name(e.ctx->device), "uscm_node2") == 0);
	CHK(ibv_query_port(e.ctx, 1, &pa) == 0);
	CHK(pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_ETHERNET);
	CHK(pa.active_mtu == IBV_MTU_1024 && pa.lid == 0);
	CHK(ibv_query_gid(e.ctx, 1, 0, &gid) == 0);
	CHK(memcmp(gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\x0a\x00\x02", 16) == 0);
	struct ibv_gid_entry ge;

	CHK(ibv_query_gid_ex(e.ctx, 1, 0, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V2);
	/* RoCE addresses are GIDs: an AH without a GRH is refused */
	memset(&av, 0, sizeof(av));
	av.port_num = 1;
	av.dlid = 1;
	CHK(ibv_create_ah(e.pd, &av) == NULL && errno == EINVAL);
	ep_close(&e);
}

Test(sim_verbs, device_and_port_roce, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("roce");
	run_one("node2", child_query_roce, NULL);
}

static void child_no_node(int fd, void *arg)
{
	int n = -1;
	struct ibv_device **l;

	(void)fd;
	(void)arg;
	unsetenv("USCM_SIM_NODE");
	l = ibv_get_device_list(&n);
	CHK(l && n == 0 && l[0] == NULL);
	ibv_free_device_list(l);
}

Test(sim_verbs, no_node_no_device, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_one("node1", child_no_node, NULL);
}

/* Port events: the link going down and up again (uscm-sim link) reaches
 * ibv_get_async_event as PORT_ERR and PORT_ACTIVE. */
static int wait_async(struct ibv_context *ctx, enum ibv_event_type t, int ms)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	while (poll(&p, 1, ms) == 1) {
		if (ibv_get_async_event(ctx, &ev))
			return -1;
		ibv_ack_async_event(&ev);
		if (ev.event_type == t)
			return t == IBV_EVENT_PORT_ERR || t == IBV_EVENT_PORT_ACTIVE ? ev.element.port_num : 0;
	}
	return -1;
}

static void child_port_events(int fd, void *arg)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	char c = 'r';

	(void)arg;
	CHK(l && l[0]);
	ctx = ibv_open_device(l[0]);
	CHK(ctx);
	ibv_free_device_list(l);
	CHK(write(fd, &c, 1) == 1);
	CHK(wait_async(ctx, IBV_EVENT_PORT_ERR, 5000) == 1);
	CHK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_DOWN);
	CHK(write(fd, &c, 1) == 1);
	CHK(wait_async(ctx, IBV_EVENT_PORT_ACTIVE, 10000) == 1);
	CHK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE);
	CHK(ibv_close_device(ctx) == 0);
}

Test(sim_verbs, port_events, .fini = fabric_stop, .timeout = 60)
{
	int sv[2];
	char c;

	fabric_start("ib");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = spawn("node1", child_port_events, sv[1], sv[0], NULL);

	close(sv[1]);
	cr_assert_eq(read(sv[0], &c, 1), 1);
	char *down[] = {g_sim, "link", "--dir", g_dir, "node1", "down", NULL};
	char *up[] = {g_sim, "link", "--dir", g_dir, "node1", "up", NULL};

	cr_assert_eq(run_argv(down, NULL, 0), 0);
	cr_assert_eq(read(sv[0], &c, 1), 1);
	cr_assert_eq(run_argv(up, NULL, 0), 0);
	close(sv[0]);
	cr_assert_eq(reap(pid, 20000), 0);
}

/* ---- resources ------------------------------------------------------------------------------ */

static void child_resources(int fd, void *arg)
{
	struct ep e;
	uint8_t b[64];

	(void)fd;
	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 1);
	/* remote write / atomic without local write is refused, as the spec requires */
	CHK(ibv_reg_mr(e.pd, b, sizeof(b), IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL);
	CHK(ibv_reg_mr(e.pd, b, sizeof(b), IBV_ACCESS_REMOTE_ATOMIC) == NULL && errno == EINVAL);
	struct ibv_mr *m = ibv_reg_mr(e.pd, b, sizeof(b), IBV_ACCESS_REMOTE_READ);

	CHK(m && m->lkey != e.mr->lkey && m->addr == b && m->length == sizeof(b));
	/* what is in use cannot be destroyed */
	CHK(ibv_dealloc_pd(e.pd) == EBUSY);
	CHK(ibv_destroy_comp_channel(e.ch) == EBUSY);
	CHK(ibv_destroy_cq(e.cq) == EBUSY);
	CHK(ibv_dereg_mr(m) == 0);
	ep_close(&e);
}

static void child_cq_events(int fd, void *arg)
{
	struct ep e;
	struct ibv_cq *cq;
	void *cctx;
	struct ibv_wc wc;
	struct pollfd p;
	struct ibv_qp_attr a;

	(void)fd;
	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 1);
	struct ibv_recv_wr rw = {.wr_id = 1}, *bad;

	CHK(ibv_post_recv(e.qp, &rw, &bad) == EINVAL);   /* RESET */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHK(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS) == 0);
	post_recv(&e, 41, 0, 64);
	post_recv(&e, 42, 64, 64);
	CHK(ibv_req_notify_cq(e.cq, 0) == 0);
	p.fd = e.ch->fd;
	p.events = POLLIN;
	CHK(poll(&p, 1, 50) == 0);   /* nothing yet */
	/* to ERR: both receives complete with flush errors, the event fires */
	a.qp_state = IBV_QPS_ERR;
	CHK(ibv_modify_qp(e.qp, &a, IBV_QP_STATE) == 0);
	CHK(poll(&p, 1, 2000) == 1);
	CHK(ibv_get_cq_event(e.ch, &cq, &cctx) == 0 && cq == e.cq && cctx == &e);
	ibv_ack_cq_events(cq, 1);
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 1 && wc.wr_id == 41 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 1 && wc.wr_id == 42 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 0);
	/* not re-armed: a new completion raises no event */
	post_recv(&e, 43, 0, 64);   /* in ERR: flushed at once */
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 1 && wc.wr_id == 43 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHK(poll(&p, 1, 50) == 0);
	ep_close(&e);
}

Test(sim_verbs, cq_channel_events, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_one("node1", child_resources, NULL);
	run_one("node1", child_cq_events, NULL);
}

/* ---- the QP state machine ---------------------------------------------------------------------- */

#define A(x) IBV_QP_##x

struct step {
	enum ibv_qp_state to;
	int req, opt;
};

static void set_all(struct ibv_qp_attr *a, const struct ep *e)
{
	memset(a, 0, sizeof(*a));
	a->port_num = 1;
	a->qkey = 0x11111111;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = 0x123;
	a->rq_psn = 1;
	a->sq_psn = 2;
	a->max_dest_rd_atomic = 1;
	a->max_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->ah_attr.dlid = e->port.lid ? e->port.lid : 1;
	a->ah_attr.port_num = 1;
	a->alt_ah_attr = a->ah_attr;
	a->alt_port_num = 1;
	a->path_mig_state = IBV_MIG_MIGRATED;
}

static enum ibv_qp_state qstate(struct ep *e);

static int try_mod(struct ep *e, enum ibv_qp_state to, int mask)
{
	struct ibv_qp_attr a;

	set_all(&a, e);
	a.qp_state = to;
	a.cur_qp_state = qstate(e);
	return ibv_modify_qp(e->qp, &a, mask | A(STATE));
}

static enum ibv_qp_state qstate(struct ep *e)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHK(ibv_query_qp(e->qp, &a, A(STATE), &ia) == 0);
	return a.qp_state;
}

/* Walks a legal path; at each step first every missing required attribute and
 * every attribute not allowed must fail with EINVAL (state unchanged), then
 * the exact required set succeeds. */
static void walk(struct ep *e, const struct step *s, int n)
{
	static const int all[] = {A(CUR_STATE), A(EN_SQD_ASYNC_NOTIFY), A(ACCESS_FLAGS),
				  A(PKEY_INDEX), A(PORT), A(QKEY), A(AV), A(PATH_MTU), A(TIMEOUT),
				  A(RETRY_CNT), A(RNR_RETRY), A(RQ_PSN), A(MAX_QP_RD_ATOMIC),
				  A(ALT_PATH), A(MIN_RNR_TIMER), A(SQ_PSN), A(MAX_DEST_RD_ATOMIC),
				  A(PATH_MIG_STATE), A(DEST_QPN)};
	int i;
	size_t k;

	for (i = 0; i < n; i++) {
		enum ibv_qp_state cur = qstate(e);

		for (k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
			int bit = all[k];

			if (s[i].req & bit) {
				CHK(try_mod(e, s[i].to, s[i].req & ~bit) == EINVAL);
				CHK(qstate(e) == cur);
			} else if (!(s[i].opt & bit)) {
				CHK(try_mod(e, s[i].to, s[i].req | bit) == EINVAL);
				CHK(qstate(e) == cur);
			}
		}
		if (s[i].opt & A(CUR_STATE)) {
			struct ibv_qp_attr a;

			set_all(&a, e);
			a.qp_state = s[i].to;
			a.cur_qp_state = cur == IBV_QPS_RTS ? IBV_QPS_RTR : IBV_QPS_RTS;   /* wrong */
			CHK(ibv_modify_qp(e->qp, &a, A(STATE) | A(CUR_STATE) | s[i].req) == EINVAL);
		}
		CHK(try_mod(e, s[i].to, s[i].req | s[i].opt) == 0 || try_mod(e, s[i].to, s[i].req) == 0);
		CHK(qstate(e) == s[i].to);
		CHK(e->qp->state == s[i].to);
	}
}

static void check_illegal(struct ep *e)
{
	/* from RESET only INIT (and RESET, ERR) */
	CHK(try_mod(e, IBV_QPS_RTR, A(AV) | A(PATH_MTU) | A(DEST_QPN) | A(RQ_PSN) |
				    A(MAX_DEST_RD_ATOMIC) | A(MIN_RNR_TIMER)) == EINVAL);
	CHK(try_mod(e, IBV_QPS_RTS, A(SQ_PSN)) == EINVAL);
	CHK(try_mod(e, IBV_QPS_SQD, 0) == EINVAL);
	CHK(try_mod(e, IBV_QPS_SQE, 0) == EINVAL);
	CHK(qstate(e) == IBV_QPS_RESET);
}

static void child_qp_states(int fd, void *arg)
{
	const int rc_rtr = A(AV) | A(PATH_MTU) | A(DEST_QPN) | A(RQ_PSN) | A(MAX_DEST_RD_ATOMIC) |
			   A(MIN_RNR_TIMER);
	const int rc_rts = A(TIMEOUT) | A(RETRY_CNT) | A(RNR_RETRY) | A(SQ_PSN) | A(MAX_QP_RD_ATOMIC);
	const struct step rc[] = {
		{IBV_QPS_INIT, A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS), 0},
		{IBV_QPS_INIT, 0, A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS)},
		{IBV_QPS_RTR, rc_rtr, A(ALT_PATH) | A(ACCESS_FLAGS) | A(PKEY_INDEX)},
		{IBV_QPS_RTS, rc_rts, A(CUR_STATE) | A(ALT_PATH) | A(ACCESS_FLAGS) | A(MIN_RNR_TIMER) |
					  A(PATH_MIG_STATE)},
		{IBV_QPS_RTS, 0, A(CUR_STATE) | A(ACCESS_FLAGS) | A(ALT_PATH) | A(PATH_MIG_STATE) |
				     A(MIN_RNR_TIMER)},
		{IBV_QPS_SQD, 0, A(EN_SQD_ASYNC_NOTIFY)},
		{IBV_QPS_SQD, 0, A(PORT) | A(AV) | A(TIMEOUT) | A(RETRY_CNT) | A(RNR_RETRY) |
				     A(MAX_QP_RD_ATOMIC) | A(MAX_DEST_RD_ATOMIC) | A(ALT_PATH) |
				     A(ACCESS_FLAGS) | A(PKEY_INDEX) | A(MIN_RNR_TIMER) |
				     A(PATH_MIG_STATE)},
		{IBV_QPS_RTS, 0, A(CUR_STATE) | A(ACCESS_FLAGS) | A(ALT_PATH) | A(PATH_MIG_STATE) |
				     A(MIN_RNR_TIMER)},
		{IBV_QPS_ERR, 0, 0},
		{IBV_QPS_RESET, 0, 0},
	};
	const struct step uc[] = {
		{IBV_QPS_INIT, A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS), 0},
		{IBV_QPS_RTR, A(AV) | A(PATH_MTU) | A(DEST_QPN) | A(RQ_PSN),
		 A(ALT_PATH) | A(ACCESS_FLAGS) | A(PKEY_INDEX)},
		{IBV_QPS_RTS, A(SQ_PSN), A(CUR_STATE) | A(ALT_PATH) | A(ACCESS_FLAGS) | A(PATH_MIG_STATE)},
		{IBV_QPS_SQD, 0, A(EN_SQD_ASYNC_NOTIFY)},
		{IBV_QPS_RTS, 0, A(CUR_STATE) | A(ACCESS_FLAGS) | A(ALT_PATH) | A(PATH_MIG_STATE)},
		{IBV_QPS_RESET, 0, 0},
	};
	const struct step ud[] = {
		{IBV_QPS_INIT, A(PKEY_INDEX) | A(PORT) | A(QKEY), 0},
		{IBV_QPS_INIT, 0, A(PKEY_INDEX) | A(PORT) | A(QKEY)},
		{IBV_QPS_RTR, 0, A(PKEY_INDEX) | A(QKEY)},
		{IBV_QPS_RTS, A(SQ_PSN), A(CUR_STATE) | A(QKEY)},
		{IBV_QPS_SQD, 0, A(EN_SQD_ASYNC_NOTIFY)},
		{IBV_QPS_SQD, 0, A(PKEY_INDEX) | A(QKEY)},
		{IBV_QPS_RTS, 0, A(CUR_STATE) | A(QKEY)},
		{IBV_QPS_ERR, 0, 0},
		{IBV_QPS_RESET, 0, 0},
	};
	struct ep e;

	(void)fd;
	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 0);
	check_illegal(&e);
	walk(&e, rc, (int)(sizeof(rc) / sizeof(rc[0])));
	/* more illegal steps: INIT->RTS, RTR->INIT, RTS->RTR, ERR->INIT, RC never SQE */
	CHK(try_mod(&e, IBV_QPS_INIT, A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS)) == 0);
	CHK(try_mod(&e, IBV_QPS_RTS, A(TIMEOUT) | A(RETRY_CNT) | A(RNR_RETRY) | A(SQ_PSN) |
					 A(MAX_QP_RD_ATOMIC)) == EINVAL);
	/* bad values with the right mask */
	{
		struct ibv_qp_attr a;
		const int m = A(STATE) | A(AV) | A(PATH_MTU) | A(DEST_QPN) | A(RQ_PSN) |
			      A(MAX_DEST_RD_ATOMIC) | A(MIN_RNR_TIMER);

		set_all(&a, &e);
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = (enum ibv_mtu)6;
		CHK(ibv_modify_qp(e.qp, &a, m) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_RTR;
		a.min_rnr_timer = 32;
		CHK(ibv_modify_qp(e.qp, &a, m) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_RTR;
		a.max_dest_rd_atomic = 17;
		CHK(ibv_modify_qp(e.qp, &a, m) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 2;
		CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(PORT)) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 16;
		CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(PKEY_INDEX)) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_RTR;
		CHK(ibv_modify_qp(e.qp, &a, m) == 0);
		CHK(try_mod(&e, IBV_QPS_INIT, 0) == EINVAL);
		set_all(&a, &e);
		a.qp_state = IBV_QPS_RTS;
		a.retry_cnt = 8;
		CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(TIMEOUT) | A(RETRY_CNT) | A(RNR_RETRY) |
					      A(SQ_PSN) | A(MAX_QP_RD_ATOMIC)) == EINVAL);
		a.retry_cnt = 7;
		a.timeout = 32;
		CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(TIMEOUT) | A(RETRY_CNT) | A(RNR_RETRY) |
					      A(SQ_PSN) | A(MAX_QP_RD_ATOMIC)) == EINVAL);
		CHK(qstate(&e) == IBV_QPS_RTR);
	}
	CHK(try_mod(&e, IBV_QPS_ERR, 0) == 0);
	CHK(try_mod(&e, IBV_QPS_INIT, A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS)) == EINVAL);
	CHK(try_mod(&e, IBV_QPS_RTS, 0) == EINVAL);
	CHK(try_mod(&e, IBV_QPS_RESET, 0) == 0);
	CHK(try_mod(&e, IBV_QPS_RESET, A(PORT)) == EINVAL);   /* nothing is allowed to RESET */
	ep_close(&e);

	ep_open(&e, IBV_QPT_UC, 4096, 0);
	check_illegal(&e);
	walk(&e, uc, (int)(sizeof(uc) / sizeof(uc[0])));
	ep_close(&e);

	ep_open(&e, IBV_QPT_UD, 4096, 0);
	check_illegal(&e);
	walk(&e, ud, (int)(sizeof(ud) / sizeof(ud[0])));
	ep_close(&e);
}

Test(sim_verbs, qp_state_machine, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_one("node1", child_qp_states, NULL);
}

/* ---- UD -------------------------------------------------------------------------------------- */

static void ud_up(struct ep *e, uint32_t qkey)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE) | A(PKEY_INDEX) | A(PORT) | A(QKEY)) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE)) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE) | A(SQ_PSN)) == 0);
}

static void ud_sender(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_ah_attr av;
	struct ibv_ah *ah, *ahg;
	struct ibv_wc wc;
	int i;

	(void)arg;
	ep_open(&e, IBV_QPT_UD, 8192, 0);
	ud_up(&e, 0x1234);
	xchg(fd, &e, &r);
	fill_av(&e, &r, &av, 0);
	ah = ibv_create_ah(e.pd, &av);
	CHK(ah);
	fill_av(&e, &r, &av, 1);
	ahg = ibv_create_ah(e.pd, &av);
	CHK(ahg);
	sync_fd(fd);   /* the receiver posted its buffers */
	for (i = 0; i < 4; i++) {
		struct ibv_sge s = {.addr = (uintptr_t)e.buf, .length = 100 + i, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
					 .opcode = i == 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xabcd)},
				   *bad;

		memset(e.buf, 'a' + i, 100 + i);
		wr.wr.ud.ah = i == 2 ? ahg : ah;
		wr.wr.ud.remote_qpn = r.qpn;
		/* 0: right Q_Key; 1: right; 2: with GRH; 3: wrong Q_Key (dropped) */
		wr.wr.ud.remote_qkey = i == 3 ? 0x9999 : 0x1234;
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i);
		CHK(wc.opcode == IBV_WC_SEND);
	}
	/* a message larger than the MTU is refused */
	{
		struct ibv_sge s = {.addr = (uintptr_t)e.buf, .length = 4097, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = r.qpn;
		wr.wr.ud.remote_qkey = 0x1234;
		CHK(ibv_post_send(e.qp, &wr, &bad) == EINVAL && bad == &wr);
	}
	sync_fd(fd);
	/* the receiver replies to the address in its completion (create_ah_from_wc) */
	post_recv(&e, 77, 0, 4096);
	sync_fd(fd);
	CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77);
	CHK(wc.byte_len == 40 + 5 && memcmp(e.buf + 40, "reply", 5) == 0);
	CHK(ibv_destroy_ah(ah) == 0 && ibv_destroy_ah(ahg) == 0);
	ep_close(&e);
}

static void ud_receiver(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	int i;

	(void)arg;
	ep_open(&e, IBV_QPT_UD, 8 * 4096, 0);
	ud_up(&e, 0x1234);
	xchg(fd, &e, &r);
	for (i = 0; i < 8; i++)
		post_recv(&e, 100 + (uint64_t)i, (size_t)i * 4096, 4096);
	sync_fd(fd);
	for (i = 0; i < 3; i++) {
		uint8_t *b = e.buf + (size_t)i * 4096;

		CHK(poll_wc(e.cq, &wc, 2000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + (uint64_t)i);
		CHK(wc.opcode == IBV_WC_RECV && wc.byte_len == 40 + 100 + (uint32_t)i);
		CHK(wc.src_qp == r.qpn && wc.slid == r.lid && wc.sl == 3);
		CHK(b[40] == 'a' + i && b[40 + 99 + i] == 'a' + i);
		CHK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == (i == 1));
		if (i == 1)
			CHK(be32toh(wc.imm_data) == 0xabcd);
		/* GRH only when the sender used one */
		CHK(!!(wc.wc_flags & IBV_WC_GRH) == (i == 2));
		if (i == 2) {
			struct ibv_grh *g = (struct ibv_grh *)b;

			CHK(memcmp(g->sgid.raw, r.gid, 16) == 0 && g->next_hdr == 0x1B);
		}
	}
	sync_fd(fd);
	usleep(50000);
	/* the wrong Q_Key was dropped, and counted */
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 0);
	{
		struct ibv_port_attr pa;

		CHK(ibv_query_port(e.ctx, 1, &pa) == 0 && pa.qkey_viol_cntr == 1);
	}
	/* reply to the source of a completion */
	{
		struct ibv_wc src = wc;
		struct ibv_ah *ah;

		memset(&src, 0, sizeof(src));
		src.slid = r.lid;
		src.src_qp = r.qpn;
		ah = ibv_create_ah_from_wc(e.pd, &src, NULL, 1);
		CHK(ah);
		sync_fd(fd);
		memcpy(e.buf, "reply", 5);
		struct ibv_sge s = {.addr = (uintptr_t)e.buf, .length = 5, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = r.qpn;
		wr.wr.ud.remote_qkey = 0x80000000;   /* high bit: use this QP's own Q_Key */
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS);
		CHK(ibv_destroy_ah(ah) == 0);
	}
	/* destroying a QP with posted receives is fine */
	ep_close(&e);
}

Test(sim_verbs, ud_between_processes, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_pair(ud_sender, ud_receiver, NULL, 20000);
}

/* A destroyed QP's socket serves the next QP of the context,
 * under the QPN one SIMF_MAX_QPN higher on the same port: a datagram for
 * the old QPN — sent while the socket waits, or after it was handed on —
 * must never complete on the new QP. */
static struct ibv_qp *ud_qp(struct ep *e)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	CHK(qp);
	return qp;
}

static void ud_send_to(struct ep *e, struct ibv_ah *ah, uint32_t qpn, char fill, uint32_t len)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	struct ibv_wc wc;

	memset(e->buf, fill, len);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = 0x1234;
	CHK(ibv_post_send(e->qp, &wr, &bad) == 0);
	CHK(poll_wc(e->cq, &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS && wc.qp_num == e->qp->qp_num);
}

/* Exactly one completion, qp's receive of len bytes of fill, nothing after. */
static void ud_only_gets(struct ep *e, struct ibv_qp *qp, char fill, uint32_t len)
{
	struct ibv_wc wc;

	CHK(poll_wc(e->cq, &wc, 2000) == 1);
	CHK(wc.qp_num == qp->qp_num && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	CHK(wc.byte_len == 40 + len && e->buf[4096 + 40] == fill && e->buf[4096 + 40 + len - 1] == fill);
	usleep(50000);
	CHK(ibv_poll_cq(e->cq, 1, &wc) == 0);
}

static void ud_recv_one(struct ep *e, struct ibv_qp *qp)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf + 4096, .length = 4096, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &s, .num_sge = 1}, *bad;

	CHK(ibv_post_recv(qp, &wr, &bad) == 0);
}

static void child_socket_reuse(int fd, void *arg)
{
	struct ep e, tmp;
	struct info me;
	struct ibv_ah_attr av;
	struct ibv_ah *ah;
	struct ibv_qp *a, *b, *c;
	uint32_t qa, qb;

	(void)fd;
	(void)arg;
	ep_open(&e, IBV_QPT_UD, 8192, 0);   /* e.qp: the sender */
	ud_up(&e, 0x1234);
	memset(&me, 0, sizeof(me));
	me.lid = e.port.lid;
	fill_av(&e, &me, &av, 0);
	ah = ibv_create_ah(e.pd, &av);
	CHK(ah);

	a = ud_qp(&e);
	qa = a->qp_num;
	CHK(qa >= 2 && qa < SIMF_MAX_QPN);
	CHK(ibv_destroy_qp(a) == 0);
	b = ud_qp(&e);
	qb = b->qp_num;
	CHK(qb == qa + SIMF_MAX_QPN);   /* a's socket, the next QPN of its port */
	tmp.qp = b;
	tmp.ctx = e.ctx;
	ud_up(&tmp, 0x1234);
	ud_recv_one(&e, b);
	ud_send_to(&e, ah, qa, 'o', 100);   /* for the destroyed QP: same port */
	ud_send_to(&e, ah, qb, 'n', 200);
	ud_only_gets(&e, b, 'n', 200);

	/* the socket idle: datagrams for both earlier QPNs wait in it, or are
	 * drained, and the next QP still gets only its own */
	CHK(ibv_destroy_qp(b) == 0);
	ud_send_to(&e, ah, qa, 'x', 300);
	ud_send_to(&e, ah, qb, 'y', 400);
	usleep(20000);
	c = ud_qp(&e);
	CHK(c->qp_num == qb + SIMF_MAX_QPN);
	tmp.qp = c;
	ud_up(&tmp, 0x1234);
	ud_recv_one(&e, c);
	ud_send_to(&e, ah, qb, 'z', 500);
	ud_send_to(&e, ah, c->qp_num, 'c', 600);
	ud_only_gets(&e, c, 'c', 600);
	CHK(ibv_destroy_qp(c) == 0);
	CHK(ibv_destroy_ah(ah) == 0);
	ep_close(&e);
}

Test(sim_verbs, socket_reuse_drops_stale, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_one("node1", child_socket_reuse, NULL);
}

/* Multicast (RoCE: no SA join needed): every attached QP of every node
 * receives, a detached one does not. */
static const uint8_t mgid_v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3};

static void mc_member(int fd, void *arg)
{
	struct ep e, e2;
	struct ibv_wc wc;
	union ibv_gid g;
	int sender = *(int *)arg == 1 && !strcmp(getenv("USCM_SIM_NODE"), "node1");

	memcpy(g.raw, mgid_v4, 16);
	ep_open(&e, IBV_QPT_UD, 4 * 4096, 0);
	ud_up(&e, 0x4242);
	ep_open(&e2, IBV_QPT_UD, 4096, 0);
	ud_up(&e2, 0x4242);
	CHK(ibv_attach_mcast(e.qp, &g, 0) == 0);
	CHK(ibv_attach_mcast(e2.qp, &g, 0) == 0);
	CHK(ibv_detach_mcast(e2.qp, &g, 0) == 0);
	CHK(ibv_detach_mcast(e2.qp, &g, 0) == EINVAL);
	post_recv(&e, 1, 0, 4096);
	post_recv(&e2, 2, 0, 4096);
	sync_fd(fd);
	if (sender) {
		struct ibv_ah_attr av;
		struct ibv_ah *ah;

		memset(&av, 0, sizeof(av));
		av.is_global = 1;
		av.port_num = 1;
		av.grh.hop_limit = 1;
		memcpy(av.grh.dgid.raw, mgid_v4, 16);
		ah = ibv_create_ah(e.pd, &av);
		CHK(ah);
		memcpy(e.buf + 8192, "to the group", 12);
		struct ibv_sge s = {.addr = (uintptr_t)e.buf + 8192, .length = 12, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 3, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 0xFFFFFF;
		wr.wr.ud.remote_qkey = 0x4242;
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS);
		/* loopback: the sender's own attached QP receives it too */
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
		CHK(ibv_destroy_ah(ah) == 0);
	} else {
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
	}
	CHK(wc.byte_len == 40 + 12 && memcmp(e.buf + 40, "to the group", 12) == 0);
	CHK(wc.wc_flags & IBV_WC_GRH);
	CHK(e.buf[20] == 0x45 && e.buf[20 + 16] == 239);   /* IPv4 header, group destination */
	sync_fd(fd);
	CHK(ibv_poll_cq(e2.cq, 1, &wc) == 0);   /* the detached QP got nothing */
	ep_close(&e2);
	ep_close(&e);
}

Test(sim_verbs, multicast_roce, .fini = fabric_stop, .timeout = 60)
{
	int one = 1;

	fabric_start("roce");
	run_pair(mc_member, mc_member, &one, 20000);
}

/* P_Keys: node1's QP uses 0x8001 (full member); node2 has 0x0001 (limited)
 * and 0x8002. Full-limited of the same key passes, another key is dropped. */
static void ud_up_pkey(struct ep *e, uint16_t pkey_index)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x77;
	a.pkey_index = pkey_index;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE) | A(PKEY_INDEX) | A(PORT) | A(QKEY)) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE)) == 0);
	a.qp_state = IBV_QPS_RTS;
	CHK(ibv_modify_qp(e->qp, &a, A(STATE) | A(SQ_PSN)) == 0);
}

static void pkey_a(int fd, void *arg)
{
	struct ep e;
	uint32_t qpn[2];
	uint16_t lid;
	struct ibv_ah_attr av;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	__be16 pk;
	int i;

	uint16_t key = arg ? *(const uint16_t *)arg : 0x8001;

	ep_open(&e, IBV_QPT_UD, 4096, 0);
	CHK(ibv_query_pkey(e.ctx, 1, 1, &pk) == 0 && be16toh(pk) == key);
	CHK(ibv_get_pkey_index(e.ctx, 1, htobe16(key)) == 1);
	ud_up_pkey(&e, 1);
	CHK(read(fd, qpn, sizeof(qpn)) == sizeof(qpn) && read(fd, &lid, 2) == 2);
	memset(&av, 0, sizeof(av));
	av.dlid = lid;
	av.port_num = 1;
	ah = ibv_create_ah(e.pd, &av);
	CHK(ah);
	for (i = 0; i < 2; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn[i];
		wr.wr.ud.remote_qkey = 0x77;
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS);
	}
	sync_fd(fd);
	CHK(ibv_destroy_ah(ah) == 0);
	ep_close(&e);
}

static void pkey_b(int fd, void *arg)
{
	struct ep e1, e2;
	uint32_t qpn[2];
	struct ibv_wc wc;

	(void)arg;
	ep_open(&e1, IBV_QPT_UD, 4096, 0);
	ep_open(&e2, IBV_QPT_UD, 4096, 0);
	ud_up_pkey(&e1, 1);
	ud_up_pkey(&e2, 2);
	post_recv(&e1, 1, 0, 4096);
	post_recv(&e2, 2, 0, 4096);
	qpn[0] = e1.qp->qp_num;
	qpn[1] = e2.qp->qp_num;
	CHK(write(fd, qpn, sizeof(qpn)) == sizeof(qpn) && write(fd, &e1.port.lid, 2) == 2);
	CHK(poll_wc(e1.cq, &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS && wc.pkey_index == 1);
	sync_fd(fd);
	usleep(50000);
	CHK(ibv_poll_cq(e2.cq, 1, &wc) == 0);   /* P_Key mismatch: dropped */
	{
		struct ibv_port_attr pa;

		CHK(ibv_query_port(e2.ctx, 1, &pa) == 0 && pa.bad_pkey_cntr == 1);
	}
	ep_close(&e2);
	ep_close(&e1);
}

/* An IB fabric whose node1 holds n1 at P_Key index 1 and node2 n2a, n2b
 * at indexes 1 and 2; pkey_a on node1 sends to pkey_b on node2 with *key
 * (NULL: 0x8001). The fabric, for the counters. */
static struct simf *pkey_pair(uint16_t n1, uint16_t n2a, uint16_t n2b, const uint16_t *key)
{
	struct simf *f;

	fabric_start("ib");
	f = simf_attach_node(g_dir, -1);
	cr_assert_not_null(f);
	simf_lock(f);
	f->st->nodes[1].pkeys[1] = n1;
	f->st->nodes[2].pkeys[1] = n2a;
	f->st->nodes[2].pkeys[2] = n2b;
	simf_unlock(f);
	run_pair(pkey_a, pkey_b, (void *)key, 20000);
	return f;
}

Test(sim_verbs, ud_pkey_check, .fini = fabric_stop, .timeout = 60)
{
	struct simf *f = pkey_pair(0x8001, 0x0001, 0x8002, NULL);

	/* the port counted the drop too (PortInfo P_KeyViolations) */
	cr_expect_eq(simf_pkey_violations(f, 2), 1);
	cr_expect_eq(simf_pkey_violations(f, 1), 0);
	simf_detach(f);
}

/* Two limited members of a partition do not talk (IBTA 10.9.1.2): node1
 * sends with 0x0003 (limited); node2 holds 0x8003 at index 1 (full: its QP
 * receives) and 0x0003 at index 2 (limited: its QP's packet is dropped and
 * counted), as a port OpenSM made a member of both kinds. */
Test(sim_verbs, ud_pkey_limited_pair, .fini = fabric_stop, .timeout = 60)
{
	static const uint16_t key = 0x0003;
	struct simf *f = pkey_pair(0x0003, 0x8003, 0x0003, &key);

	cr_expect_eq(simf_pkey_violations(f, 2), 1);
	simf_detach(f);
}

/* The SM rewriting a port's P_Key table (OpenSM's partitions) reaches
 * ibv_get_async_event as PKEY_CHANGE, and ibv_query_pkey reads the new key. */
static void child_pkey_change(int fd, void *arg)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	__be16 k;
	char c = 'r';

	(void)arg;
	CHK(l && l[0]);
	ctx = ibv_open_device(l[0]);
	CHK(ctx);
	ibv_free_device_list(l);
	CHK(write(fd, &c, 1) == 1);
	CHK(wait_async(ctx, IBV_EVENT_PKEY_CHANGE, 5000) == 0);
	CHK(ibv_query_pkey(ctx, 1, 3, &k) == 0 && be16toh(k) == 0x8005);
	CHK(ibv_close_device(ctx) == 0);
}

Test(sim_verbs, pkey_change_event, .fini = fabric_stop, .timeout = 60)
{
	struct simf *f;
	int sv[2];
	char c;

	fabric_start("ib");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = spawn("node1", child_pkey_change, sv[1], sv[0], NULL);

	close(sv[1]);
	cr_assert_eq(read(sv[0], &c, 1), 1);
	f = simf_attach_node(g_dir, -1);
	cr_assert_not_null(f);
	simf_lock(f);
	f->st->nodes[1].pkeys[3] = 0x8005;
	simf_unlock(f);
	simf_detach(f);
	close(sv[0]);
	cr_assert_eq(reap(pid, 20000), 0);
}

/* ---- RC ---------------------------------------------------------------------------------------- */

#define BIG (200 * 1024)

static void rc_a(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4 * BIG, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 14, 7, 7, 12) == 0);
	sync_fd(fd);   /* both sides connected, B posted its receives */

	/* SEND, multi-packet, with immediate */
	for (size_t i = 0; i < BIG; i++)
		e.buf[i] = (uint8_t)(i * 7);
	CHK(post_send(&e, IBV_WR_SEND_WITH_IMM, 1, 0, BIG, 0, 0, 0x5151, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	    wc.opcode == IBV_WC_SEND);
	/* inline SEND */
	memcpy(e.buf, "inline!", 7);
	CHK(post_send(&e, IBV_WR_SEND, 2, 0, 7, 0, 0, 0, IBV_SEND_INLINE) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	/* RDMA WRITE into B's buffer at BIG, then WRITE with immediate */
	for (size_t i = 0; i < BIG; i++)
		e.buf[BIG + i] = (uint8_t)(i * 13 + 1);
	CHK(post_send(&e, IBV_WR_RDMA_WRITE, 3, BIG, BIG, r.addr + BIG, r.rkey, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
	CHK(post_send(&e, IBV_WR_RDMA_WRITE_WITH_IMM, 4, BIG, 3000, r.addr + 2 * BIG, r.rkey, 0x7777, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4);
	sync_fd(fd);   /* B checked the data and filled its buffer at 3*BIG */
	/* RDMA READ of B's 3*BIG area into ours at 2*BIG */
	memset(e.buf + 2 * BIG, 0, BIG);
	CHK(post_send(&e, IBV_WR_RDMA_READ, 5, 2 * BIG, BIG, r.addr + 3 * BIG, r.rkey, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
	CHK(wc.byte_len == BIG);
	for (size_t i = 0; i < BIG; i++)
		CHK(e.buf[2 * BIG + i] == (uint8_t)(i * 3 + 5));
	/* atomics on B's first 8 bytes (B set them to 100) */
	{
		struct ibv_sge s = {.addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 6, .sg_list = &s, .num_sge = 1,
					 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint64_t v;

		wr.wr.atomic.remote_addr = r.addr + 3 * BIG - 8;
		wr.wr.atomic.rkey = r.rkey;
		wr.wr.atomic.compare_add = 5;
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.opcode == IBV_WC_FETCH_ADD);
		memcpy(&v, e.buf, 8);
		CHK(v == 100);
		wr.wr_id = 7;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 105;
		wr.wr.atomic.swap = 999;
		CHK(ibv_post_send(e.qp, &wr, &bad) == 0);
		CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.opcode == IBV_WC_COMP_SWAP);
		memcpy(&v, e.buf, 8);
		CHK(v == 105);
	}
	sync_fd(fd);   /* B checks 999 */
	/* a bad rkey: remote access error, QP in error, the rest flushed */
	CHK(post_send(&e, IBV_WR_RDMA_WRITE, 8, 0, 16, r.addr, r.rkey ^ 0x5500, 0, 0) == 0);
	CHK(post_send(&e, IBV_WR_SEND, 9, 0, 16, 0, 0, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 8 && wc.status == IBV_WC_REM_ACCESS_ERR);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 9 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHK(qstate(&e) == IBV_QPS_ERR);
	sync_fd(fd);
	ep_close(&e);
}

static void rc_b(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4 * BIG, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 14, 7, 7, 12) == 0);
	post_recv(&e, 10, 0, BIG);
	post_recv(&e, 11, 3 * BIG, 64);
	post_recv(&e, 12, 0, 0);   /* for the write with immediate */
	sync_fd(fd);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 10);
	CHK(wc.opcode == IBV_WC_RECV && wc.byte_len == BIG && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	    be32toh(wc.imm_data) == 0x5151 && wc.src_qp == r.qpn);
	for (size_t i = 0; i < BIG; i++)
		CHK(e.buf[i] == (uint8_t)(i * 7));
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 11 &&
	    wc.byte_len == 7 && memcmp(e.buf + 3 * BIG, "inline!", 7) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 12);
	CHK(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && be32toh(wc.imm_data) == 0x7777 &&
	    wc.byte_len == 3000);
	for (size_t i = 0; i < BIG; i++)
		CHK(e.buf[BIG + i] == (uint8_t)(i * 13 + 1));
	for (size_t i = 0; i < 3000; i++)
		CHK(e.buf[2 * BIG + i] == (uint8_t)(i * 13 + 1));
	for (size_t i = 0; i < BIG; i++)
		e.buf[3 * BIG + i] = (uint8_t)(i * 3 + 5);
	uint64_t v = 100;

	memcpy(e.buf + 3 * BIG - 8, &v, 8);
	sync_fd(fd);
	sync_fd(fd);
	memcpy(&v, e.buf + 3 * BIG - 8, 8);
	CHK(v == 999);
	sync_fd(fd);
	/* the access violation put this side in error too (with an async event) */
	CHK(qstate(&e) == IBV_QPS_ERR);
	ep_close(&e);
}

Test(sim_verbs, rc_send_write_read_atomic, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_pair(rc_a, rc_b, NULL, 30000);
}

Test(sim_verbs, rc_on_roce, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("roce");
	run_pair(rc_a, rc_b, NULL, 30000);
}

/* A responder on an SRQ, left in RTR: COMM_EST on the first packet, the SRQ
 * limit event, a solicited-only CQ notification that ignores the unsolicited
 * completion, LAST_WQE_REACHED when the QP enters ERR. */
static void ev_a(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 14, 7, 7, 12) == 0);
	sync_fd(fd);
	CHK(post_send(&e, IBV_WR_SEND, 1, 0, 10, 0, 0, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS);
	sync_fd(fd);
	sync_fd(fd);
	CHK(post_send(&e, IBV_WR_SEND, 2, 0, 20, 0, 0, 0, IBV_SEND_SOLICITED) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS);
	sync_fd(fd);
	ep_close(&e);
}

static void ev_b(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc[4];
	struct ibv_srq *srq;
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq_attr sa;
	struct ibv_qp_attr a;
	struct ibv_cq *cq;
	void *cctx;
	int i;

	(void)arg;
	memset(&e, 0, sizeof(e));
	{
		struct ibv_device **l = ibv_get_device_list(NULL);

		CHK(l && l[0]);
		e.ctx = ibv_open_device(l[0]);
		CHK(e.ctx);
		ibv_free_device_list(l);
	}
	CHK(ibv_query_port(e.ctx, 1, &e.port) == 0);
	e.pd = ibv_alloc_pd(e.ctx);
	e.buf = calloc(1, 4096);
	e.mr = ibv_reg_mr(e.pd, e.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	e.ch = ibv_create_comp_channel(e.ctx);
	e.cq = ibv_create_cq(e.ctx, 16, &e, e.ch, 0);
	CHK(e.pd && e.mr && e.ch && e.cq);
	srq = ibv_create_srq(e.pd, &si);
	CHK(srq);
	struct ibv_qp_init_attr ia = {.send_cq = e.cq, .recv_cq = e.cq, .srq = srq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};

	e.qp = ibv_create_qp(e.pd, &ia);
	CHK(e.qp);
	for (i = 0; i < 4; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)e.buf + (size_t)i * 64, .length = 64, .lkey = e.mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 50 + (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad;

		CHK(ibv_post_srq_recv(srq, &wr, &bad) == 0);
	}
	sa.srq_limit = 3;
	CHK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0);
	CHK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 16 && sa.srq_limit == 3);
	CHK(ibv_destroy_srq(srq) == EBUSY);
	xchg(fd, &e, &r);
	/* INIT and RTR only: the responder works in RTR */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(PKEY_INDEX) | A(PORT) | A(ACCESS_FLAGS)) == 0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = r.qpn;
	a.rq_psn = r.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	fill_av(&e, &r, &a.ah_attr, 0);
	CHK(ibv_modify_qp(e.qp, &a, A(STATE) | A(AV) | A(PATH_MTU) | A(DEST_QPN) | A(RQ_PSN) |
				      A(MAX_DEST_RD_ATOMIC) | A(MIN_RNR_TIMER)) == 0);
	CHK(ibv_req_notify_cq(e.cq, 1) == 0);   /* solicited only */
	sync_fd(fd);
	CHK(wait_async(e.ctx, IBV_EVENT_COMM_EST, 5000) == 0);
	sync_fd(fd);   /* the unsolicited message is in; no CQ event for it */
	{
		struct pollfd p = {.fd = e.ch->fd, .events = POLLIN};

		CHK(poll(&p, 1, 100) == 0);
	}
	sync_fd(fd);   /* now the solicited one */
	CHK(ibv_get_cq_event(e.ch, &cq, &cctx) == 0 && cq == e.cq);   /* the solicited one */
	ibv_ack_cq_events(cq, 1);
	CHK(ibv_poll_cq(e.cq, 4, wc) == 2 && wc[0].wr_id == 50 && wc[1].wr_id == 51);
	CHK(wc[0].byte_len == 10 && wc[1].byte_len == 20 && wc[0].status == IBV_WC_SUCCESS);
	CHK(wait_async(e.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, 1000) == 0);
	CHK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 0);   /* disarmed */
	sync_fd(fd);
	a.qp_state = IBV_QPS_ERR;
	CHK(ibv_modify_qp(e.qp, &a, A(STATE)) == 0);
	CHK(wait_async(e.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, 1000) == 0);
	CHK(ibv_destroy_qp(e.qp) == 0);
	CHK(ibv_destroy_srq(srq) == 0);
	CHK(ibv_destroy_cq(e.cq) == 0);
	CHK(ibv_destroy_comp_channel(e.ch) == 0);
	CHK(ibv_dereg_mr(e.mr) == 0);
	CHK(ibv_dealloc_pd(e.pd) == 0);
	CHK(ibv_close_device(e.ctx) == 0);
}

Test(sim_verbs, rc_srq_and_events, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_pair(ev_a, ev_b, NULL, 20000);
}

/* Under 10% loss of RC packets every message still arrives, once, in order. */
#define NMSG 200
#define LOSS_R (200 * 4096)   /* B's area for READ / WRITE */

static void loss_a(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	int i, done = 0;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 64 * 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 12 /* ~17 ms: a loaded CI machine stalls a peer for ms */, 7, 7, 1) == 0);
	sync_fd(fd);
	for (i = 0; i < NMSG; i++) {
		size_t len = 4 + (size_t)(i * 997) % 3000;

		memcpy(e.buf + (size_t)(i % 32) * 4096, &i, 4);
		memset(e.buf + (size_t)(i % 32) * 4096 + 4, (uint8_t)i, len - 4);
		CHK(post_send(&e, IBV_WR_SEND, (uint64_t)i, (size_t)(i % 32) * 4096, len, 0, 0, 0, 0) == 0);
		if (i >= 31 || i == NMSG - 1) {
			while (done < (i == NMSG - 1 ? NMSG : i - 30)) {
				CHK(poll_wc(e.cq, &wc, 10000) == 1);
				CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)done);
				done++;
			}
		}
	}
	/* READs (multi-packet responses, re-requested from the first lost PSN) */
	for (i = 0; i < 10; i++) {
		size_t len = 50000 + (size_t)i * 1000, k, roff = (size_t)i * 100;

		memset(e.buf, 0, len);
		CHK(post_send(&e, IBV_WR_RDMA_READ, 1000 + (uint64_t)i, 0, len, r.addr + LOSS_R + roff,
			      r.rkey, 0, 0) == 0);
		CHK(poll_wc(e.cq, &wc, 10000) == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.wr_id == 1000 + (uint64_t)i);
		for (k = 0; k < len; k++)
			CHK(e.buf[k] == (uint8_t)((roff + k) * 7 + 3));
	}
	/* a WRITE, read back */
	for (size_t k = 0; k < 100000; k++)
		e.buf[k] = (uint8_t)(k * 11 + 1);
	CHK(post_send(&e, IBV_WR_RDMA_WRITE, 2000, 0, 100000, r.addr + LOSS_R, r.rkey, 0, 0) == 0);
	CHK(post_send(&e, IBV_WR_RDMA_READ, 2001, 131072, 100000, r.addr + LOSS_R, r.rkey, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 10000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2000);
	CHK(poll_wc(e.cq, &wc, 10000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2001);
	CHK(memcmp(e.buf, e.buf + 131072, 100000) == 0);
	sync_fd(fd);
	ep_close(&e);
}

static void loss_b(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	int i;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 256 * 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 12, 7, 7, 1) == 0);
	for (i = 0; i < 200; i++)
		post_recv(&e, (uint64_t)i, (size_t)i * 4096, 4096);
	for (size_t k = 0; k < 56 * 4096; k++)
		e.buf[LOSS_R + k] = (uint8_t)(k * 7 + 3);
	sync_fd(fd);
	for (i = 0; i < NMSG; i++) {
		int got;
		size_t len = 4 + (size_t)(i * 997) % 3000, k;
		uint8_t *b = e.buf + (size_t)i * 4096;

		CHK(poll_wc(e.cq, &wc, 10000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i && wc.byte_len == len);
		memcpy(&got, b, 4);
		CHK(got == i);
		for (k = 4; k < len; k++)
			CHK(b[k] == (uint8_t)i);
	}
	sync_fd(fd);
	CHK(ibv_poll_cq(e.cq, 1, &wc) == 0);   /* nothing twice */
	ep_close(&e);
}

Test(sim_verbs, rc_retransmission_under_loss, .fini = fabric_stop, .timeout = 120)
{
	fabric_start("ib");
	fabric_fault("drop=10%,qpt=rc");
	run_pair(loss_a, loss_b, NULL, 90000);
	/* and the fabric did drop */
	struct simf *f = simf_attach_node(g_dir, -1);

	cr_assert_not_null(f);
	uint64_t dropped = f->st->nodes[1].tx_dropped + f->st->nodes[2].tx_dropped;

	simf_detach(f);
	cr_expect_gt(dropped, 20, "only %llu datagrams dropped", (unsigned long long)dropped);
}

/* The peer goes away: after retry_cnt retransmissions the send fails with
 * IBV_WC_RETRY_EXC_ERR, the QP is in error and what follows is flushed. */
static void gone_a(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	char c;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 10 /* ~4 ms */, 3, 7, 12) == 0);
	CHK(read(fd, &c, 1) == 0);   /* the peer exited */
	CHK(post_send(&e, IBV_WR_SEND, 1, 0, 100, 0, 0, 0, 0) == 0);
	CHK(post_send(&e, IBV_WR_SEND, 2, 0, 100, 0, 0, 0, 0) == 0);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_RETRY_EXC_ERR);
	CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHK(qstate(&e) == IBV_QPS_ERR);
	ep_close(&e);
}

static void gone_b(int fd, void *arg)
{
	struct ep e;
	struct info r;

	(void)arg;
	ep_open(&e, IBV_QPT_RC, 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 10, 3, 7, 12) == 0);
	ep_close(&e);   /* and exit: its QP and port are gone */
}

Test(sim_verbs, rc_retry_exceeded_when_peer_gone, .fini = fabric_stop, .timeout = 60)
{
	fabric_start("ib");
	run_pair(gone_a, gone_b, NULL, 20000);
}

/* No receive posted: RNR NAKs; rnr_retry 2 gives up with IBV_WC_RNR_RETRY_EXC_ERR,
 * rnr_retry 7 waits until the receive is posted. */
static void rnr_a(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	int infinite = *(int *)arg;

	ep_open(&e, IBV_QPT_RC, 4096, 0);
	xchg(fd, &e, &r);
	CHK(rc_connect(&e, &r, 14, 7, infinite ? 7 : 2, 1) == 0);
	sync_fd(fd);
	CHK(post_send(&e, IBV_WR_SEND, 1, 0, 100, 0, 0, 0, 0) == 0);
	if (infinite) {
		CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
	} else {
		CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 1 &&
		    wc.status == IBV_WC_RNR_RETRY_EXC_ERR);
		CHK(qstate(&e) == IBV_QPS_ERR);
	}
	sync_fd(fd);
	ep_close(&e);
}

static void rnr_b(int fd, void *arg)
{
	struct ep e;
	struct info r;
	struct ibv_wc wc;
	int infinite = *(int *)arg;

	ep_open(&e, IBV_QPT_RC, 4096, 0);
	xchg(fd, &e, &r);
	/* min_rnr_timer 14: 1.28 ms between retries */
	CHK(rc_connect(&e, &r, 14, 7, 7, 14) == 0);
	sync_fd(fd);
	if (infinite) {
		usleep(200000);
		post_recv(&e, 5, 0, 4096);
		CHK(poll_wc(e.cq, &wc, 5000) == 1 && wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS &&
		    wc.byte_len == 100);
	}
	sync_fd(fd);
	ep_close(&e);
}

Test(sim_verbs, rc_rnr_retry_exceeded, .fini = fabric_stop, .timeout = 60)
{
	int infinite = 0;

	fabric_start("ib");
	run_pair(rnr_a, rnr_b, &infinite, 20000);
}

Test(sim_verbs, rc_rnr_infinite_waits, .fini = fabric_stop, .timeout = 60)
{
	int infinite = 1;

	fabric_start("ib");
	run_pair(rnr_a, rnr_b, &infinite, 20000);
}

/* ---- unmodified Debian binaries (ibverbs-utils) ------------------------------------------------ */

static pid_t spawn_tool(const char *node, const char *out, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv("USCM_SIM_NODE", node, 1);
		setenv("LD_LIBRARY_PATH", g_libdir, 1);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	return pid;
}

static char *slurp(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

static void need_tool(const char *path)
{
	if (access(path, X_OK))
		tf_skip_missing("%s not installed (Debian package ibverbs-utils)", path);
}

Test(sim_verbs, unmodified_ibv_devinfo, .fini = fabric_stop, .timeout = 60)
{
	char out[] = "/tmp/uscm-svt-out.XXXXXX";
	int fd;

	need_tool("/usr/bin/ibv_devinfo");
	fabric_start("ib");
	fd = mkstemp(out);
	close(fd);
	char *argv[] = {"/usr/bin/ibv_devinfo", "-v", NULL};

	cr_assert_eq(reap(spawn_tool("node1", out, argv), 10000), 0, "%s", slurp(out));
	char *s = slurp(out);

	cr_expect(strstr(s, "hca_id:\tuscm_node1"), "%s", s);
	cr_expect(strstr(s, "PORT_ACTIVE (4)"), "%s", s);
	cr_expect(strstr(s, "link_layer:\t\tInfiniBand"), "%s", s);
	cr_expect(strstr(s, "GID[  0]:\t\tfe80:0000:0000:0000:"), "%s", s);
	char *argv2[] = {"/usr/bin/ibv_devices", NULL};

	cr_assert_eq(reap(spawn_tool("node2", out, argv2), 10000), 0);
	cr_expect(strstr(slurp(out), "uscm_node2"), "%s", slurp(out));
	unlink(out);
}

/* Waits until the server listens (its TCP side channel), at most ms. */
static void wait_listening(unsigned port, pid_t server, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (st_tcp_listening(port))
			return;
		if (waitpid(server, NULL, WNOHANG) == server)
			return; /* it died: the client will say so */
		usleep(10000);
	}
}

struct pp_result {
	int rc, rs;                 /* client's and server's exit status */
	char c_out[65536], s_out[65536];
};

/* Runs tool as server on node2 and client on node1 (-g 0, iters
 * iterations, up to three extra arguments), their outputs into *res. */
static void pingpong_exec_once(const char *tool, int iters, const char *x1, const char *x2,
			       const char *x3, struct pp_result *res)
{
	char so[] = "/tmp/uscm-svt-srv.XXXXXX", co[] = "/tmp/uscm-svt-cli.XXXXXX", port[16], n[16];
	unsigned pn = st_free_tcp_port();
	int fd;

	need_tool(tool);
	fd = mkstemp(so);
	close(fd);
	fd = mkstemp(co);
	close(fd);
	snprintf(port, sizeof(port), "%u", pn);
	snprintf(n, sizeof(n), "%d", iters);
	char *sargv[12] = {(char *)tool, "-p", port, "-n", n, "-g", "0"};
	char *cargv[12] = {(char *)tool, "-p", port, "-n", n, "-g", "0"};
	int ai = 7;

	if (x1)
		sargv[ai] = cargv[ai] = (char *)x1, ai++;
	if (x2)
		sargv[ai] = cargv[ai] = (char *)x2, ai++;
	if (x3)
		sargv[ai] = cargv[ai] = (char *)x3, ai++;
	cargv[ai] = "127.0.0.1";
	pid_t srv = spawn_tool("node2", so, sargv);

	wait_listening(pn, srv, 10000);
	pid_t cli = spawn_tool("node1", co, cargv);

	res->rc = reap(cli, 60000);
	res->rs = reap(srv, 10000);
	snprintf(res->c_out, sizeof(res->c_out), "%s", slurp(co));
	snprintf(res->s_out, sizeof(res->s_out), "%s", slurp(so));
	unlink(so);
	unlink(co);
}

/* The TCP side channel's port is picked free, but another test running in
 * parallel can take it before the server binds it: then try another. */
static void pingpong_exec(const char *tool, int iters, const char *x1, const char *x2, const char *x3,
			  struct pp_result *res)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		pingpong_exec_once(tool, iters, x1, x2, x3, res);
		if (!strstr(res->s_out, "Couldn't listen to port"))
			return;
	}
}

/* lossy: under injected loss of every packet kind, the ACK of the very
 * last message can be lost after its receiver has finished and destroyed
 * its QP; the sender then retries into nothing and fails with "transport
 * retry counter exceeded", exactly as it would on hardware. That one
 * outcome is accepted (a rule with op=data spares ACKs and avoids it). */
static void pingpong_run(const char *tool, const char *extra1, const char *extra2, int lossy)
{
	static struct pp_result r;

	pingpong_exec(tool, 50, extra1, extra2, NULL, &r);
	if (lossy && (r.rc != 0) != (r.rs != 0)) {
		const char *bad = r.rc ? r.c_out : r.s_out, *good = r.rc ? r.s_out : r.c_out;

		if (strstr(bad, "transport retry counter exceeded") && strstr(good, "50 iters in"))
			return;
	}
	cr_expect_eq(r.rc, 0, "client: %s", r.c_out);
	cr_expect_eq(r.rs, 0, "server: %s", r.s_out);
	cr_expect(strstr(r.c_out, "50 iters in"), "%s", r.c_out);
}

static void pingpong(const char *tool, const char *extra1, const char *extra2)
{
	pingpong_run(tool, extra1, extra2, 0);
}

static uint64_t fabric_dropped(void)
{
	struct simf *f = simf_attach_node(g_dir, -1);
	uint64_t d;

	cr_assert_not_null(f);
	d = f->st->nodes[1].tx_dropped + f->st->nodes[2].tx_dropped;
	simf_detach(f);
	return d;
}

Test(sim_verbs, unmodified_ibv_rc_pingpong, .fini = fabric_stop, .timeout = 120)
{
	fabric_start("ib");
	pingpong("/usr/bin/ibv_rc_pingpong", "-c", NULL);
	pingpong("/usr/bin/ibv_rc_pingpong", "-c", "-s1");
	pingpong("/usr/bin/ibv_rc_pingpong", "-c", "-s65536");
	pingpong("/usr/bin/ibv_rc_pingpong", "-e", NULL);
}

/* The "5% injected loss of data packets": RC SEND/WRITE/READ
 * requests are lost, their ACKs never, so retransmission must make every
 * run succeed, whatever the seed, with data checking, for 1 B, 4 KiB
 * (several packets at the path MTU 1024 pingpong picks) and 64 KiB. */
Test(sim_verbs, unmodified_ibv_rc_pingpong_under_data_loss, .fini = fabric_stop, .timeout = 180)
{
	static const char *const sizes[] = { "-s1", "-s4096", "-s65536" };
	static struct pp_result r;

	need_tool("/usr/bin/ibv_rc_pingpong");
	for (unsigned seed = 1; seed <= 3; seed++) {
		fabric_start_opts("ib", seed, "drop=5%,qpt=rc,op=data");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			pingpong_exec("/usr/bin/ibv_rc_pingpong", 50, "-c", sizes[i], NULL, &r);
			cr_expect_eq(r.rc, 0, "seed %u %s client: %s", seed, sizes[i], r.c_out);
			cr_expect_eq(r.rs, 0, "seed %u %s server: %s", seed, sizes[i], r.s_out);
			cr_expect(strstr(r.c_out, "50 iters in"), "seed %u %s: %s", seed, sizes[i], r.c_out);
			cr_expect(strstr(r.s_out, "50 iters in"), "seed %u %s: %s", seed, sizes[i], r.s_out);
		}
		cr_expect_gt(fabric_dropped(), 20, "seed %u: the fabric did drop", seed);
		fabric_stop();
	}
}

/* Loss of every RC packet kind, ACKs included (see pingpong_run). */
Test(sim_verbs, unmodified_ibv_rc_pingpong_under_loss, .fini = fabric_stop, .timeout = 120)
{
	fabric_start("ib");
	fabric_fault("drop=5%,qpt=rc");
	pingpong_run("/usr/bin/ibv_rc_pingpong", "-c", NULL, 1);
	pingpong_run("/usr/bin/ibv_rc_pingpong", "-c", "-s20000", 1);
}

/* The server is killed in the middle of a long run: the client's send goes
 * unanswered and, after retry_cnt (7) local ACK timeouts, completes with
 * IBV_WC_RETRY_EXC_ERR, which ibv_rc_pingpong reports and fails on.
 *
 * A pingpong whose peer dies while it waits for the peer's next message
 * has nothing outstanding and waits for ever, on hardware too; and without
 * help that is where a kill usually finds it (the window in which a send
 * is unacknowledged is one round trip, the window in which each side waits
 * for the other's application is much longer). So node2's ACKs are held
 * back 200 ms (delay=200ms,node=node2,op=ack, in the server's own delay
 * line, which dies with it): node1 then has an unacknowledged send nearly
 * all the time, and the kill lands on it. */
static void *killer(void *arg)
{
	char *argv[] = {g_sim, "kill", "--dir", g_dir, "node2", NULL};
	struct simf *f = simf_attach_node(g_dir, -1);

	(void)arg;
	/* once the two are a few iterations in */
	for (int t = 0; f && t < 1000 && __atomic_load_n(&f->st->nodes[2].tx, __ATOMIC_RELAXED) < 20; t++)
		usleep(10000);
	if (f)
		simf_detach(f);
	run_argv(argv, NULL, 1);
	return NULL;
}

Test(sim_verbs, unmodified_ibv_rc_pingpong_peer_killed, .fini = fabric_stop, .timeout = 60)
{
	static struct pp_result r;
	pthread_t t;

	need_tool("/usr/bin/ibv_rc_pingpong");
	fabric_start_opts("ib", 0, "delay=200ms,node=node2,op=ack");
	cr_assert_eq(pthread_create(&t, NULL, killer, NULL), 0);
	pingpong_exec("/usr/bin/ibv_rc_pingpong", 100000000, "-c", NULL, NULL, &r);
	pthread_join(t, NULL);
	cr_expect_eq(r.rs, 128 + SIGKILL, "the server was killed: %d %s", r.rs, r.s_out);
	cr_expect_neq(r.rc, 0, "the client fails: %s", r.c_out);
	cr_expect(strstr(r.c_out, "Failed status transport retry counter exceeded (12)"), "%s", r.c_out);
}

Test(sim_verbs, unmodified_ud_srq_uc_pingpong, .fini = fabric_stop, .timeout = 120)
{
	fabric_start("ib");
	pingpong("/usr/bin/ibv_ud_pingpong", NULL, NULL);
	pingpong("/usr/bin/ibv_srq_pingpong", "-c", NULL);
	pingpong("/usr/bin/ibv_uc_pingpong", "-c", NULL);
}

Test(sim_verbs, unmodified_pingpong_roce, .fini = fabric_stop, .timeout = 120)
{
	fabric_start("roce");
	pingpong("/usr/bin/ibv_rc_pingpong", "-c", NULL);
	pingpong("/usr/bin/ibv_ud_pingpong", NULL, NULL);
}

/* ---- XRC ------------------------------------------------------------------------------------- */

/* An XRC pair: node1 an initiator (IBV_QPT_XRC_SEND: send side only),
 * node2 a target (IBV_QPT_XRC_RECV, made with ibv_create_qp_ex in an XRC
 * domain) and XRC SRQs: two in the target's domain, one in another. Each
 * SEND names an SRQ by number (XRCETH); it lands there and completes on
 * that SRQ's CQ. An SRQ of another domain (mode 0, last) or a number that
 * is no SRQ (mode 1) is a NAK invalid request: the initiator completes
 * with IBV_WC_REM_INV_REQ_ERR, as a real HCA does. */
struct xinfo {
	uint16_t lid;
	uint32_t qpn, psn;
	uint8_t gid[16];
	uint32_t srqn[3];
	uint32_t rkey;
	uint64_t addr;
};

static void xchg_x(int fd, struct ibv_context *ctx, const struct ibv_port_attr *port, uint32_t qpn,
		   const uint32_t srqn[3], const struct ibv_mr *mr, struct xinfo *remote)
{
	struct xinfo me;
	union ibv_gid g;

	memset(&me, 0, sizeof(me));
	if (mr) {
		me.rkey = mr->rkey;
		me.addr = (uintptr_t)mr->addr;
	}
	me.lid = port->lid;
	me.qpn = qpn;
	me.psn = my_psn();
	if (srqn)
		memcpy(me.srqn, srqn, sizeof(me.srqn));
	CHK(ibv_query_gid(ctx, 1, 0, &g) == 0);
	memcpy(me.gid, g.raw, 16);
	CHK(write(fd, &me, sizeof(me)) == sizeof(me));
	CHK(read(fd, remote, sizeof(*remote)) == sizeof(*remote));
}

static void xrc_av(const struct ibv_port_attr *port, const struct xinfo *r, struct ibv_ah_attr *av)
{
	memset(av, 0, sizeof(*av));
	av->dlid = r->lid;
	av->port_num = 1;
	if (port->link_layer == IBV_LINK_LAYER_ETHERNET) {
		av->is_global = 1;
		av->grh.hop_limit = 64;
		memcpy(av->grh.dgid.raw, r->gid, 16);
	}
}

static struct ibv_context *open_ctx(struct ibv_port_attr *port)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *ctx;

	CHK(l && n == 1);
	ctx = ibv_open_device(l[0]);
	CHK(ctx);
	ibv_free_device_list(l);
	CHK(ibv_query_port(ctx, 1, port) == 0);
	return ctx;
}

static void child_xrc_ini(int fd, void *arg)
{
	int mode = *(int *)arg;
	struct ibv_port_attr port;
	struct ibv_context *ctx = open_ctx(&port);
	struct ibv_device_attr da;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	static char buf[64] = "xrc-payload-0";
	struct ibv_mr *mr;
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	struct xinfo r;

	CHK(ibv_query_device(ctx, &da) == 0);
	CHK(da.device_cap_flags & IBV_DEVICE_XRC);
	CHK(pd && cq);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHK(mr);
	/* send side only: no receive CQ, the receive capacities are dropped */
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .qp_type = IBV_QPT_XRC_SEND,
		.cap = {.max_send_wr = 8, .max_send_sge = 1, .max_recv_wr = 8, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	CHK(qp);
	CHK(ia.cap.max_recv_wr == 0);
	xchg_x(fd, ctx, &port, qp->qp_num, NULL, NULL, &r);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = r.qpn;
	a.rq_psn = r.psn;
	a.max_dest_rd_atomic = 4;
	xrc_av(&port, &r, &a.ah_attr);
	/* an initiator has no responder: the RC responder attributes are refused */
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC) == EINVAL);
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn();
	a.max_rd_atomic = 1;
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
	sync_fd(fd);   /* the target is at RTS, its receives posted */

	struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	if (mode == 0) {
		/* one SEND to each SRQ of the target's domain, second first */
		wr.qp_type.xrc.remote_srqn = r.srqn[1];
		CHK(ibv_post_send(qp, &wr, &bad) == 0);
		CHK(poll_wc(cq, &wc, 5000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.opcode == IBV_WC_SEND);
		buf[12] = '1';
		wr.wr_id = 2;
		wr.qp_type.xrc.remote_srqn = r.srqn[0];
		CHK(ibv_post_send(qp, &wr, &bad) == 0);
		CHK(poll_wc(cq, &wc, 5000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
		/* an RDMA WRITE through the first SRQ: keys of that SRQ's PD */
		wr.wr_id = 4;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = r.addr + 32;
		wr.wr.rdma.rkey = r.rkey;
		CHK(ibv_post_send(qp, &wr, &bad) == 0);
		CHK(poll_wc(cq, &wc, 5000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 4 && wc.opcode == IBV_WC_RDMA_WRITE);
		wr.opcode = IBV_WR_SEND;
		sync_fd(fd);   /* the target checked all three */
		wr.wr_id = 3;
		wr.qp_type.xrc.remote_srqn = r.srqn[2];   /* another domain's */
	} else {
		wr.wr_id = 3;
		wr.qp_type.xrc.remote_srqn = 0xABCDE;     /* no SRQ at all */
	}
	CHK(ibv_post_send(qp, &wr, &bad) == 0);
	CHK(poll_wc(cq, &wc, 5000) == 1);
	if (wc.status != IBV_WC_REM_INV_REQ_ERR || wc.wr_id != 3) {
		fprintf(stderr, "wrong SRQ: status %d wr_id %llu\n", wc.status,
			(unsigned long long)wc.wr_id);
		_exit(101);
	}
	sync_fd(fd);
	CHK(ibv_destroy_qp(qp) == 0);
	CHK(ibv_dereg_mr(mr) == 0);
	CHK(ibv_destroy_cq(cq) == 0);
	CHK(ibv_dealloc_pd(pd) == 0);
	CHK(ibv_close_device(ctx) == 0);
}

static void child_xrc_tgt(int fd, void *arg)
{
	int mode = *(int *)arg;
	struct ibv_port_attr port;
	struct ibv_context *ctx = open_ctx(&port);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	static char buf[3][64];
	struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1, .oflags = O_CREAT};
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa), *other = ibv_open_xrcd(ctx, &xa);
	struct ibv_srq *srq[3];
	uint32_t srqn[3];
	struct ibv_mr *mr;
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	struct xinfo r;

	CHK(pd && cq && cq2 && xrcd && other);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHK(mr);
	for (int i = 0; i < 3; i++) {
		struct ibv_srq_init_attr_ex sa = {
			.attr = {.max_wr = 4, .max_sge = 1},
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
			.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = i < 2 ? xrcd : other,
			.cq = i == 1 ? cq2 : cq,
		};
		struct ibv_sge s = {.addr = (uintptr_t)buf[i], .length = 64, .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 100 + (uint64_t)i, .sg_list = &s, .num_sge = 1}, *bad;

		srq[i] = ibv_create_srq_ex(ctx, &sa);
		CHK(srq[i]);
		CHK(ibv_get_srq_num(srq[i], &srqn[i]) == 0);
		CHK(ibv_post_srq_recv(srq[i], &wr, &bad) == 0);
	}
	CHK(srqn[0] != srqn[1] && srqn[1] != srqn[2]);
	/* an XRC SRQ needs its domain and CQ */
	struct ibv_srq_init_attr_ex bad_sa = {
		.attr = {.max_wr = 4, .max_sge = 1},
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd,
	};
	CHK(ibv_create_srq_ex(ctx, &bad_sa) == NULL && errno == EINVAL);
	/* the target: the XRCD, no PD, CQs nor queues */
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &qa);

	CHK(qp);
	/* a domain in use stays */
	CHK(ibv_close_xrcd(xrcd) == EBUSY);
	xchg_x(fd, ctx, &port, qp->qp_num, srqn, mr, &r);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = r.qpn;
	a.rq_psn = r.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	xrc_av(&port, &r, &a.ah_attr);
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER) == 0);
	/* a target has no requester: RTS needs only the ACK timeout and PSN */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.sq_psn = my_psn();
	CHK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT) == 0);
	sync_fd(fd);

	if (mode == 0) {
		/* the first SEND went to the second SRQ: its CQ (cq2) */
		CHK(poll_wc(cq2, &wc, 5000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 101 && wc.opcode == IBV_WC_RECV);
		CHK(wc.byte_len == 16 && wc.qp_num == qp->qp_num);
		CHK(!memcmp(buf[1], "xrc-payload-0", 14));
		CHK(poll_wc(cq, &wc, 5000) == 1);
		CHK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100);
		CHK(!memcmp(buf[0], "xrc-payload-1", 14));
		sync_fd(fd);
		/* the WRITE came in meanwhile (no completion at the target) */
		CHK(!memcmp(buf[0] + 32, "xrc-payload-1", 14));
	}
	sync_fd(fd);
	/* nothing landed in the other domain's SRQ, nor anywhere else */
	CHK(ibv_poll_cq(cq, 1, &wc) == 0);
	CHK(ibv_poll_cq(cq2, 1, &wc) == 0);
	CHK(buf[2][0] == 0);
	CHK(ibv_destroy_qp(qp) == 0);
	for (int i = 0; i < 3; i++)
		CHK(ibv_destroy_srq(srq[i]) == 0);
	CHK(ibv_close_xrcd(xrcd) == 0);
	CHK(ibv_close_xrcd(other) == 0);
	CHK(ibv_dereg_mr(mr) == 0);
	CHK(ibv_destroy_cq(cq) == 0);
	CHK(ibv_destroy_cq(cq2) == 0);
	CHK(ibv_dealloc_pd(pd) == 0);
	CHK(ibv_close_device(ctx) == 0);
}

Test(sim_verbs, xrc_send_to_srq_and_other_domain_ib, .fini = fabric_stop, .timeout = 60)
{
	int mode = 0;

	fabric_start("ib");
	run_pair(child_xrc_ini, child_xrc_tgt, &mode, 20000);
}

Test(sim_verbs, xrc_unknown_srqn_roce, .fini = fabric_stop, .timeout = 60)
{
	int mode = 1;

	fabric_start("roce");
	run_pair(child_xrc_ini, child_xrc_tgt, &mode, 20000);
}
