/*
 * uscm-demo - the main job until the rdma_cm API lands on the simulated
 * fabric: encode what one rdma_cm connection puts on the wire between two
 * IB nodes — an SA PathRecord query and its response, then REQ (with the
 * kernel's CMA header and service ID), REP, RTU, DREQ, DREP — and write it
 * as two pcap files: native IB in ERF records (as ibdump captures) and
 * RoCEv2 over Ethernet. Both are then decoded by uscm-decode (and tshark,
 * when installed) from `make demo`.
 *
 * usage: uscm-demo [OUTDIR]     (default build/demo)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "umad/um_pcap.h"
#include "umad/um_sa.h"

/* The two nodes and the SM of a small IB subnet (node i = 127.10.0.i). */
struct node {
	const char *ip;
	uint16_t lid;
	uint64_t guid;
	uint8_t gid[16];
};

static void node_gid(struct node *n)
{
	static const uint8_t prefix[8] = { 0xfe, 0x80 };
	memcpy(n->gid, prefix, 8);
	for (int i = 0; i < 8; i++)
		n->gid[8 + i] = (uint8_t)(n->guid >> (56 - 8 * i));
}

struct out {
	struct um_pcap_writer *ib, *roce;
	uint64_t t0;
};

/* Writes one MAD from a to b (QP1 to QP1) at t0 + us microseconds, in both
 * framings. */
static void emit(struct out *o, const struct node *a, const struct node *b, uint64_t us,
		 const uint8_t mad[CMP_MAD_SIZE])
{
	struct um_frame_meta m = { 0 };

	m.ts_ns = o->t0 + us * 1000;
	m.pkey = 0xFFFF;
	m.qkey = UMAD_QKEY;
	m.src_qp = 1;
	m.dest_qp = 1;
	m.link = UM_LINK_IB;
	m.slid = a->lid;
	m.dlid = b->lid;
	if (um_pcap_write_mad(o->ib, &m, mad)) {
		perror("uscm-demo: write IB trace");
		exit(1);
	}
	/* RoCEv2: the GIDs are the nodes' IPv4 addresses, IPv4-mapped. */
	memset(&m, 0, sizeof(m));
	m.ts_ns = o->t0 + us * 1000;
	m.link = UM_LINK_ROCEV2;
	m.pkey = 0xFFFF;
	m.qkey = UMAD_QKEY;
	m.src_qp = 1;
	m.dest_qp = 1;
	m.sgid[10] = m.sgid[11] = 0xff;
	m.dgid[10] = m.dgid[11] = 0xff;
	inet_pton(AF_INET, a->ip, m.sgid + 12);
	inet_pton(AF_INET, b->ip, m.dgid + 12);
	if (um_pcap_write_mad(o->roce, &m, mad)) {
		perror("uscm-demo: write RoCEv2 trace");
		exit(1);
	}
}

static void cm_emit(struct out *o, const struct node *a, const struct node *b, uint64_t us,
		    struct cmp_cm_msg *msg)
{
	uint8_t mad[CMP_MAD_SIZE];

	if (cmp_cm_encode(msg, mad)) {
		fprintf(stderr, "uscm-demo: cannot encode attribute 0x%x\n", msg->hdr.attr_id);
		exit(1);
	}
	emit(o, a, b, us, mad);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "build/demo";
	struct node n1 = { "127.10.0.1", 1, 0x0002c90300000001ULL, { 0 } };
	struct node n2 = { "127.10.0.2", 2, 0x0002c90300000002ULL, { 0 } };
	struct node sm = { "127.10.0.254", 3, 0x0002c903000000feULL, { 0 } };
	char ib_path[512], roce_path[512];
	struct out o = { .t0 = 1796000000ULL * 1000000000ULL }; /* a fixed instant: reproducible files */
	const uint16_t port = 7174; /* rping's default */
	const uint32_t lcid = 0x5ca1ab1e, rcid = 0x0ddba11;
	struct cmp_cm_msg m;
	struct um_sa_msg sa;
	uint8_t mad[CMP_MAD_SIZE];

	node_gid(&n1);
	node_gid(&n2);
	node_gid(&sm);
	if (mkdir(dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "uscm-demo: mkdir %s: %s\n", dir, strerror(errno));
		return 1;
	}
	snprintf(ib_path, sizeof(ib_path), "%s/handshake-ib.pcap", dir);
	snprintf(roce_path, sizeof(roce_path), "%s/handshake-rocev2.pcap", dir);
	o.ib = um_pcap_open_write(ib_path, UM_PCAP_LINKTYPE_ERF);
	o.roce = um_pcap_open_write(roce_path, UM_PCAP_LINKTYPE_ETHERNET);
	if (!o.ib || !o.roce) {
		fprintf(stderr, "uscm-demo: cannot create traces in %s: %s\n", dir, strerror(errno));
		return 1;
	}

