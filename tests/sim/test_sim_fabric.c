/* Integration: `uscm-sim` starts a fabric with its SM/SA process; a raw GSI
 * client built on simf (no umad, no uscm code) talks to the SA through the
 * fabric; link / kill / status / run / stop. Every test uses its own fabric
 * directory and stops its fabric in .fini; the SM also watches the test
 * process (USCM_SIM_WATCH_PID) so a crashed test leaves nothing behind. */
#include "simtest.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

static char *g_dir;
static struct simf *g_f;
static int g_fd = -1;

static void setup(void)
{
	g_dir = st_fixture_dir();
}

static void teardown(void)
{
	pid_t keeper = 0;

	if (g_fd >= 0)
		close(g_fd);
	g_fd = -1;
	if (g_f) {
		keeper = g_f->st->keeper_pid;
		simf_detach(g_f);
		g_f = NULL;
	}
	st_sh(NULL, "'%s/uscm-sim' stop --dir '%s' >/dev/null 2>&1", st_bin(), g_dir);
	if (simf_pid_alive(keeper))
		kill(keeper, SIGKILL);
	st_rmrf(g_dir);
	free(g_dir);
}

TestSuite(fabric, .init = setup, .fini = teardown, .timeout = 60);

static void start(const char *args)
{
	char *out = NULL;
	char want[600];
	int rc = st_sh(&out, "'%s/uscm-sim' start --dir '%s' --no-uscmd %s 2>&1", st_bin(), g_dir, args);

	cr_assert_eq(rc, 0, "uscm-sim start: %s", out);
	snprintf(want, sizeof(want), "export USCM_SIM_DIR=%s\n", g_dir);
	cr_assert(strstr(out, want), "%s", out);
	/* the library's hosts file comes by the generic variable: lib/ never
	 * reads USCM_SIM_DIR */
	snprintf(want, sizeof(want), "export USCM_HOSTS=%s/hosts\n", g_dir);
	cr_assert(strstr(out, want), "%s", out);
	cr_assert(strstr(out, "export LD_LIBRARY_PATH=/"), "%s", out);
	cr_assert(strstr(out, "/sim/lib"), "%s", out);
	free(out);
	g_f = simf_attach_node(g_dir, -1);
	cr_assert(g_f, "attach: %s", strerror(errno));
}

/* ---- a raw GSI client ---------------------------------------------------- */

static uint64_t g_tid = 0x5100000000000001ull;
static int g_timeout_ms = 3000;
static uint32_t g_lose_seg; /* a segment the client "loses" once */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

struct sa_resp {
	uint8_t method;
	uint16_t status;
	uint16_t attr_offset;
	uint8_t hdr[56];
	uint8_t data[65536];
	size_t dlen;          /* record bytes */
	int segments;
};

static int client_socket(int node)
{
	if (g_fd < 0) {
		g_fd = simf_socket(g_f, node, 0, NULL);
		cr_assert(g_fd >= 0, "%s", strerror(errno));
	}
	return g_fd;
}

static void send_raw_mad(int from, int to, uint16_t port, const uint8_t *mad, uint32_t qkey)
{
	uint8_t pkt[12 + 8 + 256 + 4];
	size_t len = st_ud_packet(pkt, 1, 1, qkey, 1, mad, 256);

	cr_assert_eq(simf_send(g_f, client_socket(from), from, to, port, pkt, len), (ssize_t)len);
}

static uint16_t sa_port(uint8_t method)
{
	struct simf_agent a;
	int sm = simf_node_by_lid(g_f, 1);

	cr_assert_eq(sm, 0, "LID 1 is the SM");
	cr_assert(simf_agent_find(g_f, sm, 1, 0x03, 2, method, NULL, &a) >= 0,
		  "the SA is registered in node 0's agent table");
	return a.port;
}

/* One SA request from node `from`; the answer, RMPP reassembled (with an
 * ACK per segment). Returns 0, or -1 on timeout. */
