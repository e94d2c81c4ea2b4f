/*
 * test_lib_netns.c - rdma_resolve_addr through the routing and neighbour
 * tables, on the simulated RoCE fabric with real IP interfaces
 * in network namespaces the test creates:
 *
 *   namespace A (node 1)  a0 127.10.0.1/24 ==veth== b0 127.10.0.2/24  namespace B (node 2)
 *                         a1 10.99.0.1/24  ==veth== b1 10.99.0.2/24
 *
 * (route_localnet=1, so that 127.10/16, the sim's node addresses, travel
 * on the veths.) The fabric stays in the root namespace; a node's program
 * runs in its namespace, where the sim's libibverbs reports its GID as
 * bound to the interface holding its address (a0 / b0), and its datagrams
 * still travel in the fabric's namespace (docs/sim.md). No hosts file
 * (USCM_HOSTS names a missing one): the routing table decides.
 *
 * The test process itself becomes node 1 in namespace A; node 2's
 * programs (unmodified rping) run in B through `ip netns exec`. In daemon
 * mode (rping_ipv6_daemon, and every test under CTest's
 * test_lib_netns_daemon, USCM_TEST_DAEMON=1) each node's uscmd is
 * restarted in its node's namespace, where it resolves addresses, with
 * the fabric's hosts file emptied (uscm-sim hands it to the daemons).
 * In two_namespaces_one_uscmd node 1's uscmd stays in the root namespace
 * and serves programs in A and B, each in its own namespace (its port
 * space, its addresses).
 * Skipped
 * only when this machine cannot create network namespaces (not root);
 * iproute2 missing is a missing prerequisite.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "libtest.h"
#include "netnstest.h"

static void teardown(void)
{
	lt_fabric_stop();
	nt_down();
}

TestSuite(netns, .fini = teardown, .timeout = 60);

/* The two namespaces and their veths; the fabric (RoCE); this process
 * enters A as node 1. daemon: 0 in-process; 1 each node's uscmd in its
 * node's namespace; 2 the uscmds stay in the root namespace (serving
 * clients in A and B). */
static void net_up_mode(int daemon)
{
	char *out = NULL;
	int rc;

	nt_up("u", NT_FULL);
	if (daemon == 2) {
		lt_fabric_start_daemon("roce", 2);
		/* each node's netdev is in its namespace: a program of the node
		 * there reads its GID table once, and the sim then reports the
		 * GIDs bound to that interface to the uscmds in the root
		 * namespace too, as the kernel's GID table holds the netdevs of
		 * every namespace (docs/sim.md) */
		for (int n = 1; n <= 2; n++) {
			rc = lt_sh(&out, "ip netns exec %s env USCM_SIM_NODE=node%d %s ibv_devinfo -v 2>&1",
				   n == 1 ? nsa : nsb, n, lt_util_env());
			cr_assert_eq(rc, 0, "ibv_devinfo of node%d: %s", n, out);
			free(out);
			out = NULL;
		}
	} else if (daemon) {
		/* each node's uscmd in the node's namespace: the resolution is
		 * uscmd's, in the namespace it runs in */
		lt_fabric_start_daemon("roce", 2);
		nt_daemons_in_namespaces();
	} else {
		lt_fabric_start_opts("roce", 2, "--no-uscmd");
	}
	nt_enter_a();
}

/* In-process, or (USCM_TEST_DAEMON=1: CTest's test_lib_netns_daemon) each
 * node's uscmd in its namespace, which then resolves for this process. */
static void net_up(void)
{
	const char *d = getenv("USCM_TEST_DAEMON");

	net_up_mode(d && atoi(d));
}

static struct sockaddr_in sin4(const char *ip)
{
	return lt_sin(ip, 7471);
}

/* rdma_resolve_addr(dst, timeout) on a new id: the event, and how long
 * the call itself and the event took (ms). */
static struct rdma_cm_event *resolve(struct rdma_event_channel *ch, struct rdma_cm_id **id,
				     struct sockaddr *src, struct sockaddr *dst, int timeout,
				     uint64_t *call_ms, uint64_t *event_ms)
{
	uint64_t t0;

	cr_assert_eq(rdma_create_id(ch, id, NULL, RDMA_PS_TCP), 0);
	t0 = lt_now_ms();
	cr_assert_eq(rdma_resolve_addr(*id, src, dst, timeout), 0, "%s", strerror(errno));
	*call_ms = lt_now_ms() - t0;
	struct rdma_cm_event *ev = lt_event(ch, timeout + 3000);
	*event_ms = lt_now_ms() - t0;
	cr_assert(ev, "no event");
	return ev;
}

