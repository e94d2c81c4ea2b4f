/* cmp_mad.c - MAD common header codec and names. */
#include "cm_proto/cmp_mad.h"

#include <infiniband/umad_sa.h>

#define CMP_ROW_TYPE struct cmp_mad_hdr
static const struct cmp_field hdr_rows[] = { CMP_TABLE_ROWS(CMP_MAD_HDR_FIELDS) };
#undef CMP_ROW_TYPE
const struct cmp_layout cmp_mad_hdr_layout =
	CMP_LAYOUT("mad_hdr", struct cmp_mad_hdr, hdr_rows, CMP_MAD_HDR_SIZE);

#define CMP_ROW_TYPE struct cmp_cpi
static const struct cmp_field cpi_rows[] = { CMP_TABLE_ROWS(CMP_CPI_FIELDS) };
#undef CMP_ROW_TYPE
const struct cmp_layout cmp_cpi_layout =
	CMP_LAYOUT("ClassPortInfo", struct cmp_cpi, cpi_rows, CMP_CPI_SIZE);

int cmp_mad_hdr_decode(const uint8_t *mad, size_t len, struct cmp_mad_hdr *hdr,
		       struct cmp_diags *d)
{
	if (len != CMP_MAD_SIZE) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_LENGTH, 0, 0, "",
			     "MAD is %zu bytes, must be %d", len, CMP_MAD_SIZE);
		if (len < CMP_MAD_HDR_SIZE)
			return -1;
	}
	cmp_layout_decode(&cmp_mad_hdr_layout, mad, hdr);
	if (hdr->base_version != UMAD_BASE_VERSION) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_BASE_VERSION, 0, 0, "base_version",
			     "base version %u, expected %u", hdr->base_version, UMAD_BASE_VERSION);
		return -1;
	}
	if (cmp_bits_get(mad, 18, 0, 16))
		cmp_diag_add(d, CMP_DIAG_WARN, CMP_E_RESERVED, 18, 0, "_rsvd18",
			     "reserved header bytes 18-19 are 0x%04x",
			     (unsigned)cmp_bits_get(mad, 18, 0, 16));
	return len == CMP_MAD_SIZE ? 0 : -1;
}

int cmp_mad_hdr_decode_class(const uint8_t *mad, size_t len, struct cmp_mad_hdr *hdr,
			     uint8_t mgmt_class, uint8_t class_version, const char *name,
			     struct cmp_diags *d)
{
	if (cmp_mad_hdr_decode(mad, len, hdr, d))
		return -1;
	if (hdr->mgmt_class != mgmt_class) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_CLASS, 1, 0, "mgmt_class",
			     "management class 0x%02x is not %s (0x%02x)", hdr->mgmt_class, name,
			     mgmt_class);
		return -1;
	}
	if (hdr->class_version != class_version) {
		cmp_diag_add(d, CMP_DIAG_ERROR, CMP_E_CLASS_VERSION, 2, 0, "class_version",
			     "%s class version %u, expected %u", name, hdr->class_version,
			     class_version);
		return -1;
	}
	return 0;
}

void cmp_mad_hdr_encode(const struct cmp_mad_hdr *hdr, uint8_t mad[CMP_MAD_SIZE])
{
	cmp_layout_encode(&cmp_mad_hdr_layout, hdr, mad);
}

const char *cmp_mad_class_str(uint8_t mgmt_class)
{
	switch (mgmt_class) {
	case UMAD_CLASS_SUBN_LID_ROUTED: return "SMP";
	case UMAD_CLASS_SUBN_DIRECTED_ROUTE: return "SMP-DR";
	case UMAD_CLASS_SUBN_ADM: return "SA";
	case UMAD_CLASS_PERF_MGMT: return "PERF";
	case UMAD_CLASS_BM: return "BM";
	case UMAD_CLASS_DEVICE_MGMT: return "DM";
	case UMAD_CLASS_CM: return "CM";
	case UMAD_CLASS_SNMP: return "SNMP";
	case UMAD_CLASS_CONG_MGMT: return "CC";
	case 0x2C: return "ACM";
	default: return "class?";
	}
}

const char *cmp_mad_method_str(uint8_t mgmt_class, uint8_t method)
{
	switch (method) {
	case UMAD_METHOD_GET: return "Get";
	case UMAD_METHOD_SET: return "Set";
	case UMAD_METHOD_GET_RESP: return "GetResp";
	case UMAD_METHOD_SEND: return "Send";
	case UMAD_METHOD_TRAP: return "Trap";
	case UMAD_METHOD_REPORT: return "Report";
	case UMAD_METHOD_REPORT_RESP: return "ReportResp";
	case UMAD_METHOD_TRAP_REPRESS: return "TrapRepress";
	}
	if (mgmt_class == UMAD_CLASS_SUBN_ADM) {
		switch (method) {
		case UMAD_SA_METHOD_GET_TABLE: return "GetTable";
		case UMAD_SA_METHOD_GET_TABLE_RESP: return "GetTableResp";
		case UMAD_SA_METHOD_DELETE: return "Delete";
		case UMAD_SA_METHOD_DELETE_RESP: return "DeleteResp";
		case UMAD_SA_METHOD_GET_MULTI: return "GetMulti";
		case UMAD_SA_METHOD_GET_MULTI_RESP: return "GetMultiResp";
		case UMAD_SA_METHOD_GET_TRACE_TABLE: return "GetTraceTable";
		}
	}
	return "method?";
}
