/*
 * rs_wire.h - the rsockets wire format (docs/rsockets.md) and its pure
 * decoders (lib/rs_wire.c): connection private data, immediate data,
 * control messages, SGL / iomap entries in the peer's byte order. No
 * verbs or rdma_cm here, so tests/fuzz/fuzz_rs_decode.c can feed them
 * bytes.
 */
#ifndef USCM_RS_WIRE_H
#define USCM_RS_WIRE_H

#include <stdint.h>

/* ---- wire format (docs/rsockets.md) ---- */
#define RS_WIRE_VERSION 1
#define RS_CONN_FLAG_NET 0x01   /* the sender's SGEs are big-endian */
#define RS_CONN_FLAG_IOMAP 0x02 /* an iomap table follows the target SGL */
#define RS_SGL_SIZE 2           /* entries in the target SGL */

/* immediate data: 3-bit opcode over 29 bits of argument */
#define RS_OP_DATA 0
#define RS_OP_WRITE 2 /* never on the wire */
#define RS_OP_SGL 4
#define RS_OP_IOMAP_SGL 6
#define RS_OP_CTRL 7
#define RS_IMM(op, arg) (((uint32_t)(op) << 29) | ((uint32_t)(arg) & 0x1fffffffu))
#define RS_IMM_OP(imm) ((uint32_t)(imm) >> 29)
#define RS_IMM_ARG(imm) ((uint32_t)(imm) & 0x1fffffffu)

#define RS_CTRL_DISCONNECT 0
#define RS_CTRL_KEEPALIVE 1
#define RS_CTRL_SHUTDOWN 2

/* an SGE as the peer sees it (16 bytes; byte order: the writer's, see
 * RS_CONN_FLAG_NET; in the connection data: big-endian) */
struct rs_wsge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* one iomap table entry (24 bytes) */
struct rs_wiomap {
	uint64_t offset;
	struct rs_wsge sge;
};

/* connection private data (REQ and REP), 40 bytes */
struct rs_wconn {
	uint8_t version;
	uint8_t flags;
	uint16_t credits; /* big-endian: the sender's receive queue size */
	uint8_t reserved[3];
	uint8_t iomap_scale; /* target iomap entries, 8-bit scaled */
	struct rs_wsge target_sgl;
	struct rs_wsge data_buf;
};

_Static_assert(sizeof(struct rs_wsge) == 16, "rs_wsge");
_Static_assert(sizeof(struct rs_wiomap) == 24, "rs_wiomap");
_Static_assert(sizeof(struct rs_wconn) == 40, "rs_wconn");

/* librdmacm's 8-bit scaled sizes (iomap_scale) */
int rs_value_to_scale(int value, int bits);
int rs_scale_to_value(int value, int bits);

/* the peer's connection data, decoded (host byte order) */
struct rs_conn_info {
	struct rs_wsge target_sgl; /* where our SGL entries go in the peer */
	struct rs_wsge data_buf;   /* the peer's first receive buffer half */
	struct rs_wsge iomap;      /* the peer's iomap table (length 0: none) */
	uint16_t credits;          /* the peer's receive queue size */
	int swap;                  /* the peer wants our SGEs byte-swapped */
};

/* Decodes REQ/REP private data; -1 if it is not an rsocket's (short,
 * another version, an empty or oversized target SGL). host_net: this host
 * is big-endian. */
int rs_wire_conn_parse(const void *pd, unsigned len, int host_net, struct rs_conn_info *out);

/* a received immediate value (host order), decoded */
struct rs_msg_info {
	uint32_t op;  /* RS_OP_* */
	uint32_t arg; /* 29 bits */
};

/* Decodes an immediate value; -1 for an opcode or control message that
 * may not come from a peer (RS_OP_WRITE, reserved opcodes, unknown
 * control values). */
int rs_wire_imm_decode(uint32_t imm, struct rs_msg_info *out);

/* An SGE / iomap entry in the peer's byte order (swap: byte-swap). */
void rs_wire_sge_order(struct rs_wsge *s, int swap);
void rs_wire_iomap_order(struct rs_wiomap *e, int swap);

#endif
