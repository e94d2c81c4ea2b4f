/*
 * cma_qpjob.c - the verbs calls on an id's QP (ibv_modify_qp, and the
 * multicast attach / detach) made with g.lock released.
 *
 * On hardware ibv_modify_qp is a firmware command that can take
 * milliseconds; under the library lock it stalled every other id and the
 * progress thread. So whoever decides a transition (under g.lock: the
 * attributes come from the engine's connection and the id) queues a job on
 * the id; a thread about to release g.lock (cma_unlock, the progress
 * thread, a caller waiting for its own job) runs it with the lock dropped
 * and then, with the lock taken again, calls the job's `done`, which
 * re-checks what may have changed meanwhile (the peer's REJ, a DREQ,
 * rdma_disconnect, rdma_destroy_id) before it acts on the result.
 *
 * Rules: the jobs of one id run one at a time and in the order queued (so
 * an ERROR queued while a move to RTS runs still comes after it); jobs of
 * different ids run in parallel. A queued job pins its id: rdma_destroy_id
 * and rdma_destroy_qp wait until the id has none (cma_qpj_wait), so
 * neither the id nor its QP goes away under a call in flight.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"

static struct cma_qpj *head, *tail; /* FIFO of jobs not started yet */

struct cma_qpj *cma_qpj_new(struct cma_id *id, enum cma_qpj_kind kind)
{
	struct cma_qpj *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->id = id;
	j->kind = kind;
	return j;
}

int cma_qpj_add_step(struct cma_qpj *j, enum ibv_qp_state target)
{
	struct cma_qp_step *s;

	if (j->nsteps >= CMA_QPJ_STEPS)
		return cma_fail(EINVAL);
	s = &j->step[j->nsteps];
	memset(&s->attr, 0, sizeof(s->attr));
	s->attr.qp_state = target;
	if (cma_id_qp_attr(j->id, target, &s->attr, &s->mask) < 0)
		return -1;
	j->nsteps++;
	return 0;
}

void cma_qpj_queue(struct cma_qpj *j)
{
	j->next = NULL;
	if (tail)
		tail->next = j;
	else
		head = j;
	tail = j;
	j->id->qpjs++;
}

/* May j start? Not while its id runs one, nor before an older job of its
 * id (the FIFO is short: a few jobs per connection being set up). */
static int ready(const struct cma_qpj *j)
{
	if (j->id->qpj_running)
		return 0;
	for (const struct cma_qpj *k = head; k != j; k = k->next)
		if (k->id == j->id)
			return 0;
	return 1;
}

static void unlink_job(struct cma_qpj *j)
{
	struct cma_qpj *prev = NULL;

	for (struct cma_qpj *k = head; k; prev = k, k = k->next)
		if (k == j) {
			if (prev)
				prev->next = j->next;
			else
				head = j->next;
			if (tail == j)
				tail = prev;
			return;
		}
}

/* The calls themselves: no lock held. errno-style result. */
static int call(struct ibv_qp *qp, struct cma_qpj *j)
{
	int rc = 0;

	switch (j->kind) {
	case QPJ_MODIFY:
		for (unsigned i = 0; i < j->nsteps && !rc; i++)
			rc = ibv_modify_qp(qp, &j->step[i].attr, j->step[i].mask);
		break;
	case QPJ_ATTACH:
		rc = ibv_attach_mcast(qp, &j->mgid, j->mlid);
		break;
	case QPJ_DETACH:
		rc = ibv_detach_mcast(qp, &j->mgid, j->mlid);
		break;
	}
	if (rc)
		rc = rc > 0 ? rc : errno ? errno : EINVAL;
	return rc;
}

/* Runs j (g.lock held on entry and return, not during the calls). */
static void run(struct cma_qpj *j)
{
	struct cma_id *id = j->id;
	/* read now, under the lock: rdma_destroy_qp clears it (after waiting
	 * for this job), so a job that starts after it finds no QP */
	struct ibv_qp *qp = id->id.qp;

	unlink_job(j);
	id->qpj_running = 1;
	pthread_mutex_unlock(&g.lock);
	j->err = qp ? call(qp, j) : 0;
	j->no_qp = !qp;
	pthread_mutex_lock(&g.lock);
	id->qpj_running = 0;
	id->qpjs--;
	if (j->done) {
		j->done(j);
	} else if (j->ev) {
		cma_event_queue(j->ev); /* dropped if the id is being destroyed */
		j->ev = NULL;
	}
	j->finished = 1;
	pthread_cond_broadcast(&g.cond); /* cma_qpj_wait */
	if (!j->keep)
		free(j);
}

int cma_qpj_run_locked(struct cma_id *only)
{
	int did = 0;

	for (;;) {
		struct cma_qpj *j;

		for (j = head; j; j = j->next)
			if ((!only || j->id == only) && ready(j))
				break;
		if (!j)
			return did;
		run(j);
		did = 1;
	}
}

void cma_qpj_wait(struct cma_id *id)
{
	for (;;) {
		cma_qpj_run_locked(id); /* ours first */
		if (!id->qpjs)
			return;
		cma_deferred_run();
		if (!id->qpjs)
			return;
		/* another thread runs one of id's jobs: it broadcasts when done */
		pthread_cond_wait(&g.cond, &g.lock);
	}
}

int cma_qpj_sync(struct cma_qpj *j)
{
	int err;

	j->keep = 1;
	cma_qpj_queue(j);
	for (;;) {
		cma_qpj_run_locked(j->id);
		if (j->finished)
			break;
		cma_deferred_run();
		if (j->finished)
			break;
		pthread_cond_wait(&g.cond, &g.lock);
	}
	err = j->no_qp ? EINVAL : j->err; /* rdma_destroy_qp came first */
	free(j);
	return err;
}

void cma_qp_to_err(struct cma_id *id, struct cma_event *after)
{
	struct cma_qpj *j = NULL;

	if (id->id.qp && (j = cma_qpj_new(id, QPJ_MODIFY))) {
		j->nsteps = 1;
		j->step[0].attr.qp_state = IBV_QPS_ERR;
		j->step[0].mask = IBV_QP_STATE;
		j->ev = after;
		cma_qpj_queue(j);
		return;
	}
	/* No QP (the user's own, or none yet): nothing to move. Out of
	 * memory: the QP stays as it is, as a failed modify would leave it. */
	cma_event_queue(after);
}
