/*
 * replay_mutate.c - seeded mutations of the MADs the other side sent, one
 * per run, each run in a forked child against the engine (or against a
 * live peer), and the four findings: crash, hang, leak, accepted.
 */
#include "tools/replay_mutate.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum mkind {
	MK_FIELD_RANDOM, MK_FIELD_MAX, MK_FIELD_ZERO, MK_RESERVED, MK_HEADER, MK_LENGTH,
	MK_COMM_ID, MK_DUP, MK_REORDER, MK_DROP, MK_KINDS, MK_CANARY = MK_KINDS
};

static const char *const mkind_name[] = {
	"field-random", "field-max", "field-zero", "reserved", "header", "length",
	"comm-id", "duplicate", "reorder", "drop", "canary",
};

struct mutation {
	enum mkind kind;
	size_t idx, idx2;        /* trace MAD (and the one swapped with) */
	char field[48];
	uint64_t value;
	uint16_t len;
	int must_reject;         /* the engine must act on nothing it caused */
	char desc[200];
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The trace MADs a mutation may touch: CM MADs the other side sent to S
 * (the engine is S), or S's own (live: this tool plays S to the peer). */
static size_t candidates(const struct rp_trace *t, enum rp_dir dir, size_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->m[i].dir == dir && t->m[i].is_cm && t->m[i].cm_ok && t->m[i].conn >= 0)
			out[n++] = i;
	return n;
}

static void redecode(struct rp_mad *m)
{
	cmp_layout_decode(&cmp_mad_hdr_layout, m->mad, &m->hdr);
	m->is_cm = m->hdr.mgmt_class == UMAD_CLASS_CM;
	m->cm_ok = m->is_cm && m->len == CMP_MAD_SIZE &&
		   cmp_cm_decode(m->mad, CMP_MAD_SIZE, &m->cm, NULL) == 0;
}