static int neigh_state(const char *ns, const char *ip, const char *state)
{
	return lt_sh(NULL, "ip -n %s neigh show %s | grep -q %s", ns, ip, state) == 0;
}

/* No neighbour entry: the call returns at once, ARP runs, ADDR_RESOLVED
 * within timeout_ms; the source is the route's (a0's address, not a1's),
 * the port and GID those of a0; the route follows on that GID. */
Test(netns, resolve_without_neighbour_entry)
{
	static const uint8_t sgid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 10, 0, 1 };
	static const uint8_t dgid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 10, 0, 2 };
	struct sockaddr_in dst = sin4("127.10.0.2");
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	cr_assert(!neigh_state(nsa, "127.10.0.2", "lladdr"), "no entry before");
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED, "%s %d", rdma_event_str(ev->event),
		     ev->status);
	rdma_ack_cm_event(ev);
	cr_expect_lt(call_ms, 500, "the call does not wait for ARP (%llu ms)",
		     (unsigned long long)call_ms);
	cr_expect_leq(ev_ms, 2000, "within timeout_ms (%llu ms)", (unsigned long long)ev_ms);
	cr_expect(neigh_state(nsa, "127.10.0.2", "lladdr"), "the kernel resolved the neighbour");
	cr_expect_eq(id->route.addr.src_sin.sin_addr.s_addr, inet_addr("127.10.0.1"),
		     "the source the route prefers");
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.sgid.raw, sgid, 16);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, dgid, 16);
	cr_assert_eq(rdma_resolve_route(id, 1000), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000);
	rdma_ack_cm_event(ev);
	cr_expect_arr_eq(id->route.path_rec->sgid.raw, sgid, 16);
	cr_expect_arr_eq(id->route.path_rec->dgid.raw, dgid, 16);
	rdma_destroy_id(id);
	/* A second time: the entry is valid, answered at once. */
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* The second interface: a1's subnet routes out of an interface no RDMA
 * port is bound to: ADDR_ERROR -ENODEV, as the kernel (no device); its
 * address cannot be a source either. */
Test(netns, interface_without_rdma_port)
{
	struct sockaddr_in dst = sin4("10.99.0.2"), src = sin4("10.99.0.1");
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 1000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ENODEV);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	src.sin_port = 0;
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_expect_eq(rdma_bind_addr(id, (struct sockaddr *)&src), -1);
	cr_expect_eq(errno, EADDRNOTAVAIL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* An address of a0's subnet nobody holds: ARP gets no answer, ADDR_ERROR
 * -ETIMEDOUT once timeout_ms is over (not before, not much after). */
Test(netns, nobody_answers)
{
	struct sockaddr_in dst = sin4("127.10.0.77");
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 700, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ETIMEDOUT);
	rdma_ack_cm_event(ev);
	cr_expect_lt(call_ms, 300);
	cr_expect_geq(ev_ms, 650, "not before timeout_ms (%llu ms)", (unsigned long long)ev_ms);
	cr_expect_leq(ev_ms, 1200, "soon after timeout_ms (%llu ms)", (unsigned long long)ev_ms);
	/* destroying an id while its neighbour is awaited */
	ev_ms = lt_now_ms();
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 5000), 0);
	cr_expect_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 5000), -1,
		     "one resolution at a time");
	cr_expect_eq(rdma_listen(id, 1), -1, "no listen while resolving (the kernel's ADDR_QUERY)");
	cr_expect_eq(errno, EINVAL);
	cr_assert_eq(rdma_destroy_id(id), 0);
	cr_expect_lt(lt_now_ms() - ev_ms, 1000, "destroy does not wait for ARP");
	cr_expect_null(lt_event(ch, 200));
	rdma_destroy_event_channel(ch);
}

/* Unmodified rping, server on node 2 in B, client on node 1 in A, with no
 * neighbour entries: the client's library resolves 127.10.0.2 through
 * ARP. */
