/*
 * cmp_cm.h - Communication Management MADs (IBTA Vol1 ch.12, tables
 * 106-120), one row list per message. Offsets are relative to the start of
 * the attribute data, i.e. MAD byte 24, exactly as the spec tables number
 * them; every bit of the 232 data bytes is described (reserved rows too), a
 * property the tests check.
 */
#ifndef USCM_CMP_CM_H
#define USCM_CMP_CM_H

#include <stdint.h>
#include <stdio.h>
#include <infiniband/umad_cm.h>

#include "cm_proto/cmp_mad.h"

#define CMP_CM_CLASS_VERSION 2
#define CMP_CM_DATA_SIZE (CMP_MAD_SIZE - CMP_MAD_HDR_SIZE) /* 232 */

/* Private data sizes (bytes). */
enum {
	CMP_REQ_PDATA = 92,
	CMP_MRA_PDATA = 222,
	CMP_REJ_PDATA = 148,
	CMP_REP_PDATA = 196,
	CMP_RTU_PDATA = 224,
	CMP_DREQ_PDATA = 220,
	CMP_DREP_PDATA = 224,
	CMP_LAP_PDATA = 168,
	CMP_APR_PDATA = 148,
	CMP_SIDR_REQ_PDATA = 216,
	CMP_SIDR_REP_PDATA = 136,
	CMP_ARI_SIZE = 72, /* REJ ARI, APR and SIDR_REP additional information */
};

/* ClassPortInfo as the CM class carries it: the common 72 bytes, then
 * reserved to the end of the MAD. */
#define CMP_CM_CPI_FIELDS(F) CMP_CPI_FIELDS(F) F(_rsvd72, 72, 0, 1280, RSVD)

/* Table 106: REQ. ECE VendorID (IBTA 1.4) in byte 5. */
#define CMP_REQ_FIELDS(F)                                   \
	F(local_comm_id, 0, 0, 32, U32)                     \
	F(_rsvd4, 4, 0, 8, RSVD)                            \
	F(vendor_id, 5, 0, 24, U32)                         \
	F(service_id, 8, 0, 64, U64)                        \
	F(local_ca_guid, 16, 0, 64, U64)                    \
	F(_rsvd24, 24, 0, 32, RSVD)                         \
	F(local_qkey, 28, 0, 32, U32)                       \
	F(local_qpn, 32, 0, 24, U32)                        \
	F(responder_resources, 35, 0, 8, U8)                \
	F(local_eecn, 36, 0, 24, U32)                       \
	F(initiator_depth, 39, 0, 8, U8)                    \
	F(remote_eecn, 40, 0, 24, U32)                      \
	F(remote_cm_response_timeout, 43, 0, 5, U8)         \
	F(transport_service_type, 43, 5, 2, U8)             \
	F(end_to_end_flow_control, 43, 7, 1, U8)            \
	F(starting_psn, 44, 0, 24, U32)                     \
	F(local_cm_response_timeout, 47, 0, 5, U8)          \
	F(retry_count, 47, 5, 3, U8)                        \
	F(pkey, 48, 0, 16, U16)                             \
	F(path_mtu, 50, 0, 4, U8)                           \
	F(rdc_exists, 50, 4, 1, U8)                         \
	F(rnr_retry_count, 50, 5, 3, U8)                    \
	F(max_cm_retries, 51, 0, 4, U8)                     \
	F(srq, 51, 4, 1, U8)                                \
	F(extended_transport_type, 51, 5, 3, U8)            \
	F(primary_local_lid, 52, 0, 16, U16)                \
	F(primary_remote_lid, 54, 0, 16, U16)               \
	F(primary_local_gid, 56, 0, 128, GID)               \
	F(primary_remote_gid, 72, 0, 128, GID)              \
	F(primary_flow_label, 88, 0, 20, U32)               \
	F(_rsvd90, 90, 4, 6, RSVD)                          \
	F(primary_packet_rate, 91, 2, 6, U8)                \
	F(primary_traffic_class, 92, 0, 8, U8)              \
	F(primary_hop_limit, 93, 0, 8, U8)                  \
	F(primary_sl, 94, 0, 4, U8)                         \
	F(primary_subnet_local, 94, 4, 1, U8)               \
	F(_rsvd94, 94, 5, 3, RSVD)                          \
	F(primary_local_ack_timeout, 95, 0, 5, U8)          \
	F(_rsvd95, 95, 5, 3, RSVD)                          \
	F(alternate_local_lid, 96, 0, 16, U16)              \
	F(alternate_remote_lid, 98, 0, 16, U16)             \
	F(alternate_local_gid, 100, 0, 128, GID)            \
	F(alternate_remote_gid, 116, 0, 128, GID)           \
	F(alternate_flow_label, 132, 0, 20, U32)            \
	F(_rsvd134, 134, 4, 6, RSVD)                        \
	F(alternate_packet_rate, 135, 2, 6, U8)             \
	F(alternate_traffic_class, 136, 0, 8, U8)           \
	F(alternate_hop_limit, 137, 0, 8, U8)               \
	F(alternate_sl, 138, 0, 4, U8)                      \
	F(alternate_subnet_local, 138, 4, 1, U8)            \
	F(_rsvd138, 138, 5, 3, RSVD)                        \
	F(alternate_local_ack_timeout, 139, 0, 5, U8)       \
	F(sap_supported, 139, 5, 1, U8)                     \
	F(_rsvd139, 139, 6, 2, RSVD)                        \
	F(private_data, 140, 0, 736, BYTES)

