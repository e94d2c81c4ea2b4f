/*
 * CM engine unit tests: the transitions of the state machines in
 * cm_proto/cmp_conn.c, driven through the public API (cmp_engine.h) with the
 * two-node harness of cmp_testnet.h: node A (0, LID 1) connects, node B
 * (1, LID 2) listens. Each test checks the connection state, the events
 * (type, fields, private data), the MADs on the wire (decoded with the
 * codec: attribute, comm IDs, reasons, echoed TIDs), the timer deadlines
 * (computed here from the IBTA formulas, not with the engine's helpers) and
 * the statistics. Time is simulated: the whole file runs in milliseconds.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_engine.h"
#include "tests/cmp_testnet.h"

enum { A = 0, B = 1 };
#define GUID_A 0x0002c90300000001ULL /* what tn_init gives the nodes */
#define GUID_B 0x0002c90300000002ULL
#define SID 0x0000000001061144ULL /* TCP port 4420 in the RDMA IP port space */
#define PLT 14                    /* packet lifetime of the harness paths */
#define QPN_A 0x1A2B3Cu
#define QPN_B 0x4D5E6Fu
#define PSN_A 0x0A0B0Cu
#define PSN_B 0x0D0E0Fu
#define MS 1000000ULL

#define EQ(a, b)                                                                         \
	cr_assert_eq((unsigned long long)(a), (unsigned long long)(b), "%s = 0x%llx, want %s = 0x%llx", \
		     #a, (unsigned long long)(a), #b, (unsigned long long)(b))

/* ---- the IBTA formulas, written out as the oracle ------------------------- */

/* 4.096 us * 2^t, in ns. */
static cmp_time iba(unsigned t)
{
	return 4096ULL << t;
}

/* Local ACK timeout from CA ACK delay and packet lifetime (wire.md, Timers). */
static unsigned ack_to(unsigned delay, unsigned plt)
{
	unsigned t = plt + 1;

	if (t >= delay)
		t += delay + 1 >= t; /* delay >= t - 1 */
	else
		t = delay + (t + 1 >= delay); /* t >= delay - 1 */
	return t > 31 ? 31 : t;
}

/* A's REQ retry period: rp.remote_cm_response_timeout is 18. */
static cmp_time req_base(void)
{
	return 2 * iba(PLT) + iba(18);
}

/* B learns the path lifetime as the REQ's local ACK timeout minus one. */
static unsigned b_plt(void)
{
	return ack_to(15, PLT) - 1;
}

/* B's REP/DREQ retry period: rp.local_cm_response_timeout is 17. */
static cmp_time rep_base(void)
{
	return 2 * iba(b_plt()) + iba(17);
}

/* ---- fixture ------------------------------------------------------------------ */

static struct tn T;
static int live;
static int seen[2];            /* events of T.n[i].ev already checked */
static struct cmp_tx TX;       /* the MAD last taken */
static struct cmp_listen *L;
static int lctx, actx;         /* user contexts (by address) */
static struct cmp_conn *ca, *cb; /* A's active conn, B's passive conn */
static struct cmp_path pa;     /* A's path to B */
static struct cmp_req_param rp;
static struct cmp_rep_param pp;
static uint8_t pd[CMP_CM_DATA_SIZE], pd2[CMP_CM_DATA_SIZE];
static uint8_t req_mad[CMP_MAD_SIZE], rep_mad[CMP_MAD_SIZE];
static uint64_t req_tid;

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + 7 * i + 1) | 1;
}

static void up_with(const struct cmp_settings *sa, const struct cmp_settings *sb)
{
	tn_init(&T, sa);
	live = 1;
	if (sb) {
		struct cmp_settings s = *sb;
		s.local_ca_guid = GUID_B;
		s.seed = 1001;
		cmp_engine_free(T.n[B].e);
		T.n[B].e = cmp_engine_new(&s);
	}
	seen[A] = seen[B] = 0;
	L = NULL;
	ca = cb = NULL;
	fill(pd, sizeof(pd), 3);
	fill(pd2, sizeof(pd2), 100);
	pa = T.n[A].to_peer;
	pa.sl = 3;
	pa.flow_label = 0x12345;
	pa.tclass = 0x20;
	pa.hop_limit = 7;
	pa.pkey_index = 2;
	pa.sgid_index = 1;
	memset(&rp, 0, sizeof(rp));
	rp.primary = &pa;
	rp.service_id = SID;
	rp.qpn = QPN_A;
	rp.qp_type = CMP_QPT_RC;
	rp.starting_psn = PSN_A;
	rp.responder_resources = 4;
	rp.initiator_depth = 6;
	rp.remote_cm_response_timeout = 18;
	rp.local_cm_response_timeout = 17;
	rp.retry_count = 5;
	rp.rnr_retry_count = 6;
	rp.max_cm_retries = 4;
	rp.flow_control = 1;
	rp.ece.vendor_id = 0x02C903;
	rp.ece.attr_mod = 0x11223344;
	rp.private_data = pd;
	rp.private_data_len = CMP_REQ_PDATA;
	memset(&pp, 0, sizeof(pp));
	pp.qpn = QPN_B;
	pp.starting_psn = PSN_B;
	pp.responder_resources = 16; /* clamped to the REQ's initiator depth 6 */
	pp.initiator_depth = 2;      /* below the REQ's responder resources 4 */
	pp.failover_accepted = 1;
	pp.flow_control = 1;
	pp.rnr_retry_count = 3;
	pp.ece.vendor_id = 0x0A0B0C;
	pp.ece.attr_mod = 0x55;
	pp.private_data = pd2;
	pp.private_data_len = CMP_REP_PDATA;
}

static void up(void)
{
	up_with(NULL, NULL);
}

static void down(void)
{
	if (live)
		tn_fini(&T);
	live = 0;
}

TestSuite(engine, .fini = down);

/* ---- helpers -------------------------------------------------------------------- */

static struct cmp_engine *E(int i)
{
	return T.n[i].e;
}

static const struct cmp_stats *ST(int i)
{
	return cmp_engine_stats(T.n[i].e);
}

static cmp_time expiry(int i)
{
	return cmp_engine_get_expiry(T.n[i].e);
}

static char nm(int i)
{
	return "AB"[i];
}

/* Takes node i's next MAD, decodes it and checks the parts every CM MAD
 * shares and that it goes to the peer's QP1. */
static void take_to(int i, uint16_t lid, uint16_t attr, struct cmp_cm_msg *m)
{
	cr_assert(tn_take(&T, i, &TX), "node %c: expected a %s, nothing queued", nm(i),
		  cmp_cm_attr_str(attr));
	cr_assert_eq(cmp_cm_decode(TX.mad, CMP_MAD_SIZE, m, NULL), 0,
		     "node %c sent a MAD the codec rejects", nm(i));
	cr_assert_eq(m->hdr.attr_id, attr, "node %c sent a %s, expected a %s", nm(i),
		     cmp_cm_attr_str(m->hdr.attr_id), cmp_cm_attr_str(attr));
	EQ(m->hdr.base_version, 1);
	EQ(m->hdr.mgmt_class, UMAD_CLASS_CM);
	EQ(m->hdr.class_version, 2);
	EQ(m->hdr.method, UMAD_METHOD_SEND);
	EQ(TX.dst.lid, lid);
	EQ(TX.dst.qpn, 1);
	EQ(TX.dst.qkey, 0x80010000u);
}

static void take(int i, uint16_t attr, struct cmp_cm_msg *m)
{
	take_to(i, T.n[1 - i].self.lid, attr, m);
}

static void nothing(int i)
{
	struct cmp_tx tx;
	struct cmp_cm_msg m;

	if (tn_take(&T, i, &tx)) {
		memset(&m, 0, sizeof(m));
		cmp_cm_decode(tx.mad, CMP_MAD_SIZE, &m, NULL);
		cr_assert_fail("node %c sent an unexpected %s", nm(i), cmp_cm_attr_str(m.hdr.attr_id));
	}
}

/* Delivers a MAD to node i as if node 1-i sent it. */
static void to(int i, const uint8_t *mad)
{
	tn_deliver(&T, i, mad);
	tn_events(&T, i);
}

/* Delivers a MAD to node i from the peer's port but another LID. */
static void to_from(int i, uint16_t lid, const uint8_t *mad)
{
	struct cmp_addr a = T.n[1 - i].self;

	a.lid = lid;
	cmp_engine_recv(E(i), &a, mad, CMP_MAD_SIZE, T.now);
	tn_events(&T, i);
}

/* Takes node i's next MAD (checked as take()) and hands it to the peer. */
static void fwd(int i, uint16_t attr, struct cmp_cm_msg *m)
{
	take(i, attr, m);
	to(1 - i, TX.mad);
}

static void msg(struct cmp_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->hdr.attr_id = attr;
	m->hdr.method = UMAD_METHOD_SEND;
	m->hdr.tid = tid;
}

/* Encodes m and delivers it to node i from the peer (LID lid). */
static void inject_from(int i, uint16_t lid, const struct cmp_cm_msg *m)
{
	uint8_t mad[CMP_MAD_SIZE];

	cr_assert_eq(cmp_cm_encode(m, mad), 0);
	to_from(i, lid, mad);
}

static void inject(int i, const struct cmp_cm_msg *m)
{
	inject_from(i, T.n[1 - i].self.lid, m);
}

static const char *ev_name(int i, int k)
{
	return k < T.n[i].nev ? cmp_event_str(T.n[i].ev[k].type) : "nothing";
}

/* The next unchecked event of node i, which must be of this type. */
static const struct cmp_event *next_ev(int i, enum cmp_event_type type)
{
	const struct cmp_event *ev;

	tn_events(&T, i);
	cr_assert(seen[i] < T.n[i].nev, "node %c: expected %s, no event", nm(i),
		  cmp_event_str(type));
	ev = &T.n[i].ev[seen[i]++];
	cr_assert_eq(ev->type, type, "node %c: got %s, expected %s", nm(i),
		     cmp_event_str(ev->type), cmp_event_str(type));
	EQ(ev->time, T.now);
	return ev;
}

static void no_ev(int i)
{
	tn_events(&T, i);
	cr_assert_eq(seen[i], T.n[i].nev, "node %c: unexpected event %s", nm(i),
		     ev_name(i, seen[i]));
}

/* Fires node i's earliest timer (and only node i's). */
static void fire(int i)
{
	cmp_time t = expiry(i);

	cr_assert_neq(t, CMP_TIME_NEVER, "node %c has no timer", nm(i));
	if (t > T.now)
		T.now = t;
	cmp_engine_handle_expiry(E(i), T.now);
	tn_events(&T, i);
}

/* Runs node i's timers until none is left, dropping what it sends. */
static void drain(int i)
{
	struct cmp_tx tx;

	for (int k = 0; k < 100 && expiry(i) != CMP_TIME_NEVER; k++) {
		while (tn_take(&T, i, &tx))
			;
		fire(i);
	}
	while (tn_take(&T, i, &tx))
		;
	EQ(expiry(i), CMP_TIME_NEVER);
}

/* Checks a private data field: want[0..len) then zeros up to cap. */
static void bytes_are(const uint8_t *field, size_t cap, const uint8_t *want, size_t len)
{
	if (len)
		cr_assert(!memcmp(field, want, len), "private data differs");
	for (size_t k = len; k < cap; k++)
		cr_assert_eq(field[k], 0, "byte %zu not zero", k);
}

static void ev_pdata(const struct cmp_event *ev, size_t cap, const uint8_t *want, size_t len)
{
	EQ(ev->private_data_len, cap);
	cr_assert_not_null(ev->private_data);
	bytes_are(ev->private_data, cap, want, len);
}

static void guid_bytes(uint8_t out[8], uint64_t g)
{
	for (int k = 0; k < 8; k++)
		out[k] = (uint8_t)(g >> (56 - 8 * k));
}

static enum cmp_state st(const struct cmp_conn *c)
{
	return cmp_conn_state(c);
}

#define STATE(c, s)                                                                       \
	cr_assert_eq(cmp_conn_state(c), s, "%s is %s, want %s", #c,                          \
		     cmp_state_str(cmp_conn_state(c)), cmp_state_str(s))

/* ---- flows ------------------------------------------------------------------------ */

static void listen_b(void)
{
	cr_assert_eq(cmp_listen(E(B), SID, 0, 0, &lctx, &L), 0);
}

static void connect_a(void)
{
	cr_assert_eq(cmp_connect(E(A), &rp, &actx, &ca, T.now), 0, "connect: %s", strerror(errno));
}

/* A connects, B gets the REQ: A REQ_SENT, B REQ_RCVD. */
static void reach_req_rcvd(void)
{
	struct cmp_cm_msg m;

	listen_b();
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	memcpy(req_mad, TX.mad, sizeof(req_mad));
	req_tid = m.hdr.tid;
	to(B, TX.mad);
	cb = next_ev(B, CMP_EV_REQ_RECEIVED)->conn;
	STATE(cb, CMP_REQ_RCVD);
}

/* ... B accepts: the REP is queued at B, not taken. */
static void reach_rep_sent(void)
{
	reach_req_rcvd();
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	STATE(cb, CMP_REP_SENT);
}

/* ... A gets the REP: A REP_RCVD. */
static void reach_rep_rcvd(void)
{
	struct cmp_cm_msg m;

	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	memcpy(rep_mad, TX.mad, sizeof(rep_mad));
	to(A, TX.mad);
	next_ev(A, CMP_EV_REP_RECEIVED);
	STATE(ca, CMP_REP_RCVD);
}

/* ... A sends the RTU, B gets it: both ESTABLISHED. */
static void reach_established(void)
{
	struct cmp_cm_msg m;

	reach_rep_rcvd();
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	STATE(ca, CMP_ESTABLISHED);
	STATE(cb, CMP_ESTABLISHED);
}

/* ======================================================================== */
/* Active side                                                               */
/* ======================================================================== */

Test(engine, connect_sends_req_with_every_field)
{
	struct cmp_cm_msg m;
	struct cmp_path alt;
	const struct cmp_cm_req *r = &m.u.req;

	up();
	tn_path(&alt, 11, 12);
	alt.sl = 5;
	alt.packet_life_time = 13;
	alt.flow_label = 0x54321;
	alt.tclass = 0x40;
	alt.hop_limit = 9;
	alt.rate = 7;
	rp.alternate = &alt;
	EQ(expiry(A), CMP_TIME_NEVER);
	connect_a();
	STATE(ca, CMP_REQ_SENT);
	cr_assert_eq(cmp_conn_ctx(ca), &actx);
	EQ(cmp_conn_remote_id(ca), 0);
	cr_assert_neq(cmp_conn_local_id(ca), 0);
	take(A, UMAD_CM_ATTR_REQ, &m);
	cr_assert_eq(TX.conn, ca);
	EQ(TX.dst.sl, 3);
	EQ(TX.dst.pkey_index, 2);
	EQ(TX.dst.grh, 0);
	/* TID: low 32 bits are the local comm ID, bytes reversed (as the Linux
	 * CM's: kernel61-rxe-rping.pcap, REQ lcid 0x8c0947ee, TID 0x...ee47098c). */
	EQ((uint32_t)m.hdr.tid, __builtin_bswap32(cmp_conn_local_id(ca)));
	EQ(m.hdr.attr_mod, 0x11223344u);
	EQ(r->local_comm_id, cmp_conn_local_id(ca));
	EQ(r->vendor_id, 0x02C903);
	EQ(r->service_id, SID);
	EQ(r->local_ca_guid, GUID_A);
	EQ(r->local_qkey, 0);
	EQ(r->local_qpn, QPN_A);
	EQ(r->responder_resources, 4);
	EQ(r->initiator_depth, 6);
	EQ(r->local_eecn, 0);
	EQ(r->remote_eecn, 0);
	EQ(r->remote_cm_response_timeout, 18);
	EQ(r->transport_service_type, CMP_QPT_RC);
	EQ(r->end_to_end_flow_control, 1);
	EQ(r->starting_psn, PSN_A);
	EQ(r->local_cm_response_timeout, 17);
	EQ(r->retry_count, 5);
	EQ(r->pkey, 0xFFFF);
	EQ(r->path_mtu, 4);
	EQ(r->rdc_exists, 0);
	EQ(r->rnr_retry_count, 6);
	EQ(r->max_cm_retries, 4);
	EQ(r->srq, 0);
	EQ(r->extended_transport_type, 0);
	EQ(r->primary_local_lid, 1);
	EQ(r->primary_remote_lid, 2);
	cr_assert(!memcmp(r->primary_local_gid, pa.sgid, 16));
	cr_assert(!memcmp(r->primary_remote_gid, pa.dgid, 16));
	EQ(r->primary_flow_label, 0x12345);
	EQ(r->primary_packet_rate, 3);
	EQ(r->primary_traffic_class, 0x20);
	EQ(r->primary_hop_limit, 7);
	EQ(r->primary_sl, 3);
	EQ(r->primary_subnet_local, 1);
	EQ(r->primary_local_ack_timeout, ack_to(15, PLT));
	EQ(r->alternate_local_lid, 11);
	EQ(r->alternate_remote_lid, 12);
	cr_assert(!memcmp(r->alternate_local_gid, alt.sgid, 16));
	cr_assert(!memcmp(r->alternate_remote_gid, alt.dgid, 16));
	EQ(r->alternate_flow_label, 0x54321);
	EQ(r->alternate_packet_rate, 7);
	EQ(r->alternate_traffic_class, 0x40);
	EQ(r->alternate_hop_limit, 9);
	EQ(r->alternate_sl, 5);
	EQ(r->alternate_subnet_local, 1);
	EQ(r->alternate_local_ack_timeout, ack_to(15, 13));
	EQ(r->sap_supported, 0);
	bytes_are(r->private_data, CMP_REQ_PDATA, pd, CMP_REQ_PDATA);
	nothing(A);
	no_ev(A);
	/* REQ timeout = 2 * conv(packet lifetime) + conv(remote CM response timeout). */
	EQ(expiry(A), T.now + req_base());
	EQ(cmp_engine_timer_count(E(A)), 1);
	EQ(cmp_engine_conn_count(E(A)), 1);
	EQ(ST(A)->tx, 1);
	EQ(ST(A)->tx_by_attr[UMAD_CM_ATTR_REQ & 31], 1);
	EQ(ST(A)->conns, 1);
	EQ(ST(A)->conns_peak, 1);
}

