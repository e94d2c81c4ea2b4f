/*
 * uscm-cm-samples - writes a capture holding every CM message type the
 * uscm codec knows, encoded by cmp_cm_encode() and framed by
 * um_pcap_write_mad(): the sample the Wireshark plugin's test and
 * `make demo` show, since a uscm run on the simulated fabric never sends
 * a LAP (uscm answers one with APR "unsupported"), and sends MRA only when
 * an application is slow to answer a REQ.
 *
 *   uscm-cm-samples [--link roce4|roce6|ib] [--seed N] OUT.pcap
 *
 * The MADs tell three short stories between a client (10.0.0.1 / LID 1)
 * and a server (10.0.0.2 / LID 2), comm IDs and TIDs matching within each:
 *   1. ClassPortInfo Get / GetResp;
 *   2. REQ (rdma_cm TCP port space, CMA header with IPv4 addresses), MRA of
 *      the REQ, REP, RTU, LAP, APR, DREQ, DREP;
 *   3. REQ (CMA header with IPv6 addresses), REJ (consumer defined);
 *   4. REQ (opaque service ID, no CMA header), REP, MRA of the REP, RTU;
 *   5. SIDR_REQ (UDP port space, CMA header), SIDR_REP.
 * Every other field holds a value from a pseudo-random sequence fixed by
 * --seed (default 1), masked to the field's width and kept inside what
 * cmp_cm_validate() accepts, so that every field of every message shows a
 * value of its own. --link: RoCEv2 over IPv4 (default) or IPv6 in an
 * Ethernet pcap, or native InfiniBand (ERF type 21; every other MAD with a
 * GRH). Exit status 0, 1 on a write error, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "umad/um_pcap.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Every non-reserved row of l in obj gets a pseudo-random value (byte
 * strings and GIDs random bytes). */
static void fill(const struct cmp_layout *l, void *obj)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		uint8_t *p = (uint8_t *)obj + f->offset;

		switch (f->kind) {
		case CMP_K_RSVD:
			break;
		case CMP_K_GID:
		case CMP_K_BYTES:
			for (unsigned b = 0; b < f->size; b++)
				p[b] = (uint8_t)rnd();
			break;
		default: {
			uint64_t v = rnd();
			if (f->width < 64)
				v &= (1ULL << f->width) - 1;
			cmp_field_set_value(f, obj, v);
			break;
		}
		}
	}
}

struct writer {
	struct um_pcap_writer *w;
	int link;   /* UM_LINK_ROCEV2 or UM_LINK_IB */
	int ipv6;
	uint64_t ts;
	unsigned n;
};

static void gid_of(const struct writer *wr, int server, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (wr->link == UM_LINK_ROCEV2 && !wr->ipv6) {
		gid[10] = gid[11] = 0xff;
		gid[12] = 10;
		gid[15] = (uint8_t)(server ? 2 : 1);
	} else {
		gid[0] = 0xfe;
		gid[1] = 0x80;
		gid[15] = (uint8_t)(server ? 2 : 1);
	}
}

/* Encodes m and appends it as sent by the client (from_server 0) or server. */
static int put(struct writer *wr, struct cmp_cm_msg *m, int from_server)
{
	struct um_frame_meta meta;
	uint8_t mad[CMP_MAD_SIZE];

	memset(mad, 0, sizeof(mad));
	if (cmp_cm_encode(m, mad))
		return -1;
	memset(&meta, 0, sizeof(meta));
	meta.ts_ns = wr->ts + (uint64_t)wr->n * 1000000ULL;
	meta.link = wr->link;
	meta.slid = (uint16_t)(from_server ? 2 : 1);
	meta.dlid = (uint16_t)(from_server ? 1 : 2);
	meta.has_grh = wr->link == UM_LINK_ROCEV2 || (wr->n & 1);
	gid_of(wr, from_server, meta.sgid);
	gid_of(wr, !from_server, meta.dgid);
	meta.pkey = 0xffff;
	meta.dest_qp = 1;
	meta.src_qp = 1;
	meta.qkey = UM_QP1_QKEY;
	wr->n++;
	return um_pcap_write_mad(wr->w, &meta, mad);
}

