/*
 * um_pcap.h - libpcap-format trace files of MADs.
 *
 * Writer: nanosecond pcap (magic 0xA1B23C4D, version 2.4, snaplen 65535),
 * written little-endian, one write(2) per record (no stdio buffer), so
 * that a crash leaves a file readable up to the last complete record. Not
 * thread-safe: callers serialise (um_capture does). Link types:
 *   1   (Ethernet)  RoCEv2 frames, as um_frame_build() makes them;
 *   197 (ERF)       each record is a 16-byte ERF header followed by the
 *                   packet: type 21 (InfiniBand, LRH..VCRC, no padding) for
 *                   native IB, type 2 (Ethernet: 2-byte pad, frame, FCS) for
 *                   RoCEv2. Flags 0x04 (varying length), lctr 0,
 *                   rlen = 16 + pad + packet, wlen = packet length on the
 *                   wire; the ERF timestamp (little-endian 32.32 fixed point
 *                   seconds) carries the same instant as the pcap record.
 *
 * Reader: the four classic pcap magics (us/ns, either byte order), link
 * types 1, 197 (ERF types 21 -> IB; 2, 11, 16, 20 -> Ethernet after the
 * 2-byte pad; 22/23 -> RoCEv2 from the IP header; extension headers
 * skipped), 101 (raw IP), 228 (IPv4) and 229 (IPv6). Frames that are not
 * MADs are skipped and counted; a record that is too short for its own
 * headers is counted as malformed and skipped; only a break in the pcap
 * structure itself (truncated header or data, caplen > snaplen or > 256 KiB)
 * stops the read with an error naming the record number and byte offset.
 */
#ifndef USCM_UM_PCAP_H
#define USCM_UM_PCAP_H

#include <stddef.h>
#include <stdint.h>

#include "umad/um_frame.h"

#define UM_PCAP_LINKTYPE_ETHERNET 1
#define UM_PCAP_LINKTYPE_RAW 101
#define UM_PCAP_LINKTYPE_ERF 197
#define UM_PCAP_LINKTYPE_IPV4 228
#define UM_PCAP_LINKTYPE_IPV6 229

#define UM_PCAP_MAGIC_US 0xA1B2C3D4u
#define UM_PCAP_MAGIC_NS 0xA1B23C4Du
#define UM_PCAP_SNAPLEN 65535u
#define UM_PCAP_MAX_CAPLEN (256u * 1024u)

#define UM_ERF_TYPE_ETH 2
#define UM_ERF_TYPE_COLOR_ETH 11
#define UM_ERF_TYPE_DSM_COLOR_ETH 16
#define UM_ERF_TYPE_COLOR_HASH_ETH 20
#define UM_ERF_TYPE_INFINIBAND 21
#define UM_ERF_TYPE_IPV4 22
#define UM_ERF_TYPE_IPV6 23
#define UM_ERF_TYPE_PAD 48
#define UM_ERF_FLAG_VLEN 0x04 /* "varying length record" */
#define UM_ERF_HDR_LEN 16

/* ERF record header, big-endian except the timestamp. */
#define UM_ERF_HDR_FIELDS(F)             \
	F(ts, 0, 0, 64, BYTES)           \
	F(ext, 8, 0, 1, U8)              \
	F(type, 8, 1, 7, U8)             \
	F(flags, 9, 0, 8, U8)            \
	F(rlen, 10, 0, 16, U16)          \
	F(lctr, 12, 0, 16, U16)          \
	F(wlen, 14, 0, 16, U16)

struct um_erf_hdr { CMP_STRUCT_MEMBERS(UM_ERF_HDR_FIELDS) };
extern const struct cmp_layout um_erf_hdr_layout;

/* ---- writer ------------------------------------------------------------ */

struct um_pcap_writer;

/* Creates (truncates) path and writes the file header. linktype is
 * UM_PCAP_LINKTYPE_ETHERNET or UM_PCAP_LINKTYPE_ERF. NULL with errno set on
 * failure (EINVAL for another link type). The writer holds an exclusive
 * flock on the file until it is closed (or its process dies): a file
 * another writer holds, in this process or another, is left untouched and
 * refused with EBUSY instead of being truncated under it. */
struct um_pcap_writer *um_pcap_open_write(const char *path, int linktype);
/* Frames `mad` with um_frame_build(m, ...) and appends the record, time
 * stamped m->ts_ns. An Ethernet file takes only m->link == UM_LINK_ROCEV2.
 * 0, or -1 with errno set. */
int um_pcap_write_mad(struct um_pcap_writer *w, const struct um_frame_meta *m,
		      const uint8_t mad[UM_MAD_SIZE]);
/* Appends an arbitrary frame (link UM_LINK_ROCEV2: an Ethernet frame;
 * UM_LINK_IB: an IB packet LRH..VCRC, ERF files only). 0 or -1/errno. */
int um_pcap_write_frame(struct um_pcap_writer *w, uint64_t ts_ns, int link,
			const uint8_t *frame, size_t len);
/* Flushes and closes; -1/errno if this or any earlier write failed. */
int um_pcap_close_write(struct um_pcap_writer *w);

/* ---- reader ------------------------------------------------------------ */

struct um_pcap_reader;

struct um_pcap_mad {
	struct um_frame_meta meta; /* ts_ns: see um_pcap_next() */
	uint8_t mad[UM_MAD_SIZE];
	uint64_t frame_no;         /* 1-based record number in the file */
	uint64_t offset;           /* byte offset of the record header */
};

struct um_pcap_stats {
	uint64_t frames;    /* records read */
	uint64_t mads;      /* returned by um_pcap_next() */
	uint64_t skipped;   /* valid frames that are not MADs, other ERF types */
	uint64_t malformed; /* records too short / inconsistent to parse */
	uint64_t bad_icrc;  /* MADs whose ICRC did not match (still returned) */
	uint64_t bad_vcrc;  /* native-IB MADs whose VCRC did not match */
};

/* Opens and checks the file header. NULL with a message in err on failure. */
struct um_pcap_reader *um_pcap_open_read(const char *path, char *err, size_t errlen);
/* 1: *out holds the next MAD. 0: clean end of file. -1: truncated or corrupt
 * file, see um_pcap_error(). After -1 every further call returns -1.
 * out->meta.ts_ns is the pcap record time, except in ERF records, where it
 * is the ERF time stamp (what tshark shows; ibdump's pcap header only has
 * microseconds). */
int um_pcap_next(struct um_pcap_reader *r, struct um_pcap_mad *out);
/* The last error ("" if none). */
const char *um_pcap_error(const struct um_pcap_reader *r);
const struct um_pcap_stats *um_pcap_stats(const struct um_pcap_reader *r);
int um_pcap_linktype(const struct um_pcap_reader *r);
/* 1 when the file's time stamps have nanosecond resolution. */
int um_pcap_nanosecond(const struct um_pcap_reader *r);
void um_pcap_close_read(struct um_pcap_reader *r);

#endif
