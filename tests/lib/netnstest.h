/* Two network namespaces joined by veths, for the tests of resolution and
 * namespaces on the simulated RoCE fabric (test_lib_netns.c,
 * test_lib_hostile_resolve.c):
 *
 *   namespace A (node 1)  a0 127.10.0.1/24 ==veth== b0 127.10.0.2/24  namespace B (node 2)
 *                         a1 10.99.0.1/24  ==veth== b1 10.99.0.2/24   (NT_FULL)
 *                         a0 fd00::1/64             b0 fd00::2/64     (NT_FULL)
 *
 * route_localnet=1, so that 127.10/16, the sim's node addresses, travel on
 * the veths. The fabric stays in the root namespace (docs/sim.md). Header
 * only; after libtest.h. */
#ifndef USCM_NETNSTEST_H
#define USCM_NETNSTEST_H

#include <fcntl.h>
#include <sched.h>

#include "libtest.h"

enum { NT_FIRST = 0, NT_FULL = 1 };

/* The namespaces' names ("" when none are up). */
static char nsa[32], nsb[32];

static inline void nt_down(void)
{
	if (nsa[0])
		lt_sh(NULL, "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null; true", nsa, nsb);
	nsa[0] = 0;
}

/* A and B (named PREFIX A/B and this process's pid), the first veth pair,
 * with NT_FULL the second and IPv6 on the first, configured (its link-local
 * and multicast routes there); skips where namespaces cannot be made. */
static inline void nt_up(const char *prefix, int what)
{
	char *out = NULL;
	int pid = (int)getpid(), rc;

	if (lt_sh(NULL, "command -v ip >/dev/null") != 0)
		tf_skip_missing("ip (Debian iproute2) is not installed");
	snprintf(nsa, sizeof(nsa), "%sA%d", prefix, pid);
	snprintf(nsb, sizeof(nsb), "%sB%d", prefix, pid);
	if (lt_sh(&out, "ip netns add %s 2>&1", nsa) != 0) {
		nsa[0] = 0;
		cr_skip_test("cannot create a network namespace here (needs root): %s", out);
	}
	free(out);
	out = NULL;
	rc = lt_sh(&out,
		   "set -e; A=%s; B=%s; F=%d; ip netns add $B;"
		   /* no Duplicate Address Detection: the links are usable at once */
		   "for n in $A $B; do ip netns exec $n sysctl -qw net.ipv6.conf.all.accept_dad=0"
		   "  net.ipv6.conf.default.accept_dad=0; done;"
		   "ip link add ${A}a0 netns $A type veth peer name ${B}b0 netns $B;"
		   "ip -n $A addr add 127.10.0.1/24 dev ${A}a0; ip -n $B addr add 127.10.0.2/24 dev ${B}b0;"
		   "if [ $F = 1 ]; then"
		   "  ip link add ${A}a1 netns $A type veth peer name ${B}b1 netns $B;"
		   "  ip -n $A addr add 10.99.0.1/24 dev ${A}a1; ip -n $B addr add 10.99.0.2/24 dev ${B}b1;"
		   "  ip -n $A addr add fd00::1/64 dev ${A}a0 nodad; ip -n $B addr add fd00::2/64 dev ${B}b0 nodad;"
		   "fi;"
		   "for n in $A $B; do ip netns exec $n sysctl -qw net.ipv4.conf.all.route_localnet=1;"
		   "  for l in $(ip -n $n -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do"
		   "    ip netns exec $n sysctl -qw net.ipv4.conf.$l.route_localnet=1; ip -n $n link set $l up; done; done 2>&1",
		   nsa, nsb, what == NT_FULL);
	cr_assert_eq(rc, 0, "namespace setup: %s", out);
	free(out);
	out = NULL;
	if (what != NT_FULL)
		return;
	/* IPv6 on a new interface is configured once the kernel's link watch
	 * has run (up to a second after it came up): until its link-local and
	 * multicast routes exist, Neighbour Solicitations and Advertisements
	 * are not sent, and a test would measure the kernel's retransmission
	 * (1 s). Wait for those routes on both sides. */
	rc = lt_sh(&out,
		   "ready() { ip -n $1 -6 route show table local | grep -q '^multicast ff00::/8' &&"
		   "  ip -n $1 -6 route show | grep -q '^fe80::/64'; };"
		   "for i in $(seq 1 60); do ready %s && ready %s && exit 0; sleep 0.05; done;"
		   "ip -n %s -6 route show table all; exit 1",
		   nsa, nsb, nsa);
	cr_assert_eq(rc, 0, "IPv6 never came up on the veths: %s", out);
	free(out);
}

/* Each node's uscmd restarted in its node's namespace, where it resolves,
 * with the fabric's hosts file emptied (uscm-sim hands it to the daemons;
 * it names 127.10.0.1 and .2): the routing table decides for them too. */
static inline void nt_daemons_in_namespaces(void)
{
	char *out = NULL;

	cr_assert_eq(lt_sh(NULL, ": >'%s/hosts'", getenv("USCM_SIM_DIR")), 0);
	for (int n = 1; n <= 2; n++) {
		int rc = lt_sh(&out, "ip netns exec %s %s/uscm-sim uscmd --dir %s node%d restart 2>&1",
			       n == 1 ? nsa : nsb, lt_bin(), getenv("USCM_SIM_DIR"), n);

		cr_assert_eq(rc, 0, "uscmd node%d in its namespace: %s", n, out);
		free(out);
		out = NULL;
	}
}

/* This process into A as node 1, without a hosts file. */
static inline void nt_enter_a(void)
{
	char path[64];
	int fd;

	setenv("USCM_HOSTS", "/nonexistent/uscm-no-hosts", 1);
	snprintf(path, sizeof(path), "/run/netns/%s", nsa);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(setns(fd, CLONE_NEWNET), 0, "setns: %s", strerror(errno));
	close(fd);
	lt_node(1);
}

#endif
