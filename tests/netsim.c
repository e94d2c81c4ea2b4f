/*
 * netsim.c - deterministic network simulation of CM engines (see netsim.h).
 *
 * ---- Invariants --------------------------------------------------------------
 *
 * Online (while running):
 *   O1  every call the application makes because its view (the model below)
 *       says it is valid succeeds; calls made on purpose in a state where
 *       they are invalid ("probes") fail with EINVAL and emit no MAD and no
 *       event;
 *   O2  every event names a live connection of this node (its ctx and conn
 *       pointer match a record the application has not destroyed), or is a
 *       REQ_RECEIVED / SIDR_REQ_RECEIVED from this node's listener;
 *   O3  what arrives is what was sent: REQ private data, QPN, PSN, service
 *       ID, MTU, transport and packet lifetime; REP private data, QPN, PSN
 *       and the comm ID of the passive connection that sent it; REJ / SIDR
 *       private data, SIDR status, QPN and QKey;
 *   O4  after every event and call the engine's state of that connection is
 *       one the model allows (e.g. TIMEWAIT while the model waits for
 *       TIMEWAIT_EXIT);
 *   O5  once both sides are established, their QP attributes (taken when
 *       each became established) agree: RTR dest QPN is the peer's QPN, each
 *       RQ PSN is the peer's SQ PSN and one of the two PSNs the applications
 *       gave, path MTUs match, RDMA read depth never exceeds the peer's
 *       responder resources;
 *   O6  every MAD goes to an existing LID, QP1, QKey 0x80010000, with a GRH
 *       on routed paths; virtual time never goes back; no timer is due in
 *       the past; the run quiesces (no packet, timer or action left) within
 *       600 s of virtual time and 2e7 steps;
 *   O7  at quiescence, on every engine: conn_count == 0, timer_count == 0,
 *       the internal indexes (by_local, by_remote, by_qpn, by_sidr) are
 *       empty, no listener counts pending REQs, no queued MAD or event;
 *       rx_malformed == 0 (the network never corrupts a MAD); in fault-free
 *       runs with no passive side that saw a REQ twice, rx_mismatch == 0;
 *   O8  a REJ or MRA answering the REQ (message rejected / MRAed = REQ)
 *       from the node the REQ went to ends (REJ) or extends (MRA) a connect
 *       still in REQ_SENT / MRA_REQ_RCVD, whatever comm IDs the engine
 *       learned meanwhile; once the REP is in, such a REJ changes nothing.
 *
 * Log checker (ns_sim_check, after the run, from the recorded log only):
 *   C1  per connection, the sequence of calls and events follows the
 *       grammar of model_step(): after connect only MRA_RECEIVED* then
 *       exactly one of REP_RECEIVED | REJ_RECEIVED | REQ_ERROR; after accept
 *       MRA_RECEIVED* then exactly one of RTU_RECEIVED | USER_ESTABLISHED
 *       (right after a cmp_notify that returned 0) | REJ_RECEIVED |
 *       REP_ERROR | DREQ_RECEIVED; after a disconnect that sends a DREQ
 *       exactly one of DREP_RECEIVED | DREQ_ERROR | DREQ_RECEIVED; each
 *       entry into TimeWait (REJ_RECEIVED after the REP or of a stale
 *       connection, DREP_RECEIVED, DREQ_ERROR, the DREP the user sends,
 *       reject after accept) exactly one TIMEWAIT_EXIT; after sidr_req
 *       exactly one of SIDR_REP_RECEIVED | SIDR_REQ_ERROR; rtu, reject, mra,
 *       sidr_rep and notify-after-RTU get no event; an established
 *       connection gets DREP_RECEIVED / DREQ_ERROR without a disconnect
 *       only when the engine may have sent a stale-connection DREQ (peer
 *       node restarted, or peer QPN reused); nothing after destroy or after
 *       the node restarted;
 *   C2  every call that starts an exchange got its terminal event unless
 *       the application destroyed the connection first: applications
 *       destroy right after the terminal event (and give up on an
 *       established connection nobody disconnects after 2.3 s), so a record
 *       still open at quiescence means a missing terminal event;
 *   C3  timers fire exactly when they must: REQ_ERROR / REP_ERROR at
 *       start + (retries+1) * base, where every MRA_RECEIVED moves the
 *       running deadline to arrival + cap(service timeout + base) without
 *       consuming a retry (retries it slept through are consumed first);
 *       DREQ_ERROR at disconnect + (retries+1) * base; SIDR_REQ_ERROR at
 *       sidr_req + (retries+1) * cap(timeout); TIMEWAIT_EXIT at entry +
 *       timewait_ns or cap(conv(local ACK timeout)); base = cap(2 *
 *       conv(lifetime) + conv(peer's response timeout)) with the passive
 *       side's lifetime taken from the REQ's ACK timeout - 1;
 *   C4  the outcomes of the two sides of each attempt form an allowed pair
 *       (pair_table: always / only with a fault or a race / never), a
 *       passive connection that is not the active side's partner (a "ghost"
 *       created by a duplicate REQ after the first passive connection let
 *       go) never becomes established, established pairs agree on comm IDs,
 *       a SIDR status comes from some passive side (or is 1 / 2);
 *   C5  attempts with no fault (no packet of theirs lost, cut by a
 *       partition or delayed beyond the timeouts; no restart of either
 *       node) and no race (slow, reject-after-accept or abandoning
 *       application, listener flap, max_conns, QPN reuse, ghost passive
 *       connection, MRA wait cut short by max_timer_ns) end exactly as the
 *       applications decided (expect_clean()), and a disconnect there is
 *       always answered (DREP or crossing DREQ, never DREQ_ERROR).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_engine_int.h" /* quiescence audits only (O7) */
#include "tests/netsim.h"

/* The engine once capped the wait an MRA asks for at max_timer_ns (a spec
 * deviation this simulation found; see netsim_bugs::mra_wait_capped_by_max_timer).
 * 0 (now): expect the full service timeout. 1: model the old capped engine,
 * counting an attempt whose MRA wait is cut short as a timing race. */
#ifndef NS_MRA_WAIT_CAPPED
#define NS_MRA_WAIT_CAPPED 0
#endif

#define NS_US ((cmp_time)1000)
#define NS_MS ((cmp_time)1000000)
#define NS_S ((cmp_time)1000000000)
/* "Tie" scenarios put every time on a 2^16 ns grid (timer bases of
 * 2^20 * k are on it too), so packets, timers and applications meet at the
 * same nanosecond; a packet still takes at least one step. */
#define NS_Q ((cmp_time)1 << 16)

/* ---- PRNG ------------------------------------------------------------------- */

static uint64_t sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? sm64(s) % n : 0;
}

static uint64_t range(uint64_t *s, uint64_t lo, uint64_t hi) /* inclusive */
{
	return lo + below(s, hi - lo + 1);
}

static int chance(uint64_t *s, double p)
{
	if (p <= 0)
		return 0;
	return (double)(sm64(s) >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* ---- names ------------------------------------------------------------------- */

static const char *const prof_names[NS_PROF_COUNT] = {
	"clean", "loss", "dup", "reorder", "delay", "partition", "restart", "mixed",
};

const char *ns_profile_str(int p)
{
	if (p == NS_PROF_CUSTOM)
		return "custom";
	return p >= 0 && p < NS_PROF_COUNT ? prof_names[p] : "?";
}

int ns_profile_parse(const char *s)
{
	char *end;
	long v;

	for (int i = 0; i < NS_PROF_COUNT; i++)
		if (!strcmp(s, prof_names[i]))
			return i;
	if (!strcmp(s, "auto"))
		return NS_PROF_AUTO;
	if (!strcmp(s, "custom"))
		return NS_PROF_CUSTOM;
	v = strtol(s, &end, 10);
	if (*s && !*end && v >= 0 && v < NS_PROF_COUNT)
		return (int)v;
	return -2;
}

const char *ns_call_str(int c)
{
	static const char *const n[NS_C_COUNT] = {
		"connect", "accept", "reject", "mra", "rtu", "notify",
		"disconnect", "sidr_req", "sidr_rep", "destroy",
	};
	return c >= 0 && c < NS_C_COUNT ? n[c] : "?";
}

/* ---- model of one connection as its application sees it ----------------------- */

enum mst {
	MS_NEW, MS_CONNECTING, MS_GOT_REP, MS_REQ_RCVD, MS_ACCEPTED, MS_EST, MS_DISC,
	MS_DREQ_RCVD, MS_TW, MS_CLOSED, MS_SIDR_SENT, MS_SIDR_RCVD, MS_GONE, MS_CRASHED,
	MS_COUNT
};

static const char *mst_str(int s)
{
	static const char *const n[MS_COUNT] = {
		"NEW", "CONNECTING", "GOT_REP", "REQ_RCVD", "ACCEPTED", "EST", "DISC",
		"DREQ_RCVD", "TW", "CLOSED", "SIDR_SENT", "SIDR_RCVD", "GONE", "CRASHED",
	};
	return s >= 0 && s < MS_COUNT ? n[s] : "?";
}

/* Outcome classes (C4). A_* active, P_* passive, S_* SIDR. */
enum cls {
	C_OPEN,
	A_REQ_ERROR, A_REJ_REQ, A_REJ_REP, A_SELF_REJ, A_EST_REJ, A_EST_DISC, A_ABANDON_PRE,
	A_ABANDON_EST,
	P_NONE, P_APP_REJ, P_REJ_REQ, P_REP_ERROR, P_REJ_REP, P_EST_DISC, P_EST_REJ,
	P_ABANDON_PRE, P_ABANDON_EST, P_REJ_ACCEPTED,
	S_REP, S_ERR, S_ABANDON, S_REPLIED,
	C_CRASH, C_NOMEM,
	C_COUNT
};

static const char *cls_str(int c)
{
	static const char *const n[C_COUNT] = {
		"OPEN",
		"A_REQ_ERROR", "A_REJ_REQ", "A_REJ_REP", "A_SELF_REJ", "A_EST_REJ", "A_EST_DISC",
		"A_ABANDON_PRE", "A_ABANDON_EST",
		"P_NONE", "P_APP_REJ", "P_REJ_REQ", "P_REP_ERROR", "P_REJ_REP", "P_EST_DISC",
		"P_EST_REJ", "P_ABANDON_PRE", "P_ABANDON_EST", "P_REJ_ACCEPTED",
		"S_REP", "S_ERR", "S_ABANDON", "S_REPLIED",
		"CRASH", "NOMEM",
	};
	return c >= 0 && c < C_COUNT ? n[c] : "?";
}

/* How an established connection was closed. */
enum disc_how { D_NONE, D_DREP, D_DREQ_ERROR, D_CROSS, D_PASSIVE, D_UNSOLICITED };

struct ns_model {
	uint8_t st;             /* enum mst */
	uint8_t cls;            /* enum cls, once decided */
	uint8_t how;            /* enum disc_how */
	uint8_t disc_by_call;   /* DISC entered by the user's disconnect */
	uint8_t notify_pending; /* cmp_notify returned 0 in ACCEPTED: USER_ESTABLISHED due */
	uint8_t got_rep, rtu, est, app_rej_seen;
	uint8_t tm_on, tm_left;
	int16_t reason;         /* REJ reason / SIDR status received */
	cmp_time tm_dl, tm_base;
	cmp_time tw_dl;
	uint32_t peer_crashes;  /* the peer node's restart count when first seen */
	uint8_t seen;
};

/* ---- the simulation's state --------------------------------------------------------- */

enum role { R_ACT, R_PAS, R_SACT, R_SPAS };

/* Server (passive application) plans. */
enum { SP_ACCEPT, SP_MRA_ACCEPT, SP_ACCEPT_LATE, SP_REJECT, SP_REJECT_LATE, SP_ACCEPT_REJ };
/* Client plans for a REP. */
enum { CP_RTU, CP_MRA_RTU, CP_RTU_LATE, CP_REJECT };
/* Who disconnects. */
enum { DP_CLIENT, DP_SERVER, DP_BOTH };
/* SIDR server plans. */
enum { SS_REPLY, SS_REPLY_LATE, SS_DESTROY };

struct ns_att {
	int kind;               /* 0 connection, 1 SIDR */
	int client, server;
	cmp_time start;
	uint64_t sid;
	int no_listener;
	/* REQ parameters */
	uint8_t plt, local_rt, remote_rt, retries, rr, id, mtu, qp_type;
	uint32_t psn;
	uint8_t pd[CMP_REQ_PDATA];
	uint8_t pdlen;
	/* effective values (what the engine must use) */
	uint8_t eff_lrt, eff_rrt, eff_retries;
	/* SIDR */
	uint8_t sidr_retries;
	cmp_time sidr_timeout;
	/* plans */
	int srv, cli, disc, sidr_plan, sidr_status;
	int notify, late_answer, a_abandon, p_abandon;
	cmp_time srv_delay, cli_delay, hold, answer_delay, a_abandon_after, p_abandon_after;
	cmp_time both_at;       /* DP_BOTH: when both sides disconnect */
	/* what happened */
	int faulted, racy;
	int a_rec;              /* -1 before connect */
	int first_p;            /* first passive record, -1: none */
	int np;                 /* passive records */
};

struct ns_rec {
	int node, peer, att, epoch;
	uint8_t role;
	uint8_t gone, crashed, ghost, watchdog;
	uint8_t stale_ok;       /* the peer reused our peer QPN: engine DREQ possible */
	uint8_t nomem_ok;       /* the node has a tiny max_conns: connect may fail */
	struct cmp_conn *c;
	uint32_t local_id, remote_id;
	uint32_t qpn, psn;
	uint8_t rr, id;
	cmp_time created;
	/* timer parameters the engine must use (C3) */
	cmp_time base, cap, tw_pre, tw_post;
	uint8_t retries;
	/* passive: plan for this record (ghosts draw their own) */
	int srv;
	int has_qp;
	struct ibv_qp_attr rtr, rts;  /* when established (O5) */
	/* SIDR passive: what we answered */
	uint8_t sidr_status;
	uint32_t sidr_qpn, sidr_qkey;
	int replied;
	struct ns_model m;      /* the application's view (online) */
};

struct ns_node {
	struct ns_sim *sim;
	int idx;
	struct cmp_engine *e;
	struct cmp_settings s;
	struct cmp_listen *l;
	uint64_t sid;
	uint64_t guid;
	uint8_t gid[16];
	int epoch;
	uint32_t qpn_next;
	int limited_backlog;
	int limited_conns;      /* tiny max_conns: allocation failures */
	int flaps;              /* the listener goes away for a while */
	cmp_time flap_at, flap_len;
	uint32_t freed[16];     /* QPNs of destroyed active connections */
	int nfreed;
	uint32_t reused[16];    /* QPNs handed out again */
	int nreused;
	struct cmp_stats acc;   /* stats of engines freed by restarts */
};

struct ns_pkt {
	cmp_time t;
	uint64_t seq;
	int src, dst, att;
	uint8_t mad[CMP_MAD_SIZE];
};

enum act_kind {
	ACT_CONNECT, ACT_SIDR, ACT_SRV, ACT_SRV_ACCEPT, ACT_SRV_REJECT, ACT_CLI, ACT_CLI_RTU,
	ACT_DATA, ACT_DISC, ACT_ANSWER, ACT_DESTROY, ACT_ABANDON, ACT_RESTART, ACT_SIDR_REPLY,
	ACT_WATCHDOG, ACT_SRV_UNDO, ACT_LISTEN_DOWN, ACT_LISTEN_UP,
};

struct ns_act {
	cmp_time t;
	uint64_t seq;
	int kind, node, rec;
};

#define NS_MAX_NODES 8

struct ns_sim {
	struct ns_opts o;
	int profile;
	struct ns_faults f;
	uint64_t rg, rn, ra;    /* PRNG streams: generation, network, applications */
	int n;
	struct ns_node nodes[NS_MAX_NODES];
	int grh;
	cmp_time now, tlimit;
	uint64_t steps;
	uint64_t seq;
	struct ns_att *att;
	int natt;
	struct ns_rec *rec;
	int nrec, caprec;
	struct ns_pkt *pq;
	size_t npq, cappq;
	struct ns_act *aq;
	size_t naq, capaq;
	struct ns_logent *log;
	size_t nlog, caplog;
	uint64_t hash;
	int violations;
	char report[2048];
	size_t rlen;
	struct ns_counts cnt;
	cmp_time fast_max, late_max, hold_max, base_hint;
	int tie;                /* times on the NS_Q grid: packets meet timers */
	int in_engine;          /* inside an engine call (trace callback context) */
};

/* ---- trace, hash, violations ------------------------------------------------------------ */

static void hmix(struct ns_sim *s, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		s->hash ^= (v >> (8 * i)) & 0xFF;
		s->hash *= 0x100000001B3ULL;
	}
}

static uint64_t fnv(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xCBF29CE484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001B3ULL;
	}
	return h;
}

