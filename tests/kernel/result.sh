#!/usr/bin/env bash
# result.sh RUNDIR NAME: the CTest test kernel_NAME, one check of the kernel
# tier's boot (tests/kernel/run.sh, the fixture kernel_guests, ran it). It
# prints the check's verdict and what its sides ran; a failure also prints
# their output, the tails of both guests' consoles and where the link's
# capture is kept. Exit 0 pass, 1 fail, 77 when the boot was skipped.
set -u
run=${1:?usage: result.sh RUNDIR NAME} name=${2:?usage: result.sh RUNDIR NAME}
ck=$run/checks/$name
if [ -f "$run/skipped" ]; then
	echo "[SKIP] kernel_$name: $(cat "$run/skipped")"
	exit 77
fi
res=$(head -1 "$ck/result" 2>/dev/null || echo "fail: no result (the guests never got to this check)")
echo "kernel_$name: $res"
for side in client server; do
	[ -f "$ck/$side.log" ] || continue
	echo "  $side: $(grep -m1 '^# ' "$ck/$side.log" | sed 's/^# //')  -> exit $(cat "$ck/$side.rc" 2>/dev/null || echo '?')"
done
[ -f "$ck/seconds" ] && echo "  $(cat "$ck/seconds") s in the guests"
[ -s "$ck/figure" ] && echo "  client: $(cat "$ck/figure")"
[ "$res" = pass ] && exit 0

for side in client server; do
	[ -f "$ck/$side.log" ] || continue
	echo "---- $side output ----"
	tail -n 40 "$ck/$side.log"
done
for r in K U; do
	echo "---- guest $r console (tail) ----"
	tail -n 30 "$run/$r/console.log" 2>/dev/null || echo "(no console)"
done
echo "kept: $run/K/link.pcap (guest K's capture of the link, every check)"
[ -f "$ck/uscm.pcap" ] && echo "kept: $ck/uscm.pcap (uscm's own USCM_PCAP)"
[ -f "$run/U/uscmd.pcap" ] && echo "kept: $run/U/uscmd.pcap (uscmd's --pcap)"
exit 1
