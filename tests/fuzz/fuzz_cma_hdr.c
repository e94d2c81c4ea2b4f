/* libFuzzer target: CMA private-data header parsing on any input. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cm_proto/cmp_cma.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage s, d;
	uint8_t *copy = malloc(size ? size : 1);
	uint8_t again[CMP_CMA_HDR_SIZE];

	memcpy(copy, data, size);
	if (cmp_cma_hdr_parse(copy, size, 4791, &s, &d) == 0) {
		/* What parses rebuilds to the same header (reserved nibble aside). */
		if (cmp_cma_hdr_build(again, sizeof(again), (struct sockaddr *)&s,
				      (struct sockaddr *)&d) != 0)
			abort();
		if (memcmp(again + 2, copy + 2, CMP_CMA_HDR_SIZE - 2) != 0 && s.ss_family == AF_INET6)
			abort();
	}
	free(copy);
	return 0;
}
