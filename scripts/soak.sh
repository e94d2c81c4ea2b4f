#!/usr/bin/env bash
# The soak test (docs/reliability.md, "Soak") for as long as asked:
#
#   scripts/soak.sh [SECONDS [CSV]]     # default 3600 s, CSV soak-<SECONDS>s.csv
#
# runs tests/lib/test_lib_soak.c with USCM_SOAK_SECONDS (CTest runs it for
# 120 s, 20 s in the ASan build) and prints its summary line; the CSV has
# one sample of VmRSS and open fds of the client and the server per row.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
secs=${1:-3600}
csv=${2:-$PWD/soak-${secs}s.csv}
[ -x "$B/tests/test_lib_soak" ] || { echo "build first: make (or cmake --build $B)" >&2; exit 2; }
export USCM_BIN_DIR="$PWD/$B/bin" USCM_SOURCE_DIR="$PWD"
export LD_LIBRARY_PATH="$PWD/$B/lib:$PWD/$B/sim/lib"
export USCM_SOAK_SECONDS=$secs USCM_SOAK_CSV=$csv
rc=0
"$B/tests/test_lib_soak" --jobs 1 >"$csv.log" 2>&1 || rc=$?
grep -v '^\[----\]   $' "$csv.log" | grep -E 'SOAK|Synthesis|Assertion|grew|peak|status|ok ' || true
rm -f "$csv.log"
echo "samples: $csv"
exit $rc
