#!/usr/bin/env bash
# rsockets against the sim's RC verbs and TCP, in one run:
#   scripts/bench-rsockets.sh [OUTDIR]       (default bench-results/rsockets-<UTC time>)
#
# A benchmark, not a test: it prints figures and ratios, it asserts nothing.
# One 2-node uscm-sim fabric per link type (--no-uscmd: in-process CM), the
# server on node1 (127.10.0.1), the client on node2, and for each repetition:
#
#   rsockets  unmodified Debian `rstream` over uscm's librdmacm (lib/rs_*.c)
#   verbs     perftest `ib_send_lat` / `ib_send_bw` (RC SEND, QPs moved by
#             hand, the exchange over perftest's TCP socket), the sim's
#             libibverbs: the floor rsockets runs on. At the port's active
#             MTU (4096 on IB)
#   verbs-cm  the same with -R: QPs connected through uscm's rdma_cm, as
#             rsockets' are, so at the SA PathRecord's MTU (on IB 4096, the
#             ports' capability, as OpenSM answers; RoCE 1024): like for
#             like with rsockets (the sim's cost is per packet)
#   tcp       `rstream -T s`: the same program over kernel TCP sockets
#             between the same two addresses (loopback)
#
# each in two modes: "spin" (rstream's default: non-blocking calls retried at
# once; perftest's busy polling of the CQ) and "block" (rstream -T b:
# blocking calls; perftest -e: completion events). Figures:
#
#   lat  LAT_SIZE bytes ping-pong, LAT_ITERS round trips: one-way µs =
#        rstream's usec/xfer (average over the run) and perftest's t_avg
#        (and t_typical, its median, beside it)
#   bw   BW_BYTES per direction in messages of each of BW_SIZES: Gb/s
#        (10^9 bit/s). rstream sends all its transfers one way, then all back
#        (usec/xfer over both); ib_send_bw one way (BW average, MB = 2^20)
#
# REPS repetitions; per figure min / median / max, and the ratios of the
# medians: rsockets / verbs and rsockets / verbs-cm (goals: latency <= 1.2,
# bandwidth >= 0.8) and rsockets / TCP. Environment knobs (defaults):
#   LINKS="ib"  REPS=3  LAT_SIZE=64  LAT_ITERS=10000  BW_SIZES="65536 1048576"
#   BW_BYTES=67108864  MODES="spin block"  PERF=0 (1: perf record rstream's
#   client in a spin latency and a spin 64 KiB bandwidth run, perf-*.txt)
#   RS_LIBS="" : "LABEL=DIR ..." runs rstream's rsockets rows once more per
#   entry with DIR/librdmacm.so.1 in place of the build's (rows
#   lat-rsockets:LABEL...): a before/after of an rs_*.c change in one run
#
# Needs rdmacm-utils (rstream) and perftest (scripts/install-deps.sh installs
# both) and the build (make). The machine's load is printed at the start and
# the end: on a shared 2-core machine every figure moves with it.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
LINKS=${LINKS:-ib}
REPS=${REPS:-3}
LAT_SIZE=${LAT_SIZE:-64}
LAT_ITERS=${LAT_ITERS:-10000}
BW_SIZES=${BW_SIZES:-"65536 1048576"}
BW_BYTES=${BW_BYTES:-67108864}
MODES=${MODES:-"spin block"}
PERF=${PERF:-0}
RS_LIBS=${RS_LIBS:-}
out=${1:-bench-results/rsockets-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

for bin in rstream ib_send_lat ib_send_bw; do
	command -v "$bin" >/dev/null || { echo "$bin is missing: scripts/install-deps.sh" >&2; exit 1; }
done
[ -x "$B/bin/uscm-sim" ] || { echo "$B/bin/uscm-sim is missing: make" >&2; exit 1; }
SIM=$(cd "$B/bin" && pwd)/uscm-sim

# ports of this run's own: the TCP ones (rstream -T s, perftest's exchange)
# are kernel sockets every fabric on the machine shares
base=$((30000 + $$ % 20000))
dir=""
srvpid=""
cleanup() {
	[ -n "$srvpid" ] && kill "$srvpid" 2>/dev/null || true
	[ -n "$dir" ] && { "$SIM" stop --dir "$dir" >/dev/null 2>&1 || true; rm -rf "${dir%/f}"; }
}
trap cleanup EXIT

machine() {
	echo "date:   $(date -u)"
	echo "nproc:  $(nproc)"
	echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "kernel: $(uname -sr)"
	echo "load:   $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "rstream: $(dpkg-query -W -f='${Version}' rdmacm-utils 2>/dev/null || echo ?)" \
	     " perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null || echo ?)"
}
machine | tee "$out/machine.txt"

