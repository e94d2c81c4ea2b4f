/*
 * umad_str.c - the string helpers of the simulated libibumad.so.3
 * (umad_str.h): management class, method, attribute and status names.
 * Written from the IBTA tables (Vol1 ch.13-16), not from libibumad: the
 * wording is ours; unknown values give "<unknown>" like the real library.
 */
#include <endian.h>
#include <stdint.h>

#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

static const char unknown[] = "<unknown>";

const char *umad_class_str(uint8_t mgmt_class)
{
	switch (mgmt_class) {
	case 0x01: return "Subn";
	case 0x81: return "SubnDirectedRoute";
	case 0x03: return "SubnAdm";
	case 0x04: return "Perf";
	case 0x05: return "BM";
	case 0x06: return "DevMgt";
	case 0x07: return "ComMgt";
	case 0x08: return "SNMP";
	case 0x10: return "DevAdm";
	case 0x11: return "BootMgt";
	case 0x12: return "BIS";
	case 0x21: return "CongestionMgt";
	default:
		break;
	}
	if (mgmt_class >= 0x09 && mgmt_class <= 0x0F)
		return "Vendor (range 1)";
	if (mgmt_class >= 0x30 && mgmt_class <= 0x4F)
		return "Vendor (range 2, with OUI)";
	if (mgmt_class >= 0x10 && mgmt_class <= 0x2F)
		return "Application";
	return unknown;
}

/* Methods every class shares (IBTA 13.4.5). */
static const char *common_method(uint8_t method)
{
	switch (method) {
	case 0x01: return "Get";
	case 0x02: return "Set";
	case 0x81: return "GetResp";
	case 0x03: return "Send";
	case 0x05: return "Trap";
	case 0x06: return "Report";
	case 0x86: return "ReportResp";
	case 0x07: return "TrapRepress";
	default: return NULL;
	}
}

/* Subnet administration adds the table methods (IBTA 15.2.2). */
static const char *sa_method(uint8_t method)
{
	switch (method) {
	case 0x12: return "GetTable";
	case 0x92: return "GetTableResp";
	case 0x13: return "GetTraceTable";
	case 0x14: return "GetMulti";
	case 0x94: return "GetMultiResp";
	case 0x15: return "Delete";
	case 0x95: return "DeleteResp";
	default: return NULL;
	}
}

const char *umad_method_str(uint8_t mgmt_class, uint8_t method)
{
	const char *s = NULL;

	if (mgmt_class == 0x03)
		s = sa_method(method);
	if (!s)
		s = common_method(method);
	return s ? s : unknown;
}

const char *umad_common_mad_status_str(__be16 be_status)
{
	uint16_t status = be16toh(be_status);

	if (status & 0x0001)
		return "Busy";
	if (status & 0x0002)
		return "Redirection required";
	switch ((status & 0x001C) >> 2) {
	case 0: return "Success";
	case 1: return "Bad class version or unsupported class";
	case 2: return "Method not supported";
	case 3: return "Method/attribute combination not supported";
	case 7: return "Invalid attribute or attribute modifier value";
	default: return unknown;
	}
}

const char *umad_sa_mad_status_str(__be16 be_status)
{
	switch ((be16toh(be_status) & 0xFF00) >> 8) {
	case 0: return "Success";
	case 1: return "No resources";
	case 2: return "Request invalid";
	case 3: return "No records";
	case 4: return "Too many records";
	case 5: return "Invalid GID";
	case 6: return "Insufficient components";
	case 7: return "Request denied";
	case 8: return "Priority suggested";
	default: return unknown;
	}
}

static const char *common_attr(uint16_t id)
{
	switch (id) {
	case 0x0001: return "ClassPortInfo";
	case 0x0002: return "Notice";
	case 0x0003: return "InformInfo";
	default: return NULL;
	}
}

