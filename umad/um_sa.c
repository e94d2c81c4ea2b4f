/*
 * um_sa.c - SA MAD codec: the layouts built from um_sa.h's row lists, the
 * rules the tables cannot express (methods per attribute, RMPP, record
 * counts, status), and the query builders.
 */
#include "umad/um_sa.h"

#include <string.h>

#define CMP_ROW_TYPE struct um_sa_hdr
static const struct cmp_field hdr_rows[] = { CMP_TABLE_ROWS(UM_SA_HDR_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct um_sa_path_rec
static const struct cmp_field pr_rows[] = { CMP_TABLE_ROWS(UM_SA_PR_FIELDS) };
#undef CMP_ROW_TYPE
#define CMP_ROW_TYPE struct um_sa_mcm_rec
static const struct cmp_field mcm_rows[] = { CMP_TABLE_ROWS(UM_SA_MCM_FIELDS) };
#undef CMP_ROW_TYPE

const struct cmp_layout um_sa_hdr_layout =
	CMP_LAYOUT("SA header", struct um_sa_hdr, hdr_rows, UM_SA_HDR_SIZE);
const struct cmp_layout um_sa_path_rec_layout =
	CMP_LAYOUT("PathRecord", struct um_sa_path_rec, pr_rows, UM_SA_PR_SIZE);
const struct cmp_layout um_sa_mcm_rec_layout =
	CMP_LAYOUT("MCMemberRecord", struct um_sa_mcm_rec, mcm_rows, UM_SA_MCM_SIZE);

const uint16_t um_sa_attrs[] = {
	UMAD_ATTR_CLASS_PORT_INFO, UMAD_SA_ATTR_PATH_REC, UMAD_SA_ATTR_MCMEMBER_REC, 0,
};

const struct cmp_layout *um_sa_layout(uint16_t attr_id)
{
	switch (attr_id) {
	case UMAD_ATTR_CLASS_PORT_INFO: return &cmp_cpi_layout;
	case UMAD_SA_ATTR_PATH_REC: return &um_sa_path_rec_layout;
	case UMAD_SA_ATTR_MCMEMBER_REC: return &um_sa_mcm_rec_layout;
	default: return NULL;
	}
}

const char *um_sa_attr_str(uint16_t attr_id)
{
	const struct cmp_layout *l = um_sa_layout(attr_id);

	if (l)
		return l->name;
	switch (attr_id) {
	case UMAD_ATTR_NOTICE: return "Notice";
	case UMAD_ATTR_INFORM_INFO: return "InformInfo";
	case UMAD_SA_ATTR_NODE_REC: return "NodeRecord";
	case UMAD_SA_ATTR_PORT_INFO_REC: return "PortInfoRecord";
	case UMAD_SA_ATTR_SLVL_REC: return "SLtoVLMappingTableRecord";
	case UMAD_SA_ATTR_SWITCH_INFO_REC: return "SwitchInfoRecord";
	case UMAD_SA_ATTR_LINEAR_FT_REC: return "LinearForwardingTableRecord";
	case UMAD_SA_ATTR_RANDOM_FT_REC: return "RandomForwardingTableRecord";
	case UMAD_SA_ATTR_MCAST_FT_REC: return "MulticastForwardingTableRecord";
	case UMAD_SA_ATTR_SM_INFO_REC: return "SMInfoRecord";
	case UMAD_SA_ATTR_INFORM_INFO_REC: return "InformInfoRecord";
	case UMAD_SA_ATTR_LINK_REC: return "LinkRecord";
	case UMAD_SA_ATTR_GUID_INFO_REC: return "GuidInfoRecord";
	case UMAD_SA_ATTR_SERVICE_REC: return "ServiceRecord";
	case UMAD_SA_ATTR_PKEY_TABLE_REC: return "P_KeyTableRecord";
	case UMAD_SA_ATTR_VL_ARB_REC: return "VLArbitrationTableRecord";
	case UMAD_SA_ATTR_TRACE_REC: return "TraceRecord";
	case UMAD_SA_ATTR_MULTI_PATH_REC: return "MultiPathRecord";
	case UMAD_SA_ATTR_SERVICE_ASSOC_REC: return "ServiceAssociationRecord";
	default: return "attr?";
	}
}

const char *um_sa_status_str(uint16_t status)
{
	/* SA class codes live in bits 15:8 (opensm IB_SA_MAD_STATUS_*: 0x0100..0x0800). */
	switch (status >> 8) {
	case 0: break;
	case UMAD_SA_STATUS_NO_RESOURCES: return "SA: insufficient resources";
	case UMAD_SA_STATUS_REQ_INVALID: return "SA: request invalid";
	case UMAD_SA_STATUS_NO_RECORDS: return "SA: no records";
	case UMAD_SA_STATUS_TOO_MANY_RECORDS: return "SA: too many records";
	case UMAD_SA_STATUS_INVALID_GID: return "SA: invalid GID";
	case UMAD_SA_STATUS_INSUF_COMPS: return "SA: insufficient components";
	case UMAD_SA_STATUS_REQ_DENIED: return "SA: request denied";
	case UMAD_SA_STATUS_PRI_SUGGESTED: return "SA: priority suggested";
	default: return "SA: unknown class status";
	}
	switch (status & UMAD_STATUS_INVALID_FIELD_MASK) {
	case 0: break;
	case UMAD_STATUS_BAD_VERSION: return "bad class version";
	case UMAD_STATUS_METHOD_NOT_SUPPORTED: return "method not supported";
	case UMAD_STATUS_ATTR_NOT_SUPPORTED: return "method/attribute combination not supported";
	case UMAD_STATUS_INVALID_ATTR_VALUE: return "invalid attribute or modifier value";
	default: return "reserved invalid-field code";
	}
	if (status & UMAD_STATUS_BUSY)
		return "busy";
	if (status & UMAD_STATUS_REDIRECT)
		return "redirect required";
	return status ? "reserved status bits" : "success";
}

static const char *const pr_comp_names[] = {
	"ServiceID8MSB", "ServiceID56LSB", "DGID", "SGID", "DLID", "SLID", "RawTraffic", NULL,
	"FlowLabel", "HopLimit", "TClass", "Reversible", "NumbPath", "P_Key", "QoSClass", "SL",
	"MTUSelector", "MTU", "RateSelector", "Rate", "PacketLifeTimeSelector",
	"PacketLifeTime", "Preference",
};

static const char *const mcm_comp_names[] = {
	"MGID", "PortGID", "Q_Key", "MLID", "MTUSelector", "MTU", "TClass", "P_Key",
	"RateSelector", "Rate", "PacketLifeTimeSelector", "PacketLifeTime", "SL", "FlowLabel",
	"HopLimit", "Scope", "JoinState", "ProxyJoin",
};

/* Name of component bit b of attr_id, or NULL when the attribute has none. */
static const char *comp_name(uint16_t attr_id, unsigned b)
{
	const char *const *names = NULL;
	size_t n = 0;

	if (attr_id == UMAD_SA_ATTR_PATH_REC) {
		names = pr_comp_names;
		n = sizeof(pr_comp_names) / sizeof(pr_comp_names[0]);
	} else if (attr_id == UMAD_SA_ATTR_MCMEMBER_REC) {
		names = mcm_comp_names;
		n = sizeof(mcm_comp_names) / sizeof(mcm_comp_names[0]);
	}
	return b < n ? names[b] : NULL;
}

const char *um_sa_comp_mask_str(uint16_t attr_id, uint64_t mask, char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	if (!mask) {
		snprintf(buf, len, "none");
		return buf;
	}
	for (unsigned b = 0; b < 64; b++) {
		const char *name;
		char tmp[8];
		int n;

		if (!(mask & (1ULL << b)))
			continue;
		if (attr_id == UMAD_SA_ATTR_PATH_REC && b == 0 &&
		    (mask & UM_SA_PR_COMP_SERVICE_ID) == UM_SA_PR_COMP_SERVICE_ID) {
			name = "ServiceID";
			b = 1; /* both halves printed as one */
		} else {
			name = comp_name(attr_id, b);
		}
		if (!name) {
			snprintf(tmp, sizeof(tmp), "bit%u", b);
			name = tmp;
		}
		n = snprintf(buf + used, len - used, "%s%s", used ? "|" : "", name);
		if (n < 0 || (size_t)n >= len - used) {
			buf[used] = 0; /* no half names: drop the one that did not fit */
			break;
		}
		used += (size_t)n;
	}
	return buf;
}

/* ---- decoding ---------------------------------------------------------- */

struct rsvd_ctx {
	struct cmp_diags *d;
	unsigned base; /* MAD byte where the layout starts */
};

static void reserved_cb(void *ctx, const struct cmp_field *f, uint64_t v)
{
	const struct rsvd_ctx *c = ctx;

	cmp_diag_add(c->d, CMP_DIAG_WARN, CMP_E_RESERVED, c->base + f->byte, f->bit, f->name,
		     "reserved bits at byte %u bit %u (%u wide) are not zero (0x%llx)",
		     c->base + f->byte, f->bit, f->width, (unsigned long long)v);
}

static void check_reserved(const struct cmp_layout *l, const uint8_t *mad, unsigned base,
			   struct cmp_diags *d)
{
	struct rsvd_ctx c = { d, base };

	cmp_layout_check_reserved(l, mad + base, reserved_cb, &c);
}

/* Data bytes after the last record must be zero (padding). */
static void check_tail(const uint8_t *mad, unsigned from, struct cmp_diags *d)
{
	for (unsigned i = from; i < CMP_MAD_SIZE; i++) {
		if (mad[i]) {
			cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_RESERVED, i, 0, "data",
				     "SA data byte %u, after the last record (byte %u on), is 0x%02x",
				     i, from, mad[i]);
			return;
		}
	}
}

static int method_valid(uint16_t attr_id, uint8_t method)
{
	switch (method) {
	case UMAD_METHOD_GET:
	case UMAD_METHOD_GET_RESP:
		return 1;
	case UMAD_SA_METHOD_GET_TABLE:
	case UMAD_SA_METHOD_GET_TABLE_RESP:
		return attr_id != UMAD_ATTR_CLASS_PORT_INFO;
	case UMAD_METHOD_SET:
	case UMAD_SA_METHOD_DELETE:
	case UMAD_SA_METHOD_DELETE_RESP:
		return attr_id == UMAD_SA_ATTR_MCMEMBER_REC;
	default:
		return 0;
	}
}

static void check_comp_mask(const struct um_sa_msg *m, struct cmp_diags *d)
{
	uint64_t known, mask = m->sa.comp_mask;
	char names[160];

	if (m->hdr.attr_id == UMAD_SA_ATTR_PATH_REC)
		known = UM_SA_PR_COMP_ALL;
	else if (m->hdr.attr_id == UMAD_SA_ATTR_MCMEMBER_REC)
		known = UM_SA_MCM_COMP_ALL;
	else
		return;
	if (mask & ~known)
		cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_VALUE, 48, 0, "comp_mask",
			     "component mask 0x%016llx sets %s, which %s does not define",
			     (unsigned long long)mask,
			     um_sa_comp_mask_str(0, mask & ~known, names, sizeof(names)),
			     um_sa_attr_str(m->hdr.attr_id));
	if (m->hdr.attr_id == UMAD_SA_ATTR_PATH_REC) {
		uint64_t sid = mask & UM_SA_PR_COMP_SERVICE_ID;
		if (sid && sid != UM_SA_PR_COMP_SERVICE_ID)
			cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_VALUE, 55, 6, "comp_mask",
				     "PathRecord component bits 0 (ServiceID8MSB) and 1 "
				     "(ServiceID56LSB) differ (CA13-6: set both or neither)");
	}
}