static void tprefix(const struct ns_sim *s)
{
	fprintf(s->o.trace, "%" PRIu64 ".%09" PRIu64 " ", s->now / NS_S, s->now % NS_S);
}

static void viol(struct ns_sim *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int max = s->o.max_report > 0 ? s->o.max_report : 8;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	s->violations++;
	if (s->o.trace)
		fprintf(s->o.trace, "!!! VIOLATION: %s\n", buf);
	if (s->violations <= max && s->rlen + 2 < sizeof(s->report)) {
		int k = snprintf(s->report + s->rlen, sizeof(s->report) - s->rlen, "%s\n", buf);
		if (k > 0)
			s->rlen += (size_t)k < sizeof(s->report) - s->rlen ? (size_t)k
									     : sizeof(s->report) - s->rlen - 1;
	}
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void trace_mad(struct ns_sim *s, const char *what, int src, int dst, const uint8_t *mad,
		      cmp_time at)
{
	uint16_t attr = be16(mad + 16);

	hmix(s, s->now);
	hmix(s, fnv(what, strlen(what)));
	hmix(s, (uint64_t)src << 32 | (uint32_t)dst);
	hmix(s, at);
	hmix(s, fnv(mad, CMP_MAD_SIZE));
	if (!s->o.trace)
		return;
	tprefix(s);
	fprintf(s->o.trace, "net  n%d->n%d %-8s %-9s", src, dst, what, cmp_cm_attr_str(attr));
	switch (attr) {
	case UMAD_CM_ATTR_REQ:
		fprintf(s->o.trace, " lcid=%08x qpn=%06x", be32(mad + 24), be32(mad + 56) >> 8);
		break;
	case UMAD_CM_ATTR_SIDR_REQ:
	case UMAD_CM_ATTR_SIDR_REP:
		fprintf(s->o.trace, " reqid=%08x", be32(mad + 24));
		if (attr == UMAD_CM_ATTR_SIDR_REP)
			fprintf(s->o.trace, " status=%u", mad[28]);
		break;
	default:
		fprintf(s->o.trace, " lcid=%08x rcid=%08x", be32(mad + 24), be32(mad + 28));
		if (attr == UMAD_CM_ATTR_REJ)
			fprintf(s->o.trace, " reason=%u", be16(mad + 34));
		if (attr == UMAD_CM_ATTR_MRA)
			fprintf(s->o.trace, " mraed=%u timeout=%u", mad[32] >> 6, mad[33] >> 3);
		break;
	}
	if (at)
		fprintf(s->o.trace, " (arrives %" PRIu64 ".%09" PRIu64 ")", at / NS_S, at % NS_S);
	fputc('\n', s->o.trace);
}

static void on_trace(void *ctx, const struct cmp_trace_rec *r)
{
	struct ns_node *nd = ctx;
	struct ns_sim *s = nd->sim;

	hmix(s, r->time);
	hmix(s, (uint64_t)nd->idx << 32 | r->local_id);
	hmix(s, (uint64_t)r->remote_id << 16 | (uint64_t)r->from << 8 | r->to);
	hmix(s, fnv(r->cause, strlen(r->cause)));
	if (!s->o.trace)
		return;
	fprintf(s->o.trace, "n%d   ", nd->idx);
	if (s->o.trace_json)
		cmp_trace_json(s->o.trace, r);
	else
		cmp_trace_print(s->o.trace, r);
}

/* ---- queues ---------------------------------------------------------------------------- */

static int pkt_less(const struct ns_pkt *a, const struct ns_pkt *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void pq_push(struct ns_sim *s, const struct ns_pkt *p)
{
	size_t i;

	if (s->npq == s->cappq) {
		s->cappq = s->cappq ? s->cappq * 2 : 64;
		s->pq = realloc(s->pq, s->cappq * sizeof(*s->pq));
		if (!s->pq)
			abort();
	}
	i = s->npq++;
	s->pq[i] = *p;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		struct ns_pkt t;
		if (!pkt_less(&s->pq[i], &s->pq[up]))
			break;
		t = s->pq[i];
		s->pq[i] = s->pq[up];
		s->pq[up] = t;
		i = up;
	}
}

static void pq_pop(struct ns_sim *s, struct ns_pkt *out)
{
	size_t i = 0;

	*out = s->pq[0];
	s->pq[0] = s->pq[--s->npq];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct ns_pkt t;
		if (l < s->npq && pkt_less(&s->pq[l], &s->pq[m]))
			m = l;
		if (r < s->npq && pkt_less(&s->pq[r], &s->pq[m]))
			m = r;
		if (m == i)
			break;
		t = s->pq[i];
		s->pq[i] = s->pq[m];
		s->pq[m] = t;
		i = m;
	}
}

static int act_less(const struct ns_act *a, const struct ns_act *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void aq_push(struct ns_sim *s, cmp_time t, int kind, int node, int rec)
{
	size_t i;

	if (s->naq == s->capaq) {
		s->capaq = s->capaq ? s->capaq * 2 : 64;
		s->aq = realloc(s->aq, s->capaq * sizeof(*s->aq));
		if (!s->aq)
			abort();
	}
	i = s->naq++;
	s->aq[i] = (struct ns_act){ t, s->seq++, kind, node, rec };
	while (i > 0) {
		size_t up = (i - 1) / 2;
		struct ns_act tmp;
		if (!act_less(&s->aq[i], &s->aq[up]))
			break;
		tmp = s->aq[i];
		s->aq[i] = s->aq[up];
		s->aq[up] = tmp;
		i = up;
	}
}

static void aq_pop(struct ns_sim *s, struct ns_act *out)
{
	size_t i = 0;

	*out = s->aq[0];
	s->aq[0] = s->aq[--s->naq];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct ns_act t;
		if (l < s->naq && act_less(&s->aq[l], &s->aq[m]))
			m = l;
		if (r < s->naq && act_less(&s->aq[r], &s->aq[m]))
			m = r;
		if (m == i)
			break;
		t = s->aq[i];
		s->aq[i] = s->aq[m];
		s->aq[m] = t;
		i = m;
	}
}

static void after(struct ns_sim *s, cmp_time d, int kind, int node, int rec)
{
	if (s->tie)
		d -= d % NS_Q;
	aq_push(s, s->now + d, kind, node, rec);
}

/* ---- log --------------------------------------------------------------------------------- */

static void log_add(struct ns_sim *s, int kind, int node, int rec, int code, int32_t ret,
		    uint32_t aux)
{
	struct ns_logent e = { s->now, rec, (int16_t)node, (uint8_t)kind, (uint8_t)code, ret, aux };

	if (s->nlog == s->caplog) {
		s->caplog = s->caplog ? s->caplog * 2 : 256;
		s->log = realloc(s->log, s->caplog * sizeof(*s->log));
		if (!s->log)
			abort();
	}
	s->log[s->nlog++] = e;
	hmix(s, s->now);
	hmix(s, (uint64_t)kind << 48 | (uint64_t)(uint16_t)node << 32 | (uint32_t)rec);
	hmix(s, (uint64_t)code << 40 | (uint64_t)(uint32_t)ret << 8 | aux);
	if (kind == NS_L_EVENT)
		s->cnt.events++;
	else if (kind == NS_L_CALL)
		s->cnt.calls++;
	if (!s->o.trace)
		return;
	tprefix(s);
	if (kind == NS_L_CRASH)
		fprintf(s->o.trace, "n%d   *** node restarts (engine freed and re-created)\n", node);
	else if (kind == NS_L_CALL)
		fprintf(s->o.trace, "n%d   app  rec#%d call %s -> %d%s\n", node, rec, ns_call_str(code),
			ret, ret ? " (probe)" : "");
	else
		fprintf(s->o.trace, "n%d   app  rec#%d event %s (%d)\n", node, rec,
			cmp_event_str((enum cmp_event_type)code), ret);
}

size_t ns_log_len(const struct ns_sim *s)
{
	return s->nlog;
}

const struct ns_logent *ns_log_at(const struct ns_sim *s, size_t i)
{
	return i < s->nlog ? &s->log[i] : NULL;
}

int ns_log_insert(struct ns_sim *s, size_t i, const struct ns_logent *e)
{
	if (i > s->nlog)
		return -1;
	if (s->nlog == s->caplog) {
		s->caplog = s->caplog ? s->caplog * 2 : 256;
		s->log = realloc(s->log, s->caplog * sizeof(*s->log));
		if (!s->log)
			abort();
	}
	memmove(&s->log[i + 1], &s->log[i], (s->nlog - i) * sizeof(*s->log));
	s->log[i] = *e;
	s->nlog++;
	return 0;
}

void ns_log_remove(struct ns_sim *s, size_t i)
{
	if (i >= s->nlog)
		return;
	memmove(&s->log[i], &s->log[i + 1], (s->nlog - i - 1) * sizeof(*s->log));
	s->nlog--;
}

void ns_reset_violations(struct ns_sim *s)
{
	s->violations = 0;
	s->rlen = 0;
	s->report[0] = 0;
}

/* ---- the model: one step of the grammar (C1), timer replay (C3) ----------------------------- */

static cmp_time capt(cmp_time cap, cmp_time t)
{
	return cap && t > cap ? cap : t;
}

/* How long the engine waits after an MRA with this service timeout. */
static cmp_time mra_wait(const struct ns_rec *r, unsigned service_timeout, cmp_time base)
{
	cmp_time w = cmp_iba_time_ns(service_timeout) + base;

	return NS_MRA_WAIT_CAPPED ? capt(r->cap, w) : w;
}

static void tm_start(struct ns_model *m, cmp_time t0, cmp_time base, unsigned retries)
{
	m->tm_on = 1;
	m->tm_base = base;
	m->tm_left = (uint8_t)retries;
	m->tm_dl = t0 + base;
}

/* An MRA arrived at tm: the engine must not have given up before, and now
 * waits `wait` from tm. */
static int tm_mra(struct ns_model *m, cmp_time tm, cmp_time wait, char *why, size_t wl)
{
	if (!m->tm_on)
		return 0;
	while (m->tm_dl < tm && m->tm_left) {
		m->tm_left--;
		m->tm_dl += m->tm_base;
	}
	if (m->tm_dl < tm) {
		snprintf(why, wl, "MRA_RECEIVED at %" PRIu64 " after the retries ran out at %" PRIu64,
			 tm, m->tm_dl);
		return -1;
	}
	m->tm_dl = tm + wait;
	return 0;
}

static int tm_expire(struct ns_model *m, cmp_time te, const char *what, char *why, size_t wl)
{
	if (!m->tm_on)
		return 0;
	while (m->tm_left) {
		m->tm_left--;
		m->tm_dl += m->tm_base;
	}
	m->tm_on = 0;
	if (te != m->tm_dl) {
		snprintf(why, wl, "%s at %" PRIu64 " but the deadline is %" PRIu64 " (%+" PRId64 " ns)",
			 what, te, m->tm_dl, (int64_t)(te - m->tm_dl));
		return -1;
	}
	return 0;
}

static void enter_tw(struct ns_model *m, const struct ns_rec *r, cmp_time t)
{
	m->st = MS_TW;
	m->tm_on = 0;
	m->tw_dl = t + (r->role == R_ACT && !m->got_rep ? r->tw_pre : r->tw_post);
}

static int call_valid(int st, int call)
{
	switch (call) {
	case NS_C_ACCEPT: return st == MS_REQ_RCVD;
	case NS_C_RTU: return st == MS_GOT_REP;
	case NS_C_REJECT:
		return st == MS_CONNECTING || st == MS_GOT_REP || st == MS_REQ_RCVD ||
		       st == MS_ACCEPTED;
	case NS_C_MRA: return st == MS_REQ_RCVD || st == MS_GOT_REP;
	case NS_C_NOTIFY: return st == MS_ACCEPTED || st == MS_EST;
	case NS_C_DISCONNECT: return st == MS_EST || st == MS_DREQ_RCVD;
	case NS_C_SIDR_REP: return st == MS_SIDR_RCVD;
	case NS_C_DESTROY: return st != MS_GONE && st != MS_CRASHED && st != MS_NEW;
	default: return 0;
	}
}

/* One log entry for record r, model m. peer_crashed: the engine may have
 * sent a stale-connection DREQ on its own for this connection (its peer node
 * restarted since it was created, or the peer reused its QPN). Returns 0,
 * or -1 with a reason in why. */
