/*
 * simf_link.h - fault rules by link (internal to the simf library): which
 * cables a datagram crosses. The route walks of simf_topo.c record the
 * cables they cross in a per-thread trace; simf_send_from asks
 * simf_link_match whether a rule's link is among those of the datagram it
 * is sending (the drop-ins route a datagram just before they send it, on
 * the same thread). See docs/sim.md "Faults".
 */
#ifndef USCM_SIMF_LINK_H
#define USCM_SIMF_LINK_H

#include "simf.h"

/* A route walk from node src starts (dr: a directed route; dlid: the LID
 * a LID-routed walk goes to) ... */
void simf_trace_begin(int src, int dr, uint16_t dlid);
/* ... crosses the cable from node a's port pa to node b's port pb ... */
void simf_trace_hop(int a, int pa, int b, int pb);
/* ... and ends at node dst (-1: lost). */
void simf_trace_end(int dst);

/* The cables this thread's last route walk crossed, when it was the
 * LID-routed walk from src to dlid (simf_route_lid), in order: node a's
 * port pa to node b's port pb; their number, -1 when the last walk was
 * another (then walk it: simf_route_lid). */
struct simf_hop {
	int16_t a, b;
	uint8_t pa, pb;
};
int simf_trace_lid_hops(int src, uint16_t dlid, const struct simf_hop **hops);

/* Does the datagram from src to dst (pkt: its BTH..) cross rule r's link
 * in r's direction? Rules without a link match everything. */
int simf_link_match(const struct simf *f, const struct simf_fault *r, int src, int dst, const uint8_t *pkt);

/* "link=" values: "sw3:2", "node2:1", "2:1" -> r's link fields; 0 or -1. */
int simf_link_parse(const char *val, struct simf_fault *r);
/* The link of r as "sw3:2" / "node2:1" ("" when none). */
void simf_link_format(const struct simf_fault *r, char *buf, size_t len);

#endif
