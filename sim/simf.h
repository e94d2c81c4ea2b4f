/*
 * simf.h - the simulated fabric's shared core ("simf"): the contract between
 * the fabric tool (uscm-sim), the SM/SA process, and the drop-in
 * libibumad.so.3 / libibverbs.so.1. sim/ shares no code with lib/, umad/ or
 * cm_proto/: it is an independent implementation of the other side of the
 * ABI, so it can catch their mistakes. See docs/sim.md.
 *
 * A fabric instance is a directory D ($USCM_SIM_DIR) holding
 *   D/fabric.state   this file's struct simf_state, mmap'd MAP_SHARED by
 *                    every process of the fabric (process-shared mutex)
 *   D/hosts          ibacm-format "address GID" lines for every node
 *   D/fabric.pcap    every datagram, when the fabric was started with --pcap
 *
 * Node i (1..N, name "node<i>", IPv4 name address 127.10.0.i) is a process
 * environment selected by USCM_SIM_NODE=node<i>; the SM/SA is node 0 ("sm").
 *
 * Transport: UDP on loopback. Node i's sockets bind 127.77.<instance>.<i>
 * (any 127/8 address works on lo without configuration; no traffic goes to
 * 127.10.0.0/24). A QP n of node i is the UDP port simf_qp_port(n); every
 * umad agent socket has its own port, registered in the node's agent table.
 * A datagram's payload is exactly a RoCEv2 UDP payload: BTH, [DETH | RETH |
 * AETH ...], payload, ICRC. The sender's node and thus SLID/SGID come from
 * the source address. What an IB LRH/GRH would add travels in BTH byte 4
 * (resv8a), which IBTA reserves and leaves out of the ICRC: bit 0 = "the
 * sender used a GRH" (the receiver synthesizes it from the node table for
 * IBV_WC_GRH; on RoCE it is always set), bits 7:4 = the SL.
 */
#ifndef USCM_SIMF_H
#define USCM_SIMF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIMF_MAGIC 0x55534631u /* "USF1" */
#define SIMF_VERSION 1
#define SIMF_MAX_NODES 64      /* node 0 = SM/SA, 1..63 = node1..node63 */
#define SIMF_MAX_AGENTS 32     /* umad agents per node */
#define SIMF_MAX_FAULTS 32
#define SIMF_MAX_LID 0xBFFF
#define SIMF_QP_PORT_BASE 10000
#define SIMF_MAX_QPN 50000     /* QPNs 2..SIMF_MAX_QPN-1 per node */
#define SIMF_PKEYS 16

enum simf_link { SIMF_LINK_IB = 1, SIMF_LINK_ROCE = 2 };
enum simf_port_state { SIMF_PORT_DOWN = 1, SIMF_PORT_INIT = 2, SIMF_PORT_ACTIVE = 4 };

/* A registered umad agent: requests of (class, version, method) addressed
 * to QP1/QP0 of this node go to 127.77.<inst>.<node>:port. */
struct simf_agent {
	int32_t pid;            /* 0: free slot */
	uint16_t port;          /* UDP port of the agent's socket */
	uint8_t qpn;            /* 0 (SMI) or 1 (GSI) */
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t rmpp_version;
	uint8_t oui[3];
	uint8_t methods[16];    /* bitmap of methods 0..127 it serves */
	uint32_t agent_id;      /* the value umad_register returned */
};

struct simf_node {
	char name[32];          /* "sm", "node1", ... */
	uint32_t ip;            /* name address, host order: 127.10.0.i */
	uint64_t guid;          /* node GUID = port GUID, host order */
	uint8_t gid[16];        /* port GID 0: IB fe80::guid, RoCE ::ffff:ip */
	uint16_t lid;           /* assigned by the SM; 0 until then (IB) */
	uint16_t sm_lid;
	uint8_t port_state;     /* enum simf_port_state */
	uint8_t link_up;        /* 0: every datagram to/from it is dropped */
	uint8_t lmc;
	uint8_t _pad;
	int32_t pid;            /* a process that claimed the node (for kill) */
	uint32_t next_qpn;      /* QPN allocator, under the state lock */
	uint16_t pkeys[SIMF_PKEYS]; /* P_Key table; [0] = 0xFFFF */
	struct simf_agent agents[SIMF_MAX_AGENTS];
	uint64_t tx, rx, tx_dropped, tx_duplicated, tx_delayed;
};

/* A fault rule: the first matching rule applies to a datagram. */
enum simf_match_qpt { SIMF_QPT_ANY = 0xFF, SIMF_QPT_RC = 0, SIMF_QPT_UC = 1, SIMF_QPT_UD = 2,
		      SIMF_QPT_MAD = 3 /* UD to QP0/QP1 */ };
struct simf_fault {
	uint8_t used;
	uint8_t qpt;            /* enum simf_match_qpt */
	uint8_t mgmt_class;     /* 0xFF: any (MAD rules) */
	uint8_t _pad;
	uint16_t attr_id;       /* 0xFFFF: any */
	int16_t node;           /* -1: any sender, else sender node */
	uint32_t drop_ppm;      /* parts per million */
	uint32_t dup_ppm;
	uint32_t reorder_ppm;   /* hold the datagram back by reorder_ns */
	uint64_t delay_ns;      /* added to every matching datagram */
	uint64_t reorder_ns;
};

