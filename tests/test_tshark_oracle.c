/*
 * test_tshark_oracle.c - tshark as an independent oracle for the uscm
 * encoders (cm_proto CM messages, umad SA records, umad RoCEv2 / native-IB
 * framing).
 *
 * Every message tshark 4.0 dissects is filled with a distinct value in every
 * field (walking the layout rows generically, deterministic from a seed),
 * encoded by cmp_cm_encode() / um_sa_encode(), framed by um_pcap_write_mad()
 * into one RoCEv2 pcap and one ERF native-IB pcap, and each file is dissected
 * by ONE tshark run (-T fields). Every tshark field of those messages is
 * listed in the oracle table below: either mapped to a uscm layout row (with a
 * transform when tshark slices fields differently) and compared in every frame
 * that carries it, required absent, or deliberately not compared with the
 * reason. A mapped field that shows up in a frame that should not carry it is
 * a failure too (tshark dissecting the wrong message).
 *
 * Frames (the same 16 MADs in both files): REQ with an opaque service ID (over
 * IPv6 and over IPv4), REQ with an IP CM service ID and a CMA header (IPv4 and
 * IPv6 addresses), REQ in the AF_IB port space, REP, RTU, REJ, DREQ, DREP,
 * PathRecord GetResp (RMPP DATA) / Get (no RMPP) / GetResp (RMPP STOP),
 * MCMemberRecord GetResp (RMPP ACK) / Set (no RMPP) / Set (RMPP ABORT).
 * Fields compared per frame: BTH 10, DETH 2, LRH 9 (native IB), MAD header 9,
 * REQ 51 (55 + 7 IP CM header fields with an IP CM service ID), REP 16, RTU 3,
 * REJ 9, DREQ 4, DREP 3, RMPP+SA header 10 (8 for STOP/ABORT), PathRecord 19,
 * MCMemberRecord 18; floors[] holds these minimums. Values are distinct
 * within a frame except in 1-3 bit fields and the protocol constants the
 * encoders force (versions, class, attribute, SA method, RMPP type).
 *
 * Other tests: the table names every non-reserved uscm row of those messages
 * or lists it in gaps[] with the reason; it lists every field `tshark -G
 * fields` registers under infiniband.{cm,pathrecord,mcmemberrecord,mad,sa,
 * rmpp,bth,deth,lrh}; corrupting two encoded bytes yields exactly those two
 * mismatches; and changing any single expected value is detected.
 *
 * Captures from elsewhere (external_captures): the pcap files named by
 * USCM_ORACLE_PCAPS (colon-separated) and every *.pcap in
 * $USCM_SOURCE_DIR/../shared/reference/captures/ (skipped when there are
 * none), typically real hardware (ibdump ERF, tcpdump RoCEv2) with frames of
 * every kind in between. There the expected values are what uscm DECODES:
 * um_pcap_next() gives each MAD with its 1-based record number, which must
 * be tshark's frame.number; cmp_cm_decode() / um_sa_decode() decode the CM
 * and SA messages tshark dissects (REQ, REP, RTU, REJ, DREQ, DREP,
 * PathRecord, MCMemberRecord). Then the same code as for the synthetic files
 * (compare_frame() through struct walk) compares every mapped field of every
 * such frame, quirk entries staying tolerant; nothing relies on distinct
 * values. Differences from the synthetic run, all in capture_frame():
 *  - reserved rows are expected to hold what the wire holds (senders may set
 *    them), not zero;
 *  - LRH/BTH/DETH come from the record um_pcap read (um_pcap's metadata lacks
 *    SE, MigReq, PadCnt, AckReq, LVer, PktLen), located just before the MAD
 *    bytes and checked against that metadata (locate_headers());
 *  - other MADs (SMPs, other classes, CM/SA attributes tshark 4.0 does not
 *    dissect) have their headers compared, and must show no CM message nor
 *    PathRecord / MCMemberRecord;
 *  - frames without a MAD for um_pcap (IPoIB, ARP, RC ACKs) must show no CM
 *    or SA message, and a CM / SA MAD there is a failure (a MAD uscm missed);
 *    a CM / SA MAD the decoder cannot decode (bad class version, method, ...)
 *    is a failure; one whose decoded values the decoder then rejects (a REQ
 *    path MTU of 0) is compared all the same and counted;
 *  - an SA MAD without a record at byte 56 for uscm (RMPP ACK/STOP/ABORT, a
 *    later segment, an empty table) is compared against the record layout
 *    read at byte 56, since tshark 4.0 dissects those bytes as a record
 *    (it shows only the first record of a GetTableResp, as uscm decodes);
 *  - in the first clean frame of each message kind, changing any single
 *    expected value (quirk entries aside) must be reported.
 * A summary line per file gives frames, MADs compared and fields compared.
 *
 * What tshark 4.0.17 does, found by experiment on these very frames (and
 * consistent with epan/dissectors/packet-infiniband.c of that era):
 *
 * Output format (-T fields, -E occurrence=a):
 *  - integers print as their raw value: BASE_HEX fields as zero-padded hex
 *    ("0x00000f63"), BASE_DEC as decimal ("65535"), masked fields already
 *    shifted down; value_strings are NOT applied (method "0x81", not
 *    "GetResp()"); FT_BOOLEAN (BTH SE/M/A) prints "0" / "1".
 *  - FT_BYTES prints as plain lowercase hex without separators (-T json
 *    would use "00:fc:59:12"); FT_IPv6 as compressed IPv6 text; FT_IPv4 as a
 *    dotted quad. A field present twice prints both values joined by ",":
 *    infiniband.cm.req.alt_reserved1 is used twice in a REQ (byte 138 bits
 *    5-7 and byte 139 bits 5-7; there is no alt_reserved2 in 4.0).
 *  - -T json repeats keys (infiniband.reserved, alt_reserved1) so it cannot
 *    be parsed as a JSON object; -T fields is the robust choice.
 *
 * Decoding quirks (tshark 4.0; all checked below, frame by frame):
 *  - REQ primary AND alternate flow label / packet rate (wire.md only names
 *    the primary path; the alternate path has the same bug): tshark adds the
 *    flow label as a 3-byte item (bytes 88-90 / 132-134) with the 32-bit
 *    mask 0xfffff000, so it reports flow_label >> 8 (the top 12 of the 20
 *    bits). The "reserved" (mask 0xfc0) and packet rate (mask 0x3f) items
 *    are added as 1-byte items at the SAME offset 88 / 132 instead of 91 /
 *    135, so tshark's packet rate is the low 6 bits of the first flow label
 *    byte, (flow_label >> 12) & 0x3f, and its "reserved" is
 *    (flow_label >> 18) & 3; the real packet rate (byte 91 / 135 bits 2-7)
 *    is never shown. Example: bytes 88-91 f6 37 90 03 (flow label 0xf6379,
 *    packet rate 0x03) -> tshark says flow label 0x00f63, reserved 0x3,
 *    packet rate 0x36.
 *  - REQ primary GIDs: when the packet's network destination is IPv4
 *    (RoCEv2 over IPv4) tshark shows only the last 4 bytes of each GID, as
 *    infiniband.cm.req.prim_{local,remote}gid_ipv4; over IPv6 or native IB
 *    it shows the full GID as prim_{local,remote}gid (FT_IPv6). Alternate
 *    GIDs are always FT_BYTES hex.
 *  - Every REQ whose service ID matches 0x0000000001xxxxxx (mask
 *    0xFFFFFFFFFF000000) is dissected as "IP CM": the service ID is split
 *    into prefix / protocol / dport and the private data is parsed as the
 *    CMA header (majv/minv = the two nibbles of our 8-bit cma_version; IPv4
 *    addresses from the last 4 bytes of each 16-byte slot when ipv == 4, else
 *    both slots as IPv6), and infiniband.cm.req.private is then absent. This
 *    includes the AF_IB port space (0x013F): an AF_IB REQ carries no CMA
 *    header, yet tshark decodes its first 36 private data bytes as one.
 *  - The source column of a REQ shows "LID: <primary local LID>" instead of
 *    the packet source (cosmetic, not a field).
 *  - RMPP: RRespTime is 5 bits and RMPPFlags 3 bits in byte 26, but tshark
 *    uses masks 0xf0 / 0x0f, reporting resp_time >> 1 and
 *    ((resp_time & 1) << 3) | flags. infiniband.rmpp.rmppversion is labelled
 *    "RMPP Type". An RMPP type outside 0..4 makes tshark consume only 4 of
 *    the 12 RMPP bytes, shifting the whole SA header and record by 8 bytes
 *    ("Reserved RMPP Type!"), so SA frames use types 0 (data1/data2), 1
 *    (DATA: segment number, payload length), 2 (ACK: segment number, new
 *    window last), 3 and 4 (STOP/ABORT: both words shown only as
 *    infiniband.reserved).
 *  - Not decoded at all: the ECE VendorID (REQ byte 5-7, REP bytes 15, 19,
 *    23: only infiniband.reserved), REQ SAP Supported (lumped into the
 *    second alt_reserved1), PathRecord ServiceID (bytes 0-7 shown as
 *    infiniband.reserved, the pre-1.2 layout) and PathRecord QoSClass (masked
 *    out of infiniband.pathrecord.sl, an FT_UINT16 with mask 0x000f over
 *    bytes 52-53). The CM dissector ignores the MAD method, so CM frames
 *    carry a random one.
 *  - Decoded right, for the record: PathRecord / MCMemberRecord flow labels
 *    (FT_UINT24, mask 0xfffff over the 3 bytes that hold them) and every
 *    other field the table maps with X_INT / X_IPV6 / X_HEX.
 *  - tshark never checks ICRC or VCRC. tshark reads personal preferences
 *    (disabled protocols, decode-as) from ~/.config/wireshark, so each run
 *    points WIRESHARK_CONFIG_DIR at the empty test directory.
 *
 * Quirk entries accept either tshark 4.0's documented wrong value or the
 * correct one (a fixed tshark must not break the test); any other value is a
 * mismatch. The run logs which of the two it saw.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "tests/test_fixtures.h"
#include "umad/um_pcap.h"
#include "umad/um_sa.h"

/* ---- fixture ------------------------------------------------------------ */

static char tmpdir[64];

static void remove_tmpdir(void)
{
	tf_remove(tmpdir);
}

TestSuite(tshark_oracle, .fini = remove_tmpdir);

static const char *tpath(const char *name)
{
	return tf_path(tmpdir, "uscm_oracle_", name);
}

static int have_tshark(void)
{
	return system("command -v tshark >/dev/null 2>&1") == 0;
}

/* ---- what is compared: structures ------------------------------------- */

enum kind {
	K_LRH,
	K_BTH,
	K_DETH,
	K_MAD,
	K_REQ,
	K_REP,
	K_RTU,
	K_REJ,
	K_DREQ,
	K_DREP,
	K_SA,  /* RMPP + SA header */
	K_PR,
	K_MCM,
	K_CMA, /* REQ private data seen as the CMA (IP CM) header */
	K_NKINDS,
};

static const char *const kind_name[K_NKINDS] = {
	"LRH", "BTH", "DETH", "MAD", "REQ", "REP", "RTU", "REJ", "DREQ", "DREP",
	"SA", "PathRecord", "MCMemberRecord", "IPCM",
};

static uint16_t kind_attr(enum kind k)
{
	switch (k) {
	case K_REQ: return UMAD_CM_ATTR_REQ;
	case K_REP: return UMAD_CM_ATTR_REP;
	case K_RTU: return UMAD_CM_ATTR_RTU;
	case K_REJ: return UMAD_CM_ATTR_REJ;
	case K_DREQ: return UMAD_CM_ATTR_DREQ;
	case K_DREP: return UMAD_CM_ATTR_DREP;
	case K_PR: return UMAD_SA_ATTR_PATH_REC;
	case K_MCM: return UMAD_SA_ATTR_MCMEMBER_REC;
	default: return 0;
	}
}

static int kind_is_cm(enum kind k)
{
	return k >= K_REQ && k <= K_DREP;
}

static const struct cmp_layout *kind_layout(enum kind k)
{
	switch (k) {
	case K_LRH: return &um_lrh_layout;
	case K_BTH: return &um_bth_layout;
	case K_DETH: return &um_deth_layout;
	case K_MAD: return &cmp_mad_hdr_layout;
	case K_SA: return &um_sa_hdr_layout;
	case K_CMA: return &cmp_cma_hdr_layout;
	case K_PR:
	case K_MCM: return um_sa_layout(kind_attr(k));
	default: return kind_is_cm(k) ? cmp_cm_layout(kind_attr(k)) : NULL;
	}
}

/* ---- the oracle table --------------------------------------------------- */

