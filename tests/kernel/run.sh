#!/usr/bin/env bash
# run.sh DIR: the kernel tier's boot (docs/kernel-tier.md). Boots guest K
# (the kernel's rdma_cm) and guest U (uscm) of the host's own Debian kernel
# under qemu, joined by one guest-to-guest link and nothing else, runs
# tests/kernel/checks.list in them once (tests/kernel/guest.sh) and leaves
# each check's files in DIR/run/checks/NAME/ for the CTest test of that
# check (tests/kernel/result.sh). DIR/run also keeps the guests' consoles
# (K/console.log, U/console.log) and guest K's capture of the link
# (K/link.pcap) until the next run.
#
# Exit: 0 when both guests ran the whole list (whatever the checks said:
# each check is a test of its own), 1 when they did not, 77 when something
# scripts/install-deps.sh installs is missing (1 under USCM_REQUIRE_ALL=1,
# as tests/test_skip.h). USCM_KERNEL_ACCEL=kvm|tcg overrides the probe;
# USCM_KERNEL_TIMEOUT (s, default 720) bounds the whole boot;
# USCM_KERNEL_ONLY=REGEX runs only the checks whose names match.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: run.sh DIR}
build=${USCM_BUILD_DIR:?USCM_BUILD_DIR (the build tree) is not set}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
run=$dir/run
rm -rf "$run"
mkdir -p "$run/K" "$run/U" "$run/sync" "$run/checks"

say() { echo "kernel tier: $*"; }
missing() {
	echo "$*" >"$run/skipped"
	if [ "${USCM_REQUIRE_ALL:-0}" != 0 ]; then
		say "USCM_REQUIRE_ALL=1, missing is a failure: $*"
		exit 1
	fi
	say "[SKIP] $*"
	exit 77
}

# ---- prerequisites (all of them installed by scripts/install-deps.sh) ----
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || missing "qemu-system-x86_64 is not installed (Debian qemu-system-x86)"
command -v busybox >/dev/null || missing "busybox is not installed (Debian busybox-static)"
command -v tcpdump >/dev/null || missing "tcpdump is not installed (Debian tcpdump)"
for p in rping ucmatose udaddy; do
	command -v $p >/dev/null || missing "$p is not installed (Debian rdmacm-utils)"
done
command -v rdma >/dev/null || missing "rdma is not installed (Debian iproute2)"
command -v ibv_devinfo >/dev/null || missing "ibv_devinfo is not installed (Debian ibverbs-utils)"
[ -x "$build/bin/uscmd" ] && [ -e "$build/lib/librdmacm.so.1" ] ||
	missing "$build has no bin/uscmd or lib/librdmacm.so.1 (build it first)"
# the newest kernel of /boot whose modules include Soft-RoCE
kver=
for v in $(ls /boot/vmlinuz-* 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V); do
	ls /lib/modules/"$v"/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko* >/dev/null 2>&1 && kver=$v
done
[ -n "$kver" ] || missing "no /boot/vmlinuz-* with rdma_rxe in /lib/modules (Debian linux-image-amd64)"
case "$build$here$run" in *[[:space:]]*)
	say "the kernel command line cannot carry a path with a space: $here, $build"
	exit 1 ;;
esac