/* Picks run `run`'s mutation. */
static int pick(const struct rp_trace *t, const size_t *cand, size_t nc, uint64_t seed,
		unsigned run, int canary, struct mutation *mu)
{
	uint64_t x = seed * 0x100000001B3ull + run;
	const struct rp_mad *m;
	const struct cmp_layout *l;

	memset(mu, 0, sizeof(*mu));
	if (!nc)
		return -1;
	mu->idx = cand[splitmix(&x) % nc];
	m = &t->m[mu->idx];
	mu->kind = canary ? MK_CANARY : (enum mkind)(splitmix(&x) % MK_KINDS);
	l = cmp_cm_layout(m->hdr.attr_id);
	switch (mu->kind) {
	case MK_FIELD_RANDOM:
	case MK_FIELD_MAX:
	case MK_FIELD_ZERO:
	case MK_RESERVED: {
		size_t want_rsvd = mu->kind == MK_RESERVED, k = 0, nf = 0;
		for (size_t i = 0; i < l->nfields; i++)
			nf += (l->fields[i].kind == CMP_K_RSVD) == want_rsvd &&
			      l->fields[i].kind != CMP_K_GID && l->fields[i].kind != CMP_K_BYTES;
		if (!nf) {
			mu->kind = MK_DUP;
			break;
		}
		k = splitmix(&x) % nf;
		for (size_t i = 0; i < l->nfields; i++) {
			const struct cmp_field *f = &l->fields[i];
			if ((f->kind == CMP_K_RSVD) != want_rsvd || f->kind == CMP_K_GID ||
			    f->kind == CMP_K_BYTES || k--)
				continue;
			uint64_t maxv = f->width >= 64 ? UINT64_MAX : (1ull << f->width) - 1;
			snprintf(mu->field, sizeof(mu->field), "%s", f->name);
			mu->value = mu->kind == MK_FIELD_ZERO ? 0
				    : mu->kind == MK_FIELD_RANDOM ? splitmix(&x) & maxv
				    : maxv;
			if (mu->kind == MK_RESERVED && !mu->value)
				mu->value = 1;
			/* A comm ID changed to another value names no connection
			 * (the sender's own ID is new in a REQ, and is learned from
			 * a REP, MRA or REJ, which may answer a REQ). */
			if (!strcmp(f->name, "remote_comm_id") && mu->value != cmp_cm_remote_id(&m->cm))
				mu->must_reject = 1;
			uint16_t a = m->hdr.attr_id;
			if (!strcmp(f->name, "local_comm_id") && a != UMAD_CM_ATTR_REQ &&
			    a != UMAD_CM_ATTR_REP && a != UMAD_CM_ATTR_MRA && a != UMAD_CM_ATTR_REJ &&
			    mu->value != cmp_cm_local_id(&m->cm))
				mu->must_reject = 1;
			break;
		}
		break;
	}
	case MK_HEADER: {
		static const char *const hf[] = { "base_version", "class_version", "method",
						  "attr_id", "status", "attr_mod" };
		snprintf(mu->field, sizeof(mu->field), "%s", hf[splitmix(&x) % 6]);
		const struct cmp_field *f = cmp_layout_find(&cmp_mad_hdr_layout, mu->field);
		uint64_t maxv = (1ull << f->width) - 1;
		mu->value = splitmix(&x) & maxv;
		break;
	}
	case MK_LENGTH: {
		static const uint16_t lens[] = { 0, 1, 23, 24, 100, 255 };
		mu->len = lens[splitmix(&x) % 6];
		mu->must_reject = 1;
		break;
	}
	case MK_COMM_ID:
		snprintf(mu->field, sizeof(mu->field), "%s",
			 m->hdr.attr_id == UMAD_CM_ATTR_REQ ? "local_comm_id"
			 : m->hdr.attr_id == UMAD_CM_ATTR_SIDR_REQ ? "request_id"
			 : m->hdr.attr_id == UMAD_CM_ATTR_SIDR_REP ? "request_id"
			 : "remote_comm_id");
		mu->value = (uint32_t)splitmix(&x) | 1;
		mu->must_reject = m->hdr.attr_id != UMAD_CM_ATTR_REQ &&
				  m->hdr.attr_id != UMAD_CM_ATTR_SIDR_REQ;
		break;
	case MK_REORDER: {
		size_t j;
		for (j = 0; j < nc && cand[j] != mu->idx; j++)
			;
		if (j + 1 >= nc) {
			mu->kind = MK_DUP;
			break;
		}
		mu->idx2 = cand[j + 1];
		break;
	}
	default:
		break;
	}
	char fieldtxt[100] = "";
	if (mu->field[0])
		snprintf(fieldtxt, sizeof(fieldtxt), " %s := 0x%" PRIx64, mu->field, mu->value);
	if (mu->kind == MK_LENGTH)
		snprintf(fieldtxt, sizeof(fieldtxt), " length := %u", mu->len);
	if (mu->kind == MK_REORDER)
		snprintf(fieldtxt, sizeof(fieldtxt), " swapped with frame %" PRIu64,
			 t->m[mu->idx2].frame);
	if (mu->kind == MK_CANARY)
		mu->must_reject = 1;
	snprintf(mu->desc, sizeof(mu->desc), "%s frame %" PRIu64 " %s%s%s", mkind_name[mu->kind],
		 m->frame, cmp_cm_attr_str(m->hdr.attr_id), fieldtxt,
		 mu->must_reject ? " (must be rejected)" : "");
	return 0;
}

/* A copy of t with the mutation applied. Returns the index the mutated MAD
 * has in the copy (the first copy for a duplicate), or NONE for a drop. */
