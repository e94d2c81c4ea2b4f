/*
 * RoCE multicast joins the IP group on the port's netdev, as the kernel's
 * rdma_cm does (lib/cma_mcast.c, cma_mc_ip_hold): on a fabric started with
 * --netns, node i's RoCE GID is bound to the interface uscm<i> of the
 * fabric's namespace, and an unmodified `mckey` receiver there holds
 * 239.1.2.3 on uscm1 — as /proc/net/igmp lists it — while it is joined,
 * and not after it left (its normal exit) or was killed; a process of the
 * library's own that stays leaves it with rdma_leave_multicast and with
 * rdma_destroy_id, and holds none as a send-only member. In process, and
 * through uscmd (test_lib_mcast_ip_daemon), where the client holds the
 * group in its own namespace and drops it when uscmd dies (DEVICE_REMOVAL).
 * The IP join's failure fails the join. Root only (network namespaces).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>

#include "apptest.h"

#define GROUP "239.1.2.3"

TestSuite(mcast_ip, .init = NULL, .fini = lt_fabric_stop, .timeout = 120);

static void need(void)
{
	lt_need("mckey", "rdmacm-utils");
	app_fabric_start("roce", 1);
}

/* The interfaces whose IPv4 groups, as node 1's namespace's /proc/net/igmp
 * lists them, include GROUP: "uscm1 " per holder, "" for none (malloc'd). */
static char *holders(void)
{
	char *out = NULL, *res = calloc(1, 512), hex[16], dev[32] = "";
	struct in_addr a;

	cr_assert(res);
	inet_pton(AF_INET, GROUP, &a);
	/* the kernel prints the group as the 32-bit word it stores, in the
	 * host's byte order */
	snprintf(hex, sizeof(hex), "%08X", a.s_addr);
	cr_assert_eq(app_client(1, 10, "cat /proc/net/igmp", &out), 0, "%s", out);
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		char name[32];
		int idx;

		/* "3\tuscm1     :     2      V3": a device; "\t\t\t\t030201EF ...": its group */
		if (l[0] != '\t' && sscanf(l, "%d %31s", &idx, name) == 2) {
			snprintf(dev, sizeof(dev), "%s", name);
			continue;
		}
		if (strstr(l, hex) && strlen(res) + strlen(dev) + 2 < 512) {
			strcat(res, dev);
			strcat(res, " ");
		}
	}
	free(out);
	return res;
}

/* Waits (ms) until the holders are want; their last reading (malloc'd). */
static char *holders_become(const char *want, int ms)
{
	char *h = NULL;

	for (int t = 0; t <= ms; t += 100) {
		free(h);
		h = holders();
		if (!strcmp(h, want))
			break;
		usleep(100 * 1000);
	}
	return h;
}

/* A receiver of node 1 (its pid in lt_dir/mckey.pid), joined (its output
 * line-buffered: mckey says so on a stdout that is a file). */
static void receiver(int count)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd),
		 "sh -c 'echo $$ >%s/mckey.pid; exec stdbuf -oL mckey -m " GROUP " -b 127.10.0.1 -C %d'", lt_dir,
		 count);
	app_server(1, 60, cmd);
	cr_assert(app_server_says("joined dgid", 20000), "the receiver did not join:\n%s",
		  app_server_out());
}

/* Joined, the group is on uscm1 (the netdev of node 1's GID) and nowhere
 * else; the receiver's normal exit (rdma_leave_multicast, then
 * rdma_destroy_id) leaves it. */
Test(mcast_ip, joined_on_the_ports_netdev_then_left)
{
	char *h, *out = NULL;

	need();
	h = holders();
	cr_assert_str_eq(h, "", "the group before any join: %s", h);
	free(h);
	receiver(2);
	h = holders_become("uscm1 ", 5000);
	cr_expect_str_eq(h, "uscm1 ", "the receiver's group is held on uscm1 only, held on: \"%s\"", h);
	free(h);
	cr_expect_eq(app_client(2, 30, "mckey -m " GROUP " -b 127.10.0.2 -s -C 2", &out), 0, "%s",
		     out);
	free(out);
	cr_expect_eq(app_server_rc(20000), 0, "the receiver:\n%s", app_server_out());
	h = holders_become("", 5000);
	cr_expect_str_eq(h, "", "after the leave the group is still held on \"%s\"", h);
	free(h);
}