# ---- the kernel and the initramfs (into DIR, never the source tree) ----
# qemu boots an ELF vmlinux through its PVH entry point at once; the
# bzImage would spend about a minute under TCG in its own decompressor.
vmlinux=$dir/vmlinux-$kver
if [ ! -s "$vmlinux" ] || [ "/boot/vmlinuz-$kver" -nt "$vmlinux" ]; then
	rm -f "$vmlinux"
	for magic in xz gzip zstd; do
		case $magic in
		xz) sig=$'\xfd7zXZ\x00' dec="xz -dc --single-stream" ;;
		gzip) sig=$'\x1f\x8b\x08' dec="gzip -dc" ;;
		zstd) sig=$'\x28\xb5\x2f\xfd' dec="zstd -qdc" ;;
		esac
		command -v ${dec%% *} >/dev/null || continue
		# every place the compressor's magic appears; the payload is the
		# first that decompresses into an ELF file
		for off in $(LC_ALL=C grep -abo "$sig" "/boot/vmlinuz-$kver" | cut -d: -f1 | head -5); do
			tail -c +$((off + 1)) "/boot/vmlinuz-$kver" | $dec >"$vmlinux.tmp" 2>/dev/null || true
			if [ "$(head -c 4 "$vmlinux.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
				mv "$vmlinux.tmp" "$vmlinux"
				break 2
			fi
		done
	done
	rm -f "$vmlinux.tmp"
	[ -s "$vmlinux" ] || { say "cannot extract an ELF vmlinux from /boot/vmlinuz-$kver"; exit 1; }
fi
initrd=$dir/initramfs-$kver.cpio
bash "$here/mkinitramfs.sh" "$kver" "$initrd" "$here/init"

# ---- KVM when it works, TCG otherwise ----
# A /dev/kvm that opens is not enough: a nested, software-backed one has
# been seen to abort qemu (MSR 0x10a) or to boot Linux many times slower
# than TCG. The probe boots the real kernel to a script that powers off at
# once; its answer is kept (per kernel and qemu) in DIR.
# start_qemu ACCEL ROLE OUTDIR CONSOLE EXTRA...: a guest in the background
# ($! its qemu); the host's / read-only and OUTDIR writable over 9p, no
# network device but what EXTRA adds
start_qemu() {
	local a=$1 r=$2 o=$3 c=$4
	shift 4
	nice -n 5 "$qemu" -nodefaults -no-user-config -M pc -accel "$a" -m 1024 -smp 1 \
		-display none -nic none -no-reboot -kernel "$vmlinux" -initrd "$initrd" \
		-append "console=ttyS0,115200 panic=-1 kt_role=$r kt_init=$here/guest.sh" \
		-serial "file:$c" \
		-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
		-fsdev "local,id=ktout,path=$o,security_model=none,multidevs=remap" \
		-device virtio-9p-pci,fsdev=ktout,mount_tag=ktout \
		"$@" &
}

accel=${USCM_KERNEL_ACCEL:-auto}
if [ "$accel" = auto ]; then
	accel=tcg
	key="$kver $("$qemu" --version | head -1)"
	if [ -f "$dir/accel" ] && [ "$(sed -n 2p "$dir/accel")" = "$key" ]; then
		accel=$(sed -n 1p "$dir/accel")
	elif [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		probe=$dir/probe
		rm -rf "$probe"
		mkdir -p "$probe"
		echo "KT_PROBE=1" >"$probe/env"
		start_qemu kvm P "$probe" "$probe/console.log"
		pid=$!
		for _ in $(seq 40); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
		kill -KILL $pid 2>/dev/null || true
		wait $pid 2>/dev/null || true
		grep -qs probed "$probe/P/status" && accel=kvm
	fi
	printf '%s\n%s\n' "$accel" "$key" >"$dir/accel"
fi
say "kernel $kver, qemu $("$qemu" --version | head -1 | awk '{ print $4 }'), accel $accel"

# ---- the pair ----
# USCM_KERNEL_ONLY=REGEX: only the checks whose names match (a pair by
# hand: USCM_KERNEL_ONLY=rping_kernel_to_uscm-uscmd); the others then have
# no result
grep -v '^#' "$here/checks.list" | awk -v re="${USCM_KERNEL_ONLY:-.}" 'NF && $1 ~ re' >"$run/checks.list"
[ -s "$run/checks.list" ] || { say "USCM_KERNEL_ONLY=$USCM_KERNEL_ONLY matches no check"; exit 1; }
cat >"$run/env" <<EOF
KT_SRC=$(cd "$here/../.." && pwd)
KT_BUILD=$build
KT_LIST=/ktout/checks.list
EOF
t0=$SECONDS
# guest K listens for the link on a free port of 127.0.0.1, guest U
# connects to it: the link reaches nothing but the other guest
kpid= upid=
for try in 1 2 3 4 5; do
	port=$((20000 + (RANDOM % 20000)))
	hexport=$(printf '%04X' $port)
	grep -q ":$hexport " /proc/net/tcp && continue
	start_qemu "$accel" K "$run" "$run/K/console.log" \
		-netdev "socket,id=link,listen=127.0.0.1:$port" \
		-device virtio-net-pci,netdev=link,mac=52:54:00:12:00:01
	kpid=$!
	for _ in $(seq 100); do
		kill -0 $kpid 2>/dev/null || break
		awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A"' /proc/net/tcp | grep -q . && break
		sleep 0.1
	done
	kill -0 $kpid 2>/dev/null && break
	wait $kpid || true
	kpid=
done
[ -n "$kpid" ] || { say "guest K's qemu did not start"; exit 1; }
start_qemu "$accel" U "$run" "$run/U/console.log" \
	-netdev "socket,id=link,connect=127.0.0.1:$port" \
	-device virtio-net-pci,netdev=link,mac=52:54:00:12:00:02
upid=$!

deadline=$((SECONDS + ${USCM_KERNEL_TIMEOUT:-720}))
gone_at=
while :; do
	kalive=0 ualive=0
	kill -0 $kpid 2>/dev/null && kalive=1
	kill -0 $upid 2>/dev/null && ualive=1
	[ $kalive = 0 ] && [ $ualive = 0 ] && break
	if [ $SECONDS -ge $deadline ]; then
		say "the guests did not finish in ${USCM_KERNEL_TIMEOUT:-720} s: stopped"
		break
	fi
	# one guest ended without finishing: the other stops waiting for it
	if [ $((kalive + ualive)) = 1 ] && [ -z "$gone_at" ]; then
		r=K
		[ $kalive = 1 ] && r=U
		grep -qs '^done$' "$run/$r/status" || { touch "$run/sync/gone"; gone_at=$SECONDS; }
		[ -n "$gone_at" ] && deadline=$((SECONDS + 60 < deadline ? SECONDS + 60 : deadline))
	fi
	sleep 1
done
kill -KILL $kpid $upid 2>/dev/null || true
wait $kpid 2>/dev/null || true
wait $upid 2>/dev/null || true
elapsed=$((SECONDS - t0))
echo $elapsed >"$run/seconds"

# ---- what happened ----
ok=1
pass=0 fail=0
while read -r name _; do
	case $name in '' | \#*) continue ;; esac
	res=$(head -1 "$run/checks/$name/result" 2>/dev/null || echo "no result")
	[ "$res" = pass ] && pass=$((pass + 1)) || fail=$((fail + 1))
	fig=$(cat "$run/checks/$name/figure" 2>/dev/null || true)
	printf '  %-46s %s%s\n' "$name" "$res" "${fig:+ ($fig)}"
done <"$run/checks.list"
for r in K U; do
	st=$(cat "$run/$r/status" 2>/dev/null || echo "(none: the guest did not get to the end)")
	say "guest $r: $st"
	[ "$st" = done ] || ok=0
done
say "$pass passed, $fail failed in ${elapsed} s ($accel); consoles, logs and the link's capture in $run"
if [ $ok = 0 ]; then
	for r in K U; do
		echo "---- guest $r console (tail) ----"
		tail -n 40 "$run/$r/console.log" 2>/dev/null || true
	done
	exit 1
fi
exit 0
