/*
 * test_lib_hostile_host.c - a hostile local user against the host service
 * (a uscmd per node, daemon mode), for what the user's own identity and
 * files can reach:
 *  - privilege: ports below 1024 need capable(CAP_NET_BIND_SERVICE) in the
 *    initial user namespace, taken when the client connects. As nobody
 *    inside `unshare -Ur` (a full CapEff of its own namespace), and as root
 *    with the capability dropped, `rping -s -p 80` is refused (EACCES,
 *    "Permission denied"); root's own rping on port 80 then listens and
 *    connects;
 *  - files: root's uscmd capturing (USCM_PCAP) and a root client writing
 *    USCM_STATS through a symlink nobody planted in a sticky directory
 *    leave the symlink's target untouched, and the service goes on;
 *  - identity: a "daemon" nobody binds on a socket path is not used by a
 *    root client (USCM_SOCKET pointing at it): the client says so and
 *    sends it nothing.
 */
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "hosttest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(hostile_host, .fini = teardown, .timeout = 180);

static void need_rping(void)
{
	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
}

/* A root rping pair on port `port` of node 1 connects through uscmd. */
static void victim_rping(int port, const char *tag)
{
	char server[256], client[256], *out;

	snprintf(server, sizeof(server), "rping -s -a 127.10.0.1 -p %d -C 3 -V", port);
	snprintf(client, sizeof(client), "rping -c -a 127.10.0.1 -p %d -v -C 3 -V", port);
	out = dpair("rping", 1, server, 1, client, 1, tag);
	cr_expect_eq(count(out, "ping data: rdma-ping-"), 3, "the victim's rping on port %d:\n%s", port,
		     out);
	free(out);
}

/* Runs an rping server that must be refused its port: its output. */
static char *refused_server(const char *who, int port)
{
	char *out = NULL;
	int st;

	st = lt_sh(&out, "%s timeout 20 %s rping -s -a 127.10.0.1 -p %d -C 1 2>&1", denv(1), who, port);
	cr_expect_neq(st, 0, "%s rping -s -p %d was not refused:\n%s", who, port, out);
	cr_expect(strstr(out, "Permission denied") != NULL,
		  "%s rping -s -p %d: no EACCES in its output:\n%s", who, port, out);
	return out;
}

Test(hostile_host, user_namespace_root_gets_no_low_port)
{
	char who[1024];

	need_rping();
	unpriv_start();
	if (lt_sh(NULL, "%s unshare -Ur true", NOBODY) != 0)
		cr_skip_test("this kernel does not let nobody create a user namespace");
	/* uid 0 with every capability, of a namespace nobody made */
	snprintf(who, sizeof(who), "%s unshare -Ur", NOBODY);
	free(refused_server(who, 80));
	/* and nobody itself */
	free(refused_server(NOBODY, 80));
	/* root with the capability dropped (bounding and inheritable sets:
	 * the exec'd rping has it nowhere) */
	free(refused_server("setpriv --inh-caps=-net_bind_service --bounding-set=-net_bind_service", 81));
	/* root's own server takes port 80: nothing was held by the attempts */
	victim_rping(80, "victim80");
}

/* A sticky directory anybody may write, a victim file of root's, and a
 * symlink nobody planted there pointing at it: the symlink's path. */
static void plant(char *link, size_t n, const char *name, char *victim, size_t vn)
{
	char d[512];

	snprintf(d, sizeof(d), "%s/sticky", lt_dir);
	cr_assert_eq(mkdir(d, 0755), 0);
	cr_assert_eq(chmod(d, 01777), 0);
	snprintf(victim, vn, "%s/victim-%s", lt_dir, name);
	cr_assert_eq(lt_sh(NULL, "printf precious >%s", victim), 0);
	snprintf(link, n, "%s/%s", d, name);
	cr_assert_eq(lt_sh(NULL, "setpriv --reuid=65534 --regid=65534 --clear-groups ln -s %s %s", victim,
			   link),
		     0);
}

