/*
 * cmp_engine.c - the engine's machinery: connection allocation and indexes,
 * the timer heap, the TX and event queues, tracing, and the receive entry
 * point. The protocol itself is in cmp_conn.c.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "cm_proto/cmp_engine_int.h"
#include "cm_proto/cmp_siphash.h"

/* ---- keys and randomness (the caller seeds them; no clock, no /dev/urandom) */

/* One 64-bit value per purpose, from the seed through SipHash as a PRF
 * keyed by it. Comm IDs and TIDs go on the wire; with an invertible
 * generator (the splitmix64 this replaced) a peer could work back from
 * them to the seed and so to the hash tables' key. */
static uint64_t derive(uint64_t seed, uint64_t label)
{
	return cmp_siphash24_u128(seed, 0x7573636d2d6b6466ULL /* "uscm-kdf" */, label, 0);
}

enum { KDF_RNG0 = 1, KDF_RNG1, KDF_MAP0, KDF_MAP1 };

uint64_t cmp_random(struct cmp_engine *e)
{
	return cmp_siphash24_u128(e->rng_k0, e->rng_k1, e->rng++, 0);
}

/* ---- engine ---------------------------------------------------------------- */

struct cmp_engine *cmp_engine_new(const struct cmp_settings *s)
{
	struct cmp_settings set;
	struct cmp_engine *e;
	uint64_t k0, k1;

	if (s)
		set = *s;
	else
		cmp_settings_default(&set);
	if (!set.mem.malloc || !set.mem.free || !set.mem.calloc || !set.mem.realloc)
		set.mem = *cmp_mem_default();
	e = cmp_calloc(&set.mem, 1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->s = set;
	e->rng_k0 = derive(set.seed, KDF_RNG0);
	e->rng_k1 = derive(set.seed, KDF_RNG1);
	k0 = derive(set.seed, KDF_MAP0);
	k1 = derive(set.seed, KDF_MAP1);
	/* The maps allocate through e->s.mem: e does not move. */
	cmp_map_init(&e->by_local, &e->s.mem, k0, k1);
	cmp_map_init(&e->by_remote, &e->s.mem, k0, k1);
	cmp_map_init(&e->by_qpn, &e->s.mem, k0, k1);
	cmp_map_init(&e->by_sidr, &e->s.mem, k0, k1);
	return e;
}

void cmp_engine_free(struct cmp_engine *e)
{
	const struct cmp_mem *mem;

	if (!e)
		return;
	mem = &e->s.mem;
	/* Every connection is in by_local. Freeing one deletes it from there,
	 * and the backward shift may pull a later entry into its slot, never
	 * into one before it (those are empty by now): so empty each slot
	 * before moving on. No allocation, so this cannot fail half-way. */
	for (size_t i = 0; i < e->by_local.cap; i++)
		while (e->by_local.slots[i].val)
			cmp_conn_free(e, e->by_local.slots[i].val);
	while (e->listeners) {
		struct cmp_listen *l = e->listeners;
		e->listeners = l->next;
		cmp_free(mem, l);
	}
	cmp_map_free(&e->by_local);
	cmp_map_free(&e->by_remote);
	cmp_map_free(&e->by_qpn);
	cmp_map_free(&e->by_sidr);
	cmp_free(mem, e->heap);
	cmp_free(mem, e->txq);
	cmp_free(mem, e->evq);
	/* mem lives in *e: free through a copy. */
	struct cmp_mem m = *mem;
	cmp_free(&m, e);
}

const struct cmp_stats *cmp_engine_stats(const struct cmp_engine *e)
{
	return &e->st;
}

size_t cmp_engine_conn_count(const struct cmp_engine *e)
{
	return e->nconns;
}

size_t cmp_engine_timer_count(const struct cmp_engine *e)
{
	return e->heap_len;
}

/* ---- connections and indexes ----------------------------------------------- */

static struct cmp_map_key key1(uint64_t a)
{
	return (struct cmp_map_key){ a, 0 };
}

static struct cmp_map_key key2(uint64_t a, uint64_t b)
{
	return (struct cmp_map_key){ a, b };
}

/* Room in the timer heap for n connections' timers. */
static int heap_reserve(struct cmp_engine *e, size_t n)
{
	size_t ncap = e->heap_cap ? e->heap_cap : 64;
	struct cmp_timer_ent *nh;

	if (n <= e->heap_cap)
		return 0;
	while (ncap < n)
		ncap *= 2;
	nh = cmp_realloc(&e->s.mem, e->heap, ncap * sizeof(*nh));
	if (!nh)
		return -1;
	e->heap = nh;
	e->heap_cap = ncap;
	return 0;
}

struct cmp_conn *cmp_conn_alloc(struct cmp_engine *e, enum cmp_state st, void *ctx)
{
	size_t n = e->nconns + 1;
	struct cmp_conn *c = NULL;
	uint32_t id;