/* Works out how many records the MAD carries from byte 56 and where the
 * padding after them starts (CMP_MAD_SIZE: nothing to check). */
static unsigned count_records(const struct um_sa_msg *m, const struct cmp_layout *l,
			      unsigned *tail, struct cmp_diags *d)
{
	const struct um_sa_hdr *s = &m->sa;
	unsigned stride = l->len, data = UMAD_LEN_SA_DATA;
	int rmpp = s->rmpp_flags & UMAD_RMPP_FLAG_ACTIVE;
	int first = !!(s->rmpp_flags & UM_SA_RMPP_FLAG_FIRST);

	*tail = CMP_MAD_SIZE;
	if (rmpp && s->rmpp_type != UM_SA_RMPP_TYPE_DATA)
		return 0; /* ACK / STOP / ABORT: no SA data */
	if (m->hdr.method != UMAD_SA_METHOD_GET_TABLE_RESP) {
		*tail = UM_SA_DATA_OFFSET + stride;
		return 1;
	}
	if (m->hdr.status)
		return 0; /* an error response carries no table */
	if (s->attr_offset * 8u != stride)
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD, 44, 0, "attr_offset",
			     "attr_offset %u (8-byte words) does not match the %u-byte %s "
			     "(expected %u)", s->attr_offset, stride, l->name, stride / 8);
	if (!rmpp) {
		cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_VALUE, 26, 5, "rmpp_flags",
			     "GetTableResp without RMPP active: payload length unknown, "
			     "assuming %u full records", data / stride);
		return data / stride;
	}
	if (s->seg_num == 0) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_VALUE, 28, 0, "seg_num",
			     "RMPP DATA segment number 0 (segments count from 1)");
		return 0;
	}
	if (first != (s->seg_num == 1))
		cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_VALUE, 26, 5, "rmpp_flags",
			     "RMPP First flag %s on segment %u", first ? "set" : "clear",
			     s->seg_num);
	if (s->rmpp_flags & UM_SA_RMPP_FLAG_LAST) {
		/* PayloadLength of the last segment counts the 20-byte SA header
		 * plus the data it holds (Linux mad_rmpp.c get_mad_len). */
		if (s->paylen_newwin < UM_SA_RMPP_CLASS_HDR ||
		    s->paylen_newwin > UM_SA_RMPP_CLASS_HDR + UMAD_LEN_SA_DATA) {
			cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD, 32, 0, "paylen_newwin",
				     "RMPP payload length %u outside %u..%u for the last segment",
				     s->paylen_newwin, UM_SA_RMPP_CLASS_HDR,
				     UM_SA_RMPP_CLASS_HDR + UMAD_LEN_SA_DATA);
			return 0;
		}
		data = s->paylen_newwin - UM_SA_RMPP_CLASS_HDR;
		if (s->seg_num == 1 && data % stride)
			cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_LENGTH_FIELD, 32, 0, "paylen_newwin",
				     "RMPP payload length %u is not %u + whole %u-byte %ss",
				     s->paylen_newwin, UM_SA_RMPP_CLASS_HDR, stride, l->name);
		*tail = UM_SA_DATA_OFFSET + data;
	}
	/* Records run on across segments: only the first segment's start at
	 * byte 56. */
	return s->seg_num == 1 ? data / stride : 0;
}

