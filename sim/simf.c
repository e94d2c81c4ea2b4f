/*
 * simf.c - the simulated fabric's shared core: state file, node table,
 * transport over UDP loopback with fault injection, delay line, pcap
 * capture, ICRC/VCRC, agent and multicast tables. See simf.h, docs/sim.md.
 */
#define _GNU_SOURCE
#include "simf.h"
#include "simf_link.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STATE_FILE "fabric.state"
#define HOSTS_FILE "hosts"
#define GUID_BASE 0x0002c90300000000ull
#define SM_NAME_IP_HOST 254 /* the SM's name address 127.10.0.254 (not in hosts) */
#define UDP_ROCE_PORT 4791
#define PCAP_LINK_ETHERNET 1
#define PCAP_LINK_ERF 197
#define ERF_TYPE_INFINIBAND 21
#define ERF_FLAG_VLEN 0x04
#define SOCK_BUF (4 << 20)

/* ---- private per-handle state ------------------------------------------- */

struct dl_item {
	uint64_t due, seq;
	int fd, src, dst;
	uint16_t port, sport;
	size_t len;
	uint8_t data[];
};

struct simf_priv {
	pthread_mutex_t mu;     /* rule cache, delay heap */
	pthread_cond_t cv;
	int rules_valid;
	uint32_t rules_gen;
	int nrules;
	struct simf_fault rules[SIMF_MAX_FAULTS];
	uint64_t draws;         /* PRNG draw counter (atomic) */
	struct dl_item **heap;
	size_t n, cap;
	uint64_t seq;
	pid_t thread_pid;       /* the process whose delay thread runs */
	int stop;
	int pcap_tried;
	pthread_mutex_t pcap_mu;
};

static uint64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The fault PRNG stream of a handle: the fabric seed, the node the handle
 * is attached as (-1: none) and how many attaches as that node came
 * before. No pid: a rerun with the same seed and traffic order repeats. */
static uint64_t stream_seed(uint64_t seed, int node, uint32_t seq)
{
	return mix64(seed ^ mix64((uint64_t)(uint32_t)(node + 1) << 32 | seq));
}

/* /proc/<pid>/stat files kept open: a liveness check runs for every MAD
 * sent (simf_agent_find), and open+read+close per check was a good part of
 * the fabric's CPU per connection. An open stat file stays bound to its
 * task: once the task is reaped, reads fail and the pid is looked up afresh
 * (it may be a new process), exactly as a fresh open would. */
#define STAT_CACHE 16
static struct {
	pid_t pid;
	int fd;
} stat_cache[STAT_CACHE];
static unsigned stat_next;
static pthread_mutex_t stat_lk = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t stat_once = PTHREAD_ONCE_INIT;

static void stat_child(void)
{
	pthread_mutex_init(&stat_lk, NULL); /* a fork may have caught it held */
}

static void stat_init(void)
{
	pthread_atfork(NULL, NULL, stat_child);
}

/* The task's stat line into buf; <= 0 when it cannot be read. */
static ssize_t stat_read(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	ssize_t n;
	int fd, k;

	pthread_once(&stat_once, stat_init);
	pthread_mutex_lock(&stat_lk);
	for (k = 0; k < STAT_CACHE; k++)
		if (stat_cache[k].pid == pid)
			break;
	if (k < STAT_CACHE) {
		n = pread(stat_cache[k].fd, buf, cap - 1, 0);
		if (n > 0) {
			pthread_mutex_unlock(&stat_lk);
			buf[n] = 0;
			return n;
		}
		close(stat_cache[k].fd);
		stat_cache[k].pid = 0; /* a slot is in use while its pid is set */
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : pread(fd, buf, cap - 1, 0);
	if (n > 0) {
		k = (int)(stat_next++ % STAT_CACHE);
		if (stat_cache[k].pid)
			close(stat_cache[k].fd);
		stat_cache[k].pid = pid;
		stat_cache[k].fd = fd;
		buf[n] = 0;
	} else if (fd >= 0) {
		close(fd);
	}
	pthread_mutex_unlock(&stat_lk);
	return n;
}

/* 1 while a thread of pid is not yet a zombie. */
static int threads_running(pid_t pid)
{
	char dir[64], path[512], buf[256];
	struct dirent *e;
	DIR *d;
	int running = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		return 0;
	while (!running && (e = readdir(d))) {
		char *rp;
		ssize_t n;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		rp = strrchr(buf, ')');
		running = rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
	}
	closedir(d);
	return running;
}

int simf_pid_alive(pid_t pid)
{
	char buf[256], *rp;

	if (pid <= 0)
		return 0;
	if (stat_read(pid, buf, sizeof(buf)) <= 0)
		return !(kill(pid, 0) < 0 && errno != EPERM); /* no /proc: kill says */
	/* a zombie is dead (PID 1 of a container may reap late or never) —
	 * once every thread is: a multi-threaded process's leader turns Z
	 * while its other threads still exit, and its fds (a daemon's
	 * listening socket) close only with the last of them */
	rp = strrchr(buf, ')');
	if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
		return threads_running(pid);
	return 1;
}

static int pid_alive(pid_t pid)
{
	return simf_pid_alive(pid);
}

/* ---- CRCs ------------------------------------------------------------------ */

static uint32_t crc32_tab[256];
static uint32_t crc32_tab8[8][256]; /* slicing-by-8: 8 bytes per step (every datagram is CRC'd twice) */
static uint16_t crc16_tab[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;
		uint16_t d = (uint16_t)i;

		for (int k = 0; k < 8; k++) {
			c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
			d = (uint16_t)((d >> 1) ^ (0xD008u & (0u - (d & 1u))));
		}
		crc32_tab[i] = c;
		crc16_tab[i] = d;
	}
	for (unsigned i = 0; i < 256; i++) {
		crc32_tab8[0][i] = crc32_tab[i];
		for (int t = 1; t < 8; t++)
			crc32_tab8[t][i] = (crc32_tab8[t - 1][i] >> 8) ^ crc32_tab[crc32_tab8[t - 1][i] & 0xFF];
	}
}

uint32_t simf_crc32(uint32_t state, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_init);
	while (len >= 8) {
		uint32_t lo = state ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				       (uint32_t)p[3] << 24);
		state = crc32_tab8[7][lo & 0xFF] ^ crc32_tab8[6][(lo >> 8) & 0xFF] ^
			crc32_tab8[5][(lo >> 16) & 0xFF] ^ crc32_tab8[4][lo >> 24] ^ crc32_tab8[3][p[4]] ^
			crc32_tab8[2][p[5]] ^ crc32_tab8[1][p[6]] ^ crc32_tab8[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		state = (state >> 8) ^ crc32_tab[(state ^ *p++) & 0xFF];
	return state;
}

/* VCRC: CRC-16 poly 0x100B processed reflected (0xD008), init 0xFFFF,
 * final complement, stored least significant byte first. */
static uint16_t crc16_update(uint16_t state, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_init);
	while (len--)
		state = (uint16_t)((state >> 8) ^ crc16_tab[(state ^ *p++) & 0xFF]);
	return state;
}

void simf_icrc_put(uint8_t *p, uint32_t icrc)
{
	for (int i = 0; i < 4; i++, icrc >>= 8)
		p[i] = (uint8_t)icrc;
}

uint32_t simf_icrc_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* IPv4 + UDP headers of a RoCEv2 packet (payload len counts the ICRC). The
 * fields the ICRC masks (TOS, TTL, IP checksum, UDP checksum) are filled in
 * as on the wire; the ICRC routine masks them itself. */
static void ipv4_udp_hdr(uint8_t h[28], uint32_t saddr_be, uint32_t daddr_be, uint16_t sport,
			 uint16_t dport, size_t paylen)
{
	uint32_t sum = 0;

	memset(h, 0, 28);
	h[0] = 0x45;
	put16(h + 2, (uint16_t)(20 + 8 + paylen));
	put16(h + 6, 0x4000); /* DF */
	h[8] = 64;
	h[9] = 17;
	memcpy(h + 12, &saddr_be, 4);
	memcpy(h + 16, &daddr_be, 4);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	put16(h + 10, (uint16_t)~sum);
	put16(h + 20, sport);
	put16(h + 22, dport);
	put16(h + 24, (uint16_t)(8 + paylen));
	/* UDP checksum 0: none (allowed over IPv4) */
}

/* RoCEv2 ICRC over IPv4/UDP headers h (28 bytes) and the transport packet
 * (BTH first), len without the ICRC. */
static uint32_t icrc_rocev2(const uint8_t h[28], const uint8_t *pkt, size_t len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t m[28 + SIMF_BTH_LEN];
	uint32_t crc;

	memcpy(m, h, 28);
	m[1] = 0xff;                 /* TOS */
	m[8] = 0xff;                 /* TTL */
	m[10] = m[11] = 0xff;        /* header checksum */
	m[26] = m[27] = 0xff;        /* UDP checksum */
	memcpy(m + 28, pkt, SIMF_BTH_LEN);
	m[28 + 4] = 0xff;            /* BTH resv8a */
	crc = simf_crc32(0xFFFFFFFFu, ones, sizeof(ones));
	crc = simf_crc32(crc, m, sizeof(m));
	crc = simf_crc32(crc, pkt + SIMF_BTH_LEN, len - SIMF_BTH_LEN);
	return ~crc;
}

uint32_t simf_icrc(const struct simf *f, int src, int dst, uint16_t sport, uint16_t dport,
		   const uint8_t *payload, size_t len_without_icrc)
{
	uint8_t h[28];

	if (len_without_icrc < SIMF_BTH_LEN)
		return 0;
	ipv4_udp_hdr(h, simf_node_addr(f, src), simf_node_addr(f, dst), sport, dport,
		     len_without_icrc + SIMF_ICRC_LEN);
	return icrc_rocev2(h, payload, len_without_icrc);
}

/* ---- BTH ------------------------------------------------------------------- */

