/* Helpers shared by the sim/ tests: private fabric directories under /tmp,
 * packets, commands. Every fabric a test makes lives in its own mkdtemp
 * directory and uses only 127.0.0.0/8. */
#ifndef USCM_SIMTEST_H
#define USCM_SIMTEST_H

#include "simf.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline char *st_mkdtemp(void)
{
	char *d = strdup("/tmp/uscm-simtest.XXXXXX");

	cr_assert(d && mkdtemp(d), "mkdtemp");
	return d;
}

static inline void st_rmrf(const char *dir)
{
	char cmd[512];

	if (!dir || strncmp(dir, "/tmp/uscm-simtest.", 18) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return;
}

static inline uint64_t st_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A UD datagram (BTH, DETH, payload, room for the ICRC) of len bytes. */
static inline size_t st_ud_packet(uint8_t *pkt, uint32_t dqp, uint32_t psn, uint32_t qkey,
				  uint32_t sqp, const uint8_t *payload, size_t plen)
{
	struct simf_bth b = { .opcode = SIMF_OP_UD_SEND_ONLY, .pkey = 0xFFFF, .dest_qp = dqp,
			      .psn = psn, .resv8a = SIMF_RESV8A(0, 0) };

	simf_bth_put(pkt, &b);
	pkt[12] = (uint8_t)(qkey >> 24); pkt[13] = (uint8_t)(qkey >> 16);
	pkt[14] = (uint8_t)(qkey >> 8); pkt[15] = (uint8_t)qkey;
	pkt[16] = 0; pkt[17] = (uint8_t)(sqp >> 16); pkt[18] = (uint8_t)(sqp >> 8); pkt[19] = (uint8_t)sqp;
	memcpy(pkt + 20, payload, plen);
	memset(pkt + 20 + plen, 0, 4);
	return 20 + plen + 4;
}

/* Waits up to ms for one datagram; returns its length or -1. */
static inline ssize_t st_recv(struct simf *f, int fd, void *buf, size_t cap, int *src,
			      uint16_t *sport, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return simf_recv(f, fd, buf, cap, src, sport);
}

/* Runs a shell command line, returns its exit status (or -1). Output to
 * *out (malloc'd) when out is not NULL. */
static inline int st_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int st_sh(char **out, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	FILE *fp;
	size_t n = 0, cap = 0;
	char *buf = NULL;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fp = popen(cmd, "r");
	if (!fp)
		return -1;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
		}
		size_t k = fread(buf + n, 1, cap - n - 1, fp);
		if (k == 0)
			break;
		n += k;
	}
	if (buf)
		buf[n] = 0;
	st = pclose(fp);
	if (out)
		*out = buf ? buf : strdup("");
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline const char *st_bin(void)
{
	const char *b = getenv("USCM_BIN_DIR");

	return b && *b ? b : "build/bin";
}

static inline int st_have(const char *prog)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Claims a free transport instance the way uscm-sim does (binding node 0's
 * QP1 address) so unit-test fabrics never collide with parallel ones. The
 * returned fd holds it; close it at the end. */
static inline int st_claim_instance(unsigned *inst)
{
	unsigned h = (unsigned)getpid() % 254;

	for (unsigned k = 0; k < 254; k++) {
		unsigned i = (h + k) % 254 + 1;
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		a.sin_addr.s_addr = htonl(127u << 24 | 77u << 16 | i << 8);
		a.sin_port = htons(simf_qp_port(1));
		if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			*inst = i;
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	return -1;
}

#endif
