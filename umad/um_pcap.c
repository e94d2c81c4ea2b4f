/*
 * um_pcap.c - pcap writer and reader for MAD traces (see um_pcap.h).
 *
 * The pcap file and record headers are in the writer's byte order (ours:
 * little-endian), so they are handled with explicit byte helpers; the
 * big-endian ERF header goes through the cmp_field engine.
 */
#include "umad/um_outfile.h"
#include "umad/um_pcap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMP_ROW_TYPE struct um_erf_hdr
static const struct cmp_field erf_rows[] = { CMP_TABLE_ROWS(UM_ERF_HDR_FIELDS) };
#undef CMP_ROW_TYPE
const struct cmp_layout um_erf_hdr_layout =
	CMP_LAYOUT("erf", struct um_erf_hdr, erf_rows, UM_ERF_HDR_LEN);

/* An ERF extension header: 8 bytes, the top bit says another follows. */
#define UM_ERF_EXT_FIELDS(F)             \
	F(more, 0, 0, 1, U8)             \
	F(type, 0, 1, 7, U8)             \
	F(data, 1, 0, 56, U64)

struct um_erf_ext { CMP_STRUCT_MEMBERS(UM_ERF_EXT_FIELDS) };

#define CMP_ROW_TYPE struct um_erf_ext
static const struct cmp_field erf_ext_rows[] = { CMP_TABLE_ROWS(UM_ERF_EXT_FIELDS) };
#undef CMP_ROW_TYPE
static const struct cmp_layout erf_ext_layout =
	CMP_LAYOUT("erf_ext", struct um_erf_ext, erf_ext_rows, 8);

#define PCAP_FILE_HDR_LEN 24
#define PCAP_REC_HDR_LEN 16
#define NS_PER_SEC 1000000000ull

static void put32(uint8_t *p, uint32_t v, int big)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[big ? 3 - i : i] = (uint8_t)v;
}

static void put16(uint8_t *p, uint16_t v, int big)
{
	p[big ? 1 : 0] = (uint8_t)v;
	p[big ? 0 : 1] = (uint8_t)(v >> 8);
}

static uint32_t get32(const uint8_t *p, int big)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[big ? 3 - i : i] << (8 * i);
	return v;
}

static uint16_t get16(const uint8_t *p, int big)
{
	return big ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

/* ERF time: 64-bit little-endian, seconds in the top 32 bits, binary
 * fraction below. Rounding the fraction up makes ns -> ERF -> ns exact (one
 * fraction step is ~0.23 ns). */
static void erf_ts_put(uint8_t p[8], uint64_t ts_ns)
{
	uint64_t ns = ts_ns % NS_PER_SEC;
	uint64_t frac = ((ns << 32) + NS_PER_SEC - 1) / NS_PER_SEC;

	put32(p, (uint32_t)frac, 0);
	put32(p + 4, (uint32_t)(ts_ns / NS_PER_SEC), 0);
}

/* ---- writer ------------------------------------------------------------ */

struct um_pcap_writer {
	int fd; /* written with one write(2) per record: no stdio buffer to lose */
	int linktype;
	int failed; /* errno of the first failure, 0 if none */
};

static int wfail(struct um_pcap_writer *w, int e)
{
	if (!w->failed)
		w->failed = e ? e : EIO;
	errno = w->failed;
	return -1;
}

/* One write(2) for the whole buffer (a regular file takes it at once; the
 * loop only covers a signal or a full disk cutting it short). */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = ENOSPC;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Makes fd's file ours: an exclusive lock held as long as the descriptor
 * is open (flock: per open file, so a second open in the same process
 * conflicts too, and a crash releases it), then an empty file. EBUSY when
 * another writer holds it. Where the file system has no locks (ENOLCK,
 * some network file systems) it is emptied as O_TRUNC always did; a
 * FIFO or character device (/dev/stdout) is written as it is. */
static int pcap_claim(int fd)
{
	struct stat sb;

	if (flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		errno = EBUSY;
		return -1;
	}
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && ftruncate(fd, 0) < 0)
		return -1;
	return 0;
}

