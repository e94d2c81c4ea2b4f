/* simf unit tests: state file, node table, QPNs, sockets, send/recv, ICRC,
 * seeded faults, link state, pcap capture, agents, multicast, fault specs. */
#define _GNU_SOURCE /* unshare */
#include "simtest.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>

ST_SCRATCH_SUITE(simf, g_scr, unsetenv("USCM_SIM_NODE"));

static struct simf *mk(enum simf_link link, unsigned n, uint64_t seed, const char *pcap)
{
	struct simf *f = simf_create(g_scr.dir, link, n, g_scr.inst, seed, pcap);

	cr_assert(f, "simf_create: %s", strerror(errno));
	return f;
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	static char buf[8192];
	size_t n;

	cr_assert(fp, "open %s", path);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = 0;
	fclose(fp);
	return buf;
}

Test(simf, create_attach_node_table)
{
	struct simf *f = mk(SIMF_LINK_IB, 3, 7, NULL), *g;
	char path[512];
	uint8_t gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0, 0, 0, 2 };

	cr_assert_eq(f->st->magic, SIMF_MAGIC);
	cr_assert_eq(f->st->version, SIMF_VERSION);
	cr_assert_eq(f->st->nnodes, 3);
	cr_assert_eq(f->st->seed, 7);
	cr_assert_eq(f->self, -1);
	g = simf_attach_node(g_scr.dir, -1);
	cr_assert(g, "attach: %s", strerror(errno));
	/* the same shared memory */
	f->st->nodes[2].lid = 3;
	f->st->lft[3] = 3;
	cr_assert_eq(g->st->nodes[2].lid, 3);
	cr_assert_str_eq(g->st->nodes[0].name, "sm");
	cr_assert_str_eq(g->st->nodes[3].name, "node3");
	cr_assert_eq(g->st->nodes[3].ip, 0x7F0A0003u);
	cr_assert_eq(g->st->nodes[2].guid, 0x0002c90300000002ull);
	cr_assert_arr_eq(g->st->nodes[2].gid, gid, 16);
	cr_assert_eq(g->st->nodes[1].port_state, SIMF_PORT_INIT); /* IB: until the SM */
	cr_assert_eq(g->st->nodes[1].pkeys[0], 0xFFFF);
	cr_assert_eq(simf_node_by_name(g, "node2"), 2);
	cr_assert_eq(simf_node_by_name(g, "sm"), 0);
	cr_assert_eq(simf_node_by_name(g, "127.10.0.3"), 3);
	cr_assert_eq(simf_node_by_name(g, "node9"), -1);
	cr_assert_eq(simf_node_by_gid(g, gid), 2);
	cr_assert_eq(simf_node_by_lid(g, 3), 2);
	cr_assert_eq(simf_node_by_lid(g, 4), -1);
	cr_assert_eq(ntohl(simf_node_addr(g, 2)), 127u << 24 | 77u << 16 | g_scr.inst << 8 | 2);
	/* hosts: ibacm format, address and name per node */
	snprintf(path, sizeof(path), "%s/hosts", g_scr.dir);
	{
		const char *h = slurp(path);

		cr_assert(strstr(h, "\n127.10.0.1 fe80::2:c903:0:1\n"), "%s", h);
		cr_assert(strstr(h, "\nnode1 fe80::2:c903:0:1\n"), "%s", h);
		cr_assert(strstr(h, "\nnode3 fe80::2:c903:0:3\n"), "%s", h);
		cr_assert_null(strstr(h, "127.10.0.254"), "the SM is not a host");
	}
	simf_detach(g);
	simf_detach(f);
}

Test(simf, roce_gids_and_ports)
{
	struct simf *f = mk(SIMF_LINK_ROCE, 2, 1, NULL);
	uint8_t gid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 10, 0, 2 };
	char path[512];

	cr_assert_arr_eq(f->st->nodes[2].gid, gid, 16);
	cr_assert_eq(f->st->nodes[2].port_state, SIMF_PORT_ACTIVE);
	cr_assert_eq(f->st->nodes[2].lid, 0);
	snprintf(path, sizeof(path), "%s/hosts", g_scr.dir);
	cr_assert(strstr(slurp(path), "\nnode2 ::ffff:127.10.0.2\n"));
	simf_detach(f);
}

