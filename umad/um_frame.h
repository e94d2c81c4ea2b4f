/*
 * um_frame.h - wire framing of one 256-byte MAD, for pcap traces.
 *
 * Two link layers:
 *   UM_LINK_ROCEV2  Ethernet [802.1Q] / IPv4 or IPv6 / UDP 4791 / BTH / DETH /
 *                   MAD / ICRC
 *   UM_LINK_IB      LRH [/ GRH] / BTH / DETH / MAD / ICRC / VCRC
 * (UM_LINK_IP is parse-only: a RoCEv2 packet that starts at the IP header,
 * as found in raw-IP pcap files and ERF IPv4/IPv6 records.)
 *
 * Every header is described once as a cmp_field row list (IBTA bit numbering:
 * bit 0 is the most significant bit of the byte) and is encoded and decoded
 * by the table walkers in cm_proto/cmp_field.h; nothing here shifts a header
 * field by hand.
 */
#ifndef USCM_UM_FRAME_H
#define USCM_UM_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "cm_proto/cmp_field.h"

#define UM_MAD_SIZE 256

enum um_link {
	UM_LINK_ROCEV2 = 1, /* Ethernet frame carrying RoCEv2 */
	UM_LINK_IB = 2,     /* native InfiniBand packet, LRH first */
	UM_LINK_IP = 3,     /* parse only: RoCEv2 starting at the IP header */
};

/* Largest frame um_frame_build() produces (IPv6 + VLAN) with room to spare. */
#define UM_FRAME_MAX 512

#define UM_ROCEV2_UDP_PORT 4791
#define UM_BTH_OP_UD_SEND_ONLY 0x64
#define UM_QP1_QKEY 0x80010000u
#define UM_GRH_NXTHDR_IBA 0x1B
#define UM_ETHERTYPE_IPV4 0x0800
#define UM_ETHERTYPE_IPV6 0x86DD
#define UM_ETHERTYPE_VLAN 0x8100
#define UM_ETHERTYPE_QINQ 0x88A8
#define UM_LNH_RAW 0
#define UM_LNH_IP 1
#define UM_LNH_IBA_LOCAL 2
#define UM_LNH_IBA_GLOBAL 3

/* ---- header layouts ---------------------------------------------------- */

#define UM_ETH_LEN 14
#define UM_ETH_FIELDS(F)                 \
	F(dmac, 0, 0, 48, BYTES)         \
	F(smac, 6, 0, 48, BYTES)         \
	F(ethertype, 12, 0, 16, U16)

/* An 802.1Q tag as it follows the source MAC (TPID already consumed):
 * TCI then the inner ethertype. */
#define UM_VLAN_LEN 4
#define UM_VLAN_FIELDS(F)                \
	F(pcp, 0, 0, 3, U8)              \
	F(dei, 0, 3, 1, U8)              \
	F(vid, 0, 4, 12, U16)            \
	F(ethertype, 2, 0, 16, U16)

#define UM_IPV4_LEN 20
#define UM_IPV4_FIELDS(F)                \
	F(version, 0, 0, 4, U8)          \
	F(ihl, 0, 4, 4, U8)              \
	F(tos, 1, 0, 8, U8)              \
	F(tot_len, 2, 0, 16, U16)        \
	F(id, 4, 0, 16, U16)             \
	F(_rsvd_flag, 6, 0, 1, RSVD)     \
	F(df, 6, 1, 1, U8)               \
	F(mf, 6, 2, 1, U8)               \
	F(frag_off, 6, 3, 13, U16)       \
	F(ttl, 8, 0, 8, U8)              \
	F(protocol, 9, 0, 8, U8)         \
	F(check, 10, 0, 16, U16)         \
	F(saddr, 12, 0, 32, U32)         \
	F(daddr, 16, 0, 32, U32)

#define UM_UDP_LEN 8
#define UM_UDP_FIELDS(F)                 \
	F(sport, 0, 0, 16, U16)          \
	F(dport, 2, 0, 16, U16)          \
	F(len, 4, 0, 16, U16)            \
	F(check, 6, 0, 16, U16)

