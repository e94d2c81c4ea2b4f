/*
 * cmp_field.c - generic walkers over cmp_layout tables (see cmp_field.h).
 * The only place in uscm where wire bits are shifted.
 */
#include "cm_proto/cmp_field.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <string.h>

uint64_t cmp_bits_get(const uint8_t *buf, unsigned byte, unsigned bit, unsigned width)
{
	uint64_t v = 0;
	unsigned pos = byte * 8 + bit;

	/* Bit-serial is plenty fast for 256-byte MADs and obviously correct for
	 * fields that straddle bytes (flow labels, 24-bit QPNs). Whole bytes
	 * take the fast path. */
	while (width) {
		if ((pos & 7) == 0 && width >= 8) {
			v = (v << 8) | buf[pos >> 3];
			pos += 8;
			width -= 8;
			continue;
		}
		v = (v << 1) | ((buf[pos >> 3] >> (7 - (pos & 7))) & 1u);
		pos++;
		width--;
	}
	return v;
}

void cmp_bits_set(uint8_t *buf, unsigned byte, unsigned bit, unsigned width, uint64_t v)
{
	unsigned pos = byte * 8 + bit + width; /* one past the last bit */

	while (width) {
		if ((pos & 7) == 0 && width >= 8) {
			pos -= 8;
			buf[pos >> 3] = (uint8_t)v;
			v >>= 8;
			width -= 8;
			continue;
		}
		pos--;
		uint8_t m = (uint8_t)(1u << (7 - (pos & 7)));
		if (v & 1)
			buf[pos >> 3] |= m;
		else
			buf[pos >> 3] &= (uint8_t)~m;
		v >>= 1;
		width--;
	}
}

static unsigned kind_bits(uint8_t kind)
{
	switch (kind) {
	case CMP_K_U8: return 8;
	case CMP_K_U16: return 16;
	case CMP_K_U32: return 32;
	case CMP_K_U64: return 64;
	default: return 0;
	}
}

int cmp_layout_check(const struct cmp_layout *l, int full, char *err, size_t errlen)
{
	uint8_t seen[512];
	unsigned total = (unsigned)l->len * 8;

	if (l->len > sizeof(seen) / 1) {
		snprintf(err, errlen, "%s: length %u too large", l->name, l->len);
		return -1;
	}
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		unsigned start = f->byte * 8u + f->bit;
		unsigned kb = kind_bits(f->kind);

		if (f->bit > 7 || f->width == 0 || start + f->width > total) {
			snprintf(err, errlen, "%s.%s: bits %u..%u outside %u-byte structure",
				 l->name, f->name, start, start + f->width - 1, l->len);
			return -1;
		}
		if (kb && (f->width > kb || f->size * 8u != kb)) {
			snprintf(err, errlen, "%s.%s: %u bits do not fit a %u-bit member",
				 l->name, f->name, f->width, f->size * 8u);
			return -1;
		}
		if (f->kind == CMP_K_GID && (f->width != 128 || f->bit || f->size != 16)) {
			snprintf(err, errlen, "%s.%s: a GID is 128 aligned bits", l->name, f->name);
			return -1;
		}
		if (f->kind == CMP_K_BYTES && (f->width % 8 || f->bit || f->size * 8u != f->width)) {
			snprintf(err, errlen, "%s.%s: byte string not byte aligned", l->name, f->name);
			return -1;
		}
		if (f->kind != CMP_K_RSVD && (size_t)f->offset + f->size > l->size) {
			snprintf(err, errlen, "%s.%s: member outside struct", l->name, f->name);
			return -1;
		}
		for (unsigned b = start; b < start + f->width; b++) {
			if (seen[b >> 3] & (1u << (b & 7))) {
				snprintf(err, errlen, "%s.%s: bit %u (byte %u) described twice",
					 l->name, f->name, b, b / 8);
				return -1;
			}
			seen[b >> 3] |= (uint8_t)(1u << (b & 7));
		}
	}
	if (full) {
		for (unsigned b = 0; b < total; b++) {
			if (!(seen[b >> 3] & (1u << (b & 7)))) {
				snprintf(err, errlen, "%s: bit %u of byte %u is not described",
					 l->name, b & 7, b / 8);
				return -1;
			}
		}
	}
	return 0;
}

uint64_t cmp_field_value(const struct cmp_field *f, const void *obj)
{
	const uint8_t *p = (const uint8_t *)obj + f->offset;

	switch (f->kind) {
	case CMP_K_U8: return *p;
	case CMP_K_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
	case CMP_K_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
	case CMP_K_U64: { uint64_t v; memcpy(&v, p, 8); return v; }
	default: return 0;
	}
}

