/*
 * um_sa.h - Subnet Administration MADs (class 0x03, version 2; IBTA Vol1
 * ch.15): the SA header, PathRecord, MCMemberRecord and ClassPortInfo, one
 * row list each, plus builders for the queries rdma_cm sends.
 *
 * An SA MAD is
 *     bytes   0..23   MAD common header        (cmp_mad_hdr_layout)
 *     bytes  24..55   RMPP header + SA header  (um_sa_hdr_layout, rows
 *                                               relative to MAD byte 24)
 *     bytes  56..255  200 bytes of SA data      (record rows relative to 56)
 * Every bit of the SA header and of each record is described, reserved rows
 * included; the tests check that.  Diagnostics carry MAD byte offsets.
 *
 * Constants come from <infiniband/umad_sa.h>, <infiniband/umad_sa_mcm.h> and
 * <infiniband/umad_types.h>; only what those headers lack is defined here.
 */
#ifndef USCM_UM_SA_H
#define USCM_UM_SA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sa_mcm.h>
#include <infiniband/umad_types.h>

#include "cm_proto/cmp_mad.h"

#define UM_SA_HDR_OFFSET CMP_MAD_HDR_SIZE /* 24: RMPP header starts here */
#define UM_SA_HDR_SIZE 32                 /* RMPP (12) + SA (20) header */
#define UM_SA_DATA_OFFSET (UM_SA_HDR_OFFSET + UM_SA_HDR_SIZE) /* 56 */
/* The part of the SA header that RMPP counts as payload in every segment:
 * SM_Key, AttributeOffset, reserved, ComponentMask. */
#define UM_SA_RMPP_CLASS_HDR 20

#define UM_SA_PR_SIZE 64
#define UM_SA_MCM_SIZE 56 /* 52 bytes of fields, padded to 8-byte multiple */

/* RMPP header values <infiniband/umad_types.h> does not carry (IBTA 13.6.2;
 * Linux include/rdma/ib_mad.h IB_MGMT_RMPP_*). */
enum {
	UM_SA_RMPP_TYPE_DATA = 1,
	UM_SA_RMPP_TYPE_ACK = 2,
	UM_SA_RMPP_TYPE_STOP = 3,
	UM_SA_RMPP_TYPE_ABORT = 4,
	UM_SA_RMPP_FLAG_FIRST = 1 << 1, /* UMAD_RMPP_FLAG_ACTIVE is 1 << 0 */
	UM_SA_RMPP_FLAG_LAST = 1 << 2,
	UM_SA_RMPP_NO_RESPTIME = 0x1F,
};

/* PathRecord component mask (IBTA 15.2.5.16; Linux ib_sa.h IB_SA_PATH_REC_*,
 * opensm ib_types.h IB_PR_COMPMASK_*). ServiceID spans two bits which must
 * be set or cleared together (CA13-6). Bit 7 is reserved. */
#define UM_SA_PR_COMP_SERVICE_ID_8MSB (1ULL << 0)
#define UM_SA_PR_COMP_SERVICE_ID_56LSB (1ULL << 1)
#define UM_SA_PR_COMP_SERVICE_ID (UM_SA_PR_COMP_SERVICE_ID_8MSB | UM_SA_PR_COMP_SERVICE_ID_56LSB)
#define UM_SA_PR_COMP_DGID (1ULL << 2)
#define UM_SA_PR_COMP_SGID (1ULL << 3)
#define UM_SA_PR_COMP_DLID (1ULL << 4)
#define UM_SA_PR_COMP_SLID (1ULL << 5)
#define UM_SA_PR_COMP_RAW_TRAFFIC (1ULL << 6)
#define UM_SA_PR_COMP_FLOW_LABEL (1ULL << 8)
#define UM_SA_PR_COMP_HOP_LIMIT (1ULL << 9)
#define UM_SA_PR_COMP_TCLASS (1ULL << 10)
#define UM_SA_PR_COMP_REVERSIBLE (1ULL << 11)
#define UM_SA_PR_COMP_NUMB_PATH (1ULL << 12)
#define UM_SA_PR_COMP_PKEY (1ULL << 13)
#define UM_SA_PR_COMP_QOS_CLASS (1ULL << 14)
#define UM_SA_PR_COMP_SL (1ULL << 15)
#define UM_SA_PR_COMP_MTU_SELECTOR (1ULL << 16)
#define UM_SA_PR_COMP_MTU (1ULL << 17)
#define UM_SA_PR_COMP_RATE_SELECTOR (1ULL << 18)
#define UM_SA_PR_COMP_RATE (1ULL << 19)
#define UM_SA_PR_COMP_PKT_LIFE_TIME_SELECTOR (1ULL << 20)
#define UM_SA_PR_COMP_PKT_LIFE_TIME (1ULL << 21)
#define UM_SA_PR_COMP_PREFERENCE (1ULL << 22)
#define UM_SA_PR_COMP_ALL 0x7FFF7FULL /* bits 0-22 except reserved bit 7 */
#define UM_SA_MCM_COMP_ALL 0x3FFFFULL /* bits 0-17 */