static int model_step(const struct ns_rec *r, struct ns_model *m, const struct ns_logent *e,
		      int peer_crashed, char *why, size_t wl)
{
	int st = m->st;

	why[0] = 0;
	if (st == MS_GONE || st == MS_CRASHED) {
		snprintf(why, wl, "%s %s after the connection was %s",
			 e->kind == NS_L_CALL ? "call" : "event",
			 e->kind == NS_L_CALL ? ns_call_str(e->code)
					      : cmp_event_str((enum cmp_event_type)e->code),
			 st == MS_GONE ? "destroyed" : "lost in a restart");
		return -1;
	}
	if (e->kind == NS_L_CALL) {
		int c = e->code;

		if (e->ret == -ENOMEM && st == MS_NEW && (c == NS_C_CONNECT || c == NS_C_SIDR_REQ) &&
		    r->nomem_ok) {
			m->st = MS_GONE; /* max_conns reached: nothing was started */
			m->cls = C_NOMEM;
			return 0;
		}
		if (e->ret != 0) {
			/* A refused call: fine when the model agrees it is invalid.
			 * MRA in REQ_RCVD may be refused: the engine may have sent
			 * one itself for a duplicate REQ (invisible to the user). */
			if (c == NS_C_MRA && st == MS_REQ_RCVD && e->ret == -EINVAL)
				return 0;
			/* A stale-connection DREQ the engine sent on its own. */
			if (c == NS_C_DISCONNECT && st == MS_EST && peer_crashed)
				return 0;
			if (call_valid(st, c) || e->ret != -EINVAL) {
				snprintf(why, wl, "%s refused (%d) in model state %s", ns_call_str(c),
					 e->ret, mst_str(st));
				return -1;
			}
			return 0;
		}
		if (c == NS_C_CONNECT || c == NS_C_SIDR_REQ) {
			if (st != MS_NEW) {
				snprintf(why, wl, "%s on a used record", ns_call_str(c));
				return -1;
			}
			if (c == NS_C_CONNECT) {
				m->st = MS_CONNECTING;
				tm_start(m, e->t, r->base, r->retries);
			} else {
				m->st = MS_SIDR_SENT;
				tm_start(m, e->t, r->base, r->retries);
			}
			return 0;
		}
		if (!call_valid(st, c)) {
			snprintf(why, wl, "%s succeeded in model state %s", ns_call_str(c), mst_str(st));
			return -1;
		}
		switch (c) {
		case NS_C_ACCEPT:
			m->st = MS_ACCEPTED;
			tm_start(m, e->t, r->base, r->retries);
			break;
		case NS_C_RTU:
			m->st = MS_EST;
			m->rtu = m->est = 1;
			break;
		case NS_C_REJECT:
			m->tm_on = 0;
			if (st == MS_ACCEPTED) {
				enter_tw(m, r, e->t);
				m->cls = P_REJ_ACCEPTED;
			} else {
				m->st = MS_CLOSED;
				m->cls = st == MS_GOT_REP ? A_SELF_REJ
					 : st == MS_REQ_RCVD ? P_APP_REJ
							     : A_ABANDON_PRE;
			}
			break;
		case NS_C_MRA:
			break;
		case NS_C_NOTIFY:
			if (st == MS_ACCEPTED)
				m->notify_pending = 1;
			break;
		case NS_C_DISCONNECT:
			if (st == MS_EST) {
				m->st = MS_DISC;
				m->disc_by_call = 1;
				m->cls = r->role == R_ACT ? A_EST_DISC : P_EST_DISC;
				tm_start(m, e->t, r->base, r->retries);
			} else {
				if (m->how == D_NONE)
					m->how = D_PASSIVE;
				enter_tw(m, r, e->t);
			}
			break;
		case NS_C_SIDR_REP:
			m->st = MS_CLOSED;
			m->cls = S_REPLIED;
			break;
		case NS_C_DESTROY:
			if (m->cls == C_OPEN) {
				switch (r->role) {
				case R_ACT: m->cls = m->rtu ? A_ABANDON_EST : A_ABANDON_PRE; break;
				case R_PAS: m->cls = m->est ? P_ABANDON_EST : P_ABANDON_PRE; break;
				default: m->cls = S_ABANDON; break;
				}
			}
			m->st = MS_GONE;
			m->tm_on = 0;
			break;
		}
		return 0;
	}

	/* an event */
	int ev = e->code;
	int ok = 0, bad = 0;

	if (m->notify_pending && ev != CMP_EV_USER_ESTABLISHED) {
		snprintf(why, wl, "cmp_notify in ACCEPTED returned 0 without USER_ESTABLISHED");
		m->notify_pending = 0;
		return -1;
	}
	switch (st) {
	case MS_NEW:
		if (ev == CMP_EV_REQ_RECEIVED && r->role == R_PAS) {
			m->st = MS_REQ_RCVD;
			ok = 1;
		} else if (ev == CMP_EV_SIDR_REQ_RECEIVED && r->role == R_SPAS) {
			m->st = MS_SIDR_RCVD;
			ok = 1;
		}
		break;
	case MS_CONNECTING:
		switch (ev) {
		case CMP_EV_MRA_RECEIVED:
			bad = tm_mra(m, e->t, mra_wait(r, e->aux, m->tm_base), why, wl);
			ok = 1;
			break;
		case CMP_EV_REP_RECEIVED:
			m->tm_on = 0;
			m->got_rep = 1;
			m->st = MS_GOT_REP;
			ok = 1;
			break;
		case CMP_EV_REJ_RECEIVED:
			m->tm_on = 0;
			m->reason = (int16_t)e->ret;
			m->app_rej_seen = e->aux == 1;
			m->cls = A_REJ_REQ;
			if (e->ret == 10 /* stale connection */)
				enter_tw(m, r, e->t);
			else
				m->st = MS_CLOSED;
			ok = 1;
			break;
		case CMP_EV_REQ_ERROR:
			bad = tm_expire(m, e->t, "REQ_ERROR", why, wl);
			m->st = MS_CLOSED;
			m->cls = A_REQ_ERROR;
			ok = 1;
			break;
		}
		break;
	case MS_GOT_REP:
		if (ev == CMP_EV_REJ_RECEIVED) {
			m->reason = (int16_t)e->ret;
			m->cls = A_REJ_REP;
			enter_tw(m, r, e->t);
			ok = 1;
		}
		break;
	case MS_REQ_RCVD:
		if (ev == CMP_EV_REJ_RECEIVED) {
			m->reason = (int16_t)e->ret;
			m->cls = P_REJ_REQ;
			m->st = MS_CLOSED;
			ok = 1;
		}
		break;
	case MS_ACCEPTED:
		switch (ev) {
		case CMP_EV_MRA_RECEIVED:
			bad = tm_mra(m, e->t, mra_wait(r, e->aux, m->tm_base), why, wl);
			ok = 1;
			break;
		case CMP_EV_RTU_RECEIVED:
		case CMP_EV_USER_ESTABLISHED:
			if (ev == CMP_EV_USER_ESTABLISHED && !m->notify_pending)
				break;
			m->notify_pending = 0;
			m->tm_on = 0;
			m->st = MS_EST;
			m->est = 1;
			ok = 1;
			break;
		case CMP_EV_REJ_RECEIVED:
			m->tm_on = 0;
			m->reason = (int16_t)e->ret;
			m->cls = P_REJ_REP;
			enter_tw(m, r, e->t);
			ok = 1;
			break;
		case CMP_EV_REP_ERROR:
			bad = tm_expire(m, e->t, "REP_ERROR", why, wl);
			m->st = MS_CLOSED;
			m->cls = P_REP_ERROR;
			ok = 1;
			break;
		case CMP_EV_DREQ_RECEIVED:
			/* The RTU was lost or overtaken: established, then closing. */
			m->tm_on = 0;
			m->est = 1;
			m->st = MS_DREQ_RCVD;
			m->cls = P_EST_DISC;
			m->how = D_PASSIVE;
			ok = 1;
			break;
		}
		break;
	case MS_EST:
		switch (ev) {
		case CMP_EV_DREQ_RECEIVED:
			m->st = MS_DREQ_RCVD;
			m->cls = r->role == R_ACT ? A_EST_DISC : P_EST_DISC;
			m->how = D_PASSIVE;
			ok = 1;
			break;
		case CMP_EV_REJ_RECEIVED:
			/* The passive side gave up on its REP after our RTU. Never
			 * for an established passive connection. */
			if (r->role != R_ACT)
				break;
			m->reason = (int16_t)e->ret;
			m->cls = A_EST_REJ;
			enter_tw(m, r, e->t);
			ok = 1;
			break;
		case CMP_EV_DREP_RECEIVED:
		case CMP_EV_DREQ_ERROR:
			/* Only after the engine sent a stale-connection DREQ on
			 * its own, which needs a restarted peer reusing a QPN. */
			if (!peer_crashed)
				break;
			m->cls = r->role == R_ACT ? A_EST_DISC : P_EST_DISC;
			m->how = D_UNSOLICITED;
			enter_tw(m, r, e->t);
			ok = 1;
			break;
		}
		break;
	case MS_DISC:
		switch (ev) {
		case CMP_EV_DREP_RECEIVED:
			m->how = D_DREP;
			enter_tw(m, r, e->t);
			ok = 1;
			break;
		case CMP_EV_DREQ_ERROR:
			bad = tm_expire(m, e->t, "DREQ_ERROR", why, wl);
			m->how = D_DREQ_ERROR;
			enter_tw(m, r, e->t);
			ok = 1;
			break;
		case CMP_EV_DREQ_RECEIVED:
			m->tm_on = 0;
			m->how = D_CROSS;
			m->st = MS_DREQ_RCVD;
			ok = 1;
			break;
		}
		break;
	case MS_TW:
		if (ev == CMP_EV_TIMEWAIT_EXIT) {
			if (e->t != m->tw_dl) {
				snprintf(why, wl,
					 "TIMEWAIT_EXIT at %" PRIu64 " but TimeWait ends at %" PRIu64
					 " (%+" PRId64 " ns)",
					 e->t, m->tw_dl, (int64_t)(e->t - m->tw_dl));
				m->st = MS_CLOSED;
				return -1;
			}
			m->st = MS_CLOSED;
			ok = 1;
		}
		break;
	case MS_SIDR_SENT:
		if (ev == CMP_EV_SIDR_REP_RECEIVED) {
			m->tm_on = 0;
			m->reason = (int16_t)e->ret;
			m->st = MS_CLOSED;
			m->cls = S_REP;
			ok = 1;
		} else if (ev == CMP_EV_SIDR_REQ_ERROR) {
			bad = tm_expire(m, e->t, "SIDR_REQ_ERROR", why, wl);
			m->st = MS_CLOSED;
			m->cls = S_ERR;
			ok = 1;
		}
		break;
	default:
		break;
	}
	if (!ok) {
		snprintf(why, wl, "unexpected event %s in model state %s",
			 cmp_event_str((enum cmp_event_type)ev), mst_str(st));
		return -1;
	}
	return bad; /* a timer off its deadline: reported, but the state moved on */
}

/* Engine states the model allows (O4). */
static int state_ok(const struct ns_model *m, enum cmp_state es, int peer_crashed)
{
	if (m->notify_pending && es == CMP_ESTABLISHED)
		return 1; /* USER_ESTABLISHED queued, not yet polled */
	switch (m->st) {
	case MS_CONNECTING: return es == CMP_REQ_SENT || es == CMP_MRA_REQ_RCVD;
	case MS_GOT_REP: return es == CMP_REP_RCVD || es == CMP_MRA_REP_SENT;
	case MS_REQ_RCVD: return es == CMP_REQ_RCVD || es == CMP_MRA_REQ_SENT;
	case MS_ACCEPTED: return es == CMP_REP_SENT || es == CMP_MRA_REP_RCVD;
	case MS_EST: return es == CMP_ESTABLISHED || (peer_crashed && es == CMP_DREQ_SENT);
	case MS_DISC: return es == CMP_DREQ_SENT;
	case MS_DREQ_RCVD: return es == CMP_DREQ_RCVD;
	case MS_TW: return es == CMP_TIMEWAIT;
	case MS_CLOSED: return es == CMP_IDLE;
	case MS_SIDR_SENT: return es == CMP_SIDR_REQ_SENT;
	case MS_SIDR_RCVD: return es == CMP_SIDR_REQ_RCVD;
	default: return 1;
	}
}

/* ---- scenario generation -------------------------------------------------------------------- */

static cmp_time conv(unsigned t)
{
	return cmp_iba_time_ns(t);
}

static void gen_faults(struct ns_sim *s)
{
	struct ns_faults *f = &s->f;
	uint64_t *g = &s->rg;
	int p = s->profile;
	int rp = 0, rr = 0;

	if (p == NS_PROF_CUSTOM) {
		*f = s->o.faults;
		rp = f->rand_part;
		rr = f->rand_restart;
	} else {
		memset(f, 0, sizeof(*f));
		switch (p) {
		case NS_PROF_LOSS: f->loss = (double)range(g, 2, 20) / 100; break;
		case NS_PROF_DUP: f->dup = (double)range(g, 5, 30) / 100; break;
		case NS_PROF_REORDER:
			f->reorder = (double)range(g, 20, 60) / 100;
			f->reorder_ns = range(g, 50, 300) * NS_US;
			break;
		case NS_PROF_DELAY: f->delay = (double)range(g, 2, 10) / 100; break;
		case NS_PROF_PARTITION: rp = (int)range(g, 1, 3); break;
		case NS_PROF_RESTART: rr = (int)range(g, 1, 2); break;
		case NS_PROF_MIXED:
			f->loss = (double)range(g, 0, 8) / 100;
			f->dup = (double)range(g, 0, 10) / 100;
			f->reorder = (double)range(g, 0, 30) / 100;
			f->reorder_ns = range(g, 50, 300) * NS_US;
			f->delay = (double)range(g, 0, 3) / 100;
			rp = (int)below(g, 2);
			rr = (int)below(g, 2);
			break;
		default: break;
		}
	}
	if (!f->reorder_ns)
		f->reorder_ns = 300 * NS_US;
	if (!f->delay_ns)
		f->delay_ns = 3 * s->base_hint;
	for (int i = 0; i < rp && f->npart < NS_MAX_PART; i++) {
		struct ns_partition *pt = &f->part[f->npart++];
		pt->a = (int)below(g, (uint64_t)s->n);
		pt->b = chance(g, 0.3) ? -1 : (int)((pt->a + 1 + (int)below(g, (uint64_t)s->n - 1)) % s->n);
		pt->start = range(g, 0, 80) * NS_MS;
		pt->len = range(g, 1, 150) * NS_MS;
	}
	for (int i = 0; i < rr && f->nrestart < NS_MAX_RESTART; i++) {
		struct ns_restart *rs = &f->restart[f->nrestart++];
		rs->node = (int)below(g, (uint64_t)s->n);
		rs->at = range(g, 2, 90) * NS_MS + below(g, NS_MS);
	}
	/* Listeners that go away and come back (an application restarting its
	 * server socket), in the rougher profiles. */
	if (p == NS_PROF_MIXED || p == NS_PROF_RESTART || p == NS_PROF_PARTITION) {
		for (int i = 0; i < s->n; i++) {
			struct ns_node *nd = &s->nodes[i];
			if (!chance(g, 0.15))
				continue;
			nd->flaps = 1;
			nd->flap_at = range(g, 1, 60) * NS_MS;
			nd->flap_len = range(g, 1, 40) * NS_MS;
		}
	}
	if (s->tie) {
		for (int i = 0; i < f->nrestart; i++)
			f->restart[i].at -= f->restart[i].at % NS_Q;
		for (int i = 0; i < f->npart; i++) {
			f->part[i].start -= f->part[i].start % NS_Q;
			f->part[i].len -= f->part[i].len % NS_Q;
		}
	}
}

static void gen_pdata(uint64_t *g, uint8_t *pd, uint8_t cap, uint8_t *len, char tag, uint32_t id)
{
	uint8_t n = (uint8_t)range(g, 8, cap);

	memset(pd, 0, cap);
	pd[0] = 'N';
	pd[1] = (uint8_t)tag;
	pd[2] = (uint8_t)id;
	pd[3] = (uint8_t)(id >> 8);
	pd[4] = (uint8_t)(id >> 16);
	pd[5] = (uint8_t)(id >> 24);
	pd[6] = n;
	for (unsigned i = 7; i < n; i++)
		pd[i] = (uint8_t)sm64(g);
	*len = n;
}

static int pd_tag(const uint8_t *pd, size_t len, char tag, uint32_t *id)
{
	if (!pd || len < 7 || pd[0] != 'N' || pd[1] != (uint8_t)tag)
		return 0;
	*id = (uint32_t)pd[2] | (uint32_t)pd[3] << 8 | (uint32_t)pd[4] << 16 | (uint32_t)pd[5] << 24;
	return 1;
}

/* The data the application sent (len bytes, then zeros to the field size). */
static int pd_same(const uint8_t *got, size_t gotlen, const uint8_t *sent, size_t len)
{
	if (gotlen < len || !got)
		return 0;
	if (memcmp(got, sent, len))
		return 0;
	for (size_t i = len; i < gotlen; i++)
		if (got[i])
			return 0;
	return 1;
}

