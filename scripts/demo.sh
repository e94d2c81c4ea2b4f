#!/usr/bin/env bash
# `make demo`: a live rdma_cm connection on the built-in simulated fabric.
#
# Starts a 2-node IB fabric (SM/SA included) with a capture, runs Debian's
# unmodified `rping` server on node2 and client on node1 against uscm's
# librdmacm (no kernel rdma_ucm anywhere), then uscm-rdma-demo (our own
# rdma_cm API client: connect with private data, SEND, RDMA WRITE, SEND,
# disconnect) on the same fabric, printing both sides' event flows with
# timings; then decodes what crossed the fabric (both connections): the SA
# PathRecord queries and the CM handshakes and teardowns, with uscm-decode
# and with tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
dir=$(mktemp -d /tmp/uscm-demo.XXXXXX)
pcap="$dir/fabric.pcap"
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

echo
echo "== uscm-rdma-demo over the rdma_cm API: server node2, client node1"
echo "   (connect + private data, SEND, buffer advert, RDMA WRITE, SEND, verify, disconnect;"
echo "    ms since each side started; the client retries while the server is not listening)"
USCM_SIM_NODE=node2 timeout 60 "$B/bin/uscm-rdma-demo" server -p 7175 > "$dir/demo-server.out" 2>&1 &
server_pid=$!
client_rc=0
USCM_SIM_NODE=node1 timeout 60 "$B/bin/uscm-rdma-demo" client 127.10.0.2 -p 7175 \
	> "$dir/demo-client.out" 2>&1 || client_rc=$?
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""
echo "-- client (node1), exit $client_rc"
cat "$dir/demo-client.out"
echo "-- server (node2), exit $server_rc"
cat "$dir/demo-server.out"
if [ "$client_rc" -ne 0 ] || [ "$server_rc" -ne 0 ]; then
	echo "uscm-rdma-demo failed" >&2
	exit 1
fi

"$B/bin/uscm-sim" down --dir "$dir" >/dev/null
echo
echo "== uscm-decode $pcap (MADs only; the RC data frames are counted as skipped)"
"$B/bin/uscm-decode" "$pcap"
echo
echo "== uscm-decode --ladder: the same capture as a sequence diagram per connection (SVG: $dir/demo.svg)"
"$B/bin/uscm-decode" --ladder --ladder-svg "$dir/demo.svg" "$pcap"
echo
echo "== uscm-decode -v: the (first, rping's) REQ, every field"
"$B/bin/uscm-decode" -v "$pcap" | sed -n '/ CM Send REQ/,/ CM Send REP/p;/ CM Send REP/q' | sed '$d'
if command -v tshark >/dev/null; then
	echo
	echo "== tshark, the independent decoder, on the same capture (MADs only)"
	tshark -r "$pcap" -Y 'infiniband.mad' 2>/dev/null || true
fi
