/*
 * uscm-churn: many RC connections through the rdma_cm API, for the fault
 * matrix and the soak test (docs/reliability.md).
 *
 *   uscm-churn server [-p PORT] [--pause-at req|est|dreq] [--quiesce-ms MS]
 *                     [--quiesce-max-ms MS] [-v]
 *   uscm-churn client ADDR [-p PORT] [-n COUNT | -d SECONDS] [-c INFLIGHT]
 *                     [--pause-at connect|est] [--hold] [--stage-ms MS]
 *                     [--rate PER_S] [--quiesce-ms MS] [--quiesce-max-ms MS] [-v]
 *
 * Each client connection: resolve address and route, create a QP, post a
 * receive, connect, SEND 64 bytes, wait for the server's echo and check
 * it, disconnect, destroy. INFLIGHT connections run at once (one event
 * channel, CQs polled), COUNT in all, or new ones for SECONDS (at most
 * PER_S started per second with --rate). Every
 * connection ends in exactly one outcome, counted by category:
 *
 *   ok            established, echo verified, DISCONNECTED status 0
 *   disc_timeout  as ok, but the DREQ went unanswered (DISCONNECTED -ETIMEDOUT)
 *   unreachable   UNREACHABLE -ETIMEDOUT (REQ retries exhausted)
 *   rejected      REJECTED (any reason)
 *   route_timeout ROUTE_ERROR -ETIMEDOUT (the SA did not answer)
 *   route_error   ROUTE_ERROR with another status (the SA answered an error)
 *   addr_error    ADDR_ERROR
 *   conn_error    CONNECT_ERROR
 *   wc_error      a work completion failed (peer gone), then disconnected
 *   data_timeout  no echo within the stage bound, then disconnected
 *   open          (server) still connected when told to stop
 *   peer_closed   (client) the server's side disconnected (DREQ) before the echo:
 *                 its process died and its CM closed for it (uscmd, as the
 *                 kernel when the rdma_cm fd closes)
 *   bad_data      the echo differs from what was sent           (never correct)
 *   hang          an awaited event did not come within --stage-ms (never correct)
 *   other         an event that has no business there, or UNREACHABLE /
 *                 DISCONNECTED with a status other than -ETIMEDOUT (never correct)
 *
 * The server accepts everything, echoes one message per connection,
 * answers DREQs and counts its own outcomes; SIGTERM / SIGINT end it.
 * Both print `RESULT role=... key=value...` on stdout at the end; which
 * outcomes are correct under which fault is the caller's table
 * (tests/lib/test_lib_faults.c). --pause-at makes a side stop at one
 * handshake step (printing `PAUSED step`) so a test can SIGKILL it there.
 * --hold keeps the client's connections up after the echo until a line
 * (or EOF) on stdin (`HOLDING n` says they are all up). Exit status: 0
 * unless bad_data, hang or other occurred (or a setup call failed).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/uscm_stats.h>

#define MSG 64
#define DEFAULT_PORT 7300

enum outcome {
	O_OK, O_DISC_TIMEOUT, O_UNREACHABLE, O_REJECTED, O_ROUTE_TIMEOUT, O_ROUTE_ERROR, O_ADDR_ERROR,
	O_CONN_ERROR, O_WC_ERROR, O_DATA_TIMEOUT, O_OPEN, O_PEER_CLOSED, O_BAD_DATA, O_HANG, O_OTHER,
	O_N
};
static const char *const outcome_name[O_N] = {
	"ok", "disc_timeout", "unreachable", "rejected", "route_timeout", "route_error", "addr_error",
	"conn_error", "wc_error", "data_timeout", "open", "peer_closed", "bad_data", "hang", "other",
};

/* Connection stages: what it waits for. */
enum stage { S_ADDR, S_ROUTE, S_CONNECT, S_DATA, S_HOLD, S_DISC, S_DONE };

