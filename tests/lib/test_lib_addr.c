/*
 * Addresses and routes, as node 1 of a two-node simulated fabric:
 * rdma_resolve_addr through the ibacm hosts file (the fabric's, and a file
 * named by USCM_HOSTS), unknown addresses, rdma_bind_addr (local / remote /
 * wildcard addresses, port spaces, ephemeral ports, REUSEADDR, AFONLY),
 * rdma_resolve_route (SA PathRecord, the shared path cache, SA timeouts, a
 * RoCE path built locally), options, port getters, rdma_getaddrinfo,
 * rdma_resolve_addrinfo / rdma_query_addrinfo.
 */
#include <arpa/inet.h>

#include <rdma/rdma_cma.h>

#include "libtest.h"

static void setup_ib(void)
{
	lt_fabric_start("ib", 2);
	lt_node(1);
}

static void setup_roce(void)
{
	lt_fabric_start("roce", 2);
	lt_node(1);
}

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(addr, .init = setup_ib, .fini = teardown, .timeout = 60);
TestSuite(roce, .init = setup_roce, .fini = teardown, .timeout = 60);

static const uint8_t node1_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0, 1 };
static const uint8_t node2_gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0, 2 };

static struct rdma_cm_id *resolved(struct rdma_event_channel *ch, const char *ip, uint16_t port,
				   int expect_ok)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lt_sin(ip, port);
	struct rdma_cm_event *ev;

	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s",
		     strerror(errno));
	ev = lt_expect(ch, expect_ok ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR, 2000);
	if (!expect_ok)
		cr_expect_eq(ev->status, -EHOSTUNREACH);
	rdma_ack_cm_event(ev);
	return id;
}

Test(addr, resolve_through_fabric_hosts_file)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in *src;

	cr_assert(ch);
	id = resolved(ch, "127.10.0.2", 7471, 1);
	cr_expect(id->verbs, "bound to a device");
	cr_expect_eq(id->port_num, 1);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, node2_gid, 16);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.sgid.raw, node1_gid, 16);
	cr_expect_eq(be16toh(id->route.addr.addr.ibaddr.pkey), 0xFFFF);
	/* Source address: ours, from the hosts file, with an ephemeral port. */
	src = &id->route.addr.src_sin;
	cr_expect_eq(src->sin_family, AF_INET);
	cr_expect_eq(ntohl(src->sin_addr.s_addr), 0x7F0A0001u, "src %08x", ntohl(src->sin_addr.s_addr));
	cr_expect_geq(ntohs(src->sin_port), 32768);
	cr_expect_leq(ntohs(src->sin_port), 60999);
	cr_expect_eq(rdma_get_src_port(id), src->sin_port);
	cr_expect_eq(rdma_get_dst_port(id), htons(7471));
	cr_expect_eq(rdma_get_peer_addr(id)->sa_family, AF_INET);
	cr_expect_eq(rdma_get_local_addr(id), &id->route.addr.src_addr);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(addr, resolve_through_uscm_hosts)
{
	char path[300], *dir = getenv("USCM_SIM_DIR");
	FILE *f;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	if (lt_daemon)
		tf_deselect("in-process only: the hosts file it names is this process's, not uscmd's");
	snprintf(path, sizeof(path), "%s/my_hosts", dir);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "# ibacm_hosts.data style\n\n"
		   "somehost fe80::2:c903:0:2\n"
		   "10.9.8.7   fe80::2:c903:0:2   # node 2 under another name\n"
		   "127.10.0.1 fe80::2:c903:0:1\n"
		   "fd00::7 fe80::2:c903:0:2\n");
	fclose(f);
	setenv("USCM_HOSTS", path, 1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = resolved(ch, "10.9.8.7", 1, 1);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, node2_gid, 16);
	rdma_destroy_id(id);
	/* IPv6 entries too. */
	struct sockaddr_in6 d6;
	struct rdma_cm_event *ev;
	memset(&d6, 0, sizeof(d6));
	d6.sin6_family = AF_INET6;
	d6.sin6_port = htons(9);
	inet_pton(AF_INET6, "fd00::7", &d6.sin6_addr);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&d6, 2000), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000);
	rdma_ack_cm_event(ev);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, node2_gid, 16);
	rdma_destroy_id(id);
	/* 10.66.0.2 is not in this file: IB has no other way to find it. */
	id = resolved(ch, "10.66.0.2", 1, 0);
	rdma_destroy_id(id);
	/* An address of 127/8 the file does not name is loopback: ourselves. */
	id = resolved(ch, "127.10.0.2", 1, 1);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, node1_gid, 16);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(addr, unknown_address_is_addr_error)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;

	cr_assert(ch);
	id = resolved(ch, "10.66.66.66", 1, 0);
	/* The id can still be destroyed and nothing else is pending. */
	cr_expect_null(lt_event(ch, 100));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(addr, bind_local_remote_wildcard)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *c;
	struct sockaddr_in local = lt_sin("127.10.0.1", 6000), remote = lt_sin("127.10.0.2", 6000),
			   any = lt_sin("0.0.0.0", 6001);

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(a, (struct sockaddr *)&local), 0, "%s", strerror(errno));
	cr_expect(a->verbs, "a local address binds the device");
	cr_expect_eq(a->port_num, 1);
	cr_expect_eq(rdma_get_src_port(a), htons(6000));
	errno = 0;
	cr_expect_eq(rdma_bind_addr(a, (struct sockaddr *)&local), -1, "bind twice");
	cr_expect_eq(errno, EINVAL);
	cr_assert_eq(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	cr_expect_eq(rdma_bind_addr(b, (struct sockaddr *)&remote), -1);
	cr_expect_eq(errno, EADDRNOTAVAIL);
	cr_assert_eq(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(c, (struct sockaddr *)&any), 0);
	cr_expect_null(c->verbs, "a wildcard binds no device");
	struct sockaddr_un_ { sa_family_t f; char p[10]; } bad = { AF_UNIX, "x" };
	errno = 0;
	cr_expect_eq(rdma_bind_addr(b, (struct sockaddr *)&bad), -1);
	cr_expect_eq(errno, EAFNOSUPPORT);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
}

