/*
 * um_capture.h - USCM_PCAP=FILE: record every CM and SA MAD a process sends
 * or receives through um_transport into a pcap file, on any fabric.
 *
 * The file is created when the first port is opened (so a run that never
 * sends a MAD still leaves a valid, empty trace). Its link type is chosen
 * once, then, from every port libibumad lists: Ethernet (RoCEv2 frames,
 * linktype 1) when all ports are RoCE, ERF (linktype 197) as soon as one is
 * InfiniBand; in an ERF file IB MADs are type-21 records and RoCE MADs
 * type-2 (Ethernet) records, so a process using both kinds of port still
 * gets every MAD into one file that tshark and uscm-decode read.
 *
 * Each MAD is framed from what the port knows (our LID, GID table and
 * P_Key table; the peer's LID/GID/QPN/Q_Key/SL from the umad address), time
 * stamped with CLOCK_REALTIME, and appended with one write(2) under a
 * mutex: safe from several threads, and a process killed at any point
 * leaves a file readable up to its last complete record. Failure to create
 * the file prints one line on stderr and disables capture; the application
 * carries on unchanged.
 *
 * USCM_PCAP is a pattern, as core_pattern: %p is the process id, %h the
 * host name (gethostname: on the simulated fabric every node is the same
 * host), %% a '%'. An exported USCM_PCAP=FILE reaches every process the
 * shell starts: the first to open FILE holds it (um_pcap_open_write's
 * lock) and the others say so in one line and do not capture, instead of
 * truncating it and mixing their records into it.
 *
 * What is recorded is what the process hands to / gets from libibumad:
 * resends the kernel's MAD layer does on its own (umad_send retries of SA
 * queries) are not seen, and a reassembled multi-segment RMPP answer is
 * recorded as its first 256 bytes. BTH PSN is 0 (the HCA chooses it).
 */
#ifndef USCM_UM_CAPTURE_H
#define USCM_UM_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "cm_proto/cmp_engine.h"

/* Our end of a port, as the capture frames it. */
struct um_capture_local {
	uint16_t lid;
	int roce;
	const uint8_t *gids;    /* ngids x 16 bytes (index -> GID), or NULL */
	int ngids;
	const uint16_t *pkeys;  /* npkeys, host order, or NULL (0xFFFF) */
	int npkeys;
	uint64_t gid_prefix;    /* GID 0 when there is no table (host order) */
	uint64_t port_guid;
};

/* Reads USCM_PCAP once per process and creates the file; roce is the link
 * layer of the port being opened, used only if libibumad lists no port.
 * 1 when capturing. */
int um_capture_init(int roce);
/* 1 when capturing (cheap: one load). */
int um_capture_active(void);
/* USCM_PCAP's pattern with %p, %h and %% expanded into out (len bytes);
 * any other '%' is kept as written. -1 / ENAMETOOLONG when it does not fit. */
int um_capture_expand(const char *pattern, char *out, size_t len);

/* Sends a MAD to dst with send(arg) (0 or -1/errno) and, when it was sent
 * and we are capturing, records it (dst->lid / gid / qpn / qkey / sl /
 * pkey_index as handed to umad_send). The record is written before any
 * MAD received after the send returned can be: the file keeps cause before
 * effect. Returns what send returned. */
int um_capture_tx_send(const struct um_capture_local *l, const struct cmp_addr *dst,
		       const uint8_t *mad, int (*send)(void *arg), void *arg);
/* A MAD we received from src (as um_addr_from_umad made it: sgid_index is
 * the local GID index it arrived on). len >= 256. */
void um_capture_rx(const struct um_capture_local *l, const struct cmp_addr *src,
		   const uint8_t *mad);

#endif
