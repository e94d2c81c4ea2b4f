/*
 * Partitions under Debian's unmodified OpenSM: `uscm-sim up
 * --sm opensm --partitions FILE` hands OpenSM a partitions.conf; OpenSM
 * programs every port's P_Key table from it, its SA answers PathRecords
 * only for ports that share a partition, and the fabric drops what a port
 * may not receive, as an HCA does.
 *
 * The fabric: one switch, node1 (OpenSM's port) .. node4. The default
 * partition has every port but OpenSM's as a limited member (so CAs do not
 * reach each other through it), node2 and node3 are full members of
 * 0x0001, node4 of 0x0002; `indx0` puts that partition at index 0 of their
 * tables, which is the P_Key an IPoIB parent interface (and uscm's id for
 * an IP address) uses.
 *
 * - node2 -> node4: OpenSM's SA answers the PathRecord query with status
 *   NO_RECORDS (0x0300), and rdma_resolve_route's ROUTE_ERROR carries
 *   -EINVAL, as the kernel's ib_sa gives for every SA status (rping prints
 *   "RDMA_CM_EVENT_ROUTE_ERROR, error -22"); no CM MAD is sent.
 * - node2 -> node3: unmodified rping connects; the PathRecord carries
 *   P_Key 0x8001 and so does the REQ (its BTH and its Partition Key field).
 * - AF_IB names the partition (sib_pkey): one the port lacks is ENODEV,
 *   the default one (both limited) has no path, 0x8001 to node3 has.
 * - A REQ forced onto node4 with a path of our own (RDMA_OPTION_IB_PATH,
 *   P_Key 0x8001) is dropped by node4's port before its CM and counted as a
 *   P_Key violation (PortInfo P_KeyViolations).
 *
 * Skipped when opensm or rdmacm-utils is missing; the capture checks want
 * tshark.
 */
#include "libtest.h"

#include <infiniband/ib.h>
#include <infiniband/sa.h>

static char pcap[128], conf[128];

static void teardown(void)
{
	lt_fabric_stop();
	if (pcap[0])
		unlink(pcap);
	if (conf[0])
		unlink(conf);
	pcap[0] = conf[0] = 0;
}

TestSuite(partitions, .fini = teardown, .timeout = 120);

/* The fabric above; daemon: a uscmd per node (programs in daemon mode),
 * as every test gets under USCM_TEST_DAEMON=1 (CTest's _daemon run). */
static void start(int daemon)
{
	const char *d = getenv("USCM_TEST_DAEMON");
	char opts[512];
	FILE *f;

	if (d && atoi(d))
		daemon = 1;

	lt_need("opensm", "opensm");
	snprintf(conf, sizeof(conf), "/tmp/uscm-partitions-%d.conf", (int)getpid());
	f = fopen(conf, "w");
	cr_assert(f);
	fprintf(f, "# node2 and node3 in 0x0001, node4 in 0x0002; the default partition\n"
		   "# limited for all but OpenSM's port\n"
		   "Default=0x7fff : ALL=limited, SELF=full ;\n"
		   "P1=0x0001,indx0 : 0x0002c90300000002=full, 0x0002c90300000003=full ;\n"
		   "P2=0x0002,indx0 : 0x0002c90300000004=full ;\n");
	fclose(f);
	snprintf(pcap, sizeof(pcap), "/tmp/uscm-partitions-%d.pcap", (int)getpid());
	snprintf(opts, sizeof(opts), "%s--sm opensm --topo chain:1,4 --partitions %s --pcap %s",
		 daemon ? "" : "--no-uscmd ", conf, pcap);
	lt_fabric_start_opts("ib", 4, opts);
}

/* node n's LID, or its P_Key violations, from `uscm-sim status`. */
static int node_lid(int n)
{
	char *out = NULL;
	int lid;

	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node%d\" && $3 ~ /^127/ {print $4}'",
			   lt_bin(), n),
		     0);
	lid = atoi(out);
	free(out);
	return lid;
}

/* The P_Key violations `uscm-sim status` shows for a node ("node", n) or
 * a switch ("sw", k). */