static int sa_call_v(int from, uint8_t method, uint16_t attr, uint64_t mask, const uint8_t *rec,
		     size_t reclen, uint8_t class_version, uint32_t qkey, struct sa_resp *r)
{
	uint8_t mad[256] = { 0 }, buf[2048];
	uint16_t port = sa_port(method == 0x12 || method == 0x02 || method == 0x15 ? method : 1);
	uint64_t tid = g_tid++;
	uint64_t deadline = st_now_ms() + (uint64_t)g_timeout_ms;
	int expect = 1;

	mad[0] = 1;
	mad[1] = 0x03;
	mad[2] = class_version;
	mad[3] = method;
	put64(mad + 8, tid);
	put16(mad + 16, attr);
	put64(mad + 48, mask);
	if (rec)
		memcpy(mad + 56, rec, reclen);
	send_raw_mad(from, 0, port, mad, qkey);
	memset(r, 0, sizeof(*r));
	while (st_now_ms() < deadline) {
		int src;
		uint16_t sport;
		ssize_t n = st_recv(g_f, g_fd, buf, sizeof(buf), &src, &sport, 200);
		const uint8_t *m = buf + 20;

		if (n < 0)
			continue;
		cr_assert_eq(n, 280);
		cr_assert_eq(src, 0, "answers come from the SM node");
		cr_assert_eq(get32(buf + 12), 0x80010000u, "GSI Q_Key");
		cr_assert_eq(get32(buf + 16) & 0xFFFFFF, 1, "from QP1");
		if (get64(m + 8) != tid)
			continue;
		r->method = m[3];
		r->status = get16(m + 4);
		r->attr_offset = get16(m + 44);
		if (!(m[26] & 1)) { /* no RMPP */
			memcpy(r->hdr, m, 56);
			memcpy(r->data, m + 56, 200);
			r->dlen = 200;
			return 0;
		}
		{
			uint32_t seg = get32(m + 28), paylen = get32(m + 32);
			uint8_t ack[256];

			cr_assert_eq(m[24], 1, "RMPP version");
			cr_assert_eq(m[25], 1, "DATA");
			if (seg == g_lose_seg) {
				g_lose_seg = 0;
				continue;
			}
			if (seg != (uint32_t)expect)
				continue;
			if (seg == 1)
				memcpy(r->hdr, m, 56);
			memcpy(r->data + (seg - 1) * 200, m + 56, 200);
			r->segments = (int)seg;
			expect++;
			memcpy(ack, m, 256);
			memset(ack + 56, 0, 200);
			ack[3] ^= 0x80; /* as the kernel: the ACK of a GetTableResp is a GetTable */
			ack[25] = 2; /* ACK */
			ack[26] = 1;
			put32(ack + 28, seg);
			put32(ack + 32, seg + 4); /* NewWindowLast */
			send_raw_mad(from, src, sport, ack, 0x80010000u);
			if (m[26] & 4) { /* Last */
				r->dlen = (seg - 1) * 200 + (paylen - 20);
				return 0;
			}
		}
	}
	return -1;
}

static int sa_call(int from, uint8_t method, uint16_t attr, uint64_t mask, const uint8_t *rec,
		   size_t reclen, struct sa_resp *r)
{
	return sa_call_v(from, method, attr, mask, rec, reclen, 2, 0x80010000u, r);
}

static struct sa_resp g_r; /* big: not on the stack */

/* ---- tests ---------------------------------------------------------------- */

Test(fabric, ib_comes_up_with_lids)
{
	char path[600];
	FILE *fp;
	char hosts[2048] = "";

	start("--nodes 2 --link ib");
	cr_assert_eq(g_f->st->link, SIMF_LINK_IB);
	cr_assert_eq(g_f->st->nnodes, 2);
	for (int i = 0; i <= 2; i++) {
		cr_assert_eq(g_f->st->nodes[i].port_state, SIMF_PORT_ACTIVE, "node %d", i);
		cr_assert_eq(g_f->st->nodes[i].lid, i + 1);
		cr_assert_eq(g_f->st->nodes[i].sm_lid, 1);
		cr_assert_eq(simf_node_by_lid(g_f, (uint16_t)(i + 1)), i);
	}
	cr_assert(simf_pid_alive(g_f->st->keeper_pid), "SM running");
	snprintf(path, sizeof(path), "%s/hosts", g_dir);
	fp = fopen(path, "r");
	cr_assert(fp);
	cr_assert(fread(hosts, 1, sizeof(hosts) - 1, fp) > 0);
	fclose(fp);
	cr_assert(strstr(hosts, "127.10.0.1 fe80::2:c903:0:1\nnode1 fe80::2:c903:0:1\n"), "%s", hosts);
	cr_assert(strstr(hosts, "127.10.0.2 fe80::2:c903:0:2\nnode2 fe80::2:c903:0:2\n"), "%s", hosts);
}

