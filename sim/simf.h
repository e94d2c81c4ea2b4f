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
 * 127.10.0.0/24). A QP n of node i is the UDP port simf_qp_port(n) (n modulo
 * SIMF_MAX_QPN: QPNs of reused sockets, see simf_qp_port); every
 * umad agent socket has its own port, registered in the node's agent table.
 * A datagram's payload is exactly a RoCEv2 UDP payload: BTH, [DETH | RETH |
 * AETH ...], payload, ICRC. The sender's node and thus SLID/SGID come from
 * the source address. What an IB LRH/GRH would add travels in BTH byte 4
 * (resv8a), which IBTA reserves and leaves out of the ICRC: bit 0 = "the
 * sender used a GRH" (the receiver synthesizes it from the node table for
 * IBV_WC_GRH; on RoCE it is always set), bits 3:1 = the sender's source
 * GID index on RoCE (SIMF_RESV8A_SGID), bits 7:4 = the SL. (BTH FECN/BECN,
 * bits 7 and 6 of that byte, are not used by the fabric: they alias SL bits
 * 3:2. Use SIMF_RESV8A() / SIMF_RESV8A_SL() / SIMF_RESV8A_GRH().)
 *
 * Counting: simf_send counts tx/tx_dropped/tx_duplicated/tx_delayed on the
 * sender and rx on the destination node when the datagram is handed to the
 * destination socket (loopback does not lose datagrams unless a receive
 * buffer overflows).
 */
#ifndef USCM_SIMF_H
#define USCM_SIMF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIMF_MAGIC 0x55534631u /* "USF1" */
#define SIMF_VERSION 9
#define SIMF_IP_GIDS 4         /* IPv6 RoCE GIDs per node (struct simf_node) */
#define SIMF_MAX_NODES 128     /* node 0 = SM/SA, 1..127 = node1..node127 and switches */
#define SIMF_MAX_AGENTS 32     /* umad agents per node */
#define SIMF_MAX_FAULTS 32
#define SIMF_MAX_LID 0xBFFF
#define SIMF_QP_PORT_BASE 10000
#define SIMF_MAX_QPN 50000     /* ports of QPNs 2..SIMF_MAX_QPN-1 per node (simf_qp_port) */
#define SIMF_PKEYS 16
#define SIMF_NODE_PIDS 16      /* processes attached as one node */
#define SIMF_MAX_MCG 64        /* multicast groups */
#define SIMF_MCG_QPS 64        /* QPs attached to one group (all nodes) */
#define SIMF_QKEY_GSI 0x80010000u
#define SIMF_MAX_PORTS 36      /* ports of a switch (1..36; 0 = its management port) */
#define SIMF_MAX_SWITCHES 24
#define SIMF_SW_PKEYS 32       /* a switch port's P_Key table (PartitionEnforcementCap) */
#define SIMF_LFT_CAP 0xC000    /* a switch's LinearFDBCap: unicast LIDs 0..0xBFFF */
#define SIMF_MFT_CAP 1024      /* a switch's MulticastFDBCap: MLIDs 0xC000..0xC3FF */

/* BTH byte 4 (resv8a) as the fabric uses it. */
#define SIMF_RESV8A(sl, grh) ((uint8_t)((((unsigned)(sl) & 0xFu) << 4) | ((grh) ? 1u : 0u)))
#define SIMF_RESV8A_SL(r) (((unsigned)(r) >> 4) & 0xFu)
#define SIMF_RESV8A_GRH(r) ((unsigned)(r) & 1u)
/* bits 3:1: the sender's source GID index on RoCE (0: the node's GID, k:
 * its IPv6 GID ip_gids[k-1]), so the receiver's GRH / MAD address carries
 * the SGID the sender used */
#define SIMF_RESV8A_SGID(r) (((unsigned)(r) >> 1) & 7u)
#define SIMF_RESV8A_SET_SGID(r, i) ((uint8_t)(((r) & ~0x0Eu) | (((unsigned)(i) & 7u) << 1)))