static int bind_to(struct rdma_event_channel *ch, struct rdma_cm_id **id, enum rdma_port_space ps,
		   const char *ip, uint16_t port, int reuse, int afonly)
{
	cr_assert_eq(rdma_create_id(ch, id, NULL, ps), 0);
	if (reuse)
		cr_assert_eq(rdma_set_option(*id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &reuse,
					     sizeof(reuse)), 0);
	if (afonly)
		cr_assert_eq(rdma_set_option(*id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly,
					     sizeof(afonly)), 0);
	if (strchr(ip, ':')) {
		struct sockaddr_in6 s;
		memset(&s, 0, sizeof(s));
		s.sin6_family = AF_INET6;
		s.sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &s.sin6_addr);
		return rdma_bind_addr(*id, (struct sockaddr *)&s);
	}
	struct sockaddr_in s = lt_sin(ip, port);
	return rdma_bind_addr(*id, (struct sockaddr *)&s);
}

Test(addr, port_spaces_and_conflicts)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *ids[12];
	int n = 0;

	cr_assert(ch);
	cr_assert_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "0.0.0.0", 5000, 0, 0), 0);
	/* Same port, same space, wildcard: as the kernel, EADDRNOTAVAIL. */
	errno = 0;
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "0.0.0.0", 5000, 0, 0), -1);
	cr_expect_eq(errno, EADDRNOTAVAIL);
	/* Another port space is another port number space. */
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_UDP, "0.0.0.0", 5000, 0, 0), 0);
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_IB, "0.0.0.0", 5000, 0, 0), 0);
	/* Two specific addresses collide with EADDRINUSE. */
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "127.10.0.1", 5001, 0, 0), 0);
	errno = 0;
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "127.10.0.1", 5001, 0, 0), -1);
	cr_expect_eq(errno, EADDRINUSE);
	/* REUSEADDR on both: shared, until one listens. */
	struct rdma_cm_id *r1, *r2, *r3;
	cr_expect_eq(bind_to(ch, &r1, RDMA_PS_TCP, "0.0.0.0", 5002, 1, 0), 0);
	cr_expect_eq(bind_to(ch, &r2, RDMA_PS_TCP, "0.0.0.0", 5002, 1, 0), 0);
	cr_expect_eq(rdma_listen(r1, 1), -1, "listening on a shared port");
	rdma_destroy_id(r2);
	cr_expect_eq(rdma_listen(r1, 1), 0, "%s", strerror(errno));
	errno = 0;
	cr_expect_eq(bind_to(ch, &r3, RDMA_PS_TCP, "0.0.0.0", 5002, 1, 0), -1,
		     "REUSEADDR does not share a listening port");
	rdma_destroy_id(r1);
	rdma_destroy_id(r3);
	/* AFONLY: an IPv6-only wildcard and an IPv4 wildcard share a port. */
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "::", 5003, 0, 1), 0);
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "0.0.0.0", 5003, 0, 1), 0);
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "::", 5004, 0, 0), 0);
	cr_expect_eq(bind_to(ch, &ids[n++], RDMA_PS_TCP, "0.0.0.0", 5004, 0, 0), -1,
		     "without AFONLY an IPv6 wildcard covers IPv4");
	/* Ephemeral ports: distinct, in the range. */
	struct rdma_cm_id *e1, *e2;
	cr_expect_eq(bind_to(ch, &e1, RDMA_PS_TCP, "0.0.0.0", 0, 0, 0), 0);
	cr_expect_eq(bind_to(ch, &e2, RDMA_PS_TCP, "0.0.0.0", 0, 0, 0), 0);
	cr_expect_neq(rdma_get_src_port(e1), rdma_get_src_port(e2));
	cr_expect_geq(ntohs(rdma_get_src_port(e1)), 32768);
	rdma_destroy_id(e1);
	rdma_destroy_id(e2);
	for (int i = 0; i < n; i++)
		rdma_destroy_id(ids[i]);
	/* Freed ports can be bound again. */
	cr_expect_eq(bind_to(ch, &ids[0], RDMA_PS_TCP, "0.0.0.0", 5000, 0, 0), 0);
	rdma_destroy_id(ids[0]);
	rdma_destroy_event_channel(ch);
}