Test(simf, attach_errors_and_env_node)
{
	struct simf *f, *g;
	char other[64];

	snprintf(other, sizeof(other), "%s/none", g_scr.dir);
	cr_assert_null(simf_attach_node(other, -1));
	cr_assert_eq(errno, ENOENT);
	f = mk(SIMF_LINK_IB, 2, 1, NULL);
	setenv("USCM_SIM_NODE", "node2", 1);
	g = simf_attach(g_scr.dir);
	cr_assert(g);
	cr_assert_eq(g->self, 2);
	cr_assert_eq(f->st->nodes[2].pid, getpid());
	{
		int listed = 0;

		for (int i = 0; i < SIMF_NODE_PIDS; i++)
			listed += f->st->nodes[2].pids[i] == getpid();
		cr_assert_eq(listed, 1);
	}
	simf_detach(g);
	for (int i = 0; i < SIMF_NODE_PIDS; i++)
		cr_assert_neq(f->st->nodes[2].pids[i], getpid());
	setenv("USCM_SIM_NODE", "node7", 1);
	cr_assert_null(simf_attach(g_scr.dir));
	cr_assert_eq(errno, ENODEV);
	/* a corrupt state file is refused */
	f->st->magic = 0;
	cr_assert_null(simf_attach_node(g_scr.dir, -1));
	cr_assert_eq(errno, EPROTO);
	f->st->magic = SIMF_MAGIC;
	simf_detach(f);
}

Test(simf, qpn_allocation)
{
	struct simf *f = mk(SIMF_LINK_IB, 2, 1, NULL);
	uint32_t a = simf_alloc_qpn(f, 1), b = simf_alloc_qpn(f, 1), c = simf_alloc_qpn(f, 2);

	cr_assert(a >= 2 && a < SIMF_MAX_QPN);
	cr_assert_eq(b, a + 1);
	cr_assert_neq(c, a, "nodes use distinct QPN ranges");
	cr_assert_eq(simf_qp_port(a), SIMF_QP_PORT_BASE + a);
	f->st->nodes[1].next_qpn = SIMF_MAX_QPN - 1;
	cr_assert_eq(simf_alloc_qpn(f, 1), SIMF_MAX_QPN - 1);
	cr_assert_eq(simf_alloc_qpn(f, 1), 2, "wraps to 2");
	simf_detach(f);
}

Test(simf, socket_bind)
{
	struct simf *f = mk(SIMF_LINK_IB, 2, 1, NULL);
	uint16_t port = 0, eph = 0;
	int a = simf_socket(f, 1, simf_qp_port(77), &port);
	int b, c;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	cr_assert(a >= 0, "%s", strerror(errno));
	cr_assert_eq(port, simf_qp_port(77));
	cr_assert_eq(getsockname(a, (struct sockaddr *)&sa, &sl), 0);
	cr_assert_eq(sa.sin_addr.s_addr, simf_node_addr(f, 1));
	b = simf_socket(f, 1, simf_qp_port(77), NULL);
	cr_assert_eq(b, -1);
	cr_assert_eq(errno, EADDRINUSE);
	c = simf_socket(f, 2, simf_qp_port(77), NULL); /* same QPN, other node: fine */
	cr_assert(c >= 0);
	close(c);
	c = simf_socket(f, 2, 0, &eph);
	cr_assert(c >= 0 && eph != 0);
	cr_assert(fcntl(c, F_GETFL) & O_NONBLOCK);
	cr_assert_eq(simf_socket(f, 9, 0, NULL), -1);
	close(a);
	close(c);
	simf_detach(f);
}

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

static uint64_t ns_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);

	return getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) < 0 ? 0 : c;
}

struct ns_run {
	struct simf *f;
	int skip;             /* 1: no right to unshare, 2: no SO_NETNS_COOKIE */
	uint64_t keeper, before, own, after, again;
	int bound_after;
};

/* A thread's sockets are made in the keeper's namespace before and after
 * the thread moves to a namespace of its own: simf_socket learns the
 * keeper's SO_NETNS_COOKIE from its first socket and must not trust it
 * for a thread that has moved since (the fast path). */
static void *ns_thread(void *arg)
{
	struct ns_run *r = arg;
	int a, b, c, own;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	a = simf_socket(r->f, 1, simf_qp_port(300), NULL);
	if (a < 0)
		return NULL;
	r->before = ns_cookie(a);
	if (!r->before) {
		r->skip = 2;
		close(a);
		return NULL;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		r->skip = 1;
		close(a);
		return NULL;
	}
	own = socket(AF_INET, SOCK_DGRAM, 0);
	r->own = own >= 0 ? ns_cookie(own) : 0;
	b = simf_socket(r->f, 1, simf_qp_port(301), NULL);
	c = simf_socket(r->f, 1, simf_qp_port(302), NULL);
	r->after = b >= 0 ? ns_cookie(b) : 0;
	r->again = c >= 0 ? ns_cookie(c) : 0;
	r->bound_after = b >= 0 && getsockname(b, (struct sockaddr *)&sa, &sl) == 0 &&
			 sa.sin_addr.s_addr == simf_node_addr(r->f, 1) && ntohs(sa.sin_port) == simf_qp_port(301);
	close(a);
	if (own >= 0)
		close(own);
	if (b >= 0)
		close(b);
	if (c >= 0)
		close(c);
	return NULL;
}