Test(netns, rping_through_arp)
{
	char *out = NULL;
	int st;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	net_up();
	lt_sh(NULL,
	      "ip netns exec %s env USCM_SIM_NODE=node2 %s timeout 20 rping -s -a 127.10.0.2 -C 3 -v "
	      ">%s/server.out 2>&1 &",
	      nsb, lt_util_env(), getenv("USCM_SIM_DIR"));
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		st = lt_sh(&out, "USCM_SIM_NODE=node1 %s timeout 20 rping -c -a 127.10.0.2 -C 3 -v 2>&1",
			   lt_util_env());
		if (st == 0 || !strstr(out, "REJECTED"))
			break;
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "rping -c exited %d:\n%s", st, out);
	cr_expect(strstr(out, "rdma-ping-2"), "%s", out);
	free(out);
}

/* Runs an unmodified server in B (node 2) and client in A (node 1); the
 * client's output, its exit status in *st. */
static char *pair(const char *server, const char *client, int *st)
{
	char *out = NULL;

	lt_sh(NULL,
	      "ip netns exec %s env USCM_SIM_NODE=node2 %s timeout 20 %s >%s/server.out 2>&1 &",
	      nsb, lt_util_env(), server, getenv("USCM_SIM_DIR"));
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		*st = lt_sh(&out, "USCM_SIM_NODE=node1 %s timeout 20 %s 2>&1", lt_util_env(), client);
		/* not listening yet: REJECTED (RC), UNREACHABLE (UD: the SIDR
		 * answer for an unknown service ID; a server in daemon mode
		 * takes longer to listen) */
		if (*st == 0 || !(strstr(out, "REJECTED") || strstr(out, "UNREACHABLE")))
			break;
		usleep(100 * 1000);
	}
	return out;
}

/* Unmodified rping -a fd00::2 between the namespaces, the nodes' CM
 * in-process or in a uscmd per node (each in its node's namespace). */
static void rping_ipv6(int daemon)
{
	char *out;
	int st;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	net_up_mode(daemon);
	out = pair("rping -s -a fd00::2 -C 3 -v", "rping -c -a fd00::2 -C 3 -v", &st);
	cr_expect_eq(st, 0, "rping -c -a fd00::2 (%s) exited %d:\n%s",
		     daemon == 2 ? "uscmds in the root namespace" : daemon ? "daemon mode" : "in-process",
		     st, out);
	cr_expect(strstr(out, "rdma-ping-2"), "%s", out);
	cr_expect(neigh_state(nsa, "fd00::2", "lladdr"), "Neighbour Discovery ran");
	free(out);
}

/* IPv6 end to end: the route and Neighbour Discovery choose a0 and its
 * GID fd00::1 (the sim's GID table lists the interface's IPv6 addresses,
 * as the kernel's does). */
Test(netns, rping_ipv6)
{
	rping_ipv6(0);
}

/* The same in daemon mode. */
Test(netns, rping_ipv6_daemon)
{
	rping_ipv6(1);
}

/* The same with both nodes' uscmds in the root namespace: each resolves,
 * binds and takes the connection request in its client's namespace. */
Test(netns, rping_ipv6_uscmd_in_root)
{
	rping_ipv6(2);
}

/* This process in A is a client of node 1's uscmd in the root namespace:
 * the routing and neighbour tables are A's (the root namespace has no
 * route to fd00::/64 nor the veths): fd00::2 resolves through a0 from
 * fd00::1 (Neighbour Discovery in A), 10.99.0.2 routes out of a1, which
 * has no RDMA port (-ENODEV), and nobody at 127.10.0.77 is -ETIMEDOUT
 * after timeout_ms, as in process. */
