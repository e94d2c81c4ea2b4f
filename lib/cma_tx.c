/*
 * cma_tx.c - MADs leave after g.lock is released.
 *
 * umad_send is a system call (a write to the umad device), and so is
 * re-reading a port's LID and SM LID for the SA's address (umad_get_port:
 * sysfs). Under g.lock the engines and the SA clients only queue what they
 * want sent (cma_port_flush → cma_tx_cm; the SA clients' sender
 * cma_tx_sa); a thread about to release the lock (cma_unlock, the progress
 * thread, a thread about to wait) sends the queue with the lock dropped.
 *
 * One thread sends at a time and in queue order, so MADs leave in the order
 * the engines made them (a REP's RTU after the REP was handled, a DREQ after
 * the QP went to ERROR); a thread that finds another one sending leaves the
 * queue to it, and the sender goes on until the queue is empty. The sender
 * owns every um_port's send side (its transmit buffer, its port info);
 * items that change what the receive side reads too (port info, the GID /
 * P_Key tables of USCM_PCAP) also hold that port's rx_lock.
 *
 * A call leaves the library only once what it queued is on the wire
 * (cma_tx_drain_locked from cma_unlock): an rdma_cm call that made a MAD,
 * and an event whose MAD went before it (a REJ before UNREACHABLE), then
 * behave as when the lock was held across umad_send — a process that exits
 * at once does not lose them.
 *
 * A send that fails: an SA query ends with that error (um_sa_fail: its
 * callback runs under the lock, as an answer's would); a CM MAD is lost,
 * as on the wire, and the engine's retries cover it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"

enum tx_kind { TX_CM, TX_SA, TX_PORT_INFO, TX_TABLES };

struct txm {
	struct txm *next;
	uint64_t seq;               /* queue order: 1, 2, ... */
	enum tx_kind kind;
	struct cma_port *port;
	int err;                    /* after sending: 0 or errno */
	/* TX_CM */
	struct cmp_addr dst;
	/* TX_SA */
	uint32_t tid;
	int timeout_ms, retries;
	uint8_t mad[CMP_MAD_SIZE];  /* TX_CM, TX_SA */
	/* TX_TABLES: copies */
	uint8_t *gids;
	int ngids;
	uint16_t *pkeys;
	int npkeys;
};

static struct txm *head, *tail;
static int sending;         /* a thread sends (g.lock dropped) */
static uint64_t queued;     /* seq of the last item queued */
static uint64_t done;       /* every item up to this seq is sent (or failed) */
static unsigned draining;   /* threads waiting in cma_tx_drain_locked */

static struct txm *txm_new(enum tx_kind kind, struct cma_port *p)
{
	struct txm *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->kind = kind;
	m->port = p;
	return m;
}

static void txm_queue(struct txm *m)
{
	m->seq = ++queued;
	if (tail)
		tail->next = m;
	else
		head = m;
	tail = m;
}

int cma_tx_cm(struct cma_port *p, const struct cmp_addr *dst, const uint8_t mad[CMP_MAD_SIZE])
{
	struct txm *m = txm_new(TX_CM, p);

	if (!m)
		return cma_fail(ENOMEM); /* lost, as on the wire: the engine retries */
	m->dst = *dst;
	memcpy(m->mad, mad, CMP_MAD_SIZE);
	txm_queue(m);
	return 0;
}

/* The SA clients' sender (um_sa_client_set_sender): ctx is the port. */
static int tx_sa(void *ctx, uint32_t tid, const uint8_t mad[CMP_MAD_SIZE], int timeout_ms,
		 int retries)
{
	struct txm *m = txm_new(TX_SA, ctx);

	if (!m)
		return cma_fail(ENOMEM);
	m->tid = tid;
	m->timeout_ms = timeout_ms;
	m->retries = retries;
	memcpy(m->mad, mad, CMP_MAD_SIZE);
	txm_queue(m);
	return 0;
}

void cma_tx_sa_attach(struct cma_port *p)
{
	um_sa_client_set_sender(p->sa, tx_sa, p);
}

void cma_tx_port_info(struct cma_port *p)
{
	struct txm *m;

	if (p->um && (m = txm_new(TX_PORT_INFO, p)))
		txm_queue(m);
}

void cma_tx_tables(struct cma_port *p)
{
	struct txm *m;

	if (!p->um || !(m = txm_new(TX_TABLES, p)))
		return;
	m->gids = malloc((size_t)(p->ngids ? p->ngids : 1) * 16);
	m->pkeys = malloc((size_t)(p->npkeys ? p->npkeys : 1) * sizeof(uint16_t));
	if (!m->gids || !m->pkeys) {
		free(m->gids);
		free(m->pkeys);
		free(m);
		return; /* the capture keeps the tables it has */
	}
	memcpy(m->gids, p->gids, (size_t)p->ngids * 16);
	memcpy(m->pkeys, p->pkeys, (size_t)p->npkeys * sizeof(uint16_t));
	m->ngids = p->ngids;
	m->npkeys = p->npkeys;
	txm_queue(m);
}

/* No lock held: the system calls. */
static void tx_one(struct txm *m)
{
	struct um_port *um = m->port->um;
	int rc = 0;

	errno = 0;
	switch (m->kind) {
	case TX_CM:
		rc = um_port_send_cm(um, &m->dst, m->mad);
		break;
	case TX_SA:
		rc = um_port_send_sa(um, m->mad, m->timeout_ms, m->retries);
		break;
	case TX_PORT_INFO:
		pthread_mutex_lock(&m->port->rx_lock);
		rc = um_port_refresh(um);
		pthread_mutex_unlock(&m->port->rx_lock);
		break;
	case TX_TABLES:
		pthread_mutex_lock(&m->port->rx_lock);
		rc = um_port_set_tables(um, m->gids, m->ngids, m->pkeys, m->npkeys);
		pthread_mutex_unlock(&m->port->rx_lock);
		break;
	}
	m->err = rc < 0 ? (errno ? errno : EIO) : 0;
}

/* g.lock held again: what a failure means. */
static void tx_after(struct txm *m)
{
	struct cma_port *p = m->port;

	if (!m->err)
		return;
	if (m->kind == TX_SA)
		um_sa_fail(p->sa, m->tid, -m->err);
	else if (m->kind == TX_CM && getenv("USCM_DEBUG"))
		fprintf(stderr, "uscm: %s:%u: MAD send failed: %s\n", p->dev->name, p->port_num,
			strerror(m->err));
}

int cma_tx_run_locked(void)
{
	int did = 0;

	if (sending)
		return 0;
	sending = 1;
	while (head) {
		struct txm *list = head, *m;

		head = tail = NULL;
		pthread_mutex_unlock(&g.lock);
		for (m = list; m; m = m->next)
			tx_one(m);
		pthread_mutex_lock(&g.lock);
		while ((m = list)) {
			list = m->next;
			done = m->seq;
			tx_after(m);
			free(m->gids);
			free(m->pkeys);
			free(m);
		}
		did = 1;
	}
	sending = 0;
	if (draining)
		pthread_cond_broadcast(&g.cond);
	return did;
}

void cma_tx_drain_locked(void)
{
	uint64_t want = queued;

	while (done < want) {
		if (!sending) {
			cma_tx_run_locked();
			continue;
		}
		/* another thread sends a batch with ours in it: a few umad_sends */
		draining++;
		pthread_cond_wait(&g.cond, &g.lock);
		draining--;
	}
}