enum xf {
	X_NONE,      /* deliberately not compared (why says so) */
	X_ABSENT,    /* must never appear in these frames */
	X_INT,       /* integer row (reserved rows: zero) */
	X_IPV6,      /* GID row vs FT_IPv6 text */
	X_HEX,       /* GID / byte-string row vs FT_BYTES hex */
	X_IPV4TAIL,  /* last 4 bytes of a GID / address slot vs FT_IPv4 text */
	X_HEX_TAIL36, /* REQ private data bytes 36..91 (after the CMA header) */
	X_SID_PREFIX, /* service ID bytes 0-4 as hex */
	X_SID_PROTO, /* service ID byte 5 */
	X_SID_DPORT, /* service ID bytes 6-7 */
	X_HI4,       /* high nibble of an 8-bit row */
	X_LO4,       /* low nibble of an 8-bit row */
	X_SAP,       /* REQ byte 139 bits 5-7: sap_supported then 2 reserved bits */
	/* tshark 4.0 quirks: either the documented wrong value or the right one */
	X_Q_FLOW,    /* flow label: tshark says flow_label >> 8 */
	X_Q_FLRSVD,  /* reserved (row, 0): tshark says (row2 >> 18) & 3 */
	X_Q_RATE,    /* packet rate (row): tshark says (row2 >> 12) & 0x3f */
	X_Q_RRESP,   /* RRespTime (row): tshark says row >> 1 */
	X_Q_RFLAGS,  /* RMPPFlags (row): tshark says ((row2 & 1) << 3) | row */
};

/* When a mapped entry applies, beyond its structure being in the frame. */
enum cond {
	C_ALL,
	C_IPV4DST,   /* RoCEv2 over IPv4 */
	C_NOT_IPV4DST,
	C_IPCM,      /* REQ service ID with the IP CM prefix */
	C_NOT_IPCM,
	C_IPCM_V4,   /* ... and CMA ip_version == 4 */
	C_IPCM_NOT_V4,
	C_RMPP_NONE, /* RMPP type 0 */
	C_RMPP_DATA, /* 1 */
	C_RMPP_ACK,  /* 2 */
	C_RMPP_SEG,  /* 1 or 2 */
};

struct omap {
	const char *ts;   /* tshark field */
	unsigned occ;     /* which occurrence, for fields tshark uses twice */
	enum kind kind;
	const char *row;  /* uscm layout row (NULL: not compared) */
	enum xf xf;
	enum cond cond;
	const char *row2; /* second row some transforms read */
	const char *why;  /* for X_NONE / X_ABSENT / quirks */
};

#define MAP(ts, k, row) { ts, 0, k, row, X_INT, C_ALL, NULL, NULL }
#define MAPX(ts, k, row, xf, cond) { ts, 0, k, row, xf, cond, NULL, NULL }
#define QUIRK(ts, k, row, xf, row2, why) { ts, 0, k, row, xf, C_ALL, row2, why }
#define SKIP(ts, k, why) { ts, 0, k, NULL, X_NONE, C_ALL, NULL, why }
#define ABSENT(ts, k, why) { ts, 0, k, NULL, X_ABSENT, C_ALL, NULL, why }

static const char CONTAINER[] =
	"container: the raw bytes of a header whose fields are compared one by one";
static const char RID_OTHER[] =
	"RID of other SA records (LID, port, block); absent from PathRecord / MCMemberRecord";
static const char FL_QUIRK[] =
	"tshark 4.0 reads the flow label as 3 bytes under a 32-bit mask: flow_label >> 8";
static const char FLRSVD_QUIRK[] =
	"tshark 4.0 reads these 2 'reserved' bits from the first flow label byte";
static const char RATE_QUIRK[] =
	"tshark 4.0 reads the packet rate from the first flow label byte, not byte 91/135";