static void gen_scenario(struct ns_sim *s)
{
	uint64_t *g = &s->rg;

	s->n = s->o.nodes > 0 ? s->o.nodes : (int)range(g, 2, 5);
	if (s->n > NS_MAX_NODES)
		s->n = NS_MAX_NODES;
	if (s->n < 2)
		s->n = 2;
	s->profile = s->o.profile == NS_PROF_AUTO ? (int)below(g, NS_PROF_COUNT) : s->o.profile;
	s->grh = chance(g, 0.25);
	s->tie = chance(g, 0.15);
	s->fast_max = 150 * NS_US;
	s->late_max = 150 * NS_MS;
	s->hold_max = 30 * NS_MS;
	s->base_hint = 2 * conv(10) + conv(12);
	for (int i = 0; i < s->n; i++) {
		struct ns_node *nd = &s->nodes[i];
		struct cmp_settings *st = &nd->s;

		memset(nd, 0, sizeof(*nd));
		nd->sim = s;
		nd->idx = i;
		cmp_settings_default(st);
		st->cm_response_timeout = (uint8_t)range(g, 8, 12);
		st->max_cm_retries = (uint8_t)range(g, 2, 6);
		st->mra_service_timeout = (uint8_t)range(g, 10, 14);
		st->packet_life_time = (uint8_t)range(g, 8, 10);
		st->local_ca_ack_delay = (uint8_t)range(g, 6, 12);
		st->max_timer_ns = chance(g, 0.25) ? range(g, 4, 20) * NS_MS : 0;
		st->timewait_ns = chance(g, 0.25) ? 0 : range(g, 500, 5000) * NS_US;
		st->sidr_timeout_ns = range(g, 2, 10) * NS_MS;
		st->sidr_retries = (uint8_t)range(g, 1, 4);
		st->mra_on_duplicate_req = chance(g, 0.75);
		nd->limited_backlog = chance(g, 0.1);
		st->default_backlog = nd->limited_backlog ? (unsigned)range(g, 1, 3) : 1024;
		if (s->tie) {
			st->max_timer_ns -= st->max_timer_ns % NS_Q;
			st->timewait_ns -= st->timewait_ns % NS_Q;
			st->sidr_timeout_ns -= st->sidr_timeout_ns % NS_Q;
		}
		nd->limited_conns = chance(g, 0.04);
		if (nd->limited_conns)
			st->max_conns = (unsigned)range(g, 2, 6);
		nd->guid = 0x0002c90300000000ULL | (sm64(g) & 0xFFFF00ULL) | (uint64_t)(i + 1);
		st->local_ca_guid = nd->guid;
		st->trace = on_trace;
		st->trace_ctx = nd;
		nd->sid = 0x0106000000000000ULL | (uint64_t)(i + 1) << 16 | 4791;
		nd->gid[0] = 0xfe;
		nd->gid[1] = 0x80;
		nd->gid[8] = (uint8_t)(nd->guid >> 8);
		nd->gid[15] = (uint8_t)(i + 1);
		nd->qpn_next = 0x100 + (uint32_t)below(g, 0x40);
	}
	gen_faults(s);

	s->natt = s->o.attempts > 0 ? s->o.attempts : (int)range(g, 3, 16);
	s->att = calloc((size_t)s->natt, sizeof(*s->att));
	if (!s->att)
		abort();
	for (int k = 0; k < s->natt; k++) {
		struct ns_att *a = &s->att[k];
		const struct cmp_settings *cs;

		a->kind = chance(g, 0.15);
		a->client = (int)below(g, (uint64_t)s->n);
		a->server = (a->client + 1 + (int)below(g, (uint64_t)s->n - 1)) % s->n;
		a->start = below(g, 40 * NS_MS);
		a->no_listener = chance(g, 0.03);
		a->sid = s->nodes[a->server].sid + (a->no_listener ? 1 : 0);
		a->a_rec = -1;
		a->first_p = -1;
		cs = &s->nodes[a->client].s;
		a->plt = (uint8_t)range(g, 8, 10);
		a->local_rt = chance(g, 0.5) ? 0 : (uint8_t)range(g, 8, 12);
		a->remote_rt = chance(g, 0.5) ? 0 : (uint8_t)range(g, 8, 12);
		a->retries = chance(g, 0.5) ? 0 : (uint8_t)range(g, 2, 6);
		a->eff_lrt = a->local_rt ? a->local_rt : cs->cm_response_timeout;
		a->eff_rrt = a->remote_rt ? a->remote_rt : cs->cm_response_timeout;
		a->eff_retries = a->retries ? a->retries : cs->max_cm_retries;
		a->rr = (uint8_t)below(g, 17);
		a->id = (uint8_t)below(g, 17);
		a->mtu = (uint8_t)range(g, 1, 5);
		a->qp_type = chance(g, 0.1) ? CMP_QPT_UC : CMP_QPT_RC;
		a->psn = (uint32_t)below(g, 1u << 24);
		gen_pdata(g, a->pd, a->kind ? 64 : CMP_REQ_PDATA, &a->pdlen, 'A', (uint32_t)k);
		a->sidr_retries = chance(g, 0.5) ? 0 : (uint8_t)range(g, 1, 4);
		a->sidr_timeout = chance(g, 0.5) ? 0 : range(g, 2, 10) * NS_MS;
		if (s->tie)
			a->sidr_timeout -= a->sidr_timeout % NS_Q;

		uint64_t x = below(g, 100);
		a->srv = x < 58 ? SP_ACCEPT : x < 70 ? SP_MRA_ACCEPT : x < 77 ? SP_ACCEPT_LATE
		       : x < 90 ? SP_REJECT : x < 96 ? SP_REJECT_LATE : SP_ACCEPT_REJ;
		x = below(g, 100);
		a->cli = x < 75 ? CP_RTU : x < 82 ? CP_MRA_RTU : x < 88 ? CP_RTU_LATE : CP_REJECT;
		x = below(g, 100);
		a->disc = x < 45 ? DP_CLIENT : x < 88 ? DP_SERVER : DP_BOTH;
		x = below(g, 100);
		a->sidr_plan = x < 75 ? SS_REPLY : x < 88 ? SS_REPLY_LATE : SS_DESTROY;
		a->sidr_status = chance(g, 0.8) ? 0 : (int)range(g, 1, 5);
		a->notify = chance(g, 0.3);
		a->late_answer = chance(g, 0.04);
		a->a_abandon = chance(g, 0.05);
		a->p_abandon = chance(g, 0.05);
		a->srv_delay = below(g, s->fast_max);
		a->cli_delay = below(g, s->fast_max);
		a->hold = below(g, s->hold_max);
		a->answer_delay = a->late_answer ? below(g, s->late_max) : below(g, s->fast_max);
		a->a_abandon_after = below(g, 60 * NS_MS);
		a->p_abandon_after = below(g, 60 * NS_MS);
		if (!a->kind && (a->srv == SP_ACCEPT_LATE || a->srv == SP_REJECT_LATE))
			a->srv_delay = below(g, s->late_max);
		if (a->cli == CP_RTU_LATE)
			a->cli_delay = below(g, s->late_max);
		if (a->kind && a->sidr_plan == SS_REPLY_LATE)
			a->srv_delay = below(g, s->late_max);
		if (s->tie)
			a->start -= a->start % NS_Q;
		if ((!a->kind && (a->srv == SP_ACCEPT_LATE || a->srv == SP_REJECT_LATE ||
				  a->srv == SP_ACCEPT_REJ || a->cli == CP_RTU_LATE || a->late_answer)) ||
		    (a->kind && a->sidr_plan != SS_REPLY) || s->nodes[a->server].flaps ||
		    s->nodes[a->client].limited_conns || s->nodes[a->server].limited_conns)
			a->racy = 1;
	}
}

/* ---- records ---------------------------------------------------------------------------------- */

static int rec_new(struct ns_sim *s, int node, int peer, int att, int role)
{
	struct ns_rec *r;

	if (s->nrec == s->caprec) {
		s->caprec = s->caprec ? s->caprec * 2 : 32;
		s->rec = realloc(s->rec, (size_t)s->caprec * sizeof(*s->rec));
		if (!s->rec)
			abort();
	}
	r = &s->rec[s->nrec];
	memset(r, 0, sizeof(*r));
	r->node = node;
	r->peer = peer;
	r->att = att;
	r->role = (uint8_t)role;
	r->epoch = s->nodes[node].epoch;
	r->created = s->now;
	r->cap = s->nodes[node].s.max_timer_ns;
	r->m.peer_crashes = (uint32_t)s->nodes[peer].epoch;
	r->nomem_ok = (uint8_t)s->nodes[node].limited_conns;
	return s->nrec++;
}

static void *rec_ctx(int i)
{
	return (void *)(uintptr_t)(i + 1);
}

static void *listen_ctx(int node)
{
	return (void *)(uintptr_t)(0x11570000u + (unsigned)node);
}

static cmp_time tw_len(const struct ns_node *nd, uint8_t av)
{
	return nd->s.timewait_ns ? nd->s.timewait_ns : capt(nd->s.max_timer_ns, conv(av));
}

static void rec_timers(struct ns_sim *s, struct ns_rec *r)
{
	const struct ns_att *a = &s->att[r->att];
	const struct ns_node *cl = &s->nodes[a->client], *sv = &s->nodes[a->server];
	uint8_t av_req = cmp_ack_timeout(cl->s.local_ca_ack_delay, a->plt);

	switch (r->role) {
	case R_ACT:
		r->base = capt(r->cap, 2 * conv(a->plt) + conv(a->eff_rrt));
		r->retries = a->eff_retries > 15 ? 15 : a->eff_retries;
		r->tw_pre = tw_len(cl, av_req);
		r->tw_post = tw_len(cl, cmp_ack_timeout(sv->s.local_ca_ack_delay & 0x1F, a->plt));
		break;
	case R_PAS: {
		uint8_t plt = av_req ? (uint8_t)(av_req - 1) : 0;
		r->base = capt(r->cap, 2 * conv(plt) + conv(a->eff_lrt));
		r->retries = a->eff_retries > 15 ? 15 : a->eff_retries;
		r->tw_pre = r->tw_post = tw_len(sv, av_req);
		break;
	}
	case R_SACT:
		r->base = capt(r->cap, a->sidr_timeout ? a->sidr_timeout : cl->s.sidr_timeout_ns);
		r->retries = a->sidr_retries ? a->sidr_retries : cl->s.sidr_retries;
		break;
	default:
		break;
	}
}

/* The engine may disconnect this connection on its own (stale connection):
 * its peer node restarted at some time (a late REQ from the old incarnation
 * can name a QPN the new one reuses), or the peer reused its QPN. */
static int peer_crashed(const struct ns_sim *s, const struct ns_rec *r)
{
	return s->nodes[r->peer].epoch != 0 || r->stale_ok;
}

/* Feeds a log entry to the application's own model (online). */
static void app_step(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	char why[256];

	if (model_step(r, &r->m, &s->log[s->nlog - 1], peer_crashed(s, r), why, sizeof(why)) &&
	    s->o.trace) {
		tprefix(s);
		fprintf(s->o.trace, "n%d   app  rec#%d: model: %s\n", r->node, ri, why);
	}
}

static void check_state(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	enum cmp_state es;

	if (r->gone || !r->c)
		return;
	es = cmp_conn_state(r->c);
	if (!state_ok(&r->m, es, peer_crashed(s, r)))
		viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d): engine state %s while the "
		     "application's model is %s",
		     s->now, r->node, ri, r->att, cmp_state_str(es), mst_str(r->m.st));
}

/* ---- network ------------------------------------------------------------------------------------- */

static int link_down(const struct ns_sim *s, int a, int b, cmp_time t)
{
	for (int i = 0; i < s->f.npart; i++) {
		const struct ns_partition *p = &s->f.part[i];
		int hit = p->b < 0 ? (a == p->a || b == p->a)
				   : ((a == p->a && b == p->b) || (a == p->b && b == p->a));
		if (hit && t >= p->start && t < p->start + p->len)
			return 1;
	}
	return 0;
}

static int find_att(const struct ns_sim *s, int node, uint32_t id)
{
	if (!id)
		return -1;
	for (int i = s->nrec - 1; i >= 0; i--)
		if (s->rec[i].node == node && s->rec[i].local_id == id)
			return s->rec[i].att;
	return -1;
}

/* The attempt a MAD belongs to, from its comm IDs. */
static int pkt_att(const struct ns_sim *s, int src, int dst, const uint8_t *mad)
{
	uint16_t attr = be16(mad + 16);
	uint32_t a = be32(mad + 24), b = be32(mad + 28);
	int k;

	switch (attr) {
	case UMAD_CM_ATTR_REQ:
	case UMAD_CM_ATTR_SIDR_REQ:
		return find_att(s, src, a);
	case UMAD_CM_ATTR_SIDR_REP:
		return find_att(s, dst, a);
	default:
		k = find_att(s, src, a);
		return k >= 0 ? k : find_att(s, dst, b);
	}
}

static void fault(struct ns_sim *s, int att)
{
	if (att >= 0)
		s->att[att].faulted = 1;
}

static void net_send(struct ns_sim *s, int src, const struct cmp_tx *tx)
{
	struct ns_pkt p;
	int dst = (int)tx->dst.lid - 1;
	int copies;
	uint64_t *g = &s->rn;

	s->cnt.mads++;
	if (dst < 0 || dst >= s->n) {
		viol(s, "t=%" PRIu64 " n%d sent a MAD to LID %u, which does not exist", s->now, src,
		     tx->dst.lid);
		return;
	}
	if (tx->dst.qpn != 1 || tx->dst.qkey != 0x80010000u)
		viol(s, "t=%" PRIu64 " n%d sent a MAD to QPN %u QKey %#x (want QP1, 0x80010000)",
		     s->now, src, tx->dst.qpn, tx->dst.qkey);
	if (s->grh && !tx->dst.grh)
		viol(s, "t=%" PRIu64 " n%d sent a MAD without GRH on a routed path", s->now, src);
	if (tx->dst.grh && memcmp(tx->dst.gid, s->nodes[dst].gid, 16))
		viol(s, "t=%" PRIu64 " n%d sent a MAD to LID %u with another node's GID", s->now, src,
		     tx->dst.lid);
	p.src = src;
	p.dst = dst;
	p.att = pkt_att(s, src, dst, tx->mad);
	memcpy(p.mad, tx->mad, CMP_MAD_SIZE);
	if (link_down(s, src, dst, s->now)) {
		s->cnt.partitioned++;
		fault(s, p.att);
		trace_mad(s, "cut", src, dst, p.mad, 0);
		return;
	}
	if (chance(g, s->f.loss)) {
		s->cnt.lost++;
		fault(s, p.att);
		trace_mad(s, "lost", src, dst, p.mad, 0);
		return;
	}
	copies = 1 + chance(g, s->f.dup);
	if (copies > 1)
		s->cnt.duplicated++;
	for (int i = 0; i < copies; i++) {
		cmp_time lat = s->tie ? NS_Q * range(g, 1, 3) : range(g, 1 * NS_US, 20 * NS_US);
		if (chance(g, s->f.reorder)) {
			lat += s->tie ? NS_Q * below(g, 4) : below(g, s->f.reorder_ns);
			s->cnt.reordered++;
		}
		if (chance(g, s->f.delay)) {
			lat += s->base_hint / 2 + below(g, s->f.delay_ns);
			if (s->tie)
				lat -= lat % NS_Q;
			s->cnt.delayed++;
			fault(s, p.att);
		}
		p.t = s->now + lat;
		p.seq = s->seq++;
		pq_push(s, &p);
		trace_mad(s, i ? "dup" : "send", src, dst, p.mad, p.t);
	}
}

static void src_addr(const struct ns_sim *s, int node, struct cmp_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->lid = (uint16_t)(node + 1);
	a->qpn = 1;
	a->qkey = 0x80010000u;
	if (s->grh) {
		a->grh = 1;
		memcpy(a->gid, s->nodes[node].gid, 16);
		a->hop_limit = 64;
	}
}

