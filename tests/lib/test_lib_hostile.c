/*
 * Adversarial peers: a three-node IB fabric where node1 (this
 * process, the client) and node2 (a forked server) hold an established
 * rdma_cm connection, and node3 runs build/bin/uscm-hostile.
 *
 *   - spoofed REJ / DREQ / DREP / RTU / MRA / REP / LAP with the right comm
 *     IDs and QPN (read from the server's USCM_TRACE, as a sniffer would),
 *     near misses, sequential and random guesses, and malformed MADs, at
 *     both ends: the connection keeps transferring, no event reaches either
 *     application, and every MAD is counted as dropped (uscm_get_stats);
 *   - a REQ flood against a listener that does not keep up: bounded by the
 *     id's backlog (excess REJected, counted in backlog_drops) and, below
 *     that, by USCM_MAX_PENDING half-open connections (half_open_drops);
 *   - a MAD with a P_Key the victim's port does not have never reaches it;
 *   - REQs that name one end's peer (its CA GUID and QPN: a "stale
 *     connection") from node3: REJected, and the connection stays up (the
 *     kernel's CM would disconnect it).
 *
 * docs/reliability.md ("Adversarial peers") has the table of outcomes.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/uscm_stats.h>

#include "libtest.h"
#include "sim/simf.h"

#define PORT 7481
#define SID (0x0106ULL << 16 | PORT) /* RDMA_PS_TCP service ID of PORT */
#define NSPOOF 20                    /* exact-ID MADs per attack and end */

static void setup(void)
{
	lt_fabric_start("ib", 3);
	lt_node(1);
	setenv("USCM_TIMEWAIT_MS", "100", 1);
}

TestSuite(hostile, .init = setup, .fini = lt_fini, .timeout = 180);