static unsigned violations_of(const char *kind, int n)
{
	char *out = NULL;
	unsigned v;

	lt_sh(&out, "%s/uscm-sim status | awk '$1 == \"%s%d\" && /P_Key violations/ {print $NF}'",
	      lt_bin(), kind, n);
	v = (unsigned)atoi(out ? out : "0");
	free(out);
	return v;
}

static unsigned pkey_violations(int n)
{
	return violations_of("node", n);
}

static unsigned pkey_violations_sw(int k)
{
	return violations_of("sw", k);
}

static struct rdma_cm_id *addr_resolved(struct rdma_event_channel *ch, const char *ip)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lt_sin(ip, 7471);
	struct rdma_cm_event *ev;

	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	rdma_ack_cm_event(ev);
	return id;
}

/* An AF_IB destination: node n's GID, P_Key pkey (sib_pkey). */
static struct sockaddr_ib ib_dst(int n, uint16_t pkey)
{
	struct sockaddr_ib a;
	static const uint8_t prefix[8] = { 0xfe, 0x80 };

	memset(&a, 0, sizeof(a));
	a.sib_family = AF_IB;
	memcpy(a.sib_addr.sib_raw, prefix, 8);
	a.sib_addr.sib_raw[9] = 0x02;
	a.sib_addr.sib_raw[10] = 0xc9;
	a.sib_addr.sib_raw[11] = 0x03;
	a.sib_addr.sib_raw[15] = (uint8_t)n;
	a.sib_pkey = htobe16(pkey);
	a.sib_sid = htobe64(0x0000000001060000ULL | 7471); /* RDMA_PS_TCP, port 7471 */
	a.sib_sid_mask = htobe64(~0ULL);
	return a;
}

/* rdma_resolve_route on a resolved id: the event and its status. */
static int route(struct rdma_event_channel *ch, struct rdma_cm_id *id, int *status)
{
	struct rdma_cm_event *ev;
	int type;

	cr_assert_eq(rdma_resolve_route(id, 2000), 0, "%s", strerror(errno));
	ev = lt_event(ch, 5000);
	cr_assert(ev, "no route event");
	type = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return type;
}

/* AF_IB names the partition (sib_pkey), as with the kernel's rdma_cm: a
 * key the port lacks cannot be resolved (ENODEV); the default partition,
 * where node2 and node4 are both limited members, gives no path; 0x8001
 * to node3 does. */
