/*
 * uscmd isolation: hand-written clients speak the request protocol
 * (lib/usp_proto.h) directly to a node's daemon, as a hostile local process
 * could: requests for another client's id, unknown handles, garbage,
 * truncated and oversized frames, bad counts, fds that are not sockets, and
 * a create_id flood up to the per-client limit. Each gets its error and
 * nothing else changes: the victim client's id still answers with its
 * state, the daemon keeps serving, and an unmodified rping pair still
 * connects through it.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/netlink.h>

#include "libtest.h"
#include "usptest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(isolation, .fini = teardown, .timeout = 120);

static int raw_connect(int node)
{
	int fd = ut_connect(node);

	cr_assert_geq(fd, 0, "connect to node%d's uscmd: %s", node, strerror(errno));
	return fd;
}

#define raw_xfer ut_xfer
#define req ut_req
#define hello_with ut_hello_with

static int hello(int fd)
{
	int e = ut_hello(fd);

	cr_assert_neq(e, -1, "no answer to the HELLO");
	return e;
}

/* A channel (socketpair, the other end to the daemon); our end in *mine. */
static uint32_t new_chan(int fd, int *mine)
{
	uint32_t chan = 0;

	cr_assert_eq(ut_chan(fd, &chan, mine), 0);
	return chan;
}

static uint32_t new_id(int fd, uint32_t chan, int *err)
{
	struct usp_create_id b = { .chan = chan, .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };
	struct usp_handle r = { 0 };

	*err = req(fd, USP_CREATE_ID, 0, &b, sizeof(b), -1, &r, sizeof(r));
	return r.handle;
}

static int daemon_status(char **out)
{
	return lt_sh(out, "%s/uscmd --status --socket %s/node1/uscmd.sock 2>&1", lt_bin(),
		     getenv("USCM_SIM_DIR"));
}

