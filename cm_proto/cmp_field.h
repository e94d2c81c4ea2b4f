/*
 * cmp_field.h - the table-driven bit-field engine behind every uscm codec.
 *
 * A wire structure is described once, as an X-macro list of rows
 *     F(name, byte, bit, width, KIND)
 * in IBTA notation: `byte` is the offset of the field's first byte from the
 * start of the structure, `bit` the offset of its first bit counted from the
 * most significant bit of that byte (IBTA numbers bits big-endian), `width` the
 * number of bits.  KIND is one of
 *     U8 U16 U32 U64  an unsigned integer of at most that many bits
 *     GID             a 128-bit GID, kept as 16 bytes in wire order
 *     BYTES           an opaque byte string (private data, ARI...), width%8==0
 *     RSVD            a reserved field: no struct member, must be zero
 * From the one list come the C struct (CMP_STRUCT_MEMBERS) and the table of
 * struct cmp_field rows (CMP_TABLE_ROWS); the encoder, decoder, reserved-bit
 * checker, printer and JSON writer below walk that table.  No codec in uscm
 * shifts a field by hand.
 */
#ifndef USCM_CMP_FIELD_H
#define USCM_CMP_FIELD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cmp_kind {
	CMP_K_U8,
	CMP_K_U16,
	CMP_K_U32,
	CMP_K_U64,
	CMP_K_GID,
	CMP_K_BYTES,
	CMP_K_RSVD,
};

struct cmp_field {
	const char *name;
	uint16_t byte;   /* first byte, relative to the structure */
	uint8_t bit;     /* first bit within `byte`, 0 = most significant */
	uint16_t width;  /* in bits */
	uint8_t kind;    /* enum cmp_kind */
	uint16_t offset; /* offsetof() the member in the C struct (0 for RSVD) */
	uint16_t size;   /* sizeof() the member (0 for RSVD) */
};

/* A described structure: `len` bytes on the wire, `size` bytes in C. */
struct cmp_layout {
	const char *name;
	uint16_t len;
	uint16_t size;
	const struct cmp_field *fields;
	size_t nfields;
};

/* ---- X-macro plumbing ------------------------------------------------- */
#define CMP_MEMBER_U8(n, w) uint8_t n;
#define CMP_MEMBER_U16(n, w) uint16_t n;
#define CMP_MEMBER_U32(n, w) uint32_t n;
#define CMP_MEMBER_U64(n, w) uint64_t n;
#define CMP_MEMBER_GID(n, w) uint8_t n[16];
#define CMP_MEMBER_BYTES(n, w) uint8_t n[(w) / 8];
#define CMP_MEMBER_RSVD(n, w)
#define CMP_MEMBER(n, byte, bit, w, kind) CMP_MEMBER_##kind(n, w)
/* Expands a row list into struct members. */
#define CMP_STRUCT_MEMBERS(LIST) LIST(CMP_MEMBER)

#define CMP_ROW_MEMBER(T, n, byte, bit, w, k)                                \
	{ #n, (byte), (bit), (w), CMP_K_##k, offsetof(T, n), sizeof(((T *)0)->n) },
#define CMP_ROW_U8(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, U8)
#define CMP_ROW_U16(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, U16)
#define CMP_ROW_U32(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, U32)
#define CMP_ROW_U64(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, U64)
#define CMP_ROW_GID(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, GID)
#define CMP_ROW_BYTES(T, n, byte, bit, w) CMP_ROW_MEMBER(T, n, byte, bit, w, BYTES)
#define CMP_ROW_RSVD(T, n, byte, bit, w) { #n, (byte), (bit), (w), CMP_K_RSVD, 0, 0 },
/* Inside CMP_TABLE_ROWS, CMP_ROW_TYPE must name the C struct. */
#define CMP_ROW(n, byte, bit, w, kind) CMP_ROW_##kind(CMP_ROW_TYPE, n, byte, bit, w)
#define CMP_TABLE_ROWS(LIST) LIST(CMP_ROW)

/* Initializer of a struct cmp_layout for C type T whose rows are ROWS. */
#define CMP_LAYOUT(NAME_STR, T, ROWS, WIRE_LEN)                                \
	{ (NAME_STR), (WIRE_LEN), sizeof(T), (ROWS), sizeof(ROWS) / sizeof((ROWS)[0]) }

/* ---- raw bit access (bounds are the caller's: byte+width within buf) -- */
uint64_t cmp_bits_get(const uint8_t *buf, unsigned byte, unsigned bit, unsigned width);
void cmp_bits_set(uint8_t *buf, unsigned byte, unsigned bit, unsigned width, uint64_t v);

/* ---- table walkers ----------------------------------------------------- */
/* Checks the table itself: rows inside `len`, no overlap, widths fit their
 * kinds, every bit of the structure covered exactly once when `full`.
 * Returns 0, or -1 with a message in err. */
int cmp_layout_check(const struct cmp_layout *l, int full, char *err, size_t errlen);

/* Wire -> struct. `buf` holds at least l->len bytes. Never fails. */
void cmp_layout_decode(const struct cmp_layout *l, const uint8_t *buf, void *obj);
/* Struct -> wire. Integer members wider than their field are masked; reserved
 * fields are written as zero. */
void cmp_layout_encode(const struct cmp_layout *l, const void *obj, uint8_t *buf);

/* Reads a member of obj described by row f as an integer (0 for GID/BYTES). */
uint64_t cmp_field_value(const struct cmp_field *f, const void *obj);
void cmp_field_set_value(const struct cmp_field *f, void *obj, uint64_t v);
/* Finds a row by name, or NULL. */
const struct cmp_field *cmp_layout_find(const struct cmp_layout *l, const char *name);

/* Each reserved row of `buf` that is not zero is reported through cb (may be
 * NULL); returns how many were found. */
typedef void (*cmp_rsvd_cb)(void *ctx, const struct cmp_field *f, uint64_t value);
unsigned cmp_layout_check_reserved(const struct cmp_layout *l, const uint8_t *buf,
				   cmp_rsvd_cb cb, void *ctx);

/* Printer: one "  name: value" line per non-reserved row, with `indent`
 * spaces. Byte strings are printed as hex with trailing zeros elided. */
void cmp_layout_print(const struct cmp_layout *l, const void *obj, FILE *out, int indent);
/* JSON: writes `"name": value` pairs separated by commas (no braces).
 * Integers as numbers, GIDs as strings, byte strings as hex strings. */
void cmp_layout_json(const struct cmp_layout *l, const void *obj, FILE *out);
/* A JSON string literal for s: quotes, backslashes and control characters
 * escaped. */
void cmp_json_str(FILE *out, const char *s);

/* GID text form (IPv6 notation, as tshark prints FT_IPv6). buf >= 46 bytes. */
const char *cmp_gid_str(const uint8_t gid[16], char *buf, size_t len);

#endif