/* A message of attribute attr with every field random, then the header. */
static void msg_new(struct cmp_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	fill(cmp_cm_layout(attr), &m->u);
	m->hdr.attr_id = attr;
	m->hdr.tid = tid;
	m->hdr.method = UMAD_METHOD_SEND;
	m->hdr.attr_mod = 0;
	m->hdr.status = 0;
	m->hdr.class_specific = 0;
}

/* Keeps the enumerations and lengths cmp_cm_validate() checks in range. */
static void make_valid(struct cmp_cm_msg *m)
{
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ:
		m->u.req.transport_service_type %= 3;
		m->u.req.path_mtu = (uint8_t)(1 + m->u.req.path_mtu % 5);
		break;
	case UMAD_CM_ATTR_MRA:
		m->u.mra.message_mraed %= 3;
		break;
	case UMAD_CM_ATTR_REJ:
		m->u.rej.message_rejected %= 3;
		m->u.rej.reject_info_length %= CMP_ARI_SIZE + 1;
		break;
	case UMAD_CM_ATTR_REP:
		m->u.rep.failover_accepted %= 3;
		break;
	case UMAD_CM_ATTR_APR:
		m->u.apr.additional_info_length %= CMP_ARI_SIZE + 1;
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		m->u.sidr_rep.additional_info_length %= CMP_ARI_SIZE + 1;
		m->u.sidr_rep.status %= 6;
		break;
	default:
		break;
	}
}

static void sin4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	inet_pton(AF_INET, ip, &in->sin_addr);
}

static void sin6(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	inet_pton(AF_INET6, ip, &in6->sin6_addr);
}