Test(netns, resolve_in_the_clients_namespace)
{
	struct sockaddr_in6 dst6 = { .sin6_family = AF_INET6, .sin6_port = htons(7471) };
	struct sockaddr_in nodev = sin4("10.99.0.2"), nobody = sin4("127.10.0.77");
	uint8_t want[16];
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up_mode(2);
	inet_pton(AF_INET6, "fd00::2", &dst6.sin6_addr);
	inet_pton(AF_INET6, "fd00::1", want);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst6, 3000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED, "%s %d", rdma_event_str(ev->event),
		     ev->status);
	rdma_ack_cm_event(ev);
	cr_expect_arr_eq(id->route.addr.src_sin6.sin6_addr.s6_addr, want, 16, "A's route's source");
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.sgid.raw, want, 16, "the GID of a0");
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, dst6.sin6_addr.s6_addr, 16);
	cr_expect(neigh_state(nsa, "fd00::2", "lladdr"), "Neighbour Discovery ran in A");
	rdma_destroy_id(id);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&nodev, 1000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ENODEV);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&nobody, 700, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ETIMEDOUT);
	rdma_ack_cm_event(ev);
	cr_expect_geq(ev_ms, 650, "not before timeout_ms (%llu ms)", (unsigned long long)ev_ms);
	cr_expect_leq(ev_ms, 1300, "soon after timeout_ms (%llu ms)", (unsigned long long)ev_ms);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* IPv6: unmodified ucmatose, two connections. */
Test(netns, ucmatose_ipv6)
{
	char *out;
	int st;

	if (lt_sh(NULL, "command -v ucmatose >/dev/null") != 0)
		tf_skip_missing("ucmatose (Debian rdmacm-utils) is not installed");
	net_up();
	out = pair("ucmatose -b fd00::2 -c 2", "ucmatose -s fd00::2 -c 2", &st);
	cr_expect_eq(st, 0, "ucmatose -s fd00::2 exited %d:\n%s", st, out);
	cr_expect(strstr(out, "test complete"), "%s", out);
	free(out);
}

/* IPv6 in this process: the source GID is the IPv6 one bound to a0. */
Test(netns, resolve_ipv6)
{
	struct sockaddr_in6 dst = { .sin6_family = AF_INET6, .sin6_port = htons(7471) };
	uint8_t want[16];
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	inet_pton(AF_INET6, "fd00::2", &dst.sin6_addr);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 3000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED, "%s %d", rdma_event_str(ev->event),
		     ev->status);
	rdma_ack_cm_event(ev);
	/* the solicitation leaves at once (not at the kernel's next
	 * retransmission, a second later) */
	cr_expect_lt(ev_ms, 900, "Neighbour Discovery took %llu ms", (unsigned long long)ev_ms);
	inet_pton(AF_INET6, "fd00::1", want);
	cr_expect_arr_eq(id->route.addr.src_sin6.sin6_addr.s6_addr, want, 16);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.sgid.raw, want, 16);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, dst.sin6_addr.s6_addr, 16);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* Through a gateway: the neighbour resolved is the gateway's (B), the
 * destination GID the destination's address. The route's preferred
 * source decides the GID: the kernel prefers 10.99.0.1 (it avoids 127/8
 * sources for such a route), which no GID of a0 holds — ENODEV, as the
 * kernel's GID lookup by source address fails; with `src 127.10.0.1` on
 * the route it resolves. */
Test(netns, via_gateway)
{
	static const uint8_t dgid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 20, 0, 5 };
	struct sockaddr_in dst = sin4("127.20.0.5");
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	cr_assert_eq(lt_sh(NULL, "ip -n %s route add 127.20.0.0/24 via 127.10.0.2", nsa), 0);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ENODEV);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	cr_assert_eq(lt_sh(NULL, "ip -n %s route change 127.20.0.0/24 via 127.10.0.2 src 127.10.0.1",
			   nsa),
		     0);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED, "%s %d", rdma_event_str(ev->event),
		     ev->status);
	rdma_ack_cm_event(ev);
	cr_expect(neigh_state(nsa, "127.10.0.2", "lladdr"), "the gateway was resolved");
	cr_expect(!neigh_state(nsa, "127.20.0.5", "lladdr"), "not the destination");
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, dgid, 16);
	cr_expect_eq(id->route.addr.src_sin.sin_addr.s_addr, inet_addr("127.10.0.1"));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* Own addresses stay local (the route is local): IPv4 on GID 0, IPv6 on
 * the GID holding it. */