int um_sa_decode(const uint8_t *mad, size_t len, struct um_sa_msg *m, struct cmp_diags *d)
{
	const struct cmp_layout *l;
	unsigned errors_before = d ? d->errors : 0, tail;
	struct cmp_diags local;

	/* Errors are counted even when the caller wants no details. */
	if (!d) {
		cmp_diags_init(&local);
		d = &local;
	}
	memset(m, 0, sizeof(*m));
	if (cmp_mad_hdr_decode_class(mad, len, &m->hdr, UMAD_CLASS_SUBN_ADM, UMAD_SA_CLASS_VERSION,
				     "SA", d))
		return -1;
	l = um_sa_layout(m->hdr.attr_id);
	if (!l) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_ATTR, 16, 0, "attr_id",
			     "unknown SA attribute 0x%04x (%s)", m->hdr.attr_id,
			     um_sa_attr_str(m->hdr.attr_id));
		return -1;
	}
	if (!method_valid(m->hdr.attr_id, m->hdr.method)) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_METHOD, 3, 0, "method",
			     "method 0x%02x (%s) is not valid for %s", m->hdr.method,
			     cmp_mad_method_str(UMAD_CLASS_SUBN_ADM, m->hdr.method), l->name);
		return -1;
	}
	cmp_layout_decode(&um_sa_hdr_layout, mad + UM_SA_HDR_OFFSET, &m->sa);
	check_reserved(&um_sa_hdr_layout, mad, UM_SA_HDR_OFFSET, d);
	if (m->sa.rmpp_flags & UMAD_RMPP_FLAG_ACTIVE) {
		if (m->sa.rmpp_version != UMAD_RMPP_VERSION)
			cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_VALUE, 24, 0, "rmpp_version",
				     "RMPP version %u with RMPP active, expected %u",
				     m->sa.rmpp_version, UMAD_RMPP_VERSION);
		if (m->sa.rmpp_type < UM_SA_RMPP_TYPE_DATA || m->sa.rmpp_type > UM_SA_RMPP_TYPE_ABORT)
			cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_VALUE, 25, 0, "rmpp_type",
				     "RMPP type %u is not DATA/ACK/STOP/ABORT (1..4)",
				     m->sa.rmpp_type);
	}
	if (d->errors > errors_before)
		return -1;
	if (m->hdr.status)
		cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_VALUE, 4, 0, "status",
			     "MAD status 0x%04x: %s", m->hdr.status, um_sa_status_str(m->hdr.status));
	m->nrecords = (uint16_t)count_records(m, l, &tail, d);
	if (m->nrecords) {
		cmp_layout_decode(l, mad + UM_SA_DATA_OFFSET, &m->u);
		check_reserved(l, mad, UM_SA_DATA_OFFSET, d);
	}
	if (tail < CMP_MAD_SIZE)
		check_tail(mad, tail, d);
	check_comp_mask(m, d);
	return d->errors > errors_before ? -1 : 0;
}

