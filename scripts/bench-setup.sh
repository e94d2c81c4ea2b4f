#!/usr/bin/env bash
# The setup figures against the floor: RUNS consecutive runs of uscm-bench pinned to one CPU
# (latency = that CPU's work in series, no halted-vCPU wake-ups), each with
# the UDP floor, the sim's MAD round trip, TCP connect+accept and uscm's
# serial setup with and without QPs in the same run; then one table of
# every run, the medians and the spread of setup p50 around the median.
#   scripts/bench-setup.sh [OUTDIR]     (default bench-results/setup-<UTC time>)
#   RUNS=5 CPU=0 N=1000 SERIAL=1000 MAD=3000 DAEMON=1 (also one --daemon run)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
RUNS=${RUNS:-5}
CPU=${CPU:-0}
N=${N:-1000}
SERIAL=${SERIAL:-1000}
MAD=${MAD:-3000}
out=${1:-bench-results/setup-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
[ -x "$B/bin/uscm-bench" ] || make build >/dev/null
command -v taskset >/dev/null || { echo "bench-setup: taskset (util-linux) is needed" >&2; exit 1; }

{
	echo "date:   $(date -u)"
	echo "nproc:  $(nproc)"
	echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "kernel: $(uname -sr)"
	echo "load:   $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "runs:   $RUNS x taskset -c $CPU uscm-bench -n $N -s $SERIAL --mad $MAD --engine 20000"
} | tee "$out/machine.txt"

for r in $(seq 1 "$RUNS"); do
	taskset -c "$CPU" "$B/bin/uscm-bench" -n "$N" -s "$SERIAL" --mad "$MAD" --engine 20000 \
		--csv "$out/run$r.csv" >"$out/run$r.txt" 2>&1
done
if [ "${DAEMON:-0}" = 1 ]; then
	taskset -c "$CPU" "$B/bin/uscm-bench" -n "$N" -s "$SERIAL" --mad "$MAD" --engine 0 --daemon \
		--csv "$out/daemon.csv" >"$out/daemon.txt" 2>&1
fi

# One line per run from its CSV: the p50 of a step is column 9, a single
# figure (overheads, CPU) column 6. The last column is the engine's CPU
# per handshake (no system call in it): how fast this vCPU ran during that
# run, the yardstick for the spread of the others.
summary() {
	printf '%-4s %6s %6s %5s %6s %6s %5s %6s %6s %5s %6s %6s %6s %6s\n' run floor mad xfl tcp setup xtcp ovh \
		noqp xtcp ovh cpuovh cpunq engns
	for r in $(seq 1 "$RUNS"); do
		awk -F, -v r="$r" -v n="$SERIAL" -v m="$MAD" '
			$1=="udp" && $3==m && $5=="udp_rtt" { fl=$9 }
			$1=="mad" && $3==m && $5=="mad_rtt" { md=$9 }
			$1=="tcp" && $2=="serial" && $5=="established" { tc=$9 }
			$1=="uscm" && $2=="serial" && $5=="established" { su=$9 }
			$1=="uscm-no-qp" && $2=="serial" && $5=="established" { nq=$9 }
			$1=="uscm" && $2=="serial" && $5=="lib_overhead_p50_us" { ov=$6 }
			$1=="uscm-no-qp" && $2=="serial" && $5=="lib_overhead_p50_us" { on=$6 }
			$1=="uscm" && $2=="serial" && $5=="lib_cpu_overhead_us" { co=$6 }
			$1=="uscm-no-qp" && $2=="serial" && $5=="lib_cpu_overhead_us" { cn=$6 }
			$1=="engine" && $5=="handshake" { en=$7 * 1000 }
			END {
				printf "%-4s %6.1f %6.1f %5.2f %6.1f %6.1f %5.2f %6.1f %6.1f %5.2f %6.1f %6.1f %6.1f %6.0f\n",
					r, fl, md, (fl > 0 ? md / fl : 0), tc, su, (tc > 0 ? su / tc : 0), ov,
					nq, (tc > 0 ? nq / tc : 0), on, co, cn, en
			}' "$out/run$r.csv"
	done
}
summary | tee "$out/summary.txt"
# medians and the spread of the setup p50s around their median
awk 'NR > 1 { for (i = 2; i <= NF; i++) v[i, NR - 1] = $i; n = NR - 1 }
	function med(c,   a, i, j, t) {
		for (i = 1; i <= n; i++) a[i] = v[c, i]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function spread(c, name, goal,   m, lo, hi, i) {
		m = med(c); lo = hi = v[c, 1]
		for (i = 1; i <= n; i++) { if (v[c, i] < lo) lo = v[c, i]; if (v[c, i] > hi) hi = v[c, i] }
		printf "%s median %.1f, range %.1f-%.1f: %+.0f%% / %+.0f%%%s\n",
			name, m, lo, hi, 100 * (lo - m) / m, 100 * (hi - m) / m, goal
	}
	END {
		printf "median   %6.1f %6.1f %5.2f %6.1f %6.1f %5.2f %6.1f %6.1f %5.2f %6.1f %6.1f %6.1f %6.0f\n",
			med(2), med(3), med(4), med(5), med(6), med(7), med(8), med(9), med(10), med(11), med(12), med(13),
			med(14)
		spread(6, "setup p50 with QPs      ", " (goal: within 15%)")
		spread(9, "setup p50 without QPs   ", " (goal: within 15%)")
		spread(5, "TCP connect+accept p50  ", " (same runs)")
		spread(14, "engine CPU/handshake, ns", " (same runs: no system call in it, the vCPU speed)")
	}' "$out/summary.txt" | tee -a "$out/summary.txt"
echo "columns: UDP floor p50, MAD round trip p50 (x floor), TCP connect+accept p50, uscm setup p50" \
	"(x TCP) and library overhead (setup - 1.5 MAD), the same without QPs, library CPU overhead" \
	"with and without QPs (us), engine CPU per handshake (ns)" | tee -a "$out/summary.txt"
if [ -f "$out/daemon.txt" ]; then
	grep -E "setup latency p50 daemon|uscmd CPU per connection|uscmd context switches" "$out/daemon.txt" |
		tail -3 | tee -a "$out/summary.txt"
fi
echo "bench-setup: $out"