Test(engine, connect_clamps_and_truncates_fields)
{
	struct cmp_cm_msg m;

	up();
	rp.qpn = 0xFF123456;         /* 24 bits on the wire */
	rp.starting_psn = 0xFFABCDEF;
	rp.retry_count = 9;          /* 3-bit fields: clamped to 7 */
	rp.rnr_retry_count = 200;
	rp.max_cm_retries = 20;      /* 4 bits: clamped to 15 */
	rp.ece.vendor_id = 0x12345678;
	rp.private_data_len = 5;
	rp.remote_cm_response_timeout = 0; /* 0: the settings' 20 */
	rp.local_cm_response_timeout = 0;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.local_qpn, 0x123456);
	EQ(m.u.req.starting_psn, 0xABCDEF);
	EQ(m.u.req.retry_count, 7);
	EQ(m.u.req.rnr_retry_count, 7);
	EQ(m.u.req.max_cm_retries, 15);
	EQ(m.u.req.vendor_id, 0x345678);
	EQ(m.u.req.remote_cm_response_timeout, 20);
	EQ(m.u.req.local_cm_response_timeout, 20);
	bytes_are(m.u.req.private_data, CMP_REQ_PDATA, pd, 5);
	EQ(expiry(A), T.now + 2 * iba(PLT) + iba(20));
}

Test(engine, req_retried_max_cm_retries_times_then_rej_timeout)
{
	struct cmp_cm_msg m;
	uint8_t first[CMP_MAD_SIZE], guid[8];

	up();
	rp.max_cm_retries = 0; /* the settings' 15 */
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.max_cm_retries, 15);
	memcpy(first, TX.mad, sizeof(first));
	for (int k = 0; k < 15; k++) {
		EQ(expiry(A), T.now + req_base());
		fire(A);
		take(A, UMAD_CM_ATTR_REQ, &m);
		cr_assert(!memcmp(TX.mad, first, CMP_MAD_SIZE), "retry %d differs from the REQ", k);
		nothing(A);
		STATE(ca, CMP_REQ_SENT);
		no_ev(A);
	}
	EQ(ST(A)->retransmits, 15);
	EQ(ST(A)->timeouts, 0);
	fire(A);
	take(A, UMAD_CM_ATTR_REJ, &m);
	cr_assert(!memcmp(TX.mad + 8, first + 8, 8), "REJ TID is not the REQ's");
	EQ(m.u.rej.local_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.remote_comm_id, 0);
	EQ(m.u.rej.message_rejected, 2);
	EQ(m.u.rej.reason, 4);
	EQ(m.u.rej.reject_info_length, 8);
	guid_bytes(guid, GUID_A);
	bytes_are(m.u.rej.ari, sizeof(m.u.rej.ari), guid, 8);
	nothing(A);
	const struct cmp_event *ev = next_ev(A, CMP_EV_REQ_ERROR);
	cr_assert_eq(ev->conn, ca);
	cr_assert_eq(ev->ctx, &actx);
	no_ev(A);
	STATE(ca, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(expiry(A), CMP_TIME_NEVER);
	EQ(ST(A)->timeouts, 1);
	EQ(ST(A)->tx_by_attr[UMAD_CM_ATTR_REQ & 31], 16);
	EQ(ST(A)->tx_by_attr[UMAD_CM_ATTR_REJ & 31], 1);
	cmp_conn_destroy(E(A), ca, T.now);
	nothing(A);
	EQ(cmp_engine_conn_count(E(A)), 0);
}

Test(engine, req_retries_from_param)
{
	struct cmp_cm_msg m;

	up();
	rp.max_cm_retries = 2;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	for (int k = 0; k < 2; k++) {
		fire(A);
		take(A, UMAD_CM_ATTR_REQ, &m);
	}
	fire(A);
	take(A, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 4);
	next_ev(A, CMP_EV_REQ_ERROR);
	no_ev(A);
	EQ(ST(A)->retransmits, 2);
}

/* The peer's REJ(Timeout) reaches the passive side even though it carries
 * remote comm ID 0 (the active side never heard from us). */
Test(engine, rej_timeout_of_req_reaches_req_rcvd)
{
	struct cmp_cm_msg m;
	struct cmp_settings s;
	uint8_t guid[8];

	cmp_settings_default(&s);
	s.mra_on_duplicate_req = 0;
	up_with(&s, NULL);
	rp.max_cm_retries = 1;
	reach_req_rcvd();
	fire(A);
	fwd(A, UMAD_CM_ATTR_REQ, &m); /* duplicate: absorbed */
	nothing(B);
	fire(A);
	fwd(A, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.remote_comm_id, 0);
	next_ev(A, CMP_EV_REQ_ERROR);
	const struct cmp_event *ev = next_ev(B, CMP_EV_REJ_RECEIVED);
	EQ(ev->reason, 4);
	EQ(ev->ari_len, 8);
	guid_bytes(guid, GUID_A);
	cr_assert(!memcmp(ev->ari, guid, 8));
	STATE(cb, CMP_IDLE);
	EQ(ST(B)->rx_stray, 0);
	nothing(B);
}

/* ... and stops the REP retries of a passive side whose REP was lost; a
 * REJ(Timeout) naming another CA GUID is a stray. */
Test(engine, rej_timeout_of_req_stops_rep_retries)
{
	struct cmp_cm_msg m;
	uint8_t rej[CMP_MAD_SIZE];

	up();
	rp.max_cm_retries = 1;
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m); /* lost */
	fire(A);
	take(A, UMAD_CM_ATTR_REQ, &m); /* lost too */
	fire(A);
	take(A, UMAD_CM_ATTR_REJ, &m);
	memcpy(rej, TX.mad, sizeof(rej));
	next_ev(A, CMP_EV_REQ_ERROR);
	m.u.rej.ari[7] ^= 1;
	inject(B, &m);
	EQ(ST(B)->rx_stray, 1);
	STATE(cb, CMP_REP_SENT);
	no_ev(B);
	to(B, rej);
	EQ(next_ev(B, CMP_EV_REJ_RECEIVED)->reason, 4);
	STATE(cb, CMP_TIMEWAIT);
	EQ(expiry(B), T.now + iba(ack_to(15, PLT)));
	nothing(B);
}

Test(engine, mra_for_req_extends_the_timer_then_req_resent)
{
	struct cmp_cm_msg m;
	uint8_t mra[CMP_MAD_SIZE];

	up();
	reach_req_rcvd();
	cr_assert_eq(cmp_mra(E(B), cb, 10, pd, 30, T.now), 0);
	STATE(cb, CMP_MRA_REQ_SENT);
	take(B, UMAD_CM_ATTR_MRA, &m);
	memcpy(mra, TX.mad, sizeof(mra));
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.mra.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.mra.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.mra.message_mraed, 0);
	EQ(m.u.mra.service_timeout, 10);
	bytes_are(m.u.mra.private_data, CMP_MRA_PDATA, pd, 30);
	nothing(B);
	EQ(cmp_engine_timer_count(E(B)), 0);

	T.now += 5 * MS;
	to(A, mra);
	STATE(ca, CMP_MRA_REQ_RCVD);
	/* No peer ID is learned from an MRA (the kernel's choice): a retried
	 * REQ may meet a new passive connection with another ID. */
	EQ(cmp_conn_remote_id(ca), 0);
	const struct cmp_event *ev = next_ev(A, CMP_EV_MRA_RECEIVED);
	EQ(ev->status, 10);
	EQ(ev->src.lid, 2);
	cr_assert_eq(ev->conn, ca);
	/* The wait: conv(service timeout) + the REQ timeout. */
	EQ(expiry(A), T.now + iba(10) + req_base());
	nothing(A);
	/* A second MRA while waiting extends again, without a state change. */
	T.now += 1 * MS;
	to(A, mra);
	STATE(ca, CMP_MRA_REQ_RCVD);
	next_ev(A, CMP_EV_MRA_RECEIVED);
	EQ(expiry(A), T.now + iba(10) + req_base());

	fire(A);
	STATE(ca, CMP_REQ_SENT);
	take(A, UMAD_CM_ATTR_REQ, &m);
	cr_assert(!memcmp(TX.mad, req_mad, CMP_MAD_SIZE));
	EQ(expiry(A), T.now + req_base());
	EQ(ST(A)->retransmits, 1);
	/* That REQ at B (MRA_REQ_SENT) gets the MRA again. */
	to(B, TX.mad);
	take(B, UMAD_CM_ATTR_MRA, &m);
	cr_assert(!memcmp(TX.mad, mra, CMP_MAD_SIZE));
	STATE(cb, CMP_MRA_REQ_SENT);
	no_ev(B);
	/* And B may still accept from MRA_REQ_SENT. */
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	fwd(B, UMAD_CM_ATTR_REP, &m);
	STATE(ca, CMP_REP_RCVD);
}

Test(engine, rep_received_fields)
{
	struct cmp_cm_msg m;
	const struct cmp_cm_rep *r = &m.u.rep;

	up();
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	cr_assert_eq(TX.conn, cb);
	EQ(m.hdr.tid, req_tid);
	EQ(m.hdr.attr_mod, 0x55);
	EQ(r->local_comm_id, cmp_conn_local_id(cb));
	EQ(r->remote_comm_id, cmp_conn_local_id(ca));
	EQ(r->local_qkey, 0);
	EQ(r->local_qpn, QPN_B);
	EQ(r->starting_psn, PSN_B);
	EQ(r->responder_resources, 6); /* min(16, REQ initiator depth 6) */
	EQ(r->initiator_depth, 2);     /* min(2, REQ responder resources 4) */
	EQ(r->target_ack_delay, 15);
	EQ(r->failover_accepted, 1);
	EQ(r->end_to_end_flow_control, 1);
	EQ(r->rnr_retry_count, 3);
	EQ(r->srq, 0);
	EQ(r->local_ca_guid, GUID_B);
	EQ(cmp_cm_rep_vendor_id(r), 0x0A0B0C);
	bytes_are(r->private_data, CMP_REP_PDATA, pd2, CMP_REP_PDATA);
	nothing(B);
	EQ(expiry(B), T.now + rep_base());
	EQ(cmp_conn_remote_id(cb), cmp_conn_local_id(ca));

	T.now += 3 * MS;
	to(A, TX.mad);
	STATE(ca, CMP_REP_RCVD);
	EQ(cmp_conn_remote_id(ca), cmp_conn_local_id(cb));
	EQ(cmp_engine_timer_count(E(A)), 0);
	const struct cmp_event *ev = next_ev(A, CMP_EV_REP_RECEIVED);
	cr_assert_eq(ev->conn, ca);
	cr_assert_eq(ev->ctx, &actx);
	EQ(ev->remote_qpn, QPN_B);
	EQ(ev->starting_psn, PSN_B);
	EQ(ev->responder_resources, 6);
	EQ(ev->initiator_depth, 2);
	EQ(ev->flow_control, 1);
	EQ(ev->srq, 0);
	EQ(ev->rnr_retry_count, 3);
	EQ(ev->status, 1); /* failover accepted */
	EQ(ev->ece.vendor_id, 0x0A0B0C);
	EQ(ev->ece.attr_mod, 0x55);
	EQ(ev->src.lid, 2);
	ev_pdata(ev, CMP_REP_PDATA, pd2, CMP_REP_PDATA);
	no_ev(A);
	nothing(A);
}

Test(engine, rtu_establishes_both_sides)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_rtu(E(A), ca, pd, 40, T.now), 0);
	STATE(ca, CMP_ESTABLISHED);
	take(A, UMAD_CM_ATTR_RTU, &m);
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.rtu.local_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rtu.remote_comm_id, cmp_conn_local_id(cb));
	bytes_are(m.u.rtu.private_data, CMP_RTU_PDATA, pd, 40);
	nothing(A);
	no_ev(A);
	to(B, TX.mad);
	STATE(cb, CMP_ESTABLISHED);
	const struct cmp_event *ev = next_ev(B, CMP_EV_RTU_RECEIVED);
	cr_assert_eq(ev->conn, cb);
	cr_assert_eq(ev->ctx, &lctx);
	EQ(ev->src.lid, 1);
	ev_pdata(ev, CMP_RTU_PDATA, pd, 40);
	EQ(cmp_engine_timer_count(E(B)), 0);
	EQ(cmp_engine_timer_count(E(A)), 0);
	nothing(B);
	no_ev(B);
}

Test(engine, duplicate_rep_when_established_resends_rtu)
{
	struct cmp_cm_msg m;
	uint8_t rtu[CMP_MAD_SIZE];

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_rtu(E(A), ca, pd, 8, T.now), 0);
	take(A, UMAD_CM_ATTR_RTU, &m);
	memcpy(rtu, TX.mad, sizeof(rtu));
	to(A, rep_mad);
	take(A, UMAD_CM_ATTR_RTU, &m);
	cr_assert(!memcmp(TX.mad, rtu, CMP_MAD_SIZE));
	nothing(A);
	no_ev(A);
	STATE(ca, CMP_ESTABLISHED);
	EQ(ST(A)->rx_duplicate, 1);
	EQ(cmp_engine_timer_count(E(A)), 0);
}

Test(engine, duplicate_rep_in_rep_rcvd_dropped)
{
	up();
	reach_rep_rcvd();
	to(A, rep_mad);
	nothing(A);
	no_ev(A);
	STATE(ca, CMP_REP_RCVD);
	EQ(ST(A)->rx_duplicate, 1);
}

Test(engine, rej_in_req_sent_goes_idle)
{
	struct cmp_cm_msg m;
	static const uint8_t ari[3] = { 0xAA, 0xBB, 0xCC };

	up();
	reach_req_rcvd();
	cr_assert_eq(cmp_reject(E(B), cb, 28, ari, 3, pd, CMP_REJ_PDATA, T.now), 0);
	STATE(cb, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(B)), 0);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.hdr.tid, req_tid);
	/* A has not heard B's comm ID yet: 0, as the kernel's cm_format_rej. */
	EQ(m.u.rej.local_comm_id, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.reason, 28);
	EQ(m.u.rej.reject_info_length, 3);
	bytes_are(m.u.rej.ari, sizeof(m.u.rej.ari), ari, 3);
	bytes_are(m.u.rej.private_data, CMP_REJ_PDATA, pd, CMP_REJ_PDATA);
	to(A, TX.mad);
	STATE(ca, CMP_IDLE);
	const struct cmp_event *ev = next_ev(A, CMP_EV_REJ_RECEIVED);
	cr_assert_eq(ev->conn, ca);
	EQ(ev->reason, 28);
	EQ(ev->status, 0); /* message rejected: the REQ */
	EQ(ev->ari_len, 3);
	cr_assert(!memcmp(ev->ari, ari, 3));
	EQ(ev->src.lid, 2);
	ev_pdata(ev, CMP_REJ_PDATA, pd, CMP_REJ_PDATA);
	EQ(cmp_engine_timer_count(E(A)), 0);
	no_ev(A);
	nothing(A);
	/* The user still holds both; destroying them in IDLE sends nothing. */
	cmp_conn_destroy(E(A), ca, T.now);
	cmp_conn_destroy(E(B), cb, T.now);
	nothing(A);
	nothing(B);
	EQ(cmp_engine_conn_count(E(A)), 0);
	EQ(cmp_engine_conn_count(E(B)), 0);
}

Test(engine, rej_stale_conn_in_req_sent_enters_timewait)
{
	struct cmp_cm_msg m;

	up();
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	msg(&m, UMAD_CM_ATTR_REJ, m.hdr.tid);
	m.u.rej.remote_comm_id = cmp_conn_local_id(ca);
	m.u.rej.reason = 10;
	inject(A, &m);
	STATE(ca, CMP_TIMEWAIT);
	EQ(next_ev(A, CMP_EV_REJ_RECEIVED)->reason, 10);
	/* TimeWait = conv(local ACK timeout) = conv(ack_to(delay, lifetime)). */
	EQ(expiry(A), T.now + iba(ack_to(15, PLT)));
	EQ(cmp_engine_timer_count(E(A)), 1);
	nothing(A);
	fire(A);
	STATE(ca, CMP_IDLE);
	next_ev(A, CMP_EV_TIMEWAIT_EXIT);
	no_ev(A);
	EQ(cmp_engine_timer_count(E(A)), 0);
}

Test(engine, user_reject_in_rep_rcvd)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_reject(E(A), ca, 28, NULL, 0, pd, 10, T.now), 0);
	STATE(ca, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(A)), 0);
	take(A, UMAD_CM_ATTR_REJ, &m);
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.rej.local_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.rej.message_rejected, 1);
	EQ(m.u.rej.reason, 28);
	EQ(m.u.rej.reject_info_length, 0);
	to(B, TX.mad);
	/* B had sent its REP: the QP may have seen traffic, so TimeWait. */
	STATE(cb, CMP_TIMEWAIT);
	const struct cmp_event *ev = next_ev(B, CMP_EV_REJ_RECEIVED);
	EQ(ev->reason, 28);
	EQ(ev->status, 1);
	EQ(ev->ari_len, 0);
	cr_assert_null(ev->ari);
	ev_pdata(ev, CMP_REJ_PDATA, pd, 10);
	EQ(expiry(B), T.now + iba(ack_to(15, PLT))); /* B's ACK timeout: the REQ's */
	fire(B);
	next_ev(B, CMP_EV_TIMEWAIT_EXIT);
	STATE(cb, CMP_IDLE);
	no_ev(A);
}

Test(engine, user_mra_for_rep_and_duplicate_rep)
{
	struct cmp_cm_msg m;
	uint8_t mra[CMP_MAD_SIZE];

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_mra(E(A), ca, 0, pd, 12, T.now), 0);
	STATE(ca, CMP_MRA_REP_SENT);
	take(A, UMAD_CM_ATTR_MRA, &m);
	memcpy(mra, TX.mad, sizeof(mra));
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.mra.local_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.mra.remote_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.mra.message_mraed, 1);
	EQ(m.u.mra.service_timeout, 24); /* settings.mra_service_timeout */
	bytes_are(m.u.mra.private_data, CMP_MRA_PDATA, pd, 12);
	/* The duplicate REP gets the MRA again. */
	to(A, rep_mad);
	take(A, UMAD_CM_ATTR_MRA, &m);
	cr_assert(!memcmp(TX.mad, mra, CMP_MAD_SIZE));
	EQ(ST(A)->rx_duplicate, 1);
	STATE(ca, CMP_MRA_REP_SENT);
	no_ev(A);
	/* B: REP_SENT -> MRA_REP_RCVD, the REP timer extended. */
	to(B, mra);
	STATE(cb, CMP_MRA_REP_RCVD);
	EQ(next_ev(B, CMP_EV_MRA_RECEIVED)->status, 24);
	EQ(expiry(B), T.now + iba(24) + rep_base());
	/* The extended wait runs out: B resends the REP, back in REP_SENT. */
	fire(B);
	STATE(cb, CMP_REP_SENT);
	take(B, UMAD_CM_ATTR_REP, &m);
	cr_assert(!memcmp(TX.mad, rep_mad, CMP_MAD_SIZE));
	EQ(expiry(B), T.now + rep_base());
	to(A, TX.mad);
	take(A, UMAD_CM_ATTR_MRA, &m);
	/* A finally sends the RTU from MRA_REP_SENT. */
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	STATE(ca, CMP_ESTABLISHED);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	STATE(cb, CMP_ESTABLISHED);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	EQ(cmp_engine_timer_count(E(B)), 0);
}