struct um_pcap_writer *um_pcap_open_write(const char *path, int linktype)
{
	struct um_pcap_writer *w;
	uint8_t h[PCAP_FILE_HDR_LEN] = { 0 };

	if (linktype != UM_PCAP_LINKTYPE_ETHERNET && linktype != UM_PCAP_LINKTYPE_ERF) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	/* Not O_TRUNC: the file may be another writer's. Emptied only once
	 * its lock is ours (pcap_claim). The name may come from a user's
	 * environment or a root daemon's option: um_outfile's rules. */
	w->fd = um_outfile_open(path, 0, 0600);
	if (w->fd < 0 || pcap_claim(w->fd) < 0) {
		int e = errno;
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		errno = e;
		return NULL;
	}
	w->linktype = linktype;
	put32(h, UM_PCAP_MAGIC_NS, 0);
	put16(h + 4, 2, 0);
	put16(h + 6, 4, 0);
	put32(h + 8, 0, 0);  /* thiszone */
	put32(h + 12, 0, 0); /* sigfigs */
	put32(h + 16, UM_PCAP_SNAPLEN, 0);
	put32(h + 20, (uint32_t)linktype, 0);
	if (write_all(w->fd, h, sizeof(h)) < 0) {
		int e = errno ? errno : EIO;
		close(w->fd);
		free(w);
		errno = e;
		return NULL;
	}
	return w;
}

/* One record: pcap header, optional ERF header + pad, data, optional
 * trailer (the Ethernet FCS in ERF Ethernet records), in one write. */
static int write_record(struct um_pcap_writer *w, uint64_t ts_ns, const uint8_t *erf,
			size_t erflen, const uint8_t *data, size_t len, const uint8_t *trailer,
			size_t tlen)
{
	uint8_t buf[PCAP_REC_HDR_LEN + UM_ERF_HDR_LEN + 2 + UM_FRAME_MAX + 4];
	size_t caplen = erflen + len + tlen;

	if (w->failed)
		return wfail(w, w->failed);
	if (caplen > UM_PCAP_SNAPLEN || PCAP_REC_HDR_LEN + caplen > sizeof(buf)) {
		errno = EMSGSIZE;
		return -1;
	}
	put32(buf, (uint32_t)(ts_ns / NS_PER_SEC), 0);
	put32(buf + 4, (uint32_t)(ts_ns % NS_PER_SEC), 0);
	put32(buf + 8, (uint32_t)caplen, 0);
	put32(buf + 12, (uint32_t)caplen, 0);
	if (erflen)
		memcpy(buf + PCAP_REC_HDR_LEN, erf, erflen);
	if (len)
		memcpy(buf + PCAP_REC_HDR_LEN + erflen, data, len);
	if (tlen)
		memcpy(buf + PCAP_REC_HDR_LEN + erflen + len, trailer, tlen);
	if (write_all(w->fd, buf, PCAP_REC_HDR_LEN + caplen) < 0)
		return wfail(w, errno);
	return 0;
}

