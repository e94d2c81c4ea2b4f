#!/usr/bin/env bash
# `make demo`: a live rdma_cm connection on the built-in simulated fabric.
#
# Starts a 2-node IB fabric (SM/SA included) with a capture, runs Debian's
# unmodified `rping` server on node2 and client on node1 against uscm's
# librdmacm (no kernel rdma_ucm anywhere), then decodes what crossed the
# fabric: the SA PathRecord query and the CM handshake and teardown, with
# uscm-decode and with tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
dir=$(mktemp -d /tmp/uscm-demo.XXXXXX)
pcap="$dir/rping.pcap"
server_pid=""
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
	"$B/bin/uscm-sim" down --dir "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "== uscm-sim up: 2 nodes, InfiniBand, capture in $pcap"
"$B/bin/uscm-sim" up --dir "$dir" --nodes 2 --link ib --pcap "$pcap" >/dev/null
"$B/bin/uscm-sim" status --dir "$dir" | sed -n '1,6p'

export USCM_SIM_DIR="$dir"
export LD_LIBRARY_PATH="$PWD/$B/lib:$PWD/$B/sim/lib"
# A REQ that beats the server's listen is retried after ~70 ms, not ~4 s.
export USCM_CM_RESPONSE_TIMEOUT=14

echo
echo "== rping (Debian's binary, unmodified) over uscm's librdmacm: server node2, client node1"
USCM_SIM_NODE=node2 rping -s -a 127.10.0.2 -p 7174 -C 3 -v > "$dir/server.out" 2>&1 &
server_pid=$!
sleep 0.5
USCM_SIM_NODE=node1 USCM_TRACE=1 rping -c -a 127.10.0.2 -p 7174 -C 3 -v 2> "$dir/trace.txt"
wait "$server_pid" && echo "(server exited 0)"
server_pid=""

echo
echo "== the client's CM engine, state by state (USCM_TRACE=1)"
grep -v -- '->.*: drop' "$dir/trace.txt" | grep -- ' -> ' || true

"$B/bin/uscm-sim" down --dir "$dir" >/dev/null
echo
echo "== uscm-decode $pcap (MADs only; the RC data frames are counted as skipped)"
"$B/bin/uscm-decode" "$pcap"
echo
echo "== uscm-decode -v: the REQ, every field"
"$B/bin/uscm-decode" -v "$pcap" | sed -n '/ CM Send REQ/,/ CM Send REP/p' | sed '$d'
if command -v tshark >/dev/null; then
	echo
	echo "== tshark, the independent decoder, on the same capture (MADs only)"
	tshark -r "$pcap" -Y 'infiniband.mad' 2>/dev/null || true
fi