Test(engine, mra_in_mra_rep_rcvd_then_rtu)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_mra(E(A), ca, 5, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_MRA, &m);
	STATE(cb, CMP_MRA_REP_RCVD);
	next_ev(B, CMP_EV_MRA_RECEIVED);
	/* A duplicate REQ in MRA_REP_RCVD gets the REP. */
	to(B, req_mad);
	take(B, UMAD_CM_ATTR_REP, &m);
	cr_assert(!memcmp(TX.mad, rep_mad, CMP_MAD_SIZE));
	/* RTU in MRA_REP_RCVD establishes. */
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	STATE(cb, CMP_ESTABLISHED);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	EQ(cmp_engine_timer_count(E(B)), 0);
}

/* ======================================================================== */
/* Passive side                                                              */
/* ======================================================================== */

Test(engine, req_without_listener_rej_invalid_service_id)
{
	struct cmp_cm_msg m;

	up();
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	req_tid = m.hdr.tid;
	take(B, UMAD_CM_ATTR_REJ, &m);
	cr_assert_null(TX.conn);
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.rej.local_comm_id, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.reason, 8);
	nothing(B);
	no_ev(B);
	EQ(cmp_engine_conn_count(E(B)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
	EQ(ST(B)->rx_no_listener, 1);
	to(A, TX.mad);
	EQ(next_ev(A, CMP_EV_REJ_RECEIVED)->reason, 8);
	STATE(ca, CMP_IDLE);
}

Test(engine, listen_masks_and_overlaps)
{
	struct cmp_listen *l1, *l2, *l3, *x;
	struct cmp_cm_msg m;
	int c2;

	up();
	cr_assert_eq(cmp_listen(E(B), 0x0000000001060000ULL, 0xFFFFFFFFFFFF0000ULL, 0, &lctx, &l1), 0);
	/* Anything inside that range overlaps. */
	errno = 0;
	cr_assert_eq(cmp_listen(E(B), SID, 0, 0, NULL, &x), -1);
	EQ(errno, EADDRINUSE);
	errno = 0;
	cr_assert_eq(cmp_listen(E(B), 0x0000000001060000ULL, 0xFFFFFFFFFFFFFF00ULL, 0, NULL, &x), -1);
	EQ(errno, EADDRINUSE);
	errno = 0;
	cr_assert_eq(cmp_listen(E(B), 0, 0xFFFFFFFF00000000ULL, 0, NULL, &x), -1);
	EQ(errno, EADDRINUSE);
	/* Disjoint ones do not. */
	cr_assert_eq(cmp_listen(E(B), 0x0000000001110000ULL, 0xFFFFFFFFFFFF0000ULL, 0, &c2, &l2), 0);
	cr_assert_eq(cmp_listen(E(B), 0x0000000002000000ULL, 0, 0, NULL, &l3), 0);
	errno = 0;
	cr_assert_eq(cmp_listen(E(B), 0x0000000001112222ULL, 0, 0, NULL, &x), -1);
	EQ(errno, EADDRINUSE);

	rp.service_id = 0x0000000001061234ULL;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	const struct cmp_event *ev = next_ev(B, CMP_EV_REQ_RECEIVED);
	cr_assert_eq(ev->listen, l1);
	cr_assert_eq(ev->listen_ctx, &lctx);
	EQ(ev->service_id, 0x0000000001061234ULL);

	rp.service_id = 0x0000000001110007ULL;
	rp.qpn = QPN_A + 1;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	ev = next_ev(B, CMP_EV_REQ_RECEIVED);
	cr_assert_eq(ev->listen, l2);
	cr_assert_eq(ev->listen_ctx, &c2);
	cr_assert_eq(ev->ctx, &c2);
	cr_assert_eq(cmp_conn_ctx(ev->conn), &c2);

	rp.service_id = 0x0000000001070000ULL;
	rp.qpn = QPN_A + 2;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 8);

	cmp_listen_destroy(E(B), l1);
	rp.service_id = 0x0000000001060001ULL;
	rp.qpn = QPN_A + 3;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 8);
	EQ(ST(B)->rx_no_listener, 2);
	/* The range is free again. */
	cr_assert_eq(cmp_listen(E(B), SID, 0, 0, NULL, &x), 0);
	no_ev(B);
}

Test(engine, req_received_fields)
{
	struct cmp_cm_msg m;
	const struct cmp_event *ev;

	up();
	listen_b();
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	T.now += 7 * MS;
	to(B, TX.mad);
	ev = next_ev(B, CMP_EV_REQ_RECEIVED);
	cb = ev->conn;
	STATE(cb, CMP_REQ_RCVD);
	cr_assert_eq(ev->listen, L);
	cr_assert_eq(ev->listen_ctx, &lctx);
	cr_assert_eq(ev->ctx, &lctx);
	EQ(ev->service_id, SID);
	EQ(ev->remote_qpn, QPN_A);
	EQ(ev->starting_psn, PSN_A);
	EQ(ev->responder_resources, 4);
	EQ(ev->initiator_depth, 6);
	EQ(ev->flow_control, 1);
	EQ(ev->srq, 0);
	EQ(ev->rnr_retry_count, 6);
	EQ(ev->retry_count, 5);
	EQ(ev->qp_type, CMP_QPT_RC);
	EQ(ev->ece.vendor_id, 0x02C903);
	EQ(ev->ece.attr_mod, 0x11223344u);
	EQ(ev->src.lid, 1);
	/* The path as seen from B: source and destination swapped. */
	EQ(ev->path.slid, 2);
	EQ(ev->path.dlid, 1);
	cr_assert(!memcmp(ev->path.sgid, pa.dgid, 16));
	cr_assert(!memcmp(ev->path.dgid, pa.sgid, 16));
	EQ(ev->path.flow_label, 0x12345);
	EQ(ev->path.tclass, 0x20);
	EQ(ev->path.hop_limit, 7);
	EQ(ev->path.sl, 3);
	EQ(ev->path.rate, 3);
	EQ(ev->path.mtu, 4);
	EQ(ev->path.pkey, 0xFFFF);
	EQ(ev->path.subnet_local, 1);
	EQ(ev->path.packet_life_time, b_plt());
	ev_pdata(ev, CMP_REQ_PDATA, pd, CMP_REQ_PDATA);
	EQ(cmp_conn_remote_id(cb), cmp_conn_local_id(ca));
	cr_assert_neq(cmp_conn_local_id(cb), 0);
	/* No timer: the user answers (or the peer times out). */
	EQ(cmp_engine_timer_count(E(B)), 0);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx, 1);
	EQ(ST(B)->rx_by_attr[UMAD_CM_ATTR_REQ & 31], 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
}

Test(engine, backlog_full_rej_consumer_defined)
{
	struct cmp_cm_msg m;
	struct cmp_conn *first;
	struct cmp_settings s;

	cmp_settings_default(&s);
	s.default_backlog = 2;
	up_with(&s, NULL);
	cr_assert_eq(cmp_listen(E(B), SID, 0, 1, &lctx, &L), 0);
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	first = next_ev(B, CMP_EV_REQ_RECEIVED)->conn;
	rp.qpn = QPN_A + 1;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 28);
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.local_comm_id, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	no_ev(B);
	EQ(ST(B)->backlog_drops, 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
	to(A, TX.mad);
	EQ(next_ev(A, CMP_EV_REJ_RECEIVED)->reason, 28);
	STATE(ca, CMP_IDLE);
	/* Accepting frees the slot. */
	cr_assert_eq(cmp_accept(E(B), first, &pp, T.now), 0);
	take(B, UMAD_CM_ATTR_REP, &m);
	rp.qpn = QPN_A + 2;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	next_ev(B, CMP_EV_REQ_RECEIVED);
	/* Backlog 0 means the settings' default_backlog (2 here). */
	cmp_listen_destroy(E(B), L);
	cr_assert_eq(cmp_listen(E(B), SID, 0, 0, &lctx, &L), 0);
	for (unsigned k = 0; k < 3; k++) {
		rp.qpn = QPN_A + 10 + k;
		connect_a();
		fwd(A, UMAD_CM_ATTR_REQ, &m);
		if (k < 2) {
			next_ev(B, CMP_EV_REQ_RECEIVED);
		} else {
			take(B, UMAD_CM_ATTR_REJ, &m);
			EQ(m.u.rej.reason, 28);
		}
	}
	EQ(ST(B)->backlog_drops, 2);
}

Test(engine, duplicate_req_in_req_rcvd_answered_with_mra)
{
	struct cmp_cm_msg m;
	uint8_t mra[CMP_MAD_SIZE];

	up();
	reach_req_rcvd();
	to(B, req_mad);
	STATE(cb, CMP_MRA_REQ_SENT);
	take(B, UMAD_CM_ATTR_MRA, &m);
	memcpy(mra, TX.mad, sizeof(mra));
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.mra.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.mra.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.mra.message_mraed, 0);
	EQ(m.u.mra.service_timeout, 24);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx_duplicate, 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
	/* Another duplicate: the same MRA again. */
	to(B, req_mad);
	take(B, UMAD_CM_ATTR_MRA, &m);
	cr_assert(!memcmp(TX.mad, mra, CMP_MAD_SIZE));
	EQ(ST(B)->rx_duplicate, 2);
	no_ev(B);
	/* A waits conv(24) + its REQ timeout. */
	to(A, mra);
	STATE(ca, CMP_MRA_REQ_RCVD);
	EQ(expiry(A), T.now + iba(24) + req_base());
}

Test(engine, duplicate_req_without_mra_setting_absorbed)
{
	struct cmp_settings s;

	cmp_settings_default(&s);
	s.mra_on_duplicate_req = 0;
	up_with(&s, NULL);
	reach_req_rcvd();
	to(B, req_mad);
	STATE(cb, CMP_REQ_RCVD);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx_duplicate, 1);
}

Test(engine, duplicate_req_in_rep_sent_resends_rep)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	memcpy(rep_mad, TX.mad, sizeof(rep_mad));
	cmp_time due = expiry(B);
	to(B, req_mad);
	take(B, UMAD_CM_ATTR_REP, &m);
	cr_assert(!memcmp(TX.mad, rep_mad, CMP_MAD_SIZE));
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_REP_SENT);
	EQ(expiry(B), due);
	EQ(ST(B)->rx_duplicate, 1);
}

Test(engine, duplicate_req_when_established_dropped)
{
	up();
	reach_established();
	to(B, req_mad);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_ESTABLISHED);
	EQ(ST(B)->rx_duplicate, 1);
	EQ(ST(B)->rx_stale, 0);
}

Test(engine, rep_retries_exhausted_rej_timeout_and_rep_error)
{
	struct cmp_cm_msg m;
	uint8_t guid[8];

	up();
	rp.max_cm_retries = 3; /* carried in the REQ: B uses it for its REP */
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	memcpy(rep_mad, TX.mad, sizeof(rep_mad));
	for (int k = 0; k < 3; k++) {
		EQ(expiry(B), T.now + rep_base());
		fire(B);
		take(B, UMAD_CM_ATTR_REP, &m);
		cr_assert(!memcmp(TX.mad, rep_mad, CMP_MAD_SIZE));
		STATE(cb, CMP_REP_SENT);
		no_ev(B);
	}
	fire(B);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.rej.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.message_rejected, 2);
	EQ(m.u.rej.reason, 4);
	EQ(m.u.rej.reject_info_length, 8);
	guid_bytes(guid, GUID_B);
	bytes_are(m.u.rej.ari, sizeof(m.u.rej.ari), guid, 8);
	nothing(B);
	cr_assert_eq(next_ev(B, CMP_EV_REP_ERROR)->conn, cb);
	no_ev(B);
	STATE(cb, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(B)), 0);
	EQ(ST(B)->retransmits, 3);
	EQ(ST(B)->timeouts, 1);
	/* A (still in REQ_SENT) takes the REJ: IDLE, no TimeWait. */
	to(A, TX.mad);
	EQ(next_ev(A, CMP_EV_REJ_RECEIVED)->reason, 4);
	STATE(ca, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(A)), 0);
}

Test(engine, notify_before_rtu_establishes_and_late_rtu_ignored)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_notify(E(B), cb, T.now), 0);
	STATE(cb, CMP_ESTABLISHED);
	cr_assert_eq(next_ev(B, CMP_EV_USER_ESTABLISHED)->conn, cb);
	EQ(cmp_engine_timer_count(E(B)), 0);
	nothing(B);
	/* Again: nothing to do. */
	cr_assert_eq(cmp_notify(E(B), cb, T.now), 0);
	no_ev(B);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	no_ev(B);
	nothing(B);
	STATE(cb, CMP_ESTABLISHED);
	EQ(ST(B)->rx_duplicate, 1);
}

Test(engine, req_from_connected_qp_under_new_comm_id_is_stale)
{
	struct cmp_cm_msg m;
	struct cmp_conn *old_a;
	uint64_t tid2;

	up();
	reach_established();
	old_a = ca;
	/* A "restarts" and connects the same QP again: a new comm ID. */
	connect_a();
	cr_assert_neq(ca, old_a);
	cr_assert_neq(cmp_conn_local_id(ca), cmp_conn_local_id(old_a));
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	tid2 = m.hdr.tid;
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.hdr.tid, tid2);
	EQ(m.u.rej.local_comm_id, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.reason, 10);
	/* The old connection is disconnected. */
	take(B, UMAD_CM_ATTR_DREQ, &m);
	uint8_t dreq[CMP_MAD_SIZE];
	memcpy(dreq, TX.mad, sizeof(dreq));
	EQ(m.u.dreq.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.dreq.remote_comm_id, cmp_conn_local_id(old_a));
	EQ(m.u.dreq.remote_qpn_eecn, QPN_A);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_DREQ_SENT);
	EQ(expiry(B), T.now + rep_base());
	EQ(ST(B)->rx_stale, 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
	/* At A, the old connection gets the DREQ. */
	to(A, dreq);
	STATE(old_a, CMP_DREQ_RCVD);
	cr_assert_eq(next_ev(A, CMP_EV_DREQ_RECEIVED)->conn, old_a);
}

Test(engine, stale_rej_reaches_the_new_attempt)
{
	struct cmp_cm_msg m;
	struct cmp_conn *old_a;

	up();
	reach_established();
	old_a = ca;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	fwd(B, UMAD_CM_ATTR_REJ, &m);
	const struct cmp_event *ev = next_ev(A, CMP_EV_REJ_RECEIVED);
	cr_assert_eq(ev->conn, ca);
	EQ(ev->reason, 10);
	STATE(ca, CMP_TIMEWAIT);
	STATE(old_a, CMP_ESTABLISHED);
}

/* A REQ naming a connected QP (the peer's CA GUID and QPN) under a new comm
 * ID, for a service nobody listens on, from a third port (LID 99): the
 * kernel would take it for a stale connection and DREQ the real peer. It
 * gets its REJ(stale connection), is counted as a spoof, and the
 * connection it names stays up; from the peer's own port the same REQ
 * still tears the old connection down (IBTA: the QP was reconnected). */
Test(engine, stale_req_from_another_port_keeps_the_connection)
{
	struct cmp_cm_msg m;
	struct cmp_conn *victim[2];

	up();
	reach_established();
	victim[A] = ca;
	victim[B] = cb;
	for (int n = B; n >= A; n--) {
		msg(&m, UMAD_CM_ATTR_REQ, 0x99ULL << 32 | 0x5eed0000u | (unsigned)n);
		m.u.req.local_comm_id = 0x5eed0000u | (unsigned)n;
		m.u.req.service_id = 0x1000000000000999ULL; /* nobody listens */
		m.u.req.local_ca_guid = n == B ? GUID_A : GUID_B; /* the victim's peer */
		m.u.req.local_qpn = n == B ? QPN_A : QPN_B;
		m.u.req.path_mtu = 4;
		m.u.req.primary_local_lid = 99;
		m.u.req.primary_remote_lid = T.n[n].self.lid;
		inject_from(n, 99, &m);
		take_to(n, 99, UMAD_CM_ATTR_REJ, &m);
		EQ(m.hdr.tid, 0x99ULL << 32 | 0x5eed0000u | (unsigned)n);
		EQ(m.u.rej.local_comm_id, 0);
		EQ(m.u.rej.remote_comm_id, 0x5eed0000u | (unsigned)n);
		EQ(m.u.rej.message_rejected, 0);
		EQ(m.u.rej.reason, 10);
		nothing(n);
		no_ev(n);
		STATE(victim[n], CMP_ESTABLISHED);
		EQ(cmp_engine_timer_count(E(n)), 0);
		EQ(ST(n)->rx_spoofed, 1);
		EQ(ST(n)->rx_mismatch, 1);
		EQ(ST(n)->rx_stale, 0);
		EQ(ST(n)->rx_no_listener, 0);
	}
	/* The same REQ at B from A's own port: the old connection goes. */
	msg(&m, UMAD_CM_ATTR_REQ, 0x5eed0002u);
	m.u.req.local_comm_id = 0x5eed0002u;
	m.u.req.service_id = 0x1000000000000999ULL;
	m.u.req.local_ca_guid = GUID_A;
	m.u.req.local_qpn = QPN_A;
	m.u.req.path_mtu = 4;
	inject(B, &m);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 10);
	take(B, UMAD_CM_ATTR_DREQ, &m);
	EQ(m.u.dreq.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.dreq.remote_comm_id, cmp_conn_local_id(ca));
	STATE(cb, CMP_DREQ_SENT);
	EQ(ST(B)->rx_stale, 1);
	EQ(ST(B)->rx_spoofed, 1);
}

Test(engine, transport_types)
{
	struct cmp_cm_msg m;
	uint8_t mad[CMP_MAD_SIZE];

	up();
	listen_b();
	rp.qp_type = CMP_QPT_UC;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.transport_service_type, 1);
	EQ(next_ev(B, CMP_EV_REQ_RECEIVED)->qp_type, CMP_QPT_UC);

	/* RD (2): rejected with reason 9, nothing created. */
	rp.qp_type = CMP_QPT_RC;
	rp.qpn = QPN_A + 1;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	m.u.req.transport_service_type = 2;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	to(B, mad);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 9);
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	no_ev(B);
	EQ(cmp_engine_conn_count(E(B)), 1);

	/* 3 without extended type 1 (XRC): the codec refuses it, so it is
	 * malformed. */
	rp.qpn = QPN_A + 2;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	m.u.req.transport_service_type = 3;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	to(B, mad);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx_malformed, 1);

	/* The user cannot ask for them either (2 and 3 are the XRC types;
	 * an XRC target is only ever the passive side). */
	rp.qp_type = CMP_QPT_XRC_TGT;
	errno = 0;
	cr_assert_eq(cmp_connect(E(A), &rp, NULL, &ca, T.now), -1);
	EQ(errno, EINVAL);
	rp.qp_type = 4;
	errno = 0;
	cr_assert_eq(cmp_connect(E(A), &rp, NULL, &ca, T.now), -1);
	EQ(errno, EINVAL);
}