Test(isolation, requests_for_others_ids_and_malformed_frames_change_nothing)
{
	int a, b, chan_a_fd, chan_b_fd, err;
	uint32_t ca, cb, ha;
	struct usp_addr bind;
	struct sockaddr_in *sin = (struct sockaddr_in *)&bind.addr;
	struct usp_snap snap;
	struct usp_int backlog = { .v = 4 };
	uint8_t junk[USP_MAX_REQUEST + 900];
	char *out = NULL;

	setenv("USCM_MAX_IDS", "300", 1); /* the daemons' per-client id limit */
	lt_fabric_start_daemon("ib", 2);
	/* victim A: a channel, an id bound to 127.10.0.1:7800 */
	a = raw_connect(1);
	cr_assert_eq(hello(a), 0);
	ca = new_chan(a, &chan_a_fd);
	ha = new_id(a, ca, &err);
	cr_assert_eq(err, 0, "create_id: %s", strerror(err));
	memset(&bind, 0, sizeof(bind));
	*sin = lt_sin("127.10.0.1", 7800);
	cr_assert_eq(req(a, USP_BIND, ha, &bind, sizeof(bind), -1, &snap, sizeof(snap)), 0);

	/* attacker B */
	b = raw_connect(1);
	cr_assert_eq(hello(b), 0);
	cb = new_chan(b, &chan_b_fd);
	/* A's id: EINVAL for every request (the kernel's answer for an id of
	 * another file); an id that does not exist: ENOENT */
	cr_expect_eq(req(b, USP_DESTROY_ID, ha, NULL, 0, -1, NULL, 0), EINVAL);
	cr_expect_eq(req(b, USP_LISTEN, ha, &backlog, sizeof(backlog), -1, NULL, 0), EINVAL);
	cr_expect_eq(req(b, USP_BIND, ha, &bind, sizeof(bind), -1, NULL, 0), EINVAL);
	cr_expect_eq(req(b, USP_DISCONNECT, ha, NULL, 0, -1, NULL, 0), EINVAL);
	cr_expect_eq(req(b, USP_QUERY, ha, NULL, 0, -1, NULL, 0), EINVAL);
	cr_expect_eq(req(b, USP_QUERY, ha ^ 0x00100000u, NULL, 0, -1, NULL, 0), ENOENT,
		     "a stale generation of the handle");
	cr_expect_eq(req(b, USP_QUERY, 0x000ABCDE, NULL, 0, -1, NULL, 0), ENOENT);
	/* channels are per client: A's channel number means nothing to B */
	{
		struct usp_create_id x = { .chan = ca + 5, .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };

		cr_expect_eq(req(b, USP_CREATE_ID, 0, &x, sizeof(x), -1, NULL, 0), EINVAL);
		x.chan = cb;
		x.ps = 0x77;
		cr_expect_eq(req(b, USP_CREATE_ID, 0, &x, sizeof(x), -1, NULL, 0), EINVAL, "bad port space");
		x.ps = RDMA_PS_TCP;
		x.qp_type = 99;
		cr_expect_eq(req(b, USP_CREATE_ID, 0, &x, sizeof(x), -1, NULL, 0), EINVAL, "bad QP type");
	}
	/* malformed frames */
	{
		struct usp_hdr h;
		struct usp_conn c;
		int fdfile = open("/dev/null", O_RDONLY);

		memset(junk, 0x5A, sizeof(junk));
		cr_expect_eq(raw_xfer(b, junk, 100, -1, NULL, 0), EPROTO, "garbage");
		cr_expect_eq(raw_xfer(b, junk, 3, -1, NULL, 0), EBADMSG, "shorter than a header");
		usp_hdr_init(&h, USP_QUERY, sizeof(h), 1, ha);
		h.ver = 99;
		cr_expect_eq(raw_xfer(b, &h, sizeof(h), -1, NULL, 0), EPROTO, "bad version");
		usp_hdr_init(&h, 0x7777, sizeof(h), 1, ha);
		cr_expect_eq(raw_xfer(b, &h, sizeof(h), -1, NULL, 0), EPROTO, "unknown op");
		/* "no answer wanted" only for the RTU request: anything else with
		 * it is refused, and answered */
		usp_hdr_init(&h, USP_QUERY | USP_F_NOREPLY, sizeof(h), 1, ha);
		cr_expect_eq(raw_xfer(b, &h, sizeof(h), -1, NULL, 0), EPROTO, "no-reply query");
		/* truncated: the header says more than came */
		usp_hdr_init(&h, USP_BIND, sizeof(h) + sizeof(bind), 1, ha);
		memcpy(junk, &h, sizeof(h));
		cr_expect_eq(raw_xfer(b, junk, sizeof(h) + 10, -1, NULL, 0), EBADMSG, "truncated");
		/* a body longer than the op's */
		usp_hdr_init(&h, USP_QUERY, sizeof(h) + 8, 1, ha);
		memcpy(junk, &h, sizeof(h));
		cr_expect_eq(raw_xfer(b, junk, sizeof(h) + 8, -1, NULL, 0), EMSGSIZE, "too long for its op");
		/* oversized: beyond the largest request */
		usp_hdr_init(&h, USP_CONNECT, sizeof(junk), 1, ha);
		memcpy(junk, &h, sizeof(h));
		cr_expect_eq(raw_xfer(b, junk, sizeof(junk), -1, NULL, 0), EMSGSIZE, "oversized");
		/* a private-data count beyond the maximum */
		memset(&c, 0, sizeof(c));
		c.pdata_len = 5000;
		usp_hdr_init(&h, USP_CONNECT, sizeof(h) + offsetof(struct usp_conn, pdata), 1, ha);
		memcpy(junk, &h, sizeof(h));
		memcpy(junk + sizeof(h), &c, offsetof(struct usp_conn, pdata));
		cr_expect_eq(raw_xfer(b, junk, h.len, -1, NULL, 0), EMSGSIZE, "count out of bounds");
		/* a channel that is not a socket; a channel without an fd */
		cr_expect_eq(req(b, USP_CHAN_CREATE, 0, NULL, 0, fdfile, NULL, 0), EBADF);
		cr_expect_eq(req(b, USP_CHAN_CREATE, 0, NULL, 0, -1, NULL, 0), EBADF);
		/* an fd where none belongs is closed, the request served */
		cr_expect_eq(req(b, USP_QUERY, ha, NULL, 0, fdfile, NULL, 0), EINVAL);
		close(fdfile);
	}
	/* a create_id flood: stops at the per-client limit with EMFILE */
	{
		int n = 0, e = 0;

		for (int i = 0; i < 400; i++) {
			new_id(b, cb, &e);
			if (e)
				break;
			n++;
		}
		cr_expect_eq(e, EMFILE, "the flood ended with %s after %d ids", strerror(e), n);
		cr_expect_eq(n, 300, "ids per client");
	}
	/* A is untouched: its id answers with its bind, and listens */
	memset(&snap, 0, sizeof(snap));
	cr_expect_eq(req(a, USP_QUERY, ha, NULL, 0, -1, &snap, sizeof(snap)), 0);
	cr_expect_eq(ntohs(((struct sockaddr_in *)&snap.addr.src_storage)->sin_port), 7800);
	cr_expect_eq(req(a, USP_LISTEN, ha, &backlog, sizeof(backlog), -1, NULL, 0), 0);
	/* the daemon serves on: status, and B's ids go when B does */
	cr_expect_eq(daemon_status(&out), 0, "%s", out);
	cr_expect(strstr(out, "301 ids"), "%s", out);
	free(out);
	out = NULL;
	close(b);
	close(chan_b_fd);
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		daemon_status(&out);
		if (strstr(out, ", 1 ids,"))
			break;
		usleep(50 * 1000);
	}
	cr_expect(strstr(out, ", 1 ids,"), "B's ids were not released:\n%s", out);
	free(out);
	out = NULL;
	/* and real clients still connect through the same daemon */
	if (lt_sh(NULL, "command -v rping >/dev/null") == 0) {
		char env[6000];

		snprintf(env, sizeof(env), "USCM_SIM_NODE=node1 USCM_SOCKET='%s/node1/uscmd.sock' %s",
			 getenv("USCM_SIM_DIR"), lt_util_env());
		cr_assert_eq(lt_sh(NULL, "(%s timeout 30 rping -s -a 127.10.0.1 -p 7900 -C 2 >/dev/null 2>&1 &)",
				   env),
			     0);
		for (int i = 0; i < 30; i++) {
			free(out);
			out = NULL;
			if (lt_sh(&out, "%s timeout 30 rping -c -a 127.10.0.1 -p 7900 -C 2 -v 2>&1", env) == 0)
				break;
			usleep(100 * 1000);
		}
		cr_expect(out && strstr(out, "rdma-ping-1"), "rping after the attack:\n%s", out);
		free(out);
	} else {
		tf_warn_missing("rping (Debian rdmacm-utils) not installed: the check that real "
				"clients still connect is skipped");
	}
	close(a);
	close(chan_a_fd);
}