enum simf_link { SIMF_LINK_IB = 1, SIMF_LINK_ROCE = 2 };
/* Who may open a port for MADs (/dev/infiniband/umadN): rdma-core's udev
 * rules make umadN 0600 root (the default, 0), a host may open it to all. */
enum simf_umad_access { SIMF_UMAD_ROOT = 0, SIMF_UMAD_ALL = 1 };
enum simf_port_state { SIMF_PORT_DOWN = 1, SIMF_PORT_INIT = 2, SIMF_PORT_ARMED = 3, SIMF_PORT_ACTIVE = 4 };
/* Who manages the subnet (IB): uscm-sim-sm itself, or an external SM
 * (Debian's opensm, `uscm-sim up --sm opensm`) running on a node's port,
 * with uscm-sim-sm only every port's SMA. */
enum simf_sm_kind { SIMF_SM_BUILTIN = 0, SIMF_SM_OPENSM = 1 };
enum simf_node_type { SIMF_NODE_CA = 0, SIMF_NODE_SWITCH = 1 };

/* One end of a cable: node `peer`'s port `peer_port` (peer -1: no cable).
 * state: a switch port's state (enum simf_port_state; a CA port's is
 * simf_node.port_state). */
struct simf_port {
	int16_t peer;
	uint8_t peer_port;
	uint8_t state;
	uint8_t down;           /* the cable's link is down (simf_set_port_link) */
	uint8_t _pad[3];
};

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
	uint8_t methods[16];    /* bitmap of methods 0..127 it serves:
				 * method m is bit (m & 7) of methods[m >> 3] */
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
	/* v2 */
	uint32_t attach_seq;    /* attaches as this node so far (fault PRNG stream) */
	int32_t pids[SIMF_NODE_PIDS]; /* processes attached as this node (0: free) */
	/* v4: RoCE GIDs 1.. of the node: the IPv6 addresses (not link-local)
	 * of the interface that holds its IPv4 address, in the network
	 * namespace of the node's last process that read its GID table (the
	 * kernel's roce_gid_mgmt adds a GID per address of a netdev); zero
	 * entries unused. The fabric delivers datagrams to them too. */
	uint8_t ip_gids[SIMF_IP_GIDS][16];
	/* v6: topology. A CA has port 1; a switch (nodes nnodes+1 ..
	 * nnodes+nswitches) ports 1..nports and its management port 0, whose
	 * LID and state are lid / port_state above. */
	uint8_t type;           /* enum simf_node_type */
	uint8_t nports;
	uint16_t sw;            /* a switch: its index in simf_state.sw */
	char desc[64];          /* NodeDescription ("" : "uscm-sim <name>") */
	struct simf_port ports[SIMF_MAX_PORTS + 1];
	/* v9: the interface holding the node's IPv4 address (its index in
	 * that namespace), published with ip_gids: a process of the node in a
	 * namespace without that interface (a host service in the root
	 * namespace, its netdev in a container's) reports its GIDs bound to
	 * it, as the kernel's GID table holds the netdevs of every namespace
	 * and reports their ifindex. 0: none known. */
	uint32_t ip_ndev;
};

/* A switch's forwarding state, as its SMA keeps it (SubnSet by the SM). */
struct simf_switch {
	uint16_t lft_top;       /* SwitchInfo LinearFDBTop */
	uint8_t life_state;     /* SwitchInfo byte 11: LifeTimeValue, PortStateChange */
	uint8_t _pad;
	uint8_t lft[SIMF_LFT_CAP]; /* LID -> output port (0xFF: none) */
	uint64_t mft[SIMF_MFT_CAP]; /* MLID - 0xC000 -> output ports (bit p: port p) */
};