/* A receiver killed with SIGKILL leaves no group behind. */
Test(mcast_ip, killed_receiver_leaves_it)
{
	char *h, *pid = NULL;

	need();
	receiver(1000);
	h = holders_become("uscm1 ", 5000);
	cr_expect_str_eq(h, "uscm1 ", "held on: \"%s\"", h);
	free(h);
	cr_assert_eq(lt_sh(&pid, "cat %s/mckey.pid", lt_dir), 0);
	cr_assert_eq(kill(atoi(pid), SIGKILL), 0, "mckey pid %s", pid);
	free(pid);
	h = holders_become("", 5000);
	cr_expect_str_eq(h, "", "after the kill the group is still held on \"%s\"", h);
	free(h);
	cr_expect_neq(app_server_rc(20000), 0);
}

/* The IP join's failure is the join's, as in the kernel (there: ENODEV, a
 * netdev without IPv4): with net.ipv4.igmp_max_memberships 0 in the
 * namespace a socket may join no group, and rdma_join_multicast fails with
 * setsockopt's ENOBUFS. A send-only member joins no IP group (the kernel
 * neither), so its join still succeeds. */
Test(mcast_ip, ip_join_failure_fails_the_join)
{
	char *out = NULL;

	need();
	cr_assert_eq(app_client(1, 10, "sysctl -qw net.ipv4.igmp_max_memberships=0", &out), 0, "%s",
		     out);
	free(out);
	cr_expect_neq(app_client(1, 20, "mckey -m " GROUP " -b 127.10.0.1 -C 1", &out), 0, "%s", out);
	cr_expect(strstr(out, "failure joining: No buffer space available"), "%s", out);
	free(out);
	cr_expect_eq(app_client(1, 20, "mckey -m " GROUP " -b 127.10.0.1 -s -o -C 1", &out), 0,
		     "the send-only member:\n%s", out);
	free(out);
}

/* ---- leave and destroy in a process that stays ------------------------------------ */

static char ns_path[64]; /* the fabric's namespace, for the child */

/* Waits for the id's next event; 0 if it is t with status 0. */
static int next_is(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = lt_event(ch, 10000);
	int ok = ev && ev->event == t && ev->status == 0;

	if (ev)
		rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

static int join(struct rdma_cm_id *id, struct sockaddr *g, uint32_t flags)
{
	struct rdma_cm_join_mc_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	a.join_flags = flags;
	a.addr = g;
	return rdma_join_multicast_ex(id, &a, NULL);
}

/* In the fabric's namespace as node 1: an id on a channel of its own,
 * a full member of grp (MULTICAST_JOIN read). */
static void full_member_of_node1(struct rdma_event_channel **ch, struct rdma_cm_id **id,
				 struct sockaddr_in *grp)
{
	struct sockaddr_in src = lt_sin("127.10.0.1", 0);
	int fd = open(ns_path, O_RDONLY | O_CLOEXEC);

	LT_CK(fd >= 0 && setns(fd, CLONE_NEWNET) == 0);
	close(fd);
	lt_node(1);
	LT_CK((*ch = rdma_create_event_channel()) != NULL);
	LT_CK(rdma_create_id(*ch, id, NULL, RDMA_PS_UDP) == 0);
	LT_CK(rdma_resolve_addr(*id, (struct sockaddr *)&src, (struct sockaddr *)grp, 2000) == 0);
	LT_CK(next_is(*ch, RDMA_CM_EVENT_ADDR_RESOLVED) == 0);
	LT_CK(join(*id, (struct sockaddr *)grp, RDMA_MC_JOIN_FLAG_FULLMEMBER) == 0);
	LT_CK(next_is(*ch, RDMA_CM_EVENT_MULTICAST_JOIN) == 0);
}

/* Node 1 in the fabric's namespace: a full member (says 'j'), left ('l'),
 * a send-only member ('s'), a full member again ('J'), its id destroyed
 * without a leave ('d'); it waits for the parent's go after each. */
static void member(int mode, struct lt_pipes *p)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char c;

	(void)mode;
	full_member_of_node1(&ch, &id, &grp);
	LT_CK(write(p->ready[1], "j", 1) == 1 && read(p->go[0], &c, 1) == 1);
	LT_CK(rdma_leave_multicast(id, (struct sockaddr *)&grp) == 0);
	LT_CK(write(p->ready[1], "l", 1) == 1 && read(p->go[0], &c, 1) == 1);
	LT_CK(join(id, (struct sockaddr *)&grp, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) == 0);
	LT_CK(next_is(ch, RDMA_CM_EVENT_MULTICAST_JOIN) == 0);
	LT_CK(write(p->ready[1], "s", 1) == 1 && read(p->go[0], &c, 1) == 1);
	LT_CK(rdma_leave_multicast(id, (struct sockaddr *)&grp) == 0);
	LT_CK(join(id, (struct sockaddr *)&grp, RDMA_MC_JOIN_FLAG_FULLMEMBER) == 0);
	LT_CK(next_is(ch, RDMA_CM_EVENT_MULTICAST_JOIN) == 0);
	LT_CK(write(p->ready[1], "J", 1) == 1 && read(p->go[0], &c, 1) == 1);
	LT_CK(rdma_destroy_id(id) == 0);
	LT_CK(write(p->ready[1], "d", 1) == 1 && read(p->go[0], &c, 1) == 1);
	rdma_destroy_event_channel(ch);
}