# run NODE CMD...: CMD on this fabric's NODE (uscm's librdmacm, the sim's
# libibverbs); a short CM response timeout so a REQ that beat the server's
# listen is retried within ~0.2 s (as the tests do)
run() {
	local node=$1
	shift
	USCM_CM_RESPONSE_TIMEOUT=14 "$SIM" run --dir "$dir" --node "$node" -- \
		sh -c 'LD_LIBRARY_PATH=$RS_LIBDIR${RS_LIBDIR:+:}$LD_LIBRARY_PATH exec timeout 120 "$@"' sh "$@"
}
export RS_LIBDIR=""


# pair LOG PORT SERVER-CMD -- CLIENT-CMD: the server in the background on
# node1, the client on node2, started again while the server does not
# listen yet. The client's output in LOG.c, the server's in LOG.s; 0 when
# both exited 0.
pair() {
	local log=$1 port=$2
	shift 2
	local s=() c=()
	while [ "$1" != -- ]; do s+=("$1"); shift; done
	shift
	c=("$@")
	run node1 "${s[@]}" >"$log.s" 2>&1 &
	srvpid=$!
	local st=1
	for _ in $(seq 100); do
		# perftest's exchange: connect only once its TCP socket listens
		if [ "$port" != 0 ] && ! awk '$4 == "0A" {print $2}' /proc/net/tcp |
			grep -qi "$(printf ':%04X$' "$port")"; then
			sleep 0.1
			continue
		fi
		if run node2 "${c[@]}" >"$log.c" 2>&1; then
			st=0
			break
		fi
		grep -qiE 'refused|no route|Unexpected CM event|Couldn.t connect|REJECTED' "$log.c" || break
		# perftest -R: a REQ that beat its server's new listen is
		# rejected and perftest does not recover (its test file says
		# why): that server is started again
		if grep -q 'RDMA_CM_EVENT_REJECTED' "$log.c" || ! kill -0 "$srvpid" 2>/dev/null; then
			kill "$srvpid" 2>/dev/null || true
			wait "$srvpid" 2>/dev/null || true
			run node1 "${s[@]}" >"$log.s" 2>&1 &
			srvpid=$!
		fi
		sleep 0.1
	done
	[ $st = 0 ] || kill "$srvpid" 2>/dev/null || true
	wait "$srvpid" || st=1
	srvpid=""
	return $st
}

# figures (one line each into $out/raw.txt): LINK MODE KIND SIZE REP VALUE
fig() { echo "$*" >>"$out/raw.txt"; }

# rstream's last result line: ... Gb/sec usec/xfer
rs_usec() { awk '$1 == "custom" {v = $NF} END {if (v == "") exit 1; print v}' "$1"; }
# perftest: the line after the "#bytes" header, field n
pt_field() { awk -v n="$2" 'f {print $n; exit} /#bytes/ {f = 1}' "$1"; }