static const char *smp_attr(uint16_t id)
{
	switch (id) {
	case 0x0010: return "NodeDescription";
	case 0x0011: return "NodeInfo";
	case 0x0012: return "SwitchInfo";
	case 0x0014: return "GUIDInfo";
	case 0x0015: return "PortInfo";
	case 0x0016: return "P_KeyTable";
	case 0x0017: return "SLtoVLMappingTable";
	case 0x0018: return "VLArbitrationTable";
	case 0x0019: return "LinearForwardingTable";
	case 0x001A: return "RandomForwardingTable";
	case 0x001B: return "MulticastForwardingTable";
	case 0x0020: return "SMInfo";
	case 0x0030: return "VendorDiag";
	case 0x0031: return "LedInfo";
	case 0x0032: return "MlnxExtendedPortInfo";
	default: return NULL;
	}
}

static const char *sa_attr(uint16_t id)
{
	switch (id) {
	case 0x0011: return "NodeRecord";
	case 0x0012: return "PortInfoRecord";
	case 0x0013: return "SLtoVLMappingTableRecord";
	case 0x0014: return "SwitchInfoRecord";
	case 0x0015: return "LinearForwardingTableRecord";
	case 0x0016: return "RandomForwardingTableRecord";
	case 0x0017: return "MulticastForwardingTableRecord";
	case 0x0018: return "SMInfoRecord";
	case 0x0019: return "LinkSpeedWidthPairsTableRecord";
	case 0x00F3: return "InformInfoRecord";
	case 0x0020: return "LinkRecord";
	case 0x0030: return "GuidInfoRecord";
	case 0x0031: return "ServiceRecord";
	case 0x0033: return "P_KeyTableRecord";
	case 0x0035: return "PathRecord";
	case 0x0036: return "VLArbitrationTableRecord";
	case 0x0038: return "MCMemberRecord";
	case 0x0039: return "TraceRecord";
	case 0x003A: return "MultiPathRecord";
	case 0x003B: return "ServiceAssociationRecord";
	case 0x003C: return "HierarchyInfoRecord";
	case 0x003D: return "CableInfoRecord";
	case 0x003E: return "PortInfoExtendedRecord";
	default: return NULL;
	}
}

static const char *cm_attr(uint16_t id)
{
	switch (id) {
	case 0x0010: return "REQ (ConnectRequest)";
	case 0x0011: return "MRA (MsgRcptAck)";
	case 0x0012: return "REJ (ConnectReject)";
	case 0x0013: return "REP (ConnectReply)";
	case 0x0014: return "RTU (ReadyToUse)";
	case 0x0015: return "DREQ (DisconnectRequest)";
	case 0x0016: return "DREP (DisconnectReply)";
	case 0x0017: return "SIDR_REQ (ServiceIDResReq)";
	case 0x0018: return "SIDR_REP (ServiceIDResReqResp)";
	case 0x0019: return "LAP (LoadAlternatePath)";
	case 0x001A: return "APR (AlternatePathResponse)";
	case 0x001B: return "SAP (SuggestAlternatePath)";
	case 0x001C: return "SPR (SuggestPathResponse)";
	default: return NULL;
	}
}

static const char *perf_attr(uint16_t id)
{
	switch (id) {
	case 0x0010: return "PortSamplesControl";
	case 0x0011: return "PortSamplesResult";
	case 0x0012: return "PortCounters";
	case 0x001D: return "PortCountersExtended";
	default: return NULL;
	}
}

const char *umad_attribute_str(uint8_t mgmt_class, __be16 attr_id)
{
	uint16_t id = be16toh(attr_id);
	const char *s = common_attr(id);

	if (s)
		return s;
	switch (mgmt_class) {
	case 0x01:
	case 0x81:
		s = smp_attr(id);
		break;
	case 0x03:
		s = sa_attr(id);
		break;
	case 0x04:
		s = perf_attr(id);
		break;
	case 0x07:
		s = cm_attr(id);
		break;
	default:
		break;
	}
	return s ? s : unknown;
}