static int apply(const struct rp_trace *t, const struct mutation *mu, struct rp_trace *c,
		 size_t *at)
{
	size_t n = t->n + (mu->kind == MK_DUP) - (mu->kind == MK_DROP);

	memset(c, 0, sizeof(*c));
	c->m = malloc((n + 1) * sizeof(*c->m));
	c->conns = malloc((t->nconns + 1) * sizeof(*c->conns));
	if (!c->m || !c->conns) {
		free(c->m);
		free(c->conns);
		return -1;
	}
	memcpy(c->conns, t->conns, t->nconns * sizeof(*c->conns));
	c->nconns = t->nconns;
	c->link = t->link;
	for (size_t i = 0, j = 0; i < t->n; i++) {
		if (mu->kind == MK_DROP && i == mu->idx)
			continue;
		c->m[j++] = t->m[i];
		if (mu->kind == MK_DUP && i == mu->idx) {
			c->m[j] = t->m[i];
			c->m[j].ts += 1000; /* 1 us later */
			j++;
		}
	}
	c->n = n;
	for (size_t k = 0; k < c->nconns; k++) {
		if (mu->kind == MK_DUP && c->conns[k].first > mu->idx)
			c->conns[k].first++;
		if (mu->kind == MK_DROP && c->conns[k].first > mu->idx)
			c->conns[k].first--;
	}
	*at = mu->kind == MK_DROP ? (size_t)-1 : mu->idx;
	struct rp_mad *m = &c->m[mu->idx];
	switch (mu->kind) {
	case MK_FIELD_RANDOM:
	case MK_FIELD_MAX:
	case MK_FIELD_ZERO:
	case MK_RESERVED:
	case MK_COMM_ID: {
		const struct cmp_layout *l = cmp_cm_layout(m->hdr.attr_id);
		const struct cmp_field *f = cmp_layout_find(l, mu->field);
		if (f)
			cmp_bits_set(m->mad + CMP_MAD_HDR_SIZE, f->byte, f->bit, f->width, mu->value);
		redecode(m);
		break;
	}
	case MK_HEADER: {
		const struct cmp_field *f = cmp_layout_find(&cmp_mad_hdr_layout, mu->field);
		cmp_bits_set(m->mad, f->byte, f->bit, f->width, mu->value);
		redecode(m);
		break;
	}
	case MK_LENGTH:
		m->len = mu->len;
		redecode(m);
		break;
	case MK_REORDER: {
		/* The two MADs change places; each keeps its slot's time. */
		struct rp_mad a = c->m[mu->idx], b = c->m[mu->idx2];
		uint64_t ta = a.ts, tb = b.ts;
		c->m[mu->idx] = b;
		c->m[mu->idx].ts = ta;
		c->m[mu->idx2] = a;
		c->m[mu->idx2].ts = tb;
		break;
	}
	default:
		break;
	}
	return 0;
}

/* What a child reports back through the pipe. */
struct outcome {
	int accepted;
	char accepted_ev[32];
	unsigned stuck;
	char stuck_state[24];
	uint64_t timers_after_trace, conns_left, timers_left;
	uint64_t rx_malformed, rx_stray, rx_mismatch;
};

struct watch {
	const struct mutation *mu;
	size_t at;
	struct outcome *out;
};

static void watch_event(void *ctx, size_t i, const struct cmp_event *ev)
{
	struct watch *w = ctx;
	/* The MAD that must be rejected (or its duplicate right after) caused an
	 * event: the engine acted on it. */
	if (!w->mu->must_reject || (i != w->at))
		return;
	if (w->mu->kind == MK_CANARY || !w->out->accepted) {
		w->out->accepted = 1;
		snprintf(w->out->accepted_ev, sizeof(w->out->accepted_ev), "%s",
			 cmp_event_str(ev->type));
	}
}

static void child_run(const struct rp_trace *t, const struct rp_opts *o,
		      const struct mutation *mu, int fd)
{
	struct rp_trace c;
	struct outcome out = { 0 };
	struct mutation mine = *mu;
	struct watch w = { .mu = &mine, .out = &out };
	struct rp_hooks h = { .ctx = &w, .on_event = watch_event };
	struct rp_report r;
	struct rp_result res;

	if (apply(t, mu, &c, &w.at) < 0)
		_exit(3);
	/* What uscm's own codec refuses must never be acted on. */
	if (w.at != (size_t)-1 && mu->kind != MK_REORDER && !c.m[w.at].cm_ok)
		mine.must_reject = 1;
	rp_report_init(&r, 0);
	if (rp_check_run(&c, o, &r, &h, &res) < 0)
		_exit(3);
	out.stuck = res.stuck;
	memcpy(out.stuck_state, res.stuck_state, sizeof(out.stuck_state));
	out.timers_after_trace = res.timers_after_trace;
	out.conns_left = res.conns_left;
	out.timers_left = res.timers_left;
	out.rx_malformed = res.stats.rx_malformed;
	out.rx_stray = res.stats.rx_stray;
	out.rx_mismatch = res.stats.rx_mismatch;
	rp_report_free(&r);
	free(c.m);
	free(c.conns);
	if (write(fd, &out, sizeof(out)) != (ssize_t)sizeof(out))
		_exit(3);
	_exit(0);
}