int um_sa_encode(const struct um_sa_msg *m, uint8_t mad[CMP_MAD_SIZE])
{
	const struct cmp_layout *l = um_sa_layout(m->hdr.attr_id);
	struct cmp_mad_hdr h = m->hdr;

	if (!l)
		return -1;
	h.base_version = UMAD_BASE_VERSION;
	h.mgmt_class = UMAD_CLASS_SUBN_ADM;
	h.class_version = UMAD_SA_CLASS_VERSION;
	if (!h.method)
		h.method = UMAD_METHOD_GET;
	memset(mad, 0, CMP_MAD_SIZE);
	cmp_mad_hdr_encode(&h, mad);
	cmp_layout_encode(&um_sa_hdr_layout, &m->sa, mad + UM_SA_HDR_OFFSET);
	cmp_layout_encode(l, &m->u, mad + UM_SA_DATA_OFFSET);
	return 0;
}

int um_sa_record_get(const uint8_t mad[CMP_MAD_SIZE], const struct um_sa_msg *m, unsigned i,
		     void *rec)
{
	const struct cmp_layout *l = um_sa_layout(m->hdr.attr_id);

	if (!l || i >= m->nrecords || (i + 1u) * l->len > UMAD_LEN_SA_DATA)
		return -1;
	cmp_layout_decode(l, mad + UM_SA_DATA_OFFSET + i * l->len, rec);
	return 0;
}

