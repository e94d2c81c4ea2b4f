/*
 * libFuzzer target: the rsockets wire decoders (lib/rs_wire.c) — REQ/REP
 * connection private data, immediate values (opcode + argument, control
 * messages), SGE / iomap entries in the peer's byte order. Invariants:
 * accepted connection data has a target SGL of 1..64 entries and an iomap
 * table right after it; a decoded immediate re-encodes to itself and is
 * never RS_OP_WRITE or a reserved opcode; swapping an entry twice gives it
 * back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/rs_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rs_conn_info ci;
	size_t off;

	for (int host_net = 0; host_net < 2; host_net++) {
		if (rs_wire_conn_parse(data, (unsigned)size, host_net, &ci) == 0) {
			if (size < sizeof(struct rs_wconn) || data[0] != RS_WIRE_VERSION)
				abort();
			if (!ci.target_sgl.length || ci.target_sgl.length > 64)
				abort();
			if ((data[1] & RS_CONN_FLAG_IOMAP) &&
			    ci.iomap.addr != ci.target_sgl.addr + 16ull * ci.target_sgl.length)
				abort();
			if (!(data[1] & RS_CONN_FLAG_IOMAP) && (ci.iomap.addr || ci.iomap.length))
				abort();
			if (ci.swap != (!!(data[1] & RS_CONN_FLAG_NET) != host_net))
				abort();
		}
	}
	/* after the connection data: immediate values, 4 bytes each */
	off = size < sizeof(struct rs_wconn) ? 0 : sizeof(struct rs_wconn);
	for (; off + 4 <= size && off < sizeof(struct rs_wconn) + 64 * 4; off += 4) {
		uint32_t imm;
		struct rs_msg_info mi;

		memcpy(&imm, data + off, 4);
		if (rs_wire_imm_decode(imm, &mi) == 0) {
			if (RS_IMM(mi.op, mi.arg) != imm || mi.op == RS_OP_WRITE || mi.op == 1 ||
			    mi.op == 3 || mi.op == 5)
				abort();
			if (mi.op == RS_OP_CTRL && mi.arg > RS_CTRL_SHUTDOWN)
				abort();
		} else if (mi.op == RS_OP_DATA || mi.op == RS_OP_SGL || mi.op == RS_OP_IOMAP_SGL) {
			abort();
		}
	}
	/* an iomap entry (and its SGE) from the first 24 bytes */
	if (size >= sizeof(struct rs_wiomap)) {
		struct rs_wiomap e, o;

		memcpy(&e, data, sizeof(e));
		o = e;
		rs_wire_iomap_order(&e, 1);
		rs_wire_iomap_order(&e, 1);
		if (memcmp(&e, &o, sizeof(e)))
			abort();
		rs_wire_sge_order(&e.sge, 0);
		if (memcmp(&e, &o, sizeof(e)))
			abort();
	}
	/* the 8-bit scale round-trips for every value it can encode */
	if (size >= 1) {
		int v = rs_scale_to_value(data[0], 8);
		if (rs_value_to_scale(v, 8) != data[0] && data[0] != 0x80)
			abort();
	}
	return 0;
}
