/*
 * libFuzzer target: the pcap/ERF reader on any file contents. It must end
 * with 0 or -1 (never crash, hang or leak), and after -1 stay at -1.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "umad/um_pcap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	struct um_pcap_mad p;
	int fd = memfd_create("fuzz-pcap", 0);
	int rc;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	struct um_pcap_reader *r = um_pcap_open_read(path, err, sizeof(err));
	if (r) {
		unsigned n = 0;
		while ((rc = um_pcap_next(r, &p)) == 1 && n < 100000)
			n++;
		if (rc < 0 && um_pcap_next(r, &p) != -1)
			abort();
		um_pcap_close_read(r);
	}
	close(fd);
	return 0;
}