void simf_bth_put(uint8_t *p, const struct simf_bth *b)
{
	p[0] = b->opcode;
	p[1] = (uint8_t)((b->se ? 0x80 : 0) | (b->mig ? 0x40 : 0) | (b->pad & 3) << 4 | (b->tver & 0xF));
	put16(p + 2, b->pkey);
	p[4] = (uint8_t)(b->resv8a | (b->fecn ? 0x80 : 0) | (b->becn ? 0x40 : 0));
	p[5] = (uint8_t)(b->dest_qp >> 16);
	p[6] = (uint8_t)(b->dest_qp >> 8);
	p[7] = (uint8_t)b->dest_qp;
	p[8] = (uint8_t)((b->ack_req ? 0x80 : 0) | (b->resv7 & 0x7F));
	p[9] = (uint8_t)(b->psn >> 16);
	p[10] = (uint8_t)(b->psn >> 8);
	p[11] = (uint8_t)b->psn;
}

void simf_bth_get(const uint8_t *p, struct simf_bth *b)
{
	b->opcode = p[0];
	b->se = p[1] >> 7;
	b->mig = (p[1] >> 6) & 1;
	b->pad = (p[1] >> 4) & 3;
	b->tver = p[1] & 0xF;
	b->pkey = (uint16_t)(p[2] << 8 | p[3]);
	b->resv8a = p[4];
	b->fecn = p[4] >> 7;
	b->becn = (p[4] >> 6) & 1;
	b->dest_qp = (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
	b->ack_req = p[8] >> 7;
	b->resv7 = p[8] & 0x7F;
	b->psn = (uint32_t)p[9] << 16 | (uint32_t)p[10] << 8 | p[11];
}

/* The path bits of lid on node n's port (0 when lid is not in its range). */
static unsigned path_bits(const struct simf_state *st, int n, uint16_t lid)
{
	const struct simf_node *nd;

	if (n < 0 || n >= SIMF_MAX_NODES)
		return 0;
	nd = &st->nodes[n];
	if (!nd->lid || lid < nd->lid || lid >= nd->lid + (1u << (nd->lmc & 7)))
		return 0;
	return (unsigned)(lid - nd->lid) & 7u;
}

void simf_bth_set_lids(const struct simf *f, uint8_t *pkt, int src, uint16_t slid, int dst, uint16_t dlid)
{
	const struct simf_state *st = f->st;

	if (st->link != SIMF_LINK_IB)
		return;
	pkt[4] = SIMF_RESV8A_SET_SGID(pkt[4], path_bits(st, src, slid));
	pkt[8] = (uint8_t)((pkt[8] & 0x80) | (dlid < 0xC000 ? path_bits(st, dst, dlid) : 0));
}

uint16_t simf_bth_slid(const struct simf *f, const struct simf_bth *b, int src)
{
	const struct simf_state *st = f->st;

	if (st->link != SIMF_LINK_IB || src < 0 || src >= SIMF_MAX_NODES || !st->nodes[src].lid)
		return 0;
	return (uint16_t)(st->nodes[src].lid | (SIMF_RESV8A_SGID(b->resv8a) & ((1u << st->nodes[src].lmc) - 1)));
}

uint16_t simf_bth_dlid(const struct simf *f, const struct simf_bth *b, int dst)
{
	const struct simf_state *st = f->st;

	if (st->link != SIMF_LINK_IB || dst < 0 || dst >= SIMF_MAX_NODES || !st->nodes[dst].lid)
		return 0;
	return (uint16_t)(st->nodes[dst].lid | ((b->resv7 & 7u) & ((1u << st->nodes[dst].lmc) - 1)));
}

/* ---- state ------------------------------------------------------------------ */

const char *simf_default_dir(void)
{
	static char buf[64];

	if (!buf[0])
		snprintf(buf, sizeof(buf), "/tmp/uscm-sim-%u", (unsigned)getuid());
	return buf;
}

static const char *resolve_dir(const char *dir)
{
	const char *e;

	if (dir && *dir)
		return dir;
	e = getenv("USCM_SIM_DIR");
	if (e && *e)
		return e;
	return simf_default_dir();
}

static int mkdir_p(const char *dir)
{
	char tmp[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(tmp))
		return errno = EINVAL, -1;
	memcpy(tmp, dir, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static struct simf *handle_new(const char *dir)
{
	struct simf *f = calloc(1, sizeof(*f));
	struct simf_priv *pv = calloc(1, sizeof(*pv));
	pthread_condattr_t ca;

	if (!f || !pv) {
		free(f);
		free(pv);
		return errno = ENOMEM, NULL;
	}
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	f->self = -1;
	f->pcap_fd = -1;
	f->priv = pv;
	pthread_mutex_init(&pv->mu, NULL);
	pthread_mutex_init(&pv->pcap_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pv->cv, &ca);
	pthread_condattr_destroy(&ca);
	return f;
}

static void handle_free(struct simf *f)
{
	struct simf_priv *pv = f->priv;

	if (pv) {
		pthread_mutex_destroy(&pv->mu);
		pthread_mutex_destroy(&pv->pcap_mu);
		pthread_cond_destroy(&pv->cv);
		free(pv->heap);
		free(pv);
	}
	free(f);
}

static size_t state_map_len(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t sz = sizeof(struct simf_state);

	if (pg <= 0)
		pg = 4096;
	return (sz + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
}

static void pcap_write_file_header(int fd, uint32_t linktype)
{
	uint8_t h[24];
	uint32_t v;
	uint16_t s;

	v = 0xa1b2c3d4u; memcpy(h, &v, 4);
	s = 2; memcpy(h + 4, &s, 2);
	s = 4; memcpy(h + 6, &s, 2);
	v = 0; memcpy(h + 8, &v, 4); memcpy(h + 12, &v, 4);
	v = 262144; memcpy(h + 16, &v, 4);
	memcpy(h + 20, &linktype, 4);
	if (write(fd, h, sizeof(h)) != (ssize_t)sizeof(h))
		return;
}

struct simf *simf_create(const char *dir, enum simf_link link, unsigned nnodes,
			 unsigned instance, uint64_t seed, const char *pcap_path)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	pthread_mutexattr_t ma;
	struct simf_state *st;
	struct simf *f;
	size_t len = state_map_len();
	int fd;

	dir = resolve_dir(dir);
	if (nnodes < 1 || nnodes >= SIMF_MAX_NODES || instance > 255 ||
	    (link != SIMF_LINK_IB && link != SIMF_LINK_ROCE) || strlen(dir) >= sizeof(f->dir) - 32)
		return errno = EINVAL, NULL;
	if (pcap_path && strlen(pcap_path) >= sizeof(st->pcap_path))
		return errno = ENAMETOOLONG, NULL;
	if (mkdir_p(dir) < 0)
		return NULL;
	snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
	snprintf(tmp, sizeof(tmp), "%s/" STATE_FILE ".tmp.%d", dir, (int)getpid());
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return NULL;
	/* every user's programs attach (read-write) and register in it, as every
	 * user may open a real host's uverbs device */
	if (fchmod(fd, 0666) < 0 || ftruncate(fd, (off_t)len) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return errno = e, NULL;
	}
	st = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (st == MAP_FAILED) {
		unlink(tmp);
		return NULL;
	}
	f = handle_new(dir);
	if (!f) {
		munmap(st, len);
		unlink(tmp);
		return NULL;
	}
	f->st = st;
	f->rng = stream_seed(seed, -1, 0);

	memset(st, 0, sizeof(*st));
	st->magic = SIMF_MAGIC;
	st->version = SIMF_VERSION;
	st->link = link;
	st->instance = instance;
	st->seed = seed;
	st->nnodes = nnodes;
	st->mlid_next = 0xC000;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&st->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	for (unsigned i = 0; i <= nnodes; i++) {
		struct simf_node *nd = &st->nodes[i];
		uint32_t host = i ? i : SM_NAME_IP_HOST;

		if (i == 0)
			snprintf(nd->name, sizeof(nd->name), "sm");
		else
			snprintf(nd->name, sizeof(nd->name), "node%u", i);
		nd->ip = 127u << 24 | 10u << 16 | host;
		nd->guid = GUID_BASE | i;
		if (link == SIMF_LINK_IB) {
			nd->gid[0] = 0xfe;
			nd->gid[1] = 0x80;
			for (int k = 0; k < 8; k++)
				nd->gid[8 + k] = (uint8_t)(nd->guid >> (56 - 8 * k));
			nd->port_state = SIMF_PORT_INIT;
		} else {
			nd->gid[10] = nd->gid[11] = 0xff;
			put32(nd->gid + 12, nd->ip);
			nd->port_state = SIMF_PORT_ACTIVE;
		}
		nd->link_up = 1;
		/* distinct QPN ranges per node catch a QPN used on the wrong side */
		nd->next_qpn = 0x40 + 0x100 * i;
		nd->pkeys[0] = 0xFFFF;
	}
	for (unsigned g = 0; g < SIMF_MAX_MCG; g++)
		for (unsigned q = 0; q < SIMF_MCG_QPS; q++)
			st->mcgs[g].qps[q].node = -1;
	for (unsigned i = 0; i < SIMF_MAX_NODES; i++) {
		st->nodes[i].nports = i && i <= nnodes ? 1 : 0;
		for (unsigned p = 0; p <= SIMF_MAX_PORTS; p++)
			st->nodes[i].ports[p].peer = -1;
	}
	if (pcap_path && *pcap_path) {
		int pfd;

		snprintf(st->pcap_path, sizeof(st->pcap_path), "%s", pcap_path);
		pfd = open(pcap_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		/* every process of the fabric appends what it sends, whoever runs it
		 * (a file of another user's stays as it is) */
		if (pfd >= 0 && fchmod(pfd, 0666) < 0 && errno != EPERM) {
			close(pfd);
			pfd = -1;
		}
		if (pfd < 0) {
			int e = errno;
			munmap(st, len);
			unlink(tmp);
			handle_free(f);
			return errno = e, NULL;
		}
		pcap_write_file_header(pfd, link == SIMF_LINK_IB ? PCAP_LINK_ERF : PCAP_LINK_ETHERNET);
		close(pfd);
	}
	if (msync(st, len, MS_SYNC) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		munmap(st, len);
		unlink(tmp);
		handle_free(f);
		return errno = e, NULL;
	}
	if (simf_write_hosts(f) < 0) {
		int e = errno;
		simf_detach(f);
		return errno = e, NULL;
	}
	return f;
}

static void pid_register(struct simf *f, int n)
{
	struct simf_node *nd = &f->st->nodes[n];
	pid_t me = getpid();
	int slot = -1;

	simf_lock(f);
	for (int i = 0; i < SIMF_NODE_PIDS; i++) {
		if (nd->pids[i] == 0 || !pid_alive(nd->pids[i])) {
			if (slot < 0)
				slot = i;
			if (nd->pids[i] && !pid_alive(nd->pids[i]))
				nd->pids[i] = 0;
		}
	}
	if (slot >= 0)
		nd->pids[slot] = me;
	nd->pid = me;
	f->rng = stream_seed(f->st->seed, n, nd->attach_seq);
	nd->attach_seq++;
	simf_unlock(f);
}

static void pid_unregister(struct simf *f, int n)
{
	struct simf_node *nd = &f->st->nodes[n];
	pid_t me = getpid();

	simf_lock(f);
	for (int i = 0; i < SIMF_NODE_PIDS; i++)
		if (nd->pids[i] == me) {
			nd->pids[i] = 0;
			break;
		}
	simf_unlock(f);
}

struct simf *simf_attach_node(const char *dir, int node)
{
	char path[PATH_MAX];
	struct simf_state *st;
	struct stat sb;
	struct simf *f;
	size_t len = state_map_len();
	int fd;

	dir = resolve_dir(dir);
	if (strlen(dir) >= sizeof(f->dir) - 32)
		return errno = ENAMETOOLONG, NULL;
	snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) < 0 || (size_t)sb.st_size < sizeof(struct simf_state)) {
		close(fd);
		return errno = EPROTO, NULL;
	}
	st = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (st == MAP_FAILED)
		return NULL;
	if (st->magic != SIMF_MAGIC || st->version != SIMF_VERSION) {
		munmap(st, len);
		return errno = EPROTO, NULL;
	}
	if (node >= 0 && (unsigned)node > st->nnodes) {
		munmap(st, len);
		return errno = ENODEV, NULL;
	}
	f = handle_new(dir);
	if (!f) {
		munmap(st, len);
		return NULL;
	}
	f->st = st;
	f->self = node;
	if (node >= 0)
		pid_register(f, node);
	else
		f->rng = stream_seed(st->seed, -1, 0);
	return f;
}

struct simf *simf_attach(const char *dir)
{
	const char *name = getenv("USCM_SIM_NODE");
	struct simf *f = simf_attach_node(dir, -1);
	int n;

	if (!f || !name || !*name)
		return f;
	n = simf_node_by_name(f, name);
	if (n < 0) {
		simf_detach(f);
		return errno = ENODEV, NULL;
	}
	f->self = n;
	pid_register(f, n);
	return f;
}

static void delay_stop(struct simf *f);

/* ---- the host service (uscmd) ------------------------------------------------ */

int simf_uscmd_path(const struct simf *f, int n, const char *file, char *buf, size_t len)
{
	char real[PATH_MAX];
	const char *dir = realpath(f->dir, real) ? real : f->dir;
	int k;

	if (n < 0 || n >= SIMF_MAX_NODES)
		return errno = EINVAL, -1;
	if (file)
		k = snprintf(buf, len, "%s/%s/%s", dir, f->st->nodes[n].name, file);
	else
		k = snprintf(buf, len, "%s/%s", dir, f->st->nodes[n].name);
	if (k < 0 || (size_t)k >= len)
		return errno = ENAMETOOLONG, -1;
	return 0;
}

/* Does pid's command line have the argument arg? */
static int cmdline_has(pid_t pid, const char *arg)
{
	char path[64], buf[8192];
	size_t want = strlen(arg) + 1;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	for (ssize_t o = 0; o < n; o += (ssize_t)strlen(buf + o) + 1)
		if ((size_t)(n - o) >= want && strcmp(buf + o, arg) == 0)
			return 1;
	return 0;
}

pid_t simf_uscmd_pid(struct simf *f, int n)
{
	char sock[PATH_MAX];
	pid_t pid;

	if (n < 1 || (unsigned)n > f->st->nnodes || n >= SIMF_MAX_NODES)
		return 0;
	pid = __atomic_load_n(&f->st->uscmd_pid[n], __ATOMIC_ACQUIRE);
	if (pid <= 0 || !simf_pid_alive(pid))
		return 0;
	/* the pid may have been reused since: it must still be the daemon
	 * started with this node's socket */
	if (simf_uscmd_path(f, n, "uscmd.sock", sock, sizeof(sock)) < 0 || !cmdline_has(pid, sock))
		return 0;
	return pid;
}

int simf_uscmd_stop(struct simf *f, int n, int sig, unsigned grace_ms)
{
	pid_t pids[SIMF_MAX_NODES], gone[SIMF_MAX_NODES] = { 0 };
	int np = 0, left;
	uint64_t deadline;
	unsigned lo = n < 0 ? 1 : (unsigned)n, hi = n < 0 ? f->st->nnodes : (unsigned)n;

	for (unsigned i = lo; i <= hi && i < SIMF_MAX_NODES; i++) {
		pid_t p = simf_uscmd_pid(f, (int)i);

		if (p > 0) {
			pids[np++] = p;
			kill(p, sig);
		}
	}
	deadline = now_mono_ns() + (sig == SIGKILL ? 5000000000ull : (uint64_t)grace_ms * 1000000ull);
	for (int killed = sig == SIGKILL;;) {
		left = 0;
		for (int k = 0; k < np; k++) {
			waitpid(pids[k], NULL, WNOHANG); /* the caller's children */
			left += pid_alive(pids[k]);
		}
		if (!left)
			break;
		if (!killed && now_mono_ns() >= deadline) {
			for (int k = 0; k < np; k++)
				if (pid_alive(pids[k]))
					kill(pids[k], SIGKILL);
			killed = 1;
			deadline = now_mono_ns() + 5000000000ull;
		} else if (killed && now_mono_ns() >= deadline) {
			break; /* not ours to kill (EPERM) or stuck in the kernel */
		}
		poll(NULL, 0, 10);
	}
	/* forget the dead (and pids reused by other processes) */
	for (unsigned i = lo; i <= hi && i < SIMF_MAX_NODES; i++)
		if (f->st->uscmd_pid[i] && !simf_uscmd_pid(f, (int)i))
			gone[i] = f->st->uscmd_pid[i];
	simf_lock(f);
	for (unsigned i = lo; i <= hi && i < SIMF_MAX_NODES; i++)
		if (gone[i] && f->st->uscmd_pid[i] == gone[i])
			f->st->uscmd_pid[i] = 0;
	simf_unlock(f);
	return np;
}

void simf_detach(struct simf *f)
{
	if (!f)
		return;
	delay_stop(f);
	if (f->self >= 0 && f->st)
		pid_unregister(f, f->self);
	if (f->pcap_fd >= 0)
		close(f->pcap_fd);
	if (f->st)
		munmap(f->st, state_map_len());
	handle_free(f);
}

void simf_lock(struct simf *f)
{
	int rc = pthread_mutex_lock(&f->st->lock);

	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&f->st->lock);
}

void simf_unlock(struct simf *f)
{
	pthread_mutex_unlock(&f->st->lock);
}

int simf_node_by_name(const struct simf *f, const char *name)
{
	const struct simf_state *st = f->st;
	char *end;
	long v;

	if (!name || !*name)
		return -1;
	for (unsigned i = 0; i <= st->nnodes + st->nswitches && i < SIMF_MAX_NODES; i++)
		if (strcmp(st->nodes[i].name, name) == 0)
			return (int)i;
	/* "3" means node3; "127.10.0.3" too */
	v = strtol(name, &end, 10);
	if (*end == 0 && end != name && v >= 0 && (unsigned long)v <= st->nnodes)
		return (int)v;
	{
		struct in_addr a;

		if (inet_pton(AF_INET, name, &a) == 1)
			for (unsigned i = 0; i <= st->nnodes; i++)
				if (st->nodes[i].ip == ntohl(a.s_addr))
					return (int)i;
	}
	return -1;
}

int simf_node_by_lid(const struct simf *f, uint16_t lid)
{
	uint8_t v;

	if (lid == 0 || lid > SIMF_MAX_LID)
		return -1;
	v = f->st->lft[lid];
	return v ? v - 1 : -1;
}

int simf_neighbor(const struct simf *f, int n)
{
	const struct simf_state *st = f->st;

	if (st->link != SIMF_LINK_IB || !st->cabled || n < 0 || n >= SIMF_MAX_NODES)
		return -1;
	return st->nodes[n].ports[1].peer;
}

int simf_node_by_gid(const struct simf *f, const uint8_t gid[16])
{
	const struct simf_state *st = f->st;

	for (unsigned i = 0; i <= st->nnodes && i < SIMF_MAX_NODES; i++)
		if (memcmp(st->nodes[i].gid, gid, 16) == 0)
			return (int)i;
	for (unsigned i = 1; i <= st->nnodes && i < SIMF_MAX_NODES; i++)
		for (unsigned k = 0; k < SIMF_IP_GIDS; k++)
			if (gid[0] && memcmp(st->nodes[i].ip_gids[k], gid, 16) == 0)
				return (int)i;
	return -1;
}

const uint8_t *simf_node_sgid(const struct simf *f, int n, unsigned sgid_index)
{
	static const uint8_t zero[16];
	const struct simf_node *nd = &f->st->nodes[n];

	if (sgid_index >= 1 && sgid_index <= SIMF_IP_GIDS &&
	    memcmp(nd->ip_gids[sgid_index - 1], zero, 16))
		return nd->ip_gids[sgid_index - 1];
	return nd->gid;
}

uint32_t simf_alloc_qpn(struct simf *f, int n)
{
	struct simf_node *nd;
	uint32_t q;

	if (n < 0 || n >= SIMF_MAX_NODES)
		return 0;
	nd = &f->st->nodes[n];
	simf_lock(f);
	q = nd->next_qpn;
	if (q < 2 || q >= SIMF_MAX_QPN)
		q = 2;
	nd->next_qpn = q + 1;
	simf_unlock(f);
	return q;
}

uint16_t simf_qp_port(uint32_t qpn)
{
	return (uint16_t)(SIMF_QP_PORT_BASE + qpn % SIMF_MAX_QPN);
}

uint32_t simf_node_addr(const struct simf *f, int n)
{
	return htonl(127u << 24 | 77u << 16 | (f->st->instance & 0xFF) << 8 | ((unsigned)n & 0xFF));
}

int simf_write_hosts(struct simf *f)
{
	char path[PATH_MAX], tmp[PATH_MAX], gid[INET6_ADDRSTRLEN], ip[INET_ADDRSTRLEN];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/" HOSTS_FILE, f->dir);
	snprintf(tmp, sizeof(tmp), "%s/" HOSTS_FILE ".tmp.%d", f->dir, (int)getpid());
	fp = fopen(tmp, "w");
	if (!fp)
		return -1;
	fprintf(fp, "# uscm-sim fabric %s (%s): ibacm hosts, \"address GID\"\n", f->dir,
		f->st->link == SIMF_LINK_IB ? "ib" : "roce");
	for (unsigned i = 1; i <= f->st->nnodes; i++) {
		const struct simf_node *nd = &f->st->nodes[i];
		struct in_addr a = { .s_addr = htonl(nd->ip) };

		inet_ntop(AF_INET6, nd->gid, gid, sizeof(gid));
		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		fprintf(fp, "%s %s\n%s %s\n", ip, gid, nd->name, gid);
	}
	if (fclose(fp) != 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

int simf_set_link(struct simf *f, int n, int up)
{
	struct simf_node *nd;

	if (n < 0 || (unsigned)n > f->st->nnodes + f->st->nswitches)
		return errno = EINVAL, -1;
	nd = &f->st->nodes[n];
	simf_lock(f);
	nd->link_up = up ? 1 : 0;
	if (!up)
		nd->port_state = SIMF_PORT_DOWN;
	else
		nd->port_state = f->st->link == SIMF_LINK_ROCE ? SIMF_PORT_ACTIVE : SIMF_PORT_INIT;
	__atomic_add_fetch(&f->st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	return 0;
}

int simf_lid_range_set(struct simf_state *st, int n, uint16_t base, unsigned lmc)
{
	struct simf_node *nd = &st->nodes[n];
	uint8_t me = (uint8_t)(n + 1);
	unsigned cnt = 1u << (lmc & 7), ocnt = 1u << (nd->lmc & 7);

	if (base && ((base & (cnt - 1)) || base + cnt - 1 > SIMF_MAX_LID))
		return errno = EINVAL, -1;
	for (unsigned i = 0; base && i < cnt; i++)
		if (st->lft[base + i] && st->lft[base + i] != me)
			return errno = EADDRINUSE, -1;
	for (unsigned i = 0; nd->lid && i < ocnt && nd->lid + i <= SIMF_MAX_LID; i++)
		if (st->lft[nd->lid + i] == me)
			st->lft[nd->lid + i] = 0;
	for (unsigned i = 0; base && i < cnt; i++)
		st->lft[base + i] = me;
	nd->lid = base;
	nd->lmc = (uint8_t)(lmc & 7);
	return 0;
}

int simf_set_lid(struct simf *f, int n, uint16_t lid)
{
	struct simf_state *st = f->st;
	int rc;

	if (n < 0 || (unsigned)n > st->nnodes || st->link != SIMF_LINK_IB || !lid ||
	    lid > SIMF_MAX_LID)
		return errno = EINVAL, -1;
	simf_lock(f);
	/* the SM's sweep keeps an ACTIVE port's LID: this one stays; its
	 * LMC too (a base LID not aligned to it is EINVAL) */
	rc = simf_lid_range_set(st, n, lid, st->nodes[n].lmc);
	if (rc == 0)
		__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	return rc;
}

/* ---- agents ---------------------------------------------------------------- */

static int is_vendor2(uint8_t mgmt_class)
{
	return mgmt_class >= 0x30 && mgmt_class <= 0x4F;
}

int simf_agent_add(struct simf *f, int n, const struct simf_agent *a)
{
	struct simf_node *nd;
	int slot = -1;

	if (n < 0 || (unsigned)n > f->st->nnodes || !a || a->pid <= 0)
		return errno = EINVAL, -1;
	nd = &f->st->nodes[n];
	simf_lock(f);
	for (int i = 0; i < SIMF_MAX_AGENTS; i++) {
		struct simf_agent *e = &nd->agents[i];
		int overlap = 0;

		if (e->pid && !pid_alive(e->pid))
			memset(e, 0, sizeof(*e));
		if (!e->pid) {
			if (slot < 0)
				slot = i;
			continue;
		}
		if (e->qpn != a->qpn || e->mgmt_class != a->mgmt_class ||
		    e->class_version != a->class_version)
			continue;
		if (is_vendor2(a->mgmt_class) && memcmp(e->oui, a->oui, 3) != 0)
			continue;
		for (int k = 0; k < 16; k++)
			if (e->methods[k] & a->methods[k])
				overlap = 1;
		if (overlap) {
			simf_unlock(f);
			return errno = EBUSY, -1;
		}
	}
	if (slot < 0) {
		simf_unlock(f);
		return errno = ENOSPC, -1;
	}
	nd->agents[slot] = *a;
	simf_unlock(f);
	return slot;
}

void simf_agent_del(struct simf *f, int n, int slot)
{
	if (n < 0 || (unsigned)n > f->st->nnodes || slot < 0 || slot >= SIMF_MAX_AGENTS)
		return;
	simf_lock(f);
	memset(&f->st->nodes[n].agents[slot], 0, sizeof(struct simf_agent));
	simf_unlock(f);
}

static int agent_find(struct simf *f, int n, uint8_t qpn, uint8_t mgmt_class, uint8_t class_version,
		      uint8_t method, const uint8_t *oui, struct simf_agent *out, int live)
{
	struct simf_node *nd;
	int found = -1;

	if (n < 0 || (unsigned)n > f->st->nnodes || method > 127)
		return -1;
	nd = &f->st->nodes[n];
	simf_lock(f);
	for (int i = 0; i < SIMF_MAX_AGENTS && found < 0; i++) {
		struct simf_agent *e = &nd->agents[i];

		if (!e->pid || e->qpn != qpn || e->mgmt_class != mgmt_class ||
		    e->class_version != class_version)
			continue;
		if (!(e->methods[method >> 3] & (1u << (method & 7))))
			continue;
		if (is_vendor2(mgmt_class) && oui && memcmp(e->oui, oui, 3) != 0)
			continue;
		if (live && !pid_alive(e->pid)) {
			memset(e, 0, sizeof(*e));
			continue;
		}
		found = i;
		if (out)
			*out = *e;
	}
	simf_unlock(f);
	return found;
}

int simf_agent_find(struct simf *f, int n, uint8_t qpn, uint8_t mgmt_class,
		    uint8_t class_version, uint8_t method, const uint8_t *oui,
		    struct simf_agent *out)
{
	return agent_find(f, n, qpn, mgmt_class, class_version, method, oui, out, 1);
}

/* Two agents never serve one method (simf_agent_add reclaims dead entries
 * and refuses overlaps with live ones), so a dead entry found here means no
 * live agent serves the request either. */
int simf_agent_find_any(struct simf *f, int n, uint8_t qpn, uint8_t mgmt_class,
			uint8_t class_version, uint8_t method, const uint8_t *oui,
			struct simf_agent *out)
{
	return agent_find(f, n, qpn, mgmt_class, class_version, method, oui, out, 0);
}

/* ---- multicast ---------------------------------------------------------------- */

static int gid_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return 0;
	return 1;
}

static int mcg_find_locked(struct simf_state *st, const uint8_t *mgid, uint16_t mlid)
{
	for (int g = 0; g < SIMF_MAX_MCG; g++) {
		const struct simf_mcg *m = &st->mcgs[g];

		if (!m->used)
			continue;
		if (mgid && !gid_zero(mgid)) {
			if (memcmp(m->mgid, mgid, 16) == 0)
				return g;
		} else if (mlid && m->mlid == mlid) {
			return g;
		}
	}
	return -1;
}

int simf_mcast_find(struct simf *f, const uint8_t *mgid, uint16_t mlid)
{
	int g;

	simf_lock(f);
	g = mcg_find_locked(f->st, mgid, mlid);
	simf_unlock(f);
	return g;
}

int simf_mcast_attach(struct simf *f, int n, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn)
{
	struct simf_state *st = f->st;
	struct simf_mcg *m;
	int g, freeq = -1;

	if (n < 0 || (unsigned)n > st->nnodes || !mgid)
		return errno = EINVAL, -1;
	simf_lock(f);
	g = mcg_find_locked(st, mgid, 0);
	if (g < 0) {
		for (int i = 0; i < SIMF_MAX_MCG && g < 0; i++)
			if (!st->mcgs[i].used)
				g = i;
		if (g < 0) {
			simf_unlock(f);
			return errno = ENOSPC, -1;
		}
		m = &st->mcgs[g];
		memset(m, 0, sizeof(*m));
		for (int q = 0; q < SIMF_MCG_QPS; q++)
			m->qps[q].node = -1;
		m->used = 1;
		memcpy(m->mgid, mgid, 16);
		m->mlid = mlid;
		m->pkey = 0xFFFF;
	}
	m = &st->mcgs[g];
	for (int q = 0; q < SIMF_MCG_QPS; q++) {
		if (m->qps[q].node == n && m->qps[q].qpn == qpn) {
			simf_unlock(f);
			return 0;
		}
		if (m->qps[q].node < 0 && freeq < 0)
			freeq = q;
	}
	if (freeq < 0) {
		simf_unlock(f);
		return errno = ENOSPC, -1;
	}
	m->qps[freeq].node = (int16_t)n;
	m->qps[freeq].qpn = qpn;
	simf_unlock(f);
	return 0;
}

int simf_mcast_detach(struct simf *f, int n, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn)
{
	struct simf_state *st = f->st;
	struct simf_mcg *m;
	int g, rc = -1, left = 0;

	simf_lock(f);
	g = mcg_find_locked(st, mgid, mlid);
	if (g >= 0) {
		m = &st->mcgs[g];
		for (int q = 0; q < SIMF_MCG_QPS; q++) {
			if (m->qps[q].node == n && m->qps[q].qpn == qpn) {
				m->qps[q].node = -1;
				m->qps[q].qpn = 0;
				rc = 0;
			} else if (m->qps[q].node >= 0) {
				left++;
			}
		}
		if (rc == 0 && !left && !m->sa_created)
			m->used = 0;
	}
	simf_unlock(f);
	if (rc < 0)
		errno = ENOENT;
	return rc;
}

int simf_mcast_targets(struct simf *f, const uint8_t *mgid, uint16_t mlid,
		       struct simf_mcg_qp *out, int max)
{
	return simf_mcast_targets_from(f, -1, mgid, mlid, out, max);
}

int simf_mcast_targets_from(struct simf *f, int src, const uint8_t *mgid, uint16_t mlid,
			    struct simf_mcg_qp *out, int max)
{
	struct simf_state *st = f->st;
	int g, k = 0;
	uint8_t reach[SIMF_MAX_NODES];
	int by_mft = src >= 0 && st->link == SIMF_LINK_IB && st->nswitches;

	simf_lock(f);
	g = mcg_find_locked(st, mgid, mlid);
	if (g >= 0) {
		const struct simf_mcg *m = &st->mcgs[g];

		if (by_mft) {
			simf_mcast_reach(f, src, m->mlid, reach);
			reach[src] = 1;
		}
		for (int q = 0; q < SIMF_MCG_QPS && k < max; q++) {
			int n = m->qps[q].node;

			if (n < 0 || (by_mft && !reach[n]))
				continue;
			/* with switches their MFTs decide (above; the built-in
			 * SM programs them from its SA's membership, which also
			 * decides on a fabric without switches); under an external
			 * SM with two ports cabled back to back no switch filters:
			 * every attached QP gets it */
			if (st->link == SIMF_LINK_IB && st->sm_kind != SIMF_SM_OPENSM && !(m->join_state[n] & 3))
				continue;
			out[k++] = m->qps[q];
		}
	}
	simf_unlock(f);
	return k;
}

/* ---- fault rules ----------------------------------------------------------------- */

static int parse_ppm(const char *s, uint32_t *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -1;
	if (strcmp(end, "ppm") == 0) {
		if (v > 1e6)
			return -1;
		*out = (uint32_t)(v + 0.5);
		return 0;
	}
	if (*end && strcmp(end, "%") != 0)
		return -1;
	if (v > 100)
		return -1;
	*out = (uint32_t)(v * 10000 + 0.5);
	return 0;
}

static int parse_time(const char *s, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end), mul;

	if (end == s || v < 0)
		return -1;
	if (!*end || strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "us") == 0)
		mul = 1e3;
	else if (strcmp(end, "ns") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0)
		mul = 1e9;
	else
		return -1;
	if (v * mul > 3600e9)
		return -1;
	*out = (uint64_t)(v * mul + 0.5);
	return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (end == s || *end || errno || v > max)
		return -1;
	*out = v;
	return 0;
}

int simf_fault_parse(const char *spec, struct simf_fault *out, char *err, size_t errlen)
{
	char buf[512], *save = NULL, *tok;
	struct simf_fault r = { .used = 1, .qpt = SIMF_QPT_ANY, .mgmt_class = 0xFF,
				.attr_id = 0xFFFF, .node = -1 };

	if (!spec || strlen(spec) >= sizeof(buf)) {
		snprintf(err, errlen, "fault spec missing or too long");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *val = strchr(tok, '=');
		unsigned long u;

		while (isspace((unsigned char)*tok))
			tok++;
		if (!val) {
			snprintf(err, errlen, "'%s': expected key=value", tok);
			return -1;
		}
		*val++ = 0;
		if (strcmp(tok, "drop") == 0) {
			if (parse_ppm(val, &r.drop_ppm) < 0)
				goto bad;
		} else if (strcmp(tok, "dup") == 0) {
			if (parse_ppm(val, &r.dup_ppm) < 0)
				goto bad;
		} else if (strcmp(tok, "delay") == 0) {
			if (parse_time(val, &r.delay_ns) < 0)
				goto bad;
		} else if (strcmp(tok, "reorder") == 0) {
			char *colon = strchr(val, ':');

			r.reorder_ns = 1000000; /* default hold-back: 1 ms */
			if (colon) {
				*colon++ = 0;
				if (parse_time(colon, &r.reorder_ns) < 0)
					goto bad;
			}
			if (parse_ppm(val, &r.reorder_ppm) < 0)
				goto bad;
		} else if (strcmp(tok, "class") == 0) {
			if (strcmp(val, "any") == 0)
				u = 0xFF;
			else if (parse_uint(val, 0xFF, &u) < 0)
				goto bad;
			r.mgmt_class = (uint8_t)u;
		} else if (strcmp(tok, "attr") == 0) {
			if (strcmp(val, "any") == 0)
				u = 0xFFFF;
			else if (parse_uint(val, 0xFFFF, &u) < 0)
				goto bad;
			r.attr_id = (uint16_t)u;
		} else if (strcmp(tok, "qpt") == 0) {
			if (strcmp(val, "mad") == 0)
				r.qpt = SIMF_QPT_MAD;
			else if (strcmp(val, "rc") == 0)
				r.qpt = SIMF_QPT_RC;
			else if (strcmp(val, "uc") == 0)
				r.qpt = SIMF_QPT_UC;
			else if (strcmp(val, "ud") == 0)
				r.qpt = SIMF_QPT_UD;
			else if (strcmp(val, "any") == 0)
				r.qpt = SIMF_QPT_ANY;
			else
				goto bad;
		} else if (strcmp(tok, "op") == 0) {
			if (strcmp(val, "data") == 0)
				r.op = SIMF_MATCH_OP_DATA;
			else if (strcmp(val, "ack") == 0)
				r.op = SIMF_MATCH_OP_ACK;
			else if (strcmp(val, "any") == 0)
				r.op = SIMF_MATCH_OP_ANY;
			else
				goto bad;
		} else if (strcmp(tok, "node") == 0) {
			if (strcmp(val, "any") == 0)
				r.node = -1;
			else if (strcmp(val, "sm") == 0)
				r.node = 0;
			else if (strncmp(val, "node", 4) == 0 && parse_uint(val + 4, SIMF_MAX_NODES - 1, &u) == 0)
				r.node = (int16_t)u;
			else if (parse_uint(val, SIMF_MAX_NODES - 1, &u) == 0)
				r.node = (int16_t)u;
			else
				goto bad;
		} else if (strcmp(tok, "link") == 0) {
			if (simf_link_parse(val, &r) < 0)
				goto bad;
		} else if (strcmp(tok, "dir") == 0) {
			if (strcmp(val, "out") == 0)
				r.link_dir = SIMF_LINK_DIR_OUT;
			else if (strcmp(val, "in") == 0)
				r.link_dir = SIMF_LINK_DIR_IN;
			else if (strcmp(val, "both") == 0)
				r.link_dir = SIMF_LINK_DIR_BOTH;
			else
				goto bad;
		} else {
			snprintf(err, errlen,
				 "unknown fault key '%s' (drop dup delay reorder class attr qpt op node link dir)", tok);
			return -1;
		}
		continue;
bad:
		snprintf(err, errlen, "bad value '%s' for '%s'", val, tok);
		return -1;
	}
	if (r.link_dir && !r.link_node) {
		snprintf(err, errlen, "'dir=' needs a 'link='");
		return -1;
	}
	*out = r;
	return 0;
}

static void fmt_ppm(char *b, size_t n, uint32_t ppm)
{
	if (ppm % 10000 == 0)
		snprintf(b, n, "%u%%", ppm / 10000);
	else
		snprintf(b, n, "%uppm", ppm);
}

static void fmt_ns(char *b, size_t n, uint64_t ns)
{
	if (ns % 1000000000ull == 0)
		snprintf(b, n, "%llus", (unsigned long long)(ns / 1000000000ull));
	else if (ns % 1000000 == 0)
		snprintf(b, n, "%llums", (unsigned long long)(ns / 1000000));
	else if (ns % 1000 == 0)
		snprintf(b, n, "%lluus", (unsigned long long)(ns / 1000));
	else
		snprintf(b, n, "%lluns", (unsigned long long)ns);
}

void simf_fault_format(const struct simf_fault *r, char *buf, size_t len)
{
	static const char *qn[] = { "rc", "uc", "ud", "mad" };
	char a[32], b[32];
	size_t o = 0;

#define ADD(...) do { if (o < len) o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__); } while (0)
	if (len)
		buf[0] = 0;
	if (r->drop_ppm) { fmt_ppm(a, sizeof(a), r->drop_ppm); ADD("%sdrop=%s", o ? "," : "", a); }
	if (r->dup_ppm) { fmt_ppm(a, sizeof(a), r->dup_ppm); ADD("%sdup=%s", o ? "," : "", a); }
	if (r->delay_ns) { fmt_ns(a, sizeof(a), r->delay_ns); ADD("%sdelay=%s", o ? "," : "", a); }
	if (r->reorder_ppm) {
		fmt_ppm(a, sizeof(a), r->reorder_ppm);
		fmt_ns(b, sizeof(b), r->reorder_ns);
		ADD("%sreorder=%s:%s", o ? "," : "", a, b);
	}
	if (r->mgmt_class != 0xFF) ADD("%sclass=0x%02x", o ? "," : "", r->mgmt_class);
	if (r->attr_id != 0xFFFF) ADD("%sattr=0x%04x", o ? "," : "", r->attr_id);
	if (r->qpt <= SIMF_QPT_MAD) ADD("%sqpt=%s", o ? "," : "", qn[r->qpt]);
	if (r->op == SIMF_MATCH_OP_DATA || r->op == SIMF_MATCH_OP_ACK)
		ADD("%sop=%s", o ? "," : "", r->op == SIMF_MATCH_OP_DATA ? "data" : "ack");
	if (r->node >= 0) ADD("%snode=%d", o ? "," : "", r->node);
	if (r->link_node) {
		simf_link_format(r, a, sizeof(a));
		ADD("%slink=%s", o ? "," : "", a);
		if (r->link_dir)
			ADD(",dir=%s", r->link_dir == SIMF_LINK_DIR_OUT ? "out" : "in");
	}
	if (!o) ADD("(no effect)");
#undef ADD
}

int simf_fault_set(struct simf *f, const struct simf_fault *rules, int n)
{
	if (n < 0 || n > SIMF_MAX_FAULTS)
		return errno = E2BIG, -1;
	simf_lock(f);
	memset(f->st->faults, 0, sizeof(f->st->faults));
	for (int i = 0; i < n; i++) {
		f->st->faults[i] = rules[i];
		f->st->faults[i].used = 1;
	}
	__atomic_add_fetch(&f->st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	return 0;
}

int simf_fault_add(struct simf *f, const struct simf_fault *rule)
{
	int rc = -1;

	simf_lock(f);
	for (int i = 0; i < SIMF_MAX_FAULTS; i++)
		if (!f->st->faults[i].used) {
			f->st->faults[i] = *rule;
			f->st->faults[i].used = 1;
			rc = 0;
			break;
		}
	if (rc == 0)
		__atomic_add_fetch(&f->st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	if (rc < 0)
		errno = ENOSPC;
	return rc;
}

/* ---- transport ------------------------------------------------------------------- */

/* A node's program may live in a network namespace of its own (a test
 * gives each node its IP interfaces, as hosts have): the fabric's
 * datagrams still travel in the fabric's namespace, the one of its keeper
 * (the SM process), as an HCA's traffic does not depend on the host's IP
 * configuration. The calling thread enters that namespace to create its
 * socket (a socket stays in the namespace it was made in) and comes back;
 * *back is its own namespace then, else -1 (the same namespace, or no
 * right to switch: the socket is made where the thread is, as before). */
/* The keeper's namespace, as last looked up (per keeper pid: a keeper does
 * not change namespace; the caller's thread may, so its own is looked up
 * every time) — a stat per socket (one per QP) saved. */
static struct {
	pthread_mutex_t lk;
	pid_t pid;
	dev_t dev;
	ino_t ino;
	uint64_t cookie;  /* its SO_NETNS_COOKIE, once a socket made in it was seen; 0: unknown */
} keeper_ns = { .lk = PTHREAD_MUTEX_INITIALIZER };

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14 */
#endif

/* The network namespace a socket lives in, as the kernel's 64-bit cookie
 * (never 0, never reused while the namespace lives); 0 when the kernel
 * cannot say (before 5.14). */
static uint64_t sock_netns_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);

	if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) < 0 || l != sizeof(c))
		return 0;
	return c;
}