Test(netns, own_addresses)
{
	struct sockaddr_in dst = sin4("127.10.0.1");
	struct sockaddr_in6 dst6 = { .sin6_family = AF_INET6, .sin6_port = htons(7471) };
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint64_t call_ms, ev_ms;

	net_up();
	ch = rdma_create_event_channel();
	cr_assert(ch);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, id->route.addr.addr.ibaddr.sgid.raw, 16);
	rdma_destroy_id(id);
	inet_pton(AF_INET6, "fd00::1", &dst6.sin6_addr);
	ev = resolve(ch, &id, NULL, (struct sockaddr *)&dst6, 2000, &call_ms, &ev_ms);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, dst6.sin6_addr.s6_addr, 16);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* IPv6, UD: unmodified udaddy (SIDR, then datagrams whose GRH is an IPv6
 * header carrying the GIDs the sender and receiver use). */
Test(netns, udaddy_ipv6)
{
	char *out;
	int st;

	if (lt_sh(NULL, "command -v udaddy >/dev/null && command -v rping >/dev/null") != 0)
		tf_skip_missing("udaddy and rping (Debian rdmacm-utils) are not installed");
	net_up();
	out = pair("udaddy -b fd00::2", "udaddy -s fd00::2", &st);
	cr_expect_eq(st, 0, "udaddy -s fd00::2 exited %d:\n%s", st, out);
	cr_expect(strstr(out, "test complete"), "%s", out);
	free(out);
}

/* The data length of the first "ping data: " line of an rping -v output
 * (the client's -S size less one), or -1. */
static int ping_len(const char *out)
{
	const char *p = out ? strstr(out, "ping data: ") : NULL;

	if (!p)
		return -1;
	p += strlen("ping data: ");
	return (int)strcspn(p, "\n");
}

static int ns_lines_sum(char **status, unsigned *listening, unsigned long long reqs[2],
			unsigned *listeners);

/* uscmd --status of node 1: its netns section's lines of client
 * namespaces (key not 0), with reqs[] their connection requests (the
 * first two). Their count. */
static int ns_lines(char **status, unsigned *listening, unsigned long long reqs[2])
{
	return ns_lines_sum(status, listening, reqs, NULL);
}

/* The same, and *listeners (if not NULL) the listeners of all of them. */
static int ns_lines_sum(char **status, unsigned *listening, unsigned long long reqs[2],
			unsigned *listeners)
{
	int n = 0;

	*listening = 0;
	if (listeners)
		*listeners = 0;
	free(*status);
	*status = NULL;
	lt_sh(status, "%s/uscmd --status --socket %s/node1/uscmd.sock 2>&1", lt_bin(),
	      getenv("USCM_SIM_DIR"));
	const char *p = *status ? strstr(*status, "\nnetns ") : NULL;
	for (p = p ? strchr(p + 1, '\n') : NULL; p && p[1]; p = strchr(p + 1, '\n')) {
		unsigned long long key, r;
		unsigned ids, bound, listen;

		if (sscanf(p + 1, "%llu %u %u %u %llu", &key, &ids, &bound, &listen, &r) != 5 || !key)
			continue;
		*listening += listen >= 1;
		if (listeners)
			*listeners += listen;
		if (n < 2)
			reqs[n] = r;
		n++;
	}
	return n;
}

/* Each of the two client namespaces had exactly one connection request
 * matched to it. */
static void one_request_each(char **status)
{
	unsigned long long reqs[2] = { 0, 0 };
	unsigned listening;

	cr_expect_eq(ns_lines(status, &listening, reqs), 2, "%s", *status);
	cr_expect(reqs[0] == 1 && reqs[1] == 1, "one request matched to each namespace:\n%s",
		  *status);
}

/* uscmd --status of node 1: its netns section shows both namespaces
 * listening (a line per client namespace with listen >= 1). */
static int both_listen(char **status)
{
	unsigned long long reqs[2];
	unsigned listening;

	ns_lines(status, &listening, reqs);
	return listening == 2;
}

/* A client of node 1's uscmd in B that stays (a listener on another port,
 * nobody connects) once B's server and clients are gone: uscmd forgets a
 * namespace with its last client, and its line in --status with it. (This
 * process is A's.) */
