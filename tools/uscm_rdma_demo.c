/*
 * uscm-rdma-demo: one RC connection through the rdma_cm API, both sides.
 *
 *   uscm-rdma-demo server [-p PORT]
 *   uscm-rdma-demo client ADDR [-p PORT]
 *
 * The client connects (with private data) and SENDs a greeting; the
 * server answers with a SEND advertising a buffer (address, rkey, length);
 * the client RDMA WRITEs a pattern into it and SENDs "done"; the server
 * checks the bytes and SENDs the verdict; the client disconnects. Every CM
 * event and data-path step is printed as one line, stamped in ms since the
 * program started. Exit 0 only when the written data was verified.
 *
 * Linked with uscm's librdmacm (the `rdmacm` target) and libibverbs; on
 * the simulated fabric, run with LD_LIBRARY_PATH=build/lib:build/sim/lib
 * and USCM_SIM_DIR / USCM_SIM_NODE set (see scripts/demo.sh).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define DEFAULT_PORT 7175
#define MSG_SIZE 64
#define RDMA_SIZE 4096
#define EVENT_MS 10000
#define WC_MS 5000
#define CONNECT_TRIES 50

/* wr_ids */
enum { WR_RECV0 = 1, WR_RECV1 = 2, WR_SEND = 3, WR_WRITE = 4, WR_SEND2 = 5 };

/* The buffer advertisement, in network byte order. */
struct advert {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *recv_mr, *send_mr, *rdma_mr;
	char recv_buf[2 * MSG_SIZE];
	char send_buf[MSG_SIZE];
	unsigned char rdma_buf[RDMA_SIZE];
	uint64_t seen; /* wr_ids whose completion has been polled */
};

static struct timespec t_start;
static const char *role = "?";

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t_start.tv_sec) * 1e3 + (double)(t.tv_nsec - t_start.tv_nsec) / 1e6;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	printf("%9.3f ms  %-6s  ", now_ms(), role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void fail(const char *what)
{
	say("ERROR %s: %s", what, errno ? strerror(errno) : "failed");
}

static const char *ev_name(enum rdma_cm_event_type t)
{
	const char *s = rdma_event_str(t);

	return strncmp(s, "RDMA_CM_EVENT_", 14) ? s : s + 14;
}

/* The next CM event (printed), or NULL after EVENT_MS. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, EVENT_MS) != 1) {
		errno = ETIMEDOUT;
		fail("waiting for a CM event");
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		fail("rdma_get_cm_event");
		return NULL;
	}
	if (ev->status)
		say("%s (status %d)", ev_name(ev->event), ev->status);
	else
		say("%s", ev_name(ev->event));
	return ev;
}

/* The next event, which must be of type t (else it is acked, NULL). */
static struct rdma_cm_event *expect_event(struct rdma_event_channel *ch,
					  enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = next_event(ch);

	if (ev && ev->event != t) {
		say("ERROR wanted %s", ev_name(t));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

/* Polls the CQ until wr_id's completion has been seen (others are noted). */
static int wait_wc(struct conn *c, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;
	double t0 = now_ms();
	int n;

	while (!(c->seen & (1ULL << wr_id))) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		if (n < 0) {
			fail("ibv_poll_cq");
			return -1;
		}
		if (n == 0) {
			if (now_ms() - t0 > WC_MS) {
				say("ERROR no completion for %s", what);
				return -1;
			}
			usleep(100);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			say("ERROR completion of wr %llu: %s", (unsigned long long)wc.wr_id,
			    ibv_wc_status_str(wc.status));
			return -1;
		}
		c->seen |= 1ULL << wc.wr_id;
	}
	say("%s completed", what);
	return 0;
}

static int post_recv(struct conn *c, uint64_t wr_id, char *buf)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG_SIZE, .lkey = c->recv_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(c->id->qp, &wr, &bad)) {
		fail("ibv_post_recv");
		return -1;
	}
	return 0;
}

static int post_send(struct conn *c, uint64_t wr_id, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->send_buf, .length = (uint32_t)len,
			       .lkey = c->send_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		fail("ibv_post_send SEND");
		return -1;
	}
	return 0;
}

static int post_write(struct conn *c, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->rdma_buf, .length = len,
			       .lkey = c->rdma_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = WR_WRITE, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(c->id->qp, &wr, &bad)) {
		fail("ibv_post_send RDMA_WRITE");
		return -1;
	}
	return 0;
}

