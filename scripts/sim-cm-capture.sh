#!/usr/bin/env bash
# sim-cm-capture.sh OUT.pcap [ib|roce] - a capture of the simulated
# fabric's wire (`uscm-sim up --pcap`) holding real CM exchanges between
# unmodified programs over uscm's librdmacm, for the Wireshark plugin's
# test (tests/test_wireshark_lua.c) and `make demo`:
#   - rping: PathRecord, REQ (CMA header), REP, RTU, DREQ, DREP;
#   - udaddy: SIDR_REQ (UDP port space, CMA header), SIDR_REP;
#   - uscm-churn against a server paused before it accepts: REQ, the
#     client's REQ retry, the server CM's MRA of the duplicate REQ, and the
#     client's REJ (timeout) when it gives up.
# ClassPortInfo, LAP and APR never cross the fabric in a uscm run:
# tools/wireshark/uscm_cm_samples.c writes those. Takes ~3 s.
# USCM_BUILD (default build) is the build tree; USCM_UTIL_ENV, assignments
# for the unmodified rping / udaddy (the sanitizer build's test preloads the
# ASan/UBSan runtimes there, as tests/lib/libtest.h does). Exit status 0
# when every program did its part.
set -euo pipefail
out=${1:?usage: sim-cm-capture.sh OUT.pcap [ib|roce]}
link=${2:-ib}
B=${USCM_BUILD:-build}
dir=$(mktemp -d /tmp/uscm-simcap.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	"$B/bin/uscm-sim" down --dir "$dir" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
# CM retries after ~70 ms instead of ~4 s (inherited by the nodes' uscmds).
export USCM_CM_RESPONSE_TIMEOUT=14
"$B/bin/uscm-sim" up --dir "$dir" --nodes 2 --link "$link" --pcap "$dir/f.pcap" >/dev/null
run() { local n=$1; shift; "$B/bin/uscm-sim" run --dir "$dir" --node "$n" -- "$@"; }
# an unmodified rdmacm-utils program on node $1
util() { local n=$1; shift; run "$n" timeout 20 env ${USCM_UTIL_ENV:-} "$@"; }
# a client that beat its server's listen gets a REJ / SIDR_REP "no
# service" and fails: it tries again (at most 5 times; the capture then
# holds those exchanges too, which is fine)
again() { for _ in 1 2 3 4; do "$@" && return 0; sleep 0.5; done; "$@"; }
# waits (at most 5 s) until file $1 contains $2
wait_for() { for _ in $(seq 250); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.02; done; return 1; }

util node2 rping -s -a 127.10.0.2 -p 7174 -C 2 > "$dir/rping.out" 2>&1 &
pids+=($!)
sleep 0.3
again util node1 rping -c -a 127.10.0.2 -p 7174 -C 2 > "$dir/rping-client.out" 2>&1
wait "${pids[-1]}"

util node2 stdbuf -oL udaddy -c 1 > "$dir/udaddy.out" 2>&1 &
pids+=($!)
wait_for "$dir/udaddy.out" "starting server"
sleep 0.3
again util node1 udaddy -s 127.10.0.2 -c 1 >/dev/null
wait "${pids[-1]}"

run node2 timeout 10 "$B/bin/uscm-churn" server -p 7177 --pause-at req > "$dir/churn.out" 2>&1 &
pids+=($!)
wait_for "$dir/churn.out" READY
# the client gives up (REJ timeout) well before the MRA's service timeout;
# its first REQ retry comes after 2 x the path lifetime + the response
# timeout: ~0.2 s on IB, ~2.2 s on RoCE (lifetime 18, as the kernel's)
wait=1
[ "$link" = roce ] && wait=3
run node1 timeout "$wait" "$B/bin/uscm-churn" client 127.10.0.2 -p 7177 -n 1 >/dev/null 2>&1 || true
grep -q "PAUSED req" "$dir/churn.out"
"$B/bin/uscm-sim" down --dir "$dir" >/dev/null
cp "$dir/f.pcap" "$out"
