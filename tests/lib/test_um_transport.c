/*
 * umad/um_transport and umad/um_sa_client over the simulated fabric's
 * libibumad.so.3 (the same calls run on real hardware): port information,
 * one CM agent per port (EBUSY for a second process), CM MADs between two
 * processes with the sender's address, PathRecord queries to the SA (an
 * answer, an unknown GID, every retry lost), MCMemberRecord join / leave
 * (the group's record, a refused join, a leave of what was not joined).
 */
#include <sys/wait.h>

#include "cm_proto/cmp_cm.h"
#include "umad/um_sa_client.h"
#include "umad/um_transport.h"

#include "libtest.h"

static void setup(void)
{
	lt_fabric_start("ib", 2);
	lt_node(1);
}

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(um, .init = setup, .fini = teardown, .timeout = 60);

static const uint8_t gid1[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0, 1 };
static const uint8_t gid2[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0, 2 };

static struct um_port *open_node(int node, unsigned agents)
{
	struct um_port *p = NULL;
	char ca[32], err[256] = "";

	snprintf(ca, sizeof(ca), "uscm_node%d", node);
	cr_assert_eq(um_port_open(ca, 1, agents, &p, err, sizeof(err)), 0, "%s: %s", ca, err);
	return p;
}

Test(um, port_info)
{
	struct um_port *p = open_node(1, UM_OPEN_CM | UM_OPEN_SA);
	const struct um_port_info *i = um_port_info(p);

	cr_expect_str_eq(i->ca_name, "uscm_node1");
	cr_expect_eq(i->port_num, 1);
	cr_expect_eq(i->lid, 2);
	cr_expect_eq(i->sm_lid, 1);
	cr_expect_eq(i->state, 4, "ACTIVE");
	cr_expect_not(i->roce);
	cr_expect_eq(i->port_guid, 0x0002c90300000001ULL);
	cr_expect_geq(um_port_fd(p), 0);
	um_port_close(p);
	char err[256] = "";
	struct um_port *q;
	errno = 0;
	cr_expect_eq(um_port_open("no_such_ca", 1, UM_OPEN_CM, &q, err, sizeof(err)), -1);
	cr_expect_neq(errno, 0);
	cr_expect_neq(err[0], 0, "a message says why");
}

