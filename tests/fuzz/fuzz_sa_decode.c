/*
 * libFuzzer target: the SA decoder (header, RMPP, PathRecord, MCMemberRecord,
 * ClassPortInfo, table records), printer and JSON writer on any input. A MAD
 * that decodes cleanly must re-encode and decode to the same record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "umad/um_sa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct um_sa_msg m, again;
	struct cmp_diags d;
	uint8_t *copy = malloc(size ? size : 1);
	uint8_t back[CMP_MAD_SIZE];
	uint8_t rec[256];
	FILE *null = fopen("/dev/null", "w");

	memcpy(copy, data, size);
	cmp_diags_init(&d);
	int rc = um_sa_decode(copy, size, &m, &d);
	if (rc == 0) {
		if (um_sa_encode(&m, back) != 0)
			abort();
		if (um_sa_decode(back, sizeof(back), &again, NULL) != 0)
			abort();
		if (memcmp(&again.u, &m.u, sizeof(m.u)) != 0)
			abort();
		if (size == CMP_MAD_SIZE)
			for (unsigned i = 0; i < m.nrecords; i++)
				(void)um_sa_record_get(copy, &m, i, rec);
	}
	if (null) {
		if (rc == 0 || size >= CMP_MAD_HDR_SIZE) {
			um_sa_print(&m, null, 0);
			um_sa_json(&m, null);
			um_sa_summary(&m, null);
		}
		fclose(null);
	}
	free(copy);
	return 0;
}