static const struct omap omap[] = {
	/* LRH (native IB only) */
	SKIP("infiniband.lrh", K_LRH, CONTAINER),
	MAP("infiniband.lrh.vl", K_LRH, "vl"),
	MAP("infiniband.lrh.lver", K_LRH, "lver"),
	MAP("infiniband.lrh.sl", K_LRH, "sl"),
	MAP("infiniband.lrh.reserved2", K_LRH, "_rsvd1"),
	MAP("infiniband.lrh.lnh", K_LRH, "lnh"),
	MAP("infiniband.lrh.dlid", K_LRH, "dlid"),
	MAP("infiniband.lrh.reserved5", K_LRH, "_rsvd4"),
	MAP("infiniband.lrh.pktlen", K_LRH, "pktlen"),
	MAP("infiniband.lrh.slid", K_LRH, "slid"),
	/* BTH / DETH */
	SKIP("infiniband.bth", K_BTH, CONTAINER),
	MAP("infiniband.bth.opcode", K_BTH, "opcode"),
	MAP("infiniband.bth.se", K_BTH, "se"),
	MAP("infiniband.bth.m", K_BTH, "m"),
	MAP("infiniband.bth.padcnt", K_BTH, "padcnt"),
	MAP("infiniband.bth.tver", K_BTH, "tver"),
	MAP("infiniband.bth.p_key", K_BTH, "pkey"),
	MAP("infiniband.bth.destqp", K_BTH, "dest_qp"),
	MAP("infiniband.bth.a", K_BTH, "a"),
	MAP("infiniband.bth.reserved7", K_BTH, "_rsvd7"),
	MAP("infiniband.bth.psn", K_BTH, "psn"),
	SKIP("infiniband.deth", K_DETH, CONTAINER),
	MAP("infiniband.deth.q_key", K_DETH, "qkey"),
	MAP("infiniband.deth.srcqp", K_DETH, "src_qp"),
	/* MAD common header */
	SKIP("infiniband.mad", K_MAD, CONTAINER),
	MAP("infiniband.mad.baseversion", K_MAD, "base_version"),
	MAP("infiniband.mad.mgmtclass", K_MAD, "mgmt_class"),
	MAP("infiniband.mad.classversion", K_MAD, "class_version"),
	MAP("infiniband.mad.method", K_MAD, "method"),
	MAP("infiniband.mad.status", K_MAD, "status"),
	MAP("infiniband.mad.classspecific", K_MAD, "class_specific"),
	MAP("infiniband.mad.transactionid", K_MAD, "tid"),
	MAP("infiniband.mad.attributeid", K_MAD, "attr_id"),
	MAP("infiniband.mad.attributemodifier", K_MAD, "attr_mod"),
	SKIP("infiniband.mad.data", K_MAD,
	     "raw dump of MAD bytes 24..255; every field in it is compared on its own"),
	/* CM REQ */
	MAP("infiniband.cm.req", K_REQ, "local_comm_id"),
	MAP("infiniband.cm.req.serviceid", K_REQ, "service_id"),
	MAPX("infiniband.cm.req.serviceid.prefix", K_REQ, "service_id", X_SID_PREFIX, C_IPCM),
	MAPX("infiniband.cm.req.serviceid.protocol", K_REQ, "service_id", X_SID_PROTO, C_IPCM),
	MAPX("infiniband.cm.req.serviceid.dport", K_REQ, "service_id", X_SID_DPORT, C_IPCM),
	MAP("infiniband.cm.req.localcaguid", K_REQ, "local_ca_guid"),
	MAP("infiniband.cm.req.localqkey", K_REQ, "local_qkey"),
	MAP("infiniband.cm.req.localqpn", K_REQ, "local_qpn"),
	MAP("infiniband.cm.req.responderres", K_REQ, "responder_resources"),
	MAP("infiniband.cm.req.localeecn", K_REQ, "local_eecn"),
	MAP("infiniband.cm.req.initdepth", K_REQ, "initiator_depth"),
	MAP("infiniband.cm.req.remoteeecn", K_REQ, "remote_eecn"),
	MAP("infiniband.cm.req.remoteresptout", K_REQ, "remote_cm_response_timeout"),
	MAP("infiniband.cm.req.transpsvctype", K_REQ, "transport_service_type"),
	MAP("infiniband.cm.req.e2eflowctrl", K_REQ, "end_to_end_flow_control"),
	MAP("infiniband.cm.req.startpsn", K_REQ, "starting_psn"),
	MAP("infiniband.cm.req.localresptout", K_REQ, "local_cm_response_timeout"),
	MAP("infiniband.cm.req.retrcount", K_REQ, "retry_count"),
	MAP("infiniband.cm.req.pkey", K_REQ, "pkey"),
	MAP("infiniband.cm.req.pppmtu", K_REQ, "path_mtu"),
	MAP("infiniband.cm.req.rdcexist", K_REQ, "rdc_exists"),
	MAP("infiniband.cm.req.rnrretrcount", K_REQ, "rnr_retry_count"),
	MAP("infiniband.cm.req.maxcmretr", K_REQ, "max_cm_retries"),
	MAP("infiniband.cm.req.srq", K_REQ, "srq"),
	MAP("infiniband.cm.req.ext_transport", K_REQ, "extended_transport_type"),
	MAP("infiniband.cm.req.prim_locallid", K_REQ, "primary_local_lid"),
	MAP("infiniband.cm.req.prim_remotelid", K_REQ, "primary_remote_lid"),
	MAPX("infiniband.cm.req.prim_localgid", K_REQ, "primary_local_gid", X_IPV6, C_NOT_IPV4DST),
	MAPX("infiniband.cm.req.prim_remotegid", K_REQ, "primary_remote_gid", X_IPV6,
	     C_NOT_IPV4DST),
	MAPX("infiniband.cm.req.prim_localgid_ipv4", K_REQ, "primary_local_gid", X_IPV4TAIL,
	     C_IPV4DST),
	MAPX("infiniband.cm.req.prim_remotegid_ipv4", K_REQ, "primary_remote_gid", X_IPV4TAIL,
	     C_IPV4DST),
	QUIRK("infiniband.cm.req.prim_flowlabel", K_REQ, "primary_flow_label", X_Q_FLOW, NULL,
	      FL_QUIRK),
	QUIRK("infiniband.cm.req.prim_reserved0", K_REQ, "_rsvd90", X_Q_FLRSVD,
	      "primary_flow_label", FLRSVD_QUIRK),
	QUIRK("infiniband.cm.req.prim_pktrate", K_REQ, "primary_packet_rate", X_Q_RATE,
	      "primary_flow_label", RATE_QUIRK),
	MAP("infiniband.cm.req.prim_tfcclass", K_REQ, "primary_traffic_class"),
	MAP("infiniband.cm.req.prim_hoplim", K_REQ, "primary_hop_limit"),
	MAP("infiniband.cm.req.prim_sl", K_REQ, "primary_sl"),
	MAP("infiniband.cm.req.prim_subnetlocal", K_REQ, "primary_subnet_local"),
	MAP("infiniband.cm.req.prim_reserved1", K_REQ, "_rsvd94"),
	MAP("infiniband.cm.req.prim_localacktout", K_REQ, "primary_local_ack_timeout"),
	MAP("infiniband.cm.req.prim_reserved2", K_REQ, "_rsvd95"),
	MAP("infiniband.cm.req.alt_locallid", K_REQ, "alternate_local_lid"),
	MAP("infiniband.cm.req.alt_remotelid", K_REQ, "alternate_remote_lid"),
	MAPX("infiniband.cm.req.alt_localgid", K_REQ, "alternate_local_gid", X_HEX, C_ALL),
	MAPX("infiniband.cm.req.alt_remotegid", K_REQ, "alternate_remote_gid", X_HEX, C_ALL),
	QUIRK("infiniband.cm.req.alt_flowlabel", K_REQ, "alternate_flow_label", X_Q_FLOW, NULL,
	      FL_QUIRK),
	QUIRK("infiniband.cm.req.alt_reserved0", K_REQ, "_rsvd134", X_Q_FLRSVD,
	      "alternate_flow_label", FLRSVD_QUIRK),
	QUIRK("infiniband.cm.req.alt_pktrate", K_REQ, "alternate_packet_rate", X_Q_RATE,
	      "alternate_flow_label", RATE_QUIRK),
	MAP("infiniband.cm.req.alt_tfcclass", K_REQ, "alternate_traffic_class"),
	MAP("infiniband.cm.req.alt_hoplim", K_REQ, "alternate_hop_limit"),
	MAP("infiniband.cm.req.alt_sl", K_REQ, "alternate_sl"),
	MAP("infiniband.cm.req.alt_subnetlocal", K_REQ, "alternate_subnet_local"),
	/* tshark 4.0 uses alt_reserved1 for both reserved bit groups. */
	{ "infiniband.cm.req.alt_reserved1", 0, K_REQ, "_rsvd138", X_INT, C_ALL, NULL, NULL },
	{ "infiniband.cm.req.alt_reserved1", 1, K_REQ, "sap_supported", X_SAP, C_ALL, NULL,
	  "tshark 4.0 has no SAP Supported field: byte 139 bits 5-7 show as reserved" },
	MAP("infiniband.cm.req.alt_localacktout", K_REQ, "alternate_local_ack_timeout"),
	MAPX("infiniband.cm.req.private", K_REQ, "private_data", X_HEX, C_NOT_IPCM),
	MAPX("infiniband.cm.req.ip_cm", K_REQ, "private_data", X_HEX, C_IPCM),
	MAPX("infiniband.cm.req.ip_cm.majv", K_CMA, "cma_version", X_HI4, C_ALL),
	MAPX("infiniband.cm.req.ip_cm.minv", K_CMA, "cma_version", X_LO4, C_ALL),
	MAP("infiniband.cm.req.ip_cm.ipv", K_CMA, "ip_version"),
	MAP("infiniband.cm.req.ip_cm.reserved", K_CMA, "_rsvd1"),
	MAP("infiniband.cm.req.ip_cm.sport", K_CMA, "src_port"),
	MAPX("infiniband.cm.req.ip_cm.sip6", K_CMA, "src_addr", X_IPV6, C_IPCM_NOT_V4),
	MAPX("infiniband.cm.req.ip_cm.dip6", K_CMA, "dst_addr", X_IPV6, C_IPCM_NOT_V4),
	MAPX("infiniband.cm.req.ip_cm.sip4", K_CMA, "src_addr", X_IPV4TAIL, C_IPCM_V4),
	MAPX("infiniband.cm.req.ip_cm.dip4", K_CMA, "dst_addr", X_IPV4TAIL, C_IPCM_V4),
	MAPX("infiniband.cm.req.ip_cm.private", K_REQ, "private_data", X_HEX_TAIL36, C_IPCM),
	/* CM REP */
	MAP("infiniband.cm.rep", K_REP, "local_comm_id"),
	MAP("infiniband.cm.rep.remotecommid", K_REP, "remote_comm_id"),
	MAP("infiniband.cm.rep.localqkey", K_REP, "local_qkey"),
	MAP("infiniband.cm.rep.localqpn", K_REP, "local_qpn"),
	MAP("infiniband.cm.rep.localeecn", K_REP, "local_eecn"),
	MAP("infiniband.cm.rep.startpsn", K_REP, "starting_psn"),
	MAP("infiniband.cm.rep.respres", K_REP, "responder_resources"),
	MAP("infiniband.cm.rep.initdepth", K_REP, "initiator_depth"),
	MAP("infiniband.cm.rep.tgtackdelay", K_REP, "target_ack_delay"),
	MAP("infiniband.cm.rep.failoveracc", K_REP, "failover_accepted"),
	MAP("infiniband.cm.rep.e2eflowctrl", K_REP, "end_to_end_flow_control"),
	MAP("infiniband.cm.rep.rnrretrcount", K_REP, "rnr_retry_count"),
	MAP("infiniband.cm.rep.srq", K_REP, "srq"),
	MAP("infiniband.cm.rep.reserved", K_REP, "_rsvd27"),
	MAP("infiniband.cm.rep.localcaguid", K_REP, "local_ca_guid"),
	MAPX("infiniband.cm.rep.private", K_REP, "private_data", X_HEX, C_ALL),
	/* CM RTU */
	MAP("infiniband.cm.rtu.localcommid", K_RTU, "local_comm_id"),
	MAP("infiniband.cm.rtu.remotecommid", K_RTU, "remote_comm_id"),
	MAPX("infiniband.cm.rtu.private", K_RTU, "private_data", X_HEX, C_ALL),
	/* CM REJ */
	MAP("infiniband.cm.rej.localcommid", K_REJ, "local_comm_id"),
	MAP("infiniband.cm.rej.remotecommid", K_REJ, "remote_comm_id"),
	MAP("infiniband.cm.rej.msgrej", K_REJ, "message_rejected"),
	MAP("infiniband.cm.rej.reserved0", K_REJ, "_rsvd8"),
	MAP("infiniband.cm.rej.rejinfolen", K_REJ, "reject_info_length"),
	MAP("infiniband.cm.rej.reserved1", K_REJ, "_rsvd9"),
	MAP("infiniband.cm.rej.reason", K_REJ, "reason"),
	MAPX("infiniband.cm.rej.ari", K_REJ, "ari", X_HEX, C_ALL),
	MAPX("infiniband.cm.rej.private", K_REJ, "private_data", X_HEX, C_ALL),
	/* CM DREQ (its remote QPN field is named under cm.req) */
	MAP("infiniband.cm.dreq.localcommid", K_DREQ, "local_comm_id"),
	MAP("infiniband.cm.dreq.remotecommid", K_DREQ, "remote_comm_id"),
	MAP("infiniband.cm.req.remoteqpneecn", K_DREQ, "remote_qpn_eecn"),
	MAPX("infiniband.cm.dreq.private", K_DREQ, "private_data", X_HEX, C_ALL),
	/* CM DREP (named "drsp" by tshark) */
	MAP("infiniband.cm.drsp.localcommid", K_DREP, "local_comm_id"),
	MAP("infiniband.cm.drsp.remotecommid", K_DREP, "remote_comm_id"),
	MAPX("infiniband.cm.drsp.private", K_DREP, "private_data", X_HEX, C_ALL),
	/* RMPP header */
	SKIP("infiniband.rmpp", K_SA, CONTAINER),
	MAP("infiniband.rmpp.rmppversion", K_SA, "rmpp_version"),
	MAP("infiniband.rmpp.rmpptype", K_SA, "rmpp_type"),
	QUIRK("infiniband.rmpp.rresptime", K_SA, "rmpp_resp_time", X_Q_RRESP, NULL,
	      "tshark 4.0 masks RRespTime with 0xf0 (4 bits, not 5): resp_time >> 1"),
	QUIRK("infiniband.rmpp.rmppflags", K_SA, "rmpp_flags", X_Q_RFLAGS, "rmpp_resp_time",
	      "tshark 4.0 masks RMPPFlags with 0x0f: RRespTime's low bit lands in bit 3"),
	MAP("infiniband.rmpp.rmppstatus", K_SA, "rmpp_status"),
	MAPX("infiniband.rmpp.data1", K_SA, "seg_num", X_INT, C_RMPP_NONE),
	MAPX("infiniband.rmpp.data2", K_SA, "paylen_newwin", X_INT, C_RMPP_NONE),
	MAPX("infiniband.rmpp.segmentnumber", K_SA, "seg_num", X_INT, C_RMPP_SEG),
	MAPX("infiniband.rmpp.payloadlength", K_SA, "paylen_newwin", X_INT, C_RMPP_DATA),
	MAPX("infiniband.rmpp.newwindowlast", K_SA, "paylen_newwin", X_INT, C_RMPP_ACK),
	SKIP("infiniband.rmpp.transferreddata", K_SA,
	     "raw dump of MAD bytes 36..255 in a DATA segment; fields compared on their own"),
	SKIP("infiniband.rmpp.extendederrordata", K_SA,
	     "raw dump of MAD bytes 36..255 in a STOP/ABORT; fields compared on their own"),
	/* SA header */
	SKIP("infiniband.sa.drdlid", K_SA,
	     "container ('SA Packet'), used for the whole SA part and for the record"),
	MAP("infiniband.sa.smkey", K_SA, "sm_key"),
	MAP("infiniband.sa.attributeoffset", K_SA, "attr_offset"),
	MAP("infiniband.sa.componentmask", K_SA, "comp_mask"),
	ABSENT("infiniband.sa.subnetadmindata", K_SA,
	       "raw record, shown only for attributes tshark cannot parse"),
	ABSENT("infiniband.sa.lid", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.endportlid", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.portnum", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.inputportnum", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.outputportnum", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.blocknum_eightbit", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.blocknum_ninebit", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.blocknum_sixteenbit", K_SA, RID_OTHER),
	ABSENT("infiniband.sa.position", K_SA, RID_OTHER),
	/* PathRecord */
	MAPX("infiniband.pathrecord.dgid", K_PR, "dgid", X_IPV6, C_ALL),
	MAPX("infiniband.pathrecord.sgid", K_PR, "sgid", X_IPV6, C_ALL),
	MAP("infiniband.pathrecord.dlid", K_PR, "dlid"),
	MAP("infiniband.pathrecord.slid", K_PR, "slid"),
	MAP("infiniband.pathrecord.rawtraffic", K_PR, "raw_traffic"),
	MAP("infiniband.pathrecord.flowlabel", K_PR, "flow_label"),
	MAP("infiniband.pathrecord.hoplimit", K_PR, "hop_limit"),
	MAP("infiniband.pathrecord.tclass", K_PR, "tclass"),
	MAP("infiniband.pathrecord.reversible", K_PR, "reversible"),
	MAP("infiniband.pathrecord.numbpath", K_PR, "numb_path"),
	MAP("infiniband.pathrecord.p_key", K_PR, "pkey"),
	MAP("infiniband.pathrecord.sl", K_PR, "sl"),
	MAP("infiniband.pathrecord.mtuselector", K_PR, "mtu_selector"),
	MAP("infiniband.pathrecord.mtu", K_PR, "mtu"),
	MAP("infiniband.pathrecord.rateselector", K_PR, "rate_selector"),
	MAP("infiniband.pathrecord.rate", K_PR, "rate"),
	MAP("infiniband.pathrecord.packetlifetimeselector", K_PR, "packet_life_time_selector"),
	MAP("infiniband.pathrecord.packetlifetime", K_PR, "packet_life_time"),
	MAP("infiniband.pathrecord.preference", K_PR, "preference"),
	/* MCMemberRecord */
	MAPX("infiniband.mcmemberrecord.mgid", K_MCM, "mgid", X_IPV6, C_ALL),
	MAPX("infiniband.mcmemberrecord.portgid", K_MCM, "port_gid", X_IPV6, C_ALL),
	MAP("infiniband.mcmemberrecord.q_key", K_MCM, "qkey"),
	MAP("infiniband.mcmemberrecord.mlid", K_MCM, "mlid"),
	MAP("infiniband.mcmemberrecord.mtuselector", K_MCM, "mtu_selector"),
	MAP("infiniband.mcmemberrecord.mtu", K_MCM, "mtu"),
	MAP("infiniband.mcmemberrecord.tclass", K_MCM, "tclass"),
	MAP("infiniband.mcmemberrecord.p_key", K_MCM, "pkey"),
	MAP("infiniband.mcmemberrecord.rateselector", K_MCM, "rate_selector"),
	MAP("infiniband.mcmemberrecord.rate", K_MCM, "rate"),
	MAP("infiniband.mcmemberrecord.packetlifetimeselector", K_MCM, "packet_life_time_selector"),
	MAP("infiniband.mcmemberrecord.packetlifetime", K_MCM, "packet_life_time"),
	MAP("infiniband.mcmemberrecord.sl", K_MCM, "sl"),
	MAP("infiniband.mcmemberrecord.flowlabel", K_MCM, "flow_label"),
	MAP("infiniband.mcmemberrecord.hoplimit", K_MCM, "hop_limit"),
	MAP("infiniband.mcmemberrecord.scope", K_MCM, "scope"),
	MAP("infiniband.mcmemberrecord.joinstate", K_MCM, "join_state"),
	MAP("infiniband.mcmemberrecord.proxyjoin", K_MCM, "proxy_join"),
};
#define NOMAP (sizeof(omap) / sizeof(omap[0]))

/* uscm fields tshark 4.0 has no field for (checked by the coverage test). */
struct gap {
	enum kind kind;
	const char *row;
	const char *why;
};

static const struct gap gaps[] = {
	{ K_REQ, "vendor_id", "ECE VendorID (bytes 5-7): shown only inside the 4-byte "
			      "infiniband.reserved at byte 4" },
	{ K_REP, "vendor_id_h", "ECE VendorID: shown only as a 1-byte infiniband.reserved" },
	{ K_REP, "vendor_id_m", "ECE VendorID: shown only as a 1-byte infiniband.reserved" },
	{ K_REP, "vendor_id_l", "ECE VendorID: shown only as a 1-byte infiniband.reserved" },
	{ K_PR, "service_id", "PathRecord bytes 0-7 shown as an 8-byte infiniband.reserved "
			      "(pre-IBTA-1.2 layout)" },
	{ K_PR, "qos_class", "no field: masked out of infiniband.pathrecord.sl (mask 0x000f "
			     "over bytes 52-53)" },
};
#define NGAPS (sizeof(gaps) / sizeof(gaps[0]))

/* The messages the coverage test holds to "every field tshark has". */
static const enum kind covered_kinds[] = {
	K_REQ, K_REP, K_RTU, K_REJ, K_DREQ, K_DREP, K_PR, K_MCM,
	K_MAD, K_SA, K_CMA, K_BTH, K_DETH, K_LRH,
};

/* tshark field prefixes the table must list completely. */
static const char *const ts_prefixes[] = {
	"cm", "pathrecord", "mcmemberrecord", "mad", "sa", "rmpp", "bth", "deth", "lrh",
};

/* ---- frames ------------------------------------------------------------- */

enum req_variant {
	RV_PLAIN,   /* random service ID, opaque private data */
	RV_IPCM_V4, /* TCP port space, CMA header with IPv4 addresses */
	RV_IPCM_V6, /* UDP port space, CMA header with IPv6 addresses */
	RV_PS_IB,   /* AF_IB port space: no CMA header, tshark parses one anyway */
};

struct fspec {
	enum kind msg;
	uint8_t method;     /* SA; CM frames get a random one */
	enum req_variant rv;
	uint8_t rmpp_type;  /* SA */
	int v4;             /* RoCEv2 file: the frame goes over IPv4 */
};

static const struct fspec fspecs[] = {
	{ K_REQ, 0, RV_PLAIN, 0, 0 },
	{ K_REQ, 0, RV_PLAIN, 0, 1 },
	{ K_REQ, 0, RV_IPCM_V4, 0, 1 },
	{ K_REQ, 0, RV_IPCM_V6, 0, 0 },
	{ K_REQ, 0, RV_PS_IB, 0, 1 },
	{ K_REP, 0, RV_PLAIN, 0, 1 },
	{ K_RTU, 0, RV_PLAIN, 0, 0 },
	{ K_REJ, 0, RV_PLAIN, 0, 1 },
	{ K_DREQ, 0, RV_PLAIN, 0, 0 },
	{ K_DREP, 0, RV_PLAIN, 0, 1 },
	{ K_PR, UMAD_METHOD_GET_RESP, RV_PLAIN, UM_SA_RMPP_TYPE_DATA, 0 },
	{ K_PR, UMAD_METHOD_GET, RV_PLAIN, 0, 1 },
	{ K_PR, UMAD_METHOD_GET_RESP, RV_PLAIN, UM_SA_RMPP_TYPE_STOP, 0 },
	{ K_MCM, UMAD_METHOD_GET_RESP, RV_PLAIN, UM_SA_RMPP_TYPE_ACK, 1 },
	{ K_MCM, UMAD_METHOD_SET, RV_PLAIN, 0, 0 },
	{ K_MCM, UMAD_METHOD_SET, RV_PLAIN, UM_SA_RMPP_TYPE_ABORT, 1 },
};
#define NFRAMES (sizeof(fspecs) / sizeof(fspecs[0]))

/* Everything one frame should show: a synthetic frame built from fspecs[],
 * or a frame of a capture as um_pcap read it and uscm decoded it. Both go
 * through the same comparison (compare_frame / struct walk). */
struct fexp {
	uint64_t frame_no; /* 1-based pcap record number = tshark's frame.number */
	enum kind msg;     /* K_REQ..K_DREP, K_PR, K_MCM; K_MAD for a MAD of
			    * which only the common header is compared */
	unsigned has;      /* bit k: the frame carries structure k */
	char label[40];    /* names the frame in reports */
	const struct fspec *s; /* synthetic frames only */
	int link;  /* UM_LINK_ROCEV2, UM_LINK_IB (or UM_LINK_IP from a capture) */
	int ipv4;  /* RoCEv2 over IPv4 */
	int ipcm;  /* REQ with an IP CM service ID */
	/* Reserved rows: 0 = expected zero (what the encoders write), 1 = read
	 * from the wire bytes below (captures, whose senders may set them). */
	int wire;
	struct um_frame_meta meta;
	struct um_lrh lrh;
	struct um_bth bth;
	struct um_deth deth;
	struct cmp_cm_msg cm;
	struct um_sa_msg sa; /* also the MAD header of K_MAD frames */
	struct cmp_cma_hdr cma;
	uint8_t mad[CMP_MAD_SIZE];
	uint8_t lrh_raw[UM_LRH_LEN], bth_raw[UM_BTH_LEN], deth_raw[UM_DETH_LEN];
};

#define KBIT(k) (1u << (k))
#define SCOPE_ALL (KBIT(K_NKINDS) - 1u)
/* What a frame without a (compared) MAD must not show. */
#define SCOPE_MSGS                                                                        \
	(KBIT(K_REQ) | KBIT(K_REP) | KBIT(K_RTU) | KBIT(K_REJ) | KBIT(K_DREQ) | KBIT(K_DREP) | \
	 KBIT(K_CMA) | KBIT(K_SA) | KBIT(K_PR) | KBIT(K_MCM))
#define SCOPE_HDRS (KBIT(K_LRH) | KBIT(K_BTH) | KBIT(K_DETH) | KBIT(K_MAD))
/* A MAD whose message is not compared: the headers are, and tshark must
 * not show a CM message or a PathRecord / MCMemberRecord in it (the SA
 * header it may show, for other SA attributes). */
#define SCOPE_OTHER_MAD (SCOPE_ALL & ~KBIT(K_SA))

/* The structures x carries, from msg, link and ipcm. */
static void set_kinds(struct fexp *x)
{
	x->has = KBIT(K_BTH) | KBIT(K_DETH) | KBIT(K_MAD);
	if (x->link == UM_LINK_IB)
		x->has |= KBIT(K_LRH);
	if (x->msg != K_MAD)
		x->has |= KBIT(x->msg);
	if (x->msg == K_PR || x->msg == K_MCM)
		x->has |= KBIT(K_SA);
	if (x->msg == K_REQ && x->ipcm)
		x->has |= KBIT(K_CMA);
}

#define IPCM_SID_MASK 0xFFFFFFFFFF000000ull
#define IPCM_SID_PREFIX 0x0000000001000000ull

static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Values already handed out in one frame, to keep fields distinct. */
struct used {
	uint64_t v[512];
	unsigned n;
};

static int used_has(const struct used *u, uint64_t v)
{
	for (unsigned i = 0; i < u->n; i++)
		if (u->v[i] == v)
			return 1;
	return 0;
}

static void used_add(struct used *u, uint64_t v)
{
	if (u->n < sizeof(u->v) / sizeof(u->v[0]))
		u->v[u->n++] = v;
}

/* A non-zero value for every non-reserved row, distinct from every value
 * already used in the frame as far as the width allows; byte strings get a
 * non-zero pseudo-random byte sequence of their own. */
static void fill_layout(const struct cmp_layout *l, void *obj, uint64_t seed, struct used *u)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		uint64_t h = mix64(seed ^ mix64(i + 1)), mask, v = 0;
		uint8_t *p = (uint8_t *)obj + f->offset;

		switch (f->kind) {
		case CMP_K_RSVD:
			break;
		case CMP_K_GID:
		case CMP_K_BYTES:
			for (unsigned k = 0; k < f->size; k++) {
				p[k] = (uint8_t)(mix64(h + k) >> 24);
				if (!p[k])
					p[k] = (uint8_t)(k | 1);
			}
			break;
		default:
			mask = f->width >= 64 ? ~0ull : (1ull << f->width) - 1;
			for (unsigned a = 0; a < 64; a++) {
				v = mix64(h + a) & mask;
				if (v && !used_has(u, v))
					break;
			}
			if (!v)
				v = 1;
			used_add(u, v);
			cmp_field_set_value(f, obj, v);
			break;
		}
	}
}

