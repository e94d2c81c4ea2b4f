/*
 * test_sim_verbs_private.c - the provider-side ABI of the drop-in
 * libibverbs.so.1 (sim/verbs/sv_private.c): its dynamic symbol table defines
 * exactly the (version, name) pairs of Debian's libibverbs (rdma-core 44),
 * provider libraries load against it (their constructors register), the
 * ibv_cmd_* commands fail with EOPNOTSUPP, no provider context can be made,
 * and the implemented helpers compute what they should. Needs no fabric.
 * The comparison with Debian's library skips when objdump (binutils) or
 * the real library is missing.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_skip.h"

#define REAL_LIB "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

/* The defined symbols of a shared object as "VERSION NAME" lines, sorted
 * (hidden non-default versions in parentheses, as objdump shows them). */
static char *defined_symbols(const char *path)
{
	char cmd[1024], *buf = NULL;
	size_t len = 0;
	FILE *p, *m;

	snprintf(cmd, sizeof(cmd),
		 "objdump -T '%s' | grep -v '\\*UND\\*' | grep IBVERBS | "
		 "awk '{print $(NF-1), $NF}' | sort -u", path);
	p = popen(cmd, "r");
	cr_assert(p);
	m = open_memstream(&buf, &len);
	cr_assert(m);
	for (int c; (c = fgetc(p)) != EOF;)
		fputc(c, m);
	fclose(m);
	pclose(p);
	return buf;
}

Test(sim_verbs_private, symbol_versions_match_debian)
{
	Dl_info di;
	char *ours, *real;

	if (system("command -v objdump >/dev/null 2>&1") != 0)
		tf_skip_missing("objdump (binutils) is not installed");
	if (access(REAL_LIB, R_OK) != 0)
		tf_skip_missing(REAL_LIB " (Debian libibverbs1) is not installed");
	cr_assert(dladdr((void *)ibv_get_device_list, &di) && di.dli_fname);
	cr_assert(strstr(di.dli_fname, "sim/lib"), "linked against %s, not the drop-in",
		  di.dli_fname);
	ours = defined_symbols(di.dli_fname);
	real = defined_symbols(REAL_LIB);
	cr_assert(strstr(real, "IBVERBS_PRIVATE_34 ibv_cmd_destroy_cq"), "%s", real);
	cr_expect_str_eq(ours, real);
	free(ours);
	free(real);
}

/* Providers that programs link directly (perftest, libfabric, UCX and
 * pyverbs link libmlx5 / libefa): they load, binding every IBVERBS_PRIVATE_34
 * symbol now (RTLD_NOW), and their constructors register with us. */
Test(sim_verbs_private, providers_load)
{
	static const char *const libs[] = { "libmlx5.so.1", "libefa.so.1", "libmlx4.so.1" };
	int loaded = 0;

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);

		if (!h && strstr(dlerror(), "cannot open shared object"))
			continue; /* not installed */
		cr_expect(h, "%s: %s", libs[i], dlerror());
		loaded += h != NULL;
	}
	if (!loaded)
		tf_skip_missing("no provider library (Debian ibverbs-providers) is installed");
}

/* driver.h's prototypes, with the command structures as opaque pointers. */
struct verbs_context;
int ibv_cmd_alloc_pd(struct ibv_context *, struct ibv_pd *, void *, size_t, void *, size_t);
int ibv_cmd_destroy_cq(struct ibv_cq *);
int ibv_cmd_poll_cq(struct ibv_cq *, int, struct ibv_wc *);
int ibv_cmd_post_send(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
int execute_ioctl(struct ibv_context *, void *);
void *_verbs_init_and_alloc_context(struct ibv_device *, int, size_t, struct verbs_context *,
				    uint32_t);
struct ibv_context *verbs_open_device(struct ibv_device *, void *);
void verbs_init_cq(struct ibv_cq *, struct ibv_context *, struct ibv_comp_channel *, void *);
void __verbs_log(struct verbs_context *, uint32_t, const char *, ...);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *, struct ib_uverbs_qp_attr *);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *, struct ib_user_path_rec *);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *, struct ibv_sa_path_rec *);