/* Set in a thread whose last socket, made where it stood, turned out to be
 * outside the keeper's namespace: it goes straight to the stat comparison
 * next time. A hint only; correctness never depends on it. */
static __thread int netns_elsewhere;

/* Returns 1 when the thread is now in the keeper's namespace (it was, or
 * it switched: *back >= 0), 0 when not known to be (no keeper, no right
 * to switch, /proc unreadable). */
static int fabric_netns_enter(struct simf *f, int *back)
{
	char p[64];
	struct stat theirs, mine;
	pid_t kp = (pid_t)f->st->keeper_pid;
	int fd, known;

	*back = -1;
	if (kp <= 0)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)kp);
	pthread_mutex_lock(&keeper_ns.lk);
	known = keeper_ns.pid == kp;
	theirs.st_dev = keeper_ns.dev;
	theirs.st_ino = keeper_ns.ino;
	pthread_mutex_unlock(&keeper_ns.lk);
	if (!known) {
		if (stat(p, &theirs) < 0)
			return 0;
		pthread_mutex_lock(&keeper_ns.lk);
		keeper_ns.pid = kp;
		keeper_ns.dev = theirs.st_dev;
		keeper_ns.ino = theirs.st_ino;
		keeper_ns.cookie = 0;
		pthread_mutex_unlock(&keeper_ns.lk);
	}
	if (stat("/proc/thread-self/ns/net", &mine) < 0)
		return 0;
	if (theirs.st_ino == mine.st_ino && theirs.st_dev == mine.st_dev)
		return 1;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	*back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || *back < 0 || setns(fd, CLONE_NEWNET) < 0) {
		if (*back >= 0)
			close(*back);
		*back = -1;
	}
	if (fd >= 0)
		close(fd);
	return *back >= 0;
}