struct conn {
	struct conn *next;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	enum stage stage;
	int outcome;          /* -1 until something went wrong */
	int established;      /* server: ESTABLISHED seen or notified */
	int sent, recvd;      /* completions seen */
	uint64_t deadline;    /* of the current stage */
	uint64_t serial;
	struct {
		char recv[MSG];
		char send[MSG];
	} buf;
};

static struct {
	int server, verbose, hold;
	const char *addr;
	uint16_t port;
	long count, inflight, seconds, stage_ms, quiesce_ms, quiesce_max_ms, rate;
	const char *pause_at;
	struct rdma_event_channel *ch;
	struct conn *conns;
	long active, started;
	unsigned long n[O_N];
	unsigned long srv_requests, srv_established, srv_done, srv_notified;
	uint64_t t0;
} g = { .port = DEFAULT_PORT, .count = 1, .inflight = 1, .stage_ms = 30000 };

static volatile sig_atomic_t g_stop;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!g.verbose)
		return;
	fprintf(stderr, "[%6llu ms] ", (unsigned long long)(now_ms() - g.t0));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void die(const char *what)
{
	fprintf(stderr, "uscm-churn: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Stops here for good (the test kills us). */
static void pause_here(const char *step)
{
	if (!g.pause_at || strcmp(g.pause_at, step))
		return;
	printf("PAUSED %s\n", step);
	fflush(stdout);
	for (;;)
		pause();
}

static void stage(struct conn *c, enum stage s)
{
	c->stage = s;
	c->deadline = now_ms() + (uint64_t)g.stage_ms;
}

static void fail(struct conn *c, enum outcome o)
{
	if (c->outcome < 0)
		c->outcome = o;
}

static struct conn *conn_new(void)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		die("calloc");
	c->outcome = -1;
	c->serial = (uint64_t)g.started++;
	c->next = g.conns;
	g.conns = c;
	g.active++;
	return c;
}

/* Frees what the connection holds and counts its outcome. */
static void conn_end(struct conn *c, enum outcome o)
{
	fail(c, o);
	if (c->mr)
		rdma_dereg_mr(c->mr);
	c->mr = NULL;
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
		c->id = NULL;
	}
	g.n[c->outcome]++;
	c->stage = S_DONE;
	g.active--;
	vlog("conn %llu: %s", (unsigned long long)c->serial, outcome_name[c->outcome]);
	if (g.server) {
		/* Tests wait for a connection's end on the server side. */
		printf("END %llu %s\n", (unsigned long long)c->serial, outcome_name[c->outcome]);
		fflush(stdout);
	}
}

static void reap(void)
{
	struct conn **pp = &g.conns, *c;

	while ((c = *pp)) {
		if (c->stage == S_DONE) {
			*pp = c->next;
			free(c);
		} else {
			pp = &c->next;
		}
	}
}

static int setup_qp(struct conn *c)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	if (rdma_create_qp(c->id, NULL, &qa))
		return -1;
	c->mr = rdma_reg_msgs(c->id, &c->buf, sizeof(c->buf));
	if (!c->mr)
		return -1;
	return rdma_post_recv(c->id, (void *)1, c->buf.recv, MSG, c->mr);
}

static void disconnect(struct conn *c)
{
	stage(c, S_DISC);
	if (rdma_disconnect(c->id)) {
		vlog("conn %llu: rdma_disconnect: %s", (unsigned long long)c->serial,
		     strerror(errno));
		conn_end(c, O_OTHER);
	}
}

/* ---- client ----------------------------------------------------------------- */

static void client_start(void)
{
	struct conn *c = conn_new();
	struct addrinfo *ai = NULL, hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	char port[8];

	snprintf(port, sizeof(port), "%u", g.port);
	if (getaddrinfo(g.addr, port, &hints, &ai) || !ai) {
		fprintf(stderr, "uscm-churn: cannot resolve %s\n", g.addr);
		exit(2);
	}
	if (rdma_create_id(g.ch, &c->id, c, RDMA_PS_TCP))
		die("rdma_create_id");
	stage(c, S_ADDR);
	if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, 2000)) {
		freeaddrinfo(ai);
		conn_end(c, O_ADDR_ERROR);
		return;
	}
	freeaddrinfo(ai);
}

