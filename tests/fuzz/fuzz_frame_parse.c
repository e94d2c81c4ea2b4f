/*
 * libFuzzer target: frame parsing for every link type on any input (the
 * first byte picks the link type). Parsing must never read outside the
 * frame; a frame that parses as a MAD must point inside it.
 */
#include <stdlib.h>
#include <string.h>

#include "umad/um_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int links[] = { UM_LINK_ROCEV2, UM_LINK_IB, UM_LINK_IP };
	struct um_frame_meta m;
	const uint8_t *mad = NULL;
	uint8_t *copy;

	if (size < 1)
		return 0;
	int link = links[data[0] % 3];
	size--;
	copy = malloc(size ? size : 1);
	memcpy(copy, data + 1, size);
	memset(&m, 0, sizeof(m));
	if (um_frame_parse(copy, size, link, &m, &mad) == UM_FRAME_OK) {
		if (!mad || mad < copy || mad + UM_MAD_SIZE > copy + size)
			abort();
	}
	free(copy);
	return 0;
}
