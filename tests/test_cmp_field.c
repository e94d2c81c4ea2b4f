/* The bit-field engine: raw bit access and the table self-checks. */
#include <criterion/criterion.h>
#include <string.h>

#include "cm_proto/cmp_field.h"

Test(cmp_field, get_set_straddling_bytes)
{
	uint8_t b[8] = { 0 };

	/* A 20-bit flow label starting at bit 0 of byte 1, then 6 bits at bit 2 of
	 * byte 4, as in REQ bytes 88-91. */
	cmp_bits_set(b, 1, 0, 20, 0xABCDE);
	cmp_bits_set(b, 4, 2, 6, 0x2A);
	cr_assert_eq(b[1], 0xAB);
	cr_assert_eq(b[2], 0xCD);
	cr_assert_eq(b[3], 0xE0);
	cr_assert_eq(b[4], 0x2A);
	cr_assert_eq(cmp_bits_get(b, 1, 0, 20), 0xABCDE);
	cr_assert_eq(cmp_bits_get(b, 4, 2, 6), 0x2A);
	/* Neighbours untouched. */
	cr_assert_eq(b[0], 0);
	cr_assert_eq(b[5], 0);
}

Test(cmp_field, set_masks_and_preserves_neighbours)
{
	uint8_t b[2] = { 0xFF, 0xFF };

	cmp_bits_set(b, 0, 5, 2, 0); /* clears bits 5,6 of byte 0 only */
	cr_assert_eq(b[0], 0xF9);
	cr_assert_eq(b[1], 0xFF);
	cmp_bits_set(b, 0, 5, 2, 0xFF); /* too wide a value is masked */
	cr_assert_eq(b[0], 0xFF);
}

Test(cmp_field, sixty_four_bits_unaligned)
{
	uint8_t b[10] = { 0 };

	cmp_bits_set(b, 0, 3, 64, 0x0123456789ABCDEFULL);
	cr_assert_eq(cmp_bits_get(b, 0, 3, 64), 0x0123456789ABCDEFULL);
	cr_assert_eq(b[0] >> 5, 0);
}

struct two { uint8_t a; uint16_t b; };
#define TWO_OVERLAP(F) F(a, 0, 0, 8, U8) F(b, 0, 4, 16, U16)
#define TWO_GAP(F) F(a, 0, 0, 8, U8) F(b, 2, 0, 16, U16)
#define TWO_OK(F) F(a, 0, 0, 8, U8) F(b, 1, 0, 16, U16)
#define CMP_ROW_TYPE struct two
static const struct cmp_field overlap_rows[] = { CMP_TABLE_ROWS(TWO_OVERLAP) };
static const struct cmp_field gap_rows[] = { CMP_TABLE_ROWS(TWO_GAP) };
static const struct cmp_field ok_rows[] = { CMP_TABLE_ROWS(TWO_OK) };
#undef CMP_ROW_TYPE

Test(cmp_field, layout_check_catches_bad_tables)
{
	char err[128];
	struct cmp_layout overlap = CMP_LAYOUT("overlap", struct two, overlap_rows, 4);
	struct cmp_layout gap = CMP_LAYOUT("gap", struct two, gap_rows, 4);
	struct cmp_layout ok = CMP_LAYOUT("ok", struct two, ok_rows, 3);
	struct cmp_layout outside = CMP_LAYOUT("outside", struct two, gap_rows, 3);

	cr_assert_eq(cmp_layout_check(&overlap, 0, err, sizeof(err)), -1);
	cr_assert(strstr(err, "twice"), "%s", err);
	cr_assert_eq(cmp_layout_check(&gap, 0, err, sizeof(err)), 0);
	cr_assert_eq(cmp_layout_check(&gap, 1, err, sizeof(err)), -1);
	cr_assert(strstr(err, "byte 1"), "%s", err);
	cr_assert_eq(cmp_layout_check(&ok, 1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cmp_layout_check(&outside, 0, err, sizeof(err)), -1);
}

Test(cmp_field, gid_text)
{
	uint8_t g[16] = { 0xfe, 0x80, [8] = 0x00, [15] = 0x01 };
	char buf[64];

	cr_assert_str_eq(cmp_gid_str(g, buf, sizeof(buf)), "fe80::1");
}

#include "cm_proto/cmp_mad.h"

Test(cmp_field, class_port_info_is_72_bytes_fully_described)
{
	char err[128];

	cr_assert_eq(cmp_layout_check(&cmp_cpi_layout, 1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cmp_layout_check(&cmp_mad_hdr_layout, 1, err, sizeof(err)), 0, "%s", err);
}