Test(mcast_ip, leave_and_destroy_leave_it_send_only_holds_none)
{
	static const struct {
		char says;
		const char *held;
	} steps[] = { { 'j', "uscm1 " }, { 'l', "" }, { 's', "" }, { 'J', "uscm1 " }, { 'd', "" } };
	struct lt_pipes p;
	char *pid = NULL, cmd[400], path[300];
	pid_t child;

	need();
	/* a process of the fabric's namespace, whose ns/net the child joins */
	snprintf(cmd, sizeof(cmd), "sh -c 'echo $$ >%s/ns.pid; exec sleep 60'", lt_dir);
	app_server(1, 70, cmd);
	snprintf(path, sizeof(path), "%s/ns.pid", lt_dir);
	cr_assert(lt_wait_until(lt_file_size(path) > 0, 10000));
	cr_assert_eq(lt_sh(&pid, "cat %s/ns.pid", lt_dir), 0);
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/net", atoi(pid));
	child = lt_fork_child(member, 0, &p);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		char *h;

		cr_assert_eq(lt_child_says(&p, 20000, "the member did not go on"), steps[i].says);
		h = holders_become(steps[i].held, 3000);
		cr_expect_str_eq(h, steps[i].held, "after '%c' the group is held on \"%s\", not \"%s\"",
				 steps[i].says, h, steps[i].held);
		free(h);
		cr_assert_eq(write(p.go[1], "g", 1), 1);
	}
	lt_reap(child);
	kill(atoi(pid), SIGTERM);
	free(pid);
}

/* ---- uscmd goes away ----------------------------------------------------------------- */

/* A full member of node 1 through uscmd ('j'), then its DEVICE_REMOVAL
 * once uscmd is gone ('r'); it stays until the parent's go. */
static void member_of_uscmd(int mode, struct lt_pipes *p)
{
	struct sockaddr_in grp = lt_sin(GROUP, 0);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char c;

	(void)mode;
	full_member_of_node1(&ch, &id, &grp);
	LT_CK(write(p->ready[1], "j", 1) == 1);
	LT_CK(next_is(ch, RDMA_CM_EVENT_DEVICE_REMOVAL) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1 && read(p->go[0], &c, 1) == 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* Through uscmd: when uscmd dies its clients' ids get DEVICE_REMOVAL and
 * their memberships are gone, IP groups included, while the client lives
 * on (the kernel's device removal leaves them too). */
Test(mcast_ip, uscmd_gone_leaves_it)
{
	struct lt_pipes p;
	char *pid = NULL, *out = NULL, cmd[400], path[300];
	pid_t child;

	if (!getenv("USCM_TEST_DAEMON") || !atoi(getenv("USCM_TEST_DAEMON")))
		tf_deselect("uscmd only (test_lib_mcast_ip_daemon)");
	need();
	snprintf(cmd, sizeof(cmd), "sh -c 'echo $$ >%s/ns.pid; exec sleep 60'", lt_dir);
	app_server(1, 70, cmd);
	snprintf(path, sizeof(path), "%s/ns.pid", lt_dir);
	cr_assert(lt_wait_until(lt_file_size(path) > 0, 10000));
	cr_assert_eq(lt_sh(&pid, "cat %s/ns.pid", lt_dir), 0);
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/net", atoi(pid));
	child = lt_fork_child(member_of_uscmd, 0, &p);
	cr_assert_eq(lt_child_says(&p, 20000, "the member did not join"), 'j');
	free(holders_become("uscm1 ", 3000));
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim uscmd --dir %s node1 kill 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	cr_assert_eq(lt_child_says(&p, 20000, "no DEVICE_REMOVAL"), 'r');
	out = holders();
	cr_expect_str_eq(out, "", "uscmd is gone, the group is still held on \"%s\"", out);
	free(out);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(child);
	kill(atoi(pid), SIGTERM);
	free(pid);
}