Test(partitions, af_ib_names_the_partition)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_ib dst;
	int st = 0;

	start(0);
	lt_node(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	/* node2 is not in 0x0002 */
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	dst = ib_dst(4, 0x8002);
	cr_expect_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), -1);
	cr_expect_eq(errno, ENODEV, "errno %d", errno);
	rdma_destroy_id(id);
	/* the default partition: both limited, OpenSM's SA has no path */
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	dst = ib_dst(4, 0x7FFF);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	rdma_ack_cm_event(ev);
	cr_expect_eq(be16toh(id->route.addr.addr.ibaddr.pkey), 0x7FFF);
	cr_expect_eq(route(ch, id, &st), RDMA_CM_EVENT_ROUTE_ERROR);
	cr_expect_eq(st, -EINVAL, "status %d", st);
	rdma_destroy_id(id);
	/* 0x8001 to node3 */
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	dst = ib_dst(3, 0x8001);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	rdma_ack_cm_event(ev);
	cr_expect_eq(be16toh(((struct sockaddr_ib *)&id->route.addr.src_addr)->sib_pkey), 0x8001);
	cr_expect_eq(route(ch, id, &st), RDMA_CM_EVENT_ROUTE_RESOLVED, "status %d", st);
	if (id->route.num_paths == 1)
		cr_expect_eq(be16toh(id->route.path_rec->pkey), 0x8001);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(partitions, no_shared_partition_no_path)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	char *out = NULL;

	start(0);
	/* OpenSM programmed the P_Key tables from the file */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status", lt_bin()), 0);
	cr_expect(strstr(out, "node2   [0] 0x8001 [1] 0x7fff") && strstr(out, "node3   [0] 0x8001 [1] 0x7fff") &&
			  strstr(out, "node4   [0] 0x8002 [1] 0x7fff"),
		  "P_Key tables:\n%s", out);
	free(out);
	out = NULL;
	lt_node(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	/* node4 is in another partition: the id's P_Key is node2's 0x8001 */
	id = addr_resolved(ch, "127.10.0.4");
	cr_expect_eq(be16toh(id->route.addr.addr.ibaddr.pkey), 0x8001);
	for (int i = 0; i < 2; i++) {
		/* no path: ROUTE_ERROR -EINVAL, and the id may ask again */
		cr_assert_eq(rdma_resolve_route(id, 2000), 0, "%s", strerror(errno));
		ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_ERROR, 5000);
		cr_expect_eq(ev->status, -EINVAL, "ROUTE_ERROR status %d", ev->status);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(id);
	/* node3 shares 0x0001: OpenSM's path carries that P_Key */
	id = addr_resolved(ch, "127.10.0.3");
	cr_assert_eq(rdma_resolve_route(id, 2000), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	rdma_ack_cm_event(ev);
	cr_assert_eq(id->route.num_paths, 1);
	cr_expect_eq(be16toh(id->route.path_rec->pkey), 0x8001);
	cr_expect_eq(be16toh(id->route.path_rec->dlid), (uint16_t)node_lid(3));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	/* the SA's answer for node4 was NO_RECORDS, and no CM MAD went out */
	if (lt_sh(NULL, "command -v tshark >/dev/null") != 0) {
		tf_warn_missing("tshark is not installed: the capture is not decoded");
		return;
	}
	cr_assert_eq(lt_sh(&out,
			   "tshark -r %s -Y 'infiniband.mad.mgmtclass == 0x03 || infiniband.mad.mgmtclass == 0x07' "
			   "-T fields -e infiniband.mad.mgmtclass -e infiniband.mad.method -e infiniband.mad.status "
			   "-e infiniband.pathrecord.p_key -e infiniband.pathrecord.dlid 2>/dev/null",
			   pcap),
		     0);
	{
		char want[64];

		snprintf(want, sizeof(want), "0x03\t0x81\t0x0300\t0x8001\t");
		cr_expect(strstr(out, want), "no NO_RECORDS answer in:\n%s", out);
		cr_expect(strstr(out, "0x03\t0x81\t0x0000\t0x8001"), "no path to node3 in:\n%s", out);
		cr_expect(!strstr(out, "0x07\t"), "a CM MAD was sent:\n%s", out);
	}
	free(out);
}

Test(partitions, rping_in_a_partition_req_carries_its_pkey)
{
	char *out = NULL;
	int st = -1;

	lt_need("rping", "rdmacm-utils");
	start(1);
	/* server on node3, client on node2: both in 0x0001 */
	lt_rping_pair(3, 2);
	/* node2 -> node4: another partition; rping reports the route error */
	st = lt_sh(&out, "USCM_SIM_NODE=node2 %s timeout 20 rping -c -a 127.10.0.4 -v -C 1 2>&1", lt_util_env());
	cr_expect_neq(st, 0, "rping to node4 succeeded:\n%s", out);
	cr_expect(strstr(out, "RDMA_CM_EVENT_ROUTE_ERROR, error -22"), "rping to node4:\n%s", out);
	free(out);
	out = NULL;
	if (lt_sh(NULL, "command -v tshark >/dev/null") != 0) {
		tf_warn_missing("tshark is not installed: the capture is not decoded");
		return;
	}
	/* the REQ went with the partition's P_Key, in its BTH and its field */
	cr_assert_eq(lt_sh(&out,
			   "tshark -r %s -Y 'infiniband.mad.mgmtclass == 0x07 && infiniband.mad.attributeid == 0x0010' "
			   "-T fields -e infiniband.bth.p_key -e infiniband.cm.req.pkey 2>/dev/null",
			   pcap),
		     0);
	cr_expect(strlen(out) > 0, "no REQ in the capture");
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n"))
		cr_expect_str_eq(l, "32769\t0x8001", "a REQ's BTH P_Key / Partition Key: %s", l);
	free(out);
}

Test(partitions, req_with_a_foreign_pkey_dropped_by_the_port)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct ibv_path_data pd;
	struct rdma_conn_param cp;
	char *sout = NULL;
	uint16_t lid2, lid4;
	unsigned before, sw_before;

	lt_need("rping", "rdmacm-utils");
	start(0);
	/* a CM on node4 (an rping server), so that something there listens */
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node4 %s timeout 20 rping -s -C 1 >%s/server.out 2>&1) "
			   ">/dev/null 2>&1 &",
			   lt_util_env(), lt_dir),
		     0);
	lid2 = (uint16_t)node_lid(2);
	lid4 = (uint16_t)node_lid(4);
	cr_assert(lid2 && lid4);
	usleep(500 * 1000);
	before = pkey_violations(4);
	sw_before = pkey_violations_sw(1);
	lt_node(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = addr_resolved(ch, "127.10.0.4");
	/* a path the SA would not give: node4 with node2's P_Key 0x8001 */
	memset(&pd, 0, sizeof(pd));
	pd.flags = IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	memcpy(pd.path.sgid.raw, id->route.addr.addr.ibaddr.sgid.raw, 16);
	memcpy(pd.path.dgid.raw, id->route.addr.addr.ibaddr.dgid.raw, 16);
	pd.path.slid = htobe16(lid2);
	pd.path.dlid = htobe16(lid4);
	pd.path.flowlabel_hoplimit = htobe32(0);
	pd.path.reversible_numpath = 0x80 | 1;
	pd.path.pkey = htobe16(0x8001);
	pd.path.mtu = 0x80 | 4;
	pd.path.rate = 0x80 | 16;
	pd.path.packetlifetime = 0x80 | 14;
	cr_assert_eq(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)), 0, "%s",
		     strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000);
	rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;
	cp.retry_count = 7;
	cp.responder_resources = cp.initiator_depth = 1;
	cr_assert_eq(rdma_connect(id, &cp), 0, "%s", strerror(errno));
	/* the switch port in front of node4 enforces partitions (OpenSM set
	 * its table, 0x8002 and 0x7FFF, and PartitionEnforcementOutbound): it
	 * drops the REQ and its retries, counted as the switch's violations;
	 * no REP comes back */
	ev = lt_event(ch, 1500);
	cr_expect(!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED, "connected across partitions");
	if (ev)
		rdma_ack_cm_event(ev);
	cr_expect_geq(pkey_violations_sw(1), sw_before + 1, "sw1's P_Key violations: %u (before %u)",
		      pkey_violations_sw(1), sw_before);
	cr_expect_eq(pkey_violations(4), before, "node4's P_Key violations: %u (before %u)",
		     pkey_violations(4), before);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(!strstr(sout, "ping data"), "node4's server:\n%s", sout);
	free(sout);
}