static void make_path(const struct ns_sim *s, int from, int to, uint8_t plt, uint8_t mtu,
		      struct cmp_path *p)
{
	memset(p, 0, sizeof(*p));
	p->slid = (uint16_t)(from + 1);
	p->dlid = (uint16_t)(to + 1);
	memcpy(p->sgid, s->nodes[from].gid, 16);
	memcpy(p->dgid, s->nodes[to].gid, 16);
	p->mtu = mtu;
	p->rate = 3;
	p->packet_life_time = plt;
	p->pkey = 0xFFFF;
	p->subnet_local = !s->grh;
	p->hop_limit = s->grh ? 64 : 0;
	p->port_num = 1;
}

/* ---- applications ------------------------------------------------------------------------------ */

static void on_event(struct ns_sim *s, int node, const struct cmp_event *ev);

/* Hands everything the engine produced to the applications and the network. */
static void drain(struct ns_sim *s, int node)
{
	struct ns_node *nd = &s->nodes[node];
	struct cmp_event ev;
	struct cmp_tx tx;
	int any;

	do {
		any = 0;
		while (nd->e && cmp_engine_poll_event(nd->e, &ev)) {
			on_event(s, node, &ev);
			any = 1;
		}
		while (nd->e && cmp_engine_poll_tx(nd->e, &tx)) {
			net_send(s, node, &tx);
			any = 1;
		}
	} while (any);
}

/* A probe: the call is invalid now; it must fail with EINVAL and do nothing. */
static void probe_quiet(struct ns_sim *s, int node, int ri, int call, int ret, int err)
{
	struct ns_node *nd = &s->nodes[node];
	struct cmp_event ev;
	struct cmp_tx tx;

	s->cnt.probes++;
	log_add(s, NS_L_CALL, node, ri, call, ret ? -err : 0, 0);
	app_step(s, ri);
	if (ret == 0 || err != EINVAL)
		return; /* the checker reports it (C1) */
	if (cmp_engine_poll_tx(nd->e, &tx)) {
		viol(s, "t=%" PRIu64 " n%d rec#%d: refused %s still sent a MAD", s->now, node, ri,
		     ns_call_str(call));
		net_send(s, node, &tx);
	}
	if (cmp_engine_poll_event(nd->e, &ev)) {
		viol(s, "t=%" PRIu64 " n%d rec#%d: refused %s still emitted %s", s->now, node, ri,
		     ns_call_str(call), cmp_event_str(ev.type));
		on_event(s, node, &ev);
	}
}

static void call_done(struct ns_sim *s, int node, int ri, int call, int ret)
{
	int err = errno;

	log_add(s, NS_L_CALL, node, ri, call, ret ? -err : 0, 0);
	app_step(s, ri);
	if (ret)
		viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d): %s failed: %s (model %s, engine %s)",
		     s->now, node, ri, s->rec[ri].att, ns_call_str(call), strerror(err),
		     mst_str(s->rec[ri].m.st),
		     s->rec[ri].c ? cmp_state_str(cmp_conn_state(s->rec[ri].c)) : "-");
	check_state(s, ri);
}

static void destroy(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];

	if (r->gone)
		return;
	cmp_conn_destroy(nd->e, r->c, s->now);
	r->gone = 1;
	r->c = NULL;
	if (r->role == R_ACT && r->qpn && nd->nfreed < 16)
		nd->freed[nd->nfreed++] = r->qpn;
	log_add(s, NS_L_CALL, r->node, ri, NS_C_DESTROY, 0, 0);
	app_step(s, ri);
	drain(s, r->node);
}

static void schedule_destroy_if_closed(struct ns_sim *s, int ri)
{
	if (s->rec[ri].m.st == MS_CLOSED)
		after(s, below(&s->ra, s->fast_max), ACT_DESTROY, s->rec[ri].node, ri);
}

/* Snapshot of a connection's QP attributes when it became established. */
static void snap_qp(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	int m;

	if (r->gone || !r->c)
		return;
	if (cmp_conn_qp_attr(r->c, IBV_QPS_RTR, &r->rtr, &m) ||
	    cmp_conn_qp_attr(r->c, IBV_QPS_RTS, &r->rts, &m)) {
		viol(s, "t=%" PRIu64 " n%d rec#%d: no QP attributes when established (engine %s)",
		     s->now, r->node, ri, cmp_state_str(cmp_conn_state(r->c)));
		return;
	}
	r->has_qp = 1;
}

/* QP attributes of the two established sides agree (O5). */
static void check_qp_pair(struct ns_sim *s, int ai, int pi)
{
	struct ns_rec *ra = &s->rec[ai], *rp = &s->rec[pi];
	const struct ibv_qp_attr *a1 = &ra->rtr, *a2 = &ra->rts, *p1 = &rp->rtr, *p2 = &rp->rts;

	if (!ra->has_qp || !rp->has_qp)
		return;
	/* Whichever direction a Starting PSN names, each receive queue must
	 * expect what the peer's send queue starts with, and both numbers must
	 * be ones the applications gave. */
	if (a1->dest_qp_num != rp->qpn || p1->dest_qp_num != ra->qpn || a1->rq_psn != p2->sq_psn ||
	    p1->rq_psn != a2->sq_psn || (a1->rq_psn != ra->psn && a1->rq_psn != rp->psn) ||
	    (p1->rq_psn != ra->psn && p1->rq_psn != rp->psn) ||
	    (ra->psn != rp->psn && a1->rq_psn == p1->rq_psn) || a1->path_mtu != p1->path_mtu)
		viol(s, "t=%" PRIu64 " attempt %d: QP attributes disagree: active RTR dest %06x rq_psn "
		     "%06x RTS sq_psn %06x; passive RTR dest %06x rq_psn %06x RTS sq_psn %06x; QPNs "
		     "given %06x/%06x, PSNs given %06x/%06x; mtu %d/%d",
		     s->now, ra->att, a1->dest_qp_num, a1->rq_psn, a2->sq_psn, p1->dest_qp_num,
		     p1->rq_psn, p2->sq_psn, ra->qpn, rp->qpn, ra->psn, rp->psn, a1->path_mtu,
		     p1->path_mtu);
	if (s->att[ra->att].qp_type == CMP_QPT_RC &&
	    (a2->max_rd_atomic > p1->max_dest_rd_atomic || p2->max_rd_atomic > a1->max_dest_rd_atomic))
		viol(s, "t=%" PRIu64 " attempt %d: RDMA read depth exceeds the peer's responder "
		     "resources (active %u/%u, passive %u/%u)",
		     s->now, ra->att, a2->max_rd_atomic, a1->max_dest_rd_atomic, p2->max_rd_atomic,
		     p1->max_dest_rd_atomic);
}

static int partner_of(const struct ns_sim *s, int ai)
{
	const struct ns_rec *ra = &s->rec[ai];

	if (!ra->remote_id)
		return -1;
	for (int i = 0; i < s->nrec; i++)
		if (s->rec[i].att == ra->att && s->rec[i].role == R_PAS &&
		    s->rec[i].local_id == ra->remote_id)
			return i;
	return -1;
}

static void went_established(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_att *a = &s->att[r->att];
	int me_client = r->role == R_ACT;

	if (me_client ? (a->disc == DP_CLIENT || a->disc == DP_BOTH)
		      : (a->disc == DP_SERVER || a->disc == DP_BOTH) && !r->ghost) {
		cmp_time d = a->hold;
		if (a->disc == DP_BOTH) {
			if (!a->both_at)
				a->both_at = s->now + a->hold;
			d = a->both_at > s->now ? a->both_at - s->now : 0;
		}
		after(s, d, ACT_DISC, r->node, ri);
	}
	/* Nobody else may ever tell us: the application gives up eventually. */
	after(s, s->hold_max + 2 * s->late_max + 2 * NS_S, ACT_WATCHDOG, r->node, ri);
	snap_qp(s, ri);
	if (r->role == R_PAS) {
		int ai = a->a_rec;
		if (ai >= 0 && s->rec[ai].remote_id == r->local_id)
			check_qp_pair(s, ai, ri);
	}
}

static void ev_new_conn(struct ns_sim *s, int node, const struct cmp_event *ev)
{
	struct ns_node *nd = &s->nodes[node];
	uint32_t k;
	int sidr = ev->type == CMP_EV_SIDR_REQ_RECEIVED;

	if (ev->listen != nd->l || ev->listen_ctx != listen_ctx(node) ||
	    ev->ctx != listen_ctx(node))
		viol(s, "t=%" PRIu64 " n%d: %s does not carry this node's listener", s->now, node,
		     cmp_event_str(ev->type));
	if (!pd_tag(ev->private_data, ev->private_data_len, 'A', &k) || k >= (uint32_t)s->natt) {
		viol(s, "t=%" PRIu64 " n%d: %s with private data the applications never sent", s->now,
		     node, cmp_event_str(ev->type));
		cmp_conn_destroy(nd->e, ev->conn, s->now);
		return;
	}
	struct ns_att *a = &s->att[k];
	int ri = rec_new(s, node, a->client, (int)k, sidr ? R_SPAS : R_PAS);
	struct ns_rec *r = &s->rec[ri];

	r->c = ev->conn;
	r->local_id = cmp_conn_local_id(ev->conn);
	r->remote_id = cmp_conn_remote_id(ev->conn);
	cmp_conn_set_ctx(ev->conn, rec_ctx(ri));
	if (a->first_p < 0)
		a->first_p = ri;
	else
		r->ghost = 1;
	a->np++;
	if (r->ghost) {
		/* A duplicate or retried REQ reached a passive side that had
		 * already let go of the first one (IBTA and the kernel do not
		 * remember a rejected REQ): which answer the client sees first
		 * is a race, and the new one is decided afresh. */
		s->cnt.ghosts++;
		a->racy = 1;
	}
	if (!sidr && a->a_rec >= 0)
		for (int q = 0; q < s->nodes[a->client].nreused; q++)
			if (s->nodes[a->client].reused[q] == s->rec[a->a_rec].qpn)
				r->stale_ok = 1;
	rec_timers(s, r);
	log_add(s, NS_L_EVENT, node, ri, ev->type, 0, 0);
	app_step(s, ri);
	check_state(s, ri);

	/* O3: what the active side sent. */
	if (node != a->server || ev->service_id != a->sid)
		viol(s, "t=%" PRIu64 " n%d rec#%d: %s for attempt %d on the wrong node or service "
		     "ID %#" PRIx64, s->now, node, ri, cmp_event_str(ev->type), (int)k, ev->service_id);
	if (!pd_same(ev->private_data, ev->private_data_len, a->pd, a->pdlen))
		viol(s, "t=%" PRIu64 " n%d rec#%d: %s private data differs from what was sent",
		     s->now, node, ri, cmp_event_str(ev->type));
	if (ev->src.lid != a->client + 1)
		viol(s, "t=%" PRIu64 " n%d rec#%d: %s source LID %u, want %d", s->now, node, ri,
		     cmp_event_str(ev->type), ev->src.lid, a->client + 1);
	if (!sidr) {
		const struct ns_rec *ra = a->a_rec >= 0 ? &s->rec[a->a_rec] : NULL;
		uint8_t av = cmp_ack_timeout(s->nodes[a->client].s.local_ca_ack_delay, a->plt);
		if (ra && (ev->remote_qpn != ra->qpn || ev->starting_psn != a->psn))
			viol(s, "t=%" PRIu64 " n%d rec#%d: REQ QPN %06x PSN %06x, sent %06x %06x",
			     s->now, node, ri, ev->remote_qpn, ev->starting_psn, ra->qpn, a->psn);
		if (ev->path.packet_life_time != (av ? av - 1 : 0) || ev->path.mtu != a->mtu ||
		    ev->qp_type != a->qp_type)
			viol(s, "t=%" PRIu64 " n%d rec#%d: REQ lifetime %u mtu %u type %u, want %u %u %u",
			     s->now, node, ri, ev->path.packet_life_time, ev->path.mtu, ev->qp_type,
			     av ? av - 1 : 0, a->mtu, a->qp_type);
		r->srv = r->ghost ? (chance(&s->ra, 0.5) ? SP_ACCEPT : SP_REJECT) : a->srv;
		after(s, r->ghost ? below(&s->ra, s->fast_max) : a->srv_delay, ACT_SRV, node, ri);
		if (a->p_abandon && !r->ghost)
			after(s, a->p_abandon_after, ACT_ABANDON, node, ri);
	} else {
		after(s, r->ghost ? below(&s->ra, s->fast_max) : a->srv_delay, ACT_SIDR_REPLY, node,
		      ri);
	}
}

static void on_event(struct ns_sim *s, int node, const struct cmp_event *ev)
{
	uintptr_t ctx = (uintptr_t)ev->ctx;
	int ri = (int)ctx - 1;
	struct ns_rec *r;
	struct ns_att *a;
	uint32_t k;
	int32_t info = 0;
	uint32_t aux = 0;

	if (ev->type == CMP_EV_REQ_RECEIVED || ev->type == CMP_EV_SIDR_REQ_RECEIVED) {
		ev_new_conn(s, node, ev);
		return;
	}
	if (ctx == 0 || ri >= s->nrec || s->rec[ri].node != node || s->rec[ri].gone ||
	    s->rec[ri].c != ev->conn) {
		viol(s, "t=%" PRIu64 " n%d: event %s for a connection the application does not "
		     "hold (ctx %#lx%s)",
		     s->now, node, cmp_event_str(ev->type), (unsigned long)ctx,
		     ri >= 0 && ri < s->nrec && s->rec[ri].gone ? ", destroyed" : "");
		return;
	}
	r = &s->rec[ri];
	a = &s->att[r->att];
	if (ev->type == CMP_EV_REJ_RECEIVED)
		info = ev->reason;
	else if (ev->type == CMP_EV_SIDR_REP_RECEIVED)
		info = ev->status;
	if (ev->type == CMP_EV_MRA_RECEIVED)
		aux = ev->status;
	if (ev->type == CMP_EV_REJ_RECEIVED && pd_tag(ev->private_data, ev->private_data_len, 'J', &k))
		aux = 1; /* an application's REJ (its private data) */
	log_add(s, NS_L_EVENT, node, ri, ev->type, info, aux);
	app_step(s, ri);
	check_state(s, ri);
	if (r->role == R_ACT || r->role == R_SACT)
		r->remote_id = cmp_conn_remote_id(r->c);

	switch (ev->type) {
	case CMP_EV_REP_RECEIVED: {
		int pi = partner_of(s, ri);
		if (!pd_tag(ev->private_data, ev->private_data_len, 'P', &k) || (int)k != pi) {
			viol(s, "t=%" PRIu64 " n%d rec#%d: REP_RECEIVED from a passive connection "
			     "(comm ID %08x) that is not the one that sent it",
			     s->now, node, ri, r->remote_id);
		} else if (ev->remote_qpn != s->rec[pi].qpn || ev->starting_psn != s->rec[pi].psn) {
			viol(s, "t=%" PRIu64 " n%d rec#%d: REP QPN %06x PSN %06x, sent %06x %06x",
			     s->now, node, ri, ev->remote_qpn, ev->starting_psn, s->rec[pi].qpn,
			     s->rec[pi].psn);
		}
		if (r->m.st == MS_GOT_REP)
			after(s, a->cli_delay, ACT_CLI, node, ri);
		break;
	}
	case CMP_EV_REJ_RECEIVED:
		if (pd_tag(ev->private_data, ev->private_data_len, 'J', &k)) {
			if (k >= (uint32_t)s->nrec || s->rec[k].att != r->att || ev->reason != 28)
				viol(s, "t=%" PRIu64 " n%d rec#%d: REJ with another attempt's private data",
				     s->now, node, ri);
		}
		break;
	case CMP_EV_RTU_RECEIVED:
	case CMP_EV_USER_ESTABLISHED:
		if (r->m.st == MS_EST)
			went_established(s, ri);
		break;
	case CMP_EV_DREQ_RECEIVED:
		if (r->m.st == MS_DREQ_RCVD)
			after(s, a->answer_delay, ACT_ANSWER, node, ri);
		break;
	case CMP_EV_SIDR_REP_RECEIVED:
		if (pd_tag(ev->private_data, ev->private_data_len, 'S', &k)) {
			if (k >= (uint32_t)s->nrec || s->rec[k].att != r->att || !s->rec[k].replied ||
			    ev->status != s->rec[k].sidr_status || ev->remote_qpn != s->rec[k].sidr_qpn ||
			    ev->remote_qkey != s->rec[k].sidr_qkey)
				viol(s, "t=%" PRIu64 " n%d rec#%d: SIDR_REP status %u qpn %06x qkey %08x "
				     "is not what the passive side sent",
				     s->now, node, ri, ev->status, ev->remote_qpn, ev->remote_qkey);
		} else if (ev->status != 1 && ev->status != 2) {
			viol(s, "t=%" PRIu64 " n%d rec#%d: SIDR_REP status %u without the replier's data",
			     s->now, node, ri, ev->status);
		}
		break;
	default:
		break;
	}
	schedule_destroy_if_closed(s, ri);
}