static void client_event(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;
	enum rdma_cm_event_type t = ev->event;
	int status = ev->status;
	struct rdma_conn_param cp;

	rdma_ack_cm_event(ev);
	vlog("conn %llu: %s status %d", (unsigned long long)c->serial, rdma_event_str(t), status);
	switch (t) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (c->stage != S_ADDR)
			break;
		stage(c, S_ROUTE);
		if (rdma_resolve_route(c->id, 2000))
			conn_end(c, O_ROUTE_ERROR);
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (c->stage != S_ROUTE)
			break;
		if (setup_qp(c)) {
			fprintf(stderr, "uscm-churn: conn %llu: QP setup: %s\n",
				(unsigned long long)c->serial, strerror(errno));
			conn_end(c, O_OTHER);
			return;
		}
		memset(&cp, 0, sizeof(cp));
		cp.responder_resources = cp.initiator_depth = 1;
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		stage(c, S_CONNECT);
		if (rdma_connect(c->id, &cp)) {
			/* Refused at once (say, the port went down): counted with
			 * the CONNECT_ERRORs, said on stderr. */
			fprintf(stderr, "uscm-churn: conn %llu: rdma_connect: %s\n",
				(unsigned long long)c->serial, strerror(errno));
			conn_end(c, O_CONN_ERROR);
			return;
		}
		pause_here("connect");
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (c->stage != S_CONNECT)
			break;
		pause_here("est");
		snprintf(c->buf.send, MSG, "churn %d %llu", (int)getpid(),
			 (unsigned long long)c->serial);
		stage(c, S_DATA);
		if (rdma_post_send(c->id, (void *)2, c->buf.send, MSG, c->mr, IBV_SEND_SIGNALED)) {
			fail(c, O_WC_ERROR);
			disconnect(c);
		}
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (c->stage == S_DISC) {
			conn_end(c, status == 0 ? O_OK : status == -ETIMEDOUT ? O_DISC_TIMEOUT : O_OTHER);
			return;
		}
		if (c->stage == S_DATA || c->stage == S_HOLD) {
			/* The server never disconnects first by itself; a clean DREQ
			 * comes from its CM when its process died (peer_closed). */
			conn_end(c, status == 0 ? O_PEER_CLOSED : O_OTHER);
			return;
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		conn_end(c, O_ADDR_ERROR);
		return;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		conn_end(c, status == -ETIMEDOUT ? O_ROUTE_TIMEOUT : O_ROUTE_ERROR);
		return;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (c->stage == S_CONNECT && status == -ETIMEDOUT) {
			conn_end(c, O_UNREACHABLE);
			return;
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (c->stage == S_CONNECT) {
			conn_end(c, O_REJECTED);
			return;
		}
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		conn_end(c, O_CONN_ERROR);
		return;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return;
	default:
		break;
	}
	fprintf(stderr, "uscm-churn: conn %llu: unexpected %s (status %d) in stage %d\n",
		(unsigned long long)c->serial, rdma_event_str(t), status, c->stage);
	if (c->stage == S_CONNECT || c->stage == S_ADDR || c->stage == S_ROUTE)
		conn_end(c, O_OTHER);
	else
		fail(c, O_OTHER);
}

/* Polls the CQs of a connection in S_DATA. */
static void client_poll(struct conn *c)
{
	struct ibv_wc wc;
	struct ibv_cq *cqs[2] = { c->id->send_cq, c->id->recv_cq };

	for (int k = 0; k < 2; k++) {
		if (k == 1 && cqs[1] == cqs[0])
			break;
		while (c->stage == S_DATA && ibv_poll_cq(cqs[k], 1, &wc) == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				vlog("conn %llu: wc %s", (unsigned long long)c->serial,
				     ibv_wc_status_str(wc.status));
				fail(c, O_WC_ERROR);
				disconnect(c);
				return;
			}
			if (wc.wr_id == 2)
				c->sent = 1;
			else if (wc.wr_id == 1)
				c->recvd = 1;
		}
	}
	if (c->stage == S_DATA && c->sent && c->recvd) {
		if (memcmp(c->buf.recv, c->buf.send, MSG))
			fail(c, O_BAD_DATA);
		if (g.hold) {
			stage(c, S_HOLD);
			c->deadline = UINT64_MAX;
		} else {
			disconnect(c);
		}
	}
}