/* A client that never reads the events it asked for: the daemon holds a
 * bounded number for it, then drops that client alone. */
Test(isolation, a_client_that_does_not_read_its_events_is_dropped_alone)
{
	int a, b, cfd, bfd, err;
	uint32_t ch, cb;
	char *out = NULL;
	struct usp_post_event ev = { .event = RDMA_CM_EVENT_USER, .status = 0, .arg = 1 };
	int got_gone = 0;

	setenv("USCM_MAX_QUEUED", "64", 1);
	lt_fabric_start_daemon("ib", 2);
	a = raw_connect(1);
	cr_assert_eq(hello(a), 0);
	ch = new_chan(a, &cfd);
	{
		uint32_t h = new_id(a, ch, &err);

		cr_assert_eq(err, 0);
		/* user events pile up in the channel it never reads: first the
		 * socket buffer, then the daemon's bounded queue */
		for (int i = 0; i < 200000 && !got_gone; i++) {
			int r = req(a, USP_POST_EVENT, h, &ev, sizeof(ev), -1, NULL, 0);

			if (r != 0)
				got_gone = 1;
		}
	}
	cr_expect(got_gone, "the daemon kept queueing for a client that never reads");
	/* another client is served as before */
	b = raw_connect(1);
	cr_assert_eq(hello(b), 0);
	cb = new_chan(b, &bfd);
	new_id(b, cb, &err);
	cr_expect_eq(err, 0, "a second client after the first was dropped: %s", strerror(err));
	cr_expect_eq(daemon_status(&out), 0, "%s", out);
	free(out);
	close(a);
	close(b);
	close(cfd);
	close(bfd);
}