static uint64_t rnd(uint64_t seed, unsigned width)
{
	uint64_t v = mix64(seed) & ((1ull << width) - 1);

	return v ? v : 1;
}

static void build_req(struct fexp *x, uint64_t seed, struct used *u)
{
	struct cmp_cm_req *r = &x->cm.u.req;
	uint16_t port = (uint16_t)rnd(seed, 16);

	switch (x->s->rv) {
	case RV_PLAIN:
		if ((r->service_id & IPCM_SID_MASK) == IPCM_SID_PREFIX)
			r->service_id ^= 1ull << 63;
		break;
	case RV_IPCM_V4:
	case RV_IPCM_V6:
		r->service_id = cmp_sid_make(x->s->rv == RV_IPCM_V4 ? CMP_PS_TCP : CMP_PS_UDP, port);
		fill_layout(&cmp_cma_hdr_layout, &x->cma, seed + 1, u);
		if (x->s->rv == RV_IPCM_V4) {
			x->cma.ip_version = 4;
			memset(x->cma.src_addr, 0, 12);
			memset(x->cma.dst_addr, 0, 12);
		} else {
			x->cma.ip_version = 6;
		}
		cmp_layout_encode(&cmp_cma_hdr_layout, &x->cma, r->private_data);
		break;
	case RV_PS_IB:
		/* AF_IB: the private data is the user's, no CMA header. */
		r->service_id = cmp_sid_make(CMP_PS_IB, port);
		cmp_layout_decode(&cmp_cma_hdr_layout, r->private_data, &x->cma);
		break;
	}
	x->ipcm = (r->service_id & IPCM_SID_MASK) == IPCM_SID_PREFIX;
	/* Top flow label bit set: tshark 4.0 reads the 2 "reserved" bits from
	 * the flow label's top bits, and this keeps that wrong reading distinct
	 * from the right one (0) in every frame. */
	r->primary_flow_label |= 1u << 19;
	r->alternate_flow_label |= 1u << 19;
}

static void build_frame(struct fexp *x, unsigned idx, int link)
{
	const struct fspec *s = &fspecs[idx];
	struct used u = { .n = 0 };
	/* The MAD depends on the frame only, so both files carry the same. */
	uint64_t seed = 0x0123456789ABCDEFull * (idx + 1);
	struct um_frame_meta *m = &x->meta;

	memset(x, 0, sizeof(*x));
	x->s = s;
	x->msg = s->msg;
	x->frame_no = idx + 1u;
	snprintf(x->label, sizeof(x->label), "%s", kind_name[s->msg]);
	x->link = link;
	x->ipv4 = link == UM_LINK_ROCEV2 && s->v4;
	/* The values forced below count as used, so no random field repeats
	 * them (4 and 6: the CMA ip_version). */
	used_add(&u, UMAD_BASE_VERSION);
	used_add(&u, kind_is_cm(s->msg) ? UMAD_CLASS_CM : UMAD_CLASS_SUBN_ADM);
	used_add(&u, kind_is_cm(s->msg) ? CMP_CM_CLASS_VERSION : UMAD_SA_CLASS_VERSION);
	used_add(&u, kind_attr(s->msg));
	if (s->method)
		used_add(&u, s->method);
	if (s->rmpp_type)
		used_add(&u, s->rmpp_type);
	if (s->msg == K_REQ) {
		used_add(&u, 4);
		used_add(&u, 6);
	}

	if (kind_is_cm(s->msg)) {
		struct cmp_cm_msg *c = &x->cm;

		fill_layout(&cmp_mad_hdr_layout, &c->hdr, seed + 1, &u);
		/* What cmp_cm_encode() forces; the method stays random since
		 * tshark's CM dissector ignores it. */
		c->hdr.base_version = UMAD_BASE_VERSION;
		c->hdr.mgmt_class = UMAD_CLASS_CM;
		c->hdr.class_version = CMP_CM_CLASS_VERSION;
		c->hdr.attr_id = kind_attr(s->msg);
		fill_layout(cmp_cm_layout(c->hdr.attr_id), &c->u, seed + 2, &u);
		if (s->msg == K_REQ)
			build_req(x, seed + 3, &u);
		cr_assert_eq(cmp_cm_encode(c, x->mad), 0);
	} else {
		struct um_sa_msg *a = &x->sa;

		fill_layout(&cmp_mad_hdr_layout, &a->hdr, seed + 1, &u);
		a->hdr.base_version = UMAD_BASE_VERSION;
		a->hdr.mgmt_class = UMAD_CLASS_SUBN_ADM;
		a->hdr.class_version = UMAD_SA_CLASS_VERSION;
		a->hdr.method = s->method;
		a->hdr.attr_id = kind_attr(s->msg);
		fill_layout(&um_sa_hdr_layout, &a->sa, seed + 2, &u);
		a->sa.rmpp_type = s->rmpp_type; /* others shift tshark's SA header */
		fill_layout(um_sa_layout(a->hdr.attr_id), &a->u, seed + 3, &u);
		a->nrecords = 1;
		cr_assert_eq(um_sa_encode(a, x->mad), 0);
	}

	/* Framing: distinct per frame; the file decides the link. */
	m->ts_ns = 1700000000000000000ull + idx * 1000u;
	m->link = link;
	m->dest_qp = 1;
	m->pkey = (uint16_t)rnd(seed + 10, 16);
	m->psn = (uint32_t)rnd(seed + 11, 24);
	m->src_qp = (uint32_t)rnd(seed + 12, 24);
	if (link == UM_LINK_IB) {
		m->slid = (uint16_t)rnd(seed + 13, 16);
		m->dlid = (uint16_t)rnd(seed + 14, 16);
		m->sl = (uint8_t)rnd(seed + 15, 4);
		m->vl = (uint8_t)rnd(seed + 16, 4);
	} else if (x->ipv4) {
		m->sgid[10] = m->sgid[11] = m->dgid[10] = m->dgid[11] = 0xFF;
		m->sgid[12] = 10, m->sgid[13] = (uint8_t)idx, m->sgid[15] = 1;
		m->dgid[12] = 10, m->dgid[13] = (uint8_t)idx, m->dgid[15] = 2;
	} else {
		m->sgid[0] = m->dgid[0] = 0xFD;
		m->sgid[7] = m->dgid[7] = (uint8_t)idx;
		m->sgid[15] = 1;
		m->dgid[15] = 2;
	}

	/* What um_frame_build() writes for a MAD. */
	x->lrh.vl = m->vl;
	x->lrh.lver = 0;
	x->lrh.sl = m->sl;
	x->lrh.lnh = UM_LNH_IBA_LOCAL;
	x->lrh.dlid = m->dlid;
	x->lrh.pktlen = (UM_LRH_LEN + UM_BTH_LEN + UM_DETH_LEN + UM_MAD_SIZE + 4) / 4;
	x->lrh.slid = m->slid;
	x->bth.opcode = UM_BTH_OP_UD_SEND_ONLY;
	x->bth.pkey = m->pkey;
	x->bth.dest_qp = m->dest_qp;
	x->bth.psn = m->psn;
	x->deth.qkey = UM_QP1_QKEY;
	x->deth.src_qp = m->src_qp;
	set_kinds(x);
}

static void build_all(struct fexp *fx, int link)
{
	for (unsigned i = 0; i < NFRAMES; i++)
		build_frame(&fx[i], i, link);
}