/* Runs uscm-hostile as node3; returns its summary line (malloc'd). */
static char *hostile(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *hostile(const char *fmt, ...)
{
	char args[512], *out = NULL;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	/* A short pause between MADs: a loaded machine must not lose them in
	 * UDP socket buffers, or the counts below would be off. */
	rc = lt_sh(&out, "USCM_SIM_NODE=node3 %s/uscm-hostile --wait-ms 100 --interval-us 100 %s 2>&1",
		   lt_bin(), args);
	cr_assert_eq(rc, 0, "uscm-hostile %s:\n%s", args, out);
	return out;
}

/* Drops counted by an engine, all kinds together. */
static uint64_t dropped(const struct uscm_stats *s)
{
	return s->rx_malformed + s->rx_stray + s->rx_mismatch + s->rx_duplicate + s->rx_stale +
	       s->rx_no_listener + s->backlog_drops + s->half_open_drops;
}

/* ---- the server (node2, a child: no Criterion asserts there) --------------------- */

enum { SRV_ECHO, SRV_FLOOD };

static char trace_path[512];

/* What the server tells the parent once connected: its QP and CA. */
struct srv_info {
	uint32_t qpn;
	uint64_t guid; /* host order, as the CM puts it in a REQ */
};

/* SRV_ECHO: accept one connection, then echo every message until "quit",
 * failing on any CM event meanwhile; then hand the parent its counters.
 * SRV_FLOOD: listen (backlog 4), never look at events; on the parent's
 * word, hand it the counters. */
static void server(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *cid;
	struct rdma_cm_event *ev;
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct uscm_stats st;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	char buf[64], c;

	lt_node(2);
	if (mode == SRV_ECHO) {
		/* The comm IDs a sniffer would see, for the parent to attack. */
		setenv("USCM_TRACE", "1", 1);
		LT_CK(freopen(trace_path, "w", stderr));
		setvbuf(stderr, NULL, _IONBF, 0);
	}
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) == 0);
	LT_CK(rdma_bind_addr(lid, (struct sockaddr *)&any) == 0);
	LT_CK(rdma_listen(lid, 4) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	if (mode == SRV_FLOOD) {
		LT_CK(read(p->go[0], &c, 1) == 1);
		LT_CK(uscm_get_stats(&st, sizeof(st)) == 0);
		LT_CK(write(p->ready[1], &st, sizeof(st)) == (ssize_t)sizeof(st));
		LT_CK(read(p->go[0], &c, 1) == 1);
		_exit(0);
	}
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	cid = ev->id;
	rdma_ack_cm_event(ev);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
	LT_CK((mr = rdma_reg_msgs(cid, buf, sizeof(buf))));
	LT_CK(rdma_post_recv(cid, NULL, buf, sizeof(buf), mr) == 0);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	LT_CK(rdma_accept(cid, &cp) == 0);
	ev = lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	struct srv_info si = { .qpn = cid->qp->qp_num,
			       .guid = be64toh(ibv_get_device_guid(cid->verbs->device)) };
	LT_CK(write(p->ready[1], &si, sizeof(si)) == (ssize_t)sizeof(si));
	for (;;) {
		int n = ibv_poll_cq(cid->recv_cq, 1, &wc);

		LT_CK(n >= 0);
		if (n == 0) {
			/* Nothing that happens to us may reach the application. */
			ev = lt_event(ch, 1);
			if (ev)
				fprintf(stderr, "server: unexpected %s\n", rdma_event_str(ev->event));
			LT_CK(!ev);
			continue;
		}
		LT_CK(wc.status == IBV_WC_SUCCESS);
		if (!strcmp(buf, "quit"))
			break;
		LT_CK(rdma_post_recv(cid, NULL, buf, sizeof(buf), mr) == 0);
		LT_CK(rdma_post_send(cid, NULL, buf, wc.byte_len, mr, 0) == 0);
		LT_CK(rdma_get_send_comp(cid, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	}
	LT_CK(uscm_get_stats(&st, sizeof(st)) == 0);
	LT_CK(write(p->ready[1], &st, sizeof(st)) == (ssize_t)sizeof(st));
	ev = lt_child_wait(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(ev);
	LT_CK(rdma_disconnect(cid) == 0);
	rdma_dereg_mr(mr);
	rdma_destroy_qp(cid);
	LT_CK(rdma_destroy_id(cid) == 0);
	LT_CK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(ch);
	_exit(0);
}

/* Reads exactly n bytes the child wrote (10 s). */
static void from_child(struct lt_pipes *p, void *buf, size_t n)
{
	struct pollfd pf = { .fd = p->ready[0], .events = POLLIN };
	size_t got = 0;

	while (got < n) {
		cr_assert_eq(poll(&pf, 1, 10000), 1, "the server said nothing");
		ssize_t r = read(p->ready[0], (char *)buf + got, n - got);
		cr_assert_gt(r, 0, "the server died");
		got += (size_t)r;
	}
}

/* ---- the client (node1, this process) ---------------------------------------------- */

struct client {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char buf[128]; /* [0, 64) receives, [64, 128) sends */
	int pings;
};

static void client_connect(struct client *cl)
{
	struct sockaddr_in dst = lt_sin("127.10.0.2", PORT);
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;

	cr_assert((cl->ch = rdma_create_event_channel()));
	cr_assert_eq(rdma_create_id(cl->ch, &cl->id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(cl->id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(cl->ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	cr_assert_eq(rdma_resolve_route(cl->id, 2000), 0);
	rdma_ack_cm_event(lt_expect(cl->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 4000));
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	cr_assert_eq(rdma_create_qp(cl->id, NULL, &qa), 0);
	cr_assert((cl->mr = rdma_reg_msgs(cl->id, cl->buf, sizeof(cl->buf))));
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 6;
	cp.rnr_retry_count = 7;
	cr_assert_eq(rdma_connect(cl->id, &cp), 0);
	rdma_ack_cm_event(lt_expect(cl->ch, RDMA_CM_EVENT_ESTABLISHED, 10000));
}

/* The normal end: DISCONNECTED, the server process (pid) gone, all freed. */
static void client_close(struct client *cl, pid_t pid)
{
	cr_assert_eq(rdma_disconnect(cl->id), 0);
	rdma_ack_cm_event(lt_expect(cl->ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	lt_reap(pid);
	rdma_destroy_qp(cl->id);
	rdma_dereg_mr(cl->mr);
	cr_assert_eq(rdma_destroy_id(cl->id), 0);
	rdma_destroy_event_channel(cl->ch);
}

/* One round trip over the connection, and no CM event for the client. */
static void ping(struct client *cl, const char *why)
{
	struct ibv_wc wc;
	char msg[64];
	struct rdma_cm_event *ev;

	snprintf(msg, sizeof(msg), "ping %d", ++cl->pings);
	memset(cl->buf, 0, sizeof(cl->buf));
	snprintf(cl->buf + 64, 64, "%s", msg);
	cr_assert_eq(rdma_post_recv(cl->id, NULL, cl->buf, 64, cl->mr), 0);
	cr_assert_eq(rdma_post_send(cl->id, NULL, cl->buf + 64, strlen(msg) + 1, cl->mr, 0), 0);
	cr_assert_eq(lt_wait_cq(cl->id->send_cq, &wc, 5000), 1, "after %s: send lost", why);
	cr_assert_eq(wc.status, IBV_WC_SUCCESS, "after %s: send %s", why,
		     ibv_wc_status_str(wc.status));
	cr_assert_eq(lt_wait_cq(cl->id->recv_cq, &wc, 5000), 1, "after %s: no echo", why);
	cr_assert_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_str_eq(cl->buf, msg, "after %s", why);
	ev = lt_event(cl->ch, 0);
	cr_assert_null(ev, "after %s: the client got %s", why, ev ? rdma_event_str(ev->event) : "");
}

/* The server's and the client's comm IDs, from the server's trace. */
static void comm_ids(uint32_t *srv, uint32_t *cli)
{
	char line[512];
	FILE *f = fopen(trace_path, "r");
	int found = 0;

	cr_assert(f, "no server trace %s", trace_path);
	while (fgets(line, sizeof(line), f)) {
		const char *cm = strstr(line, " cm ");
		if (cm && strstr(line, "-> ESTABLISHED") &&
		    sscanf(cm, " cm %x/%x", srv, cli) == 2)
			found = 1;
	}
	fclose(f);
	cr_assert(found, "no ESTABLISHED line in the server's trace");
}

static const char *const spoofs[] = { "rej", "dreq", "drep", "rtu", "mra", "rep", "lap" };

/* Every spoof, with the right IDs then with guesses, at one end. */
static void attack_end(struct client *cl, uint16_t lid, uint32_t victim, uint32_t peer,
		       uint32_t qpn)
{
	static const char *const guesses[] = { "near", "seq", "random" };
	char why[128];

	for (size_t k = 0; k < sizeof(spoofs) / sizeof(spoofs[0]); k++) {
		free(hostile("--dlid %u --count %d %s --victim-id 0x%x --peer-id 0x%x --victim-qpn 0x%x",
			     lid, NSPOOF, spoofs[k], victim, peer, qpn));
		snprintf(why, sizeof(why), "%s with the right IDs at LID %u", spoofs[k], lid);
		ping(cl, why);
		for (size_t gi = 0; gi < 3; gi++)
			free(hostile("--dlid %u --count 30 --seed %zu %s --victim-id 0x%x --peer-id 0x%x "
				     "--victim-qpn 0x%x --guess %s",
				     lid, k * 3 + gi + 2, spoofs[k], victim, peer, qpn, guesses[gi]));
		snprintf(why, sizeof(why), "guessed %s at LID %u", spoofs[k], lid);
		ping(cl, why);
	}
	free(hostile("--dlid %u --count 40 malformed --victim-id 0x%x --peer-id 0x%x", lid, victim,
		     peer));
	snprintf(why, sizeof(why), "malformed MADs at LID %u", lid);
	ping(cl, why);
}

Test(hostile, spoofed_and_malformed_mads_change_nothing)
{
	struct lt_pipes p;
	struct client cl = { 0 };
	struct uscm_stats c0, c1, s1;
	uint32_t srv_id, cli_id, srv_qpn;
	struct srv_info si;
	pid_t pid;

	snprintf(trace_path, sizeof(trace_path), "%s/server.trace", lt_dir);
	pid = lt_spawn(server, SRV_ECHO, &p);
	client_connect(&cl);
	from_child(&p, &si, sizeof(si));
	srv_qpn = si.qpn;
	comm_ids(&srv_id, &cli_id);
	ping(&cl, "connecting");
	cr_assert_eq(uscm_get_stats(&c0, sizeof(c0)), 0);

	/* The server: node2, LID 3. The client: node1, LID 2. */
	attack_end(&cl, 3, srv_id, cli_id, srv_qpn);
	attack_end(&cl, 2, cli_id, srv_id, cl.id->qp->qp_num);

	/* Our progress thread may still be on the last few MADs: give it 5 s
	 * (the counts are checked below either way). */
	lt_wait_until(uscm_get_stats(&c1, sizeof(c1)) == 0 &&
			      c1.rx_mads - c0.rx_mads >= 7 * (NSPOOF + 90) + 28,
		      5000);
	cr_assert_eq(uscm_get_stats(&c1, sizeof(c1)), 0);
	snprintf(cl.buf + 64, 64, "quit");
	cr_assert_eq(rdma_post_send(cl.id, NULL, cl.buf + 64, 5, cl.mr, 0), 0);
	from_child(&p, &s1, sizeof(s1));

	/* Each end: every exact-ID spoof counted as such, and every MAD it
	 * received since the connection came up counted as dropped (the
	 * server's own handshake MADs were REQ and RTU, both acted on). */
	/* (Some of the 40 malformed MADs decode and are spoofs too.) */
	cr_expect(c1.rx_spoofed - c0.rx_spoofed >= 7 * NSPOOF &&
		  c1.rx_spoofed - c0.rx_spoofed <= 7 * NSPOOF + 40,
		  "client rx_spoofed %llu", (unsigned long long)(c1.rx_spoofed - c0.rx_spoofed));
	cr_expect_eq(c1.rx_mads - c0.rx_mads, dropped(&c1) - dropped(&c0),
		     "client: %llu MADs received, %llu counted as dropped",
		     (unsigned long long)(c1.rx_mads - c0.rx_mads),
		     (unsigned long long)(dropped(&c1) - dropped(&c0)));
	/* 40 malformed MADs per end: the port's MAD layer (as the kernel's
	 * validate_mad) drops the 12 with a bad base version, class version
	 * or method; the other 28 reach the CM. */
	cr_expect_eq(c1.rx_mads - c0.rx_mads, 7 * (NSPOOF + 90) + 28, "client rx_mads %llu",
		     (unsigned long long)(c1.rx_mads - c0.rx_mads));
	cr_expect_geq(c1.rx_malformed - c0.rx_malformed, 12);
	cr_expect(s1.rx_spoofed >= 7 * NSPOOF && s1.rx_spoofed <= 7 * NSPOOF + 40,
		  "server rx_spoofed %llu", (unsigned long long)s1.rx_spoofed);
	cr_expect_eq(s1.rx_mads, 2 + 7 * (NSPOOF + 90) + 28, "server rx_mads %llu",
		     (unsigned long long)s1.rx_mads);
	cr_expect_eq(s1.rx_mads - 2, dropped(&s1), "server: %llu MADs, %llu dropped",
		     (unsigned long long)s1.rx_mads, (unsigned long long)dropped(&s1));
	cr_expect_eq(s1.conns_live, 1);
	cr_expect_eq(s1.timeouts, 0);

	/* And it still ends the normal way. */
	client_close(&cl, pid);
}

/* Parses "REJ=n" out of uscm-hostile's summary (0 when absent). */
static unsigned replies_of(const char *out, const char *attr)
{
	char key[32];
	const char *s;

	snprintf(key, sizeof(key), " %s=", attr);
	s = strstr(out, key);
	return s ? (unsigned)strtoul(s + strlen(key), NULL, 10) : 0;
}

#define NSTALE 10 /* stale-connection REQs per end */

/* node3 sends REQs that name one end's peer — its CA GUID and QPN, fresh
 * comm IDs, a service nobody listens on — as if the peer had reconnected
 * its QP. The kernel's CM would DREQ the connection (cm_match_req); uscm
 * acts on that only from the peer's own port: each REQ gets REJ(stale
 * connection), is counted as a spoof, and the connection keeps transferring
 * with no event at either end (docs/cm-engine.md). */
Test(hostile, stale_req_from_a_third_node_keeps_the_connection)
{
	struct lt_pipes p;
	struct client cl = { 0 };
	struct uscm_stats c0, c1, s1;
	struct srv_info si;
	uint64_t cli_guid;
	char *out;
	pid_t pid;

	snprintf(trace_path, sizeof(trace_path), "%s/server.trace", lt_dir);
	pid = lt_spawn(server, SRV_ECHO, &p);
	client_connect(&cl);
	from_child(&p, &si, sizeof(si));
	cli_guid = be64toh(ibv_get_device_guid(cl.id->verbs->device));
	ping(&cl, "connecting");
	cr_assert_eq(uscm_get_stats(&c0, sizeof(c0)), 0);

	/* At the server (LID 3), claiming to be the client; then the reverse. */
	out = hostile("--dlid 3 --count %d --wait-ms 5000 --until %d stale-req --peer-guid 0x%llx"
		      " --peer-qpn 0x%x",
		      NSTALE, NSTALE, (unsigned long long)cli_guid, cl.id->qp->qp_num);
	cr_expect_eq(replies_of(out, "REJ"), NSTALE, "%s", out);
	cr_expect_eq(replies_of(out, "DREQ"), 0, "%s", out);
	free(out);
	ping(&cl, "stale REQs at the server");
	out = hostile("--dlid 2 --count %d --wait-ms 5000 --until %d stale-req --peer-guid 0x%llx"
		      " --peer-qpn 0x%x",
		      NSTALE, NSTALE, (unsigned long long)si.guid, si.qpn);
	cr_expect_eq(replies_of(out, "REJ"), NSTALE, "%s", out);
	free(out);
	ping(&cl, "stale REQs at the client");

	cr_assert_eq(uscm_get_stats(&c1, sizeof(c1)), 0);
	snprintf(cl.buf + 64, 64, "quit");
	cr_assert_eq(rdma_post_send(cl.id, NULL, cl.buf + 64, 5, cl.mr, 0), 0);
	from_child(&p, &s1, sizeof(s1));
	cr_expect_eq(c1.rx_spoofed - c0.rx_spoofed, NSTALE, "client rx_spoofed %llu",
		     (unsigned long long)(c1.rx_spoofed - c0.rx_spoofed));
	cr_expect_eq(c1.rx_stale - c0.rx_stale, 0);
	cr_expect_eq(c1.tx_mads - c0.tx_mads, NSTALE, "client: only the REJs went out");
	cr_expect_eq(s1.rx_spoofed, NSTALE, "server rx_spoofed %llu",
		     (unsigned long long)s1.rx_spoofed);
	cr_expect_eq(s1.rx_stale, 0);
	cr_expect_eq(s1.rx_mads, 2 + NSTALE, "server rx_mads %llu",
		     (unsigned long long)s1.rx_mads);
	cr_expect_eq(s1.conns_live, 1);

	/* It still ends the normal way. */
	client_close(&cl, pid);
}

static void flood(int max_pending, struct uscm_stats *st, unsigned *rejs)
{
	struct lt_pipes p;
	pid_t pid;
	char *out;

	if (max_pending) {
		char v[16];
		snprintf(v, sizeof(v), "%d", max_pending);
		setenv("USCM_MAX_PENDING", v, 1); /* the child inherits it */
	}
	pid = lt_spawn(server, SRV_FLOOD, &p);
	/* Waits (10 s at most) for the answers to all the REQs the victim
	 * cannot keep (REJs): then it has handled every REQ. */
	out = hostile("--dlid 3 --count 200 --wait-ms 10000 --until %d req-flood --sid 0x%llx"
		      " --cma-dst 127.10.0.2",
		      200 - (max_pending ? max_pending : 4), (unsigned long long)SID);
	*rejs = replies_of(out, "REJ");
	free(out);
	cr_assert_eq(write(p.go[1], "s", 1), 1);
	from_child(&p, st, sizeof(*st));
	cr_assert_eq(write(p.go[1], "q", 1), 1);
	lt_reap(pid);
	unsetenv("USCM_MAX_PENDING");
}

/* A listener whose application does not keep up holds at most its backlog
 * (4) of REQs; the rest get a REJ and are counted. */
Test(hostile, req_flood_bounded_by_backlog)
{
	struct uscm_stats st;
	unsigned rejs;

	flood(0, &st, &rejs);
	cr_expect_eq(st.rx_mads, 200);
	cr_expect_eq(st.conns_live, 4, "conns_live %llu", (unsigned long long)st.conns_live);
	cr_expect_eq(st.half_open, 4);
	cr_expect_eq(st.backlog_drops, 196, "backlog_drops %llu",
		     (unsigned long long)st.backlog_drops);
	cr_expect_eq(st.half_open_drops, 0);
	cr_expect_eq(rejs, 196, "the hostile node got %u REJs", rejs);
}

/* USCM_MAX_PENDING caps half-open connections below any backlog. */
Test(hostile, req_flood_bounded_by_max_pending)
{
	struct uscm_stats st;
	unsigned rejs;

	flood(2, &st, &rejs);
	cr_expect_eq(st.rx_mads, 200);
	cr_expect_eq(st.conns_live, 2, "conns_live %llu", (unsigned long long)st.conns_live);
	cr_expect_eq(st.half_open_peak, 2);
	cr_expect_eq(st.half_open_drops, 198, "half_open_drops %llu",
		     (unsigned long long)st.half_open_drops);
	cr_expect_eq(st.backlog_drops, 0);
	cr_expect_eq(rejs, 198, "the hostile node got %u REJs", rejs);
}

/* The port's P_Key table is the HCA's filter: a MAD whose P_Key the victim
 * does not have is dropped below the library (never counted by the CM),
 * the same MAD with the default P_Key reaches the CM (and is refused). */
Test(hostile, wrong_pkey_never_reaches_the_cm)
{
	struct lt_pipes p;
	struct uscm_stats st;
	struct simf *f;
	char d[512];
	pid_t pid;

	snprintf(d, sizeof(d), "%s/f", lt_dir);
	cr_assert((f = simf_attach_node(d, -1)));
	simf_lock(f);
	f->st->nodes[3].pkeys[1] = 0x8123; /* node3 only */
	simf_unlock(f);
	simf_detach(f);
	pid = lt_spawn(server, SRV_FLOOD, &p);
	free(hostile("--dlid 3 --count 10 --pkey-index 1 req-flood --sid 0x%llx --cma-dst 127.10.0.2",
		     (unsigned long long)SID));
	/* An unknown DREQ is answered (DREP): when 3 came, all were handled. */
	free(hostile("--dlid 3 --count 3 --pkey-index 0 --wait-ms 10000 --until 3 dreq"
		     " --victim-id 0x1234"));
	cr_assert_eq(write(p.go[1], "s", 1), 1);
	from_child(&p, &st, sizeof(st));
	cr_assert_eq(write(p.go[1], "q", 1), 1);
	lt_reap(pid);
	cr_expect_eq(st.rx_mads, 3, "rx_mads %llu", (unsigned long long)st.rx_mads);
	cr_expect_eq(st.rx_stray, 3);
	cr_expect_eq(st.conns_live, 0);
}

/* USCM_STATS=FILE: an unmodified program (the rdma_cm demo pair) prints
 * its counters when it exits; USCM_STATS=stderr the same on stderr. */
Test(hostile, stats_printed_at_exit)
{
	char *out = NULL, *cout = NULL, sout[300], sstats[300];
	int st;

	snprintf(sout, sizeof(sout), "%s/server.out", lt_dir);
	snprintf(sstats, sizeof(sstats), "%s/server.stats", lt_dir);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_STATS=%s timeout 60 %s/uscm-rdma-demo"
			   " server -p 7482 >%s 2>&1) >/dev/null 2>&1 &",
			   sstats, lt_bin(), sout),
		     0);
	cr_assert(lt_wait_until(lt_file_has(sout, "listening on port 7482"), 10000),
		  "the server did not listen");
	st = lt_sh(&cout, "USCM_SIM_NODE=node1 USCM_STATS=stderr timeout 60 %s/uscm-rdma-demo client"
			  " 127.10.0.2 -p 7482 2>&1", lt_bin());
	cr_assert_eq(st, 0, "client:\n%s", cout);
	cr_expect(strstr(cout, "uscm-stats rx_mads"), "no counters on stderr:\n%s", cout);
	cr_expect(strstr(cout, "uscm-stats conns_total      1\n"), "%s", cout);
	cr_expect(strstr(cout, "uscm-stats rx_spoofed       0\n"), "%s", cout);
	/* The server exits once the client is gone: its counters follow. */
	lt_wait_until(lt_file_has(sstats, "half_open_peak"), 10000);
	lt_sh(&out, "cat %s 2>/dev/null", sstats);
	cr_expect(out && strstr(out, "uscm-stats pid "), "server stats file:\n%s", out ? out : "");
	cr_expect(out && strstr(out, "uscm-stats rx_mads"), "server stats file:\n%s", out ? out : "");
	cr_expect(out && strstr(out, "uscm-stats half_open_peak   1\n"), "server stats file:\n%s",
		  out ? out : "");
	free(out);
	free(cout);
}

/* uscm_get_stats copies what the caller's struct has room for: an older,
 * smaller struct gets the prefix, a newer, larger one zeros past the end. */
Test(hostile, get_stats_size_is_forward_compatible)
{
	struct uscm_stats s;
	unsigned char big[sizeof(s) + 16], small[2 * sizeof(uint64_t)];

	errno = 0;
	cr_expect_eq(uscm_get_stats(NULL, sizeof(s)), -1);
	cr_expect_eq(errno, EINVAL);
	memset(big, 0xA5, sizeof(big));
	cr_assert_eq(uscm_get_stats((struct uscm_stats *)(void *)big, sizeof(big)), 0);
	for (size_t i = sizeof(s); i < sizeof(big); i++)
		cr_assert_eq(big[i], 0, "byte %zu past the struct not zeroed", i);
	memset(small, 0xA5, sizeof(small));
	memset(&s, 0xA5, sizeof(s));
	cr_assert_eq(uscm_get_stats((struct uscm_stats *)(void *)small, sizeof(small) - 8), 0);
	cr_expect_eq(small[sizeof(small) - 1], 0xA5, "wrote past the size given");
	cr_assert_eq(uscm_get_stats(&s, sizeof(s)), 0);
	cr_expect_eq(memcmp(small, &s, 8), 0, "the prefix differs");
}