one_rep() {
	local link=$1 mode=$2 rep=$3 tag rsopt=() ptopt=() log v p
	tag="$out/$link-$mode-$rep"
	[ "$mode" = block ] && { rsopt=(-T b); ptopt=(-e); }
	p=$((base + rep * 20))
	[ "$mode" = block ] && p=$((p + 10))

	# latency: a ping-pong of LAT_SIZE, LAT_ITERS round trips
	for lib in "" $RS_LIBS; do
		RS_LIBDIR=${lib#*=}
		local sfx=${lib:+:${lib%%=*}}
		log=$tag-lat-rs${sfx#:}
		if pair "$log" 0 rstream -b 127.10.0.1 -p $p "${rsopt[@]}" -S "$LAT_SIZE" -C 1 -I "$LAT_ITERS" -- \
			rstream -s 127.10.0.1 -p $p "${rsopt[@]}" -S "$LAT_SIZE" -C 1 -I "$LAT_ITERS" &&
			v=$(rs_usec "$log.c"); then fig "$link $mode lat-rsockets$sfx $LAT_SIZE $rep $v"; fi
	done
	RS_LIBDIR=""
	log=$tag-lat-verbs
	if pair "$log" $((p + 1)) ib_send_lat -p $((p + 1)) "${ptopt[@]}" -s "$LAT_SIZE" -n "$LAT_ITERS" -- \
		ib_send_lat -p $((p + 1)) "${ptopt[@]}" -s "$LAT_SIZE" -n "$LAT_ITERS" 127.10.0.1; then
		v=$(pt_field "$log.c" 6) && fig "$link $mode lat-verbs $LAT_SIZE $rep $v"
		v=$(pt_field "$log.c" 5) && fig "$link $mode lat-verbs-typical $LAT_SIZE $rep $v"
	fi
	# the same over QPs connected by rdma_cm (-R), as rsockets' are: the
	# path MTU is then the SA PathRecord's (4096 on IB since the built-in
	# SA answers as OpenSM does; it was 2048), not necessarily the port's
	# active MTU that perftest sets by hand; the client gets a
	# firmware-like modify_qp delay against perftest -R's own race
	log=$tag-lat-verbs-cm
	if pair "$log" 0 ib_send_lat -R -p $((p + 6)) "${ptopt[@]}" -s "$LAT_SIZE" -n "$LAT_ITERS" -- \
		env USCM_SIM_MODIFY_QP_DELAY_MS=20 ib_send_lat -R -p $((p + 6)) "${ptopt[@]}" -s "$LAT_SIZE" \
		-n "$LAT_ITERS" 127.10.0.1; then
		v=$(pt_field "$log.c" 6) && fig "$link $mode lat-verbs-cm $LAT_SIZE $rep $v"
	fi
	log=$tag-lat-tcp
	if pair "$log" $((p + 2)) rstream -T s -b 127.10.0.1 -p $((p + 2)) "${rsopt[@]}" -S "$LAT_SIZE" -C 1 -I "$LAT_ITERS" -- \
		rstream -T s -s 127.10.0.1 -p $((p + 2)) "${rsopt[@]}" -S "$LAT_SIZE" -C 1 -I "$LAT_ITERS" &&
		v=$(rs_usec "$log.c"); then fig "$link $mode lat-tcp $LAT_SIZE $rep $v"; fi

	# bandwidth: BW_BYTES per direction in SIZE messages
	for size in $BW_SIZES; do
		local n=$((BW_BYTES / size))
		[ $n -ge 1 ] || n=1
		for lib in "" $RS_LIBS; do
			RS_LIBDIR=${lib#*=}
			local sfx=${lib:+:${lib%%=*}}
			log=$tag-bw$size-rs${sfx#:}
			if pair "$log" 0 rstream -b 127.10.0.1 -p $((p + 3)) "${rsopt[@]}" -S "$size" -C $n -I 1 -- \
				rstream -s 127.10.0.1 -p $((p + 3)) "${rsopt[@]}" -S "$size" -C $n -I 1 &&
				v=$(rs_usec "$log.c"); then
				fig "$link $mode bw-rsockets$sfx $size $rep $(awk -v s="$size" -v u="$v" 'BEGIN {printf "%.3f", s * 8 / u / 1000}')"
			fi
		done
		RS_LIBDIR=""
		log=$tag-bw$size-verbs
		if pair "$log" $((p + 4)) ib_send_bw -p $((p + 4)) "${ptopt[@]}" -s "$size" -n $n -- \
			ib_send_bw -p $((p + 4)) "${ptopt[@]}" -s "$size" -n $n 127.10.0.1 &&
			v=$(pt_field "$log.c" 4); then
			fig "$link $mode bw-verbs $size $rep $(awk -v m="$v" 'BEGIN {printf "%.3f", m * 1048576 * 8 / 1e9}')"
		fi
		log=$tag-bw$size-verbs-cm
		if pair "$log" 0 ib_send_bw -R -p $((p + 7)) "${ptopt[@]}" -s "$size" -n $n -- \
			env USCM_SIM_MODIFY_QP_DELAY_MS=20 ib_send_bw -R -p $((p + 7)) "${ptopt[@]}" -s "$size" -n $n \
			127.10.0.1 && v=$(pt_field "$log.c" 4); then
			fig "$link $mode bw-verbs-cm $size $rep $(awk -v m="$v" 'BEGIN {printf "%.3f", m * 1048576 * 8 / 1e9}')"
		fi
		log=$tag-bw$size-tcp
		if pair "$log" $((p + 5)) rstream -T s -b 127.10.0.1 -p $((p + 5)) "${rsopt[@]}" -S "$size" -C $n -I 1 -- \
			rstream -T s -s 127.10.0.1 -p $((p + 5)) "${rsopt[@]}" -S "$size" -C $n -I 1 &&
			v=$(rs_usec "$log.c"); then
			fig "$link $mode bw-tcp $size $rep $(awk -v s="$size" -v u="$v" 'BEGIN {printf "%.3f", s * 8 / u / 1000}')"
		fi
	done
}

# perf-LINK-WHAT.txt: rstream's client under perf record (spin mode)
profile() {
	local link=$1 what=$2 p=$((base + 900)) opts
	case $what in
	lat) opts=(-S "$LAT_SIZE" -C 1 -I "$LAT_ITERS") ;;
	*) opts=(-S 65536 -C $((BW_BYTES / 65536)) -I 1) ;;
	esac
	pair "$out/perf-$link-$what" 0 rstream -b 127.10.0.1 -p $p "${opts[@]}" -- \
		perf record -q -F 2999 -o "$out/perf-$link-$what.data" rstream -s 127.10.0.1 -p $p "${opts[@]}" || true
	perf report -i "$out/perf-$link-$what.data" --no-children -g none --sort dso,sym 2>/dev/null |
		grep -v '^#' | grep -v '^$' | grep '%' | head -40 >"$out/perf-$link-$what.txt" || true
}

: >"$out/raw.txt"
for link in $LINKS; do
	dir=$(mktemp -d /tmp/uscm-bench-rs.XXXXXX)
	USCM_SIM_WATCH_PID=$$ "$SIM" start --dir "$dir/f" --nodes 2 --link "$link" --no-uscmd >/dev/null
	dir=$dir/f
	for rep in $(seq "$REPS"); do
		for mode in $MODES; do
			echo "== $link $mode rep $rep (load $(cut -d' ' -f1 /proc/loadavg))" >&2
			one_rep "$link" "$mode" "$rep"
		done
	done
	if [ "$PERF" = 1 ]; then
		profile "$link" lat
		profile "$link" bw
	fi
	"$SIM" stop --dir "$dir" >/dev/null 2>&1 || true
	rm -rf "${dir%/f}"
	dir=""
done

# the summary: per (link, mode, kind, size) min / median / max over the
# repetitions, then the ratios of the medians
awk -v reps="$REPS" '
# the goals (docs/performance.md): latency <= 1.2 x verbs, bandwidth >= 0.8 x verbs
function verdict(kind, r) {
	if (r < 0) return "?"
	if (kind == "lat") return r <= 1.2 ? "<=1.2 met" : "<=1.2 NOT"
	return r >= 0.8 ? ">=0.8 met" : ">=0.8 NOT"
}
function med(k,   n, a, i, j, t) {
	n = split(vals[k], a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j] + 0 < a[j - 1] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	mn[k] = a[1]; mx[k] = a[n]; cnt[k] = n
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; vals[k] = vals[k] " " $6; if (!(k in seen)) { seen[k] = 1; order[++nk] = k } }
END {
	printf "%-5s %-6s %-20s %8s %5s %10s %10s %10s\n", "link", "mode", "figure", "size", "runs", "min", "median", "max"
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, f, SUBSEP); m[k] = med(k)
		unit = f[3] ~ /^lat/ ? "us" : "Gb/s"
		printf "%-5s %-6s %-20s %8s %5d %10.2f %10.2f %10.2f  %s\n", f[1], f[2], f[3], f[4], cnt[k], mn[k], m[k], mx[k], unit
	}
	print ""
	printf "%-5s %-6s %-20s %8s %7s %-12s %8s %-12s %7s\n", "link", "mode", "figure", "size",
		"/verbs", "goal", "/verbs-cm", "goal", "/tcp"
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, f, SUBSEP)
		if (f[3] !~ /^(lat|bw)-rsockets/) continue
		kind = f[3] ~ /^lat/ ? "lat" : "bw"
		kv = f[1] SUBSEP f[2] SUBSEP kind "-verbs" SUBSEP f[4]
		kc = f[1] SUBSEP f[2] SUBSEP kind "-verbs-cm" SUBSEP f[4]
		kt = f[1] SUBSEP f[2] SUBSEP kind "-tcp" SUBSEP f[4]
		rv = (kv in m) && m[kv] > 0 ? m[k] / m[kv] : -1
		rc = (kc in m) && m[kc] > 0 ? m[k] / m[kc] : -1
		rt = (kt in m) && m[kt] > 0 ? m[k] / m[kt] : -1
		printf "%-5s %-6s %-20s %8s %7s %-12s %8s %-12s %7s\n", f[1], f[2], f[3], f[4],
			rv < 0 ? "n/a" : sprintf("%.2f", rv), verdict(kind, rv),
			rc < 0 ? "n/a" : sprintf("%.2f", rc), verdict(kind, rc),
			rt < 0 ? "n/a" : sprintf("%.2f", rt)
	}
	print "\nlat: one-way us (rstream usec/xfer, perftest t_avg; lat-verbs-typical = t_typical);" \
	      " bw: Gb/s; ratios of the medians.\nverbs: perftest, QPs moved by hand at the port MTU (4096);" \
	      " verbs-cm: perftest -R, QPs connected by rdma_cm as rsockets are (the PathRecord MTU)."
}' "$out/raw.txt" | tee "$out/summary.txt"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/summary.txt"
echo "results in $out" >&2