static void write_pcap(const char *path, const struct fexp *fx, int linktype)
{
	struct um_pcap_writer *w = um_pcap_open_write(path, linktype);

	cr_assert_not_null(w, "%s: %s", path, strerror(errno));
	for (unsigned i = 0; i < NFRAMES; i++)
		cr_assert_eq(um_pcap_write_mad(w, &fx[i].meta, fx[i].mad), 0, "frame %u: %s",
			     i + 1, strerror(errno));
	cr_assert_eq(um_pcap_close_write(w), 0);
}

/* The structure of kind k in frame x (its decoded / expected values) and
 * whether the frame has it. raw, for reserved rows, is the byte string the
 * structure sits in on the wire: always for the CMA header (REQ private
 * data), for every structure of a captured frame; otherwise NULL, and
 * reserved rows are expected zero. */
static int kind_obj(const struct fexp *x, enum kind k, const void **obj, const uint8_t **raw)
{
	const uint8_t *w;

	switch (k) {
	case K_LRH: *obj = &x->lrh, w = x->lrh_raw; break;
	case K_BTH: *obj = &x->bth, w = x->bth_raw; break;
	case K_DETH: *obj = &x->deth, w = x->deth_raw; break;
	case K_MAD:
		*obj = kind_is_cm(x->msg) ? &x->cm.hdr : &x->sa.hdr;
		w = x->mad;
		break;
	case K_SA: *obj = &x->sa.sa, w = x->mad + UM_SA_HDR_OFFSET; break;
	case K_CMA: *obj = &x->cma, w = x->cm.u.req.private_data; break;
	case K_PR:
	case K_MCM: *obj = &x->sa.u, w = x->mad + UM_SA_DATA_OFFSET; break;
	default: *obj = &x->cm.u, w = x->mad + CMP_MAD_HDR_SIZE; break;
	}
	*raw = x->wire || k == K_CMA ? w : NULL;
	return (x->has & KBIT(k)) != 0;
}

static int cond_holds(const struct fexp *x, enum cond c)
{
	uint8_t rt = x->sa.sa.rmpp_type;

	switch (c) {
	case C_ALL: return 1;
	case C_IPV4DST: return x->ipv4;
	case C_NOT_IPV4DST: return !x->ipv4;
	case C_IPCM: return x->ipcm;
	case C_NOT_IPCM: return !x->ipcm;
	case C_IPCM_V4: return x->ipcm && x->cma.ip_version == 4;
	case C_IPCM_NOT_V4: return x->ipcm && x->cma.ip_version != 4;
	case C_RMPP_NONE: return rt == 0;
	case C_RMPP_DATA: return rt == UM_SA_RMPP_TYPE_DATA;
	case C_RMPP_ACK: return rt == UM_SA_RMPP_TYPE_ACK;
	case C_RMPP_SEG: return rt == UM_SA_RMPP_TYPE_DATA || rt == UM_SA_RMPP_TYPE_ACK;
	}
	return 0;
}

/* ---- tshark ------------------------------------------------------------- */

/* tshark field list: frame.number, then each table field once. */
struct tsfields {
	const char *name[NOMAP + 1];
	unsigned n;
	unsigned col[NOMAP]; /* omap[i] -> column */
	unsigned nocc[NOMAP]; /* how many entries share omap[i]'s field */
};

static void tsfields_init(struct tsfields *t)
{
	t->n = 0;
	t->name[t->n++] = "frame.number";
	for (unsigned i = 0; i < NOMAP; i++) {
		unsigned c;

		for (c = 1; c < t->n; c++)
			if (!strcmp(t->name[c], omap[i].ts))
				break;
		if (c == t->n)
			t->name[t->n++] = omap[i].ts;
		t->col[i] = c;
		t->nocc[i] = 0;
		for (unsigned j = 0; j < NOMAP; j++)
			t->nocc[i] += !strcmp(omap[j].ts, omap[i].ts);
	}
}

/* One output line per frame, split at tabs. */
struct tsout {
	char **line;
	char ***col;
	unsigned nlines, cap;
};

static void tsout_free(struct tsout *o)
{
	for (unsigned i = 0; i < o->nlines; i++) {
		free(o->line[i]);
		free(o->col[i]);
	}
	free(o->line);
	free(o->col);
	memset(o, 0, sizeof(*o));
}

/* Runs tshark once on path; returns the number of lines, -1 on error (err
 * holds tshark's complaint). */
static int run_tshark(const char *path, const struct tsfields *t, struct tsout *o, char *err,
		      size_t errlen)
{
	size_t cap = 4096, len = 0;
	char *cmd = malloc(cap), *line = NULL, errpath[300];
	size_t lcap = 0;
	ssize_t n;
	FILE *f;
	int rc;

	cr_assert_not_null(cmd);
	cr_assert_null(strchr(path, '\''), "%s: quote in the path", path);
	/* In the test directory: the capture's may be read-only. */
	snprintf(errpath, sizeof(errpath), "%s", tpath("tshark.stderr"));
	/* An empty config dir: no personal preferences can change decoding. */
	len += (size_t)snprintf(cmd + len, cap - len,
				"WIRESHARK_CONFIG_DIR='%s' tshark -n -r '%s' -T fields "
				"-E separator=/t -E occurrence=a -E aggregator=,",
				tmpdir, path);
	for (unsigned i = 0; i < t->n; i++) {
		size_t need = strlen(t->name[i]) + 8;

		if (len + need + 400 > cap) {
			cap = 2 * cap + need;
			cmd = realloc(cmd, cap);
			cr_assert_not_null(cmd);
		}
		len += (size_t)snprintf(cmd + len, cap - len, " -e %s", t->name[i]);
	}
	snprintf(cmd + len, cap - len, " 2>'%s'", errpath);

	memset(o, 0, sizeof(*o));
	f = popen(cmd, "r");
	cr_assert_not_null(f, "popen: %s", strerror(errno));
	while ((n = getline(&line, &lcap, f)) >= 0) {
		unsigned c = 0;
		char *p;

		if (o->nlines == o->cap) {
			o->cap = o->cap ? 2 * o->cap : 64;
			o->line = realloc(o->line, o->cap * sizeof(*o->line));
			o->col = realloc(o->col, o->cap * sizeof(*o->col));
			cr_assert(o->line && o->col);
		}
		line[strcspn(line, "\r\n")] = 0;
		o->line[o->nlines] = strdup(line);
		o->col[o->nlines] = calloc(t->n, sizeof(char *));
		cr_assert(o->line[o->nlines] && o->col[o->nlines]);
		p = o->line[o->nlines];
		for (c = 0; c < t->n; c++) {
			char *tab = strchr(p, '\t');

			o->col[o->nlines][c] = p;
			if (!tab) {
				c++;
				break;
			}
			*tab = 0;
			p = tab + 1;
		}
		for (; c < t->n; c++)
			o->col[o->nlines][c] = (char *)"";
		o->nlines++;
	}
	free(line);
	rc = pclose(f);
	free(cmd);
	err[0] = 0;
	if (rc != 0) {
		FILE *e = fopen(errpath, "r");
		size_t k = 0;

		if (e) {
			k = fread(err, 1, errlen - 1, e);
			fclose(e);
		}
		err[k] = 0;
		return -1;
	}
	return (int)o->nlines;
}

/* ---- comparison --------------------------------------------------------- */

struct report {
	int quiet;                                /* do not log each mismatch */
	char buf[8192];
	size_t len;
	unsigned mismatches;
	unsigned compared[K_NKINDS];              /* fields, over all frames */
	unsigned quirk_wrong[NOMAP], quirk_right[NOMAP];
	/* The walk over a file. */
	unsigned frames;     /* tshark lines walked */
	unsigned mads;       /* frames compared as MADs */
	unsigned fields;     /* fields compared */
	unsigned msgs[K_NKINDS]; /* CM / SA messages compared, by kind */
	unsigned other_mads; /* MADs compared up to the common header only */
	unsigned ts_only_mads; /* tshark dissects a MAD (other class) um_pcap skipped */
	unsigned rejected;   /* decoded and compared, but uscm's checks reject it */
	unsigned undecoded;  /* CM / SA MADs the decoder stopped on (failures) */
	unsigned norecord;   /* SA MADs with no record at byte 56 for uscm */
	unsigned mut_tried, mut_skipped; /* check_mutations() on captured frames */
};

/* Logged mismatches per report; all are counted and kept in buf (as far as
 * it goes). */
#define MAX_LOGGED 200

static void hexstr(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 3 < outlen; i++)
		o += (size_t)snprintf(out + o, outlen - o, "%02x", p[i]);
	if (outlen)
		out[o < outlen ? o : outlen - 1] = 0;
}

static void mismatch(struct report *r, const char *file, uint64_t frame, const char *label,
		     const struct omap *e, const char *tstext, const char *ours)
{
	char line[600];
	int n;

	r->mismatches++;
	n = snprintf(line, sizeof(line),
		     "%s frame %" PRIu64 " (%s): %s [%s.%s]: tshark '%.160s', ours %.200s\n", file,
		     frame, label, e->ts, kind_name[e->kind], e->row ? e->row : "-", tstext, ours);
	if (!r->quiet && r->mismatches <= MAX_LOGGED)
		cr_log_error("%s", line);
	if (n > 0 && r->len + (size_t)n < sizeof(r->buf)) {
		memcpy(r->buf + r->len, line, (size_t)n + 1);
		r->len += (size_t)n;
	}
}

/* A mismatch that is not about one table entry (frame count, decoding). */
static void mismatch_note(struct report *r, const char *file, uint64_t frame, const char *label,
			  enum kind k, const char *what, const char *tstext, const char *ours)
{
	const struct omap e = { what, 0, k, NULL, X_NONE, C_ALL, NULL, NULL };

	mismatch(r, file, frame, label, &e, tstext, ours);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s)
		return -1;
	/* FT_BOOLEAN: "0"/"1" in 4.0; newer releases may spell it out. */
	if (!strcmp(s, "True") || !strcmp(s, "False")) {
		*v = s[0] == 'T';
		return 0;
	}
	errno = 0;
	*v = strtoull(s, &end, 0);
	return (errno || *end) ? -1 : 0;
}

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* FT_BYTES text: hex digit pairs, optionally ':'-separated. */
static int parse_hex(const char *s, uint8_t *out, size_t max, size_t *len)
{
	size_t n = 0;

	while (*s) {
		int hi, lo;

		if (*s == ':') {
			s++;
			continue;
		}
		hi = hexdigit(s[0]);
		lo = hi < 0 ? -1 : hexdigit(s[1]);
		if (n >= max || lo < 0)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	*len = n;
	return 0;
}

/* Picks occurrence `occ` of a ","-joined value into buf; returns how many
 * occurrences the text holds (0 when empty). */
static unsigned occurrence(const char *text, unsigned occ, char *buf, size_t len)
{
	unsigned n = 0;
	const char *p = text;

	buf[0] = 0;
	if (!*text)
		return 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t k = comma ? (size_t)(comma - p) : strlen(p);

		if (n == occ) {
			if (k >= len)
				k = len - 1;
			memcpy(buf, p, k);
			buf[k] = 0;
		}
		n++;
		if (!comma)
			return n;
		p = comma + 1;
	}
}

/* FT_BYTES text against want[0..n); on a difference ours names the first
 * differing byte, then shows our bytes. */
static int bytes_match(const uint8_t *want, size_t n, const char *text, char *ours,
		       size_t ourslen)
{
	uint8_t got[512];
	size_t glen, i, o;

	if (parse_hex(text, got, sizeof(got), &glen)) {
		o = (size_t)snprintf(ours, ourslen, "(tshark text is not hex) ");
		hexstr(ours + o, ourslen - o, want, n);
		return 0;
	}
	for (i = 0; i < n && i < glen && got[i] == want[i]; i++)
		;
	if (i == n && glen == n)
		return 1;
	if (i < n && i < glen)
		o = (size_t)snprintf(ours, ourslen, "(byte %zu: tshark %02x, ours %02x) ", i,
				     got[i], want[i]);
	else
		o = (size_t)snprintf(ours, ourslen, "(%zu bytes, tshark shows %zu) ", n, glen);
	hexstr(ours + o, ourslen - o, want, n);
	return 0;
}

static uint64_t row_int(const struct cmp_layout *l, const char *name, const void *obj,
			const uint8_t *raw)
{
	const struct cmp_field *f = cmp_layout_find(l, name);

	if (!f)
		return ~0ull;
	if (f->kind == CMP_K_RSVD)
		return raw ? cmp_bits_get(raw, f->byte, f->bit, f->width) : 0;
	return cmp_field_value(f, obj);
}

