/*
 * P_Keys as an HCA port enforces them (IBTA Vol1 10.9): the membership
 * rule and the port's P_Key violation counter, shared by the verbs and
 * umad drop-ins and the SMA (PortInfo P_KeyViolations).
 */
#include "simf.h"

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
