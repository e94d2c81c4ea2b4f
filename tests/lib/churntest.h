/* Helpers for the tests that drive build/bin/uscm-churn (tools/uscm_churn.c)
 * on a private fabric (libtest.h): start a churn server or client as a
 * node, with its stdout / stderr in files; wait for a line in its output
 * or for its exit; read its `RESULT key=value ...` line and the library's
 * exit report (USCM_EXIT_REPORT); sample its RSS and open fds. Used by
 * test_lib_faults.c (the fault matrix) and test_lib_soak.c. */
#ifndef USCM_CHURNTEST_H
#define USCM_CHURNTEST_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>

#include "libtest.h"

struct ct_proc {
	pid_t pid;
	int in_fd;         /* its stdin (a pipe), -1 once closed */
	char out[320], err[320];
	int status;        /* wait status once exited */
	int exited;
	uint64_t t_start, t_exit;
};

static inline char *ct_read(const char *path)
{
	char *buf = NULL;
	size_t n = 0, cap = 0;
	FILE *fp = fopen(path, "r");

	if (!fp)
		return strdup("");
	for (;;) {
		if (n + 4097 > cap) {
			cap = cap ? 2 * cap : 8192;
			buf = realloc(buf, cap);
		}
		size_t k = fread(buf + n, 1, cap - n - 1, fp);
		if (!k)
			break;
		n += k;
	}
	fclose(fp);
	if (!buf)
		return strdup("");
	buf[n] = 0;
	return buf;
}

/* Starts `uscm-churn ARGS` (split on spaces) as node<node>, output in
 * dir/tag.out and dir/tag.err. */
static inline void ct_spawn(struct ct_proc *p, const char *dir, const char *tag, int node,
			    const char *args)
{
	char *argv[48], copy[1024], exe[1024], nd[32];
	int in[2], argc = 0;

	memset(p, 0, sizeof(*p));
	snprintf(p->out, sizeof(p->out), "%s/%s.out", dir, tag);
	snprintf(p->err, sizeof(p->err), "%s/%s.err", dir, tag);
	snprintf(exe, sizeof(exe), "%s/uscm-churn", lt_bin());
	snprintf(copy, sizeof(copy), "%s", args);
	snprintf(nd, sizeof(nd), "node%d", node);
	argv[argc++] = exe;
	for (char *s = strtok(copy, " "); s && argc < 46; s = strtok(NULL, " "))
		argv[argc++] = s;
	argv[argc] = NULL;
	cr_assert_eq(pipe(in), 0);
	fflush(NULL);
	p->t_start = lt_now_ms();
	p->pid = fork();
	cr_assert_geq(p->pid, 0);
	if (p->pid == 0) {
		int o = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the test */
		dup2(in[0], 0);
		dup2(o, 1);
		dup2(e, 2);
		close(in[1]);
		setenv("USCM_SIM_NODE", nd, 1);
		if (lt_daemon) {
			char sock[600];

			snprintf(sock, sizeof(sock), "%s/%s/uscmd.sock", getenv("USCM_SIM_DIR"), nd);
			setenv("USCM_SOCKET", sock, 1);
			setenv("USCM_MODE", "daemon", 1);
		}
		execv(exe, argv);
		_exit(127);
	}
	close(in[0]);
	p->in_fd = in[1];
}

/* 1 once the process has exited (within ms), else 0. */
static inline int ct_wait_exit(struct ct_proc *p, int ms)
{
	uint64_t t0 = lt_now_ms();

	while (!p->exited) {
		pid_t r = waitpid(p->pid, &p->status, WNOHANG);

		if (r == p->pid) {
			p->exited = 1;
			p->t_exit = lt_now_ms();
			break;
		}
		if (lt_now_ms() - t0 >= (uint64_t)ms)
			return 0;
		usleep(2000);
	}
	return 1;
}

/* SIGKILLs a process that has not exited and reaps it. */
static inline void ct_kill(struct ct_proc *p)
{
	if (p->pid > 0 && !p->exited) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &p->status, 0);
		p->exited = 1;
		p->t_exit = lt_now_ms();
	}
	if (p->in_fd >= 0) {
		close(p->in_fd);
		p->in_fd = -1;
	}
}

/* 1 when `text` shows up in the process's stdout within ms. */
static inline int ct_wait_text(struct ct_proc *p, const char *text, int ms)
{
	uint64_t t0 = lt_now_ms();

	for (;;) {
		char *s = ct_read(p->out);
		int found = strstr(s, text) != NULL;

		free(s);
		if (found)
			return 1;
		if (lt_now_ms() - t0 >= (uint64_t)ms)
			return 0;
		if (p->exited || waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
			p->exited = 1;
			p->t_exit = p->t_exit ? p->t_exit : lt_now_ms();
			s = ct_read(p->out);
			found = strstr(s, text) != NULL;
			free(s);
			return found;
		}
		usleep(5000);
	}
}

/* The value of key in the RESULT line of text, or -1. */
static inline long ct_result(const char *text, const char *key)
{
	const char *r = strstr(text, "RESULT ");
	char pat[64];

	if (!r)
		return -1;
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *k = strstr(r, pat);
	return k ? strtol(k + strlen(pat), NULL, 10) : -1;
}

/* Whether the library's exit report says nothing was left: no id, no
 * connection, no timer. */
static inline int ct_quiescent(const char *err)
{
	if (lt_daemon) {
		/* daemon mode: the process's exit report shows only its own ids;
		 * connections and timers are the daemons'. Both must come back
		 * to nothing (TimeWait and DREQ retries may take a moment). */
		int ok = 0;

		if (!strstr(err, "uscm: exit: ids=0"))
			return 0;
		for (int i = 0; i < 100 && !ok; i++) {
			ok = 1;
			for (int n = 1; n <= 2 && ok; n++) {
				char *out = NULL;

				lt_sh(&out, "%s/uscmd --status --socket %s/node%d/uscmd.sock 2>&1", lt_bin(),
				      getenv("USCM_SIM_DIR"), n);
				ok = out && strstr(out, ", 0 ids,") && strstr(out, "engine: conns=0 timers=0");
				free(out);
			}
			if (!ok)
				usleep(100 * 1000);
		}
		return ok;
	}
	return strstr(err, "uscm: exit: ids=0 conns=0 timers=0") != NULL;
}

/* A field of /proc/PID/status in kB ("VmRSS", "RssAnon": the part that is
 * not file pages such as the libraries and the fabric's mmap'd state) and
 * the number of open fds of pid (-1 when gone). */
static inline long ct_status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	long kb = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(fp = fopen(path, "r")))
		return -1;
	size_t fl = strlen(field);

	while (fgets(line, sizeof(line), fp))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			kb = strtol(line + fl + 1, NULL, 10);
	fclose(fp);
	return kb;
}

static inline long ct_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Runs `uscm-sim CMD --dir <this test's fabric> ARGS`; its exit status. */
static inline int ct_sim(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int ct_sim(const char *cmd, const char *fmt, ...)
{
	char args[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	return lt_sh(NULL, "%s/uscm-sim %s --dir %s %s >/dev/null 2>&1", lt_bin(), cmd,
		     getenv("USCM_SIM_DIR"), args);
}

#endif