/* A fault rule: the first matching rule applies to a datagram. */
enum simf_match_qpt { SIMF_QPT_ANY = 0xFF, SIMF_QPT_RC = 0, SIMF_QPT_UC = 1, SIMF_QPT_UD = 2,
		      SIMF_QPT_MAD = 3 /* UD to QP0/QP1 */ };
/* Packet kind by BTH opcode: data = requests (SEND, RDMA WRITE, RDMA READ
 * request, atomics, and every UD datagram, MADs included); ack = what a
 * responder sends back (ACK/NAK, RDMA READ response, atomic ACK). */
enum simf_match_op { SIMF_MATCH_OP_ANY = 0, SIMF_MATCH_OP_DATA = 1, SIMF_MATCH_OP_ACK = 2 };
/* Which way across a rule's link (seen from the NODE:PORT it names): both,
 * leaving NODE by PORT, or entering NODE at PORT. */
enum simf_link_dir { SIMF_LINK_DIR_BOTH = 0, SIMF_LINK_DIR_OUT = 1, SIMF_LINK_DIR_IN = 2 };
struct simf_fault {
	uint8_t used;
	uint8_t qpt;            /* enum simf_match_qpt */
	uint8_t mgmt_class;     /* 0xFF: any (MAD rules) */
	uint8_t op;             /* enum simf_match_op (0: any) */
	uint16_t attr_id;       /* 0xFFFF: any */
	int16_t node;           /* -1: any sender, else sender node */
	uint32_t drop_ppm;      /* parts per million */
	uint32_t dup_ppm;
	uint32_t reorder_ppm;   /* hold the datagram back by reorder_ns */
	/* v7 (in what was padding): a link the datagram crosses (link=NODE:PORT,
	 * sim/simf_link.c). link_node 0: any; > 0: CA node link_node; < 0:
	 * switch -link_node (node nnodes - link_node, named sw<k>). */
	int16_t link_node;
	uint8_t link_port;
	uint8_t link_dir;       /* enum simf_link_dir */
	uint64_t delay_ns;      /* added to every matching datagram */
	uint64_t reorder_ns;
};

/* A multicast group. On IB the SA creates it (MCMemberRecord Set) and keeps
 * join_state per node; on RoCE there is no SA and a group exists as soon as
 * a QP attaches (mlid 0). QPs attach with ibv_attach_mcast (the verbs
 * drop-in: simf_mcast_attach). A datagram to a group is delivered to every
 * attached QP of every node that may receive (simf_mcast_targets). */
struct simf_mcg_qp {
	int16_t node;           /* -1: free */
	uint16_t _pad;
	uint32_t qpn;
};
struct simf_mcg {
	uint8_t used;
	uint8_t sa_created;     /* created by an SA join (IB) */
	uint8_t mtu, rate;      /* IBTA encodings */
	uint8_t sl, tclass, hop_limit, scope;
	uint8_t mgid[16];
	uint16_t mlid;          /* 0 on RoCE */
	uint16_t pkey;
	uint32_t qkey;
	uint32_t flow_label;
	uint8_t pkt_life;
	uint8_t _pad[3];
	uint8_t join_state[SIMF_MAX_NODES]; /* SA membership per node: bit 0 full,
					       1 non-member, 2 send-only non-member */
	struct simf_mcg_qp qps[SIMF_MCG_QPS];
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
	/* v2 */
	struct simf_mcg mcgs[SIMF_MAX_MCG]; /* multicast groups (struct simf_mcg) */
	uint32_t mlid_next;     /* MLID allocator (0xC000..), by the SA */
	int32_t keeper_pid;     /* the uscm-sim-sm process (also on RoCE) */
	/* v3 */
	uint32_t umad_access;   /* enum simf_umad_access (uscm-sim --umad-access) */
	int32_t uscmd_pid[SIMF_MAX_NODES]; /* node i's host service (uscmd), 0: none */
	/* v4 */
	uint32_t sm_kind;       /* enum simf_sm_kind */
	int32_t sm_node;        /* SIMF_SM_OPENSM: the node whose port the SM runs on */
	int32_t sm_pid;         /* SIMF_SM_OPENSM: the opensm process (0: none) */
	/* v6 */
	uint32_t cabled;        /* ports are linked by cables (nodes[].ports): a
				 * topology, or two nodes back to back under OpenSM */
	uint32_t nswitches;     /* switches: nodes nnodes+1 .. nnodes+nswitches */
	struct simf_switch sw[SIMF_MAX_SWITCHES];
	/* v7: packets each node's port dropped because their P_Key matched
	 * no entry of its table (GMPs on QP1) or not the receiving QP's
	 * (data): PortInfo P_KeyViolations (simf_pkey.c) */
	uint32_t pkey_violations[SIMF_MAX_NODES];
	/* v7: switches' external ports as the SM set them: the P_Key table
	 * (block 0, PartitionEnforcementCap 32 entries) and PortInfo's
	 * PartitionEnforcementInbound (bit 0) / Outbound (bit 1); bit 7: the
	 * table was set (until then it is the SMA's default, 0xFFFF alone) */
	uint16_t sw_pkeys[SIMF_MAX_SWITCHES][SIMF_MAX_PORTS + 1][SIMF_SW_PKEYS];
	uint8_t sw_penf[SIMF_MAX_SWITCHES][SIMF_MAX_PORTS + 1];
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
	void *priv;             /* simf.c's private per-handle state (v2) */
};

