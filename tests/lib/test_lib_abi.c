/*
 * ABI of uscm's librdmacm.so.1 against Debian 12's librdmacm 44 (numbers
 * from the shared reference abi.md, measured there with offsetof/sizeof and
 * readelf): struct sizes and offsets, enum values, every exported symbol
 * with its version node, the version chain, and that every rdmacm-utils
 * binary resolves all its imports (they are linked BIND_NOW).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <dlfcn.h>

#include <infiniband/ib.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "libtest.h"

#define OFF(T, m, v) cr_expect_eq(offsetof(T, m), (size_t)(v), #T "." #m " at %zu, want %d", offsetof(T, m), v)
#define SZ(T, v) cr_expect_eq(sizeof(T), (size_t)(v), "sizeof " #T " %zu, want %d", sizeof(T), v)

Test(abi, rdma_cm_id)
{
	SZ(struct rdma_cm_id, 416);
	OFF(struct rdma_cm_id, verbs, 0);
	OFF(struct rdma_cm_id, channel, 8);
	OFF(struct rdma_cm_id, context, 16);
	OFF(struct rdma_cm_id, qp, 24);
	OFF(struct rdma_cm_id, route, 32);
	SZ(struct rdma_route, 312);
	OFF(struct rdma_cm_id, route.addr.src_addr, 32);
	OFF(struct rdma_cm_id, route.addr.src_storage, 32);
	OFF(struct rdma_cm_id, route.addr.dst_addr, 160);
	OFF(struct rdma_cm_id, route.addr.dst_storage, 160);
	OFF(struct rdma_cm_id, route.addr.addr.ibaddr.sgid, 288);
	OFF(struct rdma_cm_id, route.addr.addr.ibaddr.dgid, 304);
	OFF(struct rdma_cm_id, route.addr.addr.ibaddr.pkey, 320);
	OFF(struct rdma_cm_id, route.path_rec, 328);
	OFF(struct rdma_cm_id, route.num_paths, 336);
	OFF(struct rdma_cm_id, ps, 344);
	OFF(struct rdma_cm_id, port_num, 348);
	OFF(struct rdma_cm_id, event, 352);
	OFF(struct rdma_cm_id, send_cq_channel, 360);
	OFF(struct rdma_cm_id, send_cq, 368);
	OFF(struct rdma_cm_id, recv_cq_channel, 376);
	OFF(struct rdma_cm_id, recv_cq, 384);
	OFF(struct rdma_cm_id, srq, 392);
	OFF(struct rdma_cm_id, pd, 400);
	OFF(struct rdma_cm_id, qp_type, 408);
}

Test(abi, channel_and_params)
{
	SZ(struct rdma_event_channel, 4);
	OFF(struct rdma_event_channel, fd, 0);

	SZ(struct rdma_conn_param, 24);
	OFF(struct rdma_conn_param, private_data, 0);
	OFF(struct rdma_conn_param, private_data_len, 8);
	OFF(struct rdma_conn_param, responder_resources, 9);
	OFF(struct rdma_conn_param, initiator_depth, 10);
	OFF(struct rdma_conn_param, flow_control, 11);
	OFF(struct rdma_conn_param, retry_count, 12);
	OFF(struct rdma_conn_param, rnr_retry_count, 13);
	OFF(struct rdma_conn_param, srq, 14);
	OFF(struct rdma_conn_param, qp_num, 16);

	SZ(struct rdma_ud_param, 56);
	OFF(struct rdma_ud_param, private_data, 0);
	OFF(struct rdma_ud_param, private_data_len, 8);
	OFF(struct rdma_ud_param, ah_attr, 16);
	SZ(struct ibv_ah_attr, 32);
	OFF(struct rdma_ud_param, qp_num, 48);
	OFF(struct rdma_ud_param, qkey, 52);

	SZ(struct rdma_cm_event, 80);
	OFF(struct rdma_cm_event, id, 0);
	OFF(struct rdma_cm_event, listen_id, 8);
	OFF(struct rdma_cm_event, event, 16);
	OFF(struct rdma_cm_event, status, 20);
	OFF(struct rdma_cm_event, param, 24);
	OFF(struct rdma_cm_event, param.conn, 24);
	OFF(struct rdma_cm_event, param.ud, 24);
}

Test(abi, addrinfo)
{
	SZ(struct rdma_addrinfo, 96);
	OFF(struct rdma_addrinfo, ai_flags, 0);
	OFF(struct rdma_addrinfo, ai_family, 4);
	OFF(struct rdma_addrinfo, ai_qp_type, 8);
	OFF(struct rdma_addrinfo, ai_port_space, 12);
	OFF(struct rdma_addrinfo, ai_src_len, 16);
	OFF(struct rdma_addrinfo, ai_dst_len, 20);
	OFF(struct rdma_addrinfo, ai_src_addr, 24);
	OFF(struct rdma_addrinfo, ai_dst_addr, 32);
	OFF(struct rdma_addrinfo, ai_src_canonname, 40);
	OFF(struct rdma_addrinfo, ai_dst_canonname, 48);
	OFF(struct rdma_addrinfo, ai_route_len, 56);
	OFF(struct rdma_addrinfo, ai_route, 64);
	OFF(struct rdma_addrinfo, ai_connect_len, 72);
	OFF(struct rdma_addrinfo, ai_connect, 80);
	OFF(struct rdma_addrinfo, ai_next, 88);
}

Test(abi, paths_and_sockaddr_ib)
{
	SZ(struct ibv_sa_path_rec, 64);
	SZ(struct ibv_path_record, 64);
	SZ(struct ibv_path_data, 72);
	cr_expect_eq(AF_IB, 27);
	cr_expect_eq(PF_IB, 27);
	SZ(struct sockaddr_ib, 48);
	OFF(struct sockaddr_ib, sib_family, 0);
	OFF(struct sockaddr_ib, sib_pkey, 2);
	OFF(struct sockaddr_ib, sib_flowinfo, 4);
	OFF(struct sockaddr_ib, sib_addr, 8);
	OFF(struct sockaddr_ib, sib_sid, 24);
	OFF(struct sockaddr_ib, sib_sid_mask, 32);
	OFF(struct sockaddr_ib, sib_scope_id, 40);
	cr_expect_leq(sizeof(struct sockaddr_ib), sizeof(struct sockaddr_storage));
	SZ(struct rdma_cm_join_mc_attr_ex, 16);
}

Test(abi, enums)
{
	static const enum rdma_cm_event_type ev[] = {
		RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_ERROR,
		RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_ERROR,
		RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_RESPONSE,
		RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE,
		RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_ESTABLISHED,
		RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL,
		RDMA_CM_EVENT_MULTICAST_JOIN, RDMA_CM_EVENT_MULTICAST_ERROR,
		RDMA_CM_EVENT_ADDR_CHANGE, RDMA_CM_EVENT_TIMEWAIT_EXIT,
	};
	for (int i = 0; i < 16; i++)
		cr_expect_eq((int)ev[i], i);
	cr_expect_eq(RDMA_PS_IPOIB, 0x0002);
	cr_expect_eq(RDMA_PS_TCP, 0x0106);
	cr_expect_eq(RDMA_PS_UDP, 0x0111);
	cr_expect_eq(RDMA_PS_IB, 0x013F);
	cr_expect_eq(RDMA_OPTION_ID, 0);
	cr_expect_eq(RDMA_OPTION_ID_TOS, 0);
	cr_expect_eq(RDMA_OPTION_ID_REUSEADDR, 1);
	cr_expect_eq(RDMA_OPTION_ID_AFONLY, 2);
	cr_expect_eq(RDMA_OPTION_ID_ACK_TIMEOUT, 3);
	cr_expect_eq(RDMA_OPTION_IB, 1);
	cr_expect_eq(RDMA_OPTION_IB_PATH, 1);
	cr_expect_eq(RAI_PASSIVE, 1);
	cr_expect_eq(RAI_NUMERICHOST, 2);
	cr_expect_eq(RAI_NOROUTE, 4);
	cr_expect_eq(RAI_FAMILY, 8);
	cr_expect_eq(RDMA_MAX_RESP_RES, 0xFF);
	cr_expect_eq(RDMA_MAX_INIT_DEPTH, 0xFF);
	cr_expect_eq(RDMA_UDP_QKEY, 0x01234567);
	cr_expect_eq(RDMA_IB_IP_PS_TCP, 0x0000000001060000ULL);
	cr_expect_eq(RDMA_IB_IP_PS_UDP, 0x0000000001110000ULL);
	cr_expect_eq(RDMA_IB_PS_IB, 0x00000000013F0000ULL);
	cr_expect_eq(RDMA_IB_IP_PS_MASK, 0xFFFFFFFFFFFF0000ULL);
	cr_expect_eq(RDMA_CM_JOIN_MC_ATTR_ADDRESS, 1);
	cr_expect_eq(RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, 2);
	cr_expect_eq(RDMA_MC_JOIN_FLAG_FULLMEMBER, 0);
	cr_expect_eq(RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, 1);
}

Test(abi, event_str)
{
	cr_expect_str_eq(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED), "RDMA_CM_EVENT_ADDR_RESOLVED");
	cr_expect_str_eq(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
	cr_expect_str_eq(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");
	cr_expect_str_eq(rdma_event_str((enum rdma_cm_event_type)99), "UNKNOWN EVENT");
}

/* ---- symbols ------------------------------------------------------------------- */

