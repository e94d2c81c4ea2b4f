/*
 * cmp_mad.h - the 24-byte MAD common header (IBTA Vol1 13.4.3), shared by
 * every management class uscm speaks (CM here, SA in umad/).
 */
#ifndef USCM_CMP_MAD_H
#define USCM_CMP_MAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <infiniband/umad_types.h>

#include "cm_proto/cmp_diag.h"
#include "cm_proto/cmp_field.h"

#define CMP_MAD_SIZE 256
#define CMP_MAD_HDR_SIZE 24

#define CMP_MAD_HDR_FIELDS(F)                  \
	F(base_version, 0, 0, 8, U8)           \
	F(mgmt_class, 1, 0, 8, U8)             \
	F(class_version, 2, 0, 8, U8)          \
	F(method, 3, 0, 8, U8)                 \
	F(status, 4, 0, 16, U16)               \
	F(class_specific, 6, 0, 16, U16)       \
	F(tid, 8, 0, 64, U64)                  \
	F(attr_id, 16, 0, 16, U16)             \
	F(_rsvd18, 18, 0, 16, RSVD)            \
	F(attr_mod, 20, 0, 32, U32)

struct cmp_mad_hdr {
	CMP_STRUCT_MEMBERS(CMP_MAD_HDR_FIELDS)
};

extern const struct cmp_layout cmp_mad_hdr_layout;

#define CMP_CPI_SIZE 72
/* ClassPortInfo (IBTA 13.4.8.1): 72 bytes, common to every class. */
#define CMP_CPI_FIELDS(F)                         \
	F(base_version, 0, 0, 8, U8)                 \
	F(class_version, 1, 0, 8, U8)                \
	F(capability_mask, 2, 0, 16, U16)            \
	F(capability_mask2, 4, 0, 27, U32)           \
	F(resp_time_value, 7, 3, 5, U8)              \
	F(redirect_gid, 8, 0, 128, GID)              \
	F(redirect_tc, 24, 0, 8, U8)                 \
	F(redirect_sl, 25, 0, 4, U8)                 \
	F(redirect_fl, 25, 4, 20, U32)               \
	F(redirect_lid, 28, 0, 16, U16)              \
	F(redirect_pkey, 30, 0, 16, U16)             \
	F(_rsvd32, 32, 0, 8, RSVD)                   \
	F(redirect_qp, 33, 0, 24, U32)               \
	F(redirect_qkey, 36, 0, 32, U32)             \
	F(trap_gid, 40, 0, 128, GID)                 \
	F(trap_tc, 56, 0, 8, U8)                     \
	F(trap_sl, 57, 0, 4, U8)                     \
	F(trap_fl, 57, 4, 20, U32)                   \
	F(trap_lid, 60, 0, 16, U16)                  \
	F(trap_pkey, 62, 0, 16, U16)                 \
	F(trap_hl, 64, 0, 8, U8)                     \
	F(trap_qp, 65, 0, 24, U32)                   \
	F(trap_qkey, 68, 0, 32, U32)

struct cmp_cpi { CMP_STRUCT_MEMBERS(CMP_CPI_FIELDS) };
/* The 72-byte ClassPortInfo record alone (SA data, or the CM table's head). */
extern const struct cmp_layout cmp_cpi_layout;


/* Decodes and checks the parts every class shares: exactly 256 bytes, base
 * version 1, header reserved field. Returns 0, or -1 (diagnostic added). */
int cmp_mad_hdr_decode(const uint8_t *mad, size_t len, struct cmp_mad_hdr *hdr,
		       struct cmp_diags *d);
/* cmp_mad_hdr_decode(), then the management class and class version a
 * class codec speaks (`name` names the class in the diagnostics). */
int cmp_mad_hdr_decode_class(const uint8_t *mad, size_t len, struct cmp_mad_hdr *hdr,
			     uint8_t mgmt_class, uint8_t class_version, const char *name,
			     struct cmp_diags *d);
void cmp_mad_hdr_encode(const struct cmp_mad_hdr *hdr, uint8_t mad[CMP_MAD_SIZE]);

const char *cmp_mad_class_str(uint8_t mgmt_class);
const char *cmp_mad_method_str(uint8_t mgmt_class, uint8_t method);

#endif