static void do_connect(struct ns_sim *s, int k)
{
	struct ns_att *a = &s->att[k];
	struct ns_node *nd = &s->nodes[a->client];
	struct cmp_path path;
	struct cmp_req_param p;
	struct cmp_conn *c = NULL;
	int ri = rec_new(s, a->client, a->server, k, R_ACT), ret;
	struct ns_rec *r = &s->rec[ri];

	a->a_rec = ri;
	make_path(s, a->client, a->server, a->plt, a->mtu, &path);
	memset(&p, 0, sizeof(p));
	p.primary = &path;
	p.service_id = a->sid;
	if (nd->nfreed && chance(&s->ra, 0.1)) {
		/* The HCA hands out the QPN of a QP destroyed earlier: the peer
		 * may still hold a connection for it (stale connection). */
		int fi = (int)below(&s->ra, (uint64_t)nd->nfreed);
		r->qpn = nd->freed[fi];
		nd->freed[fi] = nd->freed[--nd->nfreed];
		if (nd->nreused < 16)
			nd->reused[nd->nreused++] = r->qpn;
		a->racy = 1;
		for (int q = 0; q < s->nrec; q++)
			if (s->rec[q].role == R_PAS && s->rec[q].node == a->server &&
			    s->att[s->rec[q].att].client == a->client &&
			    s->att[s->rec[q].att].a_rec >= 0 &&
			    s->rec[s->att[s->rec[q].att].a_rec].qpn == r->qpn) {
				s->rec[q].stale_ok = 1;
				s->att[s->rec[q].att].racy = 1;
			}
	} else {
		r->qpn = nd->qpn_next++ & 0xFFFFFF;
	}
	r->psn = a->psn;
	p.qpn = r->qpn;
	p.qp_type = a->qp_type;
	p.starting_psn = a->psn;
	p.responder_resources = a->rr;
	p.initiator_depth = a->id;
	p.remote_cm_response_timeout = a->remote_rt;
	p.local_cm_response_timeout = a->local_rt;
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	p.max_cm_retries = a->retries;
	p.private_data = a->pd;
	p.private_data_len = a->pdlen;
	rec_timers(s, r);
	ret = cmp_connect(nd->e, &p, rec_ctx(ri), &c, s->now);
	r->c = ret ? NULL : c;
	if (ret) {
		int err = errno;
		r->gone = 1;
		log_add(s, NS_L_CALL, a->client, ri, NS_C_CONNECT, -err, 0);
		if (err != ENOMEM || !r->nomem_ok)
			viol(s, "t=%" PRIu64 " n%d: cmp_connect failed: %s", s->now, a->client,
			     strerror(err));
		return;
	}
	r->local_id = cmp_conn_local_id(c);
	call_done(s, a->client, ri, NS_C_CONNECT, 0);
	if (a->a_abandon)
		after(s, a->a_abandon_after, ACT_ABANDON, a->client, ri);
	drain(s, a->client);
}

static void do_sidr(struct ns_sim *s, int k)
{
	struct ns_att *a = &s->att[k];
	struct ns_node *nd = &s->nodes[a->client];
	struct cmp_path path;
	struct cmp_sidr_req_param p;
	struct cmp_conn *c = NULL;
	int ri = rec_new(s, a->client, a->server, k, R_SACT), ret;
	struct ns_rec *r = &s->rec[ri];

	a->a_rec = ri;
	make_path(s, a->client, a->server, a->plt, a->mtu, &path);
	memset(&p, 0, sizeof(p));
	p.path = &path;
	p.service_id = a->sid;
	p.max_retries = a->sidr_retries;
	p.timeout_ns = a->sidr_timeout;
	p.private_data = a->pd;
	p.private_data_len = a->pdlen;
	rec_timers(s, r);
	ret = cmp_sidr_req(nd->e, &p, rec_ctx(ri), &c, s->now);
	if (ret) {
		int err = errno;
		r->gone = 1;
		log_add(s, NS_L_CALL, a->client, ri, NS_C_SIDR_REQ, -err, 0);
		if (err != ENOMEM || !r->nomem_ok)
			viol(s, "t=%" PRIu64 " n%d: cmp_sidr_req failed: %s", s->now, a->client,
			     strerror(err));
		return;
	}
	r->c = c;
	r->local_id = cmp_conn_local_id(c);
	call_done(s, a->client, ri, NS_C_SIDR_REQ, 0);
	if (a->a_abandon)
		after(s, a->a_abandon_after, ACT_ABANDON, a->client, ri);
	drain(s, a->client);
}

static void srv_accept(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	struct cmp_rep_param p;
	uint8_t pd[CMP_REP_PDATA], len;
	int ret;

	if (r->m.st != MS_REQ_RCVD) {
		if (chance(&s->ra, 0.5)) {
			ret = cmp_accept(nd->e, r->c, &(struct cmp_rep_param){ .qpn = 1 }, s->now);
			probe_quiet(s, r->node, ri, NS_C_ACCEPT, ret, errno);
		}
		return;
	}
	gen_pdata(&s->ra, pd, CMP_REP_PDATA, &len, 'P', (uint32_t)ri);
	memset(&p, 0, sizeof(p));
	r->qpn = nd->qpn_next++ & 0xFFFFFF;
	r->psn = (uint32_t)below(&s->ra, 1u << 24);
	p.qpn = r->qpn;
	p.starting_psn = r->psn;
	p.responder_resources = (uint8_t)below(&s->ra, 17);
	p.initiator_depth = (uint8_t)below(&s->ra, 17);
	p.rnr_retry_count = 7;
	p.private_data = pd;
	p.private_data_len = len;
	ret = cmp_accept(nd->e, r->c, &p, s->now);
	call_done(s, r->node, ri, NS_C_ACCEPT, ret);
	drain(s, r->node);
}

static void app_reject(struct ns_sim *s, int ri, int call_if_invalid)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	uint8_t pd[CMP_REJ_PDATA], len, ari[4] = { 1, 2, 3, 4 };
	int ret;

	gen_pdata(&s->ra, pd, CMP_REJ_PDATA, &len, 'J', (uint32_t)ri);
	if (!call_valid(r->m.st, NS_C_REJECT) || r->m.st == MS_ACCEPTED ||
	    r->m.st == MS_CONNECTING) {
		if (call_if_invalid && !call_valid(r->m.st, NS_C_REJECT)) {
			ret = cmp_reject(nd->e, r->c, 28, ari, 4, pd, len, s->now);
			probe_quiet(s, r->node, ri, NS_C_REJECT, ret, errno);
		}
		return;
	}
	ret = cmp_reject(nd->e, r->c, 28, ari, 4, pd, len, s->now);
	call_done(s, r->node, ri, NS_C_REJECT, ret);
	drain(s, r->node);
	schedule_destroy_if_closed(s, ri);
}

/* Does the engine of record ri cut an MRA wait of conv(st) + base short? */
static int mra_capped(struct ns_sim *s, int ri, uint8_t st)
{
	const struct ns_rec *r = ri >= 0 ? &s->rec[ri] : NULL;

	if (!NS_MRA_WAIT_CAPPED || !r || !r->cap || conv(st) + r->base <= r->cap)
		return 0;
	s->cnt.mra_capped++;
	return 1;
}

static void srv_undo(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	int ret;

	if (r->gone || r->m.st != MS_ACCEPTED)
		return;
	ret = cmp_reject(nd->e, r->c, 28, NULL, 0, NULL, 0, s->now);
	call_done(s, r->node, ri, NS_C_REJECT, ret);
	drain(s, r->node);
}

static void do_srv(struct ns_sim *s, int ri, int kind)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	int plan = r->srv, ret;

	if (r->gone)
		return;
	if (kind == ACT_SRV_ACCEPT) {
		srv_accept(s, ri);
		return;
	}
	if (kind == ACT_SRV_REJECT) {
		app_reject(s, ri, chance(&s->ra, 0.5));
		return;
	}
	switch (plan) {
	case SP_ACCEPT:
		srv_accept(s, ri);
		break;
	case SP_ACCEPT_REJ:
		/* Accept, then change its mind (rdma_reject after rdma_accept). */
		srv_accept(s, ri);
		after(s, below(&s->ra, 2 * s->base_hint), ACT_SRV_UNDO, r->node, ri);
		break;
	case SP_ACCEPT_LATE:
		if (r->m.st == MS_REQ_RCVD)
			after(s, s->att[r->att].srv_delay, ACT_SRV_ACCEPT, r->node, ri);
		break;
	case SP_REJECT:
		app_reject(s, ri, 1);
		break;
	case SP_REJECT_LATE:
		after(s, s->att[r->att].srv_delay, ACT_SRV_REJECT, r->node, ri);
		break;
	case SP_MRA_ACCEPT: {
		uint8_t st = chance(&s->ra, 0.5) ? 0 : (uint8_t)range(&s->ra, 10, 14);
		uint8_t eff = st ? st : nd->s.mra_service_timeout;
		if (r->m.st != MS_REQ_RCVD)
			return;
		ret = cmp_mra(nd->e, r->c, st, "mra", 3, s->now);
		if (ret && errno == EINVAL && cmp_conn_state(r->c) == CMP_MRA_REQ_SENT) {
			/* The engine already sent its own MRA for a duplicate
			 * REQ, with the node's service timeout: that is what the
			 * client waits for, not what this application wanted. */
			probe_quiet(s, r->node, ri, NS_C_MRA, ret, errno);
			eff = nd->s.mra_service_timeout;
		} else {
			call_done(s, r->node, ri, NS_C_MRA, ret);
		}
		/* The engine caps the peer's MRA wait at its max_timer_ns (see the
		 * mra_wait_capped test): then the outcome depends on timing. */
		if (mra_capped(s, s->att[r->att].a_rec, eff))
			s->att[r->att].racy = 1;
		drain(s, r->node);
		after(s, below(&s->ra, conv(eff) / 2), ACT_SRV_ACCEPT, r->node, ri);
		break;
	}
	}
}

static void do_cli(struct ns_sim *s, int ri, int kind)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_att *a = &s->att[r->att];
	struct ns_node *nd = &s->nodes[r->node];
	uint8_t pd[CMP_RTU_PDATA], len;
	int ret;

	if (r->gone)
		return;
	if (kind == ACT_CLI && a->cli == CP_REJECT) {
		app_reject(s, ri, 1);
		return;
	}
	if (kind == ACT_CLI && a->cli == CP_MRA_RTU && r->m.st == MS_GOT_REP) {
		uint8_t st = chance(&s->ra, 0.5) ? 0 : (uint8_t)range(&s->ra, 10, 14);
		uint8_t eff = st ? st : nd->s.mra_service_timeout;
		int pi = partner_of(s, ri);
		if (pi < 0 || mra_capped(s, pi, eff))
			a->racy = 1;
		ret = cmp_mra(nd->e, r->c, st, NULL, 0, s->now);
		call_done(s, r->node, ri, NS_C_MRA, ret);
		drain(s, r->node);
		after(s, below(&s->ra, conv(eff) / 2), ACT_CLI_RTU, r->node, ri);
		return;
	}
	if (kind == ACT_CLI && a->cli == CP_RTU_LATE && r->m.st == MS_GOT_REP) {
		after(s, a->cli_delay, ACT_CLI_RTU, r->node, ri);
		return;
	}
	gen_pdata(&s->ra, pd, CMP_RTU_PDATA, &len, 'R', (uint32_t)ri);
	if (r->m.st != MS_GOT_REP) {
		if (chance(&s->ra, 0.5)) {
			ret = cmp_rtu(nd->e, r->c, pd, len, s->now);
			probe_quiet(s, r->node, ri, NS_C_RTU, ret, errno);
		}
		return;
	}
	ret = cmp_rtu(nd->e, r->c, pd, len, s->now);
	call_done(s, r->node, ri, NS_C_RTU, ret);
	drain(s, r->node);
	if (ret)
		return;
	went_established(s, ri);
	int pi = partner_of(s, ri);
	if (pi >= 0)
		check_qp_pair(s, ri, pi);
	if (a->notify && pi >= 0)
		after(s, range(&s->ra, 1 * NS_US, 20 * NS_US), ACT_DATA, s->rec[pi].node, pi);
}

/* First data arrived on the passive QP: cmp_notify when the RTU has not. */
static void do_data(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	int ret;

	if (r->gone || (r->m.st != MS_ACCEPTED && r->m.st != MS_EST))
		return;
	if (r->epoch != nd->epoch)
		return;
	/* USER_ESTABLISHED (polled by drain) schedules what follows. */
	ret = cmp_notify(nd->e, r->c, s->now);
	call_done(s, r->node, ri, NS_C_NOTIFY, ret);
	drain(s, r->node);
}

static void do_disc(struct ns_sim *s, int ri, int answer, int watchdog)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_node *nd = &s->nodes[r->node];
	uint8_t pd[CMP_DREQ_PDATA], len;
	int ret;

	if (r->gone)
		return;
	gen_pdata(&s->ra, pd, CMP_DREQ_PDATA, &len, answer ? 'E' : 'D', (uint32_t)ri);
	if (answer ? r->m.st != MS_DREQ_RCVD : r->m.st != MS_EST) {
		if (!watchdog && !call_valid(r->m.st, NS_C_DISCONNECT) && chance(&s->ra, 0.3)) {
			ret = cmp_disconnect(nd->e, r->c, pd, len, s->now);
			probe_quiet(s, r->node, ri, NS_C_DISCONNECT, ret, errno);
		}
		return;
	}
	if (watchdog)
		r->watchdog = 1;
	ret = cmp_disconnect(nd->e, r->c, pd, len, s->now);
	if (ret && errno == EINVAL && peer_crashed(s, r) &&
	    cmp_conn_state(r->c) == CMP_DREQ_SENT) {
		/* The engine already sent a stale-connection DREQ itself. */
		probe_quiet(s, r->node, ri, NS_C_DISCONNECT, ret, errno);
		return;
	}
	call_done(s, r->node, ri, NS_C_DISCONNECT, ret);
	drain(s, r->node);
}