/* Compares one applicable mapped entry; returns 1 on a match. */
static int compare_one(const struct omap *e, size_t ei, const struct cmp_layout *l,
		       const void *obj, const uint8_t *raw, const char *text, char *ours,
		       size_t ourslen, struct report *r)
{
	const struct cmp_field *f = cmp_layout_find(l, e->row);
	const uint8_t *bytes = f ? (const uint8_t *)obj + f->offset : NULL;
	uint8_t got[512];
	size_t glen;
	uint64_t v, t, want = 0, alt;
	struct in6_addr a6;
	struct in_addr a4;
	int quirk = 0;

	if (!f) {
		snprintf(ours, ourslen, "(no row %s in %s)", e->row, l->name);
		return 0;
	}
	switch (e->xf) {
	case X_IPV6:
		hexstr(ours, ourslen, bytes, 16);
		return inet_pton(AF_INET6, text, &a6) == 1 && !memcmp(&a6, bytes, 16);
	case X_IPV4TAIL:
		snprintf(ours, ourslen, "%u.%u.%u.%u", bytes[12], bytes[13], bytes[14], bytes[15]);
		return inet_pton(AF_INET, text, &a4) == 1 && !memcmp(&a4, bytes + 12, 4);
	case X_HEX:
		return bytes_match(bytes, f->size, text, ours, ourslen);
	case X_HEX_TAIL36:
		return bytes_match(bytes + CMP_CMA_HDR_SIZE, (size_t)(f->size - CMP_CMA_HDR_SIZE),
				   text, ours, ourslen);
	case X_SID_PREFIX: {
		uint8_t sid[8];

		cmp_bits_set(sid, 0, 0, 64, row_int(l, e->row, obj, raw));
		hexstr(ours, ourslen, sid, 5);
		return !parse_hex(text, got, sizeof(got), &glen) && glen == 5 &&
		       !memcmp(got, sid, 5);
	}
	default:
		break;
	}

	/* Integers. */
	v = row_int(l, e->row, obj, raw);
	alt = 0;
	switch (e->xf) {
	case X_INT: want = v; break;
	case X_SID_PROTO: want = (v >> 16) & 0xFF; break;
	case X_SID_DPORT: want = v & 0xFFFF; break;
	case X_HI4: want = (v >> 4) & 0xF; break;
	case X_LO4: want = v & 0xF; break;
	case X_SAP: want = v << 2 | row_int(l, "_rsvd139", obj, raw); break;
	case X_Q_FLOW: alt = v >> 8, want = v, quirk = 1; break;
	case X_Q_FLRSVD: alt = (row_int(l, e->row2, obj, raw) >> 18) & 3, want = v, quirk = 1;
		break;
	case X_Q_RATE: alt = (row_int(l, e->row2, obj, raw) >> 12) & 0x3F, want = v, quirk = 1;
		break;
	case X_Q_RRESP: alt = v >> 1, want = v, quirk = 1; break;
	case X_Q_RFLAGS: alt = (row_int(l, e->row2, obj, raw) & 1) << 3 | v, want = v, quirk = 1;
		break;
	default: break;
	}
	if (quirk)
		snprintf(ours, ourslen, "0x%" PRIx64 " (tshark 4.0 quirk: 0x%" PRIx64 ")", want,
			 alt);
	else
		snprintf(ours, ourslen, "0x%" PRIx64, want);
	if (parse_u64(text, &t))
		return 0;
	if (quirk && t == alt && alt != want) {
		r->quirk_wrong[ei]++;
		return 1;
	}
	if (quirk && t == want && alt != want)
		r->quirk_right[ei]++;
	return t == want;
}

/* Compares frame x with its tshark output line col: within `scope` (bits of
 * enum kind), every entry of a structure x carries is compared (counted in
 * cnt[kind], cnt may be NULL) and every other entry must be absent.
 * Nothing here assumes distinct values: each field is checked on its own. */
static void compare_frame(const char *file, const struct fexp *x, char *const *col,
			  const struct tsfields *t, unsigned scope, struct report *r,
			  unsigned *cnt)
{
	unsigned missing = 0;
	uint64_t fno;

	if (parse_u64(col[0], &fno) || fno != x->frame_no) {
		char want[24];

		snprintf(want, sizeof(want), "%" PRIu64, x->frame_no);
		mismatch_note(r, file, x->frame_no, x->label, K_MAD, "frame.number", col[0], want);
		return;
	}
	/* A structure tshark does not show at all is one mismatch, not one per
	 * field (uscm decoded a message tshark did not dissect). */
	for (unsigned k = 0; k < K_NKINDS; k++) {
		int shown = 0;

		if (!(x->has & scope & KBIT(k)))
			continue;
		for (size_t ei = 0; ei < NOMAP && !shown; ei++)
			shown = omap[ei].kind == k && omap[ei].xf != X_NONE &&
				omap[ei].xf != X_ABSENT && col[t->col[ei]][0];
		if (!shown) {
			missing |= KBIT(k);
			mismatch_note(r, file, x->frame_no, x->label, (enum kind)k,
				      "(every field of the structure)", "",
				      "(uscm decoded it here, tshark shows none of it)");
		}
	}
	for (size_t ei = 0; ei < NOMAP; ei++) {
		const struct omap *e = &omap[ei];
		const struct cmp_layout *l = kind_layout(e->kind);
		const char *text = col[t->col[ei]];
		const void *obj;
		const uint8_t *raw;
		char val[1024], ours[1200];
		unsigned nocc;
		int present;

		if (e->xf == X_NONE || !(scope & KBIT(e->kind)) || (missing & KBIT(e->kind)))
			continue;
		present = kind_obj(x, e->kind, &obj, &raw) && cond_holds(x, e->cond);
		nocc = occurrence(text, e->occ, val, sizeof(val));
		if (e->xf == X_ABSENT || !present) {
			if (nocc)
				mismatch(r, file, x->frame_no, x->label, e, text,
					 e->xf == X_ABSENT ? "(absent: never shown here)"
					 : x->has	   ? "(absent: not in this frame)"
							   : "(absent: um_pcap found no MAD here)");
			continue;
		}
		r->compared[e->kind]++;
		r->fields++;
		if (cnt)
			cnt[e->kind]++;
		if (nocc != t->nocc[ei]) {
			snprintf(ours, sizeof(ours), "(%u occurrence(s) expected, %u seen)",
				 t->nocc[ei], nocc);
			mismatch(r, file, x->frame_no, x->label, e, text, ours);
			continue;
		}
		if (!compare_one(e, ei, l, obj, raw, val, ours, sizeof(ours), r))
			mismatch(r, file, x->frame_no, x->label, e, val, ours);
	}
}

/* Walks one tshark run in frame order: the frames the caller hands in are
 * compared with their lines, every line in between must not show a CM or
 * SA message. Used alike for the synthetic files and for captures. */
struct walk {
	const char *file;
	const struct tsfields *t;
	const struct tsout *o;
	struct report *r;
	unsigned next;   /* next line (0-based) */
	size_t class_ei; /* omap entry of infiniband.mad.mgmtclass */
};

static void walk_init(struct walk *w, const char *file, const struct tsfields *t,
		      const struct tsout *o, struct report *r)
{
	memset(w, 0, sizeof(*w));
	w->file = file;
	w->t = t;
	w->o = o;
	w->r = r;
	for (w->class_ei = 0; w->class_ei < NOMAP; w->class_ei++)
		if (!strcmp(omap[w->class_ei].ts, "infiniband.mad.mgmtclass"))
			break;
	cr_assert_lt(w->class_ei, NOMAP);
}

/* Lines up to frame `upto` (1-based, exclusive): frames for which uscm has
 * no MAD to compare. tshark dissecting a CM or SA MAD there is a failure. */
static void walk_gap(struct walk *w, uint64_t upto)
{
	struct fexp none;

	memset(&none, 0, sizeof(none));
	snprintf(none.label, sizeof(none.label), "no MAD");
	for (; w->next + 1u < upto && w->next < w->o->nlines; w->next++) {
		char *const *col = w->o->col[w->next];
		const char *cls = col[w->t->col[w->class_ei]];
		uint64_t c;

		none.frame_no = w->next + 1u;
		w->r->frames++;
		if (*cls && !parse_u64(cls, &c) && (c == UMAD_CLASS_CM || c == UMAD_CLASS_SUBN_ADM)) {
			mismatch(w->r, w->file, none.frame_no, none.label, &omap[w->class_ei], cls,
				 "(um_pcap found no MAD in this frame)");
			continue;
		}
		if (*cls && ++w->r->ts_only_mads <= MAX_LOGGED)
			cr_log_info("%s frame %" PRIu64 ": tshark dissects a MAD of class %s that "
				    "um_pcap does not take for one (not a UD SEND-only 256-byte "
				    "payload to QP0/QP1)",
				    w->file, none.frame_no, cls);
		compare_frame(w->file, &none, col, w->t, SCOPE_MSGS, w->r, NULL);
	}
}

/* Compares x (frames in increasing order) within scope. */
static void walk_frame(struct walk *w, const struct fexp *x, unsigned scope, unsigned *cnt)
{
	walk_gap(w, x->frame_no);
	if (w->next >= w->o->nlines || x->frame_no != w->next + 1u) {
		mismatch_note(w->r, w->file, x->frame_no, x->label, K_MAD, "frame.number", "",
			      "(no tshark line for this frame)");
		return;
	}
	compare_frame(w->file, x, w->o->col[w->next], w->t, scope, w->r, cnt);
	w->r->frames++;
	w->r->mads++;
	w->next++;
}

/* The rest of the lines; the file has nframes records. */
static void walk_end(struct walk *w, uint64_t nframes)
{
	walk_gap(w, nframes + 1u);
	if (w->o->nlines != nframes) {
		char got[24], want[64];

		snprintf(got, sizeof(got), "%u lines", w->o->nlines);
		snprintf(want, sizeof(want), "%" PRIu64 " records in the file", nframes);
		mismatch_note(w->r, w->file, 0, "file", K_MAD, "frame.number", got, want);
	}
}

/* Minimum number of compared fields per structure per frame that has it:
 * guards against a table or tshark change that silently compares nothing. */
static const unsigned floors[K_NKINDS] = {
	[K_LRH] = 9, [K_BTH] = 10, [K_DETH] = 2, [K_MAD] = 9,
	[K_REQ] = 51, [K_REP] = 16, [K_RTU] = 3, [K_REJ] = 9, [K_DREQ] = 4, [K_DREP] = 3,
	[K_SA] = 8, [K_PR] = 19, [K_MCM] = 18, [K_CMA] = 7,
};

/* cnt: what compare_frame counted for x, compared in `scope`. */
static void check_floors(const char *file, const struct fexp *x, unsigned scope,
			 const unsigned *cnt)
{
	for (unsigned k = 0; k < K_NKINDS; k++)
		if ((x->has & scope & KBIT(k)) && cnt[k] < floors[k])
			cr_expect_fail("%s frame %" PRIu64 " (%s): only %u %s fields compared "
				       "(floor %u)",
				       file, x->frame_no, x->label, cnt[k], kind_name[k], floors[k]);
}

static void log_totals(const char *file, const struct report *r)
{
	char line[1024];
	size_t o = 0;

	for (unsigned k = 0; k < K_NKINDS; k++)
		o += (size_t)snprintf(line + o, sizeof(line) - o, " %s=%u", kind_name[k],
				      r->compared[k]);
	cr_log_info("%s: fields compared over all frames:%s", file, line);
	for (size_t i = 0; i < NOMAP; i++)
		if (r->quirk_wrong[i] || r->quirk_right[i])
			cr_log_info("%s: %s: tshark showed the quirky value in %u frame(s), the "
				    "correct one in %u",
				    file, omap[i].ts, r->quirk_wrong[i], r->quirk_right[i]);
}

/* Builds the frames (tampering with the encoded MADs if asked), writes them
 * to tmpdir/name and runs tshark once on the file; o is the caller's to free. */
static void dissect(const char *name, int link, int linktype, void (*tamper)(struct fexp *fx),
		    struct fexp *fx, struct tsfields *t, struct tsout *o)
{
	char err[2048];
	const char *path = tpath(name);

	build_all(fx, link);
	if (tamper)
		tamper(fx);
	write_pcap(path, fx, linktype);
	tsfields_init(t);
	cr_assert_geq(run_tshark(path, t, o, err, sizeof(err)), 0, "tshark failed on %s: %s",
		      path, err);
}

/* Builds, writes, dissects and compares one file; returns mismatches. */
static unsigned oracle_run(const char *name, int link, int linktype,
			   void (*tamper)(struct fexp *fx), struct report *r)
{
	static struct fexp fx[NFRAMES];
	static unsigned cnt[NFRAMES][K_NKINDS];
	struct tsfields t;
	struct tsout o;
	struct walk w;

	dissect(name, link, linktype, tamper, fx, &t, &o);
	memset(r, 0, sizeof(*r));
	memset(cnt, 0, sizeof(cnt));
	r->quiet = tamper != NULL; /* the caller checks the expected failures */
	walk_init(&w, name, &t, &o, r);
	for (unsigned i = 0; i < NFRAMES; i++)
		walk_frame(&w, &fx[i], SCOPE_ALL, cnt[i]);
	walk_end(&w, NFRAMES);
	tsout_free(&o);
	log_totals(name, r);
	for (unsigned i = 0; i < NFRAMES; i++) {
		char line[1024];
		size_t n = 0;

		if (!tamper)
			check_floors(name, &fx[i], SCOPE_ALL, cnt[i]);
		for (unsigned k = 0; k < K_NKINDS; k++)
			if (cnt[i][k])
				n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%u",
						      kind_name[k], cnt[i][k]);
		cr_log_info("%s: frame %u (%s):%s", name, i + 1, fx[i].label, n ? line : "");
	}
	return r->mismatches;
}