static int sa_queries(void)
{
	char *out = NULL, *p;
	int n = -1;

	lt_sh(&out, "%s/uscm-sim status --dir %s 2>&1", lt_bin(), getenv("USCM_SIM_DIR"));
	p = strstr(out, "SA queries");
	if (p)
		sscanf(p, "SA queries%*[^0-9]%d", &n);
	free(out);
	return n;
}

static struct rdma_cm_event *route(struct rdma_event_channel *ch, struct rdma_cm_id *id, int ms)
{
	cr_assert_eq(rdma_resolve_route(id, ms), 0, "%s", strerror(errno));
	return lt_event(ch, ms + 2000);
}

Test(addr, route_from_sa_and_cache)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b;
	struct rdma_cm_event *ev;
	int q0, q1, q2;

	cr_assert(ch);
	a = resolved(ch, "127.10.0.2", 7471, 1);
	q0 = sa_queries();
	ev = route(ch, a, 2000);
	cr_assert(ev);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED, "%s %d", rdma_event_str(ev->event),
		     ev->status);
	rdma_ack_cm_event(ev);
	q1 = sa_queries();
	cr_expect_eq(q1, q0 + 1, "one PathRecord query (%d -> %d)", q0, q1);
	cr_assert_eq(a->route.num_paths, 1);
	cr_assert(a->route.path_rec);
	cr_expect_eq(be16toh(a->route.path_rec->slid), 2);
	cr_expect_eq(be16toh(a->route.path_rec->dlid), 3);
	cr_expect_eq(be16toh(a->route.path_rec->pkey), 0xFFFF);
	cr_expect_eq(a->route.path_rec->mtu, IBV_MTU_4096); /* the ports' MTUCap, as OpenSM */
	cr_expect_arr_eq(a->route.path_rec->dgid.raw, node2_gid, 16);
	/* A second id to the same place: served from the shared cache. */
	b = resolved(ch, "127.10.0.2", 7471, 1);
	ev = route(ch, b, 2000);
	cr_assert(ev);
	cr_expect_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	q2 = sa_queries();
	cr_expect_eq(q2, q1, "the path cache answered (%d -> %d)", q1, q2);
	cr_expect_eq(b->route.path_rec->dlid, a->route.path_rec->dlid);
	/* Route resolution needs a resolved address, once. */
	errno = 0;
	cr_expect_eq(rdma_resolve_route(b, 1000), -1);
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

/* A port whose LID changes (the SM renumbered it) has no valid cached
 * path any more: its SLID is the old one. The next route asks the SA. */