int um_pcap_write_frame(struct um_pcap_writer *w, uint64_t ts_ns, int link,
			const uint8_t *frame, size_t len)
{
	uint8_t erf[UM_ERF_HDR_LEN + 2] = { 0 };
	uint8_t fcs[4];
	struct um_erf_hdr h = { .flags = UM_ERF_FLAG_VLEN };

	if (!w || (!frame && len)) {
		errno = EINVAL;
		return -1;
	}
	if (w->linktype == UM_PCAP_LINKTYPE_ETHERNET) {
		if (link != UM_LINK_ROCEV2) {
			errno = EINVAL;
			return -1;
		}
		return write_record(w, ts_ns, NULL, 0, frame, len, NULL, 0);
	}
	if (len > UM_FRAME_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	erf_ts_put(h.ts, ts_ns);
	if (link == UM_LINK_IB) {
		h.type = UM_ERF_TYPE_INFINIBAND;
		h.rlen = (uint16_t)(UM_ERF_HDR_LEN + len);
		h.wlen = (uint16_t)len;
		cmp_layout_encode(&um_erf_hdr_layout, &h, erf);
		return write_record(w, ts_ns, erf, UM_ERF_HDR_LEN, frame, len, NULL, 0);
	}
	if (link == UM_LINK_ROCEV2) {
		/* ERF Ethernet: 2-byte pad (offset, pad) then the frame as
		 * captured, FCS included and counted in wlen. */
		uint32_t crc = ~um_crc32_update(0xFFFFFFFFu, frame, len);

		for (int i = 0; i < 4; i++, crc >>= 8)
			fcs[i] = (uint8_t)crc;
		h.type = UM_ERF_TYPE_ETH;
		h.rlen = (uint16_t)(UM_ERF_HDR_LEN + 2 + len + 4);
		h.wlen = (uint16_t)(len + 4);
		cmp_layout_encode(&um_erf_hdr_layout, &h, erf);
		return write_record(w, ts_ns, erf, UM_ERF_HDR_LEN + 2, frame, len, fcs, 4);
	}
	errno = EINVAL;
	return -1;
}

int um_pcap_write_mad(struct um_pcap_writer *w, const struct um_frame_meta *m,
		      const uint8_t mad[UM_MAD_SIZE])
{
	uint8_t frame[UM_FRAME_MAX];
	int n;

	if (!w || !m || !mad) {
		errno = EINVAL;
		return -1;
	}
	n = um_frame_build(m, mad, frame, sizeof(frame));
	if (n < 0) {
		errno = EINVAL;
		return -1;
	}
	return um_pcap_write_frame(w, m->ts_ns, m->link, frame, (size_t)n);
}

int um_pcap_close_write(struct um_pcap_writer *w)
{
	int rc = 0, e = 0;

	if (!w)
		return 0;
	if (w->failed) {
		rc = -1;
		e = w->failed;
	}
	if (close(w->fd) != 0 && !rc) {
		rc = -1;
		e = errno;
	}
	free(w);
	if (rc)
		errno = e;
	return rc;
}

/* ---- reader ------------------------------------------------------------ */

struct um_pcap_reader {
	FILE *f;
	char *path;
	int big;      /* file headers are big-endian */
	int nsec;     /* nanosecond time stamps */
	int linktype;
	uint32_t snaplen;
	uint64_t offset;   /* of the next record header */
	uint64_t frame_no; /* records read so far */
	int dead;
	struct um_pcap_stats st;
	uint8_t *buf;
	char err[256];
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Reads up to n bytes; returns how many (short only at EOF or error). */
static size_t read_full(FILE *f, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		size_t k = fread(p + got, 1, n - got, f);
		if (k == 0)
			break;
		got += k;
	}
	return got;
}

struct um_pcap_reader *um_pcap_open_read(const char *path, char *err, size_t errlen)
{
	struct um_pcap_reader *r;
	uint8_t h[PCAP_FILE_HDR_LEN];
	size_t got;
	uint32_t magic;

	set_err(err, errlen, "%s", "");
	r = calloc(1, sizeof(*r));
	if (!r || !(r->buf = malloc(UM_PCAP_MAX_CAPLEN)) || !(r->path = strdup(path))) {
		set_err(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	r->f = fopen(path, "rb");
	if (!r->f) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	got = read_full(r->f, h, sizeof(h));
	if (ferror(r->f)) {
		set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
		goto fail;
	}
	if (got < 4) {
		set_err(err, errlen, "%s: %s (%zu bytes, a pcap file header is %d)", path,
			got ? "too short to be a pcap file" : "empty file", got,
			PCAP_FILE_HDR_LEN);
		goto fail;
	}
	magic = get32(h, 0);
	switch (magic) {
	case UM_PCAP_MAGIC_US: r->big = 0; r->nsec = 0; break;
	case UM_PCAP_MAGIC_NS: r->big = 0; r->nsec = 1; break;
	case 0xD4C3B2A1u: r->big = 1; r->nsec = 0; break;
	case 0x4D3CB2A1u: r->big = 1; r->nsec = 1; break;
	case 0x0A0D0D0Au:
		set_err(err, errlen, "%s: pcapng files are not supported (convert with "
			"editcap -F pcap)", path);
		goto fail;
	default:
		set_err(err, errlen, "%s: not a pcap file (magic 0x%08x)", path, magic);
		goto fail;
	}
	if (got < sizeof(h)) {
		set_err(err, errlen, "%s: truncated pcap file header (%zu of %d bytes)", path,
			got, PCAP_FILE_HDR_LEN);
		goto fail;
	}
	if (get16(h + 4, r->big) != 2) {
		set_err(err, errlen, "%s: pcap version %u.%u, expected 2.x", path,
			get16(h + 4, r->big), get16(h + 6, r->big));
		goto fail;
	}
	r->snaplen = get32(h + 16, r->big);
	/* The link type is the low 16 bits; the upper ones may carry FCS
	 * information. */
	r->linktype = (int)(get32(h + 20, r->big) & 0xFFFF);
	switch (r->linktype) {
	case UM_PCAP_LINKTYPE_ETHERNET:
	case UM_PCAP_LINKTYPE_ERF:
	case UM_PCAP_LINKTYPE_RAW:
	case UM_PCAP_LINKTYPE_IPV4:
	case UM_PCAP_LINKTYPE_IPV6:
		break;
	default:
		set_err(err, errlen, "%s: link type %d is not supported (want 1 Ethernet, "
			"197 ERF, 101/228/229 raw IP)", path, r->linktype);
		goto fail;
	}
	r->offset = PCAP_FILE_HDR_LEN;
	r->err[0] = 0;
	return r;
fail:
	if (err && errlen && !err[0])
		set_err(err, errlen, "%s: cannot open", path);
	um_pcap_close_read(r);
	return NULL;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int rec_fail(struct um_pcap_reader *r, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	char what[160];

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(r->err, sizeof(r->err), "%s: record %" PRIu64 " at byte offset %" PRIu64 ": %s",
		 r->path, r->frame_no, off, what);
	r->dead = 1;
	return -1;
}

/* ERF time -> ns since the epoch, rounding to the nearest ns as Wireshark
 * does (so a time written by erf_ts_put() comes back exactly). */
static uint64_t erf_ts_get(const uint8_t p[8])
{
	uint64_t frac = get32(p, 0), sec = get32(p + 4, 0);

	return sec * NS_PER_SEC + ((frac * NS_PER_SEC + (1ull << 31)) >> 32);
}

/* Locates the packet inside an ERF record and reads its time stamp. Returns
 * the link to parse it as, 0 to skip (other ERF types), -1 if malformed. */
static int erf_unwrap(const uint8_t *rec, size_t caplen, const uint8_t **pkt, size_t *len,
		      uint64_t *ts_ns)
{
	struct um_erf_hdr h;
	size_t off = UM_ERF_HDR_LEN, avail;
	int link;

	if (caplen < UM_ERF_HDR_LEN)
		return -1;
	cmp_layout_decode(&um_erf_hdr_layout, rec, &h);
	*ts_ns = erf_ts_get(h.ts);
	/* Extension headers: 8 bytes each, chained by their top bit. */
	for (int more = h.ext; more; off += 8) {
		struct um_erf_ext x;

		if (caplen - off < 8)
			return -1;
		cmp_layout_decode(&erf_ext_layout, rec + off, &x);
		more = x.more;
	}
	avail = caplen - off;
	if (h.rlen >= off && h.rlen - off < avail)
		avail = h.rlen - off; /* ignore bytes past the ERF record */
	switch (h.type) {
	case UM_ERF_TYPE_INFINIBAND:
		link = UM_LINK_IB;
		break;
	case UM_ERF_TYPE_ETH:
	case UM_ERF_TYPE_COLOR_ETH:
	case UM_ERF_TYPE_DSM_COLOR_ETH:
	case UM_ERF_TYPE_COLOR_HASH_ETH:
		if (avail < 2)
			return -1;
		off += 2; /* offset + pad bytes */
		avail -= 2;
		link = UM_LINK_ROCEV2;
		break;
	case UM_ERF_TYPE_IPV4:
	case UM_ERF_TYPE_IPV6:
		link = UM_LINK_IP;
		break;
	default:
		return 0;
	}
	if (h.wlen < avail)
		avail = h.wlen; /* wire length: drops the record's tail padding */
	*pkt = rec + off;
	*len = avail;
	return link;
}

int um_pcap_next(struct um_pcap_reader *r, struct um_pcap_mad *out)
{
	if (!r)
		return -1;
	if (r->dead)
		return -1;
	for (;;) {
		uint8_t h[PCAP_REC_HDR_LEN];
		uint64_t off = r->offset, ts;
		uint32_t sec, sub, caplen;
		size_t got;
		const uint8_t *pkt = r->buf, *mad = NULL;
		size_t len;
		int link, rc;
		struct um_frame_meta meta;

		got = read_full(r->f, h, sizeof(h));
		if (got == 0 && !ferror(r->f))
			return 0;
		r->frame_no++;
		if (ferror(r->f))
			return rec_fail(r, off, "read error: %s", strerror(errno));
		if (got < sizeof(h))
			return rec_fail(r, off, "truncated record header (%zu of %d bytes)", got,
					PCAP_REC_HDR_LEN);
		sec = get32(h, r->big);
		sub = get32(h + 4, r->big);
		caplen = get32(h + 8, r->big);
		if ((r->snaplen && caplen > r->snaplen) || caplen > UM_PCAP_MAX_CAPLEN)
			return rec_fail(r, off, "captured length %" PRIu32 " exceeds the %s %" PRIu32
					" (corrupt file?)", caplen,
					r->snaplen && caplen > r->snaplen ? "snaplen" : "limit",
					r->snaplen && caplen > r->snaplen ? r->snaplen
									  : UM_PCAP_MAX_CAPLEN);
		got = read_full(r->f, r->buf, caplen);
		if (ferror(r->f))
			return rec_fail(r, off, "read error: %s", strerror(errno));
		if (got < caplen)
			return rec_fail(r, off, "truncated record data (%zu of %" PRIu32 " bytes)",
					got, caplen);
		r->offset += PCAP_REC_HDR_LEN + caplen;
		r->st.frames++;
		ts = (uint64_t)sec * NS_PER_SEC + (r->nsec ? sub : (uint64_t)sub * 1000u);

		len = caplen;
		switch (r->linktype) {
		case UM_PCAP_LINKTYPE_ETHERNET:
			link = UM_LINK_ROCEV2;
			break;
		case UM_PCAP_LINKTYPE_ERF:
			link = erf_unwrap(r->buf, caplen, &pkt, &len, &ts);
			break;
		default:
			link = UM_LINK_IP;
			break;
		}
		if (link < 0) {
			r->st.malformed++;
			continue;
		}
		if (link == 0) {
			r->st.skipped++;
			continue;
		}
		rc = um_frame_parse(pkt, len, link, &meta, &mad);
		if (rc == UM_FRAME_NOT_MAD) {
			r->st.skipped++;
			continue;
		}
		if (rc != UM_FRAME_OK) {
			r->st.malformed++;
			continue;
		}
		r->st.mads++;
		if (!meta.icrc_ok)
			r->st.bad_icrc++;
		if (meta.vcrc_ok == 0)
			r->st.bad_vcrc++;
		meta.ts_ns = ts;
		if (out) {
			out->meta = meta;
			memcpy(out->mad, mad, UM_MAD_SIZE);
			out->frame_no = r->frame_no;
			out->offset = off;
		}
		return 1;
	}
}

const char *um_pcap_error(const struct um_pcap_reader *r)
{
	return r ? r->err : "no reader";
}

const struct um_pcap_stats *um_pcap_stats(const struct um_pcap_reader *r)
{
	return &r->st;
}

int um_pcap_linktype(const struct um_pcap_reader *r)
{
	return r->linktype;
}

int um_pcap_nanosecond(const struct um_pcap_reader *r)
{
	return r->nsec;
}

void um_pcap_close_read(struct um_pcap_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	free(r->buf);
	free(r->path);
	free(r);
}
