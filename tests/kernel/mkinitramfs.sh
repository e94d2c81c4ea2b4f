#!/usr/bin/env bash
# mkinitramfs.sh KVER OUT.cpio INIT
#
# The kernel tier's initramfs (docs/kernel-tier.md): busybox-static, the
# modules needed to reach the host's / over virtio-9p and lay a tmpfs
# overlay on it (nothing else: everything after that comes from the host's
# own /lib/modules through the overlay), and INIT as /init. Written into the
# build tree at test time, never committed.
set -euo pipefail
kver=$1 out=$2 init=$3

bb=$(command -v busybox || true)
[ -n "$bb" ] || { echo "mkinitramfs: busybox not found (Debian busybox-static)" >&2; exit 2; }
# a dynamically linked busybox cannot run before the host's / is mounted
if ldd "$bb" >/dev/null 2>&1; then
	echo "mkinitramfs: $bb is dynamically linked (install busybox-static)" >&2
	exit 2
fi
[ -d "/lib/modules/$kver" ] || { echo "mkinitramfs: no /lib/modules/$kver" >&2; exit 2; }

tmp=$(mktemp -d "${out}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/mods" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/lower" \
	"$tmp/rw" "$tmp/newroot"
cp "$bb" "$tmp/bin/busybox"
cp "$init" "$tmp/init"
chmod 755 "$tmp/init" "$tmp/bin/busybox"

# In the order modprobe would load them, dependencies first (virtio_ring
# before virtio before the transports); a module two of them need is
# loaded once. "builtin" lines need nothing.
: >"$tmp/mods/order"
for m in virtio_pci 9pnet_virtio 9p overlay; do
	modprobe --show-depends -S "$kver" "$m" | awk '$1 == "insmod" { print $2 }'
done | while read -r ko; do
	base=$(basename "$ko")
	base=${base%.xz} base=${base%.zst}
	grep -qx "$base" "$tmp/mods/order" && continue
	# busybox's insmod takes plain .ko files only
	case "$ko" in
	*.ko) cp "$ko" "$tmp/mods/$base" ;;
	*.ko.xz) xz -dc "$ko" >"$tmp/mods/$base" ;;
	*.ko.zst) zstd -qdc "$ko" >"$tmp/mods/$base" ;;
	*) echo "mkinitramfs: cannot load $ko" >&2; exit 2 ;;
	esac
	echo "$base" >>"$tmp/mods/order"
done
[ -s "$tmp/mods/order" ] || { echo "mkinitramfs: modprobe found no module" >&2; exit 2; }

# uncompressed: under TCG a decompressor costs more than reading the bytes
(cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) >"$out.new"
mv "$out.new" "$out"