static int write_all(struct writer *wr)
{
	struct cmp_cm_msg m;
	struct sockaddr_storage src, dst;
	uint32_t cid, sid_c;
	int rc = 0;

	/* 1. ClassPortInfo */
	msg_new(&m, UMAD_ATTR_CLASS_PORT_INFO, 0x1000);
	memset(&m.u, 0, sizeof(m.u));
	m.hdr.method = UMAD_METHOD_GET;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_ATTR_CLASS_PORT_INFO, 0x1000);
	m.hdr.method = UMAD_METHOD_GET_RESP;
	rc |= put(wr, &m, 1);

	/* 2. an rdma_cm connection over IPv4 with MRA, LAP / APR */
	msg_new(&m, UMAD_CM_ATTR_REQ, 0x2000);
	make_valid(&m);
	cid = m.u.req.local_comm_id;
	m.u.req.service_id = cmp_sid_make(CMP_PS_TCP, 7174);
	sin4(&src, "10.0.0.1", 40001);
	sin4(&dst, "10.0.0.2", 7174);
	if (cmp_cma_hdr_build(m.u.req.private_data, sizeof(m.u.req.private_data),
			      (struct sockaddr *)&src, (struct sockaddr *)&dst))
		return -1;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_MRA, 0x2000);
	make_valid(&m);
	m.u.mra.remote_comm_id = cid;
	m.u.mra.message_mraed = 0; /* the REQ */
	sid_c = m.u.mra.local_comm_id;
	rc |= put(wr, &m, 1);
	msg_new(&m, UMAD_CM_ATTR_REP, 0x2000);
	make_valid(&m);
	m.u.rep.local_comm_id = sid_c;
	m.u.rep.remote_comm_id = cid;
	rc |= put(wr, &m, 1);
	msg_new(&m, UMAD_CM_ATTR_RTU, 0x2000);
	m.u.rtu.local_comm_id = cid;
	m.u.rtu.remote_comm_id = sid_c;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_LAP, 0x2001);
	m.u.lap.local_comm_id = cid;
	m.u.lap.remote_comm_id = sid_c;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_APR, 0x2001);
	make_valid(&m);
	m.u.apr.local_comm_id = sid_c;
	m.u.apr.remote_comm_id = cid;
	rc |= put(wr, &m, 1);
	msg_new(&m, UMAD_CM_ATTR_DREQ, 0x2002);
	m.u.dreq.local_comm_id = cid;
	m.u.dreq.remote_comm_id = sid_c;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_DREP, 0x2002);
	m.u.drep.local_comm_id = sid_c;
	m.u.drep.remote_comm_id = cid;
	rc |= put(wr, &m, 1);

	/* 3. IPv6 CMA header, rejected */
	msg_new(&m, UMAD_CM_ATTR_REQ, 0x3000);
	make_valid(&m);
	cid = m.u.req.local_comm_id;
	m.u.req.service_id = cmp_sid_make(CMP_PS_TCP, 7175);
	sin6(&src, "fd00::1", 40002);
	sin6(&dst, "fd00::2", 7175);
	if (cmp_cma_hdr_build(m.u.req.private_data, sizeof(m.u.req.private_data),
			      (struct sockaddr *)&src, (struct sockaddr *)&dst))
		return -1;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_REJ, 0x3000);
	make_valid(&m);
	m.u.rej.remote_comm_id = cid;
	m.u.rej.message_rejected = 0;
	m.u.rej.reason = 28; /* consumer defined */
	rc |= put(wr, &m, 1);

	/* 4. an opaque service ID (no CMA header); the REP is MRAed */
	msg_new(&m, UMAD_CM_ATTR_REQ, 0x4000);
	make_valid(&m);
	cid = m.u.req.local_comm_id;
	m.u.req.service_id |= 1ULL << 63; /* outside the IP port spaces */
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_REP, 0x4000);
	make_valid(&m);
	m.u.rep.remote_comm_id = cid;
	sid_c = m.u.rep.local_comm_id;
	rc |= put(wr, &m, 1);
	msg_new(&m, UMAD_CM_ATTR_MRA, 0x4000);
	m.u.mra.local_comm_id = cid;
	m.u.mra.remote_comm_id = sid_c;
	m.u.mra.message_mraed = 1; /* the REP */
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_RTU, 0x4000);
	m.u.rtu.local_comm_id = cid;
	m.u.rtu.remote_comm_id = sid_c;
	rc |= put(wr, &m, 0);

	/* 5. SIDR in the UDP port space */
	msg_new(&m, UMAD_CM_ATTR_SIDR_REQ, 0x5000);
	cid = m.u.sidr_req.request_id;
	m.u.sidr_req.service_id = cmp_sid_make(CMP_PS_UDP, 7176);
	sin4(&src, "10.0.0.1", 40003);
	sin4(&dst, "10.0.0.2", 7176);
	if (cmp_cma_hdr_build(m.u.sidr_req.private_data, sizeof(m.u.sidr_req.private_data),
			      (struct sockaddr *)&src, (struct sockaddr *)&dst))
		return -1;
	rc |= put(wr, &m, 0);
	msg_new(&m, UMAD_CM_ATTR_SIDR_REP, 0x5000);
	make_valid(&m);
	m.u.sidr_rep.request_id = cid;
	m.u.sidr_rep.status = 0;
	m.u.sidr_rep.service_id = cmp_sid_make(CMP_PS_UDP, 7176);
	m.u.sidr_rep.qkey = CMP_UDP_QKEY;
	rc |= put(wr, &m, 1);
	return rc ? -1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: uscm-cm-samples [--link roce4|roce6|ib] [--seed N] OUT.pcap\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "link", required_argument, NULL, 'l' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct writer wr = { .link = UM_LINK_ROCEV2, .ts = 1700000000ULL * 1000000000ULL };
	uint64_t seed = 1;
	int c;

	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (!strcmp(optarg, "roce4")) {
				wr.link = UM_LINK_ROCEV2;
				wr.ipv6 = 0;
			} else if (!strcmp(optarg, "roce6")) {
				wr.link = UM_LINK_ROCEV2;
				wr.ipv6 = 1;
			} else if (!strcmp(optarg, "ib")) {
				wr.link = UM_LINK_IB;
			} else {
				usage(stderr);
				return 2;
			}
			break;
		case 's': {
			char *end;
			seed = strtoull(optarg, &end, 0);
			if (*end || !*optarg) {
				usage(stderr);
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
	wr.w = um_pcap_open_write(argv[optind], wr.link == UM_LINK_IB ? UM_PCAP_LINKTYPE_ERF
								    : UM_PCAP_LINKTYPE_ETHERNET);
	if (!wr.w) {
		fprintf(stderr, "uscm-cm-samples: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	if (write_all(&wr) || um_pcap_close_write(wr.w)) {
		fprintf(stderr, "uscm-cm-samples: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	return 0;
}