/* ---- P_Keys (simf_pkey.c) -------------------------------------------------- */

/* Do packets with P_Key a reach a receiver holding b (or the reverse)?
 * The same partition (low 15 bits, not 0) and at least one full member. */
int simf_pkey_match(uint16_t a, uint16_t b);
/* The first index of node n's P_Key table that matches pkey, or -1. */
int simf_pkey_index(const struct simf *f, int n, uint16_t pkey);
/* Counts a packet node n's port dropped for its P_Key; and the count. */
void simf_pkey_violation(struct simf *f, int n);
uint32_t simf_pkey_violations(const struct simf *f, int n);
/* Do the switches on the LID route from src to dlid let a packet with this
 * P_Key pass? A switch port with PartitionEnforcementInbound (packets
 * entering) or Outbound (leaving) drops a packet whose partition (low 15
 * bits) is none of its table's; such a drop counts as that switch's P_Key
 * violation. 1 on a fabric without switches, for an unrouted DLID (the
 * route decides), and for VL15 traffic (callers pass SMPs no P_Key check). */
int simf_pkey_route_ok(struct simf *f, int src, uint16_t dlid, uint16_t pkey);
/* The SMA of switch node n: port's P_Key table (SIMF_SW_PKEYS keys) and
 * its PortInfo PartitionEnforcementInbound / Outbound, as SubnSet wrote them. */
void simf_pkey_sw_table(struct simf *f, int n, int port, const uint16_t *keys);
void simf_pkey_sw_enforce(struct simf *f, int n, int port, int inbound, int outbound);

/* ---- fabric state --------------------------------------------------------- */

/* Creates D/fabric.state (and D) for `nnodes` nodes; used by uscm-sim. */
struct simf *simf_create(const char *dir, enum simf_link link, unsigned nnodes,
			 unsigned instance, uint64_t seed, const char *pcap_path);
/* Attaches to an existing fabric: dir NULL means $USCM_SIM_DIR (default
 * simf_default_dir(): /tmp/uscm-sim-<uid>). Sets self from $USCM_SIM_NODE
 * (or -1); a process attached as a node is listed in nodes[self].pids (for
 * `uscm-sim kill`) until simf_detach. NULL + errno (ENOENT: no fabric). */