/* ---- against a live peer ------------------------------------------------------------ */

struct live_watch {
	uint32_t req_id;      /* the mutated REQ's comm ID as sent (0: not a REQ) */
	int must_reject;
	int accepted;
	char ev[16];
};

static void live_answer(void *ctx, const struct cmp_cm_msg *cm)
{
	struct live_watch *w = ctx;
	uint16_t a = cm->hdr.attr_id;

	/* A REQ that must be rejected, answered with a REP or an MRA. */
	if (w->must_reject && w->req_id && (a == UMAD_CM_ATTR_REP || a == UMAD_CM_ATTR_MRA) &&
	    cmp_cm_remote_id(cm) == w->req_id && !w->accepted) {
		w->accepted = 1;
		snprintf(w->ev, sizeof(w->ev), "%s", cmp_cm_attr_str(a));
	}
}

/* One live replay of t with fresh identities; the answers paired. */
static int live_once(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		     const struct rp_mutate_opts *mo, uint32_t id_xor, uint32_t qpn_add,
		     struct live_watch *w, unsigned *paired)
{
	struct rp_live_opts lo = mo->lo;
	struct rp_report r;
	int rc;

	lo.quiet = 1;
	lo.id_xor = id_xor;
	lo.qpn_add = qpn_add;
	lo.on_answer = w ? live_answer : NULL;
	lo.ctx = w;
	rp_report_init(&r, 0);
	rc = rp_live_run(t, s, o, &lo, &r);
	rp_report_free(&r);
	*paired = lo.paired;
	return rc;
}

/* S's MADs mutated, played to the live peer; after each run the unmutated
 * trace (fresh identities) must still be answered. */