static void fabric_netns_leave(int back)
{
	if (back < 0)
		return;
	if (setns(back, CLONE_NEWNET) < 0)
		abort(); /* a thread stranded in another namespace */
	close(back);
}

/* The system call itself, not socket(3): the fabric is the "hardware"
 * under the application, and an application's LD_PRELOAD socket
 * interposer (Debian's librspreload) would turn this socket into an
 * rsocket over the very fabric it carries. Every later call on the fd
 * reaches the kernel: interposers pass through fds they did not make. */
static int sim_socket_syscall(void)
{
	return (int)syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int simf_socket(struct simf *f, int n, uint16_t port, uint16_t *bound)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int fd, one = SOCK_BUF, back = -1, e;
	uint64_t cookie;
	pid_t kp;

	if (n < 0 || n >= SIMF_MAX_NODES || (unsigned)n > f->st->nnodes + f->st->nswitches)
		return errno = EINVAL, -1;
	/* Fast path (the /proc stat of the thread's namespace was
	 * half of a QP's creation, ~8 of ~17 µs): make the socket where the
	 * thread stands and ask the kernel which namespace it is in. The
	 * keeper's cookie matching proves it is the fabric's — whatever the
	 * thread did with setns/unshare since the last socket — so nothing is
	 * assumed; anything else (another namespace, cookie not known yet, a
	 * kernel without SO_NETNS_COOKIE) goes the stat-and-switch way. */
	kp = (pid_t)f->st->keeper_pid;
	pthread_mutex_lock(&keeper_ns.lk);
	cookie = kp > 0 && keeper_ns.pid == kp ? keeper_ns.cookie : 0;
	pthread_mutex_unlock(&keeper_ns.lk);
	fd = -1;
	if (cookie && !netns_elsewhere) {
		fd = sim_socket_syscall();
		if (fd < 0)
			return -1;
		if (sock_netns_cookie(fd) != cookie) {
			close(fd);
			fd = -1;
			netns_elsewhere = 1;
		}
	}
	if (fd < 0) {
		int in_keeper = fabric_netns_enter(f, &back);

		fd = sim_socket_syscall();
		e = errno;
		fabric_netns_leave(back);
		errno = e;
		if (fd < 0)
			return -1;
		if (in_keeper && back < 0)
			netns_elsewhere = 0;   /* the thread is back in the fabric's namespace */
		if (in_keeper && !cookie && (cookie = sock_netns_cookie(fd)) != 0) {
			pthread_mutex_lock(&keeper_ns.lk);
			if (keeper_ns.pid == kp)
				keeper_ns.cookie = cookie;
			pthread_mutex_unlock(&keeper_ns.lk);
		}
	}
	/* Capped by net.core.rmem_max; best effort. No SO_SNDBUF (one
	 * system call per socket): the transport is loopback, whose
	 * driver orphans a datagram as it takes it (lo has no qdisc), so the
	 * send buffer never holds more than the datagram being sent —
	 * 100000 datagrams of 4224 bytes through a 9 KB send buffer to a
	 * receiver that never reads: not one refused. (A qdisc an
	 * administrator puts on lo would change that.) */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	a.sin_addr.s_addr = simf_node_addr(f, n);
	a.sin_port = htons(port);
	/* the port is known unless the kernel chose it (port 0) */
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (!port && getsockname(fd, (struct sockaddr *)&a, &alen) < 0)) {
		e = errno;
		close(fd);
		return errno = e, -1;
	}
	if (bound)
		*bound = ntohs(a.sin_port);
	return fd;
}