/* The HELLO names the client's network namespace with a route socket:
 * without one, or with another kind of fd (a socket of another family, a
 * netlink socket of another protocol, a file), it is refused, and so is
 * every request before a HELLO that was accepted (served in uscmd's
 * namespace, the ids would bind and resolve where the client is not). */
Test(isolation, hello_needs_a_route_socket)
{
	int fd, sv[2], other, file, ch, chfd, err;
	struct usp_create_id b = { .chan = 0, .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };
	struct usp_handle r;

	lt_fabric_start_daemon("ib", 1);
	fd = raw_connect(1);
	cr_expect_eq(req(fd, USP_CREATE_ID, 0, &b, sizeof(b), -1, &r, sizeof(r)), EPROTO,
		     "a request before the HELLO");
	cr_expect_eq(hello_with(fd, -1), EPROTO, "no fd");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	cr_expect_eq(hello_with(fd, sv[0]), EINVAL, "an AF_UNIX socket");
	other = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	cr_assert_geq(other, 0);
	cr_expect_eq(hello_with(fd, other), EINVAL, "a NETLINK_GENERIC socket");
	file = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_expect_eq(hello_with(fd, file), EINVAL, "a file");
	cr_expect_eq(req(fd, USP_CREATE_ID, 0, &b, sizeof(b), -1, &r, sizeof(r)), EPROTO,
		     "still nothing before an accepted HELLO");
	cr_expect_eq(hello(fd), 0, "a route socket");
	ch = new_chan(fd, &chfd);
	new_id(fd, ch, &err);
	cr_expect_eq(err, 0, "create_id after the HELLO: %s", strerror(err));
	close(chfd);
	close(other);
	close(file);
	close(sv[1]);
	close(sv[0]);
	close(fd);
}

/* A stale handle never names a newer id: 5000 ids made and destroyed one
 * after the other (each could take the freed id's place) get handles of
 * their own, and a request with the first one's handle is ENOENT while
 * each of them lives, acting on none of them. (With a slot's 12-bit reuse
 * count and the slot freed last reused first, the 4096th named it.) */
Test(isolation, a_stale_handle_never_names_a_newer_id)
{
	int a, chan_fd, err;
	uint32_t c, stale, h = 0;
	struct usp_snap snap;
	int aliased = -1;

	lt_fabric_start_daemon("ib", 1);
	a = raw_connect(1);
	cr_assert_eq(hello(a), 0);
	c = new_chan(a, &chan_fd);
	stale = new_id(a, c, &err);
	cr_assert_eq(err, 0, "create_id: %s", strerror(err));
	cr_assert_eq(req(a, USP_DESTROY_ID, stale, NULL, 0, -1, NULL, 0), 0);
	for (int i = 0; i < 5000; i++) {
		h = new_id(a, c, &err);
		cr_assert_eq(err, 0, "create_id %d: %s", i, strerror(err));
		if (h == stale && aliased < 0)
			aliased = i;
		err = req(a, USP_QUERY, stale, NULL, 0, -1, &snap, sizeof(snap));
		if (err != ENOENT) {
			cr_assert_fail("cycle %d: the stale handle %#x answered %d (%s), the new id is %#x", i,
				       stale, err, err ? strerror(err) : "it acted on the new id", h);
		}
		cr_assert_eq(req(a, USP_DESTROY_ID, h, NULL, 0, -1, NULL, 0), 0);
	}
	cr_expect_eq(aliased, -1, "id %d got the stale handle %#x", aliased, stale);
	/* the last one's handle is stale too now; a live id is found */
	cr_expect_eq(req(a, USP_QUERY, h, NULL, 0, -1, NULL, 0), ENOENT);
	h = new_id(a, c, &err);
	cr_assert_eq(err, 0);
	cr_expect_eq(req(a, USP_QUERY, h, NULL, 0, -1, &snap, sizeof(snap)), 0);
	cr_expect_eq(req(a, USP_DESTROY_ID, stale, NULL, 0, -1, NULL, 0), ENOENT);
	cr_expect_eq(req(a, USP_QUERY, h, NULL, 0, -1, &snap, sizeof(snap)), 0,
		     "the live id survived a destroy with a stale handle");
	close(chan_fd);
	close(a);
}