static void keep_b(const char *dir)
{
	unsigned long long reqs[2];
	unsigned listening, listeners = 0;
	char *status = NULL;
	int i;

	lt_sh(NULL,
	      "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 rping -s -a 10.77.2.1 -p 7999 "
	      ">%s/keeper.out 2>&1 &",
	      nsb, lt_util_env(), dir);
	/* listening beside the two servers before any client starts (else B
	 * could be forgotten and registered again, its count lost) */
	for (i = 0; i < 100; i++) {
		ns_lines_sum(&status, &listening, reqs, &listeners);
		if (listeners >= 3)
			break;
		usleep(50 * 1000);
	}
	cr_assert_geq(listeners, 3, "the keeper in B listens:\n%s", status);
	free(status);
}

/* Node 1's addresses in A (10.77.1.1) and B (10.77.2.1), on the
 * interfaces holding its GIDs there; the fabric's hosts file names both
 * with node 1's one IPv4 GID. The fabric's directory. */
static const char *tenants_up(void)
{
	const char *dir;
	char *out = NULL;

	net_up_mode(2);
	dir = getenv("USCM_SIM_DIR");
	cr_assert_eq(lt_sh(&out,
			   "ip -n %s addr add 10.77.1.1/32 dev %sa0 && ip -n %s addr add 10.77.2.1/32 dev %sb0"
			   " && printf '10.77.1.1 ::ffff:127.10.0.1\n10.77.2.1 ::ffff:127.10.0.1\n' >>%s/hosts 2>&1",
			   nsa, nsa, nsb, nsb, dir),
		     0, "%s", out);
	free(out);
	return dir;
}

/* The kernel's rdma_cm keeps a port space per network namespace and binds
 * in the caller's: one node's uscmd (in the root namespace) serves
 * programs in A and B as two hosts' would. An unmodified rping -s on the
 * wildcard, port 7471, in each namespace: both listen; a client in each
 * (distinct -S sizes) reaches its own server, the one of the namespace
 * holding the address it connects to (A: 10.77.1.1, B: 10.77.2.1, both
 * node 1's: the fabric's hosts file names them with node 1's GID, as
 * containers' addresses on one host's RDMA netdev). In A, B's address
 * cannot be bound (EADDRNOTAVAIL) and A's port 7471 is in use (held by
 * A's wildcard listener: EADDRNOTAVAIL, as the kernel's cma_check_port),
 * while A's own address binds. (The servers' buffers are rping's
 * default 64 bytes: the clients' sizes stay below.) */
Test(netns, two_namespaces_one_uscmd)
{
	char *ca = NULL, *cb = NULL, *sa = NULL, *sb = NULL, *status = NULL;
	const char *dir;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in a = lt_sin("10.77.1.1", 0), b = lt_sin("10.77.2.1", 0),
			   any = lt_sin("0.0.0.0", 7471);
	int st_a, st_b, i;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	dir = tenants_up();
	for (int n = 0; n < 2; n++)
		lt_sh(NULL,
		      "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 rping -s -a 0.0.0.0 -p 7471 -C 3 -v "
		      ">%s/server%c.out 2>&1 &",
		      n ? nsb : nsa, lt_util_env(), dir, n ? 'B' : 'A');
	for (i = 0; i < 100 && !both_listen(&status); i++)
		usleep(50 * 1000);
	cr_assert(i < 100, "both servers listen on 7471, each in its namespace:\n%s", status);
	keep_b(dir);

	/* this process is in A: B's address is not ours; A's port 7471 is
	 * taken in A only */
	ch = rdma_create_event_channel();
	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_expect_eq(rdma_bind_addr(id, (struct sockaddr *)&b), -1, "B's address bound in A");
	cr_expect_eq(errno, EADDRNOTAVAIL);
	/* the kernel's answer when a wildcard holds the port */
	cr_expect_eq(rdma_bind_addr(id, (struct sockaddr *)&any), -1, "A's 7471 is rping's");
	cr_expect_eq(errno, EADDRNOTAVAIL);
	cr_expect_eq(rdma_bind_addr(id, (struct sockaddr *)&a), 0, "A's address in A: %s",
		     strerror(errno));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);

	/* both clients at once, each in its namespace */
	lt_sh(NULL,
	      "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 rping -c -a 10.77.2.1 -p 7471 -S 50 -C 3 -v "
	      ">%s/clientB.out 2>&1; echo $? >%s/clientB.rc &",
	      nsb, lt_util_env(), dir, dir);
	st_a = lt_sh(&ca,
		     "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 rping -c -a 10.77.1.1 -p 7471 -S 30 -C 3 -v 2>&1",
		     nsa, lt_util_env());
	for (i = 0; i < 200 && lt_sh(NULL, "test -s %s/clientB.rc", dir) != 0; i++)
		usleep(50 * 1000);
	st_b = lt_sh(&cb, "cat %s/clientB.out; exit $(cat %s/clientB.rc)", dir, dir);
	cr_expect_eq(st_a, 0, "client in A exited %d:\n%s", st_a, ca);
	cr_expect_eq(st_b, 0, "client in B exited %d:\n%s", st_b, cb);
	/* the servers exit after their client's -C 3 */
	for (i = 0; i < 100 && lt_sh(NULL, "pgrep -f 'rping -s -a 0.0.0.0 -p 7471' >/dev/null") == 0; i++)
		usleep(50 * 1000);
	lt_sh(&sa, "cat %s/serverA.out", dir);
	lt_sh(&sb, "cat %s/serverB.out", dir);
	cr_expect_eq(ping_len(ca), 29, "client A's -S 30:\n%s", ca);
	cr_expect_eq(ping_len(sa), 29, "server A saw client A (-S 30):\n%s", sa);
	cr_expect_eq(ping_len(cb), 49, "client B's -S 50:\n%s", cb);
	cr_expect_eq(ping_len(sb), 49, "server B saw client B (-S 50):\n%s", sb);
	one_request_each(&status);
	free(ca);
	free(cb);
	free(sa);
	free(sb);
	free(status);
}