Test(engine, req_in_timewait_rej_stale)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	take(B, UMAD_CM_ATTR_DREP, &m);
	STATE(cb, CMP_TIMEWAIT);
	cmp_time due = expiry(B);
	/* The original REQ again (same remote comm ID). */
	to(B, req_mad);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.hdr.tid, req_tid);
	EQ(m.u.rej.local_comm_id, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.rej.reason, 10);
	EQ(m.u.rej.message_rejected, 0);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_TIMEWAIT);
	EQ(expiry(B), due);
	EQ(ST(B)->rx_stale, 1);
	EQ(ST(B)->rx_duplicate, 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
}

/* ======================================================================== */
/* Disconnect                                                                */
/* ======================================================================== */

Test(engine, disconnect_from_active_side)
{
	struct cmp_cm_msg m;
	struct cmp_settings sb;
	uint64_t dreq_tid;

	/* Different ACK delays, so that A's and B's TimeWait differ. */
	cmp_settings_default(&sb);
	sb.local_ca_ack_delay = 20;
	up_with(NULL, &sb);
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, pd, CMP_DREQ_PDATA, T.now), 0);
	STATE(ca, CMP_DREQ_SENT);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	dreq_tid = m.hdr.tid;
	EQ((uint32_t)dreq_tid, __builtin_bswap32(cmp_conn_local_id(ca)));
	cr_assert_neq(dreq_tid, req_tid, "a DREQ starts a new transaction");
	EQ(m.u.dreq.local_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.dreq.remote_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.dreq.remote_qpn_eecn, QPN_B);
	bytes_are(m.u.dreq.private_data, CMP_DREQ_PDATA, pd, CMP_DREQ_PDATA);
	EQ(expiry(A), T.now + req_base());
	nothing(A);
	to(B, TX.mad);
	STATE(cb, CMP_DREQ_RCVD);
	const struct cmp_event *ev = next_ev(B, CMP_EV_DREQ_RECEIVED);
	cr_assert_eq(ev->conn, cb);
	EQ(ev->src.lid, 1);
	ev_pdata(ev, CMP_DREQ_PDATA, pd, CMP_DREQ_PDATA);
	EQ(cmp_engine_timer_count(E(B)), 0);
	nothing(B);

	T.now += 2 * MS;
	cr_assert_eq(cmp_disconnect(E(B), cb, pd2, CMP_DREP_PDATA, T.now), 0);
	STATE(cb, CMP_TIMEWAIT);
	take(B, UMAD_CM_ATTR_DREP, &m);
	EQ(m.hdr.tid, dreq_tid);
	EQ(m.u.drep.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.drep.remote_comm_id, cmp_conn_local_id(ca));
	bytes_are(m.u.drep.private_data, CMP_DREP_PDATA, pd2, CMP_DREP_PDATA);
	/* B's ACK timeout is the REQ's: ack_to(A's delay 15, lifetime). */
	EQ(expiry(B), T.now + iba(ack_to(15, PLT)));
	to(A, TX.mad);
	STATE(ca, CMP_TIMEWAIT);
	ev = next_ev(A, CMP_EV_DREP_RECEIVED);
	ev_pdata(ev, CMP_DREP_PDATA, pd2, CMP_DREP_PDATA);
	/* A's became ack_to(B's target ACK delay 20, lifetime) with the REP. */
	EQ(expiry(A), T.now + iba(ack_to(20, PLT)));
	cr_assert_neq(ack_to(20, PLT), ack_to(15, PLT));
	nothing(A);

	fire(B);
	STATE(cb, CMP_IDLE);
	next_ev(B, CMP_EV_TIMEWAIT_EXIT);
	fire(A);
	STATE(ca, CMP_IDLE);
	next_ev(A, CMP_EV_TIMEWAIT_EXIT);
	no_ev(A);
	no_ev(B);
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
	/* The QP is free: reconnecting it is not stale any more. */
	cmp_conn_destroy(E(A), ca, T.now);
	cmp_conn_destroy(E(B), cb, T.now);
	EQ(cmp_engine_conn_count(E(A)), 0);
	EQ(cmp_engine_conn_count(E(B)), 0);
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	next_ev(B, CMP_EV_REQ_RECEIVED);
	EQ(ST(B)->rx_stale, 0);
}

Test(engine, disconnect_from_passive_side)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(B), cb, pd, 3, T.now), 0);
	STATE(cb, CMP_DREQ_SENT);
	take(B, UMAD_CM_ATTR_DREQ, &m);
	EQ((uint32_t)m.hdr.tid, __builtin_bswap32(cmp_conn_local_id(cb)));
	EQ(m.u.dreq.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.dreq.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.dreq.remote_qpn_eecn, QPN_A);
	EQ(expiry(B), T.now + rep_base());
	to(A, TX.mad);
	STATE(ca, CMP_DREQ_RCVD);
	ev_pdata(next_ev(A, CMP_EV_DREQ_RECEIVED), CMP_DREQ_PDATA, pd, 3);
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	STATE(ca, CMP_TIMEWAIT);
	fwd(A, UMAD_CM_ATTR_DREP, &m);
	STATE(cb, CMP_TIMEWAIT);
	ev_pdata(next_ev(B, CMP_EV_DREP_RECEIVED), CMP_DREP_PDATA, NULL, 0);
	EQ(expiry(B), T.now + iba(ack_to(15, PLT)));
	EQ(expiry(A), T.now + iba(ack_to(15, PLT)));
	fire(A);
	fire(B);
	next_ev(A, CMP_EV_TIMEWAIT_EXIT);
	next_ev(B, CMP_EV_TIMEWAIT_EXIT);
	STATE(ca, CMP_IDLE);
	STATE(cb, CMP_IDLE);
}

Test(engine, dreq_retries_exhausted_dreq_error_then_timewait)
{
	struct cmp_cm_msg m;
	uint8_t dreq[CMP_MAD_SIZE];

	up();
	rp.max_cm_retries = 2;
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	memcpy(dreq, TX.mad, sizeof(dreq));
	for (int k = 0; k < 2; k++) {
		EQ(expiry(A), T.now + req_base());
		fire(A);
		take(A, UMAD_CM_ATTR_DREQ, &m);
		cr_assert(!memcmp(TX.mad, dreq, CMP_MAD_SIZE));
		STATE(ca, CMP_DREQ_SENT);
		no_ev(A);
	}
	fire(A);
	nothing(A);
	next_ev(A, CMP_EV_DREQ_ERROR);
	STATE(ca, CMP_TIMEWAIT);
	EQ(expiry(A), T.now + iba(ack_to(15, PLT)));
	EQ(ST(A)->timeouts, 1);
	EQ(ST(A)->retransmits, 2);
	fire(A);
	next_ev(A, CMP_EV_TIMEWAIT_EXIT);
	STATE(ca, CMP_IDLE);
	no_ev(A);
	EQ(cmp_engine_timer_count(E(A)), 0);
}

Test(engine, simultaneous_dreqs)
{
	struct cmp_cm_msg m;
	uint8_t da[CMP_MAD_SIZE], db[CMP_MAD_SIZE];

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	memcpy(da, TX.mad, sizeof(da));
	take(B, UMAD_CM_ATTR_DREQ, &m);
	memcpy(db, TX.mad, sizeof(db));
	to(B, da);
	to(A, db);
	STATE(ca, CMP_DREQ_RCVD);
	STATE(cb, CMP_DREQ_RCVD);
	next_ev(A, CMP_EV_DREQ_RECEIVED);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	/* Their DREQ answers ours: no retry timer left. */
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	STATE(ca, CMP_TIMEWAIT);
	STATE(cb, CMP_TIMEWAIT);
	fwd(A, UMAD_CM_ATTR_DREP, &m);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	/* Each DREP lands in TimeWait: absorbed. */
	no_ev(A);
	no_ev(B);
	EQ(ST(A)->rx_duplicate, 1);
	EQ(ST(B)->rx_duplicate, 1);
	nothing(A);
	nothing(B);
	fire(A);
	fire(B);
	next_ev(A, CMP_EV_TIMEWAIT_EXIT);
	next_ev(B, CMP_EV_TIMEWAIT_EXIT);
}

Test(engine, dreq_in_timewait_resends_drep)
{
	struct cmp_cm_msg m;
	uint8_t dreq[CMP_MAD_SIZE], drep[CMP_MAD_SIZE];

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	memcpy(dreq, TX.mad, sizeof(dreq));
	to(B, dreq);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	take(B, UMAD_CM_ATTR_DREP, &m);
	memcpy(drep, TX.mad, sizeof(drep));
	cmp_time due = expiry(B);
	T.now += MS;
	to(B, dreq); /* our DREP was lost */
	take(B, UMAD_CM_ATTR_DREP, &m);
	cr_assert(!memcmp(TX.mad, drep, CMP_MAD_SIZE));
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_TIMEWAIT);
	EQ(expiry(B), due);
	EQ(ST(B)->rx_duplicate, 1);
}

Test(engine, duplicate_dreq_in_dreq_rcvd_absorbed)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	to(B, TX.mad);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	to(B, TX.mad);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_DREQ_RCVD);
	EQ(ST(B)->rx_duplicate, 1);
}

Test(engine, dreq_for_unknown_comm_id_answered_with_drep)
{
	struct cmp_cm_msg m;

	up();
	msg(&m, UMAD_CM_ATTR_DREQ, 0x1234567800C0FFEEULL);
	m.u.dreq.local_comm_id = 0x11111111;
	m.u.dreq.remote_comm_id = 0x22222222;
	m.u.dreq.remote_qpn_eecn = 7;
	inject(B, &m);
	take(B, UMAD_CM_ATTR_DREP, &m);
	cr_assert_null(TX.conn);
	EQ(m.hdr.tid, 0x1234567800C0FFEEULL);
	EQ(m.u.drep.local_comm_id, 0x22222222);
	EQ(m.u.drep.remote_comm_id, 0x11111111);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx_stray, 1);
	EQ(cmp_engine_conn_count(E(B)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
}

Test(engine, dreq_with_wrong_qpn_source_or_comm_id_dropped)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	msg(&m, UMAD_CM_ATTR_DREQ, 0x99ULL << 32 | cmp_conn_local_id(ca));
	m.u.dreq.local_comm_id = cmp_conn_local_id(ca);
	m.u.dreq.remote_comm_id = cmp_conn_local_id(cb);
	m.u.dreq.remote_qpn_eecn = QPN_B ^ 1;
	inject(B, &m);
	EQ(ST(B)->rx_mismatch, 1);
	m.u.dreq.remote_qpn_eecn = QPN_B;
	inject_from(B, 3, &m);
	EQ(ST(B)->rx_mismatch, 2);
	m.u.dreq.local_comm_id ^= 1;
	inject(B, &m);
	EQ(ST(B)->rx_mismatch, 3);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_ESTABLISHED);
	m.u.dreq.local_comm_id ^= 1;
	inject(B, &m);
	STATE(cb, CMP_DREQ_RCVD);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	EQ(ST(B)->rx_mismatch, 3);
}

Test(engine, dreq_in_rep_sent_after_lost_rtu)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_RTU, &m); /* lost */
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	STATE(cb, CMP_DREQ_RCVD);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	EQ(cmp_engine_timer_count(E(B)), 0); /* the REP retries stop */
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	STATE(ca, CMP_TIMEWAIT);
	STATE(cb, CMP_TIMEWAIT);
	next_ev(A, CMP_EV_DREP_RECEIVED);
}

/* A DREQ the state machine drops must not disturb the connection: the
 * RTU sent afterwards still echoes the REQ's transaction ID. */
Test(engine, stray_dreq_in_rep_rcvd_keeps_tid)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	msg(&m, UMAD_CM_ATTR_DREQ, 0xDEAD000000000000ULL | cmp_conn_local_id(cb));
	m.u.dreq.local_comm_id = cmp_conn_local_id(cb);
	m.u.dreq.remote_comm_id = cmp_conn_local_id(ca);
	m.u.dreq.remote_qpn_eecn = QPN_A;
	inject(A, &m);
	STATE(ca, CMP_REP_RCVD);
	EQ(ST(A)->rx_stray, 1);
	nothing(A);
	no_ev(A);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_RTU, &m);
	EQ(m.hdr.tid, req_tid);
}

/* ======================================================================== */
/* Strays and adversarial input                                              */
/* ======================================================================== */

Test(engine, unknown_comm_ids_are_strays)
{
	struct cmp_cm_msg m;
	static const uint16_t attrs[] = { UMAD_CM_ATTR_RTU, UMAD_CM_ATTR_REP, UMAD_CM_ATTR_REJ,
					  UMAD_CM_ATTR_DREP, UMAD_CM_ATTR_MRA, UMAD_CM_ATTR_LAP };
	uint64_t stray = 0;

	up();
	reach_established();
	for (size_t k = 0; k < sizeof(attrs) / sizeof(attrs[0]); k++) {
		for (int i = 0; i < 2; i++) {
			uint32_t bogus = ~(cmp_conn_local_id(ca) ^ cmp_conn_local_id(cb));
			msg(&m, attrs[k], 0x77);
			/* Both comm ID fields sit at bytes 0 and 4 in each of these. */
			m.u.rtu.local_comm_id = cmp_conn_local_id(i == A ? cb : ca);
			m.u.rtu.remote_comm_id = bogus;
			if (attrs[k] == UMAD_CM_ATTR_REP)
				m.u.rep.local_qpn = QPN_B;
			if (attrs[k] == UMAD_CM_ATTR_REJ)
				m.u.rej.reason = 28;
			inject(i, &m);
			EQ(ST(i)->rx_stray, (i == A ? ++stray : stray));
		}
		EQ(ST(B)->rx_stray, stray);
	}
	/* SIDR_REP with an unknown request ID; attributes the engine does not
	 * handle (APR, ClassPortInfo). */
	msg(&m, UMAD_CM_ATTR_SIDR_REP, 0x77);
	m.u.sidr_rep.request_id = 0x5A5A5A5A;
	inject(A, &m);
	msg(&m, UMAD_CM_ATTR_APR, 0x77);
	inject(A, &m);
	msg(&m, UMAD_ATTR_CLASS_PORT_INFO, 0x77);
	m.hdr.method = UMAD_METHOD_GET;
	inject(A, &m);
	EQ(ST(A)->rx_stray, stray + 3);
	EQ(ST(A)->rx_mismatch, 0);
	STATE(ca, CMP_ESTABLISHED);
	STATE(cb, CMP_ESTABLISHED);
	nothing(A);
	nothing(B);
	no_ev(A);
	no_ev(B);
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
}

Test(engine, right_comm_id_from_wrong_source_is_mismatch)
{
	struct cmp_cm_msg m;
	uint8_t rtu[CMP_MAD_SIZE];

	up();
	reach_rep_rcvd();
	/* RTU from LID 3 for B's connection. */
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_RTU, &m);
	memcpy(rtu, TX.mad, sizeof(rtu));
	to_from(B, 3, rtu);
	EQ(ST(B)->rx_mismatch, 1);
	STATE(cb, CMP_REP_SENT);
	/* RTU from the right LID naming the wrong peer comm ID. */
	m.u.rtu.local_comm_id ^= 0x100;
	inject(B, &m);
	EQ(ST(B)->rx_mismatch, 2);
	STATE(cb, CMP_REP_SENT);
	/* MRA and REJ from LID 3. */
	msg(&m, UMAD_CM_ATTR_MRA, req_tid);
	m.u.mra.local_comm_id = cmp_conn_local_id(ca);
	m.u.mra.remote_comm_id = cmp_conn_local_id(cb);
	m.u.mra.message_mraed = 1;
	m.u.mra.service_timeout = 20;
	inject_from(B, 3, &m);
	msg(&m, UMAD_CM_ATTR_REJ, req_tid);
	m.u.rej.local_comm_id = cmp_conn_local_id(ca);
	m.u.rej.remote_comm_id = cmp_conn_local_id(cb);
	m.u.rej.reason = 28;
	inject_from(B, 3, &m);
	EQ(ST(B)->rx_mismatch, 4);
	STATE(cb, CMP_REP_SENT);
	no_ev(B);
	nothing(B);
	to(B, rtu);
	STATE(cb, CMP_ESTABLISHED);
	/* A duplicate REP from LID 3 at A, a DREP from LID 3 at B. */
	to_from(A, 3, rep_mad);
	EQ(ST(A)->rx_mismatch, 1);
	nothing(A);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREQ, &m);
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREP, &m);
	to_from(B, 3, TX.mad);
	EQ(ST(B)->rx_mismatch, 5);
	STATE(cb, CMP_DREQ_SENT);
	to(B, TX.mad);
	STATE(cb, CMP_TIMEWAIT);
	EQ(ST(B)->rx_stray, 0);
}

Test(engine, malformed_mads_counted_and_dropped)
{
	struct cmp_cm_msg m;
	uint8_t mad[CMP_MAD_SIZE];
	struct cmp_addr src = { .lid = 1, .qpn = 1, .qkey = 0x80010000 };

	up();
	listen_b();
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	memcpy(req_mad, TX.mad, sizeof(req_mad));
	memcpy(mad, req_mad, sizeof(mad));
	mad[2] = 1; /* class version */
	to(B, mad);
	EQ(ST(B)->rx_malformed, 1);
	cmp_engine_recv(E(B), &src, req_mad, 100, T.now); /* short */
	EQ(ST(B)->rx_malformed, 2);
	cmp_engine_recv(E(B), &src, req_mad, CMP_MAD_SIZE + 1, T.now); /* long */
	EQ(ST(B)->rx_malformed, 3);
	cmp_engine_recv(E(B), &src, NULL, 0, T.now);
	EQ(ST(B)->rx_malformed, 4);
	cmp_engine_recv(E(B), NULL, req_mad, CMP_MAD_SIZE, T.now);
	EQ(ST(B)->rx_malformed, 5);
	memcpy(mad, req_mad, sizeof(mad));
	mad[0] = 2; /* base version */
	to(B, mad);
	memcpy(mad, req_mad, sizeof(mad));
	mad[1] = 0x03; /* not the CM class */
	to(B, mad);
	memcpy(mad, req_mad, sizeof(mad));
	mad[3] = UMAD_METHOD_GET; /* REQ is always SEND */
	to(B, mad);
	memcpy(mad, req_mad, sizeof(mad));
	mad[17] = 0x30; /* unknown attribute */
	to(B, mad);
	msg(&m, UMAD_CM_ATTR_REJ, 1);
	m.u.rej.message_rejected = 3; /* reserved */
	m.u.rej.remote_comm_id = cmp_conn_local_id(ca);
	inject(A, &m);
	EQ(ST(B)->rx_malformed, 9);
	EQ(ST(A)->rx_malformed, 1);
	EQ(ST(B)->rx, 9);
	nothing(B);
	no_ev(B);
	STATE(ca, CMP_REQ_SENT);
	EQ(cmp_engine_conn_count(E(B)), 0);
	/* The good one still works. */
	to(B, req_mad);
	next_ev(B, CMP_EV_REQ_RECEIVED);
}