Test(addr, lid_change_flushes_the_path_cache)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *c;
	struct rdma_cm_event *ev;
	char *out = NULL;
	int q0, q1, q2, q3;

	cr_assert(ch);
	a = resolved(ch, "127.10.0.2", 7471, 1);
	q0 = sa_queries();
	ev = route(ch, a, 2000);
	cr_assert(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	q1 = sa_queries();
	cr_expect_eq(q1, q0 + 1, "one PathRecord query (%d -> %d)", q0, q1);
	cr_expect_eq(be16toh(a->route.path_rec->slid), 2);
	/* node1 (this process) gets LID 9 */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim lid --dir %s node1 9 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "uscm-sim lid: %s", out);
	free(out);
	b = resolved(ch, "127.10.0.2", 7471, 1);
	ev = route(ch, b, 2000);
	cr_assert(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	q2 = sa_queries();
	cr_expect_eq(q2, q1 + 1, "the cached path was flushed: a new query (%d -> %d)", q1, q2);
	cr_expect_eq(be16toh(b->route.path_rec->slid), 9, "the new path starts at the new LID");
	cr_expect_eq(be16toh(b->route.path_rec->dlid), 3);
	/* and that one is cached again */
	c = resolved(ch, "127.10.0.2", 7471, 1);
	ev = route(ch, c, 2000);
	cr_assert(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	q3 = sa_queries();
	cr_expect_eq(q3, q2, "from the cache (%d -> %d)", q2, q3);
	cr_expect_eq(be16toh(c->route.path_rec->slid), 9);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_id(c);
	rdma_destroy_event_channel(ch);
}

Test(addr, route_error_when_the_sa_is_silent)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *a;
	struct rdma_cm_event *ev;
	uint64_t t0, dt;

	setenv("USCM_PATH_CACHE_MS", "0", 1);
	cr_assert_eq(lt_sh(NULL, "%s/uscm-sim fault --dir %s 'drop=100%%,class=0x03' >/dev/null 2>&1",
			   lt_bin(), getenv("USCM_SIM_DIR")), 0);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	a = resolved(ch, "127.10.0.2", 7471, 1);
	t0 = lt_now_ms();
	ev = route(ch, a, 1000);
	dt = lt_now_ms() - t0;
	cr_assert(ev, "no event");
	cr_expect_eq(ev->event, RDMA_CM_EVENT_ROUTE_ERROR, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->status, -ETIMEDOUT);
	cr_expect_geq(dt, 900u, "gave up after %llu ms", (unsigned long long)dt);
	cr_expect_leq(dt, 3000u, "took %llu ms", (unsigned long long)dt);
	rdma_ack_cm_event(ev);
	/* The id is back to ADDR_RESOLVED: a retry works once the SA answers. */
	lt_sh(NULL, "%s/uscm-sim fault --dir %s clear >/dev/null 2>&1", lt_bin(), getenv("USCM_SIM_DIR"));
	ev = route(ch, a, 2000);
	cr_assert(ev);
	cr_expect_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED, "%s", rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
	rdma_destroy_id(a);
	rdma_destroy_event_channel(ch);
}