int um_sa_record_put(uint8_t mad[CMP_MAD_SIZE], uint16_t attr_id, unsigned i, const void *rec)
{
	const struct cmp_layout *l = um_sa_layout(attr_id);

	if (!l || (i + 1u) * l->len > UMAD_LEN_SA_DATA)
		return -1;
	cmp_layout_encode(l, rec, mad + UM_SA_DATA_OFFSET + i * l->len);
	return 0;
}

/* ---- the queries rdma_cm sends ----------------------------------------- */

static void init_query(struct um_sa_msg *m, uint64_t tid, uint8_t method, uint16_t attr_id)
{
	memset(m, 0, sizeof(*m));
	m->hdr.base_version = UMAD_BASE_VERSION;
	m->hdr.mgmt_class = UMAD_CLASS_SUBN_ADM;
	m->hdr.class_version = UMAD_SA_CLASS_VERSION;
	m->hdr.method = method;
	m->hdr.tid = tid;
	m->hdr.attr_id = attr_id;
	m->nrecords = 1;
	/* AttributeOffset stays 0: Linux init_mad() zeroes the MAD and only
	 * the SA sets it, in its responses. */
}

void um_sa_path_query(struct um_sa_msg *m, uint64_t tid, const uint8_t sgid[16],
		      const uint8_t dgid[16], uint16_t pkey, uint64_t service_id, int qos_class)
{
	struct um_sa_path_rec *pr = &m->u.pr;

	/* ib_sa_path_rec_get() sends SubnAdmGet, not GetTable. */
	init_query(m, tid, UMAD_METHOD_GET, UMAD_SA_ATTR_PATH_REC);
	memcpy(pr->sgid, sgid, 16);
	memcpy(pr->dgid, dgid, 16);
	pr->pkey = pkey;
	pr->numb_path = 1;
	pr->reversible = 1;
	pr->service_id = service_id;
	m->sa.comp_mask = UM_SA_PR_QUERY_COMP;
	if (qos_class >= 0) {
		pr->qos_class = (uint16_t)(qos_class & 0xFFF);
		m->sa.comp_mask |= UM_SA_PR_COMP_QOS_CLASS;
	}
}