	if (e->nconns >= e->s.max_conns) {
		errno = ENOMEM;
		return NULL;
	}
	/* A connection has at most one timer and one entry per index: room
	 * for n of each now means cmp_timer_set and the index puts of its
	 * later steps never allocate, so never fail. (by_sidr only holds
	 * passive SIDR requests: on_sidr_req reserves it.) */
	if (heap_reserve(e, n) || cmp_map_reserve(&e->by_local, n) ||
	    cmp_map_reserve(&e->by_remote, n) || cmp_map_reserve(&e->by_qpn, n) ||
	    !(c = cmp_calloc(&e->s.mem, 1, sizeof(*c)))) {
		e->st.nomem++;
		errno = ENOMEM;
		return NULL;
	}
	/* Unguessable and unique: random, retried on the rare collision. 0 is
	 * never used (REJs for unknown connections carry 0). */
	do
		id = (uint32_t)cmp_random(e);
	while (!id || cmp_map_get(&e->by_local, key1(id)));
	(void)cmp_map_put(&e->by_local, key1(id), c); /* reserved above */
	c->local_id = id;
	c->state = (uint8_t)st;
	c->ctx = ctx;
	c->heap_idx = SIZE_MAX;
	e->nconns++;
	e->st.conns++;
	if (e->nconns > e->st.conns_peak)
		e->st.conns_peak = e->nconns;
	return c;
}

void cmp_purge_events(struct cmp_engine *e, const struct cmp_conn *c)
{
	size_t keep = 0;

	/* Compact the ring in place, dropping c's events (rare: destroy with
	 * events not yet polled). */
	for (size_t i = 0; i < e->ev_len; i++) {
		struct cmp_evitem *it = &e->evq[(e->ev_head + i) % e->ev_cap];
		if (it->ev.conn == c)
			continue;
		if (keep != i)
			e->evq[(e->ev_head + keep) % e->ev_cap] = *it;
		keep++;
	}
	e->ev_len = keep;
}

void cmp_conn_free(struct cmp_engine *e, struct cmp_conn *c)
{
	cmp_timer_clear(e, c);
	cmp_unindex(e, c);
	if (c->pending && c->listen) {
		c->listen->pending--;
		c->pending = 0;
	}
	cmp_purge_events(e, c);
	cmp_half_open_end(e, c);
	/* MADs already queued for sending keep a pointer: clear it. */
	for (size_t i = 0; i < e->tx_len; i++) {
		struct cmp_tx *t = &e->txq[(e->tx_head + i) % e->tx_cap];
		if (t->conn == c)
			t->conn = NULL;
	}
	cmp_map_del(&e->by_local, key1(c->local_id), c);
	e->nconns--;
	cmp_free(&e->s.mem, c);
}

void cmp_index_remote(struct cmp_engine *e, struct cmp_conn *c)
{
	if (c->indexed & 1)
		return;
	if (cmp_map_put(&e->by_remote, key2(c->remote_id, c->remote_ca_guid), c) == 0)
		c->indexed |= 1;
}

void cmp_index_qpn(struct cmp_engine *e, struct cmp_conn *c)
{
	if (c->indexed & 2)
		return;
	if (cmp_map_put(&e->by_qpn, key2(c->remote_qpn, c->remote_ca_guid), c) == 0)
		c->indexed |= 2;
}

void cmp_unindex(struct cmp_engine *e, struct cmp_conn *c)
{
	if (c->indexed & 1)
		cmp_map_del(&e->by_remote, key2(c->remote_id, c->remote_ca_guid), c);
	if (c->indexed & 2)
		cmp_map_del(&e->by_qpn, key2(c->remote_qpn, c->remote_ca_guid), c);
	if (c->indexed & 4)
		cmp_map_del(&e->by_sidr, cmp_sidr_key(c->remote_id, &c->dst), c);
	c->indexed = 0;
}

struct cmp_conn *cmp_find_local(struct cmp_engine *e, uint32_t id)
{
	return cmp_map_get(&e->by_local, key1(id));
}

struct cmp_conn *cmp_find_remote(struct cmp_engine *e, uint32_t remote_id, uint64_t guid)
{
	return cmp_map_get(&e->by_remote, key2(remote_id, guid));
}

struct cmp_conn *cmp_find_qpn(struct cmp_engine *e, uint32_t qpn, uint64_t guid)
{
	return cmp_map_get(&e->by_qpn, key2(qpn, guid));
}

struct cmp_map_key cmp_sidr_key(uint32_t request_id, const struct cmp_addr *src)
{
	uint64_t g = 0;

