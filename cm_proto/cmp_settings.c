/*
 * cmp_settings.c - engine defaults (the kernel CM / CMA's), the IBTA time
 * conversions, names, and trace record printers.
 */
#include <inttypes.h>

#include "cm_proto/cmp_engine.h"

void cmp_settings_default(struct cmp_settings *s)
{
	*s = (struct cmp_settings){
		.cm_response_timeout = 20, /* CMA_CM_RESPONSE_TIMEOUT */
		.max_cm_retries = 15,      /* CMA_MAX_CM_RETRIES */
		.mra_service_timeout = 24, /* CMA_CM_MRA_SETTING */
		.packet_life_time = 16,    /* CMA_IBOE_PACKET_LIFETIME */
		.local_ca_ack_delay = 15,
		.max_timer_ns = 0,
		.timewait_ns = 0,
		.sidr_timeout_ns = (cmp_time)(1u << (20 - 8)) * 1000000u,
		.sidr_retries = 15,
		.default_backlog = 1024,
		.max_conns = 1u << 20,
		.max_pending = 4096,
		.mra_on_duplicate_req = 1,
		.destroy_retries_dreq = 0, /* cm_destroy_id: no DREQ retries */
		.local_ca_guid = 0,
		.seed = 0,
		.mem = *cmp_mem_default(),
	};
}

cmp_time cmp_iba_time_ns(unsigned t)
{
	if (t > 31)
		t = 31;
	return (cmp_time)4096 << t;
}

uint8_t cmp_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time)
{
	/* IBTA: local ACK timeout >= 2 * packet lifetime + CA ACK delay, in
	 * exponent arithmetic, as the kernel's cm_ack_timeout() rounds it. */
	int t = packet_life_time + 1;

	if (t >= ca_ack_delay)
		t += (ca_ack_delay >= t - 1);
	else
		t = ca_ack_delay + (t >= ca_ack_delay - 1);
	return (uint8_t)(t > 31 ? 31 : t);
}

const char *cmp_state_str(enum cmp_state s)
{
	static const char *const names[CMP_STATE_COUNT] = {
		[CMP_IDLE] = "IDLE",
		[CMP_REQ_SENT] = "REQ_SENT",
		[CMP_REQ_RCVD] = "REQ_RCVD",
		[CMP_MRA_REQ_SENT] = "MRA_REQ_SENT",
		[CMP_MRA_REQ_RCVD] = "MRA_REQ_RCVD",
		[CMP_REP_SENT] = "REP_SENT",
		[CMP_REP_RCVD] = "REP_RCVD",
		[CMP_MRA_REP_SENT] = "MRA_REP_SENT",
		[CMP_MRA_REP_RCVD] = "MRA_REP_RCVD",
		[CMP_ESTABLISHED] = "ESTABLISHED",
		[CMP_DREQ_SENT] = "DREQ_SENT",
		[CMP_DREQ_RCVD] = "DREQ_RCVD",
		[CMP_TIMEWAIT] = "TIMEWAIT",
		[CMP_SIDR_REQ_SENT] = "SIDR_REQ_SENT",
		[CMP_SIDR_REQ_RCVD] = "SIDR_REQ_RCVD",
	};
	return (unsigned)s < CMP_STATE_COUNT ? names[s] : "?";
}

const char *cmp_event_str(enum cmp_event_type t)
{
	switch (t) {
	case CMP_EV_REQ_RECEIVED: return "REQ_RECEIVED";
	case CMP_EV_REQ_ERROR: return "REQ_ERROR";
	case CMP_EV_REP_RECEIVED: return "REP_RECEIVED";
	case CMP_EV_REP_ERROR: return "REP_ERROR";
	case CMP_EV_RTU_RECEIVED: return "RTU_RECEIVED";
	case CMP_EV_USER_ESTABLISHED: return "USER_ESTABLISHED";
	case CMP_EV_MRA_RECEIVED: return "MRA_RECEIVED";
	case CMP_EV_REJ_RECEIVED: return "REJ_RECEIVED";
	case CMP_EV_DREQ_RECEIVED: return "DREQ_RECEIVED";
	case CMP_EV_DREQ_ERROR: return "DREQ_ERROR";
	case CMP_EV_DREP_RECEIVED: return "DREP_RECEIVED";
	case CMP_EV_TIMEWAIT_EXIT: return "TIMEWAIT_EXIT";
	case CMP_EV_SIDR_REQ_RECEIVED: return "SIDR_REQ_RECEIVED";
	case CMP_EV_SIDR_REQ_ERROR: return "SIDR_REQ_ERROR";
	case CMP_EV_SIDR_REP_RECEIVED: return "SIDR_REP_RECEIVED";
	case CMP_EV_LAP_RECEIVED: return "LAP_RECEIVED";
	}
	return "?";
}

void cmp_trace_print(FILE *out, const struct cmp_trace_rec *r)
{
	fprintf(out, "%" PRIu64 ".%09" PRIu64 " cm %08x/%08x %s -> %s: %s\n",
		r->time / 1000000000u, r->time % 1000000000u, r->local_id, r->remote_id,
		cmp_state_str(r->from), cmp_state_str(r->to), r->cause);
}

void cmp_trace_json(FILE *out, const struct cmp_trace_rec *r)
{
	fprintf(out,
		"{\"time_ns\": %" PRIu64 ", \"name\": \"cm:state_updated\", \"data\": "
		"{\"local_id\": %u, \"remote_id\": %u, \"old\": \"%s\", \"new\": \"%s\", "
		"\"trigger\": \"%s\"}}\n",
		r->time, r->local_id, r->remote_id, cmp_state_str(r->from), cmp_state_str(r->to),
		r->cause);
}