/* Changes in x the value entry e is compared against, in a bit tshark shows
 * (for a quirk, a bit tshark 4.0's wrong reading shows too). Returns 0 when
 * there is nothing to change: a reserved row, expected zero. */
static int mutate(struct fexp *x, const struct omap *e)
{
	const struct cmp_layout *l = kind_layout(e->kind);
	const struct cmp_field *f;
	const void *cobj;
	const uint8_t *craw;
	uint8_t *obj, *raw;
	const char *name = e->row;
	unsigned bit;

	kind_obj(x, e->kind, &cobj, &craw);
	obj = (uint8_t *)(uintptr_t)cobj;
	raw = (uint8_t *)(uintptr_t)craw;
	switch (e->xf) {
	case X_Q_RATE: name = e->row2, bit = 12; break;
	case X_Q_FLRSVD: name = e->row2, bit = 18; break;
	case X_Q_RFLAGS:
	case X_LO4:
	case X_SID_DPORT: bit = 0; break;
	case X_SID_PROTO: bit = 16; break;
	case X_SID_PREFIX: bit = 32; break;
	default: bit = ~0u; break;
	}
	f = cmp_layout_find(l, name);
	cr_assert_not_null(f, "%s: no row %s", e->ts, name);
	if (bit == ~0u)
		bit = f->width - 1u;
	switch (f->kind) {
	case CMP_K_RSVD:
		if (!raw)
			return 0;
		cmp_bits_set(raw, f->byte, f->bit, f->width,
			     cmp_bits_get(raw, f->byte, f->bit, f->width) ^ 1u);
		return 1;
	case CMP_K_GID:
	case CMP_K_BYTES:
		obj[f->offset + f->size - 1u] ^= 0x80;
		return 1;
	default:
		cmp_field_set_value(f, obj, cmp_field_value(f, obj) ^ (1ull << bit));
		return 1;
	}
}

/* With tshark's line col fixed, changes the expected value of each entry
 * compare_frame compares in x (within scope), one at a time, and checks that
 * the comparison then reports that entry: no entry compares vacuously.
 * skip_quirks leaves the tshark-4.0-quirk entries out (on a capture a
 * changed value may happen to equal the other reading they accept). Counts
 * the changes made in *tried, the reserved rows expected zero (nothing to
 * change) in *skipped. */
static void check_mutations(const char *file, const struct fexp *x, char *const *col,
			    const struct tsfields *t, unsigned scope, int skip_quirks,
			    unsigned *tried, unsigned *skipped)
{
	static struct report r;
	static struct fexp m;

	for (size_t ei = 0; ei < NOMAP; ei++) {
		const struct omap *e = &omap[ei];
		const void *obj;
		const uint8_t *raw;
		char needle[160];

		m = *x;
		if (e->xf == X_NONE || e->xf == X_ABSENT || !(scope & KBIT(e->kind)) ||
		    !kind_obj(&m, e->kind, &obj, &raw) || !cond_holds(&m, e->cond) ||
		    (skip_quirks && e->xf >= X_Q_FLOW))
			continue;
		if (!mutate(&m, e)) {
			(*skipped)++;
			continue;
		}
		(*tried)++;
		memset(&r, 0, sizeof(r));
		r.quiet = 1;
		compare_frame(file, &m, col, t, scope, &r, NULL);
		snprintf(needle, sizeof(needle), "): %s [", e->ts);
		cr_expect(r.mismatches >= 1 && strstr(r.buf, needle),
			  "%s frame %" PRIu64 ": changing %s.%s (%s) went unnoticed", file,
			  x->frame_no, kind_name[e->kind], e->row, e->ts);
	}
}

/* ---- captures ----------------------------------------------------------- */

/* um_pcap reports LRH/BTH/DETH fields as frame metadata but not all of them
 * (SE, MigReq, PadCnt, AckReq, LVer, PktLen, reserved bits). To compare
 * every header field, the record um_pcap returned the MAD from (its byte
 * offset) is read again and the headers are taken just before the MAD bytes
 * um_pcap handed back: BTH and DETH are the 20 bytes before them, the LRH
 * (native IB) sits a GRH earlier if there is one. The headers are decoded
 * with uscm's row tables and must agree with um_pcap's metadata, so the
 * wrong bytes cannot be picked. */
struct rawcap {
	FILE *f;
	int big_endian; /* byte order of the pcap headers */
	uint8_t buf[UM_PCAP_MAX_CAPLEN];
};

static int rawcap_open(struct rawcap *c, const char *path)
{
	uint8_t m[4];

	c->f = fopen(path, "rb");
	if (!c->f || fread(m, 1, 4, c->f) != 4)
		return -1;
	c->big_endian = !(cmp_bits_get(m, 0, 0, 32) == 0xD4C3B2A1u ||
			  cmp_bits_get(m, 0, 0, 32) == 0x4D3CB2A1u);
	return 0;
}

static uint32_t rawcap_u32(const struct rawcap *c, const uint8_t *p)
{
	if (c->big_endian)
		return (uint32_t)cmp_bits_get(p, 0, 0, 32);
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int locate_headers(struct rawcap *c, const struct um_pcap_mad *pm, struct fexp *x,
			  char *err, size_t errlen)
{
	const struct um_frame_meta *m = &pm->meta;
	size_t lrh_back = UM_BTH_LEN + UM_DETH_LEN + (m->has_grh ? UM_GRH_LEN : 0) + UM_LRH_LEN;
	uint8_t rh[16];
	uint32_t caplen;

	if (fseeko(c->f, (off_t)pm->offset, SEEK_SET) || fread(rh, 1, 16, c->f) != 16) {
		snprintf(err, errlen, "cannot read the record at byte %" PRIu64, pm->offset);
		return -1;
	}
	caplen = rawcap_u32(c, rh + 8);
	if (caplen > sizeof(c->buf) || fread(c->buf, 1, caplen, c->f) != caplen) {
		snprintf(err, errlen, "cannot read %u record bytes", caplen);
		return -1;
	}
	for (size_t p = caplen >= CMP_MAD_SIZE ? caplen - CMP_MAD_SIZE + 1u : 0; p-- > 20;) {
		const uint8_t *mad = c->buf + p;

		if (memcmp(mad, pm->mad, CMP_MAD_SIZE))
			continue;
		cmp_layout_decode(&um_bth_layout, mad - 20, &x->bth);
		cmp_layout_decode(&um_deth_layout, mad - 8, &x->deth);
		if (x->bth.opcode != m->opcode || x->bth.pkey != m->pkey ||
		    x->bth.dest_qp != m->dest_qp || x->bth.psn != m->psn ||
		    x->deth.qkey != m->qkey || x->deth.src_qp != m->src_qp)
			continue;
		if (m->link == UM_LINK_IB) {
			if (p < lrh_back)
				continue;
			cmp_layout_decode(&um_lrh_layout, mad - lrh_back, &x->lrh);
			if (x->lrh.slid != m->slid || x->lrh.dlid != m->dlid ||
			    x->lrh.sl != m->sl || x->lrh.vl != m->vl)
				continue;
			memcpy(x->lrh_raw, mad - lrh_back, UM_LRH_LEN);
		}
		memcpy(x->bth_raw, mad - 20, UM_BTH_LEN);
		memcpy(x->deth_raw, mad - 8, UM_DETH_LEN);
		return 0;
	}
	snprintf(err, errlen, "headers matching um_pcap's metadata not found before the MAD");
	return -1;
}

/* The message kind tshark 4.0 dissects for a MAD, K_MAD for none. */
static enum kind mad_kind(const uint8_t *mad)
{
	uint8_t cls = mad[1];
	uint16_t attr = (uint16_t)cmp_bits_get(mad, 16, 0, 16);

	for (unsigned k = K_REQ; k <= K_MCM; k++)
		if (kind_attr((enum kind)k) == attr &&
		    (kind_is_cm((enum kind)k) ? cls == UMAD_CLASS_CM : cls == UMAD_CLASS_SUBN_ADM))
			return (enum kind)k;
	return K_MAD;
}

static const struct cmp_diag *first_error(const struct cmp_diags *d)
{
	for (unsigned i = 0; i < d->n; i++)
		if (d->d[i].sev == CMP_DIAG_ERROR)
			return &d->d[i];
	return NULL;
}

/* Sets x up from one MAD um_pcap returned: the headers from the record, the
 * CM / SA message as uscm decodes it (the expected values; nothing is taken
 * from tshark). Returns the scope to compare it in. */
static unsigned capture_frame(struct fexp *x, const struct um_pcap_mad *pm, struct rawcap *c,
			      const char *file, struct report *r)
{
	struct cmp_diags d;
	const struct cmp_diag *e;
	unsigned scope = SCOPE_ALL;
	char err[160];
	int rc;

	memset(x, 0, sizeof(*x));
	x->frame_no = pm->frame_no;
	x->meta = pm->meta;
	x->link = pm->meta.link;
	x->ipv4 = x->link != UM_LINK_IB && !pm->meta.ipv6;
	x->wire = 1;
	memcpy(x->mad, pm->mad, CMP_MAD_SIZE);
	x->msg = mad_kind(x->mad);
	if (x->msg == K_MAD) {
		snprintf(x->label, sizeof(x->label), "MAD class 0x%02x attr 0x%04x", x->mad[1],
			 (unsigned)cmp_bits_get(x->mad, 16, 0, 16));
		cmp_layout_decode(&cmp_mad_hdr_layout, x->mad, &x->sa.hdr);
		scope = SCOPE_OTHER_MAD;
		r->other_mads++;
	} else {
		snprintf(x->label, sizeof(x->label), "%s", kind_name[x->msg]);
		cmp_diags_init(&d);
		rc = kind_is_cm(x->msg) ? cmp_cm_decode(x->mad, CMP_MAD_SIZE, &x->cm, &d)
					: um_sa_decode(x->mad, CMP_MAD_SIZE, &x->sa, &d);
		e = rc ? first_error(&d) : NULL;
		/* The decoders stop at a bad MAD header (class, version, method,
		 * attribute) or, for SA, a bad RMPP version/type, before any field
		 * is read: that MAD is not decoded, a failure since tshark shows it.
		 * Later errors are checks of decoded values (a REQ path MTU of 0,
		 * an RMPP length): compared all the same, and counted. */
		if (rc && (!e || e->byte < (kind_is_cm(x->msg) ? CMP_MAD_HDR_SIZE
							      : UM_SA_HDR_OFFSET + 2))) {
			mismatch_note(r, file, x->frame_no, x->label, x->msg, "(uscm decoder)", "",
				      e ? e->text : "(decode failed)");
			r->undecoded++;
			memset(&x->cm, 0, sizeof(x->cm));
			cmp_layout_decode(&cmp_mad_hdr_layout, x->mad, &x->sa.hdr);
			x->msg = K_MAD;
			scope = SCOPE_HDRS;
		} else {
			if (rc && ++r->rejected <= MAX_LOGGED) {
				cr_log_info("%s frame %" PRIu64 " (%s): uscm decodes it but rejects "
					    "it (%s); compared all the same",
					    file, x->frame_no, x->label, e->text);
			}
			/* No record at byte 56 for uscm (RMPP ACK/STOP/ABORT, a
			 * later segment, an empty table); tshark 4.0 dissects the
			 * bytes there as one all the same. */
			if (!kind_is_cm(x->msg) && !x->sa.nrecords) {
				cmp_layout_decode(kind_layout(x->msg), x->mad + UM_SA_DATA_OFFSET,
						  &x->sa.u);
				r->norecord++;
			}
			if (x->msg == K_REQ) {
				x->ipcm = (x->cm.u.req.service_id & IPCM_SID_MASK) == IPCM_SID_PREFIX;
				if (x->ipcm)
					cmp_layout_decode(&cmp_cma_hdr_layout,
							  x->cm.u.req.private_data, &x->cma);
			}
			r->msgs[x->msg]++;
		}
	}
	set_kinds(x);
	if (locate_headers(c, pm, x, err, sizeof(err))) {
		mismatch_note(r, file, x->frame_no, x->label, K_BTH, "(record headers)", "", err);
		scope &= ~(KBIT(K_LRH) | KBIT(K_BTH) | KBIT(K_DETH));
	}
	return scope;
}

/* Reads every MAD of path with um_pcap, runs tshark once and compares every
 * mapped field of every CM / SA MAD (and the headers of every other MAD);
 * frames without a MAD must not show a CM / SA message. Returns mismatches. */
static unsigned oracle_capture(const char *path, struct report *r)
{
	static struct fexp x;
	static struct rawcap raw;
	struct um_pcap_reader *rd;
	struct um_pcap_mad pm;
	const struct um_pcap_stats *st;
	struct tsfields t;
	struct tsout o;
	struct walk w;
	char err[2048];
	unsigned checked = 0, nmsgs = 0;
	int rc;

	memset(r, 0, sizeof(*r));
	rd = um_pcap_open_read(path, err, sizeof(err));
	if (!rd) {
		mismatch_note(r, path, 0, "file", K_MAD, "(um_pcap_open_read)", "", err);
		return r->mismatches;
	}
	cr_assert_eq(rawcap_open(&raw, path), 0, "%s: %s", path, strerror(errno));
	tsfields_init(&t);
	if (run_tshark(path, &t, &o, err, sizeof(err)) < 0) {
		mismatch_note(r, path, 0, "file", K_MAD, "(tshark)", err, "tshark failed");
		fclose(raw.f);
		um_pcap_close_read(rd);
		return r->mismatches;
	}
	walk_init(&w, path, &t, &o, r);
	while ((rc = um_pcap_next(rd, &pm)) == 1) {
		unsigned cnt[K_NKINDS] = { 0 };
		unsigned scope = capture_frame(&x, &pm, &raw, path, r), before = r->mismatches;

		walk_frame(&w, &x, scope, cnt);
		check_floors(path, &x, scope, cnt);
		/* The first clean frame of each message: every compared value
		 * can make the comparison fail. */
		if (r->mismatches == before && !(checked & KBIT(x.msg))) {
			checked |= KBIT(x.msg);
			check_mutations(path, &x, o.col[x.frame_no - 1u], &t, scope, 1,
					&r->mut_tried, &r->mut_skipped);
		}
	}
	if (rc < 0)
		mismatch_note(r, path, 0, "file", K_MAD, "(um_pcap_next)", "", um_pcap_error(rd));
	st = um_pcap_stats(rd);
	walk_end(&w, st->frames);
	for (unsigned k = 0; k < K_NKINDS; k++)
		nmsgs += r->msgs[k];
	log_totals(path, r);
	cr_log_info("%s: %u frames (um_pcap: %" PRIu64 " MADs, %" PRIu64 " skipped, %" PRIu64
		    " malformed); %u MADs compared: %u CM/SA messages (REQ=%u REP=%u RTU=%u "
		    "REJ=%u DREQ=%u DREP=%u PathRecord=%u MCMemberRecord=%u), %u other MADs "
		    "(headers only), %u CM/SA MADs uscm could not decode (headers only); %u "
		    "fields compared; %u mismatch(es)",
		    path, r->frames, st->mads, st->skipped, st->malformed, r->mads, nmsgs,
		    r->msgs[K_REQ], r->msgs[K_REP], r->msgs[K_RTU], r->msgs[K_REJ],
		    r->msgs[K_DREQ], r->msgs[K_DREP], r->msgs[K_PR], r->msgs[K_MCM], r->other_mads,
		    r->undecoded, r->fields, r->mismatches);
	cr_log_info("%s: %u single-value changes tried in the first clean frame of each "
		    "message kind, each must be reported (%u reserved rows not changed)",
		    path, r->mut_tried, r->mut_skipped);
	if (r->rejected || r->norecord || r->ts_only_mads)
		cr_log_info("%s: %u MAD(s) uscm decodes but rejects; %u SA MAD(s) without a "
			    "record for uscm (record bytes compared); %u frame(s) where tshark "
			    "shows a MAD of another class and um_pcap none",
			    path, r->rejected, r->norecord, r->ts_only_mads);
	tsout_free(&o);
	fclose(raw.f);
	um_pcap_close_read(rd);
	return r->mismatches;
}

/* USCM_ORACLE_PCAPS (colon-separated), then the shared reference captures
 * (tf_reference_captures). */
static size_t collect_captures(char ***out)
{
	const char *env = getenv("USCM_ORACLE_PCAPS");
	char **v = NULL;
	size_t n = 0;

	if (env && *env) {
		char *list = strdup(env), *save = NULL;

		cr_assert_not_null(list);
		for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			v = realloc(v, (n + 1) * sizeof(*v));
			cr_assert(v && (v[n] = strdup(p)));
			n++;
		}
		free(list);
	}
	tf_reference_captures(&v, &n);
	*out = v;
	return n;
}