void um_sa_path_query_tclass(struct um_sa_msg *m, uint8_t tclass)
{
	m->u.pr.qos_class = 0;
	m->u.pr.tclass = tclass;
	m->sa.comp_mask = (m->sa.comp_mask & ~UM_SA_PR_COMP_QOS_CLASS) | UM_SA_PR_COMP_TCLASS;
}

void um_sa_mcm_join(struct um_sa_msg *m, uint64_t tid, const struct um_sa_mcm_rec *rec,
		    int ipoib_ps)
{
	init_query(m, tid, UMAD_METHOD_SET, UMAD_SA_ATTR_MCMEMBER_REC);
	m->u.mcm = *rec;
	m->sa.comp_mask = UM_SA_MCM_JOIN_COMP;
	if (ipoib_ps)
		m->sa.comp_mask |= UM_SA_MCM_JOIN_COMP_IPOIB;
}

void um_sa_mcm_leave(struct um_sa_msg *m, uint64_t tid, const struct um_sa_mcm_rec *rec,
		     uint8_t leave_state)
{
	init_query(m, tid, UMAD_SA_METHOD_DELETE, UMAD_SA_ATTR_MCMEMBER_REC);
	m->u.mcm = *rec;
	m->u.mcm.join_state = leave_state;
	m->sa.comp_mask = UM_SA_MCM_LEAVE_COMP;
}

void um_sa_cpi_query(struct um_sa_msg *m, uint64_t tid)
{
	init_query(m, tid, UMAD_METHOD_GET, UMAD_ATTR_CLASS_PORT_INFO);
}

/* ---- printing ---------------------------------------------------------- */