Test(engine, guessed_rej_leaves_connection_alone)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	/* Someone at LID 3 guessed B's comm ID and A's. */
	msg(&m, UMAD_CM_ATTR_REJ, 0x42);
	m.u.rej.local_comm_id = cmp_conn_local_id(ca);
	m.u.rej.remote_comm_id = cmp_conn_local_id(cb);
	m.u.rej.reason = 28;
	inject_from(B, 3, &m);
	EQ(ST(B)->rx_mismatch, 1);
	/* From A's LID but with the wrong comm ID for A. */
	m.u.rej.local_comm_id = cmp_conn_local_id(ca) + 1;
	inject(B, &m);
	EQ(ST(B)->rx_mismatch, 2);
	/* A wrong guess of B's comm ID. */
	m.u.rej.local_comm_id = cmp_conn_local_id(ca);
	m.u.rej.remote_comm_id = cmp_conn_local_id(cb) + 1;
	inject(B, &m);
	EQ(ST(B)->rx_stray, 1);
	STATE(cb, CMP_ESTABLISHED);
	no_ev(B);
	nothing(B);
	EQ(cmp_engine_timer_count(E(B)), 0);
	/* A REJ "of the REQ" no longer acts once the REQ is answered (a late
	 * copy must not tear down what a retried REQ built). */
	m.u.rej.remote_comm_id = cmp_conn_local_id(cb);
	m.u.rej.message_rejected = 0;
	inject(B, &m);
	EQ(ST(B)->rx_mismatch, 3);
	STATE(cb, CMP_ESTABLISHED);
	/* The right REJ ("other") from the right place does act
	 * (ESTABLISHED -> TimeWait). */
	m.u.rej.message_rejected = 2;
	inject(B, &m);
	STATE(cb, CMP_TIMEWAIT);
	EQ(next_ev(B, CMP_EV_REJ_RECEIVED)->reason, 28);
}

Test(engine, rej_in_states_without_one_is_stray)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	msg(&m, UMAD_CM_ATTR_REJ, 0x42);
	m.u.rej.local_comm_id = cmp_conn_local_id(cb);
	m.u.rej.remote_comm_id = cmp_conn_local_id(ca);
	m.u.rej.reason = 28;
	m.u.rej.message_rejected = 2; /* "other": a REJ of the REQ is a mismatch here */
	inject(A, &m); /* DREQ_SENT */
	EQ(ST(A)->rx_stray, 1);
	STATE(ca, CMP_DREQ_SENT);
	no_ev(A);
}

/* ======================================================================== */
/* SIDR                                                                      */
/* ======================================================================== */

static struct cmp_sidr_req_param sidr_param(void)
{
	struct cmp_sidr_req_param p = {
		.path = &pa, .service_id = SID, .private_data = pd,
		.private_data_len = CMP_SIDR_REQ_PDATA,
	};
	return p;
}

Test(engine, sidr_round_trip)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p;
	static const uint8_t info[3] = { 1, 2, 3 };
	uint64_t tid;

	up();
	listen_b();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, &actx, &ca, T.now), 0);
	STATE(ca, CMP_SIDR_REQ_SENT);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	tid = m.hdr.tid;
	EQ((uint32_t)tid, __builtin_bswap32(cmp_conn_local_id(ca)));
	EQ(m.u.sidr_req.request_id, cmp_conn_local_id(ca));
	EQ(m.u.sidr_req.pkey, 0xFFFF);
	EQ(m.u.sidr_req.service_id, SID);
	bytes_are(m.u.sidr_req.private_data, CMP_SIDR_REQ_PDATA, pd, CMP_SIDR_REQ_PDATA);
	EQ(expiry(A), T.now + 4096 * MS); /* settings: 1 << (20 - 8) ms */
	to(B, TX.mad);
	const struct cmp_event *ev = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED);
	cb = ev->conn;
	STATE(cb, CMP_SIDR_REQ_RCVD);
	cr_assert_eq(ev->listen, L);
	cr_assert_eq(ev->listen_ctx, &lctx);
	cr_assert_eq(ev->ctx, &lctx);
	EQ(ev->service_id, SID);
	EQ(ev->path.pkey, 0xFFFF);
	EQ(ev->src.lid, 1);
	ev_pdata(ev, CMP_SIDR_REQ_PDATA, pd, CMP_SIDR_REQ_PDATA);
	EQ(cmp_engine_timer_count(E(B)), 0);

	struct cmp_sidr_rep_param rep = {
		.status = 0, .qpn = 0xFF3C3C3C, .qkey = 0x11112222,
		.ece = { 0xABCDEF, 0x77 }, .info = info, .info_len = 3,
		.private_data = pd2, .private_data_len = CMP_SIDR_REP_PDATA,
	};
	cr_assert_eq(cmp_sidr_rep(E(B), cb, &rep, T.now), 0);
	STATE(cb, CMP_IDLE);
	take(B, UMAD_CM_ATTR_SIDR_REP, &m);
	EQ(m.hdr.tid, tid);
	EQ(m.hdr.attr_mod, 0x77);
	EQ(m.u.sidr_rep.request_id, cmp_conn_local_id(ca));
	EQ(m.u.sidr_rep.status, 0);
	EQ(m.u.sidr_rep.qpn, 0x3C3C3C);
	EQ(m.u.sidr_rep.qkey, 0x11112222);
	EQ(m.u.sidr_rep.service_id, SID);
	EQ(cmp_cm_sidr_rep_vendor_id(&m.u.sidr_rep), 0xABCDEF);
	EQ(m.u.sidr_rep.additional_info_length, 3);
	bytes_are(m.u.sidr_rep.additional_info, sizeof(m.u.sidr_rep.additional_info), info, 3);
	bytes_are(m.u.sidr_rep.private_data, CMP_SIDR_REP_PDATA, pd2, CMP_SIDR_REP_PDATA);
	nothing(B);
	to(A, TX.mad);
	ev = next_ev(A, CMP_EV_SIDR_REP_RECEIVED);
	cr_assert_eq(ev->conn, ca);
	cr_assert_eq(ev->ctx, &actx);
	EQ(ev->status, 0);
	EQ(ev->remote_qpn, 0x3C3C3C);
	EQ(ev->remote_qkey, 0x11112222);
	EQ(ev->service_id, SID);
	EQ(ev->ece.vendor_id, 0xABCDEF);
	EQ(ev->ece.attr_mod, 0x77);
	EQ(ev->ari_len, 3);
	cr_assert(!memcmp(ev->ari, info, 3));
	EQ(ev->src.lid, 2);
	ev_pdata(ev, CMP_SIDR_REP_PDATA, pd2, CMP_SIDR_REP_PDATA);
	STATE(ca, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(A)), 0);
	nothing(A);
	/* A late duplicate SIDR_REP is a stray. */
	to(A, TX.mad);
	EQ(ST(A)->rx_stray, 1);
	no_ev(A);
	cmp_conn_destroy(E(A), ca, T.now);
	cmp_conn_destroy(E(B), cb, T.now);
	EQ(cmp_engine_conn_count(E(A)), 0);
	EQ(cmp_engine_conn_count(E(B)), 0);
}

Test(engine, sidr_without_listener_status_1)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p;

	up();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	fwd(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	uint64_t tid = m.hdr.tid;
	take(B, UMAD_CM_ATTR_SIDR_REP, &m);
	cr_assert_null(TX.conn);
	EQ(m.hdr.tid, tid);
	EQ(m.u.sidr_rep.request_id, cmp_conn_local_id(ca));
	EQ(m.u.sidr_rep.status, 1);
	EQ(m.u.sidr_rep.service_id, SID);
	EQ(ST(B)->rx_no_listener, 1);
	EQ(cmp_engine_conn_count(E(B)), 0);
	no_ev(B);
	to(A, TX.mad);
	EQ(next_ev(A, CMP_EV_SIDR_REP_RECEIVED)->status, 1);
	STATE(ca, CMP_IDLE);
}

Test(engine, sidr_retries_exhausted)
{
	struct cmp_cm_msg m;
	struct cmp_settings s;
	struct cmp_sidr_req_param p;
	uint8_t first[CMP_MAD_SIZE];

	cmp_settings_default(&s);
	s.sidr_timeout_ns = 123 * MS;
	s.sidr_retries = 3;
	up_with(&s, NULL);
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, &actx, &ca, T.now), 0);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	memcpy(first, TX.mad, sizeof(first));
	for (int k = 0; k < 3; k++) {
		EQ(expiry(A), T.now + 123 * MS);
		fire(A);
		take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
		cr_assert(!memcmp(TX.mad, first, CMP_MAD_SIZE));
		STATE(ca, CMP_SIDR_REQ_SENT);
		no_ev(A);
	}
	fire(A);
	nothing(A);
	cr_assert_eq(next_ev(A, CMP_EV_SIDR_REQ_ERROR)->ctx, &actx);
	no_ev(A);
	STATE(ca, CMP_IDLE);
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(ST(A)->retransmits, 3);
	EQ(ST(A)->timeouts, 1);

	/* The request's own timeout and retries override the settings. */
	p.timeout_ns = 5 * MS;
	p.max_retries = 1;
	cr_assert_eq(cmp_sidr_req(E(A), &p, &actx, &ca, T.now), 0);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	EQ(expiry(A), T.now + 5 * MS);
	fire(A);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	fire(A);
	next_ev(A, CMP_EV_SIDR_REQ_ERROR);
	nothing(A);
}

Test(engine, sidr_duplicate_request_dropped)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p;
	uint8_t req[CMP_MAD_SIZE];

	up();
	listen_b();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	memcpy(req, TX.mad, sizeof(req));
	to(B, req);
	cb = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED)->conn;
	to(B, req);
	no_ev(B);
	nothing(B);
	EQ(ST(B)->rx_duplicate, 1);
	EQ(cmp_engine_conn_count(E(B)), 1);
	/* The same request ID from another port is another request. */
	to_from(B, 3, req);
	struct cmp_conn *other = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED)->conn;
	cr_assert_neq(other, cb);
	EQ(cmp_engine_conn_count(E(B)), 2);
	/* Once answered, the request is forgotten (as the kernel does): a
	 * late retransmission is a new request. */
	struct cmp_sidr_rep_param rep = { .status = 0, .qpn = 5, .qkey = 6 };
	cr_assert_eq(cmp_sidr_rep(E(B), cb, &rep, T.now), 0);
	take(B, UMAD_CM_ATTR_SIDR_REP, &m);
	to(B, req);
	next_ev(B, CMP_EV_SIDR_REQ_RECEIVED);
}

Test(engine, sidr_destroy_in_req_rcvd_replies_status_2)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p;

	up();
	listen_b();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	fwd(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	uint64_t tid = m.hdr.tid;
	cb = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED)->conn;
	cmp_conn_destroy(E(B), cb, T.now);
	take(B, UMAD_CM_ATTR_SIDR_REP, &m);
	EQ(m.hdr.tid, tid);
	EQ(m.u.sidr_rep.request_id, cmp_conn_local_id(ca));
	EQ(m.u.sidr_rep.status, 2);
	EQ(m.u.sidr_rep.service_id, SID);
	nothing(B);
	no_ev(B);
	EQ(cmp_engine_conn_count(E(B)), 0);
	EQ(cmp_engine_timer_count(E(B)), 0);
	to(A, TX.mad);
	EQ(next_ev(A, CMP_EV_SIDR_REP_RECEIVED)->status, 2);
}

Test(engine, sidr_rep_from_wrong_source_is_mismatch)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p;

	up();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	msg(&m, UMAD_CM_ATTR_SIDR_REP, m.hdr.tid);
	m.u.sidr_rep.request_id = cmp_conn_local_id(ca);
	inject_from(A, 3, &m);
	EQ(ST(A)->rx_mismatch, 1);
	STATE(ca, CMP_SIDR_REQ_SENT);
	no_ev(A);
}

/* ======================================================================== */
/* LAP                                                                       */
/* ======================================================================== */

Test(engine, lap_when_established_answered_with_apr_unsupported)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	msg(&m, UMAD_CM_ATTR_LAP, 0xABCD000000000000ULL | cmp_conn_local_id(ca));
	m.u.lap.local_comm_id = cmp_conn_local_id(ca);
	m.u.lap.remote_comm_id = cmp_conn_local_id(cb);
	m.u.lap.remote_qpn_eecn = QPN_B;
	m.u.lap.alternate_local_lid = 11;
	m.u.lap.alternate_remote_lid = 12;
	inject(B, &m);
	take(B, UMAD_CM_ATTR_APR, &m);
	EQ(m.hdr.tid, 0xABCD000000000000ULL | cmp_conn_local_id(ca));
	EQ(m.u.apr.local_comm_id, cmp_conn_local_id(cb));
	EQ(m.u.apr.remote_comm_id, cmp_conn_local_id(ca));
	EQ(m.u.apr.ap_status, 2);
	nothing(B);
	const struct cmp_event *ev = next_ev(B, CMP_EV_LAP_RECEIVED);
	cr_assert_eq(ev->conn, cb);
	EQ(ev->status, 2);
	EQ(ev->src.lid, 1);
	STATE(cb, CMP_ESTABLISHED);
	EQ(cmp_engine_timer_count(E(B)), 0);
}

Test(engine, lap_before_established_is_stray)
{
	struct cmp_cm_msg m;

	up();
	reach_rep_rcvd();
	msg(&m, UMAD_CM_ATTR_LAP, 1);
	m.u.lap.local_comm_id = cmp_conn_local_id(ca);
	m.u.lap.remote_comm_id = cmp_conn_local_id(cb);
	inject(B, &m);
	EQ(ST(B)->rx_stray, 1);
	nothing(B);
	no_ev(B);
	STATE(cb, CMP_REP_SENT);
}

/* ======================================================================== */
/* cmp_conn_destroy in every state                                           */
/* ======================================================================== */

/* Drives a fresh pair to state s; returns the node and the connection. */
static int reach(enum cmp_state s, struct cmp_conn **out)
{
	struct cmp_cm_msg m;
	struct cmp_sidr_req_param p = sidr_param();

	switch (s) {
	case CMP_IDLE: /* A, rejected: no listener */
		connect_a();
		fwd(A, UMAD_CM_ATTR_REQ, &m);
		fwd(B, UMAD_CM_ATTR_REJ, &m);
		next_ev(A, CMP_EV_REJ_RECEIVED);
		*out = ca;
		return A;
	case CMP_REQ_SENT:
		connect_a();
		take(A, UMAD_CM_ATTR_REQ, &m);
		*out = ca;
		return A;
	case CMP_REQ_RCVD:
		reach_req_rcvd();
		*out = cb;
		return B;
	case CMP_MRA_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		reach_req_rcvd();
		cr_assert_eq(cmp_mra(E(B), cb, 12, NULL, 0, T.now), 0);
		take(B, UMAD_CM_ATTR_MRA, &m);
		if (s == CMP_MRA_REQ_SENT) {
			*out = cb;
			return B;
		}
		to(A, TX.mad);
		next_ev(A, CMP_EV_MRA_RECEIVED);
		*out = ca;
		return A;
	case CMP_REP_SENT:
		reach_rep_sent();
		take(B, UMAD_CM_ATTR_REP, &m);
		*out = cb;
		return B;
	case CMP_REP_RCVD:
		reach_rep_rcvd();
		*out = ca;
		return A;
	case CMP_MRA_REP_SENT:
	case CMP_MRA_REP_RCVD:
		reach_rep_rcvd();
		cr_assert_eq(cmp_mra(E(A), ca, 12, NULL, 0, T.now), 0);
		take(A, UMAD_CM_ATTR_MRA, &m);
		if (s == CMP_MRA_REP_SENT) {
			*out = ca;
			return A;
		}
		to(B, TX.mad);
		next_ev(B, CMP_EV_MRA_RECEIVED);
		*out = cb;
		return B;
	case CMP_ESTABLISHED:
		reach_established();
		*out = ca;
		return A;
	case CMP_DREQ_SENT:
	case CMP_DREQ_RCVD:
	case CMP_TIMEWAIT:
		reach_established();
		cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
		take(A, UMAD_CM_ATTR_DREQ, &m);
		if (s == CMP_DREQ_SENT) {
			*out = ca;
			return A;
		}
		to(B, TX.mad);
		next_ev(B, CMP_EV_DREQ_RECEIVED);
		*out = cb;
		if (s == CMP_DREQ_RCVD)
			return B;
		cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
		take(B, UMAD_CM_ATTR_DREP, &m);
		return B;
	case CMP_SIDR_REQ_SENT:
		cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
		take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
		*out = ca;
		return A;
	case CMP_SIDR_REQ_RCVD:
		listen_b();
		cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
		fwd(A, UMAD_CM_ATTR_SIDR_REQ, &m);
		cb = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED)->conn;
		*out = cb;
		return B;
	default:
		cr_assert_fail("no such state");
	}
	return 0;
}

/* Runs node i's timers until none is left; it must send nothing meanwhile. */
static void drain_silent(int i)
{
	for (int k = 0; k < 100 && expiry(i) != CMP_TIME_NEVER; k++) {
		fire(i);
		nothing(i);
	}
	EQ(expiry(i), CMP_TIME_NEVER);
}

/* Destroys the connection in state s and checks what the kernel's
 * cm_destroy_id does there: the one MAD it sends (attr 0: none; for a REJ:
 * reason and message rejected), the state that follows (IDLE: freed at
 * once; TIMEWAIT: waited out), and that nothing more is sent (no retry
 * survives a destroy), no event comes, and the engine frees it. */
static void destroy_in(enum cmp_state s, uint16_t attr, uint16_t reason, uint8_t what,
		       enum cmp_state after)
{
	struct cmp_cm_msg m;
	struct cmp_conn *c;
	uint8_t guid[8];
	int n, nev;
	uint32_t lid, rid;

	up();
	n = reach(s, &c);
	STATE(c, s);
	nothing(n);
	tn_events(&T, n);
	nev = T.n[n].nev;
	lid = cmp_conn_local_id(c);
	rid = cmp_conn_remote_id(c);
	EQ(cmp_engine_conn_count(E(n)), 1);
	cmp_conn_destroy(E(n), c, T.now);
	if (attr) {
		take(n, attr, &m);
		if (after == CMP_IDLE)
			cr_assert_null(TX.conn, "the queued MAD points at a freed conn");
	}
	switch (attr) {
	case UMAD_CM_ATTR_REJ:
		/* The kernel's cm_format_rej: local comm ID 0 while the peer
		 * has not heard it (REQ_RCVD), else ours. */
		EQ(m.u.rej.local_comm_id, s == CMP_REQ_RCVD ? 0 : lid);
		EQ(m.u.rej.remote_comm_id, rid);
		EQ(m.u.rej.reason, reason);
		EQ(m.u.rej.message_rejected, what);
		if (reason == 4) {
			guid_bytes(guid, n == A ? GUID_A : GUID_B);
			EQ(m.u.rej.reject_info_length, 8);
			cr_assert(!memcmp(m.u.rej.ari, guid, 8));
		}
		break;
	case UMAD_CM_ATTR_DREQ:
		EQ(m.u.dreq.local_comm_id, lid);
		EQ(m.u.dreq.remote_comm_id, rid);
		break;
	case UMAD_CM_ATTR_DREP:
		EQ(m.u.drep.local_comm_id, lid);
		EQ(m.u.drep.remote_comm_id, rid);
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		EQ(m.u.sidr_rep.request_id, rid);
		EQ(m.u.sidr_rep.status, 2);
		break;
	default:
		break;
	}
	nothing(n);
	if (after == CMP_IDLE) {
		EQ(cmp_engine_conn_count(E(n)), 0);
		EQ(cmp_engine_timer_count(E(n)), 0);
	} else {
		STATE(c, after);
		EQ(cmp_engine_conn_count(E(n)), 1);
		EQ(cmp_engine_timer_count(E(n)), 1);
	}
	drain_silent(n);
	tn_events(&T, n);
	EQ(T.n[n].nev, nev);
	EQ(cmp_engine_conn_count(E(n)), 0);
	EQ(cmp_engine_timer_count(E(n)), 0);
	/* Destroying twice, or NULL, is harmless. */
	cmp_conn_destroy(E(n), NULL, T.now);
}