#define UM_LRH_LEN 8
#define UM_LRH_FIELDS(F)                 \
	F(vl, 0, 0, 4, U8)               \
	F(lver, 0, 4, 4, U8)             \
	F(sl, 1, 0, 4, U8)               \
	F(_rsvd1, 1, 4, 2, RSVD)         \
	F(lnh, 1, 6, 2, U8)              \
	F(dlid, 2, 0, 16, U16)           \
	F(_rsvd4, 4, 0, 5, RSVD)         \
	F(pktlen, 4, 5, 11, U16)         \
	F(slid, 6, 0, 16, U16)

/* The GRH; an IPv6 header has the same shape (version, traffic class, flow
 * label, payload length, next header, hop limit, source, destination), so
 * RoCEv2-over-IPv6 reuses this layout. */
#define UM_GRH_LEN 40
#define UM_GRH_FIELDS(F)                 \
	F(ipver, 0, 0, 4, U8)            \
	F(tclass, 0, 4, 8, U8)           \
	F(flow_label, 1, 4, 20, U32)     \
	F(paylen, 4, 0, 16, U16)         \
	F(nxthdr, 6, 0, 8, U8)           \
	F(hoplmt, 7, 0, 8, U8)           \
	F(sgid, 8, 0, 128, GID)          \
	F(dgid, 24, 0, 128, GID)

#define UM_BTH_LEN 12
#define UM_BTH_FIELDS(F)                 \
	F(opcode, 0, 0, 8, U8)           \
	F(se, 1, 0, 1, U8)               \
	F(m, 1, 1, 1, U8)                \
	F(padcnt, 1, 2, 2, U8)           \
	F(tver, 1, 4, 4, U8)             \
	F(pkey, 2, 0, 16, U16)           \
	F(resv8a, 4, 0, 8, RSVD)         \
	F(dest_qp, 5, 0, 24, U32)        \
	F(a, 8, 0, 1, U8)                \
	F(_rsvd7, 8, 1, 7, RSVD)         \
	F(psn, 9, 0, 24, U32)

#define UM_DETH_LEN 8
#define UM_DETH_FIELDS(F)                \
	F(qkey, 0, 0, 32, U32)           \
	F(_rsvd8, 4, 0, 8, RSVD)         \
	F(src_qp, 5, 0, 24, U32)

struct um_eth_hdr { CMP_STRUCT_MEMBERS(UM_ETH_FIELDS) };
struct um_vlan_hdr { CMP_STRUCT_MEMBERS(UM_VLAN_FIELDS) };
struct um_ipv4_hdr { CMP_STRUCT_MEMBERS(UM_IPV4_FIELDS) };
struct um_udp_hdr { CMP_STRUCT_MEMBERS(UM_UDP_FIELDS) };
struct um_lrh { CMP_STRUCT_MEMBERS(UM_LRH_FIELDS) };
struct um_grh { CMP_STRUCT_MEMBERS(UM_GRH_FIELDS) };
struct um_bth { CMP_STRUCT_MEMBERS(UM_BTH_FIELDS) };
struct um_deth { CMP_STRUCT_MEMBERS(UM_DETH_FIELDS) };

extern const struct cmp_layout um_eth_layout;
extern const struct cmp_layout um_vlan_layout;
extern const struct cmp_layout um_ipv4_layout;
extern const struct cmp_layout um_udp_layout;
extern const struct cmp_layout um_lrh_layout;
extern const struct cmp_layout um_grh_layout; /* also the IPv6 header */
extern const struct cmp_layout um_bth_layout;
extern const struct cmp_layout um_deth_layout;

/* ---- frame metadata ---------------------------------------------------- */

struct um_frame_meta {
	uint64_t ts_ns; /* capture time, ns since the epoch (pcap layer) */
	int link;       /* UM_LINK_ROCEV2 or UM_LINK_IB (UM_LINK_IP on parse) */

	/* IB addressing. LRH: native IB only. GRH: native IB when has_grh; for
	 * RoCEv2 sgid/dgid are the IP addresses (IPv4 as ::ffff:a.b.c.d) and
	 * parse sets has_grh (the IP header stands in for the GRH),
	 * tclass is the IPv4 TOS / IPv6 traffic class, hop_limit the TTL /
	 * hop limit (0 on build means 64), flow_label the IPv6 flow label. */
	uint16_t slid, dlid;
	uint8_t sl, vl;
	int has_grh;
	uint8_t sgid[16], dgid[16];
	uint8_t tclass, hop_limit;
	uint32_t flow_label;