/* ---- tests -------------------------------------------------------------- */

Test(tshark_oracle, rocev2_every_field_matches)
{
	static struct report r;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	cr_assert_eq(oracle_run("oracle_rocev2.pcap", UM_LINK_ROCEV2, UM_PCAP_LINKTYPE_ETHERNET,
				NULL, &r),
		     0, "%u field(s) differ between tshark and uscm:\n%s", r.mismatches, r.buf);
}

Test(tshark_oracle, erf_native_ib_every_field_matches)
{
	static struct report r;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	cr_assert_eq(oracle_run("oracle_ib.pcap", UM_LINK_IB, UM_PCAP_LINKTYPE_ERF, NULL, &r), 0,
		     "%u field(s) differ between tshark and uscm:\n%s", r.mismatches, r.buf);
}

/* After encoding, flip the first byte of the REQ's local QPN and of a
 * PathRecord's SLID: the oracle must report exactly those two fields. */
static void tamper(struct fexp *fx)
{
	const struct cmp_field *qpn = cmp_layout_find(kind_layout(K_REQ), "local_qpn");
	const struct cmp_field *slid = cmp_layout_find(kind_layout(K_PR), "slid");
	int req = 0, pr = 0;

	cr_assert(qpn && slid);
	for (unsigned i = 0; i < NFRAMES; i++) {
		if (fspecs[i].msg == K_REQ && !req++)
			fx[i].mad[CMP_MAD_HDR_SIZE + qpn->byte] ^= 0xFF;
		if (fspecs[i].msg == K_PR && !pr++)
			fx[i].mad[UM_SA_DATA_OFFSET + slid->byte] ^= 0xFF;
	}
	cr_assert(req && pr);
}

Test(tshark_oracle, detects_a_corrupted_field)
{
	static struct report r;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	cr_assert_eq(oracle_run("oracle_tampered.pcap", UM_LINK_ROCEV2, UM_PCAP_LINKTYPE_ETHERNET,
				tamper, &r),
		     2, "want exactly the two tampered fields, got %u:\n%s", r.mismatches, r.buf);
	cr_assert_not_null(strstr(r.buf, "frame 1 (REQ): infiniband.cm.req.localqpn "), "%s",
			   r.buf);
	cr_assert_not_null(strstr(r.buf, "(PathRecord): infiniband.pathrecord.slid "), "%s", r.buf);
}

/* The other direction: with tshark's output fixed, changing the expected
 * value of any single compared field (in each frame of both files) must make
 * exactly that field fail, so no table entry compares vacuously. */
Test(tshark_oracle, every_compared_field_can_fail)
{
	static const struct {
		const char *name;
		int link, linktype;
	} files[] = {
		{ "mut_rocev2.pcap", UM_LINK_ROCEV2, UM_PCAP_LINKTYPE_ETHERNET },
		{ "mut_ib.pcap", UM_LINK_IB, UM_PCAP_LINKTYPE_ERF },
	};
	static struct fexp fx[NFRAMES];
	static struct report r;
	unsigned tried = 0, skipped = 0;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	for (size_t fi = 0; fi < sizeof(files) / sizeof(files[0]); fi++) {
		struct tsfields t;
		struct tsout o;

		dissect(files[fi].name, files[fi].link, files[fi].linktype, NULL, fx, &t, &o);
		cr_assert_eq(o.nlines, NFRAMES);
		for (unsigned i = 0; i < NFRAMES; i++) {
			memset(&r, 0, sizeof(r));
			compare_frame(files[fi].name, &fx[i], o.col[i], &t, SCOPE_ALL, &r, NULL);
			cr_assert_eq(r.mismatches, 0, "%s", r.buf);
			check_mutations(files[fi].name, &fx[i], o.col[i], &t, SCOPE_ALL, 0, &tried,
					&skipped);
		}
		tsout_free(&o);
	}
	cr_log_info("%u single-field changes all detected (%u reserved rows expected zero "
		    "not mutated)", tried, skipped);
	cr_assert_gt(tried, 1000u);
}

/* Every non-reserved row of the messages tshark dissects is compared by some
 * table entry or named in gaps[] with the reason; every row the table and
 * gaps[] name exists. */
Test(tshark_oracle, table_covers_every_field)
{
	for (size_t i = 0; i < NOMAP; i++) {
		const struct omap *e = &omap[i];
		const struct cmp_layout *l = kind_layout(e->kind);

		cr_assert_not_null(l);
		if (e->row)
			cr_expect_not_null(cmp_layout_find(l, e->row), "%s: no row %s in %s", e->ts,
					   e->row, l->name);
		if (e->row2)
			cr_expect_not_null(cmp_layout_find(l, e->row2), "%s: no row %s in %s",
					   e->ts, e->row2, l->name);
		if (e->xf == X_NONE || e->xf == X_ABSENT)
			cr_expect(e->why && !e->row, "%s: excluded without a reason", e->ts);
		else
			cr_expect_not_null(e->row, "%s: compared without a row", e->ts);
	}
	for (size_t g = 0; g < NGAPS; g++)
		cr_expect_not_null(cmp_layout_find(kind_layout(gaps[g].kind), gaps[g].row),
				   "gap %s.%s: no such row", kind_name[gaps[g].kind], gaps[g].row);

	for (size_t c = 0; c < sizeof(covered_kinds) / sizeof(covered_kinds[0]); c++) {
		enum kind k = covered_kinds[c];
		const struct cmp_layout *l = kind_layout(k);

		for (size_t fi = 0; fi < l->nfields; fi++) {
			const struct cmp_field *f = &l->fields[fi];
			int mapped = 0, gap = 0;

			if (f->kind == CMP_K_RSVD)
				continue;
			for (size_t i = 0; i < NOMAP; i++)
				if (omap[i].kind == k && omap[i].row && omap[i].xf != X_NONE &&
				    omap[i].xf != X_ABSENT &&
				    (!strcmp(omap[i].row, f->name) ||
				     (omap[i].row2 && !strcmp(omap[i].row2, f->name))))
					mapped++;
			for (size_t g = 0; g < NGAPS; g++)
				if (gaps[g].kind == k && !strcmp(gaps[g].row, f->name))
					gap++;
			cr_expect(mapped || gap, "%s.%s: neither compared nor listed as a gap",
				  kind_name[k], f->name);
			cr_expect(!(mapped && gap), "%s.%s: both compared and listed as a gap",
				  kind_name[k], f->name);
		}
	}
}

static int wanted_prefix(const char *abbrev)
{
	static const char ib[] = "infiniband.";

	if (strncmp(abbrev, ib, sizeof(ib) - 1))
		return 0;
	abbrev += sizeof(ib) - 1;
	for (size_t i = 0; i < sizeof(ts_prefixes) / sizeof(ts_prefixes[0]); i++) {
		size_t n = strlen(ts_prefixes[i]);

		if (!strncmp(abbrev, ts_prefixes[i], n) && (abbrev[n] == 0 || abbrev[n] == '.'))
			return 1;
	}
	return 0;
}

/* The table lists every field this tshark registers for those messages (so
 * a tshark upgrade cannot add one that goes unchecked), and every field the
 * table names exists. */
Test(tshark_oracle, table_lists_every_tshark_field)
{
	char *line = NULL, cmd[256];
	size_t cap = 0, nknown = 0;
	int seen[NOMAP] = { 0 };
	FILE *f;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	snprintf(cmd, sizeof(cmd), "WIRESHARK_CONFIG_DIR='%s' tshark -G fields 2>/dev/null",
		 tpath(""));
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (getline(&line, &cap, f) >= 0) {
		char *col[4] = { NULL };
		char *p = line;
		int found = 0;

		for (int c = 0; c < 4 && p; c++) {
			col[c] = p;
			p = strchr(p, '\t');
			if (p)
				*p++ = 0;
		}
		if (!col[2] || strcmp(col[0], "F") || !wanted_prefix(col[2]))
			continue;
		nknown++;
		for (size_t i = 0; i < NOMAP; i++)
			if (!strcmp(omap[i].ts, col[2])) {
				seen[i] = 1;
				found = 1;
			}
		cr_expect(found, "tshark field %s is not in the oracle table", col[2]);
	}
	free(line);
	pclose(f);
	cr_assert_gt(nknown, (size_t)150, "tshark -G fields listed only %zu infiniband fields", nknown);
	for (size_t i = 0; i < NOMAP; i++)
		cr_expect(seen[i], "oracle table names %s, which this tshark does not have",
			  omap[i].ts);
}

/* The same comparison on captures from elsewhere (real hardware: ibdump
 * ERF, tcpdump RoCEv2), where the expected values are what uscm decodes. */
Test(tshark_oracle, external_captures)
{
	static struct report r;
	char **paths;
	size_t n = collect_captures(&paths);
	unsigned bad_files = 0;

	if (!n)
		cr_skip_test("no captures: set USCM_ORACLE_PCAPS=a.pcap:b.pcap or provide "
			     "$USCM_SOURCE_DIR/../shared/reference/captures/*.pcap");
	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	for (size_t i = 0; i < n; i++) {
		unsigned bad = oracle_capture(paths[i], &r);

		bad_files += bad != 0;
		cr_expect_eq(bad, 0, "%s: %u disagreement(s) between tshark and uscm:\n%s", paths[i],
			     bad, r.buf);
		if (!r.mads)
			tf_warn("%s: no MAD in it; only checked that tshark shows no CM or "
				    "SA message either", paths[i]);
		free(paths[i]);
	}
	free(paths);
	cr_log_info("%zu capture(s), %u with disagreements", n, bad_files);
}