Test(addr, options)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	uint8_t tos = 32, to = 14;
	int one = 1;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)), 0);
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, 1), 0);
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)), 0);
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)), 0);
	errno = 0;
	/* a wrong length (4 readable bytes: daemon mode sends what it is given) */
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, 4), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_ID, 77, &one, sizeof(one)), -1);
	cr_expect_eq(errno, ENOSYS);
	errno = 0;
	cr_expect_eq(rdma_set_option(id, 9, 0, &one, sizeof(one)), -1);
	cr_expect_eq(errno, ENOSYS);
	/* IB_PATH needs a resolved address. */
	struct ibv_path_data pd;
	memset(&pd, 0, sizeof(pd));
	pd.flags = IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	errno = 0;
	cr_expect_eq(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)), -1);
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(addr, ib_path_option_resolves_the_route)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct ibv_path_data pd;

	cr_assert(ch);
	id = resolved(ch, "127.10.0.2", 7471, 1);
	lt_ib_path_data(&pd, node1_gid, node2_gid);
	cr_assert_eq(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)), 0,
		     "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 1000);
	rdma_ack_cm_event(ev);
	cr_expect_eq(id->route.num_paths, 1);
	cr_expect_eq(be16toh(id->route.path_rec->dlid), 3);
	cr_expect_eq(id->route.path_rec->mtu, IBV_MTU_1024);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(addr, getaddrinfo)
{
	struct rdma_addrinfo hints, *res;
	struct sockaddr_in *sin;

	cr_assert_eq(rdma_getaddrinfo("127.10.0.2", "7471", NULL, &res), 0);
	cr_expect_eq(res->ai_family, AF_INET);
	cr_expect_eq(res->ai_port_space, RDMA_PS_TCP);
	cr_expect_eq(res->ai_qp_type, IBV_QPT_RC);
	cr_expect_null(res->ai_src_addr);
	cr_assert(res->ai_dst_addr);
	cr_expect_eq(res->ai_dst_len, sizeof(struct sockaddr_in));
	sin = (struct sockaddr_in *)res->ai_dst_addr;
	cr_expect_eq(ntohs(sin->sin_port), 7471);
	cr_expect_eq(ntohl(sin->sin_addr.s_addr), 0x7F0A0002u);
	rdma_freeaddrinfo(res);

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_UDP;
	cr_assert_eq(rdma_getaddrinfo(NULL, "7471", &hints, &res), 0);
	cr_expect(res->ai_src_addr);
	cr_expect_null(res->ai_dst_addr);
	cr_expect_eq(res->ai_qp_type, IBV_QPT_UD);
	rdma_freeaddrinfo(res);

	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = 0;
	errno = 0;
	cr_expect_eq(rdma_getaddrinfo("not-a-number", NULL, &hints, &res), -1);
	cr_expect_neq(errno, 0);
	errno = 0;
	cr_expect_eq(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	cr_expect_eq(errno, EINVAL);
}

/* No node and no service: librdmacm's answer is the hints' own addresses
 * (destination only, source only, both or neither) with the hints' flags,
 * family, QP type and port space — libfabric's verbs provider asks this
 * way. Only all three of node, service and hints missing is EINVAL. */
Test(addr, getaddrinfo_addresses_from_hints)
{
	struct rdma_addrinfo hints, *res;
	struct sockaddr_in src = lt_sin("127.10.0.1", 0), dst = lt_sin("127.10.0.2", 7471);

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_qp_type = IBV_QPT_RC;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	cr_assert_eq(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0, "%s", strerror(errno));
	cr_expect_eq(res->ai_family, AF_INET);
	cr_expect_eq(res->ai_qp_type, IBV_QPT_RC);
	cr_expect_eq(res->ai_port_space, RDMA_PS_TCP);
	cr_expect_null(res->ai_src_addr);
	cr_expect_eq(res->ai_src_len, 0);
	cr_assert(res->ai_dst_addr);
	cr_expect_neq(res->ai_dst_addr, (struct sockaddr *)&dst, "a copy, not the caller's");
	cr_expect_eq(res->ai_dst_len, sizeof(dst));
	cr_expect_eq(memcmp(res->ai_dst_addr, &dst, sizeof(dst)), 0);
	cr_expect_null(res->ai_next);
	rdma_freeaddrinfo(res);

	hints.ai_dst_addr = NULL;
	hints.ai_dst_len = 0;
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	hints.ai_flags = RAI_PASSIVE;
	cr_assert_eq(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0, "%s", strerror(errno));
	cr_expect_eq(res->ai_flags, RAI_PASSIVE);
	cr_expect_null(res->ai_dst_addr);
	cr_assert(res->ai_src_addr);
	cr_expect_eq(res->ai_src_len, sizeof(src));
	cr_expect_eq(memcmp(res->ai_src_addr, &src, sizeof(src)), 0);
	rdma_freeaddrinfo(res);

	hints.ai_flags = 0;
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	cr_assert_eq(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0, "%s", strerror(errno));
	cr_assert(res->ai_src_addr);
	cr_assert(res->ai_dst_addr);
	cr_expect_eq(memcmp(res->ai_src_addr, &src, sizeof(src)), 0);
	cr_expect_eq(memcmp(res->ai_dst_addr, &dst, sizeof(dst)), 0);
	/* what libfabric does next: an id that resolves to the answer */
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, res->ai_port_space), 0);
	cr_assert_eq(rdma_resolve_addr(id, res->ai_src_addr, res->ai_dst_addr, 2000), 0, "%s",
		     strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(res);

	/* hints without addresses: an empty answer, as librdmacm gives */
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_UDP;
	cr_assert_eq(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0, "%s", strerror(errno));
	cr_expect_null(res->ai_src_addr);
	cr_expect_null(res->ai_dst_addr);
	cr_expect_eq(res->ai_port_space, RDMA_PS_UDP);
	rdma_freeaddrinfo(res);
}

