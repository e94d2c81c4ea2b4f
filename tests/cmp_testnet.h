/*
 * cmp_testnet.h - a tiny two-node harness for engine unit tests: node A
 * (LID 1) and node B (LID 2), direct delivery of every queued MAD unless a
 * test intercepts it, and an event log per node. Shared by the engine tests;
 * the randomized network simulation has its own, richer fabric.
 */
#ifndef USCM_CMP_TESTNET_H
#define USCM_CMP_TESTNET_H

#include <string.h>

#include "cm_proto/cmp_engine.h"

struct tn_node {
	struct cmp_engine *e;
	struct cmp_addr self;       /* how the peer sees us */
	struct cmp_path to_peer;
	struct cmp_event ev[64];
	uint8_t pdata[64][CMP_CM_DATA_SIZE];
	int nev;
};

struct tn {
	struct tn_node n[2];
	cmp_time now;
};

static inline void tn_path(struct cmp_path *p, uint16_t slid, uint16_t dlid)
{
	memset(p, 0, sizeof(*p));
	p->slid = slid;
	p->dlid = dlid;
	p->sgid[0] = 0xfe; p->sgid[1] = 0x80; p->sgid[15] = (uint8_t)slid;
	p->dgid[0] = 0xfe; p->dgid[1] = 0x80; p->dgid[15] = (uint8_t)dlid;
	p->mtu = 4;
	p->rate = 3;
	p->packet_life_time = 14;
	p->pkey = 0xFFFF;
	p->subnet_local = 1;
	p->port_num = 1;
}

static inline void tn_init(struct tn *t, const struct cmp_settings *base)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 2; i++) {
		struct cmp_settings s;
		if (base)
			s = *base;
		else
			cmp_settings_default(&s);
		s.local_ca_guid = 0x0002c90300000000ULL | (uint64_t)(i + 1);
		s.seed = 1000 + (uint64_t)i;
		t->n[i].e = cmp_engine_new(&s);
		t->n[i].self.lid = (uint16_t)(i + 1);
		t->n[i].self.qpn = 1;
		t->n[i].self.qkey = 0x80010000;
		tn_path(&t->n[i].to_peer, (uint16_t)(i + 1), (uint16_t)(2 - i));
	}
	t->now = 1000000000ULL;
}

static inline void tn_fini(struct tn *t)
{
	for (int i = 0; i < 2; i++)
		cmp_engine_free(t->n[i].e);
}

/* Collects node i's events into its log. */
static inline void tn_events(struct tn *t, int i)
{
	struct tn_node *n = &t->n[i];
	struct cmp_event ev;

	while (cmp_engine_poll_event(n->e, &ev)) {
		if (n->nev < 64) {
			if (ev.private_data)
				memcpy(n->pdata[n->nev], ev.private_data, ev.private_data_len);
			n->ev[n->nev] = ev;
			n->ev[n->nev].private_data = ev.private_data ? n->pdata[n->nev] : NULL;
			n->nev++;
		}
	}
}

/* Takes node i's next outgoing MAD (1) or returns 0. */
static inline int tn_take(struct tn *t, int i, struct cmp_tx *tx)
{
	return cmp_engine_poll_tx(t->n[i].e, tx);
}

/* Delivers a MAD to node i as if sent by node 1-i. */
static inline void tn_deliver(struct tn *t, int i, const uint8_t *mad)
{
	cmp_engine_recv(t->n[i].e, &t->n[1 - i].self, mad, CMP_MAD_SIZE, t->now);
}

/* Moves every queued MAD across until both queues are empty; returns how
 * many were moved. */
static inline int tn_pump(struct tn *t)
{
	struct cmp_tx tx;
	int moved = 0, any;

	do {
		any = 0;
		for (int i = 0; i < 2; i++) {
			while (cmp_engine_poll_tx(t->n[i].e, &tx)) {
				tn_deliver(t, 1 - i, tx.mad);
				moved++;
				any = 1;
			}
		}
	} while (any);
	tn_events(t, 0);
	tn_events(t, 1);
	return moved;
}

/* Advances time to the earliest timer of either engine and fires it. */
static inline int tn_advance(struct tn *t)
{
	cmp_time a = cmp_engine_get_expiry(t->n[0].e), b = cmp_engine_get_expiry(t->n[1].e);
	cmp_time next = a < b ? a : b;

	if (next == CMP_TIME_NEVER)
		return 0;
	if (next > t->now)
		t->now = next;
	cmp_engine_handle_expiry(t->n[0].e, t->now);
	cmp_engine_handle_expiry(t->n[1].e, t->now);
	tn_events(t, 0);
	tn_events(t, 1);
	return 1;
}

static inline const struct cmp_event *tn_last(const struct tn *t, int i)
{
	return t->n[i].nev ? &t->n[i].ev[t->n[i].nev - 1] : NULL;
}

static inline int tn_count(const struct tn *t, int i, enum cmp_event_type type)
{
	int c = 0;
	for (int k = 0; k < t->n[i].nev; k++)
		c += t->n[i].ev[k].type == type;
	return c;
}

#endif