	/* RoCEv2. On build the IP version follows the GIDs: IPv4 when both are
	 * IPv4-mapped, IPv6 otherwise. All-zero MACs are derived from the
	 * addresses (02:00 + last four address bytes). */
	int ipv6;                  /* parse output: 1 for IPv6 */
	uint32_t sip, dip;         /* IPv4 addresses, host order (parse output) */
	uint8_t smac[6], dmac[6];
	uint16_t udp_sport;        /* 0 on build means 0xC000 */
	int has_vlan;              /* 802.1Q tag present */
	uint16_t vlan_id;
	uint8_t vlan_pcp;

	/* BTH / DETH */
	uint8_t opcode; /* build always writes UD SEND only (0x64) */
	uint16_t pkey;
	uint32_t dest_qp, psn, qkey, src_qp;

	/* Parse outputs. */
	int icrc_ok;     /* 1 when the stored ICRC matches the computed one */
	uint32_t icrc;   /* the stored ICRC (as a CRC value, see um_icrc()) */
	int vcrc_ok;     /* native IB: 1 match, 0 mismatch, -1 not captured */
	uint16_t vcrc;
	char note[128];  /* why parse did not return UM_FRAME_OK */
};

/* ---- CRCs -------------------------------------------------------------- */

/* CRC-32 (Ethernet polynomial, reflected) state update: no initial value, no
 * final complement. Starting from 0xFFFFFFFF, 8 bytes of 0xFF give
 * 0xDEBB20E3. */
uint32_t um_crc32_update(uint32_t state, const void *buf, size_t len);
/* CRC-16 polynomial 0x100B, reflected, state update only. */
uint16_t um_crc16_update(uint16_t state, const void *buf, size_t len);

/* Invariant CRC of a packet whose transport part (from the RoCEv2 IP header,
 * or from the native-IB LRH) is pkt[0..len), `len` covering everything up
 * to and excluding the ICRC itself. `link` is UM_LINK_IB (LRH first) or
 * UM_LINK_IP (IPv4/IPv6 header first). Returns the final CRC value, which
 * goes on the wire least significant byte first. Returns 0 and leaves
 * nothing checked if the headers do not fit in `len` (callers only use it on
 * packets they have already parsed). */
uint32_t um_icrc(const uint8_t *pkt, size_t len, int link);
/* Variant CRC over pkt[0..len) (LRH..ICRC): final (complemented) value. */
uint16_t um_vcrc(const uint8_t *pkt, size_t len);

/* ---- build / parse ----------------------------------------------------- */

/* Builds the frame for `mad` into out. Returns its length, or -1 if outlen
 * is too small or m->link is not UM_LINK_ROCEV2 / UM_LINK_IB. */
int um_frame_build(const struct um_frame_meta *m, const uint8_t mad[UM_MAD_SIZE],
		   uint8_t *out, size_t outlen);

enum {
	UM_FRAME_OK = 0,
	UM_FRAME_NOT_MAD = -1, /* a valid frame, just not a MAD */
	UM_FRAME_CORRUPT = -2, /* truncated or malformed headers */
};

/* Parses frame[0..len) of link type `link` (UM_LINK_ROCEV2, UM_LINK_IB or
 * UM_LINK_IP). A MAD is a UD SEND-only packet (BTH opcode 0x64, which implies
 * a DETH) carrying exactly 256 payload bytes to QP0 or QP1; anything else
 * (other ethertype, non-UDP, UDP port not 4791, fragments, other opcodes,
 * other QPs or lengths) is UM_FRAME_NOT_MAD. On UM_FRAME_OK *mad points at
 * the 256 bytes inside `frame` and m is filled, including icrc_ok/vcrc_ok:
 * a CRC mismatch is reported, never rejected. On any other return m->note
 * says why. Never reads outside frame[0..len). Bytes after the packet (an
 * Ethernet FCS, padding) are ignored. */
int um_frame_parse(const uint8_t *frame, size_t len, int link, struct um_frame_meta *m,
		   const uint8_t **mad);

#endif