/* Table 107: MRA. */
#define CMP_MRA_FIELDS(F)                          \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(message_mraed, 8, 0, 2, U8)              \
	F(_rsvd8, 8, 2, 6, RSVD)                   \
	F(service_timeout, 9, 0, 5, U8)            \
	F(_rsvd9, 9, 5, 3, RSVD)                   \
	F(private_data, 10, 0, 1776, BYTES)

/* Table 108: REJ. */
#define CMP_REJ_FIELDS(F)                          \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(message_rejected, 8, 0, 2, U8)           \
	F(_rsvd8, 8, 2, 6, RSVD)                   \
	F(reject_info_length, 9, 0, 7, U8)         \
	F(_rsvd9, 9, 7, 1, RSVD)                   \
	F(reason, 10, 0, 16, U16)                  \
	F(ari, 12, 0, 576, BYTES)                  \
	F(private_data, 84, 0, 1184, BYTES)

/* Table 110: REP. ECE VendorID split over bytes 15 (high), 19, 23 (low). */
#define CMP_REP_FIELDS(F)                                \
	F(local_comm_id, 0, 0, 32, U32)                  \
	F(remote_comm_id, 4, 0, 32, U32)                 \
	F(local_qkey, 8, 0, 32, U32)                     \
	F(local_qpn, 12, 0, 24, U32)                     \
	F(vendor_id_h, 15, 0, 8, U8)                     \
	F(local_eecn, 16, 0, 24, U32)                    \
	F(vendor_id_m, 19, 0, 8, U8)                     \
	F(starting_psn, 20, 0, 24, U32)                  \
	F(vendor_id_l, 23, 0, 8, U8)                     \
	F(responder_resources, 24, 0, 8, U8)             \
	F(initiator_depth, 25, 0, 8, U8)                 \
	F(target_ack_delay, 26, 0, 5, U8)                \
	F(failover_accepted, 26, 5, 2, U8)               \
	F(end_to_end_flow_control, 26, 7, 1, U8)         \
	F(rnr_retry_count, 27, 0, 3, U8)                 \
	F(srq, 27, 3, 1, U8)                             \
	F(_rsvd27, 27, 4, 4, RSVD)                       \
	F(local_ca_guid, 28, 0, 64, U64)                 \
	F(private_data, 36, 0, 1568, BYTES)

/* Table 111: RTU. */
#define CMP_RTU_FIELDS(F)                          \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(private_data, 8, 0, 1792, BYTES)

/* Table 112: DREQ. */
#define CMP_DREQ_FIELDS(F)                         \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(remote_qpn_eecn, 8, 0, 24, U32)          \
	F(_rsvd11, 11, 0, 8, RSVD)                 \
	F(private_data, 12, 0, 1760, BYTES)