struct simf_state {
	uint32_t magic, version;
	uint32_t link;          /* enum simf_link */
	uint32_t instance;      /* transport subnet 127.77.<instance>.0/24 */
	uint64_t seed;          /* fault PRNG seed (each sender mixes in node, pid) */
	uint32_t nnodes;        /* nodes 1..nnodes exist, plus node 0 = SM */
	uint32_t generation;    /* bumped on every change of faults/links */
	pthread_mutex_t lock;   /* PTHREAD_PROCESS_SHARED, robust */
	char pcap_path[256];    /* "" : no capture */
	struct simf_fault faults[SIMF_MAX_FAULTS];
	uint8_t lft[SIMF_MAX_LID + 1]; /* LID -> node + 1 (0: unassigned), by the SM */
	struct simf_node nodes[SIMF_MAX_NODES];
	uint64_t sa_queries;    /* counted by the SA (for the path cache target) */
};

struct simf {
	struct simf_state *st;
	char dir[256];
	int self;               /* this process's node, or -1 */
	uint64_t rng;
	/* delay line: datagrams held back by delay/reorder faults */
	pthread_t delay_thread;
	int delay_running;
	void *delay_q;
	int pcap_fd;
};

/* ---- fabric state --------------------------------------------------------- */

/* Creates D/fabric.state (and D) for `nnodes` nodes; used by uscm-sim. */
struct simf *simf_create(const char *dir, enum simf_link link, unsigned nnodes,
			 unsigned instance, uint64_t seed, const char *pcap_path);
/* Attaches to an existing fabric: dir NULL means $USCM_SIM_DIR (default
 * /tmp/uscm-sim). Sets self from $USCM_SIM_NODE (or -1). NULL + errno. */
struct simf *simf_attach(const char *dir);
void simf_detach(struct simf *f);
void simf_lock(struct simf *f);
void simf_unlock(struct simf *f);
/* Node index by name ("node3", "sm"), by LID (via the LFT), by GID. -1 if none. */
int simf_node_by_name(const struct simf *f, const char *name);
int simf_node_by_lid(const struct simf *f, uint16_t lid);
int simf_node_by_gid(const struct simf *f, const uint8_t gid[16]);
/* Allocates a QPN on node n (>= 2). */
uint32_t simf_alloc_qpn(struct simf *f, int n);
uint16_t simf_qp_port(uint32_t qpn);   /* SIMF_QP_PORT_BASE + qpn */
/* The transport address of node n in network order (127.77.inst.n). */
uint32_t simf_node_addr(const struct simf *f, int n);
/* Writes D/hosts (ibacm format) from the node table. */
int simf_write_hosts(struct simf *f);

/* ---- transport -------------------------------------------------------------- */

/* A non-blocking UDP socket bound to node n's address, port `port` (0:
 * ephemeral). *bound gets the port. The fd polls/epolls like any socket. */
int simf_socket(struct simf *f, int n, uint16_t port, uint16_t *bound);
/* Sends one RoCEv2 payload (BTH..ICRC; the ICRC is computed here) from node
 * `src` to (node dst, port). Applies link state and the fault rules (drop,
 * duplicate, delay, reorder via the delay thread), counts, and appends to
 * the fabric pcap. Returns len (also when a fault dropped it: as on a real
 * wire, the sender cannot tell) or -1/errno. */
ssize_t simf_send(struct simf *f, int fd, int src, int dst, uint16_t port, void *pkt, size_t len);
/* Receives one datagram: returns its length, *src the sending node (-1 if
 * not from this fabric), *src_port its port. Checks and strips nothing. */
ssize_t simf_recv(struct simf *f, int fd, void *buf, size_t cap, int *src, uint16_t *src_port);

/* ---- packet helpers (BTH / DETH / ICRC) -------------------------------------- */

#define SIMF_BTH_LEN 12
#define SIMF_DETH_LEN 8
#define SIMF_ICRC_LEN 4
#define SIMF_OP_UD_SEND_ONLY 0x64
#define SIMF_OP_UD_SEND_ONLY_IMM 0x65

struct simf_bth {
	uint8_t opcode, se, mig, pad, tver;
	uint8_t resv8a;         /* bit 0: GRH used; bits 7:4: SL (see above) */
	uint16_t pkey;
	uint8_t fecn, becn;
	uint32_t dest_qp;
	uint8_t ack_req;
	uint32_t psn;
};
void simf_bth_put(uint8_t *p, const struct simf_bth *b);
void simf_bth_get(const uint8_t *p, struct simf_bth *b);
/* RoCEv2 ICRC over the UDP payload as it would travel from node src to dst
 * (IPv4 pseudo-header from the nodes' transport addresses). */
uint32_t simf_icrc(const struct simf *f, int src, int dst, uint16_t sport, uint16_t dport,
		   const uint8_t *payload, size_t len_without_icrc);

#endif
