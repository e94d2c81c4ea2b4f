#!/usr/bin/env bash
# The fault matrix (docs/reliability.md): runs every cell of
# tests/lib/test_lib_faults.c — the CI cells and the on-demand ones
# (USCM_FAULTS_FULL=1: 10k connections, cmtime -c 2000) — against the
# built tree and prints the table with the measured outcomes and times.
#
#   scripts/fault-matrix.sh            # every cell
#   scripts/fault-matrix.sh --ci       # only what CI runs
#   scripts/fault-matrix.sh CELL       # one cell (USCM_FAULTS_ONLY)
#   scripts/fault-matrix.sh --daemon [--ci|CELL]   # the same with a uscmd per
#                                      # node (daemon mode)
#   B=build-asan scripts/fault-matrix.sh   # against the ASan/UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
full=1
only=""
daemon=0
if [ "${1:-}" = "--daemon" ]; then
	daemon=1
	shift
fi
case "${1:-}" in
--ci) full=0 ;;
"") ;;
*) only=$1 ;;
esac
[ -x "$B/tests/test_lib_faults" ] || { echo "build first: make (or cmake --build $B)" >&2; exit 2; }
report=$(mktemp /tmp/uscm-fault-matrix.XXXXXX)
trap 'rm -f "$report"' EXIT
export USCM_BIN_DIR="$PWD/$B/bin" USCM_SOURCE_DIR="$PWD"
export LD_LIBRARY_PATH="$PWD/$B/lib:$PWD/$B/sim/lib"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
start=$(date +%s)
rc=0
USCM_TEST_DAEMON=$daemon USCM_FAULTS_FULL=$full USCM_FAULTS_ONLY=$only USCM_FAULTS_REPORT=$report \
	"$B/tests/test_lib_faults" --jobs 1 >"$report.log" 2>&1 || rc=$?
tail -1 "$report.log"
[ $rc -eq 0 ] || { grep -v '^\[----\]   $' "$report.log" | grep -B1 -A3 'Failed\|FAIL' | head -60; }
rm -f "$report.log"
echo
echo "| cell | fault / action | client outcome | server outcome | time ms | bound ms | run | result | expected |"
echo "| --- | --- | --- | --- | --: | --: | --- | --- | --- |"
awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$report"
echo
echo "$(wc -l <"$report") cells in $(( $(date +%s) - start )) s ($B, $([ $daemon = 1 ] && echo "daemon mode" || echo "in-process mode"))"
exit $rc