/* UD: the same with unmodified udaddy (SIDR_REQ, matched to a namespace
 * as a REQ is): a server on the wildcard, port 7174 (udaddy's), in each namespace,
 * each taking one client; both clients complete only if each SIDR_REQ
 * reached its own namespace's server. */
Test(netns, two_namespaces_one_uscmd_ud)
{
	char *ca = NULL, *cb = NULL, *status = NULL;
	struct rdma_event_channel *ch;
	const char *dir;
	int st_a, st_b, i;

	if (lt_sh(NULL, "command -v udaddy >/dev/null") != 0)
		tf_skip_missing("udaddy (Debian rdmacm-utils) is not installed");
	dir = tenants_up();
	for (int n = 0; n < 2; n++)
		lt_sh(NULL,
		      "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 udaddy -b 0.0.0.0 "
		      ">%s/server%c.out 2>&1 &",
		      n ? nsb : nsa, lt_util_env(), dir, n ? 'B' : 'A');
	for (i = 0; i < 100 && !both_listen(&status); i++)
		usleep(50 * 1000);
	cr_assert(i < 100, "both servers listen on 7174 (udaddy's port), each in its namespace:\n%s", status);
	keep_b(dir);
	/* this process (in A) a client too, for A's line in --status */
	ch = rdma_create_event_channel();
	cr_assert(ch, "%s", strerror(errno));
	lt_sh(NULL,
	      "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 udaddy -s 10.77.2.1 "
	      ">%s/clientB.out 2>&1; echo $? >%s/clientB.rc &",
	      nsb, lt_util_env(), dir, dir);
	st_a = lt_sh(&ca, "ip netns exec %s env USCM_SIM_NODE=node1 %s timeout 20 udaddy -s 10.77.1.1 2>&1",
		     nsa, lt_util_env());
	for (i = 0; i < 200 && lt_sh(NULL, "test -s %s/clientB.rc", dir) != 0; i++)
		usleep(50 * 1000);
	st_b = lt_sh(&cb, "cat %s/clientB.out; exit $(cat %s/clientB.rc)", dir, dir);
	cr_expect_eq(st_a, 0, "client in A exited %d:\n%s", st_a, ca);
	cr_expect(ca && strstr(ca, "test complete"), "%s", ca);
	cr_expect_eq(st_b, 0, "client in B exited %d:\n%s", st_b, cb);
	cr_expect(cb && strstr(cb, "test complete"), "%s", cb);
	/* (a udaddy server would serve a second client too: the count tells
	 * where each SIDR_REQ went) */
	one_request_each(&status);
	rdma_destroy_event_channel(ch);
	free(ca);
	free(cb);
	free(status);
}