/* PD, CQ, QP and MRs on c->id; both receives posted. */
static int setup_qp(struct conn *c)
{
	struct ibv_qp_init_attr qa;

	if (!(c->pd = ibv_alloc_pd(c->id->verbs))) {
		fail("ibv_alloc_pd");
		return -1;
	}
	if (!(c->cq = ibv_create_cq(c->id->verbs, 16, NULL, NULL, 0))) {
		fail("ibv_create_cq");
		return -1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = c->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	if (rdma_create_qp(c->id, c->pd, &qa)) {
		fail("rdma_create_qp");
		return -1;
	}
	c->recv_mr = ibv_reg_mr(c->pd, c->recv_buf, sizeof(c->recv_buf), IBV_ACCESS_LOCAL_WRITE);
	c->send_mr = ibv_reg_mr(c->pd, c->send_buf, sizeof(c->send_buf), 0);
	c->rdma_mr = ibv_reg_mr(c->pd, c->rdma_buf, sizeof(c->rdma_buf),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->recv_mr || !c->send_mr || !c->rdma_mr) {
		fail("ibv_reg_mr");
		return -1;
	}
	say("QP 0x%x created, 3 MRs registered", c->id->qp->qp_num);
	if (post_recv(c, WR_RECV0, c->recv_buf) || post_recv(c, WR_RECV1, c->recv_buf + MSG_SIZE))
		return -1;
	return 0;
}

/* Everything setup_qp made, then the id. */
static void teardown(struct conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->rdma_mr)
		ibv_dereg_mr(c->rdma_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	c->id = NULL;
	c->rdma_mr = c->send_mr = c->recv_mr = NULL;
	c->cq = NULL;
	c->pd = NULL;
	c->seen = 0;
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + 3);
}

static void set_msg(struct conn *c, const char *s)
{
	snprintf(c->send_buf, sizeof(c->send_buf), "%s", s);
}

/* ---- server ---------------------------------------------------------------------- */

static int run_server(uint16_t port)
{
	static struct conn conn;
	struct conn *c = &conn;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid = NULL;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct sockaddr_in any;
	struct advert adv;
	char pdata[57] = "";
	size_t bad = RDMA_SIZE, i;
	int ok = 0;

	if (!(ch = rdma_create_event_channel())) {
		fail("rdma_create_event_channel");
		return 1;
	}
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP)) {
		fail("rdma_create_id");
		goto out;
	}
	memset(&any, 0, sizeof(any));
	any.sin_family = AF_INET;
	any.sin_port = htons(port);
	if (rdma_bind_addr(lid, (struct sockaddr *)&any) || rdma_listen(lid, 4)) {
		fail("rdma_bind_addr/rdma_listen");
		goto out;
	}
	say("listening on port %u", port);
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST)))
		goto out;
	c->id = ev->id;
	if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
		size_t n = ev->param.conn.private_data_len;

		memcpy(pdata, ev->param.conn.private_data, n < sizeof(pdata) - 1 ? n : sizeof(pdata) - 1);
		pdata[sizeof(pdata) - 1] = 0;
	}
	rdma_ack_cm_event(ev);
	say("  private data: \"%s\"", pdata);
	if (setup_qp(c))
		goto out;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	if (rdma_accept(c->id, &cp)) {
		fail("rdma_accept");
		goto out;
	}
	say("rdma_accept");
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_ESTABLISHED)))
		goto out;
	rdma_ack_cm_event(ev);

	if (wait_wc(c, WR_RECV0, "RECV"))
		goto out;
	say("  got \"%.*s\"", MSG_SIZE, c->recv_buf);
	memset(c->rdma_buf, 0, sizeof(c->rdma_buf));
	adv.addr = htobe64((uintptr_t)c->rdma_buf);
	adv.rkey = htonl(c->rdma_mr->rkey);
	adv.len = htonl(RDMA_SIZE);
	memcpy(c->send_buf, &adv, sizeof(adv));
	say("SEND buffer advert: addr 0x%llx rkey 0x%x len %u",
	    (unsigned long long)(uintptr_t)c->rdma_buf, c->rdma_mr->rkey, RDMA_SIZE);
	if (post_send(c, WR_SEND, sizeof(adv)) || wait_wc(c, WR_SEND, "SEND advert"))
		goto out;
	if (wait_wc(c, WR_RECV1, "RECV"))
		goto out;
	say("  got \"%.*s\"", MSG_SIZE, c->recv_buf + MSG_SIZE);
	for (i = 0; i < RDMA_SIZE; i++)
		if (c->rdma_buf[i] != pattern(i)) {
			bad = i;
			break;
		}
	ok = i == RDMA_SIZE;
	if (ok)
		say("verified %u bytes written by RDMA WRITE", RDMA_SIZE);
	else
		say("ERROR byte %zu is 0x%02x, want 0x%02x", bad, c->rdma_buf[bad], pattern(bad));
	set_msg(c, ok ? "verified" : "mismatch");
	if (post_send(c, WR_SEND2, strlen(c->send_buf) + 1) || wait_wc(c, WR_SEND2, "SEND verdict")) {
		ok = 0;
		goto out;
	}
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_DISCONNECTED))) {
		ok = 0;
		goto out;
	}
	rdma_ack_cm_event(ev);
	rdma_disconnect(c->id); /* answers the DREQ */
out:
	teardown(c);
	if (lid)
		rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	say("torn down; %s", ok ? "success" : "FAILED");
	return ok ? 0 : 1;
}

/* ---- client ---------------------------------------------------------------------- */

