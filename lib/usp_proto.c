/*
 * usp_proto.c - frame checks of the library <-> uscmd request protocol.
 * The daemon runs every received frame through usp_check_request before it
 * looks at a single field (tests/fuzz/fuzz_usp_request.c fuzzes it).
 */
#include "lib/usp_proto.h"

#include <errno.h>
#include <string.h>

/* One row per request op: its name, body size, and for ops with a trailing
 * array, where the array's count is and how large it may be. */
struct usp_row {
	const char *name;
	size_t body;            /* full body size (the array at its maximum) */
	size_t fixed;           /* body without the trailing array; == body if none */
	size_t count_off;       /* offset of the uint32 count in the body */
	size_t max_count;
};

#define ROW(op, nm, type) [op] = { nm, sizeof(type), sizeof(type), 0, 0 }
#define ROW0(op, nm) [op] = { nm, 0, 0, 0, 0 }
#define VROW(op, nm, type, arr, cnt, max) \
	[op] = { nm, sizeof(type), offsetof(type, arr), offsetof(type, cnt), max }

static const struct usp_row rows[USP_OP_MAX] = {
	ROW(USP_HELLO, "hello", struct usp_hello),
	ROW0(USP_CHAN_CREATE, "chan_create"),
	ROW(USP_CHAN_DESTROY, "chan_destroy", struct usp_chan),
	ROW(USP_CREATE_ID, "create_id", struct usp_create_id),
	ROW0(USP_DESTROY_ID, "destroy_id"),
	ROW(USP_MIGRATE_ID, "migrate_id", struct usp_chan),
	ROW(USP_BIND, "bind", struct usp_addr),
	ROW(USP_RESOLVE_ADDR, "resolve_addr", struct usp_resolve_addr),
	ROW(USP_RESOLVE_ROUTE, "resolve_route", struct usp_int),
	ROW0(USP_QUERY, "query"),
	VROW(USP_SET_OPTION, "set_option", struct usp_set_option, optval, optlen, USP_OPT_MAX),
	ROW(USP_INIT_QP_ATTR, "init_qp_attr", struct usp_int),
	VROW(USP_CONNECT, "connect", struct usp_conn, pdata, pdata_len, USP_PDATA_MAX),
	ROW(USP_LISTEN, "listen", struct usp_int),
	VROW(USP_ACCEPT, "accept", struct usp_conn, pdata, pdata_len, USP_PDATA_MAX),
	VROW(USP_REJECT, "reject", struct usp_reject, pdata, pdata_len, USP_PDATA_MAX),
	ROW0(USP_ESTABLISH, "establish"),
	ROW(USP_NOTIFY, "notify", struct usp_int),
	ROW0(USP_DISCONNECT, "disconnect"),
	ROW(USP_SET_ECE, "set_ece", struct usp_ece),
	ROW0(USP_GET_ECE, "get_ece"),
	ROW(USP_JOIN_MC, "join_mc", struct usp_join),
	ROW(USP_LEAVE_MC, "leave_mc", struct usp_addr),
	ROW(USP_POST_EVENT, "post_event", struct usp_post_event),
	ROW0(USP_STATS, "stats"),
	ROW0(USP_STATUS, "status"),
	VROW(USP_QP_ATTRS, "qp_attrs", struct usp_conn, pdata, pdata_len, USP_PDATA_MAX),
	ROW(USP_REQUEUE, "requeue", struct usp_requeue),
};

const char *usp_op_name(uint16_t op)
{
	op &= (uint16_t)~(USP_REPLY | USP_F_NOREPLY);
	if (op == USP_EVENT)
		return "event";
	if (op == 0 || op >= USP_OP_MAX)
		return "?";
	return rows[op].name;
}

long usp_req_size(uint16_t op, int *var)
{
	if (op == 0 || op >= USP_OP_MAX)
		return -1;
	if (var)
		*var = rows[op].fixed != rows[op].body;
	return (long)rows[op].fixed;
}

int usp_check_request(const void *buf, size_t n)
{
	struct usp_hdr h;
	const struct usp_row *r;
	size_t body;

	if (n < sizeof(h))
		return EBADMSG;
	memcpy(&h, buf, sizeof(h));
	/* only the RTU request may go unanswered (usp_proto.h) */
	if ((h.op & USP_F_NOREPLY) && h.op != (USP_ESTABLISH | USP_F_NOREPLY))
		return EPROTO;
	h.op &= (uint16_t)~USP_F_NOREPLY;
	if (h.ver != USP_VERSION || h.op == 0 || h.op >= USP_OP_MAX)
		return EPROTO;
	if (h.len != n)
		return h.len > n ? EBADMSG : EMSGSIZE;
	if (n > USP_MAX_REQUEST)
		return EMSGSIZE;
	r = &rows[h.op];
	body = n - sizeof(h);
	if (r->fixed == r->body) {
		if (body != r->body)
			return body < r->body ? EBADMSG : EMSGSIZE;
		return 0;
	}
	/* fixed part + count bytes of the trailing array, exactly */
	{
		uint32_t count;

		if (body < r->fixed)
			return EBADMSG;
		memcpy(&count, (const uint8_t *)buf + sizeof(h) + r->count_off, sizeof(count));
		if (count > r->max_count)
			return EMSGSIZE;
		if (body != r->fixed + count)
			return body < r->fixed + count ? EBADMSG : EMSGSIZE;
	}
	return 0;
}

void usp_hdr_init(struct usp_hdr *h, uint16_t op, size_t len, uint32_t seq, uint32_t id)
{
	h->op = op;
	h->ver = USP_VERSION;
	h->len = (uint32_t)len;
	h->seq = seq;
	h->id = id;
}

int usp_event_of(const struct usp_event *f, uint32_t handle)
{
	return f->event == RDMA_CM_EVENT_CONNECT_REQUEST ? f->listen_id == handle : f->h.id == handle;
}