Test(sim_verbs_private, commands_fail_with_eopnotsupp)
{
	struct ibv_device dev;

	cr_expect_eq(ibv_cmd_alloc_pd(NULL, NULL, NULL, 0, NULL, 0), EOPNOTSUPP);
	cr_expect_eq(ibv_cmd_destroy_cq(NULL), EOPNOTSUPP);
	cr_expect_eq(ibv_cmd_poll_cq(NULL, 1, NULL), EOPNOTSUPP);
	cr_expect_eq(ibv_cmd_post_send(NULL, NULL, NULL), EOPNOTSUPP);
	cr_expect_eq(execute_ioctl(NULL, NULL), EOPNOTSUPP);
	memset(&dev, 0, sizeof(dev));
	errno = 0;
	cr_expect_null(_verbs_init_and_alloc_context(&dev, -1, 4096, NULL, 0));
	cr_expect_eq(errno, EOPNOTSUPP);
	errno = 0;
	cr_expect_null(verbs_open_device(&dev, NULL), "a device that is not the sim's");
	cr_expect_eq(errno, EOPNOTSUPP);
}

/* The chain of command blocks cmd_ioctl.h builds: next, next_attr,
 * last_attr, five bytes of flags, then the ioctl header and its attrs. */
struct cmdbuf {
	struct cmdbuf *next;
	struct ib_uverbs_attr *next_attr, *last_attr;
	uint8_t b[5];
	struct ib_uverbs_ioctl_hdr hdr;
	struct ib_uverbs_attr attrs[8];
};
unsigned int __ioctl_final_num_attrs(unsigned int, struct cmdbuf *);

Test(sim_verbs_private, ioctl_final_num_attrs_counts_linked_blocks)
{
	struct cmdbuf a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.next = &b;
	a.next_attr = &a.attrs[3];
	b.next_attr = &b.attrs[2];
	cr_expect_eq(__ioctl_final_num_attrs(4, &a), 4 + 3 + 2);
	cr_expect_eq(__ioctl_final_num_attrs(4, NULL), 4);
}

Test(sim_verbs_private, verbs_init_cq_and_log)
{
	struct ibv_context ctx;
	struct ibv_comp_channel ch = {.context = &ctx, .fd = -1, .refcnt = 1};
	struct ibv_cq cq;
	int tag;

	memset(&ctx, 0, sizeof(ctx));
	pthread_mutex_init(&ctx.mutex, NULL);
	memset(&cq, 0xA5, sizeof(cq));
	verbs_init_cq(&cq, &ctx, &ch, &tag);
	cr_expect(cq.context == &ctx && cq.channel == &ch && cq.cq_context == &tag);
	cr_expect(cq.comp_events_completed == 0 && cq.async_events_completed == 0);
	cr_expect_eq(ch.refcnt, 2);
	errno = 1234;
	__verbs_log(NULL, 100, "not printed: above VERBS_LOG_LEVEL %d\n", 100);
	cr_expect_eq(errno, 1234, "the log keeps errno");
}

Test(sim_verbs_private, kern_abi_copies)
{
	struct ib_uverbs_qp_attr k;
	struct ibv_qp_attr q;
	struct ib_user_path_rec kp, kp2;
	struct ibv_sa_path_rec p;

	memset(&k, 0, sizeof(k));
	memset(&q, 0, sizeof(q));
	k.qp_state = IBV_QPS_RTS;
	k.path_mtu = IBV_MTU_2048;
	k.dest_qp_num = 0x123456;
	k.max_send_wr = 77;
	k.ah_attr.dlid = 9;
	k.ah_attr.is_global = 1;
	k.ah_attr.grh.dgid[15] = 0x42;
	k.alt_ah_attr.sl = 3;
	k.retry_cnt = 7;
	k.timeout = 14;
	ibv_copy_qp_attr_from_kern(&q, &k);
	cr_expect(q.qp_state == IBV_QPS_RTS && q.path_mtu == IBV_MTU_2048);
	cr_expect(q.dest_qp_num == 0x123456 && q.cap.max_send_wr == 77);
	cr_expect(q.ah_attr.dlid == 9 && q.ah_attr.is_global == 1 &&
		  q.ah_attr.grh.dgid.raw[15] == 0x42 && q.alt_ah_attr.sl == 3);
	cr_expect(q.retry_cnt == 7 && q.timeout == 14);

	memset(&kp, 0, sizeof(kp));
	kp.dgid[0] = 0xfe;
	kp.sgid[15] = 1;
	kp.dlid = htobe16(5);
	kp.pkey = htobe16(0xffff);
	kp.mtu = IBV_MTU_4096;
	kp.packet_life_time = 14;
	kp.reversible = 1;
	ibv_copy_path_rec_from_kern(&p, &kp);
	cr_expect(p.dgid.raw[0] == 0xfe && p.sgid.raw[15] == 1 && be16toh(p.dlid) == 5);
	cr_expect(be16toh(p.pkey) == 0xffff && p.mtu == IBV_MTU_4096 &&
		  p.packet_life_time == 14 && p.reversible == 1);
	memset(&kp2, 0, sizeof(kp2));
	ibv_copy_path_rec_to_kern(&kp2, &p);
	cr_expect_eq(memcmp(&kp, &kp2, sizeof(kp)), 0, "the round trip keeps every field");
}