static void do_sidr_reply(struct ns_sim *s, int ri)
{
	struct ns_rec *r = &s->rec[ri];
	struct ns_att *a = &s->att[r->att];
	struct ns_node *nd = &s->nodes[r->node];
	struct cmp_sidr_rep_param p;
	uint8_t pd[CMP_SIDR_REP_PDATA], len, info[8] = { 9, 8, 7, 6, 5, 4, 3, 2 };
	int ret;

	if (r->gone)
		return;
	if (!r->ghost && a->sidr_plan == SS_DESTROY) {
		destroy(s, ri);
		return;
	}
	if (r->m.st != MS_SIDR_RCVD)
		return;
	gen_pdata(&s->ra, pd, CMP_SIDR_REP_PDATA, &len, 'S', (uint32_t)ri);
	memset(&p, 0, sizeof(p));
	r->sidr_status = (uint8_t)(r->ghost ? 0 : a->sidr_status);
	r->sidr_qpn = nd->qpn_next++ & 0xFFFFFF;
	r->sidr_qkey = (uint32_t)sm64(&s->ra);
	r->replied = 1;
	p.status = r->sidr_status;
	p.qpn = r->sidr_qpn;
	p.qkey = r->sidr_qkey;
	p.info = info;
	p.info_len = 8;
	p.private_data = pd;
	p.private_data_len = len;
	ret = cmp_sidr_rep(nd->e, r->c, &p, s->now);
	call_done(s, r->node, ri, NS_C_SIDR_REP, ret);
	drain(s, r->node);
	schedule_destroy_if_closed(s, ri);
}

static void listen_on(struct ns_sim *s, int i)
{
	struct ns_node *nd = &s->nodes[i];

	if (cmp_listen(nd->e, nd->sid, 0, 0, listen_ctx(i), &nd->l))
		viol(s, "n%d: cmp_listen failed: %s", i, strerror(errno));
}

static void acc_stats(struct cmp_stats *acc, const struct cmp_stats *st)
{
	acc->rx += st->rx;
	acc->tx += st->tx;
	acc->rx_malformed += st->rx_malformed;
	acc->rx_stray += st->rx_stray;
	acc->rx_mismatch += st->rx_mismatch;
	acc->rx_duplicate += st->rx_duplicate;
	acc->rx_stale += st->rx_stale;
	acc->rx_no_listener += st->rx_no_listener;
	acc->backlog_drops += st->backlog_drops;
	acc->retransmits += st->retransmits;
	acc->timeouts += st->timeouts;
	acc->conns += st->conns;
}

static void do_restart(struct ns_sim *s, int i)
{
	struct ns_node *nd = &s->nodes[i];

	s->cnt.restarts++;
	for (int k = 0; k < s->nrec; k++) {
		struct ns_rec *r = &s->rec[k];
		if (r->node == i && !r->gone) {
			r->gone = r->crashed = 1;
			r->c = NULL;
			r->m.st = MS_CRASHED;
			if (r->m.cls == C_OPEN)
				r->m.cls = C_CRASH;
			s->cnt.crashed_recs++;
		}
	}
	for (int k = 0; k < s->natt; k++)
		if (s->att[k].client == i || s->att[k].server == i)
			s->att[k].faulted = 1; /* even later ones: QPNs are reused */
	log_add(s, NS_L_CRASH, i, -1, 0, 0, 0);
	acc_stats(&nd->acc, cmp_engine_stats(nd->e));
	cmp_engine_free(nd->e);
	nd->epoch++;
	nd->s.seed = sm64(&s->rg);
	nd->e = cmp_engine_new(&nd->s);
	if (!nd->e)
		abort();
	nd->l = NULL;
	/* A rebooted host reuses QP numbers: stale-connection handling. */
	nd->qpn_next = 0x100 + (uint32_t)below(&s->rg, 0x40);
	nd->nfreed = 0;
	listen_on(s, i);
}

static void run_action(struct ns_sim *s, const struct ns_act *ac)
{
	struct ns_rec *r = ac->rec >= 0 ? &s->rec[ac->rec] : NULL;

	if (r && (r->gone || r->epoch != s->nodes[r->node].epoch))
		return;
	switch (ac->kind) {
	case ACT_CONNECT: do_connect(s, ac->node); break;
	case ACT_SIDR: do_sidr(s, ac->node); break;
	case ACT_SRV:
	case ACT_SRV_ACCEPT:
	case ACT_SRV_REJECT: do_srv(s, ac->rec, ac->kind); break;
	case ACT_CLI:
	case ACT_CLI_RTU: do_cli(s, ac->rec, ac->kind); break;
	case ACT_DATA: do_data(s, ac->rec); break;
	case ACT_DISC: do_disc(s, ac->rec, 0, 0); break;
	case ACT_WATCHDOG: do_disc(s, ac->rec, 0, 1); break;
	case ACT_ANSWER: do_disc(s, ac->rec, 1, 0); break;
	case ACT_DESTROY: destroy(s, ac->rec); break;
	case ACT_ABANDON:
		if (r->m.st != MS_CLOSED) {
			s->att[r->att].racy = 1;
			s->cnt.abandoned++;
		}
		destroy(s, ac->rec);
		break;
	case ACT_RESTART: do_restart(s, ac->node); break;
	case ACT_SIDR_REPLY: do_sidr_reply(s, ac->rec); break;
	case ACT_SRV_UNDO: srv_undo(s, ac->rec); break;
	case ACT_LISTEN_DOWN:
		if (s->nodes[ac->node].l) {
			cmp_listen_destroy(s->nodes[ac->node].e, s->nodes[ac->node].l);
			s->nodes[ac->node].l = NULL;
			if (s->o.trace) {
				tprefix(s);
				fprintf(s->o.trace, "n%d   *** listener destroyed\n", ac->node);
			}
		}
		break;
	case ACT_LISTEN_UP:
		if (!s->nodes[ac->node].l) {
			listen_on(s, ac->node);
			if (s->o.trace) {
				tprefix(s);
				fprintf(s->o.trace, "n%d   *** listening again\n", ac->node);
			}
		}
		break;
	}
	if (r && !r->gone)
		check_state(s, ac->rec);
}

/* ---- the log checker (C1-C5) -------------------------------------------------------------------- */

enum { PR_NO, PR_YES, PR_FAULT };

/* C4: may the active side end as row while its partner (the passive
 * connection that answered it, or the first one when none did) ends as
 * column? Y always, F only when the attempt saw a fault (loss, partition,
 * delay beyond the timeouts, restart) or a race (a slow or abandoning
 * application, a capped MRA wait, QPN reuse...), - never. */
static const char *const pair_table[] = {
	/*                NONE APP_REJ REJ_REQ REP_ERROR REJ_REP EST_DISC EST_REJ AB_PRE AB_EST REJ_ACC */
	[A_REQ_ERROR]   = "F"  "F"     "F"     "F"       "F"     "-"      "-"     "F"    "-"    "F",
	[A_REJ_REQ]     = "Y"  "Y"     "-"     "F"       "F"     "-"      "-"     "Y"    "-"    "F",
	[A_REJ_REP]     = "-"  "-"     "-"     "F"       "-"     "-"      "-"     "Y"    "-"    "Y",
	[A_SELF_REJ]    = "-"  "-"     "-"     "F"       "Y"     "-"      "-"     "Y"    "-"    "Y",
	[A_EST_REJ]     = "-"  "-"     "-"     "F"       "-"     "-"      "-"     "Y"    "-"    "Y",
	[A_EST_DISC]    = "-"  "-"     "-"     "F"       "-"     "Y"      "-"     "F"    "Y"    "F",
	[A_ABANDON_PRE] = "Y"  "Y"     "Y"     "Y"       "Y"     "-"      "-"     "Y"    "-"    "Y",
	[A_ABANDON_EST] = "-"  "-"     "-"     "F"       "-"     "Y"      "-"     "F"    "Y"    "F",
};

static int pair_rule(int a, int p)
{
	char c;

	if (a == C_CRASH || p == C_CRASH || a == C_NOMEM)
		return PR_YES;
	if (a < A_REQ_ERROR || a > A_ABANDON_EST || p < P_NONE || p > P_REJ_ACCEPTED)
		return PR_NO;
	c = pair_table[a][p - P_NONE];
	return c == 'Y' ? PR_YES : c == 'F' ? PR_FAULT : PR_NO;
}

static int is_est_cls(int c)
{
	return c == P_EST_DISC || c == P_EST_REJ || c == P_ABANDON_EST;
}

/* C5: a fault-free, race-free attempt ends exactly as its applications
 * decided. Returns NULL or what is wrong. */
static const char *expect_clean(const struct ns_sim *s, const struct ns_att *a,
				const struct ns_model *am, const struct ns_model *pm, int p_exists)
{
	const struct ns_node *sv = &s->nodes[a->server];

	if (a->kind) {
		if (am->cls != S_REP)
			return "SIDR request did not get its reply";
		if (a->no_listener)
			return am->reason == 1 ? NULL : "SIDR without listener: want status 1";
		if (!p_exists)
			return sv->limited_backlog && am->reason == 2 ? NULL
								       : "SIDR reply from nobody";
		return am->reason == a->sidr_status ? NULL : "SIDR status differs from the reply";
	}
	if (a->no_listener)
		return am->cls == A_REJ_REQ && am->reason == 8 && !p_exists
			       ? NULL
			       : "connect without listener: want REJ invalid service ID";
	if (!p_exists)
		return am->cls == A_REJ_REQ && am->reason == 28 && sv->limited_backlog
			       ? NULL
			       : "the passive side never saw the REQ";
	if (a->srv == SP_REJECT)
		return am->cls == A_REJ_REQ && am->app_rej_seen && pm->cls == P_APP_REJ
			       ? NULL
			       : "server rejected: want A_REJ_REQ (with its private data) / P_APP_REJ";
	if (a->cli == CP_REJECT)
		return am->cls == A_SELF_REJ && pm->cls == P_REJ_REP
			       ? NULL
			       : "client rejected the REP: want A_SELF_REJ / P_REJ_REP";
	if (am->cls != A_EST_DISC || pm->cls != P_EST_DISC)
		return "accepted and RTU sent: want both A_EST_DISC / P_EST_DISC";
	if ((am->disc_by_call && am->how != D_DREP && am->how != D_CROSS) ||
	    (pm->disc_by_call && pm->how != D_DREP && pm->how != D_CROSS))
		return "a disconnect got no DREP although nothing was lost";
	return NULL;
}

int ns_sim_check(struct ns_sim *s)
{
	int before = s->violations;
	struct ns_model *m = calloc((size_t)s->nrec + 1, sizeof(*m));
	uint32_t crashes[NS_MAX_NODES] = { 0 };
	char why[256];

	if (!m)
		abort();
	s->cnt.timers_checked = 0;
	for (size_t i = 0; i < s->nlog; i++) {
		const struct ns_logent *e = &s->log[i];

		if (e->kind == NS_L_CRASH) {
			if (e->node < 0 || e->node >= s->n)
				continue;
			for (int k = 0; k < s->nrec; k++)
				if (s->rec[k].node == e->node && m[k].seen && m[k].st != MS_GONE &&
				    m[k].st != MS_CRASHED) {
					m[k].st = MS_CRASHED;
					if (m[k].cls == C_OPEN)
						m[k].cls = C_CRASH;
				}
			crashes[e->node]++;
			continue;
		}
		if (e->rec < 0 || e->rec >= s->nrec) {
			viol(s, "log: entry %zu names no record", i);
			continue;
		}
		const struct ns_rec *r = &s->rec[e->rec];
		struct ns_model *mm = &m[e->rec];
		if (!mm->seen) {
			mm->seen = 1;
			mm->peer_crashes = crashes[r->peer];
		}
		int timed = e->kind == NS_L_EVENT &&
			    (((e->code == CMP_EV_REQ_ERROR || e->code == CMP_EV_REP_ERROR ||
			       e->code == CMP_EV_DREQ_ERROR || e->code == CMP_EV_SIDR_REQ_ERROR) &&
			      mm->tm_on) ||
			     (e->code == CMP_EV_TIMEWAIT_EXIT && mm->st == MS_TW));
		if (!model_step(r, mm, e, crashes[r->peer] != 0 || r->stale_ok, why, sizeof(why)))
			s->cnt.timers_checked += (uint64_t)timed;
		else
			viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d, %s): %s", e->t, e->node, e->rec,
			     r->att, r->role == R_ACT ? "active" : r->role == R_PAS ? "passive"
								     : r->role == R_SACT ? "SIDR active"
											: "SIDR passive",
			     why);
	}
	/* C2: everything ended and was let go. */
	for (int k = 0; k < s->nrec; k++) {
		if (m[k].notify_pending)
			viol(s, "rec#%d (attempt %d): cmp_notify returned 0 without USER_ESTABLISHED", k,
			     s->rec[k].att);
		if (m[k].st != MS_GONE && m[k].st != MS_CRASHED)
			viol(s, "rec#%d (n%d, attempt %d) never finished: model state %s%s", k,
			     s->rec[k].node, s->rec[k].att, mst_str(m[k].st),
			     m[k].st == MS_CONNECTING ? " (connect got no terminal event)"
			     : m[k].st == MS_ACCEPTED ? " (accept got no terminal event)"
			     : m[k].st == MS_DISC ? " (disconnect got no terminal event)"
			     : m[k].st == MS_TW ? " (no TIMEWAIT_EXIT)"
			     : m[k].st == MS_SIDR_SENT ? " (sidr_req got no terminal event)"
			     : m[k].st == MS_EST ? " (nobody disconnected)" : "");
	}
	/* C4, C5: the two sides of each attempt. */
	for (int k = 0; k < s->natt; k++) {
		const struct ns_att *a = &s->att[k];
		int ai = a->a_rec, pi = -1;

		if (ai < 0)
			continue;
		const struct ns_model *am = &m[ai];
		if (a->kind == 0 && s->rec[ai].remote_id) {
			pi = partner_of(s, ai);
			if (pi < 0 && am->got_rep && am->cls != C_CRASH && !peer_crashed(s, &s->rec[ai]))
				viol(s, "attempt %d: the active side got a REP from no known passive "
				     "connection", k);
		}
		if (pi < 0)
			pi = a->first_p;
		int pcls = pi >= 0 ? m[pi].cls : P_NONE;
		int acls = am->cls;
		const struct ns_model none = { .cls = P_NONE };

		if (a->kind == 0) {
			int rule = pair_rule(acls, pcls);
			if (rule == PR_NO || (rule == PR_FAULT && !a->faulted && !a->racy))
				viol(s, "attempt %d (n%d->n%d): outcome pair %s / %s is %s", k, a->client,
				     a->server, cls_str(acls), cls_str(pcls),
				     rule == PR_NO ? "never allowed" : "not allowed without a fault or race");
			for (int q = 0; q < s->nrec; q++)
				if (q != pi && s->rec[q].att == k && s->rec[q].role == R_PAS &&
				    is_est_cls(m[q].cls))
					viol(s, "attempt %d: passive rec#%d that is not the active side's "
					     "partner got established (%s)", k, q, cls_str(m[q].cls));
			if (pi >= 0 && (acls == A_EST_DISC || acls == A_ABANDON_EST) &&
			    is_est_cls(pcls) && s->rec[ai].remote_id != s->rec[pi].local_id)
				viol(s, "attempt %d: established with mismatched comm IDs", k);
			if (!a->faulted && !a->racy && acls == A_EST_DISC && pi >= 0 && s->rec[pi].watchdog)
				viol(s, "attempt %d: the passive side never heard the disconnect", k);
			if (!a->faulted && !a->racy && pcls == P_EST_DISC && s->rec[ai].watchdog)
				viol(s, "attempt %d: the active side never heard the disconnect", k);
		} else if (acls == S_REP && !a->no_listener) {
			/* The status came from some passive record (or the backlog). */
			int found = am->reason == 2 || am->reason == 1;
			for (int q = 0; q < s->nrec && !found; q++)
				if (s->rec[q].att == k && s->rec[q].role == R_SPAS && s->rec[q].replied &&
				    s->rec[q].sidr_status == am->reason)
					found = 1;
			if (!found)
				viol(s, "attempt %d: SIDR status %d that no passive side sent", k,
				     am->reason);
		}
		if (!a->faulted && !a->racy && acls != C_CRASH) {
			const char *bad = expect_clean(s, a, am, pi >= 0 ? &m[pi] : &none, pi >= 0);
			if (bad)
				viol(s, "attempt %d (n%d->n%d, clean): %s; got %s / %s", k, a->client,
				     a->server, bad, cls_str(acls), cls_str(pcls));
		}
	}
	free(m);
	return s->violations - before;
}