	/* Request IDs are only unique per requester: key on the source port
	 * too (its GID when routed, else its LID). */
	if (src->grh)
		for (int i = 0; i < 16; i++)
			g = g * 0x100000001B3ULL ^ src->gid[i];
	return key2((uint64_t)request_id << 16 | src->lid, g);
}

/* ---- tracing ---------------------------------------------------------------- */

void cmp_half_open_begin(struct cmp_engine *e, struct cmp_conn *c)
{
	if (c->half_open)
		return;
	c->half_open = 1;
	if (++e->st.half_open > e->st.half_open_peak)
		e->st.half_open_peak = e->st.half_open;
}

void cmp_half_open_end(struct cmp_engine *e, struct cmp_conn *c)
{
	if (!c->half_open)
		return;
	c->half_open = 0;
	e->st.half_open--;
}

void cmp_set_state(struct cmp_engine *e, struct cmp_conn *c, enum cmp_state to,
		   const char *cause, cmp_time now)
{
	/* A passive connection stops being half-open once it leaves the
	 * REQ..RTU part of the handshake, whichever way. */
	if (to != CMP_REQ_RCVD && to != CMP_MRA_REQ_SENT && to != CMP_REP_SENT &&
	    to != CMP_MRA_REP_RCVD && to != CMP_SIDR_REQ_RCVD)
		cmp_half_open_end(e, c);
	if (e->s.trace) {
		struct cmp_trace_rec r = {
			.time = now, .local_id = c->local_id, .remote_id = c->remote_id,
			.from = (enum cmp_state)c->state, .to = to, .cause = cause,
		};
		e->s.trace(e->s.trace_ctx, &r);
	}
	c->state = (uint8_t)to;
}

void cmp_trace_drop(struct cmp_engine *e, struct cmp_conn *c, const char *cause, cmp_time now)
{
	if (e->s.trace) {
		struct cmp_trace_rec r = {
			.time = now, .local_id = c ? c->local_id : 0, .remote_id = c ? c->remote_id : 0,
			.from = c ? (enum cmp_state)c->state : CMP_IDLE,
			.to = c ? (enum cmp_state)c->state : CMP_IDLE, .cause = cause,
		};
		e->s.trace(e->s.trace_ctx, &r);
	}
}

/* ---- timers: a binary min-heap of connections, one timer each ------------- */

static void heap_swap(struct cmp_engine *e, size_t a, size_t b)
{
	struct cmp_timer_ent t = e->heap[a];
	e->heap[a] = e->heap[b];
	e->heap[b] = t;
	e->heap[a].c->heap_idx = a;
	e->heap[b].c->heap_idx = b;
}

static void heap_up(struct cmp_engine *e, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (e->heap[p].deadline <= e->heap[i].deadline)
			break;
		heap_swap(e, i, p);
		i = p;
	}
}

