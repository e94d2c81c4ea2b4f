/*
 * uscm-replay - replay one side of a CM packet trace (docs/replay.md).
 *
 *   uscm-replay check  TRACE --side S [options]
 *   uscm-replay live   TRACE --side S --node NAME [options]
 *   uscm-replay mutate TRACE --side S --seed N [--count K] [--only I] [options]
 *
 * Exit status: 0 no unexplained difference (mutate: no finding), 1
 * differences (findings), 2 bad usage or unreadable trace.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/replay_check.h"
#include "tools/replay_live.h"
#include "tools/replay_mutate.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: uscm-replay sides  TRACE   (the endpoints with CM traffic, as --side)\n"
		"       uscm-replay check  TRACE --side S [options]\n"
		"       uscm-replay live   TRACE --side S --node NAME [options]\n"
		"       uscm-replay mutate TRACE --side S --seed N [--count K] [--only I] [options]\n"
		"side S: lid:N | gid:IPv6 | ip:A.B.C.D | qpn:Q (an endpoint that sent a REQ/REP with QPN Q)\n"
		"options:\n"
		"  --listen SID           S serves SID (repeatable; rdma_cm port-space IDs are implied)\n"
		"  --tolerance-ms MS      timing tolerance (50) plus --tolerance-pct (5) of the\n"
		"  --tolerance-pct P      time since the connection began\n"
		"  --ca-ack-delay N       S's CA ACK delay (15)\n"
		"  --packet-life-time N   path lifetime (default: the trace's PathRecord, else inferred)\n"
		"  --max-timer-ms MS      engine timer cap (as USCM_CM_MAX_TIMER_MS)\n"
		"  --timewait-ms MS       engine TimeWait (as USCM_TIMEWAIT_MS)\n"
		"  --no-mra-on-dup        S does not MRA duplicate REQs\n"
		"  --engine-seed N        the engine's comm ID entropy (1)\n"
		"  --json                 one JSON report on stdout\n"
		"  -v                     engine state changes on stderr\n"
		"live:   --node NAME (the fabric node to play S from; USCM_SIM_NODE), --ca NAME, --port N,\n"
		"        --timeout-ms MS (how long to wait for each answer, 2000)\n"
		"        --peer lid:N|ip:A.B.C.D (the live peer; default: the other sim node)\n"
		"mutate: --seed N, --count K (runs, 20), --only I (one run), --live --node NAME\n"
		"        [--peer-pid PID] (S's MADs mutated, played to a live peer),\n"
		"        --canary (each run re-sends a genuine MAD but claims it must be rejected:\n"
		"        shows that an acceptance is detected)\n");
}

/* Every endpoint that sends or receives CM MADs, as --side text. */
static int list_sides(const char *path)
{
	struct rp_trace t;
	struct { char side[80]; unsigned sent, rcvd; } e[64];
	unsigned n = 0;

	if (rp_trace_load(path, &t) < 0) {
		fprintf(stderr, "uscm-replay: %s: %s\n", path, t.err);
		return 2;
	}
	for (size_t i = 0; i < t.n; i++) {
		const struct rp_mad *m = &t.m[i];
		if (!m->is_cm)
			continue;
		for (int dir = 0; dir < 2; dir++) {
			char s[80], g[64];
			if (m->meta.link == UM_LINK_IB)
				snprintf(s, sizeof(s), "lid:%u", dir ? m->meta.dlid : m->meta.slid);
			else
				snprintf(s, sizeof(s), "gid:%s",
					 cmp_gid_str(dir ? m->meta.dgid : m->meta.sgid, g, sizeof(g)));
			unsigned k;
			for (k = 0; k < n && strcmp(e[k].side, s); k++)
				;
			if (k == n) {
				if (n == 64)
					continue;
				snprintf(e[n].side, sizeof(e[n].side), "%s", s);
				e[n].sent = e[n].rcvd = 0;
				n++;
			}
			if (dir)
				e[k].rcvd++;
			else
				e[k].sent++;
		}
	}
	for (unsigned k = 0; k < n; k++)
		printf("%s sent %u received %u CM MADs\n", e[k].side, e[k].sent, e[k].rcvd);
	rp_trace_free(&t);
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_LISTEN = 256, O_TOL, O_TOLPCT, O_CA, O_PLT, O_MAXT, O_TW, O_NOMRA, O_ESEED,
	       O_JSON, O_NODE, O_SEED, O_COUNT, O_ONLY, O_LIVE, O_CANAME, O_PORT, O_TMO, O_CANARY, O_PEER, O_PEERPID };
	static const struct option lopts[] = {
		{ "side", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "tolerance-ms", required_argument, NULL, O_TOL },
		{ "tolerance-pct", required_argument, NULL, O_TOLPCT },
		{ "ca-ack-delay", required_argument, NULL, O_CA },
		{ "packet-life-time", required_argument, NULL, O_PLT },
		{ "max-timer-ms", required_argument, NULL, O_MAXT },
		{ "timewait-ms", required_argument, NULL, O_TW },
		{ "no-mra-on-dup", no_argument, NULL, O_NOMRA },
		{ "engine-seed", required_argument, NULL, O_ESEED },
		{ "json", no_argument, NULL, O_JSON },
		{ "node", required_argument, NULL, O_NODE },
		{ "ca", required_argument, NULL, O_CANAME },
		{ "port", required_argument, NULL, O_PORT },
		{ "timeout-ms", required_argument, NULL, O_TMO },
		{ "seed", required_argument, NULL, O_SEED },
		{ "count", required_argument, NULL, O_COUNT },
		{ "only", required_argument, NULL, O_ONLY },
		{ "live", no_argument, NULL, O_LIVE },
		{ "canary", no_argument, NULL, O_CANARY },
		{ "peer", required_argument, NULL, O_PEER },
		{ "peer-pid", required_argument, NULL, O_PEERPID },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rp_opts o;
	struct rp_live_opts lo = { .port = 1, .timeout_ms = 2000 };
	struct rp_mutate_opts mo = { .count = 20, .only = -1 };
	const char *side = NULL, *mode, *path;
	int c, json = 0, have_seed = 0;
	char err[256];

	rp_opts_default(&o);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	mode = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "s:vh", lopts, NULL)) != -1) {
		switch (c) {
		case 's': side = optarg; break;
		case 'v': o.verbose = 1; break;
		case O_LISTEN:
			if (o.nlisten == RP_MAX_LISTEN) {
				fprintf(stderr, "uscm-replay: at most %d --listen\n", RP_MAX_LISTEN);
				return 2;
			}
			o.listen[o.nlisten++] = strtoull(optarg, NULL, 0);
			break;
		case O_TOL: o.tol_ns = strtoull(optarg, NULL, 0) * 1000000u; break;
		case O_TOLPCT: o.tol_pct = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_CA: o.ca_ack_delay = atoi(optarg) & 31; break;
		case O_PLT: o.packet_life_time = atoi(optarg) & 63; break;
		case O_MAXT: o.max_timer_ns = strtoull(optarg, NULL, 0) * 1000000u; break;
		case O_TW: o.timewait_ns = strtoull(optarg, NULL, 0) * 1000000u; break;
		case O_NOMRA: o.no_mra_on_dup = 1; break;
		case O_ESEED: o.seed = strtoull(optarg, NULL, 0); break;
		case O_JSON: json = 1; break;
		case O_NODE: lo.node = optarg; break;
		case O_CANAME: lo.ca = optarg; break;
		case O_PORT: lo.port = atoi(optarg); break;
		case O_TMO: lo.timeout_ms = atoi(optarg); break;
		case O_SEED: mo.seed = strtoull(optarg, NULL, 0); have_seed = 1; break;
		case O_COUNT: mo.count = (unsigned)strtoul(optarg, NULL, 0); break;
		case O_ONLY: mo.only = atoi(optarg); break;
		case O_LIVE: mo.live = 1; break;
		case O_CANARY: mo.canary = 1; break;
		case O_PEER: lo.peer = optarg; break;
		case O_PEERPID: mo.peer_pid = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!strcmp(mode, "sides") && optind == argc - 1)
		return list_sides(argv[optind]);
	if (optind != argc - 1 || !side) {
		usage(stderr);
		return 2;
	}
	path = argv[optind];

	struct rp_trace t;
	struct rp_side s;
	if (rp_side_parse(side, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "uscm-replay: %s\n", err);
		return 2;
	}
	if (rp_trace_load(path, &t) < 0) {
		fprintf(stderr, "uscm-replay: %s: %s\n", path, t.err);
		return 2;
	}
	if (t.truncated)
		fprintf(stderr, "uscm-replay: %s: %s (playing what came before)\n", path, t.err);
	if (rp_trace_bind(&t, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "uscm-replay: %s: %s\n", path, err);
		rp_trace_free(&t);
		return 2;
	}

	if (!strcmp(mode, "sides")) {
		rp_trace_free(&t);
		return 0; /* printed by list_sides before binding */
	}
	int rc = 2;
	struct rp_report r;
	rp_report_init(&r, t.n ? t.m[0].ts : 0);
	if (!strcmp(mode, "check")) {
		struct rp_result res;
		if (rp_check_run(&t, &o, &r, NULL, &res) < 0) {
			fprintf(stderr, "uscm-replay: out of memory\n");
		} else {
			if (json) {
				rp_report_json(&r, stdout, "check", side);
			} else {
				rp_report_print(&r, stdout, "engine");
				printf("side %s: %zu MADs in the trace, %u connection%s played, %u not played; engine "
				       "rx %" PRIu64 " tx %" PRIu64 " retransmits %" PRIu64
				       " stray %" PRIu64 " mismatch %" PRIu64 " malformed %" PRIu64 "%s",
				       side, t.n, res.played_conns, res.played_conns == 1 ? "" : "s",
				       res.skipped_conns, res.stats_trace.rx, res.stats_trace.tx,
				       res.stats_trace.retransmits, res.stats_trace.rx_stray,
				       res.stats_trace.rx_mismatch, res.stats_trace.rx_malformed,
				       res.destroys_inferred ? "" : "\n");
				if (res.destroys_inferred)
					printf("; S's application destroyed %u id%s (inferred: no "
					       "retransmission where its timers make one)\n",
					       res.destroys_inferred, res.destroys_inferred == 1 ? "" : "s");
			}
			rc = rp_report_unexplained(&r) ? 1 : 0;
		}
	} else if (!strcmp(mode, "live")) {
		if (!lo.node && !getenv("USCM_SIM_NODE") && !lo.ca) {
			fprintf(stderr, "uscm-replay live: --node NAME (or --ca) is required\n");
		} else {
			rc = rp_live_run(&t, &s, &o, &lo, &r);
			if (rc >= 0) {
				if (json)
					rp_report_json(&r, stdout, "live", side);
				else
					rp_report_print(&r, stdout, "peer");
				rc = rp_report_unexplained(&r) ? 1 : 0;
			} else {
				rc = 2;
			}
		}
	} else if (!strcmp(mode, "mutate")) {
		if (!have_seed) {
			fprintf(stderr, "uscm-replay mutate: --seed N is required\n");
		} else {
			mo.json = json;
			mo.lo = lo;
			rc = rp_mutate_run(&t, &s, &o, &mo, stdout);
		}
	} else {
		usage(stderr);
	}
	rp_report_free(&r);
	rp_trace_free(&t);
	return rc;
}