Test(simf, socket_in_keeper_netns_after_thread_moves)
{
	struct simf *f = mk(SIMF_LINK_IB, 2, 1, NULL);
	struct ns_run r = { .f = f };
	pthread_t t;
	int k;

	f->st->keeper_pid = getpid(); /* this process's main thread stays in its namespace */
	k = socket(AF_INET, SOCK_DGRAM, 0);
	r.keeper = ns_cookie(k);
	close(k);
	cr_assert_eq(pthread_create(&t, NULL, ns_thread, &r), 0);
	pthread_join(t, NULL);
	f->st->keeper_pid = 0;
	simf_detach(f);
	if (r.skip == 1)
		cr_skip("unshare(CLONE_NEWNET): no right to (needs root)");
	if (r.skip == 2 || !r.keeper)
		cr_skip("kernel without SO_NETNS_COOKIE");
	cr_assert_eq(r.before, r.keeper, "first socket in the keeper's namespace");
	cr_assert(r.own && r.own != r.keeper, "the thread did move");
	cr_assert_eq(r.after, r.keeper, "after the move: still the keeper's namespace");
	cr_assert_eq(r.again, r.keeper, "and the next one too");
	cr_assert(r.bound_after, "bound to the node's address and port");
}

/* CRC-32 residue: running the reflected CRC over data + ICRC (LSB first)
 * from ~0 ends on 0xDEBB20E3. */
static uint32_t roce_residue(const struct simf *f, int src, int dst, uint16_t sport, uint16_t dport,
			     const uint8_t *pkt, size_t len)
{
	uint8_t hdr[28] = { 0x45, 0xff, 0, 0, 0, 0, 0x40, 0, 0xff, 17, 0xff, 0xff };
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint32_t s = simf_node_addr(f, src), d = simf_node_addr(f, dst), crc;
	uint8_t bth[12];

	hdr[2] = (uint8_t)((28 + len) >> 8);
	hdr[3] = (uint8_t)(28 + len);
	memcpy(hdr + 12, &s, 4);
	memcpy(hdr + 16, &d, 4);
	hdr[20] = (uint8_t)(sport >> 8); hdr[21] = (uint8_t)sport;
	hdr[22] = (uint8_t)(dport >> 8); hdr[23] = (uint8_t)dport;
	hdr[24] = (uint8_t)((8 + len) >> 8); hdr[25] = (uint8_t)(8 + len);
	hdr[26] = hdr[27] = 0xff;
	memcpy(bth, pkt, 12);
	bth[4] = 0xff;
	crc = simf_crc32(0xFFFFFFFFu, ones, 8);
	crc = simf_crc32(crc, hdr, 28);
	crc = simf_crc32(crc, bth, 12);
	return simf_crc32(crc, pkt + 12, len - 12);
}

Test(simf, send_recv_counters_icrc)
{
	struct simf *f = mk(SIMF_LINK_IB, 2, 1, NULL);
	uint16_t pa, pb;
	int a = simf_socket(f, 1, simf_qp_port(1), &pa);
	int b = simf_socket(f, 2, 0, &pb);
	uint8_t pkt[300], buf[600], mad[256] = { 1, 7, 2, 3 };
	size_t len = st_ud_packet(pkt, 1, 42, SIMF_QKEY_GSI, 1, mad, sizeof(mad));
	int src;
	uint16_t sport;
	ssize_t n;
	uint32_t icrc;

	cr_assert(a >= 0 && b >= 0);
	pkt[4] = SIMF_RESV8A(5, 1);
	cr_assert_eq(simf_send(f, b, 2, 1, pa, pkt, len), (ssize_t)len);
	n = st_recv(f, a, buf, sizeof(buf), &src, &sport, 2000);
	cr_assert_eq(n, (ssize_t)len);
	cr_assert_eq(src, 2);
	cr_assert_eq(sport, pb);
	cr_assert_arr_eq(buf, pkt, len, "delivered as sent, ICRC filled in");
	icrc = simf_icrc_get(buf + len - 4);
	cr_assert_eq(icrc, simf_icrc(f, 2, 1, pb, pa, buf, len - 4));
	cr_assert_eq(roce_residue(f, 2, 1, pb, pa, buf, len), 0xDEBB20E3u);
	/* resv8a is outside the ICRC; the payload is not */
	buf[4] = 0;
	cr_assert_eq(simf_icrc(f, 2, 1, pb, pa, buf, len - 4), icrc);
	buf[40] ^= 1;
	cr_assert_neq(simf_icrc(f, 2, 1, pb, pa, buf, len - 4), icrc);
	cr_assert_eq(f->st->nodes[2].tx, 1);
	cr_assert_eq(f->st->nodes[1].rx, 1);
	cr_assert_eq(f->st->nodes[2].tx_dropped, 0);
	/* invalid sends */
	cr_assert_eq(simf_send(f, b, 2, 5, pa, pkt, len), -1);
	cr_assert_eq(simf_send(f, b, 2, 1, pa, pkt, 10), -1);
	close(a);
	close(b);
	simf_detach(f);
}