static void heap_down(struct cmp_engine *e, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < e->heap_len && e->heap[l].deadline < e->heap[m].deadline)
			m = l;
		if (r < e->heap_len && e->heap[r].deadline < e->heap[m].deadline)
			m = r;
		if (m == i)
			return;
		heap_swap(e, i, m);
		i = m;
	}
}

void cmp_timer_clear(struct cmp_engine *e, struct cmp_conn *c)
{
	size_t i = c->heap_idx;

	c->timer_kind = CMP_T_NONE;
	if (i == SIZE_MAX)
		return;
	c->heap_idx = SIZE_MAX;
	e->heap_len--;
	if (i == e->heap_len)
		return;
	e->heap[i] = e->heap[e->heap_len];
	e->heap[i].c->heap_idx = i;
	heap_up(e, i);
	heap_down(e, e->heap[i].c->heap_idx);
}

void cmp_timer_set(struct cmp_engine *e, struct cmp_conn *c, enum cmp_timer_kind k,
		   cmp_time deadline)
{
	cmp_timer_clear(e, c);
	/* Cannot be full: cmp_conn_alloc made room for every connection. */
	assert(e->heap_len < e->heap_cap);
	c->timer_kind = (uint8_t)k;
	c->heap_idx = e->heap_len;
	e->heap[e->heap_len++] = (struct cmp_timer_ent){ deadline, c };
	heap_up(e, c->heap_idx);
}

cmp_time cmp_cap_timer(const struct cmp_engine *e, cmp_time t)
{
	return e->s.max_timer_ns && t > e->s.max_timer_ns ? e->s.max_timer_ns : t;
}

cmp_time cmp_engine_get_expiry(const struct cmp_engine *e)
{
	return e->heap_len ? e->heap[0].deadline : CMP_TIME_NEVER;
}

int cmp_engine_handle_expiry(struct cmp_engine *e, cmp_time now)
{
	int rc = 0;

	while (e->heap_len && e->heap[0].deadline <= now) {
		struct cmp_conn *c = e->heap[0].c;
		if (cmp_step_reserve(e)) {
			/* No room for what it may send or report: try again a
			 * little later rather than lose the timeout (or spin). */
			e->heap[0].deadline = now + CMP_NOMEM_RETRY_NS;
			heap_down(e, 0);
			errno = ENOMEM;
			rc = -1;
			continue;
		}
		/* Read before cmp_timer_clear() resets it. */
		enum cmp_timer_kind kind = (enum cmp_timer_kind)c->timer_kind;
		cmp_timer_clear(e, c);
		cmp_on_timer(e, c, kind, now);
	}
	return rc;
}

/* ---- TX and event queues: rings grown by doubling ------------------------------ */

/* Makes room for `want` more elements in the ring *q (element size esz,
 * `len` used from *head, *cap in all), unwrapping it into a new buffer. */
static int ring_room(const struct cmp_mem *mem, void **q, size_t esz, size_t *head, size_t len,
		     size_t *cap, size_t want, size_t first_cap)
{
	size_t ncap = *cap ? *cap : first_cap;
	unsigned char *nq;

	if (*cap - len >= want)
		return 0;
	while (ncap - len < want)
		ncap *= 2;
	nq = cmp_malloc(mem, ncap * esz);
	if (!nq)
		return -1;
	for (size_t i = 0; i < len; i++)
		memcpy(nq + i * esz, (unsigned char *)*q + ((*head + i) % *cap) * esz, esz);
	cmp_free(mem, *q);
	*q = nq;
	*head = 0;
	*cap = ncap;
	return 0;
}