/* ---- the loop ------------------------------------------------------------------------------------ */

struct ns_sim *ns_sim_new(const struct ns_opts *o)
{
	struct ns_sim *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->o = *o;
	s->rg = o->seed ^ 0x6E657473696D0001ULL;
	s->rn = o->seed ^ 0x6E657473696D0002ULL;
	s->ra = o->seed ^ 0x6E657473696D0003ULL;
	sm64(&s->rg);
	s->hash = 0xCBF29CE484222325ULL;
	gen_scenario(s);
	s->now = 0;
	s->tlimit = 600 * NS_S;
	for (int i = 0; i < s->n; i++) {
		struct ns_node *nd = &s->nodes[i];
		nd->s.seed = sm64(&s->rg);
		nd->e = cmp_engine_new(&nd->s);
		if (!nd->e)
			abort();
		listen_on(s, i);
	}
	for (int k = 0; k < s->natt; k++)
		aq_push(s, s->att[k].start, s->att[k].kind ? ACT_SIDR : ACT_CONNECT, k, -1);
	for (int i = 0; i < s->f.nrestart; i++)
		if (s->f.restart[i].node >= 0 && s->f.restart[i].node < s->n)
			aq_push(s, s->f.restart[i].at, ACT_RESTART, s->f.restart[i].node, -1);
	for (int i = 0; i < s->n; i++)
		if (s->nodes[i].flaps) {
			aq_push(s, s->nodes[i].flap_at, ACT_LISTEN_DOWN, i, -1);
			aq_push(s, s->nodes[i].flap_at + s->nodes[i].flap_len, ACT_LISTEN_UP, i, -1);
		}
	if (o->trace) {
		fprintf(o->trace, "# seed %" PRIu64 " profile %s nodes %d attempts %d grh %d\n",
			o->seed, ns_profile_str(s->profile), s->n, s->natt, s->grh);
		fprintf(o->trace, "# faults: loss %.3f dup %.3f reorder %.3f (<= %" PRIu64
			" ns) delay %.3f (<= %" PRIu64 " ns)\n",
			s->f.loss, s->f.dup, s->f.reorder, s->f.reorder_ns, s->f.delay, s->f.delay_ns);
		for (int i = 0; i < s->f.npart; i++)
			if (s->f.part[i].b < 0)
				fprintf(o->trace, "# partition n%d<->all from %" PRIu64 " for %" PRIu64
					" ns\n", s->f.part[i].a, s->f.part[i].start, s->f.part[i].len);
			else
				fprintf(o->trace, "# partition n%d<->n%d from %" PRIu64 " for %" PRIu64
					" ns\n", s->f.part[i].a, s->f.part[i].b, s->f.part[i].start,
					s->f.part[i].len);
		for (int i = 0; i < s->f.nrestart; i++)
			fprintf(o->trace, "# restart n%d at %" PRIu64 " ns\n", s->f.restart[i].node,
				s->f.restart[i].at);
		for (int i = 0; i < s->n; i++) {
			const struct cmp_settings *st = &s->nodes[i].s;
			fprintf(o->trace,
				"# n%d lid %d guid %016" PRIx64 " resp_timeout %u retries %u mra %u "
				"plt %u ack_delay %u cap %" PRIu64 " timewait %" PRIu64
				" sidr %" PRIu64 "x%u mra_dup %d backlog %u\n",
				i, i + 1, s->nodes[i].guid, st->cm_response_timeout, st->max_cm_retries,
				st->mra_service_timeout, st->packet_life_time, st->local_ca_ack_delay,
				st->max_timer_ns, st->timewait_ns, st->sidr_timeout_ns, st->sidr_retries,
				st->mra_on_duplicate_req, st->default_backlog);
		}
		for (int k = 0; k < s->natt; k++) {
			const struct ns_att *a = &s->att[k];
			fprintf(o->trace,
				"# attempt %d: %s n%d->n%d at %" PRIu64 " ns%s plt %u rt %u/%u retries %u "
				"srv %d cli %d disc %d notify %d abandon %d/%d late-answer %d racy %d\n",
				k, a->kind ? "SIDR" : "connect", a->client, a->server, a->start,
				a->no_listener ? " (no listener)" : "", a->plt, a->eff_lrt, a->eff_rrt,
				a->eff_retries, a->kind ? a->sidr_plan : a->srv, a->cli, a->disc,
				a->notify, a->a_abandon, a->p_abandon, a->late_answer, a->racy);
		}
	}
	return s;
}

static cmp_time next_timer(const struct ns_sim *s)
{
	cmp_time t = CMP_TIME_NEVER;

	for (int i = 0; i < s->n; i++) {
		cmp_time x = cmp_engine_get_expiry(s->nodes[i].e);
		if (x < t)
			t = x;
	}
	return t;
}

static void audit_engine(struct ns_sim *s, int i)
{
	struct ns_node *nd = &s->nodes[i];
	const struct cmp_engine *e = nd->e;
	const struct cmp_stats *st = cmp_engine_stats(e);

	if (cmp_engine_conn_count(e) || cmp_engine_timer_count(e))
		viol(s, "quiescence: n%d has %zu connections and %zu timers left", i,
		     cmp_engine_conn_count(e), cmp_engine_timer_count(e));
	for (size_t k = 0; k < e->by_local.cap; k++) {
		const struct cmp_conn *c = e->by_local.slots[k].val;
		if (c)
			viol(s, "quiescence: n%d still holds connection %08x/%08x in %s (user %s, "
			     "timer %s)",
			     i, c->local_id, c->remote_id, cmp_state_str((enum cmp_state)c->state),
			     c->user_gone ? "gone" : "holding", c->heap_idx == SIZE_MAX ? "none" : "set");
	}
	if (e->by_local.len || e->by_remote.len || e->by_qpn.len || e->by_sidr.len)
		viol(s, "quiescence: n%d indexes not empty (local %zu remote %zu qpn %zu sidr %zu)", i,
		     e->by_local.len, e->by_remote.len, e->by_qpn.len, e->by_sidr.len);
	for (const struct cmp_listen *l = e->listeners; l; l = l->next)
		if (l->pending)
			viol(s, "quiescence: n%d listener counts %u pending REQs", i, l->pending);
	if (e->tx_len || e->ev_len)
		viol(s, "quiescence: n%d has %zu MADs and %zu events queued", i, e->tx_len, e->ev_len);
	if (st->rx_malformed || nd->acc.rx_malformed)
		viol(s, "n%d: %" PRIu64 " MADs failed to decode (the network never corrupts one)", i,
		     st->rx_malformed + nd->acc.rx_malformed);
	/* A pristine run: no fault and no passive side that saw a REQ twice. */
	if (s->profile == NS_PROF_CLEAN && !s->cnt.ghosts && !s->tie && st->rx_mismatch)
		viol(s, "n%d: %" PRIu64 " MADs dropped for a source/comm ID mismatch in a fault-free "
		     "run", i, st->rx_mismatch);
	acc_stats(&nd->acc, st);
}

/*
 * O8: what a REJ or MRA answering the REQ (message rejected / MRAed = REQ)
 * must do to the active connection it names, whatever comm IDs the engine
 * learned on the way (the kernel matches these by the receiver's comm ID
 * alone): from the node the REQ went to, a REJ ends a connect that is still
 * in REQ_SENT / MRA_REQ_RCVD and an MRA is honoured there; once a REP has
 * been received (the REQ is answered) such a REJ changes nothing.
 */
static void deliver(struct ns_sim *s, const struct ns_pkt *p, const struct cmp_addr *src)
{
	uint16_t attr = be16(p->mad + 16);
	int what = p->mad[32] >> 6; /* message rejected / MRAed: 0 = REQ */
	uint32_t rcid = be32(p->mad + 28);
	struct ns_rec *r = NULL;
	enum cmp_state before = CMP_IDLE, after_st;

	if ((attr == UMAD_CM_ATTR_REJ || attr == UMAD_CM_ATTR_MRA) && what == 0)
		for (int i = 0; i < s->nrec; i++)
			if (s->rec[i].node == p->dst && s->rec[i].role == R_ACT && !s->rec[i].gone &&
			    s->rec[i].local_id == rcid && s->rec[i].c) {
				r = &s->rec[i];
				before = cmp_conn_state(r->c);
				break;
			}
	cmp_engine_recv(s->nodes[p->dst].e, src, p->mad, CMP_MAD_SIZE, s->now);
	if (!r || r->gone)
		return;
	after_st = cmp_conn_state(r->c);
	int connecting = before == CMP_REQ_SENT || before == CMP_MRA_REQ_RCVD;
	if (attr == UMAD_CM_ATTR_REJ && connecting && p->src == r->peer &&
	    (after_st == CMP_REQ_SENT || after_st == CMP_MRA_REQ_RCVD))
		viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d): a REJ of its REQ from n%d (reason %u, "
		     "local comm ID %08x) was dropped in %s",
		     s->now, r->node, (int)(r - s->rec), r->att, p->src, be16(p->mad + 34),
		     be32(p->mad + 24), cmp_state_str(before));
	if (attr == UMAD_CM_ATTR_MRA && connecting && p->src == r->peer &&
	    after_st != CMP_MRA_REQ_RCVD)
		viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d): an MRA of its REQ from n%d (local comm "
		     "ID %08x) was dropped in %s",
		     s->now, r->node, (int)(r - s->rec), r->att, p->src, be32(p->mad + 24),
		     cmp_state_str(before));
	if (attr == UMAD_CM_ATTR_REJ && !connecting && before != CMP_IDLE && after_st != before)
		viol(s, "t=%" PRIu64 " n%d rec#%d (attempt %d): a REJ of a REQ (reason %u, local comm "
		     "ID %08x) moved a connection that already has its REP from %s to %s",
		     s->now, r->node, (int)(r - s->rec), r->att, be16(p->mad + 34), be32(p->mad + 24),
		     cmp_state_str(before), cmp_state_str(after_st));
}

void ns_sim_run(struct ns_sim *s)
{
	for (;;) {
		cmp_time tp = s->npq ? s->pq[0].t : CMP_TIME_NEVER;
		cmp_time ta = s->naq ? s->aq[0].t : CMP_TIME_NEVER;
		cmp_time tt = next_timer(s);
		cmp_time now = tp < ta ? tp : ta;

		if (tt < now)
			now = tt;
		if (now == CMP_TIME_NEVER)
			break;
		if (now < s->now) {
			viol(s, "t=%" PRIu64 ": %s due at %" PRIu64 ", in the past", s->now,
			     now == tt ? "a timer" : "an item", now);
			now = s->now;
		}
		s->now = now;
		if (++s->steps > 20000000 || now > s->tlimit) {
			viol(s, "no quiescence by t=%" PRIu64 " after %" PRIu64 " steps (%zu packets, "
			     "%zu actions in flight)", now, s->steps, s->npq, s->naq);
			break;
		}
		if (tp == now) {
			struct ns_pkt p;
			struct cmp_addr src;
			pq_pop(s, &p);
			if (link_down(s, p.src, p.dst, now)) {
				s->cnt.partitioned++;
				fault(s, p.att);
				trace_mad(s, "cut", p.src, p.dst, p.mad, 0);
				continue;
			}
			s->cnt.delivered++;
			trace_mad(s, "deliver", p.src, p.dst, p.mad, 0);
			src_addr(s, p.src, &src);
			deliver(s, &p, &src);
			drain(s, p.dst);
			continue;
		}
		if (tt == now) {
			for (int i = 0; i < s->n; i++) {
				if (cmp_engine_get_expiry(s->nodes[i].e) > now)
					continue;
				cmp_engine_handle_expiry(s->nodes[i].e, now);
				if (cmp_engine_get_expiry(s->nodes[i].e) <= now) {
					viol(s, "t=%" PRIu64 " n%d: handle_expiry left a timer due", now, i);
					s->tlimit = 0;
				}
				drain(s, i);
			}
			continue;
		}
		struct ns_act ac;
		aq_pop(s, &ac);
		run_action(s, &ac);
	}
	for (int i = 0; i < s->n; i++)
		audit_engine(s, i);
	for (int k = 0; k < s->nrec; k++)
		if (!s->rec[k].gone)
			viol(s, "quiescence: rec#%d (n%d attempt %d) is still held by its application "
			     "in model state %s, engine state %s",
			     k, s->rec[k].node, s->rec[k].att, mst_str(s->rec[k].m.st),
			     s->rec[k].c ? cmp_state_str(cmp_conn_state(s->rec[k].c)) : "-");
}

void ns_sim_result(const struct ns_sim *s, struct ns_result *r)
{
	memset(r, 0, sizeof(*r));
	r->violations = s->violations;
	memcpy(r->report, s->report, sizeof(r->report));
	r->hash = s->hash;
	r->profile = s->profile;
	r->nodes = s->n;
	r->attempts = s->natt;
	r->end_time = s->now;
	r->n = s->cnt;
	for (int k = 0; k < s->natt; k++) {
		const struct ns_att *a = &s->att[k];
		if (a->kind)
			r->n.sidr++;
		else
			r->n.attempts++;
		if (!a->faulted && !a->racy)
			r->n.clean_attempts++;
	}
	for (int k = 0; k < s->nrec; k++) {
		const struct ns_rec *rc = &s->rec[k];
		if (rc->role == R_ACT && rc->m.rtu)
			r->n.established++;
		if (rc->role == R_ACT && (rc->m.cls == A_REJ_REQ || rc->m.cls == A_SELF_REJ ||
					  rc->m.cls == A_REJ_REP))
			r->n.rejected++;
		if (rc->m.cls == A_REQ_ERROR || rc->m.cls == P_REP_ERROR || rc->m.cls == S_ERR)
			r->n.timeouts++;
	}
	for (int i = 0; i < s->n; i++) {
		r->n.rx_stray += s->nodes[i].acc.rx_stray;
		r->n.rx_duplicate += s->nodes[i].acc.rx_duplicate;
		r->n.rx_mismatch += s->nodes[i].acc.rx_mismatch;
		r->n.rx_stale += s->nodes[i].acc.rx_stale;
		r->n.retransmits += s->nodes[i].acc.retransmits;
	}
}

void ns_sim_free(struct ns_sim *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		cmp_engine_free(s->nodes[i].e);
	free(s->att);
	free(s->rec);
	free(s->pq);
	free(s->aq);
	free(s->log);
	free(s);
}

int ns_run(const struct ns_opts *o, struct ns_result *r)
{
	struct ns_sim *s = ns_sim_new(o);

	if (!s) {
		memset(r, 0, sizeof(*r));
		r->violations = 1;
		snprintf(r->report, sizeof(r->report), "out of memory\n");
		return 1;
	}
	ns_sim_run(s);
	ns_sim_check(s);
	if (o->trace)
		fprintf(o->trace, "# end t=%" PRIu64 " violations %d hash %016" PRIx64 "\n", s->now,
			s->violations, s->hash);
	ns_sim_result(s, r);
	ns_sim_free(s);
	return r->violations;
}
