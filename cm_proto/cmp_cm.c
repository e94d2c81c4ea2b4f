/*
 * cmp_cm.c - CM MAD codec: the layouts built from cmp_cm.h's row lists, and
 * the rules the tables cannot express (enumerations, length fields).
 */
#include "cm_proto/cmp_cm.h"

#include <string.h>

#define CMP_ROW_TYPE struct cmp_cm_cpi
static const struct cmp_field cpi_rows[] = { CMP_TABLE_ROWS(CMP_CM_CPI_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_req
static const struct cmp_field req_rows[] = { CMP_TABLE_ROWS(CMP_REQ_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_mra
static const struct cmp_field mra_rows[] = { CMP_TABLE_ROWS(CMP_MRA_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_rej
static const struct cmp_field rej_rows[] = { CMP_TABLE_ROWS(CMP_REJ_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_rep
static const struct cmp_field rep_rows[] = { CMP_TABLE_ROWS(CMP_REP_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_rtu
static const struct cmp_field rtu_rows[] = { CMP_TABLE_ROWS(CMP_RTU_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_dreq
static const struct cmp_field dreq_rows[] = { CMP_TABLE_ROWS(CMP_DREQ_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_drep
static const struct cmp_field drep_rows[] = { CMP_TABLE_ROWS(CMP_DREP_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_lap
static const struct cmp_field lap_rows[] = { CMP_TABLE_ROWS(CMP_LAP_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_apr
static const struct cmp_field apr_rows[] = { CMP_TABLE_ROWS(CMP_APR_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_sidr_req
static const struct cmp_field sidr_req_rows[] = { CMP_TABLE_ROWS(CMP_SIDR_REQ_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct cmp_cm_sidr_rep
static const struct cmp_field sidr_rep_rows[] = { CMP_TABLE_ROWS(CMP_SIDR_REP_FIELDS) };
#undef CMP_ROW_TYPE

#define L(name, T, rows) CMP_LAYOUT(name, T, rows, CMP_CM_DATA_SIZE)
static const struct cmp_layout cpi_layout = L("ClassPortInfo", struct cmp_cm_cpi, cpi_rows);
static const struct cmp_layout req_layout = L("REQ", struct cmp_cm_req, req_rows);
static const struct cmp_layout mra_layout = L("MRA", struct cmp_cm_mra, mra_rows);
static const struct cmp_layout rej_layout = L("REJ", struct cmp_cm_rej, rej_rows);
static const struct cmp_layout rep_layout = L("REP", struct cmp_cm_rep, rep_rows);
static const struct cmp_layout rtu_layout = L("RTU", struct cmp_cm_rtu, rtu_rows);
static const struct cmp_layout dreq_layout = L("DREQ", struct cmp_cm_dreq, dreq_rows);
static const struct cmp_layout drep_layout = L("DREP", struct cmp_cm_drep, drep_rows);
static const struct cmp_layout lap_layout = L("LAP", struct cmp_cm_lap, lap_rows);
static const struct cmp_layout apr_layout = L("APR", struct cmp_cm_apr, apr_rows);
static const struct cmp_layout sidr_req_layout = L("SIDR_REQ", struct cmp_cm_sidr_req, sidr_req_rows);
static const struct cmp_layout sidr_rep_layout = L("SIDR_REP", struct cmp_cm_sidr_rep, sidr_rep_rows);
#undef L

const uint16_t cmp_cm_attrs[] = {
	UMAD_ATTR_CLASS_PORT_INFO, UMAD_CM_ATTR_REQ, UMAD_CM_ATTR_MRA, UMAD_CM_ATTR_REJ,
	UMAD_CM_ATTR_REP, UMAD_CM_ATTR_RTU, UMAD_CM_ATTR_DREQ, UMAD_CM_ATTR_DREP,
	UMAD_CM_ATTR_SIDR_REQ, UMAD_CM_ATTR_SIDR_REP, UMAD_CM_ATTR_LAP, UMAD_CM_ATTR_APR, 0,
};

const struct cmp_layout *cmp_cm_layout(uint16_t attr_id)
{
	switch (attr_id) {
	case UMAD_ATTR_CLASS_PORT_INFO: return &cpi_layout;
	case UMAD_CM_ATTR_REQ: return &req_layout;
	case UMAD_CM_ATTR_MRA: return &mra_layout;
	case UMAD_CM_ATTR_REJ: return &rej_layout;
	case UMAD_CM_ATTR_REP: return &rep_layout;
	case UMAD_CM_ATTR_RTU: return &rtu_layout;
	case UMAD_CM_ATTR_DREQ: return &dreq_layout;
	case UMAD_CM_ATTR_DREP: return &drep_layout;
	case UMAD_CM_ATTR_LAP: return &lap_layout;
	case UMAD_CM_ATTR_APR: return &apr_layout;
	case UMAD_CM_ATTR_SIDR_REQ: return &sidr_req_layout;
	case UMAD_CM_ATTR_SIDR_REP: return &sidr_rep_layout;
	default: return NULL;
	}
}

const char *cmp_cm_attr_str(uint16_t attr_id)
{
	const struct cmp_layout *l = cmp_cm_layout(attr_id);

	if (l)
		return l->name;
	switch (attr_id) {
	case UMAD_CM_ATTR_SAP: return "SAP";
	case UMAD_CM_ATTR_SPR: return "SPR";
	default: return "attr?";
	}
}

/* IBTA table 109 / ib_cm.h. */
static const char *const rej_reasons[] = {
	[1] = "no QP", [2] = "no EEC", [3] = "no resources", [4] = "timeout",
	[5] = "unsupported request", [6] = "invalid comm ID",
	[7] = "invalid comm instance", [8] = "invalid service ID",
	[9] = "invalid transport type", [10] = "stale connection",
	[11] = "RDC does not exist", [12] = "invalid GID", [13] = "invalid LID",
	[14] = "invalid SL", [15] = "invalid traffic class",
	[16] = "invalid hop limit", [17] = "invalid packet rate",
	[18] = "invalid alternate GID", [19] = "invalid alternate LID",
	[20] = "invalid alternate SL", [21] = "invalid alternate traffic class",
	[22] = "invalid alternate hop limit", [23] = "invalid alternate packet rate",
	[24] = "port CM redirect", [25] = "port redirect", [26] = "invalid MTU",
	[27] = "insufficient responder resources", [28] = "consumer defined",
	[29] = "invalid RNR retry", [30] = "duplicate local comm ID",
	[31] = "invalid class version", [32] = "invalid flow label",
	[33] = "invalid alternate flow label", [35] = "vendor option not supported",
};

uint32_t cmp_cm_local_id(const struct cmp_cm_msg *m)
{
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ: return m->u.req.local_comm_id;
	case UMAD_CM_ATTR_MRA: return m->u.mra.local_comm_id;
	case UMAD_CM_ATTR_REJ: return m->u.rej.local_comm_id;
	case UMAD_CM_ATTR_REP: return m->u.rep.local_comm_id;
	case UMAD_CM_ATTR_RTU: return m->u.rtu.local_comm_id;
	case UMAD_CM_ATTR_DREQ: return m->u.dreq.local_comm_id;
	case UMAD_CM_ATTR_DREP: return m->u.drep.local_comm_id;
	case UMAD_CM_ATTR_LAP: return m->u.lap.local_comm_id;
	case UMAD_CM_ATTR_APR: return m->u.apr.local_comm_id;
	case UMAD_CM_ATTR_SIDR_REQ: return m->u.sidr_req.request_id;
	default: return 0; /* SIDR_REP, ClassPortInfo */
	}
}

uint32_t cmp_cm_remote_id(const struct cmp_cm_msg *m)
{
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_MRA: return m->u.mra.remote_comm_id;
	case UMAD_CM_ATTR_REJ: return m->u.rej.remote_comm_id;
	case UMAD_CM_ATTR_REP: return m->u.rep.remote_comm_id;
	case UMAD_CM_ATTR_RTU: return m->u.rtu.remote_comm_id;
	case UMAD_CM_ATTR_DREQ: return m->u.dreq.remote_comm_id;
	case UMAD_CM_ATTR_DREP: return m->u.drep.remote_comm_id;
	case UMAD_CM_ATTR_LAP: return m->u.lap.remote_comm_id;
	case UMAD_CM_ATTR_APR: return m->u.apr.remote_comm_id;
	case UMAD_CM_ATTR_SIDR_REP: return m->u.sidr_rep.request_id;
	default: return 0; /* REQ, SIDR_REQ, ClassPortInfo */
	}
}

const char *cmp_cm_rej_reason_str(uint16_t reason)
{
	if (reason < sizeof(rej_reasons) / sizeof(rej_reasons[0]) && rej_reasons[reason])
		return rej_reasons[reason];
	return "unknown reason";
}

static void reserved_cb(void *ctx, const struct cmp_field *f, uint64_t v)
{
	cmp_diag_add(ctx, CMP_DIAG_WARN, CMP_E_RESERVED, CMP_MAD_HDR_SIZE + f->byte, f->bit,
		     f->name, "reserved bits at byte %u bit %u (%u wide) are not zero (0x%llx)",
		     CMP_MAD_HDR_SIZE + f->byte, f->bit, f->width, (unsigned long long)v);
}

/* Adds a diagnostic naming field `name` of the message's layout. */
static void field_diag(struct cmp_diags *d, const struct cmp_layout *l, const char *name,
		       enum cmp_diag_sev sev, enum cmp_diag_code code, const char *what,
		       unsigned long long v)
{
	const struct cmp_field *f = cmp_layout_find(l, name);
	unsigned byte = f ? CMP_MAD_HDR_SIZE + f->byte : 0, bit = f ? f->bit : 0;

	cmp_diag_add(d, sev, code, byte, bit, name, "%s %s: %llu (%s)", l->name, name, v, what);
}

const char *cmp_cm_req_qp_type_str(const struct cmp_cm_req *r)
{
	switch (r->transport_service_type) {
	case 0:
		return "RC";
	case 1:
		return "UC";
	case 2:
		return "RD";
	default:
		return r->extended_transport_type == 1 ? "XRC" : "reserved";
	}
}

void cmp_cm_validate(const struct cmp_cm_msg *m, struct cmp_diags *d)
{
	const struct cmp_layout *l = cmp_cm_layout(m->hdr.attr_id);

	if (!l)
		return;
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ:
		/* Transport service type 3 (IBTA 1.2.1 A19.7 / the kernel's
		 * cm_req_get_qp_type) defers to the extended transport type,
		 * of which only 1 (XRC) is defined. */
		if (m->u.req.transport_service_type == 3 && m->u.req.extended_transport_type != 1)
			field_diag(d, l, "extended_transport_type", CMP_DIAG_ERROR, CMP_E_VALUE,
				   "transport service type 3 needs extended type 1 (XRC)",
				   m->u.req.extended_transport_type);
		if (m->u.req.path_mtu < 1 || m->u.req.path_mtu > 5)
			field_diag(d, l, "path_mtu", CMP_DIAG_ERROR, CMP_E_VALUE,
				   "not an IB MTU code 1..5", m->u.req.path_mtu);
		break;
	case UMAD_CM_ATTR_MRA:
		if (m->u.mra.message_mraed == 3)
			field_diag(d, l, "message_mraed", CMP_DIAG_ERROR, CMP_E_VALUE,
				   "reserved value", 3);
		break;
	case UMAD_CM_ATTR_REJ:
		if (m->u.rej.message_rejected == 3)
			field_diag(d, l, "message_rejected", CMP_DIAG_ERROR, CMP_E_VALUE,
				   "reserved value", 3);
		if (m->u.rej.reject_info_length > CMP_ARI_SIZE)
			field_diag(d, l, "reject_info_length", CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD,
				   "beyond the 72-byte ARI field", m->u.rej.reject_info_length);
		if (!strcmp(cmp_cm_rej_reason_str(m->u.rej.reason), "unknown reason"))
			field_diag(d, l, "reason", CMP_DIAG_WARN, CMP_E_VALUE,
				   "not a reason IBTA defines", m->u.rej.reason);
		break;
	case UMAD_CM_ATTR_REP:
		if (m->u.rep.failover_accepted == 3)
			field_diag(d, l, "failover_accepted", CMP_DIAG_WARN, CMP_E_VALUE,
				   "reserved value", 3);
		break;
	case UMAD_CM_ATTR_APR:
		if (m->u.apr.additional_info_length > CMP_ARI_SIZE)
			field_diag(d, l, "additional_info_length", CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD,
				   "beyond the 72-byte additional information field",
				   m->u.apr.additional_info_length);
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		if (m->u.sidr_rep.additional_info_length > CMP_ARI_SIZE)
			field_diag(d, l, "additional_info_length", CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD,
				   "beyond the 72-byte additional information field",
				   m->u.sidr_rep.additional_info_length);
		if (m->u.sidr_rep.status > 5)
			field_diag(d, l, "status", CMP_DIAG_WARN, CMP_E_VALUE,
				   "not a SIDR status IBTA defines", m->u.sidr_rep.status);
		break;
	default:
		break;
	}
}

int cmp_cm_decode(const uint8_t *mad, size_t len, struct cmp_cm_msg *m, struct cmp_diags *d)
{
	const struct cmp_layout *l;
	unsigned errors_before = d ? d->errors : 0;
	struct cmp_diags local;

	/* Errors are counted even when the caller wants no details. */
	if (!d) {
		cmp_diags_init(&local);
		d = &local;
	}
	memset(m, 0, sizeof(*m));
	if (cmp_mad_hdr_decode_class(mad, len, &m->hdr, UMAD_CLASS_CM, CMP_CM_CLASS_VERSION, "CM", d))
		return -1;
	l = cmp_cm_layout(m->hdr.attr_id);
	if (!l) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_ATTR, 16, 0, "attr_id",
			     "unknown CM attribute 0x%04x", m->hdr.attr_id);
		return -1;
	}
	if (m->hdr.attr_id == UMAD_ATTR_CLASS_PORT_INFO
		    ? (m->hdr.method != UMAD_METHOD_GET && m->hdr.method != UMAD_METHOD_GET_RESP)
		    : m->hdr.method != UMAD_METHOD_SEND) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_METHOD, 3, 0, "method",
			     "method 0x%02x is not valid for %s", m->hdr.method, l->name);
		return -1;
	}
	cmp_layout_decode(l, mad + CMP_MAD_HDR_SIZE, &m->u);
	cmp_layout_check_reserved(l, mad + CMP_MAD_HDR_SIZE, reserved_cb, d);
	cmp_cm_validate(m, d);
	return d->errors > errors_before ? -1 : 0;
}

int cmp_cm_encode(const struct cmp_cm_msg *m, uint8_t mad[CMP_MAD_SIZE])
{
	const struct cmp_layout *l = cmp_cm_layout(m->hdr.attr_id);
	struct cmp_mad_hdr h = m->hdr;

	if (!l)
		return -1;
	h.base_version = UMAD_BASE_VERSION;
	h.mgmt_class = UMAD_CLASS_CM;
	h.class_version = CMP_CM_CLASS_VERSION;
	if (!h.method)
		h.method = m->hdr.attr_id == UMAD_ATTR_CLASS_PORT_INFO ? UMAD_METHOD_GET
								       : UMAD_METHOD_SEND;
	cmp_mad_hdr_encode(&h, mad);
	cmp_layout_encode(l, &m->u, mad + CMP_MAD_HDR_SIZE);
	return 0;
}

uint32_t cmp_cm_rep_vendor_id(const struct cmp_cm_rep *rep)
{
	return (uint32_t)rep->vendor_id_h << 16 | (uint32_t)rep->vendor_id_m << 8 | rep->vendor_id_l;
}

void cmp_cm_rep_set_vendor_id(struct cmp_cm_rep *rep, uint32_t v)
{
	rep->vendor_id_h = (uint8_t)(v >> 16);
	rep->vendor_id_m = (uint8_t)(v >> 8);
	rep->vendor_id_l = (uint8_t)v;
}

uint32_t cmp_cm_sidr_rep_vendor_id(const struct cmp_cm_sidr_rep *rep)
{
	return (uint32_t)rep->vendor_id_h << 8 | rep->vendor_id_l;
}

void cmp_cm_sidr_rep_set_vendor_id(struct cmp_cm_sidr_rep *rep, uint32_t v)
{
	rep->vendor_id_h = (uint16_t)(v >> 8);
	rep->vendor_id_l = (uint8_t)v;
}

void cmp_cm_print(const struct cmp_cm_msg *m, FILE *out, int indent)
{
	const struct cmp_layout *l = cmp_cm_layout(m->hdr.attr_id);

	fprintf(out, "%*sMAD header:\n", indent, "");
	cmp_layout_print(&cmp_mad_hdr_layout, &m->hdr, out, indent + 2);
	if (!l)
		return;
	fprintf(out, "%*s%s:\n", indent, "", l->name);
	cmp_layout_print(l, &m->u, out, indent + 2);
}

void cmp_cm_json(const struct cmp_cm_msg *m, FILE *out)
{
	const struct cmp_layout *l = cmp_cm_layout(m->hdr.attr_id);

	fputs("\"hdr\": {", out);
	cmp_layout_json(&cmp_mad_hdr_layout, &m->hdr, out);
	fputs("}", out);
	if (!l)
		return;
	fprintf(out, ", \"msg\": {");
	cmp_layout_json(l, &m->u, out);
	fputs("}", out);
}