ssize_t simf_recv(struct simf *f, int fd, void *buf, size_t cap, int *src, uint16_t *src_port)
{
	return simf_recv_flags(f, fd, buf, cap, src, src_port, MSG_DONTWAIT);
}

ssize_t simf_recv_flags(struct simf *f, int fd, void *buf, size_t cap, int *src, uint16_t *src_port,
			int flags)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	ssize_t n = recvfrom(fd, buf, cap, flags, (struct sockaddr *)&a, &alen);

	if (n < 0)
		return -1;
	if (src) {
		uint32_t h = ntohl(a.sin_addr.s_addr);

		*src = -1;
		if (alen >= sizeof(a) && a.sin_family == AF_INET &&
		    (h & 0xFFFFFF00u) == (127u << 24 | 77u << 16 | (f->st->instance & 0xFF) << 8) &&
		    (h & 0xFF) <= f->st->nnodes + f->st->nswitches)
			*src = (int)(h & 0xFF);
	}
	if (src_port)
		*src_port = ntohs(a.sin_port);
	return n;
}

/* ---- pcap -------------------------------------------------------------------------- */

static void pcap_open(struct simf *f)
{
	struct simf_priv *pv = f->priv;

	if (__atomic_load_n(&pv->pcap_tried, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&pv->pcap_mu);
	if (!pv->pcap_tried) {
		if (f->st->pcap_path[0])
			f->pcap_fd = open(f->st->pcap_path, O_WRONLY | O_APPEND | O_CLOEXEC);
		__atomic_store_n(&pv->pcap_tried, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&pv->pcap_mu);
}

static void pcap_rec_hdr(uint8_t h[16], size_t caplen)
{
	struct timespec ts;
	uint32_t v;

	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint32_t)ts.tv_sec; memcpy(h, &v, 4);
	v = (uint32_t)(ts.tv_nsec / 1000); memcpy(h + 4, &v, 4);
	v = (uint32_t)caplen; memcpy(h + 8, &v, 4); memcpy(h + 12, &v, 4);
}

/* One record per datagram as it reaches dst, one writev() with O_APPEND so
 * processes sharing the file never interleave. The copy on the "wire" has
 * BTH resv8a zeroed (the fabric's side channel) and an ICRC recomputed for
 * the synthesized framing. */
static void pcap_write(struct simf *f, int src, int dst, uint16_t sport, const uint8_t *pkt, size_t len)
{
	const struct simf_state *st = f->st;
	uint8_t rec[16], hdr[64], bth[SIMF_BTH_LEN], crc[6];
	struct iovec iov[6];
	size_t mid = len - SIMF_BTH_LEN - SIMF_ICRC_LEN, hl;
	int iovn = 0;

	pcap_open(f);
	if (f->pcap_fd < 0 || len < SIMF_BTH_LEN + SIMF_ICRC_LEN)
		return;
	memcpy(bth, pkt, SIMF_BTH_LEN);
	bth[4] = 0;
	if (st->link == SIMF_LINK_IB)
		bth[8] &= 0x80; /* the DLID's path bits: the LRH has them */
	if (st->link == SIMF_LINK_IB) {
		struct simf_bth pb;
		uint16_t dlid, slid;
		uint32_t dqp = (uint32_t)pkt[5] << 16 | (uint32_t)pkt[6] << 8 | pkt[7];
		size_t pktlen = 8 + len;                  /* LRH..ICRC */
		/* a directed-route SMP travels with the permissive LID */
		int dr_smp = dqp == 0 && len >= SIMF_BTH_LEN + SIMF_DETH_LEN + 2 + SIMF_ICRC_LEN &&
			     pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 1] == 0x81;
		uint8_t *lrh = hdr + 16, m[8];
		uint32_t ic;
		uint16_t vc;
		struct timespec ts;
		uint64_t erfts;

		simf_bth_get(pkt, &pb);
		dlid = st->nodes[dst].lid ? simf_bth_dlid(f, &pb, dst) : 0xFFFF;
		slid = st->nodes[src].lid ? simf_bth_slid(f, &pb, src) : 0xFFFF;

		/* ERF header (16 bytes, big-endian except the timestamp) */
		clock_gettime(CLOCK_REALTIME, &ts);
		erfts = (uint64_t)ts.tv_sec << 32 |
			(((uint64_t)ts.tv_nsec << 32) + 999999999ull) / 1000000000ull;
		for (int i = 0; i < 8; i++)
			hdr[i] = (uint8_t)(erfts >> (8 * i));
		hdr[8] = ERF_TYPE_INFINIBAND;
		hdr[9] = ERF_FLAG_VLEN;
		put16(hdr + 10, (uint16_t)(16 + pktlen + 2));
		put16(hdr + 12, 0);
		put16(hdr + 14, (uint16_t)(pktlen + 2));
		/* LRH */
		lrh[0] = (uint8_t)((dqp == 0 ? 15 : 0) << 4);   /* VL, LVer 0 */
		lrh[1] = (uint8_t)(SIMF_RESV8A_SL(pkt[4]) << 4 | 2); /* SL, LNH = IBA local */
		put16(lrh + 2, dr_smp ? 0xFFFF : dlid);
		put16(lrh + 4, (uint16_t)(((pktlen + 3) / 4) & 0x7FF));
		put16(lrh + 6, dr_smp ? 0xFFFF : slid);
		hl = 24;
		/* ICRC: LRH with VL masked, BTH with resv8a masked, the rest */
		memcpy(m, lrh, 8);
		m[0] |= 0xF0;
		ic = simf_crc32(0xFFFFFFFFu, m, 8);
		bth[4] = 0xFF;
		ic = simf_crc32(ic, bth, SIMF_BTH_LEN);
		bth[4] = 0;
		ic = ~simf_crc32(ic, pkt + SIMF_BTH_LEN, mid);
		simf_icrc_put(crc, ic);
		vc = crc16_update(0xFFFF, lrh, 8);
		vc = crc16_update(vc, bth, SIMF_BTH_LEN);
		vc = crc16_update(vc, pkt + SIMF_BTH_LEN, mid);
		vc = (uint16_t)~crc16_update(vc, crc, 4);
		crc[4] = (uint8_t)vc;
		crc[5] = (uint8_t)(vc >> 8);
		pcap_rec_hdr(rec, hl + len + 2);
		iov[iovn++] = (struct iovec){ rec, 16 };
		iov[iovn++] = (struct iovec){ hdr, hl };
		iov[iovn++] = (struct iovec){ bth, SIMF_BTH_LEN };
		iov[iovn++] = (struct iovec){ (void *)(pkt + SIMF_BTH_LEN), mid };
		iov[iovn++] = (struct iovec){ crc, 6 };
	} else {
		uint32_t sip = htonl(st->nodes[src].ip), dip = htonl(st->nodes[dst].ip);
		uint8_t *eth = hdr;
		uint32_t ic;

		/* Ethernet: locally administered MACs 02:00:7f:0a:00:<node> */
		memset(eth, 0, 14);
		eth[0] = 0x02; eth[2] = 0x7f; eth[3] = 0x0a; eth[5] = (uint8_t)dst;
		eth[6] = 0x02; eth[8] = 0x7f; eth[9] = 0x0a; eth[11] = (uint8_t)src;
		eth[12] = 0x08;
		ipv4_udp_hdr(hdr + 14, sip, dip, sport, UDP_ROCE_PORT, len);
		hl = 14 + 28;
		ic = icrc_rocev2(hdr + 14, pkt, len - SIMF_ICRC_LEN);
		/* icrc_rocev2 read resv8a from pkt but masks it: same result */
		simf_icrc_put(crc, ic);
		pcap_rec_hdr(rec, hl + len);
		iov[iovn++] = (struct iovec){ rec, 16 };
		iov[iovn++] = (struct iovec){ hdr, hl };
		iov[iovn++] = (struct iovec){ bth, SIMF_BTH_LEN };
		iov[iovn++] = (struct iovec){ (void *)(pkt + SIMF_BTH_LEN), mid };
		iov[iovn++] = (struct iovec){ crc, 4 };
	}
	if (writev(f->pcap_fd, iov, iovn) < 0)
		return;
}