/* ---- programs that link a provider load over the drop-in ---------------------- */

/* Runs `cmd` (shell) with LD_LIBRARY_PATH = the drop-in's directory; fails
 * on a dynamic-linker error (before sv_private.c: "symbol lookup error:
 * ... libefa.so.1: undefined symbol: ibv_cmd_destroy_cq, version
 * IBVERBS_PRIVATE_34"); returns the exit status, the output in *out. */
static int run_over_dropin(const char *bin, const char *pkg, const char *cmd, char **out)
{
	Dl_info di;
	char dir[512], sh[1024], *slash;
	size_t len = 0;
	FILE *p, *m;
	int st;

	if (access(bin, X_OK) != 0)
		tf_skip_missing("%s (Debian %s) is not installed", bin, pkg);
	cr_assert(dladdr((void *)ibv_get_device_list, &di) && di.dli_fname);
	snprintf(dir, sizeof(dir), "%s", di.dli_fname);
	slash = strrchr(dir, '/');
	cr_assert(slash);
	*slash = 0;
	/* no fabric: the drop-in lists no device, which is all a load needs */
	snprintf(sh, sizeof(sh), "env -u USCM_SIM_NODE LD_LIBRARY_PATH='%s' %s 2>&1", dir, cmd);
	p = popen(sh, "r");
	cr_assert(p);
	m = open_memstream(out, &len);
	cr_assert(m);
	for (int c; (c = fgetc(p)) != EOF;)
		fputc(c, m);
	fclose(m);
	st = pclose(p);
	cr_expect(!strstr(*out, "undefined symbol") && !strstr(*out, "symbol lookup error") &&
		  !strstr(*out, "error while loading shared libraries"),
		  "%s does not load over the drop-in:\n%s", cmd, *out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(sim_verbs_private, perftest_loads)
{
	char *out = NULL;

	run_over_dropin("/usr/bin/ib_send_lat", "perftest", "/usr/bin/ib_send_lat -h", &out);
	cr_expect(strstr(out, "Usage:"), "%s", out); /* perftest exits 1 after its usage */
	free(out);
}

Test(sim_verbs_private, fi_info_loads)
{
	char *out = NULL;

	cr_expect_eq(run_over_dropin("/usr/bin/fi_info", "libfabric-bin", "/usr/bin/fi_info -l", &out), 0,
		     "%s", out);
	/* (verbs itself is listed only where there is a device) */
	cr_expect(strstr(out, "version:"), "fi_info -l lists no provider:\n%s", out);
	free(out);
}

Test(sim_verbs_private, ucx_info_loads)
{
	char *out = NULL;

	cr_expect_eq(run_over_dropin("/usr/bin/ucx_info", "ucx-utils", "/usr/bin/ucx_info -v", &out), 0,
		     "%s", out);
	free(out);
}

Test(sim_verbs_private, pyverbs_loads)
{
	char *out = NULL;

	if (system("/usr/bin/python3 -c 'import importlib.util,sys; "
		   "sys.exit(importlib.util.find_spec(\"pyverbs\") is None)' 2>/dev/null") != 0)
		tf_skip_missing("pyverbs (Debian python3-pyverbs) is not installed");
	cr_expect_eq(run_over_dropin("/usr/bin/python3", "python3-pyverbs",
				     "/usr/bin/python3 -c 'import pyverbs.device'", &out),
		     0, "%s", out);
	free(out);
}