/* --rate: no more than that many connections started per second. */
static int rate_allows(void)
{
	return g.rate <= 0 || (uint64_t)g.started * 1000 <= (now_ms() - g.t0) * (uint64_t)g.rate;
}

static int client_want_more(void)
{
	if (g.seconds > 0)
		return now_ms() - g.t0 < (uint64_t)g.seconds * 1000;
	return g.started < g.count;
}

static int all_held(void)
{
	for (struct conn *c = g.conns; c; c = c->next)
		if (c->stage != S_HOLD && c->stage != S_DONE)
			return 0;
	return 1;
}

static void drain_events(void (*handle)(struct rdma_cm_event *))
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(g.ch, &ev) == 0)
		handle(ev);
	if (errno != EAGAIN)
		die("rdma_get_cm_event");
}

static void check_deadlines(void)
{
	uint64_t now = now_ms();

	for (struct conn *c = g.conns; c; c = c->next) {
		if (c->stage == S_DONE || now < c->deadline)
			continue;
		if (c->stage == S_DATA) {
			fail(c, O_DATA_TIMEOUT);
			disconnect(c);
		} else {
			fprintf(stderr, "uscm-churn: conn %llu: no event within %ld ms in stage %d\n",
				(unsigned long long)c->serial, g.stage_ms, c->stage);
			conn_end(c, O_HANG);
		}
	}
}

static int run_client(void)
{
	int holding = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = g.ch->fd, .events = POLLIN }, { .fd = 0 } };
		int np = 1;

		while (client_want_more() && rate_allows() && g.active < g.inflight && !holding)
			client_start();
		if (!g.active && !client_want_more())
			break;
		if (g.hold && !holding && !client_want_more() && all_held()) {
			printf("HOLDING %ld\n", g.active);
			fflush(stdout);
			holding = 1;
		}
		if (holding) {
			p[1].events = POLLIN;
			np = 2;
		}
		poll(p, (nfds_t)np, 2);
		drain_events(client_event);
		for (struct conn *c = g.conns; c; c = c->next)
			if (c->stage == S_DATA)
				client_poll(c);
		if (holding && (p[1].revents & (POLLIN | POLLHUP))) {
			char line[64];

			if (read(0, line, sizeof(line)) < 0) {
				/* EOF or error: let go either way */
			}
			for (struct conn *c = g.conns; c; c = c->next)
				if (c->stage == S_HOLD)
					disconnect(c);
			holding = 0;
			g.hold = 0;
		}
		check_deadlines();
		reap();
	}
	return 0;
}

/* ---- server ----------------------------------------------------------------- */

static struct rdma_cm_id *g_listen;
static void server_poll(struct conn *c);