struct simf *simf_attach(const char *dir);
/* Same with an explicit node (-1: none), ignoring $USCM_SIM_NODE. */
struct simf *simf_attach_node(const char *dir, int node);
const char *simf_default_dir(void);
/* Is process pid alive (not a zombie)? For reclaiming table entries. */
int simf_pid_alive(pid_t pid);
void simf_detach(struct simf *f);
void simf_lock(struct simf *f);
void simf_unlock(struct simf *f);
/* Node index by name ("node3", "sm"), by LID (via the LFT), by GID. -1 if none. */
int simf_node_by_name(const struct simf *f, const char *name);
int simf_node_by_lid(const struct simf *f, uint16_t lid);
/* The node at the other end of node n's port 1, or -1. Only a cabled
 * fabric (a topology, or two nodes back to back under an external SM; node
 * 0 is on no cable) has cables to follow; the built-in SM's default fabric
 * has none (every node reaches every other). */
int simf_neighbor(const struct simf *f, int n);
int simf_node_by_gid(const struct simf *f, const uint8_t gid[16]);
/* Where a LID-routed packet from node src to dlid arrives, as switches
 * forward it: on a cabled fabric with switches it leaves src's port 1 and
 * each switch sends it out of the port its LFT gives for dlid (a LID above
 * LinearFDBTop, an entry 0xFF, a port without cable or link: lost); it
 * arrives at the node owning dlid (a CA, or a switch's port 0), else it is
 * lost (-1). *in_port (may be NULL) gets the port it came in on. Without
 * switches, simf_node_by_lid. The built-in SM's node 0 is off the cables
 * and reaches / is reached by every node directly. */
int simf_route_lid(const struct simf *f, int src, uint16_t dlid, int *in_port);
/* Where a directed-route SMP (outgoing, D bit clear; the 256-byte MAD) sent
 * from node src arrives, walking its InitialPath hop by hop (IBTA 14.2.2;
 * DrSLID permissive; a DrDLID other than permissive is reached by LID from
 * the last hop): the node, -1 if lost. *in_port: the port it came in on
 * (hop count 0: 1 on a CA, 0 on a switch), ret_path (64 bytes, may be NULL):
 * the ReturnPath the responder reports. */
int simf_route_dr(const struct simf *f, int src, const uint8_t *smp, int *in_port, uint8_t *ret_path);
/* ---- topologies (ibsim / ibnetdiscover format) ------------------------------ */
struct simf_topo_node {
	char name[64];          /* the name in the file ("S-0002c9...", "Switch1") */
	char desc[64];
	uint64_t guid;          /* 0: the fabric's default */
	uint8_t type, nports;
	struct { int16_t peer; uint8_t peer_port; } ports[SIMF_MAX_PORTS + 1];
};
struct simf_topo {
	unsigned n, ncas, nswitches;
	struct simf_topo_node nodes[SIMF_MAX_NODES];
};
/* Parses a topology file (ibsim's format, i.e. ibnetdiscover's output:
 * "Switch N \"name\" # \"desc\"" / "Hca N \"name\"" / "Ca N ..." blocks,
 * "[p] \"peer\"[pp]" link lines, switchguid=/caguid= lines). 0 or -1 with
 * a message in err. */
int simf_topo_parse(const char *path, struct simf_topo *t, char *err, size_t errlen);
/* Generators: "fat-tree:L,S,H" (L leaf switches with H hosts each, every
 * leaf linked to each of S spine switches), "chain:S,H" (S switches in a
 * line, H hosts on each). 0 or -1 with a message. */
int simf_topo_generate(const char *spec, struct simf_topo *t, char *err, size_t errlen);
/* Writes t in ibnetdiscover's format (the guids the fabric uses). */
int simf_topo_write(const struct simf *f, const char *path);
/* Applies t to a fabric just created with t->ncas nodes: CAs become
 * node1..nodeN in file order, switches sw1..swS, cables as given. */