static int mutate_live(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		       const struct rp_mutate_opts *mo, size_t *cand, FILE *out)
{
	size_t nc = candidates(t, RP_FROM_S, cand);
	unsigned paired = 0, runs = 0;
	struct rp_report rep;
	uint64_t x = mo->seed * 0x9E3779B97F4A7C15ull;

	if (!nc) {
		fprintf(stderr, "uscm-replay mutate --live: S sends no CM MAD to mutate\n");
		return 2;
	}
	if (live_once(t, s, o, mo, (uint32_t)splitmix(&x) | 1, 0x100, NULL, &paired) < 0)
		return 2;
	if (!paired) {
		fprintf(stderr, "uscm-replay mutate --live: the live peer does not answer the "
				"unmutated trace: nothing to compare with\n");
		return 2;
	}
	rp_report_init(&rep, 0);
	if (!mo->json)
		fprintf(out, "mutate --live: seed %" PRIu64 ", %u run%s, %zu MADs of S to mutate; "
			     "the unmutated trace got %u answers\n",
			mo->seed, mo->only >= 0 ? 1 : mo->count, mo->count == 1 ? "" : "s", nc, paired);
	unsigned first = mo->only >= 0 ? (unsigned)mo->only : 0;
	unsigned end = mo->only >= 0 ? first + 1 : mo->count;
	for (unsigned run = first; run < end; run++) {
		struct mutation mu;
		struct rp_trace c;
		size_t at;

		if (pick(t, cand, nc, mo->seed, run, mo->canary, &mu) < 0 || apply(t, &mu, &c, &at) < 0)
			break;
		runs++;
		uint64_t y = mo->seed * 0x100000001B3ull + run + 1;
		uint32_t id_xor = (uint32_t)splitmix(&y) | 1, qpn_add = 0x200 + 0x10 * (run % 4096);
		struct live_watch w = { 0 };
		if (at != (size_t)-1 && c.m[at].hdr.attr_id == UMAD_CM_ATTR_REQ) {
			w.must_reject = mu.must_reject || !c.m[at].cm_ok;
			/* As sent: XORed when it still decodes (replay_live). */
			w.req_id = (uint32_t)cmp_bits_get(c.m[at].mad, CMP_MAD_HDR_SIZE, 0, 32);
			if (c.m[at].cm_ok)
				w.req_id ^= id_xor;
		}
		if (!mo->json)
			fprintf(out, "run %u: %s\n", run, mu.desc);
		size_t before = rep.n;
		live_once(&c, s, o, mo, id_xor, qpn_add, &w, &paired);
		free(c.m);
		free(c.conns);
		if (w.accepted)
			rp_report_add(&rep, RP_D_ACCEPTED, t->m[mu.idx].frame, t->m[mu.idx].hdr.attr_id,
				      NULL, "run %u (%s): the peer answered it with %s", run, mu.desc,
				      w.ev);
		if (mo->peer_pid > 0 && kill(mo->peer_pid, 0) < 0 && errno == ESRCH) {
			rp_report_add(&rep, RP_D_CRASH, t->m[mu.idx].frame, t->m[mu.idx].hdr.attr_id,
				      NULL, "run %u (%s): the peer process %d is gone", run, mu.desc,
				      mo->peer_pid);
		} else {
			unsigned probe = 0;
			live_once(t, s, o, mo, id_xor ^ 0x5A5A5A5A, qpn_add + 8, NULL, &probe);
			if (!probe)
				rp_report_add(&rep, RP_D_HANG, t->m[mu.idx].frame,
					      t->m[mu.idx].hdr.attr_id, NULL,
					      "run %u (%s): the peer stopped answering (the unmutated "
					      "trace got no answer after it; a timer in the peer may "
					      "have fired for an earlier run: replay them with --only)",
					      run, mu.desc);
		}
		int dead = rep.counts[RP_D_CRASH] || rep.counts[RP_D_HANG];
		if (!mo->json) {
			if (rep.n == before)
				fprintf(out, "  ok: %u answers\n", paired);
			for (size_t k = before; k < rep.n; k++)
				fprintf(out, "  %s: %s\n", rp_diff_kind_str(rep.d[k].kind),
					rep.d[k].reason);
		}
		if (dead)
			break; /* nothing left to talk to */
	}
	if (mo->json)
		rp_report_json(&rep, out, "mutate-live", s->text);
	else
		fprintf(out, "mutate --live: seed %" PRIu64 ", %u run%s: crash %u, hang %u, "
			     "accepted %u (leaks are not observable in a live peer)\n",
			mo->seed, runs, runs == 1 ? "" : "s", rep.counts[RP_D_CRASH],
			rep.counts[RP_D_HANG], rep.counts[RP_D_ACCEPTED]);
	int rc = rep.n ? 1 : 0;
	rp_report_free(&rep);
	return rc;
}