/* What rdma_cm asks for (Linux cma.c cma_query_ib_route). */
#define UM_SA_PR_QUERY_COMP                                                  \
	(UM_SA_PR_COMP_DGID | UM_SA_PR_COMP_SGID | UM_SA_PR_COMP_PKEY |       \
	 UM_SA_PR_COMP_NUMB_PATH | UM_SA_PR_COMP_REVERSIBLE | UM_SA_PR_COMP_SERVICE_ID)
/* Linux cma.c cma_join_ib_multicast: every join ... */
#define UM_SA_MCM_JOIN_COMP                                                  \
	((uint64_t)UMAD_SA_MCM_COMP_MASK_MGID | UMAD_SA_MCM_COMP_MASK_PORT_GID | \
	 UMAD_SA_MCM_COMP_MASK_PKEY | UMAD_SA_MCM_COMP_MASK_JOIN_STATE |         \
	 UMAD_SA_MCM_COMP_MASK_QKEY | UMAD_SA_MCM_COMP_MASK_SL |                 \
	 UMAD_SA_MCM_COMP_MASK_FLOW_LABEL | UMAD_SA_MCM_COMP_MASK_TCLASS)
/* ... plus these for the IPoIB port space. */
#define UM_SA_MCM_JOIN_COMP_IPOIB                                            \
	((uint64_t)UMAD_SA_MCM_COMP_MASK_RATE | UMAD_SA_MCM_COMP_MASK_RATE_SEL | \
	 UMAD_SA_MCM_COMP_MASK_MTU_SEL | UMAD_SA_MCM_COMP_MASK_MTU |             \
	 UMAD_SA_MCM_COMP_MASK_HOP_LIMIT)
/* Linux multicast.c send_leave. */
#define UM_SA_MCM_LEAVE_COMP                                                 \
	((uint64_t)UMAD_SA_MCM_COMP_MASK_MGID | UMAD_SA_MCM_COMP_MASK_PORT_GID | \
	 UMAD_SA_MCM_COMP_MASK_JOIN_STATE)

/* RMPP header (IBTA 13.6.2.1) and SA header (15.2.1.1), relative to MAD
 * byte 24. Reserved rows are named by their MAD byte, as the spec figure
 * numbers them. */
#define UM_SA_HDR_FIELDS(F)                     \
	F(rmpp_version, 0, 0, 8, U8)            \
	F(rmpp_type, 1, 0, 8, U8)               \
	F(rmpp_resp_time, 2, 0, 5, U8)          \
	F(rmpp_flags, 2, 5, 3, U8)              \
	F(rmpp_status, 3, 0, 8, U8)             \
	F(seg_num, 4, 0, 32, U32)               \
	F(paylen_newwin, 8, 0, 32, U32)         \
	F(sm_key, 12, 0, 64, U64)               \
	F(attr_offset, 20, 0, 16, U16)          \
	F(_rsvd46, 22, 0, 16, RSVD)             \
	F(comp_mask, 24, 0, 64, U64)

