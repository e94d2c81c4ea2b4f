/*
 * usp_proto.h - the request protocol between uscm's librdmacm (daemon mode)
 * and uscmd, the host's CM service (docs/architecture.md, "The host service").
 *
 * It plays the part of the kernel's ucma ABI: the library writes a command
 * for one id and reads the answer; events arrive on the event channel. Both
 * ends run on the same host, so the structures are native-endian C structs
 * of fixed size (a frame's length is checked against its op exactly, see
 * usp_check_request). Transport: AF_UNIX SOCK_SEQPACKET, one frame per
 * message.
 *
 *   command socket   one per process: request -> reply, strictly in turn
 *   channel socket   one per rdma_event_channel: a socketpair whose other
 *                    end the library hands to the daemon (SCM_RIGHTS) in
 *                    USP_CHAN_CREATE; the daemon writes events into it, so
 *                    the channel fd is readable exactly while an event is
 *                    waiting, as the kernel's rdma_cm fd. The daemon keeps
 *                    only an AF_UNIX SOCK_SEQPACKET end whose peer is of the
 *                    client's uid (EBADF: not a socket, EINVAL: another
 *                    socket), since it writes into it as root.
 *
 * A connection over its uid's limit of connections is answered, before it
 * asks anything, with a USP_HELLO reply carrying EAGAIN, and closed.
 *
 * A client never sends a MAD: it names its ids by the handles the daemon
 * gave it, and the daemon builds every MAD itself.
 */
#ifndef USCM_LIB_USP_PROTO_H
#define USCM_LIB_USP_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>

/* 2: USP_HELLO carries the client's network namespace (an rtnetlink
 * socket made in it, SCM_RIGHTS); a version-1 client named none. */
#define USP_VERSION 2
#define USP_MAX_REQUEST 2048    /* the largest request frame */
#define USP_MAX_REPLY 65536     /* USP_STATUS text */
#define USP_PDATA_MAX 256       /* the largest private data of any CM message */
#define USP_OPT_MAX 1024        /* rdma_set_option's value */
#define USP_DEFAULT_SOCKET "/run/uscm/uscmd.sock"

enum usp_op {
	USP_HELLO = 1,
	USP_CHAN_CREATE,
	USP_CHAN_DESTROY,
	USP_CREATE_ID,
	USP_DESTROY_ID,
	USP_MIGRATE_ID,
	USP_BIND,
	USP_RESOLVE_ADDR,
	USP_RESOLVE_ROUTE,
	USP_QUERY,
	USP_SET_OPTION,
	USP_INIT_QP_ATTR,
	USP_CONNECT,
	USP_LISTEN,
	USP_ACCEPT,
	USP_REJECT,
	USP_ESTABLISH,
	USP_NOTIFY,
	USP_DISCONNECT,
	USP_SET_ECE,
	USP_GET_ECE,
	USP_JOIN_MC,
	USP_LEAVE_MC,
	USP_POST_EVENT,
	USP_STATS,
	USP_STATUS,
	USP_QP_ATTRS,
	USP_REQUEUE,
	USP_OP_MAX,
	USP_EVENT = 0x100,      /* on a channel socket */
	USP_REPLY = 0x8000,     /* | the request's op */
	/* | a request's op: the client does not wait for an answer (the
	 * daemon sends none; a failure is only counted). Only USP_ESTABLISH
	 * (the RTU, once the QP is in RTS: its failure could not be told to
	 * the application anyway); a malformed frame is answered whatever
	 * its flags. */
	USP_F_NOREPLY = 0x4000,
};

struct usp_hdr {
	uint16_t op;
	uint16_t ver;           /* USP_VERSION */
	uint32_t len;           /* the whole frame, header included */
	uint32_t seq;           /* echoed in the reply */
	uint32_t id;            /* the id handle the request is for (0: none) */
};

struct usp_reply {
	struct usp_hdr h;
	int32_t err;            /* 0, or a positive errno */
	uint32_t pad;
	/* the op's reply body follows */
};

/* What the library mirrors of a daemon id: rdma_cm_id's route and device. */
struct usp_snap {
	struct rdma_addr addr;
	struct ibv_sa_path_rec path;
	int32_t num_paths;
	uint8_t port_num;
	uint8_t has_dev;
	uint16_t pad;
	uint32_t qp_type;
	uint64_t dev_guid;      /* node GUID, network order as ibv_get_device_guid */
	char dev_name[64];
};

/* With it, SCM_RIGHTS: an AF_NETLINK / NETLINK_ROUTE socket the library
 * made in its network namespace: the daemon binds, listens and resolves
 * for the client there (lib/cma_netns.c). A HELLO without one, or with
 * another kind of fd, is refused (EPROTO / EINVAL). */
struct usp_hello { uint32_t version; uint32_t pid; };
struct usp_hello_rep { uint32_t client; uint32_t max_ids; };
/* USP_CHAN_DESTROY, USP_CHAN_CREATE's reply, USP_MIGRATE_ID (flags:
 * USP_MIGRATE_HOLD). */
struct usp_chan { uint32_t chan; uint32_t flags; };
/* USP_MIGRATE_ID: the id's events go to chan from now on, the ones waiting
 * in uscmd for room included. With USP_MIGRATE_HOLD, when the old channel
 * has frames unread, uscmd also writes no event of the client into any
 * channel until a USP_REQUEUE with end set (the reply, a usp_int, says
 * whether it holds: 1, or 0 when the old channel was empty):
 * the library reads what the old channel holds meanwhile and gives it back
 * with USP_REQUEUE (the migrated id's frames to the new channel, the rest
 * to the old one), so that the id's events move as the kernel's
 * ucma_migrate_id moves them, in order. */