/* rdma_resolve_addrinfo (RDMACM_1.4): rdma_getaddrinfo, asynchronously,
 * answered by ADDRINFO_RESOLVED / ADDRINFO_ERROR; rdma_query_addrinfo hands
 * out a copy of the answer. */
Test(addr, resolve_addrinfo_and_query)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo hints, *res = NULL, *res2 = NULL;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_in *sin;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	cr_expect_eq(rdma_query_addrinfo(id, &res), -1, "nothing resolved yet");
	cr_expect_eq(errno, ENOENT);
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_UDP;
	cr_assert_eq(rdma_resolve_addrinfo(id, "127.10.0.2", "7471", &hints), 0, "%s",
		     strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDRINFO_RESOLVED, 5000);
	cr_expect_eq(ev->status, 0);
	cr_expect_eq(ev->id, id);
	rdma_ack_cm_event(ev);
	cr_assert_eq(rdma_query_addrinfo(id, &res), 0);
	cr_assert_eq(rdma_query_addrinfo(id, &res2), 0, "a copy each time");
	cr_expect_neq(res, res2);
	cr_expect_eq(res->ai_port_space, RDMA_PS_UDP);
	cr_expect_eq(res->ai_qp_type, IBV_QPT_UD);
	cr_assert(res->ai_dst_addr);
	sin = (struct sockaddr_in *)res->ai_dst_addr;
	cr_expect_eq(ntohl(sin->sin_addr.s_addr), 0x7F0A0002u);
	cr_expect_eq(ntohs(sin->sin_port), 7471);
	rdma_freeaddrinfo(res);
	rdma_freeaddrinfo(res2);

	hints.ai_flags = RAI_NUMERICHOST;
	cr_assert_eq(rdma_resolve_addrinfo(id, "not-a-number", NULL, &hints), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDRINFO_ERROR, 5000);
	cr_expect_lt(ev->status, 0);
	rdma_ack_cm_event(ev);
	errno = 0;
	cr_expect_eq(rdma_resolve_addrinfo(id, NULL, NULL, NULL), -1);
	cr_expect_eq(errno, EINVAL);
	/* Hint flags of newer librdmacm (RAI_SA: an SA service lookup): refused. */
	hints.ai_flags = 0x20;
	errno = 0;
	cr_expect_eq(rdma_resolve_addrinfo(id, NULL, "7471", &hints), -1);
	cr_expect_eq(errno, EOPNOTSUPP);
	/* A request in flight when the id goes away is forgotten. */
	cr_assert_eq(rdma_resolve_addrinfo(id, "127.10.0.1", "1", NULL), 0);
	cr_expect_eq(rdma_destroy_id(id), 0);
	cr_expect_null(lt_event(ch, 200));
	rdma_destroy_event_channel(ch);
}

/* A synchronous id waits in rdma_resolve_addrinfo for the answer. */
Test(addr, resolve_addrinfo_synchronous)
{
	struct rdma_addrinfo *res;
	struct rdma_cm_id *id;

	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addrinfo(id, "127.10.0.1", "9", NULL), 0);
	cr_assert(id->event);
	cr_expect_eq(id->event->event, RDMA_CM_EVENT_ADDRINFO_RESOLVED);
	cr_assert_eq(rdma_query_addrinfo(id, &res), 0);
	cr_expect_eq(res->ai_qp_type, IBV_QPT_RC);
	rdma_freeaddrinfo(res);
	rdma_destroy_id(id);
}

Test(roce, resolve_and_local_route)
{
	static const uint8_t roce2[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 10, 0, 2 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;

	cr_assert(ch);
	id = resolved(ch, "127.10.0.2", 7471, 1);
	cr_expect_arr_eq(id->route.addr.addr.ibaddr.dgid.raw, roce2, 16);
	ev = route(ch, id, 1000);
	cr_assert(ev);
	cr_expect_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	cr_expect_eq(sa_queries(), 0, "RoCE has no SA");
	cr_assert_eq(id->route.num_paths, 1);
	cr_expect_arr_eq(id->route.path_rec->dgid.raw, roce2, 16);
	cr_expect_eq(id->route.path_rec->hop_limit, 64);
	cr_expect_eq(id->route.path_rec->packet_life_time, 18);
	cr_expect_eq(be16toh(id->route.path_rec->pkey), 0xFFFF);
	/* An address the hosts file lacks is still a RoCE GID (its IP). */
	rdma_destroy_id(id);
	id = resolved(ch, "10.1.2.3", 7471, 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}
