#!/usr/bin/env bash
# Installs the Debian packages uscm needs to build, test and demo, only those
# that are missing, non-interactively. Safe to run repeatedly.
set -euo pipefail

PKGS=(
  cmake make gcc pkg-config
  clang libclang-rt-14-dev      # libFuzzer targets, clang sanitizer runtimes
  libibverbs-dev libibumad-dev  # the real headers/ABIs production code uses
  libcriterion-dev              # unit tests
  tshark                        # the independent decoding oracle
  infiniband-diags ibverbs-utils rdmacm-utils  # unmodified clients run on sim/
  chromium                      # renders uscm-decode's ladder SVG in a test (headless)
  valgrind                      # leak check of an unmodified client (fault matrix)
  groff-base man-db mandoc      # man pages render without warnings (tests/test_install.c)
  libfabric-bin                 # fi_info / fi_pingpong on the sim (tests/lib/test_lib_apps_fabric.c)
  iproute2                      # `ip` for uscm-sim --netns (a node interface libfabric and UCX look for)
  python3-pyverbs               # pyverbs CMID client/server (tests/lib/test_lib_apps_pyverbs.c)
  ucx-utils libucx-dev          # ucx_info / ucx_perftest / a UCP client-server (tests/lib/test_lib_apps_ucx.c)
  perftest qperf                # unmodified verbs benchmarks over rdma_cm on sim/ (test_lib_apps_perftest)
  iperf3 socat                  # TCP programs over rsockets via librspreload (tests/lib/test_lib_apps_rspreload.c)
  qemu-system-x86 linux-image-amd64 busybox-static tcpdump
                                # the kernel tier (tests/kernel/, docs/kernel-tier.md): two qemu
                                # guests of Debian's kernel with Soft-RoCE, a busybox initramfs,
                                # guest K's capture of the link
  opensm                        # Debian's subnet manager as the sim's SM/SA: uscm-sim --sm opensm (tests/lib/test_lib_opensm.c)
                                # perftest, libfabric, UCX and pyverbs also check that programs linking
                                # libmlx5/libefa load over sim/'s libibverbs (test_sim_verbs_private)
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}" >&2
# tshark asks whether non-root users may capture; answer "no" up front.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
export DEBIAN_FRONTEND=noninteractive
# linux-image-amd64 is there for its vmlinuz and modules (the kernel tier
# boots them with an initramfs of its own, tests/kernel/mkinitramfs.sh):
# skip the kernel hook's update-initramfs, half a minute of CPU per kernel
export INITRD=No
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