#define USP_MIGRATE_HOLD 1u
struct usp_create_id { uint32_t chan; uint32_t ps; uint32_t qp_type; uint32_t pad; };
struct usp_handle { uint32_t handle; uint32_t pad; };
struct usp_addr { struct sockaddr_storage addr; };
struct usp_resolve_addr {
	struct sockaddr_storage src, dst;
	int32_t has_src;
	int32_t timeout_ms;
};
struct usp_int { int32_t v; int32_t pad; };
struct usp_set_option {
	int32_t level, optname;
	uint32_t optlen, pad;
	uint8_t optval[USP_OPT_MAX];    /* optlen bytes are sent */
};
struct usp_qp_attr_rep { struct ibv_qp_attr attr; int32_t mask; int32_t pad; };
/* rdma_connect / rdma_accept: rdma_conn_param with its private data, and
 * the QP the library owns (the daemon never sees it). */
struct usp_conn {
	uint8_t has_param;
	uint8_t resp_res, init_depth, flow_control, retry_count, rnr_retry_count, srq;
	uint8_t qp_uc;          /* the QP is UC */
	uint32_t qp_num;
	uint32_t pdata_len;
	uint8_t pdata[USP_PDATA_MAX];   /* pdata_len bytes are sent */
};
struct usp_reject {
	uint32_t ece;           /* rdma_reject_ece */
	uint32_t pdata_len;
	uint8_t pdata[USP_PDATA_MAX];
};
struct usp_ece { struct ibv_ece ece; };
struct usp_join {
	struct sockaddr_storage addr;
	uint32_t flags;
	uint32_t pad;
	uint64_t cookie;        /* comes back in the MULTICAST_* event */
};
struct usp_post_event { int32_t event; int32_t status; uint64_t arg; };

/* QP attributes for INIT, RTR and RTS: what USP_QP_ATTRS answers (after
 * applying an accept's rdma_conn_param) and what a CONNECT_RESPONSE event
 * carries, so moving the QP costs no further round trip to the daemon. */
struct usp_qp_attrs {
	struct {
		struct ibv_qp_attr attr;
		int32_t mask;
		int32_t err;    /* 0, or why this state's attributes are missing */
	} s[3];                 /* INIT, RTR, RTS */
	uint32_t valid;
	/* the responder resources / initiator depth they were computed with
	 * (CONNECT_REQUEST: an accept that asks for no less may use them) */
	uint8_t resp_res, init_depth;
	uint16_t pad;
};

/* An event frame on a channel socket. h.id is the id the event is for (for
 * CONNECT_REQUEST: the new id, which the library creates on receipt). */
struct usp_event {
	struct usp_hdr h;
	int32_t event;
	int32_t status;
	uint32_t listen_id;
	uint32_t pad;
	uint64_t arg;           /* USER: param.arg; MULTICAST_*: the join's cookie */
	struct {
		uint8_t resp_res, init_depth, flow_control, retry_count;
		uint8_t rnr_retry_count, srq;
		uint16_t pad;
		uint32_t qp_num;
	} conn;
	struct {
		struct ibv_ah_attr ah_attr;
		uint32_t qp_num, qkey;
	} ud;
	struct ibv_ece ece;     /* CONNECT_REQUEST / ESTABLISHED: the peer's */
	uint32_t ud_event;      /* param.ud is meaningful */
	uint32_t pdata_len;
	struct usp_snap snap;   /* the id after the event */
	struct usp_qp_attrs qp; /* CONNECT_RESPONSE, RC CONNECT_REQUEST: INIT/RTR/RTS */
	uint8_t pdata[USP_PDATA_MAX];
};

/* USP_REQUEUE (only while a USP_MIGRATE_HOLD holds): ev, a frame the
 * library read from a channel, is written to channel chan ahead of every
 * event uscmd held meanwhile, in the order given. end: no frame; the hold
 * ends and the held events follow. A frame for an id the client no longer
 * has is dropped. */
struct usp_requeue {
	uint32_t chan;
	uint32_t end;
	struct usp_event ev;
};

/* The body size of a request op; for the variable ones (a trailing array),
 * the fixed part (*var = 1). -1 for an unknown op. */
long usp_req_size(uint16_t op, int *var);

/* Checks a received request frame of n bytes: header, version, op, exact
 * length (a variable op: fixed part + its own count, which must be within
 * bounds). 0, or a positive errno: EPROTO (bad header / version / op),
 * EMSGSIZE (longer than it says or than the op allows), EBADMSG
 * (truncated, or an inner count out of bounds). Never reads past n. */
int usp_check_request(const void *buf, size_t n);

/* Whether event frame f is an event of the id with this handle: a
 * connection request is its listener's (as the kernel's event queue counts
 * it). What rdma_migrate_id moves, on both sides of the socket. */
int usp_event_of(const struct usp_event *f, uint32_t handle);

/* A frame's header, filled for op, body size len, seq, id. */
void usp_hdr_init(struct usp_hdr *h, uint16_t op, size_t len, uint32_t seq, uint32_t id);

const char *usp_op_name(uint16_t op);

#endif