/* Table 113: DREP. */
#define CMP_DREP_FIELDS(F)                         \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(private_data, 8, 0, 1792, BYTES)

/* Table 115: LAP. */
#define CMP_LAP_FIELDS(F)                                 \
	F(local_comm_id, 0, 0, 32, U32)                   \
	F(remote_comm_id, 4, 0, 32, U32)                  \
	F(_rsvd8, 8, 0, 32, RSVD)                         \
	F(remote_qpn_eecn, 12, 0, 24, U32)                \
	F(remote_cm_response_timeout, 15, 0, 5, U8)       \
	F(_rsvd15, 15, 5, 3, RSVD)                        \
	F(_rsvd16, 16, 0, 32, RSVD)                       \
	F(alternate_local_lid, 20, 0, 16, U16)            \
	F(alternate_remote_lid, 22, 0, 16, U16)           \
	F(alternate_local_gid, 24, 0, 128, GID)           \
	F(alternate_remote_gid, 40, 0, 128, GID)          \
	F(alternate_flow_label, 56, 0, 20, U32)           \
	F(_rsvd58, 58, 4, 4, RSVD)                        \
	F(alternate_traffic_class, 59, 0, 8, U8)          \
	F(alternate_hop_limit, 60, 0, 8, U8)              \
	F(_rsvd61, 61, 0, 2, RSVD)                        \
	F(alternate_packet_rate, 61, 2, 6, U8)            \
	F(alternate_sl, 62, 0, 4, U8)                     \
	F(alternate_subnet_local, 62, 4, 1, U8)           \
	F(_rsvd62, 62, 5, 3, RSVD)                        \
	F(alternate_local_ack_timeout, 63, 0, 5, U8)      \
	F(_rsvd63, 63, 5, 3, RSVD)                        \
	F(private_data, 64, 0, 1344, BYTES)

/* Table 116: APR. */
#define CMP_APR_FIELDS(F)                          \
	F(local_comm_id, 0, 0, 32, U32)            \
	F(remote_comm_id, 4, 0, 32, U32)           \
	F(additional_info_length, 8, 0, 8, U8)     \
	F(ap_status, 9, 0, 8, U8)                  \
	F(_rsvd10, 10, 0, 16, RSVD)                \
	F(additional_info, 12, 0, 576, BYTES)      \
	F(private_data, 84, 0, 1184, BYTES)

/* Table 119: SIDR_REQ. */
#define CMP_SIDR_REQ_FIELDS(F)                     \
	F(request_id, 0, 0, 32, U32)               \
	F(pkey, 4, 0, 16, U16)                     \
	F(_rsvd6, 6, 0, 16, RSVD)                  \
	F(service_id, 8, 0, 64, U64)               \
	F(private_data, 16, 0, 1728, BYTES)

/* Table 120: SIDR_REP. ECE VendorID split over bytes 6-7 (high) and 11. */
#define CMP_SIDR_REP_FIELDS(F)                     \
	F(request_id, 0, 0, 32, U32)               \
	F(status, 4, 0, 8, U8)                     \
	F(additional_info_length, 5, 0, 8, U8)     \
	F(vendor_id_h, 6, 0, 16, U16)              \
	F(qpn, 8, 0, 24, U32)                      \
	F(vendor_id_l, 11, 0, 8, U8)               \
	F(service_id, 12, 0, 64, U64)              \
	F(qkey, 20, 0, 32, U32)                    \
	F(additional_info, 24, 0, 576, BYTES)      \
	F(private_data, 96, 0, 1088, BYTES)

