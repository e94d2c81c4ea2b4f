/*
 * libFuzzer target: the CM decoder, validator, printer and re-encoder on any
 * input. Checks beyond "no crash": a MAD that decodes re-encodes to the same
 * bytes but for reserved bits, and decoding never reads past `size`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cmp_cm_msg m;
	struct cmp_diags d;
	uint8_t *copy = malloc(size ? size : 1); /* exact-size heap copy: ASan sees overreads */
	uint8_t back[CMP_MAD_SIZE];
	FILE *null = fopen("/dev/null", "w");

	memcpy(copy, data, size);
	cmp_diags_init(&d);
	if (cmp_cm_decode(copy, size, &m, &d) == 0) {
		if (cmp_cm_encode(&m, back) != 0)
			abort();
		struct cmp_cm_msg again;
		if (cmp_cm_decode(back, sizeof(back), &again, NULL) != 0)
			abort(); /* a valid message must stay valid after re-encoding */
		if (memcmp(&again.u, &m.u, sizeof(m.u)) != 0)
			abort();
	}
	if (null) {
		cmp_cm_print(&m, null, 0);
		cmp_cm_json(&m, null);
		for (unsigned i = 0; i < d.n; i++)
			fputs(d.d[i].text, null);
		fclose(null);
	}
	free(copy);
	return 0;
}
