/*
 * uscm-bench role "qp-loop": what the fabric's verbs QPs cost, without the
 * CM — N RC QPs on this node's device, the process's CPU (every thread:
 * the drop-in's progress thread too) per ibv_create_qp, per move to INIT,
 * RTR (to itself), RTS, and per ibv_destroy_qp. Two shapes: "held", all N
 * created, then moved, then destroyed (a server's QPs during a connect
 * phase: no QP destroyed yet whose socket a new one could take), and
 * "one at a time", each QP created, moved and destroyed before the next
 * (connect/disconnect churn: the drop-in reuses the last QP's socket).
 * The sim is the "hardware" under the library: this is the part of a
 * connection's CPU the fabric adds (docs/performance.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "bench.h"

enum { QP_CREATE, QP_INIT, QP_RTR, QP_RTS, QP_DESTROY, QP_OPS };
static const char *const op_name[QP_OPS] = { "create", "INIT", "RTR", "RTS", "destroy" };

struct qp_env {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint16_t lid;
};

static double cpu_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The QP a connection's side makes (bench_cm.c make_qp). */
static struct ibv_qp *qp_create(const struct qp_env *e)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.send_cq = e->cq;
	a.recv_cq = e->cq;
	a.cap.max_send_wr = 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return ibv_create_qp(e->pd, &a);
}

static int qp_move(const struct qp_env *e, struct ibv_qp *qp, int op)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	switch (op) {
	case QP_INIT:
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case QP_RTR:
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
		a.ah_attr.dlid = e->lid;
		a.ah_attr.port_num = 1;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	default:
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* One step on QP i. */
static int qp_step(const struct qp_env *e, struct ibv_qp **q, size_t i, int op)
{
	int rc;

	if (op == QP_CREATE)
		rc = (q[i] = qp_create(e)) ? 0 : -1;
	else if (op == QP_DESTROY)
		rc = ibv_destroy_qp(q[i]);
	else
		rc = qp_move(e, q[i], op);
	if (rc) {
		fprintf(stderr, "qp-loop: %s %zu: %s\n", op_name[op], i, strerror(rc > 0 ? rc : errno));
		return -1;
	}
	return 0;
}

static void qp_print(size_t n, const double *t, double cycle)
{
	double sum = 0;

	printf("  held:");
	for (int op = 0; op < QP_OPS; op++) {
		printf(" %s %.2f", op_name[op], t[op] / (double)n);
		sum += t[op];
	}
	printf("  total %.2f us\n", sum / (double)n);
	printf("  one at a time: %.2f us per QP, create to destroy\n", cycle / (double)n);
}

int bench_qp_loop(const struct bench_opts *o)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_port_attr pa;
	struct qp_env e = { 0 };
	struct ibv_qp **q;
	double held[QP_OPS] = { 0 }, cycle;
	size_t n = o->n;

	bench_raise_nofile(); /* a sim QP is a socket */
	if (!ctx || ibv_query_port(ctx, 1, &pa) || !(e.pd = ibv_alloc_pd(ctx)) ||
	    !(e.cq = ibv_create_cq(ctx, 64, NULL, NULL, 0)) || !(q = calloc(n, sizeof(*q)))) {
		perror("qp-loop: device");
		return 1;
	}
	e.lid = pa.lid;
	/* Each shape under one pair of clock readings: the process CPU clock
	 * costs ~0.5 us a reading, more than a state move. */
	for (int op = QP_CREATE; op < QP_OPS; op++) {
		double x = cpu_us();

		for (size_t i = 0; i < n; i++)
			if (qp_step(&e, q, i, op))
				return 1;
		held[op] = cpu_us() - x;
	}
	cycle = cpu_us();
	for (size_t i = 0; i < n; i++)
		for (int op = QP_CREATE; op < QP_OPS; op++)
			if (qp_step(&e, q, i, op))
				return 1;
	cycle = cpu_us() - cycle;
	printf("sim QPs (%zu RC QPs on node1, CPU per QP, every thread, us):\n", n);
	qp_print(n, held, cycle);
	free(q);
	ibv_destroy_cq(e.cq);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	return 0;
}
