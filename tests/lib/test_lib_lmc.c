/*
 * LMC > 0 and the two SMs' PathRecords: `uscm-sim up --lmc 2`
 * gives every CA port 4 LIDs. Under Debian's unmodified opensm (its `lmc`
 * option) on a fat tree of 2 leaves and 2 spines: OpenSM programs every LID
 * of each range, ibtracert shows two LIDs of one port reached through
 * different spines, an SMP to each LID of a range arrives at that HCA,
 * OpenSM's SA answers several PathRecords between two hosts on different
 * leaves, and an unmodified rping over uscm's librdmacm connects with a REQ
 * carrying the SLID/DLID of the PathRecord OpenSM's SA answered (read back
 * from the capture with uscm-decode --json), its data flowing. The built-in
 * SM does the same numbering and spreading itself, and MADs to non-base
 * LIDs are answered from those LIDs (ibping, smpquery; the capture's LRH).
 * Last, both SMs answer the
 * same PathRecord between the same two ports of the default 2-node fabric,
 * field by field, except what docs/sim.md lists as differing (the LIDs each
 * SM numbers, and the packet lifetime), and with LMC 2 across leaves the
 * same list of paths in the same order with the same Preference. Skipped
 * when opensm, infiniband-diags or rdmacm-utils is missing.
 */
#include "libtest.h"

static char pcap[128];

static void teardown(void)
{
	lt_fabric_stop();
	if (pcap[0])
		unlink(pcap);
	pcap[0] = 0;
}

TestSuite(lmc, .fini = teardown, .timeout = 120);

/* node n's base LID as the SM assigned it (uscm-sim status) */
static unsigned base_lid(int n)
{
	char *out = NULL;
	unsigned lid = 0;

	lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node%d\" {print $4}'", lt_bin(), n);
	lid = (unsigned)atoi(out);
	free(out);
	return lid;
}

/* The value printed after "name....." in saquery's dump at or after p. */
static unsigned long field(const char *p, const char *name)
{
	const char *q = strstr(p, name);

	if (!q)
		return ~0ul;
	q += strlen(name);
	while (*q == '.')
		q++;
	return strtoul(q, NULL, 0);
}

/* The number after "\"key\": " in a JSON line from p on. */
static long json_num(const char *p, const char *key)
{
	char k[64];
	const char *q;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	q = strstr(p, k);
	return q ? strtol(q + strlen(k), NULL, 0) : -1;
}

static void start_fat_tree(const char *sm)
{
	char opts[256];

	snprintf(pcap, sizeof(pcap), "/tmp/uscm-lmc-%d.pcap", (int)getpid());
	snprintf(opts, sizeof(opts), "--no-uscmd --sm %s --lmc 2 --topo fat-tree:2,2,2 --pcap %s", sm, pcap);
	lt_fabric_start_opts("ib", 4, opts);
}

/* What both SMs must do with LMC 2 on fat-tree:2,2,2 (node1, node2 on
 * leaf1; node3, node4 on leaf2): aligned ranges of 4 LIDs, each LID of
 * node3's range delivered to node3, two of them routed over different
 * spines. */
static void expect_lmc_fabric(unsigned *b1, unsigned *b3)
{
	char *out = NULL, *t0 = NULL, *t1 = NULL;

	*b1 = base_lid(1);
	*b3 = base_lid(3);
	cr_assert(*b1 && *b3 && *b1 % 4 == 0 && *b3 % 4 == 0, "base LIDs %u, %u not aligned to LMC 2", *b1, *b3);
	cr_assert_eq(lt_on_node(3, &out, "ibstat"), 0, "%s", out);
	cr_expect(strstr(out, "LMC: 2") && strstr(out, "State: Active"), "ibstat on node3:\n%s", out);
	free(out);
	out = NULL;
	/* LID routing to every LID of the range: the SMA of node3 answers */
	for (unsigned k = 0; k < 4; k++) {
		cr_expect_eq(lt_on_node(1, &out, "smpquery -t 1000 nodeinfo %u", *b3 + k), 0, "smpquery nodeinfo %u:\n%s",
			     *b3 + k, out);
		cr_expect(out && strstr(out, "0x0002c90300000003"), "LID %u is not node3's:\n%s", *b3 + k, out);
		free(out);
		out = NULL;
	}
	cr_assert_eq(lt_on_node(1, &t0, "ibtracert %u %u", *b1, *b3), 0, "%s", t0);
	cr_assert_eq(lt_on_node(1, &t1, "ibtracert %u %u", *b1, *b3 + 1), 0, "%s", t1);
	cr_expect((strstr(t0, "spine1") && strstr(t1, "spine2")) || (strstr(t0, "spine2") && strstr(t1, "spine1")),
		  "LIDs %u and %u of node3 take the same spine:\n%s\n%s", *b3, *b3 + 1, t0, t1);
	free(t0);
	free(t1);
}

