/*
 * libFuzzer target: uscmd's request decoder (lib/usp_proto.c). Every frame
 * a client sends goes through usp_check_request before the daemon reads a
 * field; the daemon then copies the body into the op's struct
 * (memcpy(&x, body, n - header)), so an accepted frame must fit that struct
 * exactly as the op says. The sizes are derived here again, from the
 * structs, not from the decoder's table.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/usp_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* (fixed part, whole struct, offset of the count) of each op; count_off
 * (size_t)-1 for ops without a trailing array */
static int expect(uint16_t op, size_t *fixed, size_t *whole, size_t *count_off, size_t *max)
{
	*count_off = (size_t)-1;
	*max = 0;
#define FIX(o, t) case o: *fixed = *whole = sizeof(t); return 0
#define NONE(o) case o: *fixed = *whole = 0; return 0
#define VAR(o, t, arr, cnt, m) \
	case o: *fixed = offsetof(t, arr); *whole = sizeof(t); *count_off = offsetof(t, cnt); *max = m; return 0
	switch (op) {
	FIX(USP_HELLO, struct usp_hello);
	NONE(USP_CHAN_CREATE);
	FIX(USP_CHAN_DESTROY, struct usp_chan);
	FIX(USP_CREATE_ID, struct usp_create_id);
	NONE(USP_DESTROY_ID);
	FIX(USP_MIGRATE_ID, struct usp_chan);
	FIX(USP_BIND, struct usp_addr);
	FIX(USP_RESOLVE_ADDR, struct usp_resolve_addr);
	FIX(USP_RESOLVE_ROUTE, struct usp_int);
	NONE(USP_QUERY);
	VAR(USP_SET_OPTION, struct usp_set_option, optval, optlen, USP_OPT_MAX);
	FIX(USP_INIT_QP_ATTR, struct usp_int);
	VAR(USP_CONNECT, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	FIX(USP_LISTEN, struct usp_int);
	VAR(USP_ACCEPT, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	VAR(USP_REJECT, struct usp_reject, pdata, pdata_len, USP_PDATA_MAX);
	NONE(USP_ESTABLISH);
	FIX(USP_NOTIFY, struct usp_int);
	NONE(USP_DISCONNECT);
	FIX(USP_SET_ECE, struct usp_ece);
	NONE(USP_GET_ECE);
	FIX(USP_JOIN_MC, struct usp_join);
	FIX(USP_LEAVE_MC, struct usp_addr);
	FIX(USP_POST_EVENT, struct usp_post_event);
	NONE(USP_STATS);
	NONE(USP_STATUS);
	VAR(USP_QP_ATTRS, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	default:
		return -1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes: ASan catches any read past it */
	uint8_t *f = malloc(size ? size : 1);
	struct usp_hdr h;
	size_t fixed, whole, coff, max;
	int rc;

	memcpy(f, data, size);
	rc = usp_check_request(f, size);
	if (rc != 0 && rc != EPROTO && rc != EMSGSIZE && rc != EBADMSG)
		abort();
	if (rc == 0) {
		if (size < sizeof(h))
			abort();
		memcpy(&h, f, sizeof(h));
		/* only the RTU request may carry USP_F_NOREPLY */
		if ((h.op & USP_F_NOREPLY) && h.op != (USP_ESTABLISH | USP_F_NOREPLY))
			abort();
		h.op &= (uint16_t)~USP_F_NOREPLY;
		if (h.ver != USP_VERSION || h.len != size || size > USP_MAX_REQUEST)
			abort();
		if (expect(h.op, &fixed, &whole, &coff, &max) < 0)
			abort();
		if (coff == (size_t)-1) {
			if (size - sizeof(h) != whole)
				abort();
		} else {
			uint32_t count;

			memcpy(&count, f + sizeof(h) + coff, sizeof(count));
			if (count > max || size - sizeof(h) != fixed + count || size - sizeof(h) > whole)
				abort();
		}
		/* what the daemon does next must stay inside its struct */
		{
			uint8_t body[sizeof(struct usp_set_option) + sizeof(struct usp_conn)];

			if (size - sizeof(h) > sizeof(body))
				abort();
			memcpy(body, f + sizeof(h), size - sizeof(h));
		}
		if (strcmp(usp_op_name(h.op), "?") == 0)
			abort();
	}
	free(f);
	return 0;
}