struct cmp_cm_cpi { CMP_STRUCT_MEMBERS(CMP_CM_CPI_FIELDS) };
struct cmp_cm_req { CMP_STRUCT_MEMBERS(CMP_REQ_FIELDS) };
struct cmp_cm_mra { CMP_STRUCT_MEMBERS(CMP_MRA_FIELDS) };
struct cmp_cm_rej { CMP_STRUCT_MEMBERS(CMP_REJ_FIELDS) };
struct cmp_cm_rep { CMP_STRUCT_MEMBERS(CMP_REP_FIELDS) };
struct cmp_cm_rtu { CMP_STRUCT_MEMBERS(CMP_RTU_FIELDS) };
struct cmp_cm_dreq { CMP_STRUCT_MEMBERS(CMP_DREQ_FIELDS) };
struct cmp_cm_drep { CMP_STRUCT_MEMBERS(CMP_DREP_FIELDS) };
struct cmp_cm_lap { CMP_STRUCT_MEMBERS(CMP_LAP_FIELDS) };
struct cmp_cm_apr { CMP_STRUCT_MEMBERS(CMP_APR_FIELDS) };
struct cmp_cm_sidr_req { CMP_STRUCT_MEMBERS(CMP_SIDR_REQ_FIELDS) };
struct cmp_cm_sidr_rep { CMP_STRUCT_MEMBERS(CMP_SIDR_REP_FIELDS) };

/* A decoded CM MAD: header plus the message selected by hdr.attr_id. */
struct cmp_cm_msg {
	struct cmp_mad_hdr hdr;
	union {
		struct cmp_cm_cpi cpi;
		struct cmp_cm_req req;
		struct cmp_cm_mra mra;
		struct cmp_cm_rej rej;
		struct cmp_cm_rep rep;
		struct cmp_cm_rtu rtu;
		struct cmp_cm_dreq dreq;
		struct cmp_cm_drep drep;
		struct cmp_cm_lap lap;
		struct cmp_cm_apr apr;
		struct cmp_cm_sidr_req sidr_req;
		struct cmp_cm_sidr_rep sidr_rep;
	} u;
};

/* Message rows for an attribute id, or NULL if the CM class has none. */
const struct cmp_layout *cmp_cm_layout(uint16_t attr_id);
/* Every attribute the codec knows, for tests and tools (terminated by 0). */
extern const uint16_t cmp_cm_attrs[];
const char *cmp_cm_attr_str(uint16_t attr_id);
const char *cmp_cm_rej_reason_str(uint16_t reason);
/* What QP a REQ connects, from its transport service type and extended
 * transport type: "RC", "UC", "RD", "XRC" (3 with extended type 1), or
 * "reserved". */
const char *cmp_cm_req_qp_type_str(const struct cmp_cm_req *r);
/* The comm IDs a decoded CM message carries: its sender's (local) and its
 * receiver's (remote), 0 where it has none (a REQ has no remote ID,
 * ClassPortInfo neither). A SIDR request ID is the requester's: local in a
 * SIDR_REQ, remote in the SIDR_REP. */
uint32_t cmp_cm_local_id(const struct cmp_cm_msg *m);
uint32_t cmp_cm_remote_id(const struct cmp_cm_msg *m);

/* Decodes a 256-byte CM MAD. Returns 0 (possibly with warnings in d), or -1
 * when the MAD must be dropped; d (may be NULL) says precisely why. */
int cmp_cm_decode(const uint8_t *mad, size_t len, struct cmp_cm_msg *msg, struct cmp_diags *d);
/* Checks a decoded message's semantic rules (enumerations, lengths). */
void cmp_cm_validate(const struct cmp_cm_msg *msg, struct cmp_diags *d);
/* Encodes; fills mgmt_class, class_version and base_version. Returns -1
 * (and writes nothing) for an attribute the codec does not know. */
int cmp_cm_encode(const struct cmp_cm_msg *msg, uint8_t mad[CMP_MAD_SIZE]);

/* ECE VendorID split across fields. */
uint32_t cmp_cm_rep_vendor_id(const struct cmp_cm_rep *rep);
void cmp_cm_rep_set_vendor_id(struct cmp_cm_rep *rep, uint32_t vendor_id);
uint32_t cmp_cm_sidr_rep_vendor_id(const struct cmp_cm_sidr_rep *rep);
void cmp_cm_sidr_rep_set_vendor_id(struct cmp_cm_sidr_rep *rep, uint32_t vendor_id);

/* Every field, one per line. */
void cmp_cm_print(const struct cmp_cm_msg *msg, FILE *out, int indent);
/* `"hdr": {...}, "msg": {...}` (no outer braces). */
void cmp_cm_json(const struct cmp_cm_msg *msg, FILE *out);

#endif
