#!/usr/bin/env bash
# The benchmark set behind docs/performance.md, results into one directory:
#   scripts/bench.sh [OUTDIR]        (default bench-results/<UTC time>)
#
#  machine.txt          nproc, CPU model, kernel, load at the start
#  uscm-bench.txt/.csv  uscm vs TCP loopback, N = 100, 1000, 3000, 10000 concurrent,
#                       1000 serial (latency), MAD round trip, engine ceiling
#  uscm-bench.png       latency and rate against N (gnuplot)
#  scale.txt/.csv       per-connection cost from 1k to 100k connections held by
#                       one server process (4 client processes on 4 nodes: one
#                       process has 28k ephemeral ports), no QPs, 1000 in flight
#  daemon.txt/.csv      the same runs in-process and through uscmd (daemon
#                       mode): 1000 concurrent + 1000 serial with QPs; 1k and
#                       10k from 4 client processes without QPs; daemon/in-process
#                       ratios and uscmd's memory per connection
#  cmtime.txt           Debian's unmodified `cmtime -c 1000` over uscm's
#                       librdmacm on the simulated fabric
#  perf-10k.txt         (with PROFILE=1) perf report of a 10k uscm run
#
# gnuplot (and rdmacm-utils for cmtime) are installed here on demand; `make
# test` needs neither.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
out=${1:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

need() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }
need gnuplot gnuplot-nox
need cmtime rdmacm-utils
[ -x "$B/bin/uscm-bench" ] || make build >/dev/null

{
	echo "date:   $(date -u)"
	echo "nproc:  $(nproc)"
	echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "kernel: $(uname -sr)"
	echo "load:   $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt"

echo "== uscm-bench: 100..10000 concurrent, 1000 serial" >&2
"$B/bin/uscm-bench" -n 100,1000,3000,10000 -s 1000 --mad 5000 --engine 20000 \
	--csv "$out/uscm-bench.csv" --plot "$out/uscm-bench.png" | tee "$out/uscm-bench.txt"

echo "== scale: 1k..100k connections to one server, 4 client processes, no QPs, 1000 in flight" >&2
"$B/bin/uscm-bench" -n 1000,10000,100000 --clients 4 --no-qp -w 250 -s 0 --mad 0 --engine 0 --no-tcp \
	--csv "$out/scale.csv" | tee "$out/scale.txt"

echo "== daemon mode: in-process vs uscmd, 1000 concurrent + 1000 serial, then 1k/10k from 4 processes" >&2
"$B/bin/uscm-bench" -n 1000 -s 1000 --daemon --mad 0 --engine 0 --no-tcp \
	--csv "$out/daemon.csv" | tee "$out/daemon.txt"
"$B/bin/uscm-bench" -n 1000,10000 --clients 4 --no-qp -w 1000 -s 0 --daemon --mad 0 --engine 0 \
	--no-tcp --csv "$out/daemon-scale.csv" | tee -a "$out/daemon.txt"

echo "== Debian's cmtime -c 1000 on the fabric" >&2
dir=$(mktemp -d /tmp/uscm-bench-cmtime.XXXXXX)
srv=""
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null || true
	"$B/bin/uscm-sim" stop --dir "$dir" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
"$B/bin/uscm-sim" start --dir "$dir" --nodes 2 --link ib --no-uscmd >/dev/null
USCM_MAX_BACKLOG=1048576 USCM_MAX_PENDING=1048576 "$B/bin/uscm-sim" run --dir "$dir" --node node2 -- cmtime -c 1000 >/dev/null 2>&1 &
srv=$!
sleep 0.5
"$B/bin/uscm-sim" run --dir "$dir" --node node1 -- cmtime -s 127.10.0.2 -c 1000 2>&1 | tee "$out/cmtime.txt"

if [ "${PROFILE:-0}" = 1 ]; then
	echo "== perf: a 10k uscm run" >&2
	perf record -F 999 -g -o "$out/perf.data" -- "$B/bin/uscm-bench" -n 10000 -s 0 --mad 0 --engine 0 \
		--no-tcp >/dev/null 2>&1
	perf report -i "$out/perf.data" --no-children --sort comm,dso,sym > "$out/perf-report.txt" 2>/dev/null || true
	sed -n 1,80p "$out/perf-report.txt" > "$out/perf-10k.txt"
fi
echo "results in $out" >&2