static void server_event(struct rdma_cm_event *ev)
{
	enum rdma_cm_event_type t = ev->event;
	int status = ev->status;
	struct conn *c;
	struct rdma_conn_param cp;

	if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct rdma_cm_id *id = ev->id;

		rdma_ack_cm_event(ev);
		g.srv_requests++;
		pause_here("req");
		c = conn_new();
		c->id = id;
		id->context = c;
		vlog("conn %llu: CONNECT_REQUEST", (unsigned long long)c->serial);
		if (setup_qp(c)) {
			fprintf(stderr, "uscm-churn: server conn %llu: QP setup: %s\n",
				(unsigned long long)c->serial, strerror(errno));
			conn_end(c, O_OTHER);
			return;
		}
		memset(&cp, 0, sizeof(cp));
		cp.responder_resources = cp.initiator_depth = 1;
		cp.rnr_retry_count = 7;
		stage(c, S_DATA);
		c->deadline = UINT64_MAX; /* the client decides how long it takes */
		if (rdma_accept(id, &cp)) {
			vlog("rdma_accept: %s", strerror(errno));
			/* EINVAL: the client withdrew its request (REJ) before we
			 * answered — its REJECTED event follows on this id */
			if (errno != EINVAL)
				conn_end(c, O_OTHER);
		}
		return;
	}
	c = ev->id->context;
	rdma_ack_cm_event(ev);
	if (!c) /* the listener */
		return;
	vlog("conn %llu: %s status %d", (unsigned long long)c->serial, rdma_event_str(t), status);
	switch (t) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->established)
			g.srv_established++;
		c->established = 1;
		pause_here("est");
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		pause_here("dreq");
		/* Answers the DREQ (DREP), or is a no-op after our own. */
		rdma_disconnect(c->id);
		server_poll(c); /* completions may be behind the event */
		conn_end(c, c->recvd ? O_OK : status == -ETIMEDOUT ? O_DISC_TIMEOUT
					 : status ? O_OTHER : O_DATA_TIMEOUT);
		return;
	case RDMA_CM_EVENT_UNREACHABLE:
		conn_end(c, status == -ETIMEDOUT ? O_UNREACHABLE : O_OTHER);
		return;
	case RDMA_CM_EVENT_REJECTED:
		conn_end(c, O_REJECTED);
		return;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		conn_end(c, O_CONN_ERROR);
		return;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return;
	default:
		fprintf(stderr, "uscm-churn: server conn %llu: unexpected %s (status %d)\n",
			(unsigned long long)c->serial, rdma_event_str(t), status);
		fail(c, O_OTHER);
		return;
	}
}

/* Echo: the first receive is sent back. Data before the RTU means the RTU
 * was lost: tell the CM (what the HCA's COMM_EST event is for). */
static void server_poll(struct conn *c)
{
	struct ibv_wc wc;
	struct ibv_cq *cqs[2] = { c->id->send_cq, c->id->recv_cq };

	for (int k = 0; k < 2; k++) {
		if (k == 1 && cqs[1] == cqs[0])
			break;
		while (ibv_poll_cq(cqs[k], 1, &wc) == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				/* A flush is the QP moved to ERROR by the CM (a
				 * disconnect before the echo's ACK, a REP that timed
				 * out): the CM event that did it tells the outcome. */
				if (wc.status != IBV_WC_WR_FLUSH_ERR)
					fail(c, O_WC_ERROR);
				continue;
			}
			if (wc.wr_id == 1 && !c->recvd) {
				c->recvd = 1;
				if (!c->established) {
					g.srv_notified++;
					rdma_notify(c->id, IBV_EVENT_COMM_EST);
				}
				pause_here("est"); /* established by the data */
				memcpy(c->buf.send, c->buf.recv, MSG);
				if (rdma_post_send(c->id, (void *)2, c->buf.send, MSG, c->mr,
						   IBV_SEND_SIGNALED))
					fail(c, O_WC_ERROR);
			} else if (wc.wr_id == 2) {
				c->sent = 1;
			}
		}
	}
}

