/*
 * uscm_stats.h - uscm-specific: the connection manager's counters, summed
 * over every port this process has opened (one CM engine per port).
 *
 * Not part of librdmacm's API: a program that calls uscm_get_stats links
 * only against uscm's librdmacm.so.1 (symbol version USCM_1.0). To read the
 * counters of an unmodified program instead, run it with
 * USCM_STATS=stderr (or USCM_STATS=/path/file): the library prints them
 * when the process exits. docs/reliability.md says how to read them.
 *
 * Every MAD that reaches the CM and is not acted on is counted in one of
 * rx_malformed, rx_stray, rx_mismatch (of which rx_spoofed is a part),
 * rx_duplicate, rx_stale, rx_no_listener, backlog_drops or
 * half_open_drops (a REQ for a connection in TimeWait in two: it is a
 * duplicate, answered REJ stale).
 */
#ifndef USCM_STATS_H
#define USCM_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct uscm_stats {
	uint64_t ports;           /* ports with a CM engine (summed below) */
	uint64_t rx_mads;         /* CM MADs received */
	uint64_t tx_mads;         /* CM MADs sent (retransmissions included) */
	uint64_t rx_malformed;    /* failed to decode (version, class, attribute, length): dropped */
	uint64_t rx_stray;        /* no such connection, or meaningless in its state: dropped */
	uint64_t rx_mismatch;     /* comm ID matched, but the peer's ID, QPN or source did not: dropped */
	uint64_t rx_spoofed;      /* part of rx_mismatch: right comm ID (or a stale-connection
				     REQ's GUID and QPN) from the wrong LID/GID */
	uint64_t rx_duplicate;    /* retransmissions, answered again or absorbed */
	uint64_t rx_stale;        /* REQs answered with REJ(stale connection) (one naming a
				     connected QP from a wrong port is in rx_spoofed instead) */
	uint64_t rx_no_listener;  /* REQs / SIDR_REQs for a service nobody listens on */
	uint64_t backlog_drops;   /* REQs rejected: the listener's backlog was full */
	uint64_t half_open_drops; /* REQs rejected: USCM_MAX_PENDING half-open connections */
	uint64_t retransmits;     /* MADs we resent after a timeout */
	uint64_t timeouts;        /* handshakes / disconnects whose retries ran out */
	uint64_t conns_total;     /* connections created since start */
	uint64_t conns_live;      /* connections the engines hold now */
	uint64_t conns_peak;      /* most at once (per port, summed) */
	uint64_t half_open;       /* passive connections between REQ and RTU now */
	uint64_t half_open_peak;  /* most at once (per port, summed) */
};

/*
 * Fills *out with the current counters. `size` is sizeof(*out) as the
 * caller was compiled: a smaller (older) struct gets its prefix, a larger
 * (newer) one zeros past what this library knows. Returns 0, or -1 with
 * errno EINVAL (out is NULL). Thread-safe.
 */
int uscm_get_stats(struct uscm_stats *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