static const char *const v10[] = {
	"rdma_accept", "rdma_ack_cm_event", "rdma_bind_addr", "rdma_connect", "rdma_create_ep",
	"rdma_create_event_channel", "rdma_create_id", "rdma_create_qp", "rdma_create_qp_ex",
	"rdma_create_srq", "rdma_create_srq_ex", "rdma_destroy_ep", "rdma_destroy_event_channel",
	"rdma_destroy_id", "rdma_destroy_qp", "rdma_destroy_srq", "rdma_disconnect",
	"rdma_event_str", "rdma_free_devices", "rdma_freeaddrinfo", "rdma_get_cm_event",
	"rdma_get_devices", "rdma_get_dst_port", "rdma_get_request", "rdma_get_src_port",
	"rdma_getaddrinfo", "rdma_join_multicast", "rdma_leave_multicast", "rdma_listen",
	"rdma_migrate_id", "rdma_notify", "rdma_reject", "rdma_resolve_addr", "rdma_resolve_route",
	"rdma_set_option", "raccept", "rbind", "rclose", "rconnect", "rfcntl", "rgetpeername",
	"rgetsockname", "rgetsockopt", "riomap", "riounmap", "riowrite", "rlisten", "rpoll", "rread",
	"rreadv", "rrecv", "rrecvfrom", "rrecvmsg", "rselect", "rsend", "rsendmsg", "rsendto",
	"rsetsockopt", "rshutdown", "rsocket", "rwrite", "rwritev", NULL,
};
static const char *const v11[] = { "rdma_join_multicast_ex", NULL };
static const char *const v12[] = { "rdma_establish", "rdma_init_qp_attr", NULL };
static const char *const v13[] = { "rdma_get_remote_ece", "rdma_reject_ece", "rdma_set_local_ece", NULL };
static const char *const v14[] = { "rdma_resolve_addrinfo", "rdma_query_addrinfo", "rdma_write_cm_event", NULL };
/* uscm's own node (include/rdma/uscm_stats.h), apart from rdma-core's. */
static const char *const vuscm[] = { "uscm_get_stats", NULL };

