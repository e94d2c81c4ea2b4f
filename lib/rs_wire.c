/*
 * rs_wire.c - decoders of the rsockets wire format (docs/rsockets.md):
 * pure functions over bytes, used by rs_stream.c and fed by
 * tests/fuzz/fuzz_rs_decode.c.
 */
#include <byteswap.h>
#include <endian.h>
#include <string.h>

#include "rs_wire.h"

int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

int rs_wire_conn_parse(const void *pd, unsigned len, int host_net, struct rs_conn_info *out)
{
	struct rs_wconn c;

	if (!pd || len < sizeof(c))
		return -1;
	memcpy(&c, pd, sizeof(c));
	if (c.version != RS_WIRE_VERSION)
		return -1;
	memset(out, 0, sizeof(*out));
	out->target_sgl.addr = be64toh(c.target_sgl.addr);
	out->target_sgl.length = be32toh(c.target_sgl.length);
	out->target_sgl.key = be32toh(c.target_sgl.key);
	if (!out->target_sgl.length || out->target_sgl.length > 64)
		return -1;
	out->swap = !!(c.flags & RS_CONN_FLAG_NET) != !!host_net;
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		out->iomap.addr = out->target_sgl.addr + sizeof(struct rs_wsge) * out->target_sgl.length;
		out->iomap.length = (uint32_t)rs_scale_to_value(c.iomap_scale, 8);
		out->iomap.key = out->target_sgl.key;
	}
	out->data_buf.addr = be64toh(c.data_buf.addr);
	out->data_buf.length = be32toh(c.data_buf.length);
	out->data_buf.key = be32toh(c.data_buf.key);
	out->credits = be16toh(c.credits);
	return 0;
}

int rs_wire_imm_decode(uint32_t imm, struct rs_msg_info *out)
{
	out->op = RS_IMM_OP(imm);
	out->arg = RS_IMM_ARG(imm);
	switch (out->op) {
	case RS_OP_DATA:
	case RS_OP_SGL:
	case RS_OP_IOMAP_SGL:
		return 0;
	case RS_OP_CTRL:
		return out->arg == RS_CTRL_DISCONNECT || out->arg == RS_CTRL_SHUTDOWN ||
				       out->arg == RS_CTRL_KEEPALIVE
			       ? 0
			       : -1;
	default:
		return -1;
	}
}

void rs_wire_sge_order(struct rs_wsge *s, int swap)
{
	if (!swap)
		return;
	s->addr = bswap_64(s->addr);
	s->key = bswap_32(s->key);
	s->length = bswap_32(s->length);
}

void rs_wire_iomap_order(struct rs_wiomap *e, int swap)
{
	if (!swap)
		return;
	e->offset = bswap_64(e->offset);
	rs_wire_sge_order(&e->sge, swap);
}
