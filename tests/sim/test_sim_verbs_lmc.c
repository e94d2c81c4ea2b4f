/* The verbs drop-in with LMC > 0: on a fabric started with
 * `--lmc 2`, a UD datagram sent through an AH whose DLID is a non-base LID
 * of the peer's range and whose src_path_bits are set arrives, and the
 * receiver's completion reports the sender's SLID (base | path bits) and
 * the path bits of the DLID it was sent to; an AH made from that completion
 * (ibv_create_ah_from_wc) answers along the same LIDs reversed. Also:
 * ibv_query_port reports the LMC. */
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simtest.h"

static char g_dir[128];
static char g_sim[512];
static int g_up;

static int run_argv(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void fabric_stop(void)
{
	if (g_up) {
		char *argv[] = { g_sim, "stop", "--dir", g_dir, NULL };

		run_argv(argv);
		rmdir(g_dir);
		g_up = 0;
	}
}

TestSuite(verbs_lmc, .fini = fabric_stop, .timeout = 60);

static void fabric_start_lmc(void)
{
	const char *bin = getenv("USCM_BIN_DIR");
	char watch[32];

	snprintf(g_sim, sizeof(g_sim), "%s/uscm-sim", bin ? bin : "build/bin");
	if (access(g_sim, X_OK))
		tf_skip_missing("no %s: the fabric tool is not built", g_sim);
	snprintf(g_dir, sizeof(g_dir), "/tmp/uscm-svl.XXXXXX");
	cr_assert_not_null(mkdtemp(g_dir));
	char *argv[] = { g_sim, "start", "--dir", g_dir, "--nodes", "2", "--link", "ib", "--no-uscmd", "--lmc", "2",
			 NULL };

	snprintf(watch, sizeof(watch), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", watch, 1);
	cr_assert_eq(run_argv(argv), 0, "uscm-sim start --lmc 2 failed");
	g_up = 1;
	setenv("USCM_SIM_DIR", g_dir, 1);
}

#define CHK(c)                                                                                      \
	do {                                                                                        \
		if (!(c)) {                                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);        \
			_exit(100);                                                                 \
		}                                                                                   \
	} while (0)

#define QKEY 0x11111111u

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[4096];
	uint16_t lid;
	uint8_t lmc;
};

static void ep_open(struct ep *e)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_qp_attr a = { 0 };

	CHK(l && l[0]);
	CHK((e->ctx = ibv_open_device(l[0])));
	ibv_free_device_list(l);
	CHK(ibv_query_port(e->ctx, 1, &pa) == 0);
	e->lid = pa.lid;
	e->lmc = pa.lmc;
	CHK((e->pd = ibv_alloc_pd(e->ctx)));
	CHK((e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0)));
	CHK((e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf), IBV_ACCESS_LOCAL_WRITE)));
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	CHK((e->qp = ibv_create_qp(e->pd, &ia)));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qkey = QKEY;
	CHK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	CHK(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

static void post_recv(struct ep *e)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, 40 + 64, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	CHK(ibv_post_recv(e->qp, &wr, &bad) == 0);
}

static void send_to(struct ep *e, struct ibv_ah *ah, uint32_t qpn)
{
	struct ibv_sge sge = { (uintptr_t)(e->buf + 2048), 64, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	memset(e->buf + 2048, 0x5A, 64);
	CHK(ibv_post_send(e->qp, &wr, &bad) == 0);
}

/* The next completion of the given class (recv or send; the other class's
 * are passed over), 5 s at most. */
static void wait_wc(struct ep *e, int recv, struct ibv_wc *wc)
{
	for (int i = 0; i < 5000; i++) {
		int n = ibv_poll_cq(e->cq, 1, wc);

		CHK(n >= 0);
		if (n == 1) {
			CHK(wc->status == IBV_WC_SUCCESS);
			if (!!(wc->opcode & IBV_WC_RECV) == recv)
				return;
			continue;
		}
		usleep(1000);
	}
	CHK(!"no completion");
}

struct hello {
	uint32_t qpn;
	uint16_t lid;
	uint8_t lmc;
};

/* node1: sends to node2's LID base+3 from path bits 2, then expects the
 * answer from base+3 to its own base+2. */
static void node1(int fd)
{
	struct ep e;
	struct hello me, peer;
	struct ibv_ah_attr aa = { 0 };
	struct ibv_ah *ah;
	struct ibv_wc wc;

	ep_open(&e);
	CHK(e.lmc == 2 && e.lid % 4 == 0);
	post_recv(&e);
	me = (struct hello){ e.qp->qp_num, e.lid, e.lmc };
	CHK(write(fd, &me, sizeof(me)) == sizeof(me));
	CHK(read(fd, &peer, sizeof(peer)) == sizeof(peer));
	CHK(peer.lmc == 2);
	aa.dlid = (uint16_t)(peer.lid + 3);
	aa.src_path_bits = 2;
	aa.port_num = 1;
	CHK((ah = ibv_create_ah(e.pd, &aa)));
	send_to(&e, ah, peer.qpn);
	wait_wc(&e, 1, &wc); /* (its send completion is passed over) */
	if (wc.slid != peer.lid + 3 || wc.dlid_path_bits != 2) {
		fprintf(stderr, "node1: slid %u (want %u), dlid_path_bits %u (want 2)\n", wc.slid, peer.lid + 3,
			wc.dlid_path_bits);
		_exit(101);
	}
	_exit(0);
}

static void node2(int fd)
{
	struct ep e;
	struct hello me, peer;
	struct ibv_wc wc;
	struct ibv_ah *ah;

	ep_open(&e);
	post_recv(&e);
	me = (struct hello){ e.qp->qp_num, e.lid, e.lmc };
	CHK(read(fd, &peer, sizeof(peer)) == sizeof(peer));
	CHK(write(fd, &me, sizeof(me)) == sizeof(me));
	wait_wc(&e, 1, &wc);
	if (wc.slid != peer.lid + 2 || wc.dlid_path_bits != 3) {
		fprintf(stderr, "node2: slid %u (want %u), dlid_path_bits %u (want 3)\n", wc.slid, peer.lid + 2,
			wc.dlid_path_bits);
		_exit(101);
	}
	/* the answer goes back along the same LIDs: DLID = its SLID, source
	 * path bits = the DLID's */
	CHK((ah = ibv_create_ah_from_wc(e.pd, &wc, (struct ibv_grh *)e.buf, 1)));
	send_to(&e, ah, wc.src_qp);
	wait_wc(&e, 0, &wc);
	_exit(0);
}

static pid_t spawn(const char *node, void (*fn)(int), int fd, int other)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(other);
		setenv("USCM_SIM_NODE", node, 1);
		fn(fd);
		_exit(0);
	}
	cr_assert_gt(pid, 0);
	return pid;
}

Test(verbs_lmc, ud_to_a_non_base_lid_with_path_bits)
{
	int sv[2];
	pid_t a, b;
	int ra, rb;

	fabric_start_lmc();
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	a = spawn("node1", node1, sv[0], sv[1]);
	b = spawn("node2", node2, sv[1], sv[0]);
	close(sv[0]);
	close(sv[1]);
	ra = st_reap(a, 20000);
	rb = st_reap(b, 20000);
	cr_expect_eq(ra, 0, "node1 side failed (%d)", ra);
	cr_expect_eq(rb, 0, "node2 side failed (%d)", rb);
}