static char *lib_path(void)
{
	static char p[1100];
	snprintf(p, sizeof(p), "%s/lib/librdmacm.so.1", lt_build());
	return p;
}

static char *dynsyms(void)
{
	char *out = NULL;
	int rc = lt_sh(&out, "readelf --dyn-syms -W '%s' | awk '$7 != \"UND\" && $5 == \"GLOBAL\" {print $8}'",
		       lib_path());
	cr_assert_eq(rc, 0, "readelf failed");
	return out;
}

static void expect_version(const char *syms, const char *const *names, const char *ver)
{
	char want[128];

	for (int i = 0; names[i]; i++) {
		snprintf(want, sizeof(want), "\n%s@@%s\n", names[i], ver);
		cr_expect(strstr(syms, want), "%s is not exported as %s@@%s", names[i], names[i], ver);
	}
}

Test(abi, every_symbol_with_its_version)
{
	char *raw = dynsyms(), *syms;
	size_t n = 0, want = 0;

	cr_assert(access(lib_path(), R_OK) == 0, "%s not built", lib_path());
	/* Newline-framed for exact matches. */
	syms = malloc(strlen(raw) + 3);
	sprintf(syms, "\n%s\n", raw);
	expect_version(syms, v10, "RDMACM_1.0");
	expect_version(syms, v11, "RDMACM_1.1");
	expect_version(syms, v12, "RDMACM_1.2");
	expect_version(syms, v13, "RDMACM_1.3");
	expect_version(syms, v14, "RDMACM_1.4");
	expect_version(syms, vuscm, "USCM_1.0");
	/* Nothing else is exported (besides the version nodes themselves). */
	for (const char *const *l[] = { v10, v11, v12, v13, v14, vuscm }, *const **p = l; p < l + 6;
	     p++)
		for (int i = 0; (*p)[i]; i++)
			want++;
	for (char *s = raw; *s; s++)
		if (*s == '\n')
			n++;
	cr_expect_eq(n, want + 6, "%zu exported names, want %zu functions + 6 version nodes:\n%s", n,
		     want, raw);
	cr_expect_eq(want, 72);
	free(raw);
	free(syms);
}