/* --partitions is OpenSM's: refused with the built-in SM, and a file that
 * cannot be read is refused before any fabric starts. */
Test(partitions, option_checks)
{
	char dir[64], *out = NULL;

	if (!lt_have_sim())
		tf_skip_missing("build/bin/uscm-sim is not built");
	snprintf(dir, sizeof(dir), "/tmp/uscm-partitions-opt.XXXXXX");
	cr_assert(mkdtemp(dir));
	cr_expect_eq(lt_sh(&out, "%s/uscm-sim up --dir %s/f --no-uscmd --partitions /dev/null 2>&1", lt_bin(), dir),
		     2, "%s", out);
	cr_expect(strstr(out, "--partitions needs --sm opensm"), "%s", out);
	free(out);
	out = NULL;
	cr_expect_eq(lt_sh(&out, "%s/uscm-sim up --dir %s/f --no-uscmd --sm opensm --partitions %s/none 2>&1",
			   lt_bin(), dir, dir),
		     2, "%s", out);
	cr_expect(strstr(out, "--partitions") && strstr(out, "No such file"), "%s", out);
	free(out);
	out = NULL;
	/* nothing was started */
	cr_expect_neq(lt_sh(NULL, "test -e %s/f/fabric.state", dir), 0);
	lt_sh(NULL, "rm -rf '%s'", dir);
}
