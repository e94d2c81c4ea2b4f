/*
 * cmp_diag.h - precise decode diagnostics: what is wrong, where, how bad.
 */
#ifndef USCM_CMP_DIAG_H
#define USCM_CMP_DIAG_H

#include <stdint.h>

enum cmp_diag_sev {
	CMP_DIAG_WARN,  /* legal to ignore (reserved bits set, unknown reason) */
	CMP_DIAG_ERROR, /* the MAD must be dropped */
};

enum cmp_diag_code {
	CMP_E_LENGTH = 1,     /* not a 256-byte MAD */
	CMP_E_BASE_VERSION,   /* base version != 1 */
	CMP_E_CLASS,          /* not the management class this codec decodes */
	CMP_E_CLASS_VERSION,  /* class version this codec does not speak */
	CMP_E_METHOD,         /* method not valid for the attribute */
	CMP_E_ATTR,           /* unknown attribute id */
	CMP_E_RESERVED,       /* a reserved field is not zero */
	CMP_E_VALUE,          /* a field holds a reserved / out-of-range value */
	CMP_E_LENGTH_FIELD,   /* a length field points past its byte array */
};

struct cmp_diag {
	uint8_t sev;        /* enum cmp_diag_sev */
	uint8_t code;       /* enum cmp_diag_code */
	uint16_t byte;      /* offset in the MAD of the offending field */
	uint8_t bit;
	const char *field;  /* field name, or "" */
	char text[120];
};

#define CMP_DIAG_MAX 16
struct cmp_diags {
	unsigned n;      /* kept (at most CMP_DIAG_MAX) */
	unsigned total;  /* found, including those not kept */
	unsigned errors; /* of severity ERROR */
	struct cmp_diag d[CMP_DIAG_MAX];
};

void cmp_diags_init(struct cmp_diags *d);
/* Adds one diagnostic (d may be NULL: then only the return value counts). */
__attribute__((format(printf, 7, 8)))
void cmp_diag_add(struct cmp_diags *d, enum cmp_diag_sev sev, enum cmp_diag_code code,
		  unsigned byte, unsigned bit, const char *field, const char *fmt, ...);
const char *cmp_diag_code_str(enum cmp_diag_code code);

#endif