static void on_term(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int run_server(void)
{
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(g.port) };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (rdma_create_id(g.ch, &g_listen, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(g_listen, (struct sockaddr *)&any))
		die("rdma_bind_addr");
	if (rdma_listen(g_listen, 1024))
		die("rdma_listen");
	printf("READY\n");
	fflush(stdout);
	while (!g_stop) {
		struct pollfd p = { .fd = g.ch->fd, .events = POLLIN };

		poll(&p, 1, 2);
		drain_events(server_event);
		for (struct conn *c = g.conns; c; c = c->next)
			if (c->stage != S_DONE && c->id && c->id->qp)
				server_poll(c);
		reap();
	}
	/* Whatever is still open is torn down (a DREQ / REJ goes out). */
	for (struct conn *c = g.conns; c; c = c->next)
		if (c->stage != S_DONE)
			conn_end(c, O_OPEN);
	reap();
	rdma_destroy_id(g_listen);
	return 0;
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: uscm-churn server [-p PORT] [--pause-at req|est|dreq] [--quiesce-ms MS]\n"
		"                  [--quiesce-max-ms MS] [-v]\n"
		"       uscm-churn client ADDR [-p PORT] [-n COUNT | -d SECONDS] [-c INFLIGHT]\n"
		"                  [--pause-at connect|est] [--hold] [--stage-ms MS]\n"
		"                  [--rate PER_S] [--quiesce-ms MS] [--quiesce-max-ms MS] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int i = 2, bad;

	if (argc < 2)
		usage();
	g.t0 = now_ms();
	if (!strcmp(argv[1], "server")) {
		g.server = 1;
	} else if (!strcmp(argv[1], "client") && argc >= 3) {
		g.addr = argv[2];
		i = 3;
	} else {
		usage();
	}
	for (; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-v")) {
			g.verbose = 1;
			continue;
		}
		if (!strcmp(a, "--hold")) {
			g.hold = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "-p"))
			g.port = (uint16_t)atoi(v);
		else if (!strcmp(a, "-n"))
			g.count = atol(v);
		else if (!strcmp(a, "-d"))
			g.seconds = atol(v);
		else if (!strcmp(a, "-c"))
			g.inflight = atol(v);
		else if (!strcmp(a, "--stage-ms"))
			g.stage_ms = atol(v);
		else if (!strcmp(a, "--rate"))
			g.rate = atol(v);
		else if (!strcmp(a, "--quiesce-ms"))
			g.quiesce_ms = atol(v);
		else if (!strcmp(a, "--quiesce-max-ms"))
			g.quiesce_max_ms = atol(v);
		else if (!strcmp(a, "--pause-at"))
			g.pause_at = v;
		else
			usage();
	}
	if (g.inflight < 1 || g.stage_ms < 1)
		usage();
	g.ch = rdma_create_event_channel();
	if (!g.ch)
		die("rdma_create_event_channel");
	if (fcntl(g.ch->fd, F_SETFL, fcntl(g.ch->fd, F_GETFL) | O_NONBLOCK) < 0)
		die("fcntl");
	if (g.server)
		run_server();
	else
		run_client();
	rdma_destroy_event_channel(g.ch);
	/* Let the engine finish (DREQ retries, TimeWait) so the library's exit
	 * report (USCM_EXIT_REPORT) shows a quiescent state: --quiesce-ms is
	 * always waited (the server stays to answer the peer's DREQ retries);
	 * then, up to --quiesce-max-ms in all, until the engines hold no
	 * connection. A fixed wait alone was a bet on the machine's load: on a
	 * loaded one the client's TimeWaits outlived 500 ms. */
	if (g.quiesce_ms > 0)
		usleep((useconds_t)g.quiesce_ms * 1000);
	for (long waited = g.quiesce_ms; waited < g.quiesce_max_ms; waited += 20) {
		struct uscm_stats st;

		if (uscm_get_stats(&st, sizeof(st)) < 0 || st.conns_live == 0)
			break;
		usleep(20 * 1000);
	}
	bad = g.n[O_BAD_DATA] + g.n[O_HANG] + g.n[O_OTHER] > 0;
	printf("RESULT role=%s", g.server ? "server" : "client");
	if (g.server)
		printf(" requests=%lu established=%lu notified=%lu", g.srv_requests,
		       g.srv_established, g.srv_notified);
	else
		printf(" attempts=%ld", g.started);
	for (int k = 0; k < O_N; k++)
		printf(" %s=%lu", outcome_name[k], g.n[k]);
	/* Live heap bytes (malloc's own count, fragmentation excluded): what a
	 * leak of reachable memory would grow. */
	struct mallinfo2 mi = mallinfo2();
	printf(" heap_in_use=%zu heap_arena=%zu heap_mmap=%zu ms=%llu\n", mi.uordblks, mi.arena,
	       mi.hblkhd, (unsigned long long)(now_ms() - g.t0));
	fflush(stdout);
	return bad;
}