Test(engine, destroy_in_idle) { destroy_in(CMP_IDLE, 0, 0, 0, CMP_IDLE); }
Test(engine, destroy_in_req_sent) { destroy_in(CMP_REQ_SENT, UMAD_CM_ATTR_REJ, 4, 2, CMP_IDLE); }
Test(engine, destroy_in_mra_req_rcvd) { destroy_in(CMP_MRA_REQ_RCVD, UMAD_CM_ATTR_REJ, 4, 2, CMP_IDLE); }
Test(engine, destroy_in_req_rcvd) { destroy_in(CMP_REQ_RCVD, UMAD_CM_ATTR_REJ, 28, 0, CMP_IDLE); }
Test(engine, destroy_in_mra_req_sent) { destroy_in(CMP_MRA_REQ_SENT, UMAD_CM_ATTR_REJ, 28, 0, CMP_IDLE); }
Test(engine, destroy_in_rep_rcvd) { destroy_in(CMP_REP_RCVD, UMAD_CM_ATTR_REJ, 28, 1, CMP_IDLE); }
Test(engine, destroy_in_mra_rep_sent) { destroy_in(CMP_MRA_REP_SENT, UMAD_CM_ATTR_REJ, 28, 1, CMP_IDLE); }
Test(engine, destroy_in_rep_sent) { destroy_in(CMP_REP_SENT, UMAD_CM_ATTR_REJ, 28, 2, CMP_TIMEWAIT); }
Test(engine, destroy_in_mra_rep_rcvd) { destroy_in(CMP_MRA_REP_RCVD, UMAD_CM_ATTR_REJ, 28, 2, CMP_TIMEWAIT); }
/* One DREQ, its retries cancelled (the kernel: ESTABLISHED -> DREQ_SENT ->
 * TimeWait within cm_destroy_id). */
Test(engine, destroy_in_established) { destroy_in(CMP_ESTABLISHED, UMAD_CM_ATTR_DREQ, 0, 0, CMP_TIMEWAIT); }
/* The DREQ's retries cancelled: nothing more is sent. */
Test(engine, destroy_in_dreq_sent) { destroy_in(CMP_DREQ_SENT, 0, 0, 0, CMP_TIMEWAIT); }
Test(engine, destroy_in_dreq_rcvd) { destroy_in(CMP_DREQ_RCVD, UMAD_CM_ATTR_DREP, 0, 0, CMP_TIMEWAIT); }
Test(engine, destroy_in_timewait) { destroy_in(CMP_TIMEWAIT, 0, 0, 0, CMP_TIMEWAIT); }
Test(engine, destroy_in_sidr_req_sent) { destroy_in(CMP_SIDR_REQ_SENT, 0, 0, 0, CMP_IDLE); }
Test(engine, destroy_in_sidr_req_rcvd) { destroy_in(CMP_SIDR_REQ_RCVD, UMAD_CM_ATTR_SIDR_REP, 0, 0, CMP_IDLE); }

/* TimeWait after a destroy lasts what TimeWait always does (here the
 * local ACK timeout, IBTA), from the destroy on; the DREP that comes
 * later is absorbed there and the peer's connection ends normally. */
Test(engine, destroy_in_dreq_sent_waits_out_timewait_and_absorbs_the_drep)
{
	struct cmp_cm_msg m;
	uint8_t dreq[CMP_MAD_SIZE];
	int nev;

	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	memcpy(dreq, TX.mad, sizeof(dreq));
	nev = T.n[A].nev;
	T.now += req_base() / 2; /* before the first DREQ retry would be due */
	cmp_conn_destroy(E(A), ca, T.now);
	nothing(A);
	EQ(expiry(A), T.now + iba(ack_to(15, PLT)));
	/* B was slow: it hears the DREQ and answers only now. */
	to(B, dreq);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	EQ(ST(A)->rx_duplicate, 1);
	nothing(A);
	drain_silent(A);
	tn_events(&T, A);
	EQ(T.n[A].nev, nev);
	EQ(cmp_engine_conn_count(E(A)), 0);
	EQ(ST(A)->retransmits, 0);
}

/* settings.destroy_retries_dreq: uscm's more persistent choice. Destroyed
 * while ESTABLISHED, the DREQ is retried as after cmp_disconnect (Max CM
 * Retries of the REQ, every REQ retry period) and the connection waits out
 * TimeWait when they run out; no event either way. */
Test(engine, destroy_retries_dreq_setting_keeps_the_dreq_going)
{
	struct cmp_settings s;
	struct cmp_cm_msg m;
	uint8_t dreq[CMP_MAD_SIZE];
	int nev;

	cmp_settings_default(&s);
	s.destroy_retries_dreq = 1;
	up_with(&s, NULL);
	rp.max_cm_retries = 2;
	reach_established();
	nev = T.n[A].nev;
	cmp_conn_destroy(E(A), ca, T.now);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	memcpy(dreq, TX.mad, sizeof(dreq));
	STATE(ca, CMP_DREQ_SENT);
	for (int k = 0; k < 2; k++) {
		EQ(expiry(A), T.now + req_base());
		fire(A);
		take(A, UMAD_CM_ATTR_DREQ, &m);
		cr_assert(!memcmp(TX.mad, dreq, CMP_MAD_SIZE));
	}
	fire(A);
	nothing(A);
	STATE(ca, CMP_TIMEWAIT);
	EQ(ST(A)->retransmits, 2);
	EQ(ST(A)->timeouts, 1);
	drain_silent(A);
	tn_events(&T, A);
	EQ(T.n[A].nev, nev);
	EQ(cmp_engine_conn_count(E(A)), 0);
}

/* The same setting, destroyed in DREQ_SENT: the retries go on and the
 * DREP, when it comes, ends them. */
Test(engine, destroy_retries_dreq_setting_in_dreq_sent)
{
	struct cmp_settings s;
	struct cmp_cm_msg m;

	cmp_settings_default(&s);
	s.destroy_retries_dreq = 1;
	up_with(&s, NULL);
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
	cmp_conn_destroy(E(A), ca, T.now);
	nothing(A);
	STATE(ca, CMP_DREQ_SENT);
	fire(A);
	fwd(A, UMAD_CM_ATTR_DREQ, &m); /* the retry reaches B */
	next_ev(B, CMP_EV_DREQ_RECEIVED);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	STATE(ca, CMP_TIMEWAIT);
	no_ev(A);
	drain_silent(A);
	EQ(cmp_engine_conn_count(E(A)), 0);
}

/* Destroyed while established: the peer's answers produce no events, and
 * a peer DREQ crossing ours is answered by the engine itself. */
Test(engine, destroy_when_established_finishes_silently)
{
	struct cmp_cm_msg m;
	int nev;

	up();
	reach_established();
	nev = T.n[A].nev;
	cmp_conn_destroy(E(A), ca, T.now);
	take(A, UMAD_CM_ATTR_DREQ, &m); /* crossed by B's DREQ */
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREQ, &m);
	/* Nobody to ask: A answers with a DREP and waits out TimeWait. */
	take(A, UMAD_CM_ATTR_DREP, &m);
	EQ(m.u.drep.remote_comm_id, cmp_conn_local_id(cb));
	to(B, TX.mad);
	next_ev(B, CMP_EV_DREP_RECEIVED);
	EQ(cmp_engine_timer_count(E(A)), 1);
	drain(A);
	EQ(T.n[A].nev, nev);
	EQ(cmp_engine_conn_count(E(A)), 0);
}

Test(engine, destroy_purges_queued_events)
{
	struct cmp_cm_msg m;
	struct cmp_event ev;

	up();
	reach_rep_rcvd();
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_RTU, &m);
	tn_deliver(&T, B, TX.mad); /* RTU_RECEIVED queued, not polled */
	cmp_conn_destroy(E(B), cb, T.now);
	cr_assert_eq(cmp_engine_poll_event(E(B), &ev), 0);
	/* Established when destroyed: B disconnects on its own. */
	take(B, UMAD_CM_ATTR_DREQ, &m);
}

/* ======================================================================== */
/* QP attributes                                                             */
/* ======================================================================== */

static void qattr(const struct cmp_conn *c, enum ibv_qp_state s, struct ibv_qp_attr *a, int *mask)
{
	cr_assert_eq(cmp_conn_qp_attr(c, s, a, mask), 0, "qp_attr(%s, %d): %s",
		     cmp_state_str(cmp_conn_state(c)), (int)s, strerror(errno));
	EQ(a->qp_state, s);
}

Test(engine, qp_attr_rc_both_sides)
{
	struct ibv_qp_attr a;
	int mask;
	const int init_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT;
	struct cmp_settings sb;

	cmp_settings_default(&sb);
	sb.local_ca_ack_delay = 20;
	up_with(NULL, &sb);
	reach_established();

	/* A: INIT. */
	qattr(ca, IBV_QPS_INIT, &a, &mask);
	EQ(mask, init_mask);
	EQ(a.pkey_index, 2);
	EQ(a.port_num, 1);
	EQ(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC);
	/* A: RTR. A Starting PSN is the PSN its sender expects to receive
	 * (Linux cm.c: the sender programs it as rq_psn, the peer as sq_psn). */
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	EQ(mask, rtr_mask);
	EQ(a.dest_qp_num, QPN_B);
	EQ(a.rq_psn, PSN_A);
	EQ(a.path_mtu, IBV_MTU_2048);
	EQ(a.max_dest_rd_atomic, 2); /* min(ours 4, B's initiator depth 2) */
	EQ(a.min_rnr_timer, 0);
	EQ(a.ah_attr.dlid, 2);
	EQ(a.ah_attr.sl, 3);
	EQ(a.ah_attr.static_rate, 3);
	EQ(a.ah_attr.port_num, 1);
	EQ(a.ah_attr.is_global, 0);
	/* A: RTS. */
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	EQ(mask, rts_mask);
	EQ(a.sq_psn, PSN_B);
	EQ(a.retry_cnt, 5);
	EQ(a.rnr_retry, 3); /* what B's REP asks for */
	EQ(a.max_rd_atomic, 6); /* min(ours 6, B's responder resources 6) */
	EQ(a.timeout, ack_to(20, PLT)); /* local ACK timeout with B's ACK delay */

	/* B: INIT. */
	qattr(cb, IBV_QPS_INIT, &a, &mask);
	EQ(mask, init_mask);
	EQ(a.pkey_index, 0);
	EQ(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC);
	/* B: RTR. */
	qattr(cb, IBV_QPS_RTR, &a, &mask);
	EQ(mask, rtr_mask);
	EQ(a.dest_qp_num, QPN_A);
	EQ(a.rq_psn, PSN_B);
	EQ(a.path_mtu, IBV_MTU_2048);
	EQ(a.max_dest_rd_atomic, 6);
	EQ(a.ah_attr.dlid, 1);
	EQ(a.ah_attr.sl, 3);
	EQ(a.ah_attr.static_rate, 3);
	EQ(a.ah_attr.is_global, 0);
	/* B: RTS. */
	qattr(cb, IBV_QPS_RTS, &a, &mask);
	EQ(mask, rts_mask);
	EQ(a.sq_psn, PSN_A);
	EQ(a.retry_cnt, 5);
	EQ(a.rnr_retry, 6); /* what A's REQ asks for */
	EQ(a.max_rd_atomic, 2);
	EQ(a.timeout, ack_to(15, PLT)); /* the REQ's local ACK timeout */
}

Test(engine, qp_attr_psns_agree_across_the_pair)
{
	struct ibv_qp_attr a;
	int mask;
	uint32_t a_sq, a_rq, b_sq, b_rq;

	up();
	reach_established();
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	a_rq = a.rq_psn;
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	a_sq = a.sq_psn;
	qattr(cb, IBV_QPS_RTR, &a, &mask);
	b_rq = a.rq_psn;
	qattr(cb, IBV_QPS_RTS, &a, &mask);
	b_sq = a.sq_psn;
	EQ(a_sq, b_rq);
	EQ(b_sq, a_rq);
}

Test(engine, qp_attr_uc)
{
	struct ibv_qp_attr a;
	int mask;

	up();
	rp.qp_type = CMP_QPT_UC;
	rp.responder_resources = 0;
	rp.initiator_depth = 0;
	reach_established();
	qattr(ca, IBV_QPS_INIT, &a, &mask);
	EQ(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	EQ(a.dest_qp_num, QPN_B);
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
	EQ(a.sq_psn, PSN_B);
	qattr(cb, IBV_QPS_INIT, &a, &mask);
	EQ(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
	qattr(cb, IBV_QPS_RTR, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	EQ(a.dest_qp_num, QPN_A);
	qattr(cb, IBV_QPS_RTS, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
	EQ(a.sq_psn, PSN_A);
}

Test(engine, qp_attr_grh_and_alternate_path)
{
	struct ibv_qp_attr a;
	int mask;
	struct cmp_path alt;
	struct cmp_cm_msg m;

	up();
	pa.subnet_local = 0; /* routed: GRH */
	pa.hop_limit = 0;    /* 0: 0xFF on IB */
	tn_path(&alt, 11, 12);
	alt.sl = 5;
	alt.packet_life_time = 13;
	alt.pkey_index = 4;
	alt.port_num = 2;
	rp.alternate = &alt;
	/* B sends with a GRH too, from A's destination GID. */
	T.n[B].self.grh = 1;
	memcpy(T.n[B].self.gid, pa.dgid, 16);
	reach_established();
	EQ(ST(A)->rx_mismatch, 0);

	qattr(ca, IBV_QPS_RTR, &a, &mask);
	cr_assert(mask & IBV_QP_ALT_PATH);
	EQ(a.ah_attr.is_global, 1);
	cr_assert(!memcmp(a.ah_attr.grh.dgid.raw, pa.dgid, 16));
	EQ(a.ah_attr.grh.flow_label, 0x12345);
	EQ(a.ah_attr.grh.sgid_index, 1);
	EQ(a.ah_attr.grh.hop_limit, 0xFF);
	EQ(a.ah_attr.grh.traffic_class, 0x20);
	EQ(a.alt_ah_attr.dlid, 12);
	EQ(a.alt_ah_attr.sl, 5);
	EQ(a.alt_ah_attr.is_global, 0);
	EQ(a.alt_pkey_index, 4);
	EQ(a.alt_port_num, 2);
	/* Like the primary: the local ACK timeout with B's target ACK delay. */
	EQ(a.alt_timeout, ack_to(15, 13));
	EQ(a.timeout, 0); /* (RTR carries no primary timeout) */
	/* An alternate path is armed at RTS (IB_MIG_REARM, as the kernel). */
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	cr_assert(mask & IBV_QP_PATH_MIG_STATE);
	EQ(a.path_mig_state, IBV_MIG_REARM);

	/* B sees the path reversed, also routed, and the alternate. */
	qattr(cb, IBV_QPS_RTR, &a, &mask);
	cr_assert(mask & IBV_QP_ALT_PATH);
	EQ(a.ah_attr.is_global, 1);
	cr_assert(!memcmp(a.ah_attr.grh.dgid.raw, pa.sgid, 16));
	EQ(a.alt_ah_attr.dlid, 11);
	EQ(a.alt_ah_attr.sl, 5);
	EQ(a.alt_timeout, ack_to(15, 13)); /* the REQ's alternate ACK timeout */
	qattr(cb, IBV_QPS_RTS, &a, &mask);
	EQ(a.path_mig_state, IBV_MIG_REARM);

	/* Without an alternate: no ALT_PATH, no PATH_MIG_STATE. */
	qattr(ca, IBV_QPS_INIT, &a, &mask);
	down();
	up();
	reach_established();
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	cr_assert_not(mask & IBV_QP_ALT_PATH);
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	cr_assert_not(mask & IBV_QP_PATH_MIG_STATE);

	/* A MAD from the right LID but another GID is a mismatch. */
	down();
	up();
	pa.subnet_local = 0;
	T.n[B].self.grh = 1;
	memcpy(T.n[B].self.gid, pa.dgid, 16);
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	T.n[B].self.gid[15] ^= 0x80;
	to(A, TX.mad);
	EQ(ST(A)->rx_mismatch, 1);
	STATE(ca, CMP_REQ_SENT);
}

Test(engine, qp_attr_roce_hop_limit)
{
	struct ibv_qp_attr a;
	int mask;

	up();
	pa.roce = 1;
	pa.hop_limit = 0;
	reach_rep_rcvd();
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	EQ(a.ah_attr.is_global, 1);
	EQ(a.ah_attr.grh.hop_limit, 64);
}

Test(engine, qp_attr_einval)
{
	struct ibv_qp_attr a;
	int mask;
	struct cmp_cm_msg m;

	up();
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	/* INIT needs only the path. */
	qattr(ca, IBV_QPS_INIT, &a, &mask);
	/* RTR and RTS need the peer's REP. */
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTR, &a, &mask), -1);
	EQ(errno, EINVAL);
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTS, &a, &mask), -1);
	EQ(errno, EINVAL);
	/* Not a state the CM computes. */
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_SQD, &a, &mask), -1);
	EQ(errno, EINVAL);
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_ERR, &a, &mask), -1);
	EQ(errno, EINVAL);
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(NULL, IBV_QPS_INIT, &a, &mask), -1);
	EQ(errno, EINVAL);
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_INIT, NULL, &mask), -1);
	EQ(errno, EINVAL);
	errno = 0;
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_INIT, &a, NULL), -1);
	EQ(errno, EINVAL);
	/* After the connection: TimeWait and IDLE have none. */
	down();
	up();
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	STATE(ca, CMP_DREQ_SENT);
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTR, &a, &mask), -1);
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTS, &a, &mask), -1);
	drain(A);
	STATE(ca, CMP_IDLE);
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTR, &a, &mask), -1);
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTS, &a, &mask), -1);
	EQ(errno, EINVAL);
	/* SIDR has no QP to connect. */
	struct cmp_sidr_req_param p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	cr_assert_eq(cmp_conn_qp_attr(ca, IBV_QPS_RTR, &a, &mask), -1);
}