int simf_topo_apply(struct simf *f, const struct simf_topo *t, char *err, size_t errlen);
/* Cables node a's port pa to node b's port pb (both ends). */
void simf_cable(struct simf *f, int a, int pa, int b, int pb);
/* The GID node n sent from by its SIMF_RESV8A_SGID index (RoCE). */
const uint8_t *simf_node_sgid(const struct simf *f, int n, unsigned sgid_index);
/* Allocates a QPN on node n (>= 2). */
uint32_t simf_alloc_qpn(struct simf *f, int n);
/* SIMF_QP_PORT_BASE + qpn % SIMF_MAX_QPN. simf_alloc_qpn hands out QPNs
 * below SIMF_MAX_QPN; the verbs drop-in gives a later QP the socket of a
 * destroyed one with the QPN one SIMF_MAX_QPN higher (same port, 24-bit
 * QPNs): every QPN of a port is served by the one socket bound to it, and
 * a datagram's BTH destination QPN tells the QP. */
uint16_t simf_qp_port(uint32_t qpn);
/* The transport address of node n in network order (127.77.inst.n). */
uint32_t simf_node_addr(const struct simf *f, int n);
/* Writes D/hosts (ibacm format) from the node table. */
int simf_write_hosts(struct simf *f);
/* Link of node n up or down (down: port DOWN, every datagram to/from it is
 * dropped; up: RoCE ACTIVE at once, IB INIT until the SM's next sweep). */
int simf_set_link(struct simf *f, int n, int up);
/* The link of the cable at node n's port `port` (a --topo fabric) down or
 * up, both ends: down, both ports go Down and nothing crosses; up, they come
 * back in Init (the SM brings them Active). A switch end flags
 * PortStateChange in its SwitchInfo, which an SM's sweep looks for.
 * 0, or -1/EINVAL (no such port), ENOTCONN (no cable there). */
int simf_set_port_link(struct simf *f, int n, int port, int up);
/* The SM renumbers node n's port (IB): LID lid (free, 1..SIMF_MAX_LID),
 * as a re-sweep that gives it a new one. 0, or -1 with errno (EINVAL: no
 * such node, RoCE, a LID out of range; EADDRINUSE: another node's). */
int simf_set_lid(struct simf *f, int n, uint16_t lid);
/* Gives node n the LIDs base .. base + 2^lmc - 1 in the fabric's LID table
 * (lft: every LID of the range delivers to n, as an HCA port accepts any
 * DLID whose upper bits match its base LID), frees its old range, and sets
 * nodes[n].lid / .lmc. Lock held. 0, or -1/EINVAL (base not aligned to
 * 2^lmc or the range beyond SIMF_MAX_LID), EADDRINUSE (a LID of the range
 * is another node's): nothing changes. base 0: only the old range is freed. */
int simf_lid_range_set(struct simf_state *st, int n, uint16_t base, unsigned lmc);

/* ---- the host service (uscmd, one per node; started by uscm-sim) -------- */

/* The path of `file` in node n's directory, "<dir>/<node name>/<file>"
 * (file NULL: the directory itself), with the fabric directory resolved
 * (realpath) when it exists: "uscmd.sock" is the daemon's socket,
 * "uscmd.log" its stderr. 0, or -1/ENAMETOOLONG when it does not fit. */
int simf_uscmd_path(const struct simf *f, int n, const char *file, char *buf, size_t len);
/* Node n's uscmd pid when that process is alive and still the uscmd of
 * this fabric (its command line names the node's socket), else 0. */
pid_t simf_uscmd_pid(struct simf *f, int n);
/* Stops node n's uscmd (-1: every node's): `sig` (SIGTERM) to each, then
 * SIGKILL after grace_ms; waits until they are gone (reaping the caller's
 * children) and clears uscmd_pid. Returns how many were running. */
int simf_uscmd_stop(struct simf *f, int n, int sig, unsigned grace_ms);

/* ---- umad agents (kernel ib_mad rules; helpers over nodes[n].agents) ------ */