Test(fabric, path_record_get)
{
	uint8_t pr[64] = { 0 };
	const uint8_t *p;

	start("--nodes 2 --link ib");
	memcpy(pr + 8, g_f->st->nodes[1].gid, 16);   /* DGID node1 */
	memcpy(pr + 24, g_f->st->nodes[2].gid, 16);  /* SGID node2 */
	pr[49] = 0x80 | 1;                            /* Reversible, NumbPath 1 */
	put16(pr + 50, 0xFFFF);
	put64(pr, 0x0000000001060000ull | 4420);       /* ServiceID */
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (3ull << 0) | (1ull << 2) | (1ull << 3) | (1ull << 11) |
					      (1ull << 12) | (1ull << 13), pr, 64, &g_r), 0,
		     "no answer from the SA");
	cr_assert_eq(g_r.method, 0x81);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.attr_offset, 8);
	p = g_r.data;
	cr_assert_eq(get64(p), 0x0000000001061144ull, "service ID echoed");
	cr_assert_arr_eq(p + 8, g_f->st->nodes[1].gid, 16);
	cr_assert_arr_eq(p + 24, g_f->st->nodes[2].gid, 16);
	cr_assert_eq(get16(p + 40), 2, "DLID");
	cr_assert_eq(get16(p + 42), 3, "SLID");
	cr_assert_eq(p[47], 0, "hop limit");
	cr_assert_eq(p[49] & 0x80, 0x80, "reversible");
	cr_assert_eq(get16(p + 50), 0xFFFF);
	cr_assert_eq(p[53] & 0xF, 0, "SL");
	cr_assert_eq(p[54], 0x80 | 5, "MTU 4096 (the ports' MTUCap, as OpenSM), selector exactly");
	cr_assert_eq(p[55], 0x80 | 16, "rate 100 Gb/s");
	cr_assert_eq(p[56], 0x80 | 14, "packet lifetime");
	cr_assert_geq(g_f->st->sa_queries, 1);
}