Test(simf, icrc_known_answer_and_bth)
{
	struct simf *f = mk(SIMF_LINK_ROCE, 2, 1, NULL);
	struct simf_bth b = { .opcode = 0x04, .se = 1, .mig = 1, .pad = 2, .tver = 0, .pkey = 0x8001,
			      .resv8a = SIMF_RESV8A(9, 1), .dest_qp = 0xABCDEF, .ack_req = 1,
			      .psn = 0x123456 }, c;
	uint8_t p[64];
	static const uint8_t want_bth[12] = { 0x04, 0xE0, 0x80, 0x01, 0x91, 0xAB, 0xCD, 0xEF,
					      0x80, 0x12, 0x34, 0x56 };

	simf_bth_put(p, &b);
	cr_assert_arr_eq(p, want_bth, 12);
	simf_bth_get(p, &c);
	cr_assert_eq(c.opcode, 4);
	cr_assert_eq(c.se, 1);
	cr_assert_eq(c.mig, 1);
	cr_assert_eq(c.pad, 2);
	cr_assert_eq(c.pkey, 0x8001);
	cr_assert_eq(SIMF_RESV8A_SL(c.resv8a), 9);
	cr_assert_eq(SIMF_RESV8A_GRH(c.resv8a), 1);
	cr_assert_eq(c.dest_qp, 0xABCDEF);
	cr_assert_eq(c.ack_req, 1);
	cr_assert_eq(c.psn, 0x123456);
	/* CRC-32 check value of "123456789" */
	cr_assert_eq(~simf_crc32(0xFFFFFFFFu, "123456789", 9), 0xCBF43926u);
	/* the ICRC depends on the addresses, the ports and the payload */
	for (int i = 12; i < 64; i++)
		p[i] = (uint8_t)i;
	{
		uint32_t x = simf_icrc(f, 1, 2, 10010, 10001, p, 60);

		cr_assert_neq(x, simf_icrc(f, 2, 1, 10010, 10001, p, 60));
		cr_assert_neq(x, simf_icrc(f, 1, 2, 10011, 10001, p, 60));
		simf_icrc_put(p + 60, x);
		cr_assert_eq(simf_icrc_get(p + 60), x);
		cr_assert_eq(p[60], (uint8_t)x, "least significant byte first");
	}
	simf_detach(f);
}

/* Sends n UD datagrams from node 1 to node 2 with handle f, returns the
 * bitmap of the PSNs that arrived (and their order in order[]). */
static int run_traffic(struct simf *f, int n, uint8_t *arrived, int *order, int wait_ms)
{
	uint16_t pb;
	int a = simf_socket(f, 1, 0, NULL), b = simf_socket(f, 2, 0, &pb), got = 0;
	uint8_t pkt[128], buf[256], payload[64] = { 0 };

	cr_assert(a >= 0 && b >= 0);
	memset(arrived, 0, (size_t)n);
	for (int i = 0; i < n; i++) {
		size_t len = st_ud_packet(pkt, 100, (uint32_t)i, 0x1234, 50, payload, sizeof(payload));

		cr_assert_eq(simf_send(f, a, 1, 2, pb, pkt, len), (ssize_t)len);
	}
	for (;;) {
		int src;
		ssize_t k = st_recv(f, b, buf, sizeof(buf), &src, NULL, wait_ms);
		uint32_t psn;

		if (k < 0)
			break;
		psn = (uint32_t)buf[9] << 16 | (uint32_t)buf[10] << 8 | buf[11];
		cr_assert(psn < (uint32_t)n);
		arrived[psn]++;
		if (order && got < 4 * n)
			order[got] = (int)psn;
		got++;
	}
	close(a);
	close(b);
	return got;
}

static struct simf *mk_with_rule(uint64_t seed, const char *spec)
{
	struct simf *f = mk(SIMF_LINK_ROCE, 2, seed, NULL);
	struct simf_fault r;
	char err[128];