/* Resolves and connects c->id; 1 when the peer is not listening (yet). */
static int connect_once(struct conn *c, struct rdma_event_channel *ch, struct sockaddr_in *dst)
{
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	enum rdma_cm_event_type t;
	static const char hello[] = "uscm-rdma-demo hello";

	if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP)) {
		fail("rdma_create_id");
		return -1;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)dst, 2000)) {
		fail("rdma_resolve_addr");
		return -1;
	}
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)))
		return -1;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(c->id, 2000)) {
		fail("rdma_resolve_route");
		return -1;
	}
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)))
		return -1;
	rdma_ack_cm_event(ev);
	if (setup_qp(c))
		return -1;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = hello;
	cp.private_data_len = sizeof(hello);
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(c->id, &cp)) {
		fail("rdma_connect");
		return -1;
	}
	say("rdma_connect, private data \"%s\"", hello);
	if (!(ev = next_event(ch)))
		return -1;
	t = ev->event;
	rdma_ack_cm_event(ev);
	if (t == RDMA_CM_EVENT_ESTABLISHED)
		return 0;
	if (t == RDMA_CM_EVENT_REJECTED || t == RDMA_CM_EVENT_UNREACHABLE)
		return 1;
	say("ERROR wanted ESTABLISHED");
	return -1;
}

static int run_client(const char *addr, uint16_t port)
{
	static struct conn conn;
	struct conn *c = &conn;
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst;
	struct advert adv;
	uint64_t raddr;
	uint32_t rkey, len;
	int ok = 0, r = 1, tries;
	size_t i;

	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &dst.sin_addr) != 1) {
		fprintf(stderr, "uscm-rdma-demo: bad IPv4 address '%s'\n", addr);
		return 2;
	}
	if (!(ch = rdma_create_event_channel())) {
		fail("rdma_create_event_channel");
		return 1;
	}
	/* A server that is not listening yet rejects: try again shortly. */
	for (tries = 0; tries < CONNECT_TRIES; tries++) {
		r = connect_once(c, ch, &dst);
		if (r != 1)
			break;
		teardown(c);
		say("not listening yet: retrying in 100 ms");
		usleep(100 * 1000);
	}
	if (r != 0)
		goto out;

	set_msg(c, "hello from the client");
	say("SEND \"%s\"", c->send_buf);
	if (post_send(c, WR_SEND, strlen(c->send_buf) + 1) || wait_wc(c, WR_SEND, "SEND"))
		goto out;
	if (wait_wc(c, WR_RECV0, "RECV"))
		goto out;
	memcpy(&adv, c->recv_buf, sizeof(adv));
	raddr = be64toh(adv.addr);
	rkey = ntohl(adv.rkey);
	len = ntohl(adv.len);
	say("  advert: addr 0x%llx rkey 0x%x len %u", (unsigned long long)raddr, rkey, len);
	if (len > RDMA_SIZE)
		len = RDMA_SIZE;
	for (i = 0; i < len; i++)
		c->rdma_buf[i] = pattern(i);
	say("RDMA WRITE %u bytes", len);
	if (post_write(c, raddr, rkey, len) || wait_wc(c, WR_WRITE, "RDMA WRITE"))
		goto out;
	set_msg(c, "done");
	say("SEND \"done\"");
	if (post_send(c, WR_SEND2, strlen(c->send_buf) + 1) || wait_wc(c, WR_SEND2, "SEND"))
		goto out;
	if (wait_wc(c, WR_RECV1, "RECV"))
		goto out;
	say("  server says \"%.*s\"", MSG_SIZE, c->recv_buf + MSG_SIZE);
	ok = !strncmp(c->recv_buf + MSG_SIZE, "verified", MSG_SIZE);
	say("rdma_disconnect");
	if (rdma_disconnect(c->id)) {
		fail("rdma_disconnect");
		ok = 0;
		goto out;
	}
	if (!(ev = expect_event(ch, RDMA_CM_EVENT_DISCONNECTED))) {
		ok = 0;
		goto out;
	}
	rdma_ack_cm_event(ev);
out:
	teardown(c);
	rdma_destroy_event_channel(ch);
	say("torn down; %s", ok ? "success" : "FAILED");
	return ok ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: uscm-rdma-demo server [-p PORT]\n"
			"       uscm-rdma-demo client ADDR [-p PORT]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *addr = NULL;
	long port = DEFAULT_PORT;
	char *end;
	int i, server;

	clock_gettime(CLOCK_MONOTONIC, &t_start);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "server"))
		server = 1;
	else if (!strcmp(argv[1], "client"))
		server = 0;
	else
		usage();
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-p") && i + 1 < argc) {
			port = strtol(argv[++i], &end, 0);
			if (*end || port <= 0 || port > 65535)
				usage();
		} else if (!server && !addr && argv[i][0] != '-') {
			addr = argv[i];
		} else {
			usage();
		}
	}
	if (!server && !addr)
		usage();
	role = server ? "server" : "client";
	return server ? run_server((uint16_t)port) : run_client(addr, (uint16_t)port);
}