static int tx_room(struct cmp_engine *e, size_t n)
{
	if (e->tx_cap - e->tx_len >= n)
		return 0;
	void *q = e->txq;
	int rc = ring_room(&e->s.mem, &q, sizeof(*e->txq), &e->tx_head, e->tx_len, &e->tx_cap, n, 16);

	e->txq = q;
	return rc;
}

static int ev_room(struct cmp_engine *e, size_t n)
{
	if (e->ev_cap - e->ev_len >= n)
		return 0;
	void *q = e->evq;
	int rc = ring_room(&e->s.mem, &q, sizeof(*e->evq), &e->ev_head, e->ev_len, &e->ev_cap, n, 16);

	e->evq = q;
	return rc;
}

int cmp_step_reserve(struct cmp_engine *e)
{
	if (tx_room(e, 2) || ev_room(e, 1)) {
		e->st.nomem++;
		return -1;
	}
	return 0;
}

int cmp_engine_reserve(struct cmp_engine *e)
{
	if (cmp_step_reserve(e)) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void cmp_send(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_addr *dst,
	      struct cmp_cm_msg *msg, int keep)
{
	struct cmp_tx *t;

	/* Room was reserved for the step, except in cmp_conn_destroy, which
	 * cannot fail: there the MAD is lost as on the wire (retries, ours or
	 * the peer's, recover it). */
	if (tx_room(e, 1)) {
		e->st.nomem++;
		e->st.nomem_lost++;
		return;
	}
	t = &e->txq[(e->tx_head + e->tx_len++) % e->tx_cap];
	t->dst = *dst;
	t->conn = c;
	cmp_cm_encode(msg, t->mad);
	if (keep && c) {
		memcpy(c->last, t->mad, CMP_MAD_SIZE);
		c->last_valid = 1;
	}
	e->st.tx++;
	e->st.tx_by_attr[msg->hdr.attr_id & 31]++;
}

void cmp_resend_last(struct cmp_engine *e, struct cmp_conn *c)
{
	struct cmp_cm_msg m;

	if (!c->last_valid || cmp_cm_decode(c->last, CMP_MAD_SIZE, &m, NULL))
		return;
	cmp_send(e, c, &c->dst, &m, 0);
}

int cmp_engine_poll_tx(struct cmp_engine *e, struct cmp_tx *tx)
{
	if (!e->tx_len)
		return 0;
	*tx = e->txq[e->tx_head];
	e->tx_head = (e->tx_head + 1) % e->tx_cap;
	e->tx_len--;
	return 1;
}

/* ---- events ------------------------------------------------------------------ */

struct cmp_event *cmp_emit(struct cmp_engine *e, struct cmp_conn *c, enum cmp_event_type t,
			   cmp_time now)
{
	struct cmp_evitem *it;

	if (c && c->user_gone) {
		memset(&e->sink, 0, sizeof(e->sink));
		return &e->sink.ev;
	}
	/* cmp_step_reserve made room before the step began. */
	assert(e->ev_len < e->ev_cap);
	it = &e->evq[(e->ev_head + e->ev_len++) % e->ev_cap];
	memset(&it->ev, 0, sizeof(it->ev));
	it->ev.type = t;
	it->ev.conn = c;
	it->ev.ctx = c ? c->ctx : NULL;
	it->ev.time = now;
	return &it->ev;
}

void cmp_event_data(struct cmp_engine *e, struct cmp_event *ev, const uint8_t *pdata,
		    size_t len, const uint8_t *ari, size_t ari_len)
{
	struct cmp_evitem *it = (struct cmp_evitem *)ev; /* ev is the first member */

	(void)e;
	if (len > sizeof(it->pdata))
		len = sizeof(it->pdata);
	if (ari_len > sizeof(it->ari))
		ari_len = sizeof(it->ari);
	if (len)
		memcpy(it->pdata, pdata, len);
	if (ari_len)
		memcpy(it->ari, ari, ari_len);
	ev->private_data_len = (uint8_t)len;
	ev->ari_len = (uint8_t)ari_len;
}

int cmp_engine_poll_event(struct cmp_engine *e, struct cmp_event *ev)
{
	if (!e->ev_len)
		return 0;
	e->cur = e->evq[e->ev_head];
	e->ev_head = (e->ev_head + 1) % e->ev_cap;
	e->ev_len--;
	*ev = e->cur.ev;
	ev->private_data = ev->private_data_len ? e->cur.pdata : NULL;
	ev->ari = ev->ari_len ? e->cur.ari : NULL;
	return 1;
}

/* ---- receive ----------------------------------------------------------------- */

int cmp_engine_recv(struct cmp_engine *e, const struct cmp_addr *src, const uint8_t *mad,
		    size_t len, cmp_time now)
{
	struct cmp_cm_msg m;

	e->st.rx++;
	if (!mad || !src || cmp_cm_decode(mad, len, &m, NULL)) {
		e->st.rx_malformed++;
		cmp_trace_drop(e, NULL, "drop malformed MAD", now);
		return 0;
	}
	e->st.rx_by_attr[m.hdr.attr_id & 31]++;
	if (cmp_step_reserve(e)) {
		cmp_trace_drop(e, NULL, "drop MAD: out of memory", now);
		errno = ENOMEM;
		return -1;
	}
	cmp_on_mad(e, src, &m, now);
	return 0;
}

/* ---- listeners ----------------------------------------------------------------- */

static uint64_t eff_mask(uint64_t mask)
{
	return mask ? mask : ~0ULL;
}

int cmp_listen(struct cmp_engine *e, uint64_t sid, uint64_t mask, unsigned backlog,
	       void *ctx, struct cmp_listen **out)
{
	struct cmp_listen *l;
	uint64_t m = eff_mask(mask);

	for (l = e->listeners; l; l = l->next) {
		uint64_t both = m & eff_mask(l->mask);
		if ((sid & both) == (l->sid & both)) {
			errno = EADDRINUSE;
			return -1;
		}
	}
	l = cmp_calloc(&e->s.mem, 1, sizeof(*l));
	if (!l) {
		e->st.nomem++;
		errno = ENOMEM;
		return -1;
	}
	l->sid = sid & m;
	l->mask = m;
	l->backlog = backlog ? backlog : e->s.default_backlog;
	l->ctx = ctx;
	l->next = e->listeners;
	e->listeners = l;
	*out = l;
	return 0;
}

void cmp_listen_destroy(struct cmp_engine *e, struct cmp_listen *l)
{
	struct cmp_listen **pp;

	for (pp = &e->listeners; *pp; pp = &(*pp)->next) {
		if (*pp != l)
			continue;
		*pp = l->next;
		/* Connections it spawned stay; they just stop counting. */
		for (size_t i = 0; i < e->by_local.cap; i++) {
			struct cmp_conn *c = e->by_local.slots[i].val;
			if (c && c->listen == l) {
				c->listen = NULL;
				c->pending = 0;
			}
		}
		cmp_free(&e->s.mem, l);
		return;
	}
}

struct cmp_listen *cmp_listen_match(struct cmp_engine *e, uint64_t sid)
{
	for (struct cmp_listen *l = e->listeners; l; l = l->next)
		if ((sid & l->mask) == l->sid)
			return l;
	return NULL;
}

/* ---- accessors ------------------------------------------------------------------ */

enum cmp_state cmp_conn_state(const struct cmp_conn *c) { return (enum cmp_state)c->state; }
uint32_t cmp_conn_local_id(const struct cmp_conn *c) { return c->local_id; }
uint32_t cmp_conn_remote_id(const struct cmp_conn *c) { return c->remote_id; }
void *cmp_conn_ctx(const struct cmp_conn *c) { return c->ctx; }
void cmp_conn_set_ctx(struct cmp_conn *c, void *ctx) { c->ctx = ctx; }