/* ---- delivery, delay line ------------------------------------------------------------- */

static int node_ok(const struct simf_state *st, int n)
{
	return __atomic_load_n(&st->nodes[n].link_up, __ATOMIC_RELAXED) != 0;
}

/* Can a datagram go from src to dst? Both links must be up, except for an
 * SMP a node sends to its own QP0 (a directed-route SMP with hop count 0):
 * on hardware that one never leaves the HCA, so it reaches the local SMA
 * with the link down too. */
static int path_ok(const struct simf_state *st, int src, int dst, const uint8_t *pkt)
{
	if (src == dst && pkt[5] == 0 && pkt[6] == 0 && pkt[7] == 0)
		return 1;
	return node_ok(st, src) && node_ok(st, dst);
}

/* Hands one datagram to the destination socket. */
static void deliver(struct simf *f, int fd, int src, int dst, uint16_t port, uint16_t sport,
		    const uint8_t *pkt, size_t len)
{
	struct simf_state *st = f->st;
	struct sockaddr_in a = { .sin_family = AF_INET };
	ssize_t rc;

	if (!path_ok(st, src, dst, pkt)) {
		__atomic_fetch_add(&st->nodes[src].tx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	a.sin_addr.s_addr = simf_node_addr(f, dst);
	a.sin_port = htons(port);
	/* captured as it goes on the wire: before the receiver can answer */
	if (st->pcap_path[0])
		pcap_write(f, src, dst, sport, pkt, len);
	for (int tries = 0;; tries++) {
		rc = sendto(fd, pkt, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, sizeof(a));
		if (rc >= 0 || (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) || tries >= 50)
			break;
		if (errno != EINTR) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			poll(&p, 1, 2);
		}
	}
	if (rc < 0) {
		__atomic_fetch_add(&st->nodes[src].tx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&st->nodes[dst].rx, 1, __ATOMIC_RELAXED);
}

static int dl_before(const struct dl_item *a, const struct dl_item *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(struct simf_priv *pv, struct dl_item *it)
{
	size_t i = pv->n++;

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!dl_before(it, pv->heap[p]))
			break;
		pv->heap[i] = pv->heap[p];
		i = p;
	}
	pv->heap[i] = it;
}

static struct dl_item *heap_pop(struct simf_priv *pv)
{
	struct dl_item *top = pv->heap[0], *last = pv->heap[--pv->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= pv->n)
			break;
		if (c + 1 < pv->n && dl_before(pv->heap[c + 1], pv->heap[c]))
			c++;
		if (!dl_before(pv->heap[c], last))
			break;
		pv->heap[i] = pv->heap[c];
		i = c;
	}
	if (pv->n)
		pv->heap[i] = last;
	return top;
}