	cr_assert_eq(simf_fault_parse(spec, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(simf_fault_set(f, &r, 1), 0);
	return f;
}

Test(simf, drop_is_seeded_and_reproducible)
{
	uint8_t a1[300], a2[300], a3[300];
	struct simf *f;
	int got1, got2, got3, lost = 0;

	f = mk_with_rule(1234, "drop=30%");
	got1 = run_traffic(f, 300, a1, NULL, 100);
	cr_assert_eq(f->st->nodes[1].tx_dropped, (uint64_t)(300 - got1));
	simf_detach(f);
	f = mk_with_rule(1234, "drop=30%");
	got2 = run_traffic(f, 300, a2, NULL, 100);
	simf_detach(f);
	f = mk_with_rule(99, "drop=30%");
	got3 = run_traffic(f, 300, a3, NULL, 100);
	simf_detach(f);
	cr_assert_eq(got1, got2);
	cr_assert_arr_eq(a1, a2, sizeof(a1), "same seed, same traffic: same drops");
	cr_assert(memcmp(a1, a3, sizeof(a1)) != 0, "another seed drops others");
	for (int i = 0; i < 300; i++)
		lost += !a1[i];
	cr_assert(lost > 50 && lost < 130, "about 30%% lost: %d", lost);
	(void)got3;
}

Test(simf, dup_and_rule_matching)
{
	uint8_t arr[50];
	struct simf *f = mk_with_rule(5, "dup=100%,qpt=ud");

	cr_assert_eq(run_traffic(f, 50, arr, NULL, 100), 100);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(arr[i], 2);
	cr_assert_eq(f->st->nodes[1].tx_duplicated, 50);
	/* a rule for another sender, a MAD class or RC does not match UD data */
	{
		struct simf_fault r[3];
		char err[64];

		cr_assert_eq(simf_fault_parse("drop=100%,node=2", &r[0], err, sizeof(err)), 0);
		cr_assert_eq(simf_fault_parse("drop=100%,class=0x07", &r[1], err, sizeof(err)), 0);
		cr_assert_eq(simf_fault_parse("drop=100%,qpt=rc", &r[2], err, sizeof(err)), 0);
		simf_fault_set(f, r, 3);
	}
	cr_assert_eq(run_traffic(f, 20, arr, NULL, 100), 20);
	simf_fault_set(f, NULL, 0);
	simf_detach(f);
}

Test(simf, mad_rules_match_class_and_attribute)
{
	struct simf *f = mk_with_rule(5, "drop=100%,class=0x07,attr=0x0010");
	uint16_t pa;
	int a = simf_socket(f, 1, simf_qp_port(1), &pa), b = simf_socket(f, 2, 0, NULL);
	uint8_t pkt[300], buf[300], mad[256] = { 1, 7, 2, 3 };
	size_t len;

	mad[16] = 0x00; mad[17] = 0x10; /* REQ: dropped */
	len = st_ud_packet(pkt, 1, 1, SIMF_QKEY_GSI, 1, mad, sizeof(mad));
	simf_send(f, b, 2, 1, pa, pkt, len);
	mad[17] = 0x13; /* REP: passes */
	len = st_ud_packet(pkt, 1, 2, SIMF_QKEY_GSI, 1, mad, sizeof(mad));
	simf_send(f, b, 2, 1, pa, pkt, len);
	cr_assert_eq(st_recv(f, a, buf, sizeof(buf), NULL, NULL, 500), (ssize_t)len);
	cr_assert_eq(buf[20 + 17], 0x13);
	cr_assert_eq(st_recv(f, a, buf, sizeof(buf), NULL, NULL, 100), -1);
	cr_assert_eq(f->st->nodes[2].tx_dropped, 1);
	close(a);
	close(b);
	simf_detach(f);
}

/* op=data / op=ack select by BTH opcode: requests (SEND, WRITE, READ
 * request, atomics, UD) versus what answers them (ACK/NAK, READ response,
 * atomic ACK). */
Test(simf, op_rules_separate_data_from_acks)
{
	static const struct { uint8_t opcode; int ack; } ops[] = {
		{ 0x04, 0 }, /* RC SEND only */
		{ 0x00, 0 }, /* RC SEND first */
		{ 0x0A, 0 }, /* RC RDMA WRITE only */
		{ 0x0C, 0 }, /* RC RDMA READ request */
		{ 0x14, 0 }, /* RC FetchAdd */
		{ 0x0D, 1 }, /* RC RDMA READ response first */
		{ 0x10, 1 }, /* RC RDMA READ response only */
		{ 0x11, 1 }, /* RC ACKNOWLEDGE */
		{ 0x12, 1 }, /* RC ATOMIC ACKNOWLEDGE */
		{ 0x24, 0 }, /* UC SEND only */
		{ 0x64, 0 }, /* UD SEND only */
	};
	const char *specs[] = { "drop=100%,op=data", "drop=100%,op=ack", "drop=100%,op=any",
				"drop=100%,qpt=rc,op=ack" };
	uint8_t pkt[64] = { 0 }, buf[128];
	struct simf_fault r;
	char err[128], fmt[128];

	cr_assert_eq(simf_fault_parse("drop=5%,qpt=rc,op=data", &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.op, SIMF_MATCH_OP_DATA);
	simf_fault_format(&r, fmt, sizeof(fmt));
	cr_assert_str_eq(fmt, "drop=5%,qpt=rc,op=data");
	cr_assert_eq(simf_fault_parse("op=ack,dup=1%", &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.op, SIMF_MATCH_OP_ACK);
	simf_fault_format(&r, fmt, sizeof(fmt));
	cr_assert_str_eq(fmt, "dup=1%,op=ack");
	cr_assert_eq(simf_fault_parse("op=any", &r, err, sizeof(err)), 0);
	cr_assert_eq(r.op, SIMF_MATCH_OP_ANY);
	cr_assert_eq(simf_fault_parse("op=nak", &r, err, sizeof(err)), -1);
	cr_assert(strstr(err, "nak"), "%s", err);

	for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
		struct simf *f = mk_with_rule(7, specs[k]);
		uint16_t pb;
		int a = simf_socket(f, 1, 0, NULL), b = simf_socket(f, 2, 0, &pb);

		cr_assert(a >= 0 && b >= 0);
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
			int want_drop;

			if (k == 0)
				want_drop = !ops[i].ack;
			else if (k == 1)
				want_drop = ops[i].ack;
			else if (k == 2)
				want_drop = 1;
			else
				want_drop = ops[i].ack && ops[i].opcode < 0x20;
			memset(pkt, 0, sizeof(pkt));
			pkt[0] = ops[i].opcode;
			pkt[7] = 0x42; /* QP 0x42: not a MAD */
			cr_assert_eq(simf_send(f, a, 1, 2, pb, pkt, sizeof(pkt)), (ssize_t)sizeof(pkt));
			cr_assert_eq(st_recv(f, b, buf, sizeof(buf), NULL, NULL, want_drop ? 20 : 500),
				     want_drop ? -1 : (ssize_t)sizeof(pkt), "%s: opcode 0x%02x %s", specs[k],
				     ops[i].opcode, want_drop ? "should be dropped" : "should pass");
		}
		close(a);
		close(b);
		simf_detach(f);
	}
}

Test(simf, delay_and_reorder)
{
	uint8_t arr[40];
	int order1[160], order2[160], inversions = 0;
	struct simf *f = mk_with_rule(77, "delay=30ms");
	uint64_t t0 = st_now_ms();
	int got;

	got = run_traffic(f, 10, arr, order1, 300);
	cr_assert_eq(got, 10);
	cr_assert(st_now_ms() - t0 >= 30, "delayed");
	for (int i = 0; i < 10; i++)
		cr_assert_eq(order1[i], i, "a constant delay keeps the order");
	cr_assert_eq(f->st->nodes[1].tx_delayed, 10);
	simf_detach(f);

	/* Which datagrams are held back is the seed's; the arrival order is
	 * that choice only while all 40 sends finish before the first held one
	 * is due. The hold is long enough (300 ms) for a loaded CI machine under
	 * ASan: with 20 ms, a slow send loop released a held datagram between
	 * two sends and the two runs' orders differed. */
	f = mk_with_rule(77, "reorder=30%:300ms");
	cr_assert_eq(run_traffic(f, 40, arr, order1, 1000), 40);
	simf_detach(f);
	f = mk_with_rule(77, "reorder=30%:300ms");
	cr_assert_eq(run_traffic(f, 40, arr, order2, 1000), 40);
	simf_detach(f);
	cr_assert_arr_eq(order1, order2, 40 * sizeof(int), "same seed: same order");
	for (int i = 1; i < 40; i++)
		inversions += order1[i] < order1[i - 1];
	cr_assert(inversions > 0, "held-back datagrams arrive later");
}

Test(simf, link_down_drops_both_directions)
{
	struct simf *f = mk(SIMF_LINK_ROCE, 2, 1, NULL);
	uint8_t arr[10];

	cr_assert_eq(simf_set_link(f, 2, 0), 0);
	cr_assert_eq(f->st->nodes[2].port_state, SIMF_PORT_DOWN);
	cr_assert_eq(run_traffic(f, 10, arr, NULL, 100), 0);
	cr_assert_eq(f->st->nodes[1].tx_dropped, 10);
	simf_set_link(f, 2, 1);
	cr_assert_eq(f->st->nodes[2].port_state, SIMF_PORT_ACTIVE, "RoCE: active at once");
	cr_assert_eq(run_traffic(f, 10, arr, NULL, 100), 10);
	simf_detach(f);
}

Test(simf, fault_spec_parse_and_format)
{
	struct simf_fault r;
	char err[128], buf[256];

	cr_assert_eq(simf_fault_parse("drop=5%,dup=1%,delay=2ms,reorder=10%:5ms,class=0x07,"
				      "attr=0x10,qpt=mad,node=2", &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.drop_ppm, 50000);
	cr_assert_eq(r.dup_ppm, 10000);
	cr_assert_eq(r.delay_ns, 2000000);
	cr_assert_eq(r.reorder_ppm, 100000);
	cr_assert_eq(r.reorder_ns, 5000000);
	cr_assert_eq(r.mgmt_class, 7);
	cr_assert_eq(r.attr_id, 0x10);
	cr_assert_eq(r.qpt, SIMF_QPT_MAD);
	cr_assert_eq(r.node, 2);
	simf_fault_format(&r, buf, sizeof(buf));
	cr_assert_str_eq(buf, "drop=5%,dup=1%,delay=2ms,reorder=10%:5ms,class=0x07,attr=0x0010,qpt=mad,node=2");
	cr_assert_eq(simf_fault_parse("drop=0.5%,delay=250us,node=node3,qpt=rc", &r, err, sizeof(err)), 0);
	cr_assert_eq(r.drop_ppm, 5000);
	cr_assert_eq(r.delay_ns, 250000);
	cr_assert_eq(r.node, 3);
	cr_assert_eq(r.qpt, SIMF_QPT_RC);
	cr_assert_eq(r.mgmt_class, 0xFF);
	cr_assert_eq(r.attr_id, 0xFFFF);
	cr_assert_eq(simf_fault_parse("drop=150%", &r, err, sizeof(err)), -1);
	cr_assert_eq(simf_fault_parse("qpt=xrc", &r, err, sizeof(err)), -1);
	cr_assert_eq(simf_fault_parse("loss=5%", &r, err, sizeof(err)), -1);
	cr_assert(strstr(err, "loss"), "%s", err);
	cr_assert_eq(simf_fault_parse("delay=3parsecs", &r, err, sizeof(err)), -1);
}

Test(simf, agents_follow_ib_mad_rules)
{
	struct simf *f = mk(SIMF_LINK_IB, 2, 1, NULL);
	struct simf_agent a = { .pid = getpid(), .port = 20000, .qpn = 1, .mgmt_class = 7,
				.class_version = 2 }, out;
	pid_t child;
	int s1, s2;

	a.methods[0] = 1u << 3; /* Send */
	s1 = simf_agent_add(f, 1, &a);
	cr_assert(s1 >= 0);
	a.port = 20001;
	cr_assert_eq(simf_agent_add(f, 1, &a), -1, "one agent per class/version/method");
	cr_assert_eq(errno, EBUSY);
	a.class_version = 1;
	cr_assert(simf_agent_add(f, 1, &a) >= 0, "another class version is fine");
	cr_assert_eq(simf_agent_find(f, 1, 1, 7, 2, 3, NULL, &out), s1);
	cr_assert_eq(out.port, 20000);
	cr_assert_eq(simf_agent_find(f, 1, 1, 7, 2, 1, NULL, &out), -1, "Get not served");
	cr_assert_eq(simf_agent_find(f, 2, 1, 7, 2, 3, NULL, &out), -1, "other node");
	/* a client-only agent (no methods) never conflicts */
	memset(a.methods, 0, sizeof(a.methods));
	a.class_version = 2;
	cr_assert(simf_agent_add(f, 1, &a) >= 0);
	simf_agent_del(f, 1, s1);
	cr_assert_eq(simf_agent_find(f, 1, 1, 7, 2, 3, NULL, &out), -1);
	/* entries of dead processes are reclaimed */
	child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	a.pid = child;
	a.methods[0] = 1u << 3;
	s2 = simf_agent_add(f, 2, &a);
	cr_assert(s2 >= 0);
	cr_assert_eq(simf_agent_find(f, 2, 1, 7, 2, 3, NULL, &out), -1);
	cr_assert_eq(f->st->nodes[2].agents[s2].pid, 0);
	simf_detach(f);
}

Test(simf, multicast_tables)
{
	struct simf *f = mk(SIMF_LINK_ROCE, 3, 1, NULL);
	uint8_t mgid[16] = { 0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 224, 0, 0, 9 };
	struct simf_mcg_qp t[8];

	cr_assert_eq(simf_mcast_find(f, mgid, 0), -1);
	cr_assert_eq(simf_mcast_attach(f, 1, mgid, 0, 0x41), 0);
	cr_assert_eq(simf_mcast_attach(f, 2, mgid, 0, 0x141), 0);
	cr_assert_eq(simf_mcast_attach(f, 2, mgid, 0, 0x141), 0, "idempotent");
	cr_assert(simf_mcast_find(f, mgid, 0) >= 0);
	cr_assert_eq(simf_mcast_targets(f, mgid, 0, t, 8), 2);
	cr_assert_eq(simf_mcast_detach(f, 1, mgid, 0, 0x41), 0);
	cr_assert_eq(simf_mcast_detach(f, 1, mgid, 0, 0x41), -1);
	cr_assert_eq(simf_mcast_targets(f, mgid, 0, t, 8), 1);
	cr_assert_eq(t[0].node, 2);
	cr_assert_eq(t[0].qpn, 0x141);
	cr_assert_eq(simf_mcast_detach(f, 2, mgid, 0, 0x141), 0);
	cr_assert_eq(simf_mcast_find(f, mgid, 0), -1, "RoCE group gone with its last QP");
	simf_detach(f);
	/* IB: only SA members receive */
	f = simf_create(g_scr.dir, SIMF_LINK_IB, 3, g_scr.inst, 1, NULL);
	cr_assert_eq(simf_mcast_attach(f, 1, mgid, 0xC001, 0x41), 0);
	cr_assert_eq(simf_mcast_targets(f, NULL, 0xC001, t, 8), 0);
	f->st->mcgs[simf_mcast_find(f, mgid, 0)].join_state[1] = 1;
	cr_assert_eq(simf_mcast_targets(f, NULL, 0xC001, t, 8), 1);
	simf_detach(f);
}

/* ---- pcap ----------------------------------------------------------------- */

static void send_mads(struct simf *f)
{
	uint16_t pa;
	int a = simf_socket(f, 1, simf_qp_port(1), &pa), b = simf_socket(f, 2, 0, NULL);
	uint8_t pkt[300], buf[300], mad[256] = { 1, 3, 2, 1 }; /* SA Get */
	size_t len;

	f->st->nodes[1].lid = 2;
	f->st->nodes[2].lid = 3;
	mad[16] = 0x00; mad[17] = 0x35;  /* PathRecord */
	mad[8] = 0x12; mad[15] = 0x34;   /* TID */
	len = st_ud_packet(pkt, 1, 9, SIMF_QKEY_GSI, 1, mad, sizeof(mad));
	pkt[4] = SIMF_RESV8A(3, 0);
	cr_assert_eq(simf_send(f, b, 2, 1, pa, pkt, len), (ssize_t)len);
	cr_assert_eq(st_recv(f, a, buf, sizeof(buf), NULL, NULL, 1000), (ssize_t)len);
	close(a);
	close(b);
}

static void check_pcap(enum simf_link link)
{
	char pcap[512], *out = NULL;
	struct simf *f;
	int rc;

	snprintf(pcap, sizeof(pcap), "%s/fabric.pcap", g_scr.dir);
	f = mk(link, 2, 1, pcap);
	send_mads(f);
	simf_detach(f);
	{
		struct stat sb;

		cr_assert_eq(stat(pcap, &sb), 0);
		cr_assert_eq(sb.st_size, 24 + 16 + (link == SIMF_LINK_IB ? 16 + 8 + 280 + 2 : 14 + 28 + 280));
	}
	if (!st_have("tshark")) {
		tf_warn_missing("tshark not installed: decode check skipped");
		return;
	}
	rc = st_sh(&out, "tshark -r '%s' -T fields -e infiniband.mad.mgmtclass -e infiniband.mad.method "
			 "-e infiniband.mad.attributeid -e infiniband.bth.destqp -e infiniband.lrh.dlid "
			 "-e infiniband.lrh.slid -e infiniband.lrh.sl -e ip.dst -e _ws.malformed 2>/dev/null",
		   pcap);
	cr_assert_eq(rc, 0);
	if (link == SIMF_LINK_IB)
		cr_assert_str_eq(out, "0x03\t0x01\t0x0035\t0x000001\t2\t3\t3\t\t\n", "%s", out);
	else
		cr_assert_str_eq(out, "0x03\t0x01\t0x0035\t0x000001\t\t\t\t127.10.0.1\t\n", "%s", out);
	free(out);
	/* the repository's own decoder checks ICRC (and VCRC) */
	{
		char dec[600];

		snprintf(dec, sizeof(dec), "%s/uscm-decode", st_bin());
		if (access(dec, X_OK) == 0) {
			rc = st_sh(&out, "'%s' '%s' 2>&1", dec, pcap);
			cr_assert(strstr(out, "0 malformed, 0 bad ICRC"), "%s", out);
			free(out);
		}
	}
}

Test(simf, pcap_rocev2_decodes)
{
	check_pcap(SIMF_LINK_ROCE);
}

Test(simf, pcap_ib_erf_decodes)
{
	check_pcap(SIMF_LINK_IB);
}

Test(simf, pcap_concurrent_appends_stay_whole)
{
	char pcap[512], *out = NULL;
	struct simf *f;
	pid_t kids[3];

	snprintf(pcap, sizeof(pcap), "%s/fabric.pcap", g_scr.dir);
	f = mk(SIMF_LINK_ROCE, 2, 1, pcap);
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			struct simf *g = simf_attach_node(g_scr.dir, -1);
			uint8_t arr[100];

			if (!g)
				_exit(1);
			run_traffic(g, 100, arr, NULL, 50);
			simf_detach(g);
			_exit(0);
		}
	}
	for (int k = 0; k < 3; k++) {
		int st;

		waitpid(kids[k], &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	simf_detach(f);
	if (!st_have("tshark")) {
		tf_warn_missing("tshark not installed: decode check skipped");
		return;
	}
	cr_assert_eq(st_sh(&out, "tshark -r '%s' -T fields -e frame.len 2>/dev/null | sort | uniq -c", pcap), 0);
	cr_assert_str_eq(out, "    300 130\n", "%s", out);
	free(out);
}
