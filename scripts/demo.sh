#!/usr/bin/env bash
# `make demo`: a live rdma_cm connection on the built-in simulated fabric.
#
# Starts a 2-node IB fabric (SM/SA included, and uscmd — the CM as a host
# service — on each node) with a capture, runs Debian's unmodified `rping`
# server on node2 and client on node1 against uscm's librdmacm (no kernel
# rdma_ucm anywhere; each process talks to its node's uscmd), then both
# sides of rping on ONE node (two processes sharing the port through its
# uscmd), then uscm-rdma-demo (our own
# rdma_cm API client: connect with private data, SEND, RDMA WRITE, SEND,
# disconnect) on the same fabric, printing both sides' event flows with
# timings; then decodes what crossed the fabric (both connections): the SA
# PathRecord queries and the CM handshakes and teardowns, with uscm-decode
# and with tshark; last, tshark with uscm's plugin (uscm_cm.lua) on a second
# fabric's capture holding an MRA and a SIDR exchange
# (scripts/sim-cm-capture.sh).
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

# The CM runs in each node's uscmd, which inherits this environment: a REQ
# that beats the server's listen is retried after ~70 ms, not ~4 s, and the
# engines trace every state change into the daemons' logs.
export USCM_CM_RESPONSE_TIMEOUT=14
export USCM_TRACE=1
echo "== uscm-sim up: 2 nodes, InfiniBand, a uscmd per node, capture in $pcap"
"$B/bin/uscm-sim" up --dir "$dir" --nodes 2 --link ib --pcap "$pcap" >/dev/null
"$B/bin/uscm-sim" status --dir "$dir" | sed -n '1,6p'
unset USCM_TRACE

export USCM_SIM_DIR="$dir"
export USCM_HOSTS="$dir/hosts"
export LD_LIBRARY_PATH="$PWD/$B/lib:$PWD/$B/sim/lib"
# node N's programs: its uscmd's socket (what `uscm-sim run --node N` sets)
on() { local n=$1; shift; USCM_SIM_NODE=$n USCM_SOCKET="$dir/$n/uscmd.sock" "$@"; }

echo
echo "== rping (Debian's binary, unmodified) over uscm's librdmacm: server node2, client node1"
on node2 rping -s -a 127.10.0.2 -p 7174 -C 3 -v > "$dir/server.out" 2>&1 &
server_pid=$!
sleep 0.5
on node1 rping -c -a 127.10.0.2 -p 7174 -C 3 -v
wait "$server_pid" && echo "(server exited 0)"
server_pid=""

echo
echo "== node1's CM engine (in its uscmd), state by state (USCM_TRACE=1)"
grep -v -- '->.*: drop' "$dir/node1/uscmd.log" | grep -- ' -> ' || true

echo
echo "== the host service: rping server AND client on node1, two processes sharing its port"
on node1 rping -s -a 127.10.0.1 -p 7176 -C 2 -v > "$dir/server1.out" 2>&1 &
server_pid=$!
sleep 0.5
on node1 rping -c -a 127.10.0.1 -p 7176 -C 2 -v
wait "$server_pid" && echo "(server on node1 exited 0)"
server_pid=""
echo "-- uscmd --status on node1"
"$B/bin/uscmd" --status --socket "$dir/node1/uscmd.sock"

echo
echo "== uscm-rdma-demo over the rdma_cm API: server node2, client node1"
echo "   (connect + private data, SEND, buffer advert, RDMA WRITE, SEND, verify, disconnect;"
echo "    ms since each side started; the client retries while the server is not listening)"
on node2 timeout 60 "$B/bin/uscm-rdma-demo" server -p 7175 > "$dir/demo-server.out" 2>&1 &
server_pid=$!
client_rc=0
on node1 timeout 60 "$B/bin/uscm-rdma-demo" client 127.10.0.2 -p 7175 \
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
# (awk reads to the end: a reader that quits early would SIGPIPE uscm-decode
# and pipefail would end the demo)
"$B/bin/uscm-decode" -v "$pcap" |
	awk 'done { next } f && / CM Send REP/ { done = 1; next } / CM Send REQ/ { f = 1 } f'
if command -v tshark >/dev/null; then
	echo
	echo "== tshark, the independent decoder, on the same capture (MADs only)"
	tshark -r "$pcap" -Y 'infiniband.mad' 2>/dev/null || true
fi

echo
echo "== uscm's Wireshark plugin ($B/tools/wireshark/uscm_cm.lua, generated from cm_proto's tables;"
echo "   docs/capture.md): tshark's view of an MRA and a SIDR exchange, which the traffic above has"
echo "   none of: a fresh fabric's wire with udaddy (SIDR) and a server slow to accept (MRA)"
if command -v tshark >/dev/null; then
	# a fabric of its own: nothing of the one above in the environment
	env -u USCM_SIM_DIR -u USCM_HOSTS -u USCM_SOCKET -u LD_LIBRARY_PATH USCM_BUILD="$B" \
		scripts/sim-cm-capture.sh "$dir/cm.pcap" ib
	lua="-X lua_script:$B/tools/wireshark/uscm_cm.lua"
	tshark -r "$dir/cm.pcap" $lua -Y 'uscm_cm' 2>/dev/null
	echo "-- the MRA and the SIDR exchange, every field (tshark -V -O uscm_cm; reserved rows left out)"
	tshark -r "$dir/cm.pcap" $lua -Y 'uscm_cm.mra || uscm_cm.sidr_req || uscm_cm.sidr_rep' \
		-V -O uscm_cm 2>/dev/null | grep -v -e '^Frame ' -e '^Ethernet' -e '^Internet' \
		-e '^User Datagram' -e '^InfiniBand' -e '^Extensible Record' -e '= reserved: 0$' -e ' reserved: 0$' \
		-e ' reserved: 0x0*$'
else
	echo "(tshark not installed: scripts/install-deps.sh)"
fi