Test(um, one_cm_agent_per_port)
{
	struct um_port *p = open_node(1, UM_OPEN_CM);
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct um_port *q;
		char err[256] = "";
		int rc = um_port_open("uscm_node1", 1, UM_OPEN_CM, &q, err, sizeof(err));
		/* 0: refused with EBUSY and a message naming the CM class. */
		_exit(rc == -1 && errno == EBUSY && strstr(err, "CM class") ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a second process got the CM agent");
	um_port_close(p);
	/* Released: it can be taken again. */
	p = open_node(1, UM_OPEN_CM);
	um_port_close(p);
}

static int recv_wait(struct um_port *p, struct um_rx *rx, int ms)
{
	uint64_t t0 = lt_now_ms();
	int r;

	while ((r = um_port_recv(p, rx)) == 0 && lt_now_ms() - t0 < (uint64_t)ms) {
		struct pollfd pf = { .fd = um_port_fd(p), .events = POLLIN };
		poll(&pf, 1, 50);
	}
	return r;
}

Test(um, cm_mad_between_nodes)
{
	int go[2], st;
	pid_t pid;
	char c;

	cr_assert_eq(pipe(go), 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* node 2: receive one DREQ and check its sender. */
		struct um_port *q;
		struct um_rx rx;
		struct cmp_cm_msg m;
		lt_node(2);
		if (um_port_open("uscm_node2", 1, UM_OPEN_CM, &q, NULL, 0) < 0)
			_exit(2);
		if (write(go[1], "r", 1) != 1)
			_exit(3);
		if (recv_wait(q, &rx, 5000) != 1)
			_exit(4);
		if (rx.agent != UM_AGENT_CM || rx.status || rx.src.lid != 2 || rx.src.qpn != 1)
			_exit(5);
		if (cmp_cm_decode(rx.mad, rx.len, &m, NULL) < 0 || m.hdr.attr_id != UMAD_CM_ATTR_DREQ ||
		    m.u.dreq.local_comm_id != 0x1234)
			_exit(6);
		um_port_close(q);
		_exit(0);
	}
	cr_assert_eq(read(go[0], &c, 1), 1);
	struct um_port *p = open_node(1, UM_OPEN_CM);
	struct cmp_cm_msg m;
	uint8_t mad[CMP_MAD_SIZE];
	struct cmp_addr dst;
	memset(&m, 0, sizeof(m));
	m.hdr.method = UMAD_METHOD_SEND;
	m.hdr.attr_id = UMAD_CM_ATTR_DREQ;
	m.hdr.tid = 0x1234;
	m.u.dreq.local_comm_id = 0x1234;
	m.u.dreq.remote_comm_id = 0x5678;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	memset(&dst, 0, sizeof(dst));
	dst.lid = 3;
	dst.qpn = 1;
	dst.qkey = UM_QKEY_GSI;
	cr_assert_eq(um_port_send_cm(p, &dst, mad), 0, "%s", strerror(errno));
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node 2 side failed with %d", WEXITSTATUS(st));
	um_port_close(p);
}

struct answer {
	int done, status;
	struct um_sa_path_rec pr;
};

static void on_path(void *ctx, int status, const struct um_sa_path_rec *pr)
{
	struct answer *a = ctx;

	a->done = 1;
	a->status = status;
	if (pr)
		a->pr = *pr;
}

static void pump(struct um_port *p, struct um_sa_client *c, int *done, int ms)
{
	uint64_t t0 = lt_now_ms();
	struct um_rx rx;

	while (!*done && lt_now_ms() - t0 < (uint64_t)ms) {
		if (recv_wait(p, &rx, 50) == 1)
			um_sa_client_handle(c, &rx);
	}
}

static void query(struct um_sa_client *c, const uint8_t *dgid, int timeout_ms, struct answer *a)
{
	struct um_sa_path_req q;
	uint64_t tid = 0;

	memset(&q, 0, sizeof(q));
	memcpy(q.sgid, gid1, 16);
	memcpy(q.dgid, dgid, 16);
	q.pkey = 0xFFFF;
	q.service_id = 0x0000000001061D2FULL;
	q.qos_class = -1;
	q.tclass = -1;
	q.timeout_ms = timeout_ms;
	q.retries = 2;
	memset(a, 0, sizeof(*a));
	cr_assert_eq(um_sa_path_get(c, &q, on_path, a, &tid), 0, "%s", strerror(errno));
	cr_expect_neq(tid, 0);
	cr_expect_eq(um_sa_client_pending(c), 1);
}

Test(um, sa_path_record)
{
	struct um_port *p = open_node(1, UM_OPEN_SA);
	struct um_sa_client *c = um_sa_client_new(p, 1000);
	struct answer a;

	query(c, gid2, 500, &a);
	pump(p, c, &a.done, 5000);
	cr_assert(a.done, "no answer");
	cr_assert_eq(a.status, 0, "status %d", a.status);
	cr_expect_eq(a.pr.slid, 2);
	cr_expect_eq(a.pr.dlid, 3);
	cr_expect_arr_eq(a.pr.dgid, gid2, 16);
	cr_expect_eq(a.pr.pkey, 0xFFFF);
	cr_expect_eq(a.pr.mtu, 5); /* 4096: the ports' MTUCap, as OpenSM answers */
	cr_expect_eq(a.pr.service_id, 0x0000000001061D2FULL);
	cr_expect_eq(um_sa_client_pending(c), 0);
	/* A GID the SA does not know. */
	static const uint8_t nobody[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0, 0x33 };
	query(c, nobody, 500, &a);
	pump(p, c, &a.done, 5000);
	cr_assert(a.done);
	cr_expect_eq(a.status, -EINVAL); /* INVALID_GID: the kernel's ib_sa gives -EINVAL */
	um_sa_client_free(c);
	um_port_close(p);
}

Test(um, sa_timeout_after_retries)
{
	struct um_port *p;
	struct um_sa_client *c;
	struct answer a;
	uint64_t t0, dt;

	cr_assert_eq(lt_sh(NULL, "%s/uscm-sim fault --dir %s 'drop=100%%,class=0x03' >/dev/null 2>&1",
			   lt_bin(), getenv("USCM_SIM_DIR")), 0);
	p = open_node(1, UM_OPEN_SA);
	c = um_sa_client_new(p, 1);
	t0 = lt_now_ms();
	query(c, gid2, 200, &a); /* 3 tries of 200 ms */
	pump(p, c, &a.done, 5000);
	dt = lt_now_ms() - t0;
	cr_assert(a.done, "no timeout record");
	cr_expect_eq(a.status, -ETIMEDOUT);
	cr_expect_geq(dt, 550u, "%llu ms", (unsigned long long)dt);
	cr_expect_leq(dt, 2000u, "%llu ms", (unsigned long long)dt);
	/* Freeing with a query in flight cancels it. */
	query(c, gid2, 200, &a);
	um_sa_client_free(c);
	cr_expect(a.done);
	cr_expect_eq(a.status, -ECANCELED);
	um_port_close(p);
}

/* A sender that keeps the MAD (the library's: sent after its lock). */
struct held {
	int n;
	uint32_t tid;
	uint8_t mad[CMP_MAD_SIZE];
	int timeout_ms, retries;
};

static int hold_mad(void *ctx, uint32_t tid, const uint8_t mad[CMP_MAD_SIZE], int timeout_ms,
		    int retries)
{
	struct held *h = ctx;

	h->n++;
	h->tid = tid;
	memcpy(h->mad, mad, CMP_MAD_SIZE);
	h->timeout_ms = timeout_ms;
	h->retries = retries;
	return 0;
}

Test(um, sa_deferred_sender_and_fail)
{
	struct um_port *p = open_node(1, UM_OPEN_SA);
	struct um_sa_client *c = um_sa_client_new(p, 7000);
	struct held h = { 0 };
	struct answer a;

	um_sa_client_set_sender(c, hold_mad, &h);
	query(c, gid2, 300, &a);
	cr_assert_eq(h.n, 1, "the sender got the query");
	cr_expect_eq(h.timeout_ms, 300);
	cr_expect_eq(h.retries, 2);
	cr_expect_eq(h.mad[1], 0x03, "an SA MAD"); /* MgmtClass */
	/* Sent by the caller: the answer matches the query. */
	cr_assert_eq(um_port_send_sa(p, h.mad, h.timeout_ms, h.retries), 0);
	pump(p, c, &a.done, 5000);
	cr_assert(a.done, "no answer");
	cr_expect_eq(a.status, 0, "status %d", a.status);
	cr_expect_eq(a.pr.dlid, 3);
	/* A send that failed later ends the query with its error, once. */
	query(c, gid2, 300, &a);
	cr_expect_eq(um_sa_fail(c, h.tid, -ENETDOWN), 1);
	cr_expect(a.done);
	cr_expect_eq(a.status, -ENETDOWN);
	cr_expect_eq(um_sa_client_pending(c), 0);
	cr_expect_eq(um_sa_fail(c, h.tid, -ENETDOWN), 0, "no longer pending");
	um_sa_client_free(c);
	um_port_close(p);
}

struct mcm_answer {
	int done, status;
	struct um_sa_mcm_rec rec;
};

static void on_mcm(void *ctx, int status, const struct um_sa_mcm_rec *rec)
{
	struct mcm_answer *a = ctx;

	a->done = 1;
	a->status = status;
	if (rec)
		a->rec = *rec;
}

static void mcm(struct um_port *p, struct um_sa_client *c, const struct um_sa_mcm_req *req,
		uint8_t leave, struct mcm_answer *a)
{
	memset(a, 0, sizeof(*a));
	if (leave)
		cr_assert_eq(um_sa_mcm_delete(c, req, leave, on_mcm, a, NULL), 0, "%s",
			     strerror(errno));
	else
		cr_assert_eq(um_sa_mcm_set(c, req, on_mcm, a, NULL), 0, "%s", strerror(errno));
	pump(p, c, &a->done, 5000);
	cr_assert(a->done, "no answer");
}

Test(um, sa_mcmember_join_leave)
{
	static const uint8_t mgid[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0,
					  0,    0,    0,    0,    0x0f, 1,    2, 4 };
	struct um_port *p = open_node(1, UM_OPEN_SA);
	struct um_sa_client *c = um_sa_client_new(p, 77);
	struct um_sa_mcm_req req;
	struct mcm_answer a;

	memset(&req, 0, sizeof(req));
	memcpy(req.rec.mgid, mgid, 16);
	memcpy(req.rec.port_gid, gid1, 16);
	req.rec.qkey = 0x01234567;
	req.rec.pkey = 0xFFFF;
	req.rec.join_state = 1;
	req.timeout_ms = 500;
	mcm(p, c, &req, 0, &a);
	cr_assert_eq(a.status, 0, "status %d", a.status);
	cr_expect_arr_eq(a.rec.mgid, mgid, 16);
	cr_expect_geq(a.rec.mlid, 0xC000);
	cr_expect_eq(a.rec.qkey, 0x01234567);
	cr_expect_eq(a.rec.join_state, 1);
	/* The group exists with another Q_Key: the SA refuses (-EINVAL). */
	req.rec.qkey = 0x0B1B;
	mcm(p, c, &req, 0, &a);
	cr_expect_eq(a.status, -EINVAL);
	mcm(p, c, &req, 1, &a);
	cr_expect_eq(a.status, 0, "leave: %d", a.status);
	mcm(p, c, &req, 1, &a);
	cr_expect_eq(a.status, -EINVAL, "not a member any more");
	cr_expect_eq(um_sa_client_pending(c), 0);
	/* Bad calls; a leave nobody waits for. */
	errno = 0;
	cr_expect_eq(um_sa_mcm_set(c, &req, NULL, NULL, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(um_sa_mcm_delete(c, &req, 0, NULL, NULL, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_eq(um_sa_mcm_delete(c, &req, 1, NULL, NULL, NULL), 0);
	um_sa_client_free(c);
	um_port_close(p);
}