/* Registers *a (pid, port, qpn, class, version, methods...) on node n.
 * Fails with EBUSY when another live agent of the same (qpn, class, class
 * version[, oui]) already serves one of a's methods, ENOSPC when full.
 * Entries of dead processes are reclaimed. Returns the slot index. */
int simf_agent_add(struct simf *f, int n, const struct simf_agent *a);
void simf_agent_del(struct simf *f, int n, int slot);
/* The live agent of node n serving a request (qpn, class, version, method;
 * oui for vendor classes 0x30-0x4F, NULL otherwise): its slot, *out a copy.
 * -1 if none. simf_agent_find checks that the agent's process is alive (a
 * read of /proc); simf_agent_find_any does not: for a request whose fate is
 * the same either way (nobody answers a Send to a dead agent or to none:
 * the MAD is lost), it saves that system call on every MAD. */
int simf_agent_find_any(struct simf *f, int n, uint8_t qpn, uint8_t mgmt_class,
			uint8_t class_version, uint8_t method, const uint8_t *oui,
			struct simf_agent *out);
int simf_agent_find(struct simf *f, int n, uint8_t qpn, uint8_t mgmt_class,
		    uint8_t class_version, uint8_t method, const uint8_t *oui,
		    struct simf_agent *out);

/* ---- multicast (shared by the SA and the verbs drop-in) ------------------- */

/* Group index by MGID (mlid 0) or by MLID (mgid NULL). -1 if none. Lock held
 * or not: these take the lock themselves. */
int simf_mcast_find(struct simf *f, const uint8_t *mgid, uint16_t mlid);
/* Attaches QP qpn of node n to the group (created on RoCE or when the SA has
 * not created it yet). 0 or -1/errno (ENOSPC). Detach: 0, or -1/ENOENT. */
int simf_mcast_attach(struct simf *f, int n, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn);
int simf_mcast_detach(struct simf *f, int n, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn);
/* The (node, qpn) pairs a datagram to the group reaches (mgid or mlid as in
 * simf_mcast_find). On IB a node receives only when it joined through the SA
 * as full or non-member (join_state & 3); on RoCE every attached QP does.
 * Returns how many were written to out (at most max). */
int simf_mcast_targets(struct simf *f, const uint8_t *mgid, uint16_t mlid,
		       struct simf_mcg_qp *out, int max);
/* The same for a datagram sent by node src: on a fabric with switches
 * (their MFTs programmed by OpenSM, or by the built-in SM:
 * simf_mft_program) it reaches only the CAs the switches' MFTs send it
 * to (flooded from src's port: each switch sends it out of the ports its
 * MFT has for the MLID, never back the way it came), and src itself. */
int simf_mcast_targets_from(struct simf *f, int src, const uint8_t *mgid, uint16_t mlid,
			    struct simf_mcg_qp *out, int max);
/* Which nodes a multicast packet to mlid from src reaches through the
 * switches' MFTs: reach[n] set (SIMF_MAX_NODES entries). Lock held. */
void simf_mcast_reach(const struct simf *f, int src, uint16_t mlid, uint8_t *reach);
/* The built-in SM's MFTs (simf_mft.c): every switch's entry for the MLID
 * of each group its SA created, along one min-hop spanning tree of the
 * switches (rooted at the switch of least eccentricity) toward the
 * receiving members (join_state & 3); every other entry cleared. Called
 * after each sweep and membership change. Lock held. */
void simf_mft_program(struct simf_state *st);

/* ---- fault rules -------------------------------------------------------------- */

/* Parses one rule "drop=5%,dup=1%,delay=2ms,reorder=10%:5ms,class=0x07,
 * attr=0x10,qpt=mad|rc|uc|ud|any,op=data|ack|any,node=2" (see docs/sim.md).
 * 0, or -1 with a message in err. */
