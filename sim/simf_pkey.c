/*
 * P_Keys as an HCA port enforces them (IBTA Vol1 10.9): the membership
 * rule and the port's P_Key violation counter, shared by the verbs and
 * umad drop-ins and the SMA (PortInfo P_KeyViolations).
 */
#include "simf.h"
#include "simf_link.h"

int simf_pkey_match(uint16_t a, uint16_t b)
{
	/* the same partition (low 15 bits, never the invalid key 0), and at
	 * least one side a full member: two limited members do not talk */
	return (a & 0x7FFF) && (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000);
}

int simf_pkey_index(const struct simf *f, int n, uint16_t pkey)
{
	const struct simf_node *nd;

	if (n < 0 || n >= SIMF_MAX_NODES)
		return -1;
	nd = &f->st->nodes[n];
	for (int i = 0; i < SIMF_PKEYS; i++)
		if (simf_pkey_match(pkey, nd->pkeys[i]))
			return i;
	return -1;
}

void simf_pkey_violation(struct simf *f, int n)
{
	if (n >= 0 && n < SIMF_MAX_NODES)
		__atomic_add_fetch(&f->st->pkey_violations[n], 1, __ATOMIC_RELAXED);
}

uint32_t simf_pkey_violations(const struct simf *f, int n)
{
	if (n < 0 || n >= SIMF_MAX_NODES)
		return 0;
	return __atomic_load_n(&f->st->pkey_violations[n], __ATOMIC_RELAXED);
}

#define SW_TABLE_SET 0x80 /* sw_penf: the SM wrote the port's P_Key table */

/* Does switch sw's port p's table hold pkey's partition? A switch checks
 * the partition only (low 15 bits): which member may talk to which is the
 * end ports' business, and a port's table mirrors the CA behind it (OpenSM
 * gives a limited member's port 0x7FFF, yet that member's packets to its
 * SM, with 0x7FFF, must pass). */
static int sw_port_has(const struct simf_state *st, unsigned sw, int p, uint16_t pkey)
{
	/* a table the SM never set is the SMA's default: 0xFFFF alone */
	if (!(st->sw_penf[sw][p] & SW_TABLE_SET))
		return (pkey & 0x7FFF) == 0x7FFF;
	for (int i = 0; i < SIMF_SW_PKEYS; i++) {
		uint16_t k = st->sw_pkeys[sw][p][i];

		if ((k & 0x7FFF) && (k & 0x7FFF) == (pkey & 0x7FFF))
			return 1;
	}
	return 0;
}

/* Does switch node n's port p, enforcing in direction bit (1 inbound, 2
 * outbound), turn pkey away? Counted against the switch. */
static int sw_refuses(struct simf *f, int n, int p, int bit, uint16_t pkey)
{
	const struct simf_state *st = f->st;
	unsigned sw;

	if (n <= 0 || n >= SIMF_MAX_NODES || st->nodes[n].type != SIMF_NODE_SWITCH)
		return 0;
	sw = st->nodes[n].sw;
	if (sw >= SIMF_MAX_SWITCHES || p < 1 || p > SIMF_MAX_PORTS || !(st->sw_penf[sw][p] & bit) ||
	    sw_port_has(st, sw, p, pkey))
		return 0;
	simf_pkey_violation(f, n);
	return 1;
}

int simf_pkey_route_ok(struct simf *f, int src, uint16_t dlid, uint16_t pkey)
{
	const struct simf_state *st = f->st;
	const struct simf_hop *h;
	int n;

	if (!st->cabled || !st->nswitches || src <= 0 || src >= SIMF_MAX_NODES)
		return 1;
	/* the cables the datagram's route crosses: those of the LFT walk the
	 * drop-in just made for it (simf_route_lid), walked again only when
	 * the caller did not; losses for other reasons are the route's */
	if ((n = simf_trace_lid_hops(src, dlid, &h)) < 0) {
		simf_route_lid(f, src, dlid, NULL);
		n = simf_trace_lid_hops(src, dlid, &h);
	}
	for (int i = 0; i < n; i++)
		if (sw_refuses(f, h[i].a, h[i].pa, 2, pkey) || sw_refuses(f, h[i].b, h[i].pb, 1, pkey))
			return 0;
	return 1;
}

void simf_pkey_sw_table(struct simf *f, int n, int port, const uint16_t *keys)
{
	const struct simf_node *nd = &f->st->nodes[n];

	if (nd->type != SIMF_NODE_SWITCH || nd->sw >= SIMF_MAX_SWITCHES || port < 1 || port > SIMF_MAX_PORTS)
		return;
	for (int i = 0; i < SIMF_SW_PKEYS; i++)
		__atomic_store_n(&f->st->sw_pkeys[nd->sw][port][i], keys[i], __ATOMIC_RELAXED);
	__atomic_or_fetch(&f->st->sw_penf[nd->sw][port], SW_TABLE_SET, __ATOMIC_RELEASE);
}

void simf_pkey_sw_enforce(struct simf *f, int n, int port, int inbound, int outbound)
{
	const struct simf_node *nd = &f->st->nodes[n];

	if (nd->type != SIMF_NODE_SWITCH || nd->sw >= SIMF_MAX_SWITCHES || port < 1 || port > SIMF_MAX_PORTS)
		return;
	uint8_t *e = &f->st->sw_penf[nd->sw][port];
	uint8_t v = __atomic_load_n(e, __ATOMIC_RELAXED);

	__atomic_store_n(e, (uint8_t)((v & SW_TABLE_SET) | (inbound ? 1 : 0) | (outbound ? 2 : 0)),
			 __ATOMIC_RELAXED);
}