/* PathRecord (IBTA 15.2.5.16), relative to MAD byte 56. */
#define UM_SA_PR_FIELDS(F)                                \
	F(service_id, 0, 0, 64, U64)                      \
	F(dgid, 8, 0, 128, GID)                           \
	F(sgid, 24, 0, 128, GID)                          \
	F(dlid, 40, 0, 16, U16)                           \
	F(slid, 42, 0, 16, U16)                           \
	F(raw_traffic, 44, 0, 1, U8)                      \
	F(_rsvd44, 44, 1, 3, RSVD)                        \
	F(flow_label, 44, 4, 20, U32)                     \
	F(hop_limit, 47, 0, 8, U8)                        \
	F(tclass, 48, 0, 8, U8)                           \
	F(reversible, 49, 0, 1, U8)                       \
	F(numb_path, 49, 1, 7, U8)                        \
	F(pkey, 50, 0, 16, U16)                           \
	F(qos_class, 52, 0, 12, U16)                      \
	F(sl, 53, 4, 4, U8)                               \
	F(mtu_selector, 54, 0, 2, U8)                     \
	F(mtu, 54, 2, 6, U8)                              \
	F(rate_selector, 55, 0, 2, U8)                    \
	F(rate, 55, 2, 6, U8)                             \
	F(packet_life_time_selector, 56, 0, 2, U8)        \
	F(packet_life_time, 56, 2, 6, U8)                 \
	F(preference, 57, 0, 8, U8)                       \
	F(_rsvd58, 58, 0, 48, RSVD)

/* MCMemberRecord (IBTA 15.2.5.17), relative to MAD byte 56; the 4 pad bytes
 * that round it to 56 are described as reserved. */
#define UM_SA_MCM_FIELDS(F)                               \
	F(mgid, 0, 0, 128, GID)                           \
	F(port_gid, 16, 0, 128, GID)                      \
	F(qkey, 32, 0, 32, U32)                           \
	F(mlid, 36, 0, 16, U16)                           \
	F(mtu_selector, 38, 0, 2, U8)                     \
	F(mtu, 38, 2, 6, U8)                              \
	F(tclass, 39, 0, 8, U8)                           \
	F(pkey, 40, 0, 16, U16)                           \
	F(rate_selector, 42, 0, 2, U8)                    \
	F(rate, 42, 2, 6, U8)                             \
	F(packet_life_time_selector, 43, 0, 2, U8)        \
	F(packet_life_time, 43, 2, 6, U8)                 \
	F(sl, 44, 0, 4, U8)                               \
	F(flow_label, 44, 4, 20, U32)                     \
	F(hop_limit, 47, 0, 8, U8)                        \
	F(scope, 48, 0, 4, U8)                            \
	F(join_state, 48, 4, 4, U8)                       \
	F(proxy_join, 49, 0, 1, U8)                       \
	F(_rsvd49, 49, 1, 7, RSVD)                        \
	F(_rsvd50, 50, 0, 16, RSVD)                       \
	F(_pad52, 52, 0, 32, RSVD)

struct um_sa_hdr { CMP_STRUCT_MEMBERS(UM_SA_HDR_FIELDS) };
struct um_sa_path_rec { CMP_STRUCT_MEMBERS(UM_SA_PR_FIELDS) };
struct um_sa_mcm_rec { CMP_STRUCT_MEMBERS(UM_SA_MCM_FIELDS) };

extern const struct cmp_layout um_sa_hdr_layout;    /* 32 bytes at MAD 24 */
extern const struct cmp_layout um_sa_path_rec_layout; /* 64 bytes at MAD 56 */
extern const struct cmp_layout um_sa_mcm_rec_layout;  /* 56 bytes at MAD 56 */
/* ClassPortInfo is cmp_cpi_layout (cm_proto/cmp_mad.h), 72 bytes at MAD 56. */

/* A decoded SA MAD: header, SA header, the first record of the segment. */
struct um_sa_msg {
	struct cmp_mad_hdr hdr;
	struct um_sa_hdr sa;
	union {
		struct um_sa_path_rec pr;
		struct um_sa_mcm_rec mcm;
		struct cmp_cpi cpi;
	} u;
	/* Whole records this MAD carries from byte 56 on: 1 for a single-record
	 * method, 0..n for a GetTableResp (first segment), 0 when no record
	 * starts at byte 56 (RMPP ACK/STOP/ABORT, later segments, error
	 * GetTableResp). Only record 0 is decoded into u; see um_sa_record_get. */
	uint16_t nrecords;
};

/* Record rows for an attribute id, or NULL if the codec does not know it. */
const struct cmp_layout *um_sa_layout(uint16_t attr_id);
/* Every attribute the codec knows (terminated by 0). */
extern const uint16_t um_sa_attrs[];
const char *um_sa_attr_str(uint16_t attr_id);
/* Text for a MAD status word: the SA class code (bits 15:8, the
 * UMAD_SA_STATUS_* values) when set, else the common MAD status. */