Test(abi, version_chain_and_soname)
{
	char *out = NULL;

	cr_assert_eq(lt_sh(&out, "readelf -V -d '%s'", lib_path()), 0);
	cr_expect(strstr(out, "Library soname: [librdmacm.so.1]"), "SONAME");
	cr_expect(strstr(out, "Name: RDMACM_1.0"), "1.0");
	cr_expect(strstr(out, "Name: RDMACM_1.1"), "1.1");
	cr_expect(strstr(out, "Parent 1: RDMACM_1.0"), "1.1 <- 1.0");
	cr_expect(strstr(out, "Parent 1: RDMACM_1.1"), "1.2 <- 1.1");
	cr_expect(strstr(out, "Parent 1: RDMACM_1.2"), "1.3 <- 1.2");
	cr_expect(strstr(out, "Parent 1: RDMACM_1.3"), "1.4 <- 1.3");
	cr_expect(strstr(out, "Parent 1: RDMACM_1.4"), "USCM_1.0 <- 1.4");
	free(out);
}

Test(abi, dlopen_now_and_dlvsym)
{
	void *h = dlopen(lib_path(), RTLD_NOW | RTLD_LOCAL);

	cr_assert(h, "dlopen: %s", dlerror());
	cr_expect(dlvsym(h, "rpoll", "RDMACM_1.0"), "rpoll@RDMACM_1.0");
	cr_expect(dlvsym(h, "rdma_establish", "RDMACM_1.2"), "rdma_establish@RDMACM_1.2");
	cr_expect(dlvsym(h, "rdma_write_cm_event", "RDMACM_1.4"), "rdma_write_cm_event@RDMACM_1.4");
	cr_expect_null(dlvsym(h, "rdma_establish", "RDMACM_1.0"), "rdma_establish is 1.2 only");
	/* Internal symbols stay hidden. */
	cr_expect_null(dlsym(h, "cma_init_locked"));
	cr_expect_null(dlsym(h, "um_port_open"));
	cr_expect_null(dlsym(h, "cmp_engine_new"));
	dlclose(h);
}

/* Every rdmacm-utils binary is linked BIND_NOW: it starts only if every
 * symbol (with its version) it imports is there. */
Test(abi, rdmacm_utils_binaries_load)
{
	static const char *const bins[] = { "rping", "cmtime", "ucmatose", "udaddy", "mckey",
					    "rdma_client", "rdma_server", "rdma_xclient",
					    "rdma_xserver", "rcopy", "rstream", "riostream", "udpong",
					    NULL };
	int tried = 0;

	for (int i = 0; bins[i]; i++) {
		char *out = NULL;
		if (lt_sh(NULL, "command -v %s >/dev/null", bins[i]) != 0)
			continue;
		tried++;
		/* ldd names the library that would be loaded; LD_BIND_NOW makes
		 * ld.so resolve everything, as BIND_NOW does. */
		lt_sh(&out, "LD_LIBRARY_PATH='%s/lib' LD_BIND_NOW=1 ldd -r $(command -v %s) 2>&1",
		      lt_build(), bins[i]);
		cr_expect(strstr(out, "/lib/librdmacm.so.1") && !strstr(out, "x86_64-linux-gnu/librdmacm"),
			  "%s does not load our librdmacm:\n%s", bins[i], out);
		cr_expect_null(strstr(out, "undefined symbol"), "%s:\n%s", bins[i], out);
		cr_expect_null(strstr(out, "not found"), "%s:\n%s", bins[i], out);
		free(out);
	}
	if (!tried)
		tf_skip_missing("rdmacm-utils is not installed (scripts/install-deps.sh adds it)");
}