static void expect_precious(const char *victim)
{
	char *out = NULL;

	cr_expect_eq(lt_sh(&out, "cat %s", victim), 0);
	cr_expect_str_eq(out, "precious", "%s was written through the symlink", victim);
	free(out);
}

Test(hostile_host, symlinks_in_sticky_directories_are_not_followed)
{
	char link[600], victim[600], link2[600], victim2[600], *out = NULL;

	need_rping();
	unpriv_start();
	plant(link, sizeof(link), "cm.pcap", victim, sizeof(victim));
	/* root's uscmd captures to the planted name */
	cr_assert_eq(lt_sh(&out, "USCM_PCAP=%s %s/uscm-sim uscmd --dir %s node1 restart 2>&1", link,
			   lt_bin(), getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	/* a root client writes its counters to another planted name */
	snprintf(link2, sizeof(link2), "%s/sticky/stats", lt_dir);
	snprintf(victim2, sizeof(victim2), "%s/victim-stats", lt_dir);
	cr_assert_eq(lt_sh(NULL, "printf precious >%s && setpriv --reuid=65534 --regid=65534 "
				 "--clear-groups ln -s %s %s",
			   victim2, victim2, link2),
		     0);
	{
		char server[256], client[700];

		snprintf(server, sizeof(server), "rping -s -a 127.10.0.1 -p 7471 -C 3 -V");
		snprintf(client, sizeof(client), "env USCM_STATS=%s rping -c -a 127.10.0.1 -p 7471 -v -C 3 -V",
			 link2);
		out = dpair("rping", 1, server, 1, client, 1, "stats");
		cr_expect_eq(count(out, "ping data: rdma-ping-"), 3, "%s", out);
		/* ELOOP (O_NOFOLLOW), or the kernel's own EACCES for another
		 * user's symlink in a sticky directory (fs.protected_symlinks) */
		cr_expect(strstr(out, "uscm: USCM_STATS=") &&
				  (strstr(out, "symbolic links") || strstr(out, "Permission denied")),
			  "the client did not say why it wrote no counters:\n%s", out);
		free(out);
	}
	expect_precious(victim);
	expect_precious(victim2);
}

Test(hostile_host, a_daemon_of_another_user_is_not_used)
{
	char path[600], *out = NULL;
	int st;

	need_rping();
	unpriv_start();
	/* nobody's "uscmd": a socket that records whatever it is sent */
	snprintf(path, sizeof(path), "%s/sticky-fake", lt_dir);
	cr_assert_eq(mkdir(path, 0755), 0);
	cr_assert_eq(chmod(path, 01777), 0);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/uscmd.sock");
	cr_assert_eq(lt_sh(NULL,
			   "(setpriv --reuid=65534 --regid=65534 --clear-groups timeout 15 socat -u "
			   "UNIX-LISTEN:%s,type=5,fork OPEN:%s/fake.log,creat,append >/dev/null 2>&1 &)",
			   path, lt_dir),
		     0);
	for (int i = 0; i < 100 && lt_sh(NULL, "test -S %s", path) != 0; i++)
		usleep(20 * 1000);
	/* after the node's wrapper, which names the node's own socket */
	st = lt_sh(&out, "USCM_SIM_NODE=node1 %s env USCM_SOCKET=%s USCM_MODE=daemon timeout 10 rping -s -a "
			 "127.10.0.1 -C 1 2>&1",
		   lt_util_env(), path);
	cr_expect_neq(st, 0, "rping ran through nobody's daemon:\n%s", out);
	cr_expect(strstr(out, "runs as uid 65534, not root: not used") != NULL, "rping said:\n%s", out);
	free(out);
	out = NULL;
	lt_sh(&out, "cat %s/fake.log 2>/dev/null | wc -c", lt_dir);
	cr_expect_eq(atoi(out ? out : "1"), 0, "the client sent nobody's daemon %s bytes", out);
	free(out);
	/* the real daemon still serves */
	victim_rping(7472, "real");
}