void um_sa_summary(const struct um_sa_msg *m, FILE *out)
{
	char a[64], b[64], names[400];

	if (m->nrecords) {
		switch (m->hdr.attr_id) {
		case UMAD_SA_ATTR_PATH_REC: {
			const struct um_sa_path_rec *p = &m->u.pr;
			fprintf(out, " sgid %s dgid %s", cmp_gid_str(p->sgid, a, sizeof(a)),
				cmp_gid_str(p->dgid, b, sizeof(b)));
			if (p->slid || p->dlid)
				fprintf(out, " slid %u dlid %u", p->slid, p->dlid);
			fprintf(out, " pkey 0x%04x sid 0x%016llx", p->pkey,
				(unsigned long long)p->service_id);
			if (m->hdr.method & UMAD_METHOD_RESP_MASK)
				fprintf(out, " sl %u mtu %u rate %u life %u", p->sl, p->mtu, p->rate,
					p->packet_life_time);
			break;
		}
		case UMAD_SA_ATTR_MCMEMBER_REC: {
			const struct um_sa_mcm_rec *r = &m->u.mcm;
			fprintf(out, " mgid %s port_gid %s join_state 0x%x qkey 0x%08x",
				cmp_gid_str(r->mgid, a, sizeof(a)),
				cmp_gid_str(r->port_gid, b, sizeof(b)), r->join_state, r->qkey);
			if (r->mlid)
				fprintf(out, " mlid 0x%04x", r->mlid);
			break;
		}
		default:
			if (m->hdr.method == UMAD_METHOD_GET_RESP)
				fprintf(out, " cap 0x%04x resp_time %u", m->u.cpi.capability_mask,
					m->u.cpi.resp_time_value);
			break;
		}
	}
	if (m->hdr.method == UMAD_SA_METHOD_GET_TABLE_RESP && !m->hdr.status)
		fprintf(out, " [%u record%s%s]", m->nrecords, m->nrecords == 1 ? "" : "s",
			m->sa.seg_num > 1 ? ", later segment" : "");
	if (m->sa.rmpp_flags & UMAD_RMPP_FLAG_ACTIVE && m->sa.rmpp_type != UM_SA_RMPP_TYPE_DATA)
		fprintf(out, " rmpp %s seg %u",
			m->sa.rmpp_type == UM_SA_RMPP_TYPE_ACK    ? "ACK"
			: m->sa.rmpp_type == UM_SA_RMPP_TYPE_STOP ? "STOP"
								  : "ABORT",
			m->sa.seg_num);
	if (m->sa.comp_mask)
		fprintf(out, " comp %s",
			um_sa_comp_mask_str(m->hdr.attr_id, m->sa.comp_mask, names, sizeof(names)));
	if (m->hdr.status)
		fprintf(out, " status 0x%04x (%s)", m->hdr.status, um_sa_status_str(m->hdr.status));
}

void um_sa_print(const struct um_sa_msg *m, FILE *out, int indent)
{
	const struct cmp_layout *l = um_sa_layout(m->hdr.attr_id);
	char names[400];

	fprintf(out, "%*sMAD header:\n", indent, "");
	cmp_layout_print(&cmp_mad_hdr_layout, &m->hdr, out, indent + 2);
	if (m->hdr.status)
		fprintf(out, "%*sstatus text: %s\n", indent + 2, "", um_sa_status_str(m->hdr.status));
	fprintf(out, "%*sSA header:\n", indent, "");
	cmp_layout_print(&um_sa_hdr_layout, &m->sa, out, indent + 2);
	fprintf(out, "%*scomponents: %s\n", indent + 2, "",
		um_sa_comp_mask_str(m->hdr.attr_id, m->sa.comp_mask, names, sizeof(names)));
	if (!l)
		return;
	if (!m->nrecords) {
		fprintf(out, "%*s%s: no record starts in this MAD\n", indent, "", l->name);
		return;
	}
	fprintf(out, "%*s%s (1 of %u in this MAD):\n", indent, "", l->name, m->nrecords);
	cmp_layout_print(l, &m->u, out, indent + 2);
}

void um_sa_json(const struct um_sa_msg *m, FILE *out)
{
	const struct cmp_layout *l = um_sa_layout(m->hdr.attr_id);
	char names[400];

	fputs("\"hdr\": {", out);
	cmp_layout_json(&cmp_mad_hdr_layout, &m->hdr, out);
	fprintf(out, ", \"status_text\": \"%s\"}, \"sa\": {", um_sa_status_str(m->hdr.status));
	cmp_layout_json(&um_sa_hdr_layout, &m->sa, out);
	fprintf(out, ", \"components\": \"%s\"}",
		um_sa_comp_mask_str(m->hdr.attr_id, m->sa.comp_mask, names, sizeof(names)));
	if (!l)
		return;
	fprintf(out, ", \"attr\": \"%s\", \"nrecords\": %u", l->name, m->nrecords);
	if (!m->nrecords)
		return;
	fputs(", \"rec\": {", out);
	cmp_layout_json(l, &m->u, out);
	fputs("}", out);
}