	/* 1. rdma_resolve_route: PathRecord n1 -> n2 from the SA. */
	uint64_t sid = cmp_sid_make(CMP_PS_TCP, port);
	um_sa_path_query(&sa, 0x0000000100000001ULL, n1.gid, n2.gid, 0xFFFF, sid, 0);
	um_sa_encode(&sa, mad);
	emit(&o, &n1, &sm, 0, mad);

	struct um_sa_path_rec pr = { 0 };
	pr.service_id = sid;
	memcpy(pr.dgid, n2.gid, 16);
	memcpy(pr.sgid, n1.gid, 16);
	pr.dlid = n2.lid;
	pr.slid = n1.lid;
	pr.hop_limit = 0;
	pr.reversible = 1;
	pr.numb_path = 1;
	pr.pkey = 0xFFFF;
	pr.sl = 0;
	pr.mtu_selector = UMAD_SA_SELECTOR_EXACTLY;
	pr.mtu = 4; /* 2048 */
	pr.rate_selector = UMAD_SA_SELECTOR_EXACTLY;
	pr.rate = 16; /* 100 Gb/s */
	pr.packet_life_time_selector = UMAD_SA_SELECTOR_EXACTLY;
	pr.packet_life_time = 14;
	sa.hdr.method = UMAD_METHOD_GET_RESP;
	sa.u.pr = pr;
	um_sa_encode(&sa, mad);
	emit(&o, &sm, &n1, 420, mad);

	/* 2. rdma_connect: REQ with the CMA header. */
	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_REQ;
	m.hdr.tid = lcid;
	struct cmp_cm_req *r = &m.u.req;
	r->local_comm_id = lcid;
	r->service_id = sid;
	r->local_ca_guid = n1.guid;
	r->local_qpn = 0x000123;
	r->responder_resources = 16;
	r->initiator_depth = 16;
	r->remote_cm_response_timeout = 20;
	r->transport_service_type = 0; /* RC */
	r->end_to_end_flow_control = 1;
	r->starting_psn = 0x4a3b2c;
	r->local_cm_response_timeout = 20;
	r->retry_count = 7;
	r->pkey = 0xFFFF;
	r->path_mtu = pr.mtu;
	r->rnr_retry_count = 7;
	r->max_cm_retries = 15;
	r->primary_local_lid = n1.lid;
	r->primary_remote_lid = n2.lid;
	memcpy(r->primary_local_gid, n1.gid, 16);
	memcpy(r->primary_remote_gid, n2.gid, 16);
	r->primary_packet_rate = pr.rate;
	r->primary_sl = pr.sl;
	r->primary_subnet_local = 1;
	r->primary_local_ack_timeout = 15; /* cm_ack_timeout(ack_delay 15, lifetime 14) */
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(45678) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, n1.ip, &src.sin_addr);
	inet_pton(AF_INET, n2.ip, &dst.sin_addr);
	cmp_cma_hdr_build(r->private_data, sizeof(r->private_data), (struct sockaddr *)&src,
			  (struct sockaddr *)&dst);
	memcpy(r->private_data + CMP_CMA_HDR_SIZE, "rping", 5);
	cm_emit(&o, &n1, &n2, 1000, &m);

	/* 3. rdma_accept: REP. */
	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_REP;
	m.hdr.tid = lcid;
	m.u.rep.local_comm_id = rcid;
	m.u.rep.remote_comm_id = lcid;
	m.u.rep.local_qpn = 0x000456;
	m.u.rep.starting_psn = 0x1f2e3d;
	m.u.rep.responder_resources = 16;
	m.u.rep.initiator_depth = 16;
	m.u.rep.target_ack_delay = 15;
	m.u.rep.failover_accepted = 1; /* not supported */
	m.u.rep.end_to_end_flow_control = 1;
	m.u.rep.rnr_retry_count = 7;
	m.u.rep.local_ca_guid = n2.guid;
	cm_emit(&o, &n2, &n1, 1180, &m);

	/* 4. RTU, then ESTABLISHED on both sides. */
	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_RTU;
	m.hdr.tid = lcid;
	m.u.rtu.local_comm_id = lcid;
	m.u.rtu.remote_comm_id = rcid;
	cm_emit(&o, &n1, &n2, 1290, &m);

	/* 5. rdma_disconnect on the active side: DREQ / DREP. */
	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_DREQ;
	m.hdr.tid = 0x100000000ULL | lcid;
	m.u.dreq.local_comm_id = lcid;
	m.u.dreq.remote_comm_id = rcid;
	m.u.dreq.remote_qpn_eecn = 0x000456;
	cm_emit(&o, &n1, &n2, 2001290, &m);

	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_DREP;
	m.hdr.tid = 0x100000000ULL | lcid;
	m.u.drep.local_comm_id = rcid;
	m.u.drep.remote_comm_id = lcid;
	cm_emit(&o, &n2, &n1, 2001400, &m);

	if (um_pcap_close_write(o.ib) || um_pcap_close_write(o.roce)) {
		perror("uscm-demo: close traces");
		return 1;
	}
	printf("uscm-demo: wrote %s (native IB, ERF type 21) and %s (RoCEv2)\n", ib_path, roce_path);
	return 0;
}