const char *um_sa_status_str(uint16_t status);
/* Names of the components set in `mask` for attribute `attr_id`, joined by
 * '|' ("none" when empty, "bitN" for bits the attribute does not define).
 * PathRecord bits 0+1 together print as "ServiceID". Returns buf. */
const char *um_sa_comp_mask_str(uint16_t attr_id, uint64_t mask, char *buf, size_t len);

/* Decodes a 256-byte SA MAD. Returns 0 (possibly with warnings in d), or -1
 * when the MAD must be dropped; d (may be NULL) says precisely why. */
int um_sa_decode(const uint8_t *mad, size_t len, struct um_sa_msg *m, struct cmp_diags *d);
/* Encodes header, SA header and u (as record 0); the rest of the data area
 * is zero. Fills base_version, mgmt_class and class_version; method 0 means
 * Get. Returns -1 (and writes nothing) for an attribute the codec does not
 * know. */
int um_sa_encode(const struct um_sa_msg *m, uint8_t mad[CMP_MAD_SIZE]);

/* Record i of a decoded MAD (i < m->nrecords) into rec (struct
 * um_sa_path_rec / um_sa_mcm_rec / cmp_cpi per m->hdr.attr_id). Returns 0 or
 * -1. */
int um_sa_record_get(const uint8_t mad[CMP_MAD_SIZE], const struct um_sa_msg *m, unsigned i,
		     void *rec);
/* Writes record i of attribute attr_id into the data area of mad (for
 * building table responses). Returns -1 if it does not fit in 200 bytes. */
int um_sa_record_put(uint8_t mad[CMP_MAD_SIZE], uint16_t attr_id, unsigned i, const void *rec);

/* PathRecord query as Linux cma_query_ib_route + ib_sa_path_rec_get send
 * it: SubnAdmGet (0x01), AttributeOffset 0, NumbPath 1, Reversible 1,
 * comp mask UM_SA_PR_QUERY_COMP, plus QOS_CLASS = qos_class when
 * qos_class >= 0 (AF_INET: the IP ToS). */
void um_sa_path_query(struct um_sa_msg *m, uint64_t tid, const uint8_t sgid[16],
		      const uint8_t dgid[16], uint16_t pkey, uint64_t service_id, int qos_class);
/* The AF_INET6 / AF_IB variant: replaces QoSClass by TClass (the flow info's
 * traffic class), as cma_query_ib_route does for those families. */
void um_sa_path_query_tclass(struct um_sa_msg *m, uint8_t tclass);
/* MCMemberRecord join: SubnAdmSet (0x02) of rec (MGID, PortGID, Q_Key,
 * P_Key, JoinState and, as the kernel copies them from the broadcast group,
 * SL, FlowLabel, TClass, MTU, Rate, HopLimit) with UM_SA_MCM_JOIN_COMP, plus
 * UM_SA_MCM_JOIN_COMP_IPOIB when ipoib_ps. */
void um_sa_mcm_join(struct um_sa_msg *m, uint64_t tid, const struct um_sa_mcm_rec *rec,
		    int ipoib_ps);
/* MCMemberRecord leave: SubnAdmDelete (0x15) of rec with JoinState =
 * leave_state and UM_SA_MCM_LEAVE_COMP. */
void um_sa_mcm_leave(struct um_sa_msg *m, uint64_t tid, const struct um_sa_mcm_rec *rec,
		     uint8_t leave_state);
/* ClassPortInfo Get (what ib_sa does to learn the SA's capabilities). */
void um_sa_cpi_query(struct um_sa_msg *m, uint64_t tid);

/* One-line summary for trace listings, each item preceded by a space:
 * the key fields of the record, the record count of a table, the
 * components and a non-zero status. */
void um_sa_summary(const struct um_sa_msg *m, FILE *out);
/* Every field, one per line. */
void um_sa_print(const struct um_sa_msg *m, FILE *out, int indent);
/* `"hdr": {...}, "sa": {...}, "nrecords": n, "rec": {...}` (no outer braces). */
void um_sa_json(const struct um_sa_msg *m, FILE *out);

#endif