Test(fabric, path_record_errors)
{
	uint8_t pr[64] = { 0 };

	start("--nodes 2 --link ib");
	/* unknown DGID */
	memset(pr + 8, 0xEE, 16);
	memcpy(pr + 24, g_f->st->nodes[2].gid, 16);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 2) | (1ull << 3), pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0500, "ERR_REQ_INVALID_GID: 0x%04x", g_r.status);
	/* no source at all for a Get */
	memcpy(pr + 8, g_f->st->nodes[1].gid, 16);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, 1ull << 2, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0600, "insufficient components: 0x%04x", g_r.status);
	/* by LIDs: an unassigned DLID has no path */
	put16(pr + 40, 77);
	put16(pr + 42, 3);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 4) | (1ull << 5), pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300, "no records: 0x%04x", g_r.status);
	put16(pr + 40, 2);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 4) | (1ull << 5), pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(get16(g_r.data + 40), 2);
	/* a partition nobody is in */
	put16(pr + 50, 0x8123);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 4) | (1ull << 5) | (1ull << 13), pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300);
	/* an MTU the fabric cannot give */
	pr[54] = (0 << 6) | 5; /* greater than 4096 */
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 4) | (1ull << 5) | (1ull << 16) | (1ull << 17),
			     pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300);
	/* class version 1, an unknown attribute, the wrong Q_Key (dropped) */
	cr_assert_eq(sa_call_v(2, 0x01, 0x0035, 0, pr, 64, 1, 0x80010000u, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0004, "bad version");
	cr_assert_eq(sa_call(2, 0x01, 0x0099, 0, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x000C, "attribute not supported");
	{
		uint64_t q = g_f->st->sa_queries;
		uint8_t mad[256] = { 1, 3, 2, 1 };

		mad[17] = 0x35;
		send_raw_mad(2, 0, sa_port(1), mad, 0x1234);
		usleep(100000);
		cr_assert_eq(g_f->st->sa_queries, q, "a bad Q_Key never reaches the SA");
	}
}

/* The built-in SA's partitions follow OpenSM's rule: a path needs a P_Key
 * both ports hold, one of them as a full member, and carries it. */
Test(fabric, path_record_partitions)
{
	uint8_t pr[64] = { 0 };
	const uint64_t lids = (1ull << 4) | (1ull << 5), pk = 1ull << 13;

	start("--nodes 3 --link ib");
	simf_lock(g_f);
	/* node2: 0x8001 full, 0x0002 limited; node3: 0x0001 limited, 0x0002
	 * limited; no default partition for either */
	g_f->st->nodes[2].pkeys[0] = 0x8001;
	g_f->st->nodes[2].pkeys[1] = 0x0002;
	g_f->st->nodes[3].pkeys[0] = 0x0002;
	g_f->st->nodes[3].pkeys[1] = 0x0001;
	simf_unlock(g_f);
	put16(pr + 40, 4); /* DLID node3 */
	put16(pr + 42, 3); /* SLID node2 */
	/* 0x0001: node2 full, node3 limited: a path, with the key asked */
	put16(pr + 50, 0x8001);
	cr_assert_eq(sa_call(1, 0x01, 0x0035, lids | pk, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0, "0x%04x", g_r.status);
	cr_assert_eq(get16(g_r.data + 50), 0x8001);
	/* 0x0002: both limited, no path */
	put16(pr + 50, 0x0002);
	cr_assert_eq(sa_call(1, 0x01, 0x0035, lids | pk, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300, "two limited members: 0x%04x", g_r.status);
	/* the default partition: neither holds it */
	put16(pr + 50, 0xFFFF);
	cr_assert_eq(sa_call(1, 0x01, 0x0035, lids | pk, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300, "0xFFFF: 0x%04x", g_r.status);
	/* no P_Key asked: the first of node2's keys node3 shares so */
	cr_assert_eq(sa_call(1, 0x01, 0x0035, lids, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0, "0x%04x", g_r.status);
	cr_assert_eq(get16(g_r.data + 50), 0x8001, "P_Key 0x%04x", get16(g_r.data + 50));
	/* and from node3's side: its 0x0001 (limited) with node2's full key */
	put16(pr + 40, 3);
	put16(pr + 42, 4);
	cr_assert_eq(sa_call(1, 0x01, 0x0035, lids, pr, 64, &g_r), 0);
	cr_assert_eq(g_r.status, 0, "0x%04x", g_r.status);
	cr_assert_eq(get16(g_r.data + 50), 0x0001, "P_Key 0x%04x", get16(g_r.data + 50));
}

Test(fabric, path_record_get_table_rmpp)
{
	int seen[4][4] = { { 0 } };

	start("--nodes 3 --link ib");
	cr_assert_eq(sa_call(1, 0x12, 0x0035, 0, NULL, 0, &g_r), 0, "no table");
	cr_assert_eq(g_r.method, 0x92);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.attr_offset, 8);
	cr_assert_eq(g_r.dlen, 16 * 64, "4x4 paths: %zu bytes", g_r.dlen);
	cr_assert_eq(g_r.segments, 6);
	for (int i = 0; i < 16; i++) {
		int d = simf_node_by_lid(g_f, get16(g_r.data + i * 64 + 40));
		int s = simf_node_by_lid(g_f, get16(g_r.data + i * 64 + 42));

		cr_assert(d >= 0 && s >= 0);
		seen[s][d]++;
		cr_assert_arr_eq(g_r.data + i * 64 + 8, g_f->st->nodes[d].gid, 16);
	}
	for (int s = 0; s < 4; s++)
		for (int d = 0; d < 4; d++)
			cr_assert_eq(seen[s][d], 1);
	/* by SGID only: the four paths from node1 */
	{
		uint8_t pr[64] = { 0 };

		memcpy(pr + 24, g_f->st->nodes[1].gid, 16);
		cr_assert_eq(sa_call(1, 0x12, 0x0035, 1ull << 3, pr, 64, &g_r), 0);
		cr_assert_eq(g_r.dlen, 4 * 64);
		cr_assert_eq(g_r.segments, 2);
	}
	cr_assert_geq(g_f->st->sa_queries, 2);
}

Test(fabric, mcmember_join_get_leave)
{
	uint8_t mc[56] = { 0 };
	uint64_t create = (1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 6) | (1ull << 7) |
			  (1ull << 12) | (1ull << 13) | (1ull << 16);
	uint16_t mlid;
	uint8_t mgid[16];

	start("--nodes 2 --link ib");
	/* SA-assigned MGID: MGID zero */
	memcpy(mc + 16, g_f->st->nodes[1].gid, 16);
	put32(mc + 32, 0x01234567);
	put16(mc + 40, 0xFFFF);
	mc[48] = 1; /* full member */
	/* too few components to create */
	cr_assert_eq(sa_call(1, 0x02, 0x0038, (1ull << 1) | (1ull << 16), mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0600, "0x%04x", g_r.status);
	cr_assert_eq(sa_call(1, 0x02, 0x0038, create, mc, 56, &g_r), 0);
	cr_assert_eq(g_r.method, 0x81);
	cr_assert_eq(g_r.status, 0, "0x%04x", g_r.status);
	mlid = get16(g_r.data + 36);
	cr_assert_eq(mlid, 0xC000);
	memcpy(mgid, g_r.data, 16);
	cr_assert_eq(mgid[0], 0xFF);
	cr_assert_eq(mgid[1] & 0xF0, 0x10);
	cr_assert_eq(mgid[2], 0xA0);
	cr_assert_eq(mgid[3], 0x1B);
	cr_assert_eq(get32(g_r.data + 32), 0x01234567);
	cr_assert_eq(g_r.data[38], 0x80 | 4);
	cr_assert_eq(g_r.data[48] & 0xF, 1);
	/* node2 joins the same group as a non-member; a wrong Q_Key is refused */
	memcpy(mc, mgid, 16);
	memcpy(mc + 16, g_f->st->nodes[2].gid, 16);
	mc[48] = 2;
	put32(mc + 32, 0x0BADBAD0);
	cr_assert_eq(sa_call(2, 0x02, 0x0038, create, mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0200, "0x%04x", g_r.status);
	put32(mc + 32, 0x01234567);
	cr_assert_eq(sa_call(2, 0x02, 0x0038, create, mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(get16(g_r.data + 36), mlid);
	/* the verbs side sees the group and its members */
	{
		int g = simf_mcast_find(g_f, mgid, 0);

		cr_assert(g >= 0);
		cr_assert_eq(g_f->st->mcgs[g].mlid, mlid);
		cr_assert_eq(g_f->st->mcgs[g].join_state[1], 1);
		cr_assert_eq(g_f->st->mcgs[g].join_state[2], 2);
	}
	/* GetTable by MGID: one record per member */
	cr_assert_eq(sa_call(1, 0x12, 0x0038, 1ull << 0, mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.attr_offset, 7);
	cr_assert_eq(g_r.dlen, 2 * 56);
	/* leave both; the group goes away */
	mc[48] = 2;
	cr_assert_eq(sa_call(2, 0x15, 0x0038, (1ull << 0) | (1ull << 1) | (1ull << 16), mc, 56, &g_r), 0);
	cr_assert_eq(g_r.method, 0x95);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(sa_call(2, 0x15, 0x0038, (1ull << 0) | (1ull << 1) | (1ull << 16), mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0200, "not a member any more");
	memcpy(mc + 16, g_f->st->nodes[1].gid, 16);
	mc[48] = 1;
	cr_assert_eq(sa_call(1, 0x15, 0x0038, (1ull << 0) | (1ull << 1) | (1ull << 16), mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(simf_mcast_find(g_f, mgid, 0), -1);
	cr_assert_eq(sa_call(1, 0x01, 0x0038, 1ull << 0, mc, 56, &g_r), 0);
	cr_assert_eq(g_r.status, 0x0300);
}

Test(fabric, class_port_info_node_and_port_records)
{
	start("--nodes 2 --link ib");
	cr_assert_eq(sa_call(1, 0x01, 0x0001, 0, NULL, 0, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.data[0], 1);
	cr_assert_eq(g_r.data[1], 2);
	cr_assert(get16(g_r.data + 2) & (1u << 9), "UD multicast supported");
	cr_assert_eq(sa_call(1, 0x12, 0x0011, 0, NULL, 0, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.attr_offset, 14);
	cr_assert_eq(g_r.dlen, 3 * 112);
	cr_assert_eq(get64(g_r.data + 112 + 16), 0x0002c90300000001ull, "NodeGUID of node1");
	cr_assert_str_eq((const char *)g_r.data + 112 + 44, "uscm-sim node1");
	{
		uint8_t nr[112] = { 0 };

		put16(nr, 3);
		cr_assert_eq(sa_call(1, 0x01, 0x0011, 1ull << 0, nr, sizeof(nr), &g_r), 0);
		cr_assert_eq(g_r.status, 0);
		cr_assert_eq(get16(g_r.data), 3);
	}
	cr_assert_eq(sa_call(1, 0x12, 0x0012, 0, NULL, 0, &g_r), 0);
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.attr_offset, 9);
	cr_assert_eq(g_r.dlen, 3 * 72);
	cr_assert_eq(get16(g_r.data + 72 + 4 + 16), 2, "PortInfo.LID of node1");
	cr_assert_eq(g_r.data[72 + 4 + 32] & 0xF, 4, "PortState ACTIVE");
}

Test(fabric, link_down_up_and_kill)
{
	char *out = NULL;
	pid_t child;
	int status;

	start("--nodes 2 --link ib");
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' link --dir '%s' node2 down", st_bin(), g_dir), 0);
	cr_assert_eq(g_f->st->nodes[2].port_state, SIMF_PORT_DOWN);
	cr_assert_eq(g_f->st->nodes[2].link_up, 0);
	g_timeout_ms = 300;
	cr_assert_eq(sa_call_v(2, 0x01, 0x0001, 0, NULL, 0, 2, 0x80010000u, &g_r), -1, "no SA behind a down link");
	g_timeout_ms = 3000;
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' link --dir '%s' node2 up", st_bin(), g_dir), 0);
	for (int i = 0; i < 100 && g_f->st->nodes[2].port_state != SIMF_PORT_ACTIVE; i++)
		usleep(10000);
	cr_assert_eq(g_f->st->nodes[2].port_state, SIMF_PORT_ACTIVE, "the SM brings it back");
	cr_assert_eq(g_f->st->nodes[2].lid, 3, "with the same LID");
	/* a process attached as node1 is killed by `uscm-sim kill node1` */
	child = fork();
	if (child == 0) {
		struct simf *f;

		setenv("USCM_SIM_NODE", "node1", 1);
		f = simf_attach(g_dir);
		if (!f)
			_exit(3);
		pause();
		_exit(0);
	}
	for (int i = 0; i < 200; i++) {
		int listed = 0;

		for (int k = 0; k < SIMF_NODE_PIDS; k++)
			listed |= g_f->st->nodes[1].pids[k] == child;
		if (listed)
			break;
		usleep(5000);
	}
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' kill --dir '%s' node1", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "killed"), "%s", out);
	free(out);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int k = 0; k < SIMF_NODE_PIDS; k++)
		cr_assert_neq(g_f->st->nodes[1].pids[k], child);
}

Test(fabric, status_and_faults_commands)
{
	char *out = NULL;

	start("--nodes 2 --link ib --seed 42 --fault drop=5%,qpt=rc");
	cr_assert_eq(g_f->st->seed, 42);
	cr_assert_eq(g_f->st->faults[0].drop_ppm, 50000);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' fault --dir '%s' 'dup=1%%,class=0x07;delay=1ms'", st_bin(),
			   g_dir), 0);
	free(out);
	cr_assert_eq(g_f->st->faults[0].dup_ppm, 10000);
	cr_assert_eq(g_f->st->faults[1].delay_ns, 1000000);
	cr_assert_eq(g_f->st->faults[2].used, 0);
	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' fault --dir '%s' bogus=1 2>/dev/null", st_bin(), g_dir), 0);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "link ib, 2 nodes"), "%s", out);
	cr_assert(strstr(out, "seed 42"), "%s", out);
	cr_assert(strstr(out, "dup=1%,class=0x07"), "%s", out);
	cr_assert(strstr(out, "node2   127.10.0.2   3      ACTIVE"), "%s", out);
	free(out);
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' fault --dir '%s' clear", st_bin(), g_dir), 0);
	cr_assert_eq(g_f->st->faults[0].used, 0);
	/* a second fabric in the same directory is refused */
	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' start --dir '%s' 2>/dev/null", st_bin(), g_dir), 0);
}

Test(fabric, stop_cleans_up)
{
	pid_t sm;
	struct stat sb;

	start("--nodes 2 --link ib");
	sm = g_f->st->keeper_pid;
	simf_detach(g_f);
	g_f = NULL;
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' stop --dir '%s'", st_bin(), g_dir), 0);
	cr_assert(!simf_pid_alive(sm), "the SM is gone");
	cr_assert(stat(g_dir, &sb) < 0, "the fabric directory is gone");
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' status --dir '%s' 2>/dev/null", st_bin(), g_dir), 1);
	mkdir(g_dir, 0700); /* for the teardown */
}

Test(fabric, roce_has_no_sa)
{
	start("--nodes 3 --link roce");
	cr_assert_eq(g_f->st->link, SIMF_LINK_ROCE);
	for (int i = 1; i <= 3; i++) {
		cr_assert_eq(g_f->st->nodes[i].port_state, SIMF_PORT_ACTIVE);
		cr_assert_eq(g_f->st->nodes[i].lid, 0);
	}
	cr_assert(simf_pid_alive(g_f->st->keeper_pid), "the keeper holds the instance");
	cr_assert_eq(simf_agent_find(g_f, 0, 1, 0x03, 2, 1, NULL, NULL), -1, "no SA agent");
}

Test(fabric, run_starts_runs_stops)
{
	char *out = NULL;
	struct stat sb;
	int rc;

	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --nodes 1 --no-uscmd --node node1 -- sh -c "
			 "'echo $USCM_SIM_DIR $USCM_SIM_NODE; cat $USCM_SIM_DIR/hosts; exit 7'",
		   st_bin(), g_dir);
	cr_assert_eq(rc, 7, "the command's status: %d %s", rc, out);
	cr_assert(strstr(out, g_dir), "%s", out);
	cr_assert(strstr(out, " node1\n"), "%s", out);
	cr_assert(strstr(out, "node1 fe80::2:c903:0:1"), "%s", out);
	free(out);
	cr_assert(stat(g_dir, &sb) < 0, "stopped afterwards");
	mkdir(g_dir, 0700);
	/* on a running fabric, run only sets the environment */
	start("--nodes 2");
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node2 -- sh -c 'echo $USCM_SIM_NODE $LD_LIBRARY_PATH'",
		   st_bin(), g_dir);
	cr_assert_eq(rc, 0);
	cr_assert(strstr(out, "node2 /"), "%s", out);
	cr_assert(strstr(out, "/sim/lib"), "%s", out);
	free(out);
	cr_assert(simf_pid_alive(g_f->st->keeper_pid), "still running");
}

/* LD_LIBRARY_PATH of a program run on the fabric: the drop-ins, then uscm's
 * librdmacm when it is built (build/lib, ../lib from uscm-sim), then what
 * the caller had; the dynamic linker resolves an rdma_cm program to them. */
Test(fabric, run_puts_drop_ins_and_uscm_librdmacm_first)
{
	char simlib[PATH_MAX], lib[PATH_MAX], p[PATH_MAX + 64], want[3 * PATH_MAX], *out = NULL;
	int have_rdmacm;

	unsetenv("USCM_SIM_LIBDIR");
	snprintf(p, sizeof(p), "%s/../sim/lib", st_bin());
	cr_assert(realpath(p, simlib), "%s", p);
	snprintf(p, sizeof(p), "%s/../lib/librdmacm.so.1", st_bin());
	have_rdmacm = access(p, R_OK) == 0;
	snprintf(p, sizeof(p), "%s/../lib", st_bin());
	if (have_rdmacm)
		cr_assert(realpath(p, lib), "%s", p);
	start("--nodes 2");
	cr_assert_eq(st_sh(&out, "LD_LIBRARY_PATH=/opt/x/lib '%s/uscm-sim' run --dir '%s' --node node1 -- "
				 "sh -c 'echo \"$LD_LIBRARY_PATH\"'", st_bin(), g_dir), 0, "%s", out);
	if (have_rdmacm)
		snprintf(want, sizeof(want), "%s:%s:/opt/x/lib\n", simlib, lib);
	else
		snprintf(want, sizeof(want), "%s:/opt/x/lib\n", simlib);
	cr_assert_str_eq(out, want);
	free(out);
	/* `uscm-sim env` prints the same directories */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' env --dir '%s' --node node2", st_bin(), g_dir), 0);
	want[strlen(want) - strlen(":/opt/x/lib\n")] = 0;
	cr_assert(strstr(out, want), "%s", out);
	free(out);
	if (have_rdmacm && access("/usr/bin/rping", X_OK) == 0) {
		cr_assert_eq(st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- ldd /usr/bin/rping", st_bin(),
				   g_dir), 0, "%s", out);
		snprintf(want, sizeof(want), "librdmacm.so.1 => %s/librdmacm.so.1 ", lib);
		cr_expect(strstr(out, want), "%s", out);
		snprintf(want, sizeof(want), "libibverbs.so.1 => %s/libibverbs.so.1 ", simlib);
		cr_expect(strstr(out, want), "%s", out);
		free(out);
	}
}

Test(fabric, pcap_of_sa_traffic_decodes)
{
	char pcap[700], *out = NULL;
	uint8_t pr[64] = { 0 };

	snprintf(pcap, sizeof(pcap), "%s/sa.pcap", g_dir);
	{
		char args[800];

		snprintf(args, sizeof(args), "--nodes 2 --link ib --pcap '%s'", pcap);
		start(args);
	}
	memcpy(pr + 8, g_f->st->nodes[1].gid, 16);
	memcpy(pr + 24, g_f->st->nodes[2].gid, 16);
	cr_assert_eq(sa_call(2, 0x01, 0x0035, (1ull << 2) | (1ull << 3), pr, 64, &g_r), 0);
	cr_assert_eq(sa_call(2, 0x12, 0x0035, 0, NULL, 0, &g_r), 0);
	if (!st_have("tshark")) {
		tf_warn_missing("tshark not installed: decode check skipped");
		return;
	}
	cr_assert_eq(st_sh(&out, "tshark -r '%s' -T fields -e infiniband.lrh.slid -e infiniband.lrh.dlid "
				 "-e infiniband.mad.method -e infiniband.mad.attributeid -e _ws.malformed "
				 "2>/dev/null | head -3", pcap), 0);
	cr_assert_str_eq(out, "3\t1\t0x01\t0x0035\t\n1\t3\t0x81\t0x0035\t\n3\t1\t0x12\t0x0035\t\n", "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "tshark -r '%s' -Y _ws.malformed 2>/dev/null | wc -l", pcap), 0);
	cr_assert_str_eq(out, "0\n", "%s", out);
	free(out);
}

Test(fabric, rmpp_resends_a_lost_segment)
{
	uint64_t t0;

	start("--nodes 3 --link ib");
	g_lose_seg = 2;
	t0 = st_now_ms();
	cr_assert_eq(sa_call(1, 0x12, 0x0035, 0, NULL, 0, &g_r), 0, "no table");
	cr_assert_eq(g_lose_seg, 0, "segment 2 was lost once");
	cr_assert_eq(g_r.status, 0);
	cr_assert_eq(g_r.dlen, 16 * 64);
	cr_assert_eq(g_r.segments, 6);
	cr_assert_geq(st_now_ms() - t0, 250, "after the SM's ACK timeout");
	for (int i = 0; i < 16; i++)
		cr_assert_neq(get16(g_r.data + i * 64 + 40), 0);
}

Test(fabric, stop_spares_the_caller_attached_as_a_node)
{
	struct simf *me;

	start("--nodes 1");
	setenv("USCM_SIM_NODE", "node1", 1);
	me = simf_attach(g_dir);
	unsetenv("USCM_SIM_NODE");
	cr_assert(me);
	cr_assert_eq(me->st->nodes[1].pid, getpid());
	/* through a shell, as a test or script does */
	cr_assert_eq(st_sh(NULL, "sh -c \"'%s/uscm-sim' stop --dir '%s'\"", st_bin(), g_dir), 0);
	simf_detach(me);
	mkdir(g_dir, 0700);
}

Test(fabric, sm_follows_the_watched_process)
{
	pid_t child = fork(), sm;
	struct stat sb;
	int status;

	if (child == 0) {
		char pid[32], cmd[1200];

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		setenv("USCM_SIM_WATCH_PID", pid, 1);
		snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' start --dir '%s' --no-uscmd >/dev/null", st_bin(), g_dir);
		_exit(system(cmd) == 0 ? 0 : 1);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	g_f = simf_attach_node(g_dir, -1);
	if (!g_f) {
		/* already gone: that is the point */
		cr_assert(stat(g_dir, &sb) < 0);
		mkdir(g_dir, 0700);
		return;
	}
	sm = g_f->st->keeper_pid;
	for (int i = 0; i < 200 && simf_pid_alive(sm); i++)
		usleep(5000);
	cr_assert(!simf_pid_alive(sm), "the SM exits when its watched process is gone");
	cr_assert(stat(g_dir, &sb) < 0, "and removes the fabric");
	mkdir(g_dir, 0700);
}

/* --netns and --dev-infiniband (docs/sim.md): programs of `run` see an
 * interface uscm<i> holding 127.10.0.i per node and /dev/infiniband/uverbs0
 * (a character device), the host sees neither; `stop` removes the markers.
 * Root only (network and mount namespaces). */
Test(fabric, netns_and_dev_infiniband)
{
	char *out = NULL, host_ns[128] = "";
	struct stat sb;
	int rc;

	if (geteuid() != 0 || st_sh(NULL, "unshare -n -m true >/dev/null 2>&1") != 0)
		cr_skip_test("--netns / --dev-infiniband need root");
	if (!st_have("ip"))
		tf_skip_missing("ip (Debian iproute2) is not installed");
	if (readlink("/proc/self/ns/net", host_ns, sizeof(host_ns) - 1) < 0)
		cr_skip_test("no /proc/self/ns/net");
	start("--nodes 2 --netns --dev-infiniband");
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- sh -c "
			 "'ip -o -4 addr show; readlink /proc/self/ns/net; test -c /dev/infiniband/uverbs0"
			 " && echo CHR; echo x >/dev/null && echo NULL-OK'",
		   st_bin(), g_dir);
	cr_assert_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "uscm1    inet 127.10.0.1/32"), "%s", out);
	cr_expect(strstr(out, "uscm2    inet 127.10.0.2/32"), "%s", out);
	cr_expect(!strstr(out, host_ns), "run is in the fabric's namespace:\n%s", out);
	cr_expect(strstr(out, "CHR\n"), "%s", out);
	cr_expect(strstr(out, "NULL-OK\n"), "%s", out);
	free(out);
	out = NULL;
	/* the SM lives in it too: the transport's lo is the namespace's */
	st_sh(&out, "readlink /proc/%d/ns/net", (int)g_f->st->keeper_pid);
	cr_expect(out && !strstr(out, host_ns), "the SM is in the namespace: %s", out);
	free(out);
	cr_expect_neq(stat("/dev/infiniband", &sb), 0, "the host's /dev is unchanged");
	cr_expect_neq(st_sh(NULL, "ip -o addr show | grep -q 'uscm1 '"), 0, "no uscm1 on the host");
	simf_detach(g_f);
	g_f = NULL;
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' stop --dir '%s'", st_bin(), g_dir), 0);
	cr_expect(stat(g_dir, &sb) < 0, "the fabric directory (netns, dev.host) is gone");
	mkdir(g_dir, 0700); /* for the teardown */
}