static void *delay_main(void *arg)
{
	struct simf *f = arg;
	struct simf_priv *pv = f->priv;

	pthread_mutex_lock(&pv->mu);
	while (!pv->stop) {
		uint64_t now = now_mono_ns();

		if (pv->n == 0) {
			pthread_cond_wait(&pv->cv, &pv->mu);
		} else if (pv->heap[0]->due > now) {
			struct timespec ts;
			uint64_t due = pv->heap[0]->due;

			ts.tv_sec = (time_t)(due / 1000000000ull);
			ts.tv_nsec = (long)(due % 1000000000ull);
			pthread_cond_timedwait(&pv->cv, &pv->mu, &ts);
		} else {
			struct dl_item *it = heap_pop(pv);

			pthread_mutex_unlock(&pv->mu);
			deliver(f, it->fd, it->src, it->dst, it->port, it->sport, it->data, it->len);
			close(it->fd);
			free(it);
			pthread_mutex_lock(&pv->mu);
		}
	}
	pthread_mutex_unlock(&pv->mu);
	return NULL;
}

/* Called with pv->mu held. */
static int delay_enqueue(struct simf *f, int fd, int src, int dst, uint16_t port, uint16_t sport,
			 const uint8_t *pkt, size_t len, uint64_t due)
{
	struct simf_priv *pv = f->priv;
	struct dl_item *it;

	if (pv->thread_pid != getpid()) {
		sigset_t all, old;

		/* first use in this process (or after a fork): start the thread */
		pv->n = 0;
		pv->stop = 0;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&f->delay_thread, NULL, delay_main, f) != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return -1;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pv->thread_pid = getpid();
		f->delay_running = 1;
	}
	if (pv->n == pv->cap) {
		size_t nc = pv->cap ? pv->cap * 2 : 64;
		struct dl_item **h = realloc(pv->heap, nc * sizeof(*h));

		if (!h)
			return -1;
		pv->heap = h;
		pv->cap = nc;
	}
	it = malloc(sizeof(*it) + len);
	if (!it)
		return -1;
	it->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (it->fd < 0) {
		free(it);
		return -1;
	}
	it->due = due;
	it->seq = pv->seq++;
	it->src = src;
	it->dst = dst;
	it->port = port;
	it->sport = sport;
	it->len = len;
	memcpy(it->data, pkt, len);
	heap_push(pv, it);
	pthread_cond_signal(&pv->cv);
	return 0;
}