int simf_fault_parse(const char *spec, struct simf_fault *out, char *err, size_t errlen);
/* Formats a rule back into that syntax. */
void simf_fault_format(const struct simf_fault *r, char *buf, size_t len);
/* Replaces the rule table (n rules; 0 clears) or appends; bumps generation. */
int simf_fault_set(struct simf *f, const struct simf_fault *rules, int n);
int simf_fault_add(struct simf *f, const struct simf_fault *rule);

/* ---- transport -------------------------------------------------------------- */

/* A non-blocking UDP socket bound to node n's address, port `port` (0:
 * ephemeral). *bound gets the port. The fd polls/epolls like any socket. */
int simf_socket(struct simf *f, int n, uint16_t port, uint16_t *bound);
/* Sends one RoCEv2 payload (BTH..ICRC; len counts the 4 ICRC bytes, which
 * simf_send overwrites with the computed ICRC) from node `src` to (node
 * dst, port). Thread-safe. Applies link state and the fault rules (drop,
 * duplicate, delay, reorder via the delay thread), counts, and appends to
 * the fabric pcap (just before the datagram leaves). Returns len (also when a fault dropped it: as on a real
 * wire, the sender cannot tell) or -1/errno. */
ssize_t simf_send(struct simf *f, int fd, int src, int dst, uint16_t port, void *pkt, size_t len);
/* simf_send from a socket whose bound port the caller knows (sport): one
 * system call per datagram, the sendto. */
ssize_t simf_send_from(struct simf *f, int fd, uint16_t sport, int src, int dst, uint16_t port,
		       void *pkt, size_t len);
/* Receives one datagram without waiting (MSG_DONTWAIT, whatever the fd's
 * O_NONBLOCK): returns its length, *src the sending node (-1 if not from
 * this fabric), *src_port its port, or -1/errno. Checks and strips nothing. */
ssize_t simf_recv(struct simf *f, int fd, void *buf, size_t cap, int *src, uint16_t *src_port);
/* simf_recv with recvfrom's flags (0 on a blocking socket: waits). */
ssize_t simf_recv_flags(struct simf *f, int fd, void *buf, size_t cap, int *src, uint16_t *src_port,
			int flags);

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
	uint8_t resv7;          /* byte 8 bits 6:0 (IB: bits 2:0 the DLID's path bits) */
};
void simf_bth_put(uint8_t *p, const struct simf_bth *b);
void simf_bth_get(const uint8_t *p, struct simf_bth *b);
/* LMC > 0 on IB (where bits 3:1 carry no GID index): the LIDs a packet
 * travels with, as path bits of the two ends' base LIDs (LMC <= 3 exactly;
 * higher path bits are lost): resv8a bits 3:1 the SLID's, BTH byte 8 bits
 * 2:0 (IBTA reserved; zero in the fabric's capture, whose LRH shows the
 * LIDs) the DLID's. simf_bth_set_lids writes them into a built packet
 * (BTH first), simf_bth_slid / simf_bth_dlid read them back from a parsed
 * BTH (RoCE: 0). */
void simf_bth_set_lids(const struct simf *f, uint8_t *pkt, int src, uint16_t slid, int dst, uint16_t dlid);
uint16_t simf_bth_slid(const struct simf *f, const struct simf_bth *b, int src);
uint16_t simf_bth_dlid(const struct simf *f, const struct simf_bth *b, int dst);
/* RoCEv2 ICRC over the UDP payload as it would travel from node src to dst
 * (IPv4 pseudo-header from the nodes' transport addresses). */
uint32_t simf_icrc(const struct simf *f, int src, int dst, uint16_t sport, uint16_t dport,
		   const uint8_t *payload, size_t len_without_icrc);
/* The ICRC as stored: least significant byte first (like an Ethernet FCS). */
void simf_icrc_put(uint8_t *p, uint32_t icrc);
uint32_t simf_icrc_get(const uint8_t *p);
/* Reflected CRC-32 (poly 0xEDB88320) running state, no pre/post inversion. */
uint32_t simf_crc32(uint32_t state, const void *buf, size_t len);

#endif
