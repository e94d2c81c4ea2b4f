/* cmp_diag.c - collecting decode diagnostics. */
#include "cm_proto/cmp_diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void cmp_diags_init(struct cmp_diags *d)
{
	memset(d, 0, sizeof(*d));
}

void cmp_diag_add(struct cmp_diags *d, enum cmp_diag_sev sev, enum cmp_diag_code code,
		  unsigned byte, unsigned bit, const char *field, const char *fmt, ...)
{
	va_list ap;

	if (!d)
		return;
	d->total++;
	if (sev == CMP_DIAG_ERROR)
		d->errors++;
	if (d->n >= CMP_DIAG_MAX)
		return;
	struct cmp_diag *x = &d->d[d->n++];
	x->sev = (uint8_t)sev;
	x->code = (uint8_t)code;
	x->byte = (uint16_t)byte;
	x->bit = (uint8_t)bit;
	x->field = field ? field : "";
	va_start(ap, fmt);
	vsnprintf(x->text, sizeof(x->text), fmt, ap);
	va_end(ap);
}

const char *cmp_diag_code_str(enum cmp_diag_code code)
{
	switch (code) {
	case CMP_E_LENGTH: return "length";
	case CMP_E_BASE_VERSION: return "base-version";
	case CMP_E_CLASS: return "class";
	case CMP_E_CLASS_VERSION: return "class-version";
	case CMP_E_METHOD: return "method";
	case CMP_E_ATTR: return "attribute";
	case CMP_E_RESERVED: return "reserved";
	case CMP_E_VALUE: return "value";
	case CMP_E_LENGTH_FIELD: return "length-field";
	}
	return "?";
}