static void delay_stop(struct simf *f)
{
	struct simf_priv *pv = f->priv;

	if (!pv)
		return;
	pthread_mutex_lock(&pv->mu);
	if (pv->thread_pid == getpid() && f->delay_running) {
		pv->stop = 1;
		pthread_cond_signal(&pv->cv);
		pthread_mutex_unlock(&pv->mu);
		pthread_join(f->delay_thread, NULL);
		pthread_mutex_lock(&pv->mu);
		f->delay_running = 0;
		pv->thread_pid = 0;
	}
	/* datagrams still held back are lost, as on a link that goes away */
	while (pv->n) {
		struct dl_item *it = heap_pop(pv);

		close(it->fd);
		free(it);
	}
	pthread_mutex_unlock(&pv->mu);
}

/* ---- send --------------------------------------------------------------------------- */

/* Refreshes the local copy of the rule table when the generation moved.
 * pv->mu held. */
static void rules_refresh(struct simf *f)
{
	struct simf_priv *pv = f->priv;
	uint32_t gen = __atomic_load_n(&f->st->generation, __ATOMIC_ACQUIRE);

	if (pv->rules_valid && gen == pv->rules_gen)
		return;
	simf_lock(f);
	pv->nrules = 0;
	for (int i = 0; i < SIMF_MAX_FAULTS; i++)
		if (f->st->faults[i].used)
			pv->rules[pv->nrules++] = f->st->faults[i];
	pv->rules_gen = f->st->generation;
	pv->rules_valid = 1;
	simf_unlock(f);
}

/* The packet kind of a BTH opcode (enum simf_match_op). */
static int opcode_kind(uint8_t opcode)
{
	unsigned tclass = opcode >> 5, op = opcode & 0x1F;

	/* RC, UC, RD, XRC: RDMA READ response first/middle/last/only (0x0D-0x10),
	 * ACKNOWLEDGE (0x11) and ATOMIC ACKNOWLEDGE (0x12) answer a request */
	if ((tclass <= 2 || tclass == 5) && op >= 0x0D && op <= 0x12)
		return SIMF_MATCH_OP_ACK;
	if (opcode == 0x81) /* RoCEv2 CNP: a notification back to the sender */
		return SIMF_MATCH_OP_ACK;
	return SIMF_MATCH_OP_DATA;
}

static int rule_match(const struct simf_fault *r, int src, int qpt, int is_mad, uint8_t mclass,
		      uint16_t attr, int kind)
{
	if (r->node >= 0 && r->node != src)
		return 0;
	if (r->op != SIMF_MATCH_OP_ANY && r->op != kind)
		return 0;
	if (r->qpt != SIMF_QPT_ANY) {
		if (r->qpt == SIMF_QPT_MAD) {
			if (!is_mad)
				return 0;
		} else if (r->qpt != qpt || (qpt == SIMF_QPT_UD && is_mad)) {
			return 0;
		}
	}
	if (r->mgmt_class != 0xFF && (!is_mad || r->mgmt_class != mclass))
		return 0;
	if (r->attr_id != 0xFFFF && (!is_mad || r->attr_id != attr))
		return 0;
	return 1;
}

/* One PRNG draw in [0, 1e6): seeded, per handle stream, per sender node,
 * counted (thread-safe); reproducible for a seed and a traffic order. */
static uint32_t draw_ppm(struct simf *f, int src)
{
	struct simf_priv *pv = f->priv;
	uint64_t k = __atomic_fetch_add(&pv->draws, 1, __ATOMIC_RELAXED);

	return (uint32_t)(mix64(f->rng ^ ((uint64_t)(src + 1) << 56) ^ k) % 1000000u);
}

ssize_t simf_send(struct simf *f, int fd, int src, int dst, uint16_t port, void *pkt, size_t len)
{
	struct sockaddr_in me;
	socklen_t mlen = sizeof(me);

	if (getsockname(fd, (struct sockaddr *)&me, &mlen) < 0)
		return -1;
	return simf_send_from(f, fd, ntohs(me.sin_port), src, dst, port, pkt, len);
}

ssize_t simf_send_from(struct simf *f, int fd, uint16_t sport, int src, int dst, uint16_t port,
		       void *pkt, size_t len)
{
	struct simf_state *st = f->st;
	struct simf_priv *pv = f->priv;
	uint8_t *p = pkt;
	int qpt, is_mad = 0, copies = 1, kind;
	uint8_t mclass = 0;
	uint16_t attr = 0;
	uint64_t hold = 0;
	uint32_t dqp;

	if (!f || !pkt || src < 0 || dst < 0 || (unsigned)src > st->nnodes + st->nswitches ||
	    (unsigned)dst > st->nnodes + st->nswitches || len < SIMF_BTH_LEN + SIMF_ICRC_LEN || len > 65507)
		return errno = EINVAL, -1;
	simf_icrc_put(p + len - SIMF_ICRC_LEN,
		      simf_icrc(f, src, dst, sport, port, p, len - SIMF_ICRC_LEN));
	__atomic_fetch_add(&st->nodes[src].tx, 1, __ATOMIC_RELAXED);
	if (!path_ok(st, src, dst, p)) {
		__atomic_fetch_add(&st->nodes[src].tx_dropped, 1, __ATOMIC_RELAXED);
		return (ssize_t)len;
	}
	qpt = p[0] >> 5;              /* 0 RC, 1 UC, 2 RD, 3 UD */
	if (qpt == 3)
		qpt = SIMF_QPT_UD;
	else if (qpt == 2)
		qpt = 0xFE;           /* RD: matches only "any" */
	kind = opcode_kind(p[0]);
	dqp = (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
	if (qpt == SIMF_QPT_UD && dqp <= 1 &&
	    len >= SIMF_BTH_LEN + SIMF_DETH_LEN + 24 + SIMF_ICRC_LEN) {
		const uint8_t *mad = p + SIMF_BTH_LEN + SIMF_DETH_LEN;

		is_mad = 1;
		mclass = mad[1];
		attr = (uint16_t)(mad[16] << 8 | mad[17]);
	}
	pthread_mutex_lock(&pv->mu);
	rules_refresh(f);
	for (int i = 0; i < pv->nrules; i++) {
		const struct simf_fault *r = &pv->rules[i];

		if (!rule_match(r, src, qpt, is_mad, mclass, attr, kind) ||
		    !simf_link_match(f, r, src, dst, p))
			continue;
		if (r->drop_ppm && draw_ppm(f, src) < r->drop_ppm) {
			pthread_mutex_unlock(&pv->mu);
			__atomic_fetch_add(&st->nodes[src].tx_dropped, 1, __ATOMIC_RELAXED);
			return (ssize_t)len;
		}
		if (r->dup_ppm && draw_ppm(f, src) < r->dup_ppm) {
			copies = 2;
			__atomic_fetch_add(&st->nodes[src].tx_duplicated, 1, __ATOMIC_RELAXED);
		}
		hold = r->delay_ns;
		if (r->reorder_ppm && draw_ppm(f, src) < r->reorder_ppm)
			hold += r->reorder_ns;
		break;
	}
	if (hold) {
		uint64_t due = now_mono_ns() + hold;
		int rc = 0;

		for (int c = 0; c < copies && rc == 0; c++)
			rc = delay_enqueue(f, fd, src, dst, port, sport, p, len, due);
		pthread_mutex_unlock(&pv->mu);
		if (rc < 0)
			return -1;
		__atomic_fetch_add(&st->nodes[src].tx_delayed, 1, __ATOMIC_RELAXED);
		return (ssize_t)len;
	}
	pthread_mutex_unlock(&pv->mu);
	for (int c = 0; c < copies; c++)
		deliver(f, fd, src, dst, port, sport, p, len);
	return (ssize_t)len;
}