void cmp_field_set_value(const struct cmp_field *f, void *obj, uint64_t v)
{
	uint8_t *p = (uint8_t *)obj + f->offset;

	switch (f->kind) {
	case CMP_K_U8: *p = (uint8_t)v; break;
	case CMP_K_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
	case CMP_K_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
	case CMP_K_U64: memcpy(p, &v, 8); break;
	default: break;
	}
}

void cmp_layout_decode(const struct cmp_layout *l, const uint8_t *buf, void *obj)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];

		switch (f->kind) {
		case CMP_K_RSVD:
			break;
		case CMP_K_GID:
		case CMP_K_BYTES:
			memcpy((uint8_t *)obj + f->offset, buf + f->byte, f->width / 8u);
			break;
		default:
			cmp_field_set_value(f, obj, cmp_bits_get(buf, f->byte, f->bit, f->width));
			break;
		}
	}
}

void cmp_layout_encode(const struct cmp_layout *l, const void *obj, uint8_t *buf)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];

		switch (f->kind) {
		case CMP_K_RSVD:
			cmp_bits_set(buf, f->byte, f->bit, f->width, 0);
			break;
		case CMP_K_GID:
		case CMP_K_BYTES:
			memcpy(buf + f->byte, (const uint8_t *)obj + f->offset, f->width / 8u);
			break;
		default:
			cmp_bits_set(buf, f->byte, f->bit, f->width, cmp_field_value(f, obj));
			break;
		}
	}
}

const struct cmp_field *cmp_layout_find(const struct cmp_layout *l, const char *name)
{
	for (size_t i = 0; i < l->nfields; i++)
		if (strcmp(l->fields[i].name, name) == 0)
			return &l->fields[i];
	return NULL;
}

unsigned cmp_layout_check_reserved(const struct cmp_layout *l, const uint8_t *buf,
				   cmp_rsvd_cb cb, void *ctx)
{
	unsigned n = 0;

	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		uint64_t v = 0;

		if (f->kind != CMP_K_RSVD)
			continue;
		/* Reserved runs can be wider than 64 bits: OR the pieces. */
		for (unsigned done = 0; done < f->width; done += 64) {
			unsigned w = f->width - done < 64 ? f->width - done : 64;
			unsigned start = f->byte * 8u + f->bit + done;
			v |= cmp_bits_get(buf, start / 8, start % 8, w);
		}
		if (v) {
			n++;
			if (cb)
				cb(ctx, f, v);
		}
	}
	return n;
}

const char *cmp_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* Length of a byte string once trailing zero bytes are dropped. */
static size_t used_len(const uint8_t *p, size_t n)
{
	while (n && p[n - 1] == 0)
		n--;
	return n;
}

static void print_hex(FILE *out, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%02x", p[i]);
}

void cmp_layout_print(const struct cmp_layout *l, const void *obj, FILE *out, int indent)
{
	char gid[64];

	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		const uint8_t *p = (const uint8_t *)obj + f->offset;

		if (f->kind == CMP_K_RSVD)
			continue;
		fprintf(out, "%*s%s: ", indent, "", f->name);
		switch (f->kind) {
		case CMP_K_GID:
			fprintf(out, "%s\n", cmp_gid_str(p, gid, sizeof(gid)));
			break;
		case CMP_K_BYTES: {
			size_t n = used_len(p, f->size);
			if (n) {
				print_hex(out, p, n);
				fprintf(out, n < f->size ? " (+%zu zero bytes)\n" : "\n",
					(size_t)f->size - n);
			} else {
				fprintf(out, "(%u zero bytes)\n", f->size);
			}
			break;
		}
		default: {
			uint64_t v = cmp_field_value(f, obj);
			if (f->width >= 24)
				fprintf(out, "0x%0*" PRIx64 "\n", (f->width + 3) / 4, v);
			else
				fprintf(out, "%" PRIu64 "\n", v);
			break;
		}
		}
	}
}

void cmp_json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

void cmp_layout_json(const struct cmp_layout *l, const void *obj, FILE *out)
{
	char gid[64];
	int first = 1;

	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		const uint8_t *p = (const uint8_t *)obj + f->offset;

		if (f->kind == CMP_K_RSVD)
			continue;
		fprintf(out, "%s\"%s\": ", first ? "" : ", ", f->name);
		first = 0;
		switch (f->kind) {
		case CMP_K_GID:
			fprintf(out, "\"%s\"", cmp_gid_str(p, gid, sizeof(gid)));
			break;
		case CMP_K_BYTES:
			fputc('"', out);
			print_hex(out, p, used_len(p, f->size));
			fputc('"', out);
			break;
		default:
			/* 64-bit IDs as strings: JSON numbers lose precision above 2^53. */
			if (f->width > 53)
				fprintf(out, "\"0x%016" PRIx64 "\"", cmp_field_value(f, obj));
			else
				fprintf(out, "%" PRIu64, cmp_field_value(f, obj));
			break;
		}
	}
}