int rp_mutate_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		  const struct rp_mutate_opts *mo, FILE *out)
{
	size_t *cand = calloc(t->n + 1, sizeof(*cand));
	size_t nc;
	unsigned findings[RP_D_KINDS] = { 0 }, runs = 0;
	struct rp_report rep;

	(void)s;
	if (!cand)
		return 2;
	if (mo->live) {
		int rc = mutate_live(t, s, o, mo, cand, out);
		free(cand);
		return rc;
	}
	nc = candidates(t, RP_TO_S, cand);
	if (!nc) {
		fprintf(stderr, "uscm-replay mutate: the other side sends S no CM MAD to mutate\n");
		free(cand);
		return 2;
	}
	rp_report_init(&rep, 0);
	if (!mo->json)
		fprintf(out, "mutate: seed %" PRIu64 ", %u run%s, %zu MADs to mutate\n", mo->seed,
			mo->only >= 0 ? 1 : mo->count, mo->count == 1 ? "" : "s", nc);
	unsigned first = mo->only >= 0 ? (unsigned)mo->only : 0;
	unsigned end = mo->only >= 0 ? first + 1 : mo->count;
	for (unsigned run = first; run < end; run++) {
		struct mutation mu;
		int pfd[2], st = 0;
		struct outcome oc;
		pid_t pid;

		if (pick(t, cand, nc, mo->seed, run, mo->canary, &mu) < 0 || pipe(pfd) < 0)
			break;
		runs++;
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			close(pfd[0]);
			close(pfd[1]);
			break;
		}
		if (pid == 0) {
			close(pfd[0]);
			alarm(60); /* a run that never ends is a hang */
			child_run(t, o, &mu, pfd[1]);
		}
		close(pfd[1]);
		memset(&oc, 0, sizeof(oc));
		ssize_t got = read(pfd[0], &oc, sizeof(oc));
		close(pfd[0]);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!mo->json)
			fprintf(out, "run %u: %s\n", run, mu.desc);
		unsigned before = (unsigned)rep.n;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			rp_report_add(&rep, RP_D_HANG, t->m[mu.idx].frame, t->m[mu.idx].hdr.attr_id,
				      NULL, "run %u (%s): did not finish in 60 s", run, mu.desc);
		else if (WIFSIGNALED(st) || got != (ssize_t)sizeof(oc) ||
			 (WIFEXITED(st) && WEXITSTATUS(st)))
			rp_report_add(&rep, RP_D_CRASH, t->m[mu.idx].frame, t->m[mu.idx].hdr.attr_id,
				      NULL, "run %u (%s): the engine %s %d", run, mu.desc,
				      WIFSIGNALED(st) ? "died of signal" : "exited with",
				      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		else {
			if (oc.accepted)
				rp_report_add(&rep, RP_D_ACCEPTED, t->m[mu.idx].frame,
					      t->m[mu.idx].hdr.attr_id, NULL,
					      "run %u (%s): the engine acted on it (%s)", run, mu.desc,
					      oc.accepted_ev);
			if (oc.timers_after_trace > 0 || oc.stuck)
				rp_report_add(&rep, RP_D_HANG, t->m[mu.idx].frame,
					      t->m[mu.idx].hdr.attr_id, NULL,
					      "run %u (%s): after every timeout %" PRIu64
					      " timer(s) still pending, %u connection(s) stuck in %s",
					      run, mu.desc, oc.timers_after_trace, oc.stuck,
					      oc.stuck ? oc.stuck_state : "-");
			if (oc.conns_left || oc.timers_left)
				rp_report_add(&rep, RP_D_LEAK, t->m[mu.idx].frame,
					      t->m[mu.idx].hdr.attr_id, NULL,
					      "run %u (%s): %" PRIu64 " connection(s) and %" PRIu64
					      " timer(s) left after destroy and TimeWait",
					      run, mu.desc, oc.conns_left, oc.timers_left);
			if (!mo->json && rep.n == before)
				fprintf(out, "  ok: malformed %" PRIu64 " stray %" PRIu64
					     " mismatch %" PRIu64 "\n",
					oc.rx_malformed, oc.rx_stray, oc.rx_mismatch);
		}
		if (!mo->json)
			for (size_t k = before; k < rep.n; k++)
				fprintf(out, "  %s: %s\n", rp_diff_kind_str(rep.d[k].kind),
					rep.d[k].reason);
	}
	for (int k = 0; k < RP_D_KINDS; k++)
		findings[k] = rep.counts[k];
	if (mo->json) {
		rp_report_json(&rep, out, "mutate", s->text);
	} else {
		fprintf(out, "mutate: seed %" PRIu64 ", %u run%s: crash %u, hang %u, leak %u, "
			     "accepted %u\n",
			mo->seed, runs, runs == 1 ? "" : "s", findings[RP_D_CRASH], findings[RP_D_HANG],
			findings[RP_D_LEAK], findings[RP_D_ACCEPTED]);
	}
	int rc = rep.n ? 1 : 0;
	rp_report_free(&rep);
	free(cand);
	return rc;
}