/* ======================================================================== */
/* Invalid user calls                                                        */
/* ======================================================================== */

#define FAILS(call, err)                                                                  \
	do {                                                                              \
		errno = 0;                                                                \
		cr_assert_eq((call), -1, "%s did not fail", #call);                       \
		cr_assert_eq(errno, err, "%s: errno %d, want %d", #call, errno, err);     \
	} while (0)

Test(engine, invalid_connect_params)
{
	struct cmp_req_param bad;
	struct cmp_conn *c = NULL;

	up();
	FAILS(cmp_connect(E(A), NULL, NULL, &c, T.now), EINVAL);
	FAILS(cmp_connect(E(A), &rp, NULL, NULL, T.now), EINVAL);
	bad = rp;
	bad.primary = NULL;
	FAILS(cmp_connect(E(A), &bad, NULL, &c, T.now), EINVAL);
	bad = rp;
	bad.private_data_len = CMP_REQ_PDATA + 1;
	FAILS(cmp_connect(E(A), &bad, NULL, &c, T.now), EINVAL);
	bad = rp;
	bad.private_data = NULL;
	FAILS(cmp_connect(E(A), &bad, NULL, &c, T.now), EINVAL);
	bad = rp;
	bad.qp_type = 3;
	FAILS(cmp_connect(E(A), &bad, NULL, &c, T.now), EINVAL);
	pa.mtu = 0;
	FAILS(cmp_connect(E(A), &rp, NULL, &c, T.now), EINVAL);
	pa.mtu = 6;
	FAILS(cmp_connect(E(A), &rp, NULL, &c, T.now), EINVAL);
	cr_assert_null(c);
	nothing(A);
	EQ(cmp_engine_conn_count(E(A)), 0);
	EQ(cmp_engine_timer_count(E(A)), 0);
	EQ(ST(A)->tx, 0);
}

Test(engine, invalid_calls_in_wrong_states)
{
	struct cmp_rep_param bad;
	static const uint8_t big[256];

	up();
	reach_req_rcvd();
	/* Active side in REQ_SENT: none of the passive calls. */
	FAILS(cmp_accept(E(A), ca, &pp, T.now), EINVAL);
	FAILS(cmp_rtu(E(A), ca, NULL, 0, T.now), EINVAL);
	FAILS(cmp_mra(E(A), ca, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_notify(E(A), ca, T.now), EINVAL);
	FAILS(cmp_disconnect(E(A), ca, NULL, 0, T.now), EINVAL);
	FAILS(cmp_sidr_rep(E(A), ca, &(struct cmp_sidr_rep_param){ 0 }, T.now), EINVAL);
	/* Passive side in REQ_RCVD. */
	FAILS(cmp_rtu(E(B), cb, NULL, 0, T.now), EINVAL);
	FAILS(cmp_notify(E(B), cb, T.now), EINVAL);
	FAILS(cmp_disconnect(E(B), cb, NULL, 0, T.now), EINVAL);
	FAILS(cmp_accept(E(B), cb, NULL, T.now), EINVAL);
	FAILS(cmp_accept(E(B), NULL, &pp, T.now), EINVAL);
	bad = pp;
	bad.private_data_len = CMP_REP_PDATA + 1;
	FAILS(cmp_accept(E(B), cb, &bad, T.now), EINVAL);
	bad = pp;
	bad.private_data = NULL;
	FAILS(cmp_accept(E(B), cb, &bad, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, big, CMP_ARI_SIZE + 1, NULL, 0, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, NULL, 0, big, CMP_REJ_PDATA + 1, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, NULL, 3, NULL, 0, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, NULL, 0, NULL, 3, T.now), EINVAL);
	FAILS(cmp_reject(E(B), NULL, 28, NULL, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_mra(E(B), cb, 32, NULL, 0, T.now), EINVAL);
	FAILS(cmp_mra(E(B), cb, 0, big, CMP_MRA_PDATA + 1, T.now), EINVAL);
	FAILS(cmp_mra(E(B), cb, 0, NULL, 1, T.now), EINVAL);
	/* Nothing changed, nothing sent. */
	STATE(ca, CMP_REQ_SENT);
	STATE(cb, CMP_REQ_RCVD);
	nothing(A);
	nothing(B);

	/* Established: only disconnect (and notify, a no-op). */
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	FAILS(cmp_accept(E(B), cb, &pp, T.now), EINVAL);
	FAILS(cmp_mra(E(B), cb, 0, NULL, 0, T.now), EINVAL);
	fwd(B, UMAD_CM_ATTR_REP, &(struct cmp_cm_msg){ 0 });
	FAILS(cmp_rtu(E(A), ca, big, CMP_RTU_PDATA + 1, T.now), EINVAL);
	FAILS(cmp_rtu(E(A), ca, NULL, 1, T.now), EINVAL);
	FAILS(cmp_rtu(E(A), NULL, NULL, 0, T.now), EINVAL);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	FAILS(cmp_rtu(E(A), ca, NULL, 0, T.now), EINVAL);
	FAILS(cmp_reject(E(A), ca, 28, NULL, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_mra(E(A), ca, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_disconnect(E(A), ca, big, CMP_DREQ_PDATA + 1, T.now), EINVAL);
	FAILS(cmp_disconnect(E(A), ca, NULL, 1, T.now), EINVAL);
	FAILS(cmp_disconnect(E(A), NULL, NULL, 0, T.now), EINVAL);
	cr_assert_eq(cmp_notify(E(A), ca, T.now), 0);
	STATE(ca, CMP_ESTABLISHED);
	/* DREQ_RCVD: the DREP may carry 224 bytes, not 225. */
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	FAILS(cmp_disconnect(E(A), ca, NULL, 0, T.now), EINVAL); /* DREQ_SENT */
	struct cmp_cm_msg m;
	take(A, UMAD_CM_ATTR_RTU, &m);
	to(B, TX.mad);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	FAILS(cmp_disconnect(E(B), cb, big, CMP_DREP_PDATA + 1, T.now), EINVAL);
	cr_assert_eq(cmp_disconnect(E(B), cb, big, CMP_DREP_PDATA, T.now), 0);
	/* TimeWait: nothing. */
	FAILS(cmp_disconnect(E(B), cb, NULL, 0, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, NULL, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_notify(E(B), cb, T.now), EINVAL);
	/* A connection the user let go of accepts no more calls. */
	cmp_conn_destroy(E(B), cb, T.now);
	STATE(cb, CMP_TIMEWAIT);
	FAILS(cmp_disconnect(E(B), cb, NULL, 0, T.now), EINVAL);
	FAILS(cmp_notify(E(B), cb, T.now), EINVAL);
}

Test(engine, invalid_sidr_calls)
{
	struct cmp_sidr_req_param p;
	struct cmp_sidr_rep_param r = { 0 };
	struct cmp_cm_msg m;
	static const uint8_t big[256];

	up();
	p = sidr_param();
	FAILS(cmp_sidr_req(E(A), NULL, NULL, &ca, T.now), EINVAL);
	FAILS(cmp_sidr_req(E(A), &p, NULL, NULL, T.now), EINVAL);
	p.path = NULL;
	FAILS(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), EINVAL);
	p = sidr_param();
	p.private_data_len = CMP_SIDR_REQ_PDATA + 1;
	FAILS(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), EINVAL);
	p.private_data_len = 1;
	p.private_data = NULL;
	FAILS(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), EINVAL);
	EQ(cmp_engine_conn_count(E(A)), 0);
	listen_b();
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	fwd(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	cb = next_ev(B, CMP_EV_SIDR_REQ_RECEIVED)->conn;
	FAILS(cmp_sidr_rep(E(B), cb, NULL, T.now), EINVAL);
	r.private_data = big;
	r.private_data_len = CMP_SIDR_REP_PDATA + 1;
	FAILS(cmp_sidr_rep(E(B), cb, &r, T.now), EINVAL);
	r.private_data_len = 0;
	r.info = big;
	r.info_len = CMP_ARI_SIZE + 1;
	FAILS(cmp_sidr_rep(E(B), cb, &r, T.now), EINVAL);
	r.info = NULL;
	r.info_len = 1;
	FAILS(cmp_sidr_rep(E(B), cb, &r, T.now), EINVAL);
	/* SIDR connections take no connection calls. */
	FAILS(cmp_accept(E(B), cb, &pp, T.now), EINVAL);
	FAILS(cmp_reject(E(B), cb, 28, NULL, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_mra(E(B), cb, 0, NULL, 0, T.now), EINVAL);
	FAILS(cmp_disconnect(E(A), ca, NULL, 0, T.now), EINVAL);
	FAILS(cmp_rtu(E(A), ca, NULL, 0, T.now), EINVAL);
	STATE(cb, CMP_SIDR_REQ_RCVD);
	nothing(B);
	r.info_len = 0;
	cr_assert_eq(cmp_sidr_rep(E(B), cb, &r, T.now), 0);
	FAILS(cmp_sidr_rep(E(B), cb, &r, T.now), EINVAL);
}

Test(engine, enomem_at_max_conns)
{
	struct cmp_settings s;
	struct cmp_conn *c2 = NULL;
	struct cmp_sidr_req_param p;
	struct cmp_path bp;
	struct cmp_cm_msg m;

	cmp_settings_default(&s);
	s.max_conns = 1;
	up_with(&s, NULL);
	connect_a();
	rp.qpn = QPN_A + 1;
	FAILS(cmp_connect(E(A), &rp, NULL, &c2, T.now), ENOMEM);
	p = sidr_param();
	FAILS(cmp_sidr_req(E(A), &p, NULL, &c2, T.now), ENOMEM);
	cr_assert_null(c2);
	EQ(cmp_engine_conn_count(E(A)), 1);
	take(A, UMAD_CM_ATTR_REQ, &m);
	memcpy(req_mad, TX.mad, sizeof(req_mad));
	nothing(A);
	/* B at its cap: a REQ gets REJ "no resources", a SIDR_REQ status 2. */
	listen_b();
	bp = T.n[B].to_peer;
	p.path = &bp;
	cr_assert_eq(cmp_sidr_req(E(B), &p, NULL, &c2, T.now), 0);
	take(B, UMAD_CM_ATTR_SIDR_REQ, &m);
	to(B, req_mad);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 3);
	EQ(m.u.rej.message_rejected, 0);
	EQ(m.u.rej.remote_comm_id, cmp_conn_local_id(ca));
	msg(&m, UMAD_CM_ATTR_SIDR_REQ, 9);
	m.u.sidr_req.request_id = 0x1234;
	m.u.sidr_req.service_id = SID;
	inject(B, &m);
	take(B, UMAD_CM_ATTR_SIDR_REP, &m);
	EQ(m.u.sidr_rep.request_id, 0x1234);
	EQ(m.u.sidr_rep.status, 2);
	no_ev(B);
	EQ(cmp_engine_conn_count(E(B)), 1);
	/* Letting go makes room again. */
	cmp_conn_destroy(E(A), ca, T.now);
	take(A, UMAD_CM_ATTR_REJ, &m);
	EQ(cmp_engine_conn_count(E(A)), 0);
	connect_a();
}

/* ======================================================================== */
/* Timers and settings                                                       */
/* ======================================================================== */

Test(engine, settings_defaults_and_time_conversions)
{
	struct cmp_settings s;

	cmp_settings_default(&s);
	EQ(s.cm_response_timeout, 20);
	EQ(s.max_cm_retries, 15);
	EQ(s.mra_service_timeout, 24);
	EQ(s.packet_life_time, 16);
	EQ(s.local_ca_ack_delay, 15);
	EQ(s.max_timer_ns, 0);
	EQ(s.timewait_ns, 0);
	EQ(s.sidr_timeout_ns, 4096 * MS);
	EQ(s.sidr_retries, 15);
	EQ(s.default_backlog, 1024);
	EQ(s.max_conns, 1u << 20);
	EQ(s.mra_on_duplicate_req, 1);
	EQ(s.destroy_retries_dreq, 0); /* the kernel's cm_destroy_id */
	cr_assert_null(s.trace);
	for (unsigned t = 0; t < 32; t++)
		EQ(cmp_iba_time_ns(t), iba(t));
	EQ(cmp_iba_time_ns(32), iba(31));
	EQ(cmp_iba_time_ns(200), iba(31));
	EQ(cmp_iba_time_ns(20), 4294967296ULL); /* about 4.3 s */
	for (unsigned d = 0; d < 40; d++)
		for (unsigned p = 0; p < 40; p++)
			cr_assert_eq(cmp_ack_timeout((uint8_t)d, (uint8_t)p), ack_to(d, p),
				     "cmp_ack_timeout(%u, %u) = %u, want %u", d, p,
				     cmp_ack_timeout((uint8_t)d, (uint8_t)p), ack_to(d, p));
	/* A few by hand. */
	EQ(ack_to(15, 14), 16);
	EQ(ack_to(20, 14), 20);
	EQ(ack_to(10, 8), 11);
	EQ(ack_to(0, 0), 2);
	EQ(ack_to(31, 31), 31);
}

Test(engine, max_timer_ns_caps_every_timer)
{
	struct cmp_settings s;
	struct cmp_sidr_req_param p;
	struct cmp_cm_msg m;
	const cmp_time cap = 100 * MS;

	cmp_settings_default(&s);
	s.max_timer_ns = cap;
	up_with(&s, NULL);
	/* SIDR: 4096 ms, capped. */
	p = sidr_param();
	cr_assert_eq(cmp_sidr_req(E(A), &p, NULL, &ca, T.now), 0);
	take(A, UMAD_CM_ATTR_SIDR_REQ, &m);
	EQ(expiry(A), T.now + cap);
	cmp_conn_destroy(E(A), ca, T.now);
	EQ(expiry(A), CMP_TIME_NEVER);
	/* REQ: about 1.2 s, capped. */
	reach_req_rcvd();
	cr_assert_gt(req_base(), cap);
	EQ(expiry(A), T.now + cap);
	/* MRA wait: conv(24) + the (capped) base; the wait the peer announced
	 * is not capped (IBTA 12.6.6). */
	cr_assert_eq(cmp_mra(E(B), cb, 0, NULL, 0, T.now), 0);
	T.now += MS;
	fwd(B, UMAD_CM_ATTR_MRA, &m);
	EQ(expiry(A), T.now + iba(24) + cap);
	/* REP: capped. */
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	EQ(expiry(B), T.now + cap);
	fwd(B, UMAD_CM_ATTR_REP, &m);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	/* DREQ: capped; TimeWait conv(16) = 268 ms: capped. */
	T.now += MS;
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	EQ(expiry(A), T.now + cap);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	cr_assert_gt(iba(ack_to(15, PLT)), cap);
	EQ(expiry(B), T.now + cap);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	EQ(expiry(A), T.now + cap);
}

Test(engine, timewait_ns_overrides_the_ack_timeout)
{
	struct cmp_settings s;
	struct cmp_cm_msg m;

	cmp_settings_default(&s);
	s.timewait_ns = 5 * MS;
	up_with(&s, NULL);
	reach_established();
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	EQ(expiry(B), T.now + 5 * MS);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	EQ(expiry(A), T.now + 5 * MS);
}

/* A path without a packet lifetime gets the settings' (16), as documented
 * for every "0: settings" time exponent. */
Test(engine, path_without_lifetime_uses_the_settings_one)
{
	struct cmp_cm_msg m;

	up();
	pa.packet_life_time = 0;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.primary_local_ack_timeout, ack_to(15, 16));
	EQ(expiry(A), T.now + 2 * iba(16) + iba(18));
}

/* ======================================================================== */
/* Trace and names                                                           */
/* ======================================================================== */

struct tlog {
	int n, changes, drops, nulls, bad;
	uint32_t id[64];
	enum cmp_state last[64];
	int nid;
	char edge[CMP_STATE_COUNT][CMP_STATE_COUNT];
};
static struct tlog tl[2];

static void trace_cb(void *ctx, const struct cmp_trace_rec *r)
{
	struct tlog *t = ctx;
	int k;

	t->n++;
	if (!r->cause || !r->cause[0] || r->time != T.now || r->from >= CMP_STATE_COUNT ||
	    r->to >= CMP_STATE_COUNT) {
		t->bad++;
		return;
	}
	if (r->from != r->to) {
		t->changes++;
		t->edge[r->from][r->to] = 1;
	} else {
		t->drops++;
	}
	if (!r->local_id) { /* a drop that belongs to no connection */
		t->nulls++;
		t->bad += r->from != CMP_IDLE || r->to != CMP_IDLE;
		return;
	}
	for (k = 0; k < t->nid && t->id[k] != r->local_id; k++)
		;
	if (k == t->nid) {
		if (k == 64)
			return;
		t->id[t->nid++] = r->local_id;
		t->last[k] = CMP_IDLE;
	}
	/* Each record starts where the connection's previous one ended. */
	t->bad += r->from != t->last[k];
	t->last[k] = r->to;
}

static enum cmp_state traced(int i, const struct cmp_conn *c)
{
	for (int k = 0; k < tl[i].nid; k++)
		if (tl[i].id[k] == cmp_conn_local_id(c))
			return tl[i].last[k];
	return CMP_STATE_COUNT;
}

Test(engine, trace_sees_every_state_change_and_drops)
{
	struct cmp_settings sa, sb;
	struct cmp_cm_msg m;
	uint8_t bad[CMP_MAD_SIZE];
	static const enum cmp_state a_path[] = { CMP_IDLE, CMP_REQ_SENT, CMP_MRA_REQ_RCVD,
						 CMP_REP_RCVD, CMP_ESTABLISHED, CMP_DREQ_SENT,
						 CMP_TIMEWAIT, CMP_IDLE };
	static const enum cmp_state b_path[] = { CMP_IDLE, CMP_REQ_RCVD, CMP_MRA_REQ_SENT,
						 CMP_REP_SENT, CMP_ESTABLISHED, CMP_DREQ_RCVD,
						 CMP_TIMEWAIT, CMP_IDLE };

	memset(tl, 0, sizeof(tl));
	cmp_settings_default(&sa);
	sa.trace = trace_cb;
	sa.trace_ctx = &tl[A];
	sb = sa;
	sb.trace_ctx = &tl[B];
	up_with(&sa, &sb);
	reach_req_rcvd();
	EQ(traced(A, ca), st(ca));
	EQ(traced(B, cb), st(cb));
	to(B, req_mad); /* duplicate: MRA */
	fwd(B, UMAD_CM_ATTR_MRA, &m);
	EQ(traced(A, ca), CMP_MRA_REQ_RCVD);
	T.now += MS;
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	fwd(B, UMAD_CM_ATTR_REP, &m);
	to(A, TX.mad); /* duplicate REP: a drop */
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	memcpy(bad, TX.mad, sizeof(bad));
	bad[2] = 9;
	to(B, bad);     /* malformed: a drop with no connection */
	msg(&m, UMAD_CM_ATTR_REJ, 1);
	m.u.rej.remote_comm_id = ~cmp_conn_local_id(ca);
	inject(A, &m);  /* stray: a drop with no connection */
	T.now += MS;
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_DREQ, &m);
	cr_assert_eq(cmp_disconnect(E(B), cb, NULL, 0, T.now), 0);
	fwd(B, UMAD_CM_ATTR_DREP, &m);
	fire(A);
	fire(B);
	STATE(ca, CMP_IDLE);
	STATE(cb, CMP_IDLE);
	for (int i = 0; i < 2; i++) {
		EQ(tl[i].bad, 0);
		cr_assert_gt(tl[i].changes, 0);
		cr_assert_gt(tl[i].drops, 0);
		cr_assert_gt(tl[i].nulls, 0);
	}
	for (size_t k = 0; k + 1 < sizeof(a_path) / sizeof(a_path[0]); k++) {
		cr_assert(tl[A].edge[a_path[k]][a_path[k + 1]], "A: no %s -> %s",
			  cmp_state_str(a_path[k]), cmp_state_str(a_path[k + 1]));
		cr_assert(tl[B].edge[b_path[k]][b_path[k + 1]], "B: no %s -> %s",
			  cmp_state_str(b_path[k]), cmp_state_str(b_path[k + 1]));
	}
	EQ(tl[A].changes, 7);
	EQ(tl[B].changes, 7);
	EQ(traced(A, ca), CMP_IDLE);
	EQ(traced(B, cb), CMP_IDLE);
}

Test(engine, trace_printers)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct cmp_trace_rec r = {
		.time = 1500000042ULL, .local_id = 0xdeadbeef, .remote_id = 0x12,
		.from = CMP_REQ_SENT, .to = CMP_REP_RCVD, .cause = "recv REP",
	};

	cr_assert_not_null(f);
	cmp_trace_print(f, &r);
	cmp_trace_json(f, &r);
	fclose(f);
	cr_assert(strstr(buf, "1.500000042 cm deadbeef/00000012 REQ_SENT -> REP_RCVD: recv REP\n"),
		  "%s", buf);
	cr_assert(strstr(buf, "\"time_ns\": 1500000042"), "%s", buf);
	cr_assert(strstr(buf, "\"old\": \"REQ_SENT\", \"new\": \"REP_RCVD\""), "%s", buf);
	cr_assert(strstr(buf, "\"trigger\": \"recv REP\"}}\n"), "%s", buf);
	free(buf);
}

Test(engine, state_and_event_names)
{
	static const char *const states[] = {
		"IDLE", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD", "REP_SENT",
		"REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT",
		"DREQ_RCVD", "TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD",
	};
	static const char *const events[] = {
		"REQ_RECEIVED", "REQ_ERROR", "REP_RECEIVED", "REP_ERROR", "RTU_RECEIVED",
		"USER_ESTABLISHED", "MRA_RECEIVED", "REJ_RECEIVED", "DREQ_RECEIVED",
		"DREQ_ERROR", "DREP_RECEIVED", "TIMEWAIT_EXIT", "SIDR_REQ_RECEIVED",
		"SIDR_REQ_ERROR", "SIDR_REP_RECEIVED", "LAP_RECEIVED",
	};

	EQ(sizeof(states) / sizeof(states[0]), CMP_STATE_COUNT);
	for (int s = 0; s < CMP_STATE_COUNT; s++)
		cr_assert_str_eq(cmp_state_str((enum cmp_state)s), states[s]);
	cr_assert_str_eq(cmp_state_str(CMP_STATE_COUNT), "?");
	cr_assert_str_eq(cmp_state_str((enum cmp_state)-1), "?");
	for (int t = 0; t < (int)(sizeof(events) / sizeof(events[0])); t++)
		cr_assert_str_eq(cmp_event_str((enum cmp_event_type)t), events[t]);
	cr_assert_str_eq(cmp_event_str((enum cmp_event_type)16), "?");
	cr_assert_str_eq(cmp_event_str((enum cmp_event_type)-1), "?");
}

/* ======================================================================== */
/* Spoofing counters, the half-open cap, GID-only peers             */
/* ======================================================================== */

/* A MAD naming the right connection from the wrong port is dropped and
 * counted both in rx_mismatch and in rx_spoofed; a wrong QPN or comm ID is
 * a mismatch but not a spoof. */
Test(engine, spoofed_source_counted_apart)
{
	struct cmp_cm_msg m;

	up();
	reach_established();
	msg(&m, UMAD_CM_ATTR_DREQ, 0x77ULL << 32 | cmp_conn_local_id(ca));
	m.u.dreq.local_comm_id = cmp_conn_local_id(ca);
	m.u.dreq.remote_comm_id = cmp_conn_local_id(cb);
	m.u.dreq.remote_qpn_eecn = QPN_B;
	inject_from(B, 9, &m);
	EQ(ST(B)->rx_spoofed, 1);
	EQ(ST(B)->rx_mismatch, 1);
	m.u.dreq.remote_qpn_eecn = QPN_B ^ 1;
	inject(B, &m);
	EQ(ST(B)->rx_spoofed, 1);
	EQ(ST(B)->rx_mismatch, 2);
	msg(&m, UMAD_CM_ATTR_REJ, 1);
	m.u.rej.local_comm_id = cmp_conn_local_id(cb);
	m.u.rej.remote_comm_id = cmp_conn_local_id(ca);
	m.u.rej.message_rejected = 2;
	m.u.rej.reason = 28;
	inject_from(A, 9, &m);
	msg(&m, UMAD_CM_ATTR_DREP, 1);
	m.u.drep.local_comm_id = cmp_conn_local_id(cb);
	m.u.drep.remote_comm_id = cmp_conn_local_id(ca);
	inject_from(A, 9, &m);
	EQ(ST(A)->rx_spoofed, 2);
	EQ(ST(A)->rx_mismatch, 2);
	nothing(A);
	nothing(B);
	no_ev(A);
	no_ev(B);
	STATE(ca, CMP_ESTABLISHED);
	STATE(cb, CMP_ESTABLISHED);
}

/* A's REQ just taken (TX): B receives it as a RoCE peer's (with a GRH,
 * from A's GID), accepts, and A receives B's REP the same way. */
static void roce_req_to_rep_received(struct cmp_cm_msg *m)
{
	struct cmp_addr from_a = { .grh = 1, .qpn = 1, .qkey = 0x80010000 };
	struct cmp_addr from_b = { .grh = 1, .qpn = 1, .qkey = 0x80010000 };

	memcpy(from_a.gid, pa.sgid, 16);
	cmp_engine_recv(E(B), &from_a, TX.mad, CMP_MAD_SIZE, T.now);
	cb = next_ev(B, CMP_EV_REQ_RECEIVED)->conn;
	cr_assert_eq(cmp_accept(E(B), cb, &pp, T.now), 0);
	take_to(B, 0, UMAD_CM_ATTR_REP, m);
	memcpy(from_b.gid, pa.dgid, 16);
	cmp_engine_recv(E(A), &from_b, TX.mad, CMP_MAD_SIZE, T.now);
	next_ev(A, CMP_EV_REP_RECEIVED);
}

/* Regression: a RoCE peer is known by GID only (LID 0); a MAD without a
 * GRH from LID 0 used to pass the source check (0 == 0) and could tear the
 * connection down. It is a spoof now. */
Test(engine, roce_peer_not_matched_by_lid_zero)
{
	struct cmp_cm_msg m;
	struct cmp_addr nogrh = { .lid = 0, .qpn = 1, .qkey = 0x80010000 };
	uint8_t mad[CMP_MAD_SIZE];

	up();
	pa.slid = pa.dlid = 0;
	pa.roce = 1;
	pa.subnet_local = 0;
	listen_b();
	connect_a();
	take_to(A, 0, UMAD_CM_ATTR_REQ, &m);
	EQ(TX.dst.grh, 1);
	/* A's REQ, as B sees it: RoCE, so always with a GRH. */
	roce_req_to_rep_received(&m);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	take_to(A, 0, UMAD_CM_ATTR_RTU, &m);
	struct cmp_addr from_a = { .grh = 1, .qpn = 1, .qkey = 0x80010000 };
	memcpy(from_a.gid, pa.sgid, 16);
	cmp_engine_recv(E(B), &from_a, TX.mad, CMP_MAD_SIZE, T.now);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	STATE(ca, CMP_ESTABLISHED);
	STATE(cb, CMP_ESTABLISHED);

	/* The right comm IDs and QPN, no GRH, LID 0: dropped. */
	msg(&m, UMAD_CM_ATTR_DREQ, 5);
	m.u.dreq.local_comm_id = cmp_conn_local_id(ca);
	m.u.dreq.remote_comm_id = cmp_conn_local_id(cb);
	m.u.dreq.remote_qpn_eecn = QPN_B;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	cmp_engine_recv(E(B), &nogrh, mad, CMP_MAD_SIZE, T.now);
	EQ(ST(B)->rx_spoofed, 1);
	tn_events(&T, B);
	no_ev(B);
	STATE(cb, CMP_ESTABLISHED);
	/* With the peer's GID it is the real thing. */
	cmp_engine_recv(E(B), &from_a, mad, CMP_MAD_SIZE, T.now);
	next_ev(B, CMP_EV_DREQ_RECEIVED);
}

/* A RoCE REQ carries the permissive LID 0xFFFF as both port LIDs of its
 * path (hop limit 64), as kernel 6.1's ib_cm sends it; the passive side
 * connects on it. An IB path keeps the SA's LIDs, even with a hop limit
 * above 1 (connect_sends_req_with_every_field's alternate path). */
Test(engine, roce_req_lids_are_permissive)
{
	struct cmp_cm_msg m;

	up();
	pa.slid = pa.dlid = 0;
	pa.roce = 1;
	pa.subnet_local = 0;
	pa.hop_limit = 64;
	listen_b();
	connect_a();
	take_to(A, 0, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.primary_local_lid, 0xFFFF);
	EQ(m.u.req.primary_remote_lid, 0xFFFF);
	EQ(m.u.req.alternate_local_lid, 0);
	EQ(m.u.req.alternate_remote_lid, 0);
	roce_req_to_rep_received(&m);
	STATE(ca, CMP_REP_RCVD);
}

/* settings.max_pending caps the half-open passive connections of the
 * whole engine (all listeners): REQ_RCVD up to REP_SENT awaiting the RTU.
 * Past it a REQ gets REJ(no resources) and counts in half_open_drops;
 * establishing one frees a slot. */
Test(engine, half_open_cap_rejects_excess_reqs)
{
	struct cmp_settings s;
	struct cmp_cm_msg m;
	struct cmp_listen *l2;

	cmp_settings_default(&s);
	EQ(s.max_pending, 4096);
	s.max_pending = 2;
	up_with(NULL, &s);
	/* Two REQs (two listeners) fill the cap. */
	reach_rep_rcvd(); /* cb in REP_SENT: still half-open */
	cr_assert_eq(cmp_listen(E(B), SID + 1, 0, 0, NULL, &l2), 0);
	EQ(ST(B)->half_open, 1);
	msg(&m, UMAD_CM_ATTR_REQ, 0x42);
	m.u.req.local_comm_id = 0xABCD0001;
	m.u.req.service_id = SID + 1;
	m.u.req.local_ca_guid = GUID_A;
	m.u.req.local_qpn = 0x1111;
	m.u.req.path_mtu = 4;
	inject(B, &m);
	const struct cmp_event *ev = next_ev(B, CMP_EV_REQ_RECEIVED);
	struct cmp_conn *second = ev->conn;
	EQ(ST(B)->half_open, 2);
	EQ(ST(B)->half_open_peak, 2);
	/* The third, on either listener, is refused. */
	m.u.req.local_comm_id = 0xABCD0002;
	m.u.req.local_qpn = 0x2222;
	inject(B, &m);
	take(B, UMAD_CM_ATTR_REJ, &m);
	EQ(m.u.rej.reason, 3); /* no resources */
	EQ(m.u.rej.remote_comm_id, 0xABCD0002);
	EQ(ST(B)->half_open_drops, 1);
	EQ(ST(B)->backlog_drops, 0);
	no_ev(B);
	EQ(cmp_engine_conn_count(E(B)), 2);
	/* The first establishes: a slot frees up. */
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	EQ(ST(B)->half_open, 1);
	msg(&m, UMAD_CM_ATTR_REQ, 0x43);
	m.u.req.local_comm_id = 0xABCD0003;
	m.u.req.service_id = SID + 1;
	m.u.req.local_ca_guid = GUID_A;
	m.u.req.local_qpn = 0x3333;
	m.u.req.path_mtu = 4;
	inject(B, &m);
	struct cmp_conn *third = next_ev(B, CMP_EV_REQ_RECEIVED)->conn;
	EQ(ST(B)->half_open, 2);
	/* Rejecting and destroying release their slots too. */
	cr_assert_eq(cmp_reject(E(B), second, 28, NULL, 0, NULL, 0, T.now), 0);
	EQ(ST(B)->half_open, 1);
	cmp_conn_destroy(E(B), third, T.now);
	EQ(ST(B)->half_open, 0);
	cmp_conn_destroy(E(B), second, T.now);
}

/* ======================================================================== */
/* XRC (the kernel's cm.c: cm_req_set_qp_type / cm_req_get_qp_type,        */
/* cm_format_req, cm_format_rep, cm_rep_handler, cm_init_qp_*_attr)         */
/* ======================================================================== */

/* An XRC initiator's REQ: transport service type 3, extended transport
 * type 1, no responder resources, retry counts nor SRQ; B sees an XRC
 * target with the REQ's initiator depth as its responder resources. */
Test(engine, xrc_req_fields_and_passive_type)
{
	struct cmp_cm_msg m;
	const struct cmp_event *ev;

	up();
	listen_b();
	rp.qp_type = CMP_QPT_XRC_INI;
	rp.srq = 1;
	connect_a();
	fwd(A, UMAD_CM_ATTR_REQ, &m);
	EQ(m.u.req.transport_service_type, 3);
	EQ(m.u.req.extended_transport_type, 1);
	EQ(m.u.req.responder_resources, 0);
	EQ(m.u.req.retry_count, 0);
	EQ(m.u.req.rnr_retry_count, 0);
	EQ(m.u.req.srq, 0);
	EQ(m.u.req.initiator_depth, 6);
	EQ(m.u.req.end_to_end_flow_control, 1);
	EQ(m.u.req.local_qpn, QPN_A);
	EQ(m.u.req.starting_psn, PSN_A);
	ev = next_ev(B, CMP_EV_REQ_RECEIVED);
	EQ(ev->qp_type, CMP_QPT_XRC_TGT);
	EQ(ev->remote_qpn, QPN_A);
	EQ(ev->responder_resources, 0);
	EQ(ev->initiator_depth, 6);
	cb = ev->conn;
	STATE(cb, CMP_REQ_RCVD);
}

/* Extended transport types other than 1 under type 3 are undefined: the
 * codec refuses such a REQ (malformed, dropped without an answer). */
Test(engine, xrc_req_unknown_extended_type_dropped)
{
	struct cmp_cm_msg m;
	uint8_t mad[CMP_MAD_SIZE];

	up();
	listen_b();
	rp.qp_type = CMP_QPT_XRC_INI;
	connect_a();
	take(A, UMAD_CM_ATTR_REQ, &m);
	m.u.req.extended_transport_type = 2;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	to(B, mad);
	nothing(B);
	no_ev(B);
	EQ(ST(B)->rx_malformed, 1);
	/* and an XRC target is no type to connect with */
	rp.qp_type = CMP_QPT_XRC_TGT;
	rp.qpn = QPN_A + 1;
	cr_assert_lt(cmp_connect(E(A), &rp, &actx, &ca, T.now), 0);
	EQ(errno, EINVAL);
}

/* The target's REP: its QPN in Local EECN (Local QPN 0), SRQ 1, initiator
 * depth and flow control 0; A takes the remote QPN from the EECN. */
Test(engine, xrc_rep_fields_and_remote_qpn)
{
	struct cmp_cm_msg m;
	const struct cmp_event *ev;

	up();
	rp.qp_type = CMP_QPT_XRC_INI;
	pp.srq = 0; /* the target's SRQ bit is 1 whatever is asked */
	reach_rep_sent();
	take(B, UMAD_CM_ATTR_REP, &m);
	EQ(m.u.rep.local_qpn, 0);
	EQ(m.u.rep.local_eecn, QPN_B);
	EQ(m.u.rep.srq, 1);
	EQ(m.u.rep.initiator_depth, 0);
	EQ(m.u.rep.end_to_end_flow_control, 0);
	EQ(m.u.rep.starting_psn, PSN_B);
	EQ(m.u.rep.responder_resources, 6); /* pp 16 clamped to the REQ initiator depth */
	to(A, TX.mad);
	ev = next_ev(A, CMP_EV_REP_RECEIVED);
	EQ(ev->remote_qpn, QPN_B);
	EQ(ev->srq, 1);
	cr_assert_eq(cmp_rtu(E(A), ca, NULL, 0, T.now), 0);
	fwd(A, UMAD_CM_ATTR_RTU, &m);
	next_ev(B, CMP_EV_RTU_RECEIVED);
	STATE(ca, CMP_ESTABLISHED);
	STATE(cb, CMP_ESTABLISHED);
}

/* QP attributes: the initiator has no responder (no MAX_DEST_RD_ATOMIC /
 * MIN_RNR_TIMER at RTR) but retries and read depth at RTS; the target
 * answers only (RTR like RC, RTS with the ACK timeout and SQ PSN). */
Test(engine, xrc_qp_attr)
{
	struct ibv_qp_attr a;
	int mask;

	up();
	rp.qp_type = CMP_QPT_XRC_INI;
	reach_established();
	qattr(ca, IBV_QPS_INIT, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	qattr(ca, IBV_QPS_RTR, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	EQ(a.dest_qp_num, QPN_B);
	EQ(a.rq_psn, PSN_A);
	qattr(ca, IBV_QPS_RTS, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		 IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_TIMEOUT);
	EQ(a.sq_psn, PSN_B);
	EQ(a.retry_cnt, 5);
	EQ(a.rnr_retry, 3); /* the REP's */
	cr_assert_gt(a.timeout, 0);

	qattr(cb, IBV_QPS_RTR, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	EQ(a.dest_qp_num, QPN_A);
	EQ(a.rq_psn, PSN_B);
	EQ(a.max_dest_rd_atomic, 6); /* the REQ's initiator depth */
	qattr(cb, IBV_QPS_RTS, &a, &mask);
	EQ(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
	EQ(a.sq_psn, PSN_A);
}

/* cm_destroy_id: an established XRC target goes without a DREQ; the
 * initiator's side disconnects with DREQ/DREP as RC does. */
Test(engine, xrc_destroy_target_sends_no_dreq)
{
	struct cmp_cm_msg m;

	up();
	rp.qp_type = CMP_QPT_XRC_INI;
	reach_established();
	cmp_conn_destroy(E(B), cb, T.now);
	nothing(B);
	cr_assert_eq(cmp_disconnect(E(A), ca, NULL, 0, T.now), 0);
	take(A, UMAD_CM_ATTR_DREQ, &m);
}