Test(lmc, opensm_lmc2_paths_and_req)
{
	char *out = NULL, *pr = NULL, *req = NULL;
	unsigned b1, b3;
	int n = 0;

	lt_need("opensm", "opensm");
	lt_need("saquery", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	start_fat_tree("opensm");
	expect_lmc_fabric(&b1, &b3);
	/* OpenSM's SA: every (SLID, DLID) combination of the two ranges */
	cr_assert_eq(lt_on_node(1, &out, "saquery PR --sgid fe80::2:c903:0:1 --dgid fe80::2:c903:0:3"), 0, "%s", out);
	for (const char *p = out; (p = strstr(p, "PathRecord dump")); p++)
		n++;
	cr_expect_geq(n, 4, "%d PathRecords:\n%s", n, out);
	for (unsigned k = 0; k < 4; k++) {
		char want[64];

		snprintf(want, sizeof(want), "dlid....................%u\n", b3 + k);
		cr_expect(strstr(out, want), "no PathRecord to LID %u:\n%s", b3 + k, out);
	}
	free(out);
	out = NULL;
	lt_rping_pair(1, 3); /* across leaves: data flows */
	/* the REQ carries the path of the PathRecord OpenSM's SA answered */
	cr_assert_eq(lt_sh(&pr,
			   "%s/uscm-decode --json %s | grep '\"method\": \"GetResp\", \"attr\": \"PathRecord\"' | "
			   "grep '\"sgid\": \"fe80::2:c903:0:3\"' | head -1",
			   lt_bin(), pcap),
		     0);
	cr_assert_eq(lt_sh(&req, "%s/uscm-decode --json %s | grep '\"attr\": \"REQ\"' | head -1", lt_bin(), pcap), 0);
	cr_assert(pr[0] && req[0], "PathRecord answer or REQ missing in the capture:\n%s\n%s", pr, req);
	{
		const char *rec = strstr(pr, "\"rec\": ");
		long slid = rec ? json_num(rec, "slid") : -1, dlid = rec ? json_num(rec, "dlid") : -1;

		cr_expect(slid >= b3 && slid < b3 + 4 && dlid >= b1 && dlid < b1 + 4,
			  "PathRecord SLID %ld DLID %ld outside node3's / node1's ranges", slid, dlid);
		cr_expect_eq(json_num(req, "primary_local_lid"), slid, "REQ:\n%s\nPathRecord:\n%s", req, pr);
		cr_expect_eq(json_num(req, "primary_remote_lid"), dlid, "REQ:\n%s\nPathRecord:\n%s", req, pr);
		/* the REQ itself went to a LID of node1's range */
		cr_expect(json_num(req, "dlid") >= b1 && json_num(req, "dlid") < b1 + 4, "%s", req);
	}
	free(pr);
	free(req);
}

Test(lmc, builtin_lmc2_routes_every_lid)
{
	unsigned b1, b3;

	lt_need("smpquery", "infiniband-diags");
	lt_need("ibtracert", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	start_fat_tree("builtin");
	expect_lmc_fabric(&b1, &b3);
	lt_rping_pair(1, 3); /* across leaves: data flows */
	/* MADs to and from non-base LIDs: ibping's server answers from the
	 * LID it was pinged at (umad's path bits), and the capture's LRH
	 * shows the LIDs used, SMPs included */
	{
		char *out = NULL, want[64];

		lt_need("ibping", "infiniband-diags");
		cr_assert_eq(lt_sh(NULL, "(USCM_SIM_NODE=node3 %s timeout 15 ibping -S) >/dev/null 2>&1 &",
				   lt_util_env()),
			     0);
		for (int i = 0; i < 50; i++) {
			free(out);
			out = NULL;
			/* (ibping exits 0 on a lost ping too) */
			if (lt_on_node(1, &out, "ibping -c 1 -t 500 %u", b3 + 2) == 0 && strstr(out, "1 received"))
				break;
			usleep(100 * 1000); /* the server is not registered yet */
		}
		cr_expect(strstr(out, "1 received"), "ibping %u:\n%s", b3 + 2, out);
		free(out);
		out = NULL;
		cr_assert_eq(lt_sh(&out, "%s/uscm-decode %s", lt_bin(), pcap), 0);
		snprintf(want, sizeof(want), "LID %u -> LID %u SMP GetResp", b3 + 1, b1);
		cr_expect(strstr(out, want), "no '%s' in the capture", want);
		snprintf(want, sizeof(want), "LID %u -> LID %u class? GetResp", b3 + 2, b1);
		cr_expect(strstr(out, want), "no '%s' in the capture", want);
		free(out);
	}
}

/* One PathRecord node1 -> node2 (by GIDs) from the fabric's SA. */
static char *pathrecord_1_2(const char *sm)
{
	char opts[128], *out = NULL;

	snprintf(opts, sizeof(opts), "--no-uscmd --sm %s", sm);
	lt_fabric_start_opts("ib", 2, opts);
	cr_assert_eq(lt_on_node(1, &out, "saquery PR --sgid fe80::2:c903:0:1 --dgid fe80::2:c903:0:2"), 0, "%s", out);
	cr_assert(strstr(out, "PathRecord dump"), "%s", out);
	cr_expect_eq(field(out, "slid"), base_lid(1), "%s SA: SLID is not node1's LID:\n%s", sm, out);
	cr_expect_eq(field(out, "dlid"), base_lid(2), "%s SA: DLID is not node2's LID:\n%s", sm, out);
	lt_fabric_stop();
	return out;
}

Test(lmc, both_sms_same_pathrecord)
{
	/* every field saquery prints; the LIDs are each SM's numbering
	 * (checked against the ports above), the packet lifetime the
	 * documented difference (docs/sim.md, "Both SMs' PathRecords") */
	static const char *const same[] = { "service_id", "dgid", "sgid", "hop_flow_raw", "tclass",
					    "num_path_revers", "pkey", "qos_class", "sl", "mtu", "rate",
					    "preference", "resv2" };
	char *b, *o;

	lt_need("opensm", "opensm");
	lt_need("saquery", "infiniband-diags");
	b = pathrecord_1_2("builtin");
	o = pathrecord_1_2("opensm");
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		char key[64];
		const char *pb, *po;
		size_t lb, lo;

		snprintf(key, sizeof(key), "\t%s.", same[i]);
		pb = strstr(b, key);
		po = strstr(o, key);
		cr_assert(pb && po, "%s missing:\n%s\n%s", same[i], b, o);
		lb = strcspn(pb, "\n");
		lo = strcspn(po, "\n");
		cr_expect(lb == lo && memcmp(pb, po, lb) == 0, "%s differs: built-in '%.*s', OpenSM '%.*s'", same[i],
			  (int)lb, pb + 1, (int)lo, po + 1);
	}
	/* MTU 4096, selector exactly, from both (the ports' MTUCap); the
	 * known difference, so that a change on either side is seen:
	 * packet lifetime 14 vs OpenSM's subnet_timeout 18 */
	cr_expect_eq(field(b, "mtu"), 0x85ul, "%s", b);
	cr_expect_eq(field(b, "pkt_life"), 0x8Eul, "%s", b);
	cr_expect_eq(field(o, "pkt_life"), 0x92ul, "%s", o);
	free(b);
	free(o);
}

/* saquery's PathRecords with the LIDs as offsets from the two ports' base
 * LIDs and without the documented difference (packet lifetime):
 * what both SMs must answer alike. Malloc'd. */
static char *normalized(const char *out, unsigned sbase, unsigned dbase)
{
	size_t cap = strlen(out) + 1, n = 0;
	char *r = malloc(cap + 64 * 64);

	cr_assert(r);
	for (const char *p = out; *p;) {
		size_t l = strcspn(p, "\n");
		const char *w = p + strspn(p, "\t");

		if (strncmp(w, "slid.", 5) == 0)
			n += (size_t)sprintf(r + n, "slid = base+%lu\n", field(w, "slid") - sbase);
		else if (strncmp(w, "dlid.", 5) == 0)
			n += (size_t)sprintf(r + n, "dlid = base+%lu\n", field(w, "dlid") - dbase);
		else if (strncmp(w, "pkt_life.", 9)) {
			memcpy(r + n, p, l);
			n += l;
			r[n++] = '\n';
		}
		p += l + (p[l] == '\n');
	}
	r[n] = 0;
	return r;
}

static char *multipath_1_3(const char *sm)
{
	char *out = NULL, *r;

	start_fat_tree(sm);
	cr_assert_eq(lt_on_node(1, &out, "saquery PR --sgid fe80::2:c903:0:1 --dgid fe80::2:c903:0:3"), 0, "%s", out);
	r = normalized(out, base_lid(1), base_lid(3));
	free(out);
	lt_fabric_stop();
	unlink(pcap);
	return r;
}

/* With LMC 2 across leaves: the same 16 records in the same order, with
 * the same Preference, every field alike but the LIDs' numbering (offsets
 * compared) and the documented packet lifetime. */
Test(lmc, both_sms_same_multipath)
{
	char *b, *o;

	lt_need("opensm", "opensm");
	lt_need("saquery", "infiniband-diags");
	b = multipath_1_3("builtin");
	o = multipath_1_3("opensm");
	cr_expect(strstr(b, "preference..............0x2"), "%s", b);
	cr_expect_str_eq(b, o, "built-in SA:\n%s\nOpenSM's SA:\n%s", b, o);
	free(b);
	free(o);
}
