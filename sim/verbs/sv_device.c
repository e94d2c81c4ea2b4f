/*
 * sv_device.c - devices, contexts, device/port/GID/P_Key queries, the
 * string and rate helpers, sysfs, fork stubs and the verbs that the
 * simulated device does not have (they fail as a device without them does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <endian.h>

#include "sim/verbs/sv.h"
#include "sim/verbs/sv_compat.h"

/* ---- the fabric handle, one per process ---------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct simf *g_f;
static int g_refs;
static pid_t g_pid;
static struct sv_device *g_dev;
static pid_t g_dev_pid;
static int g_warned;

struct simf *sv_fabric_get(void)
{
	struct simf *f;

	pthread_mutex_lock(&g_lock);
	if (g_f && g_pid != getpid()) {
		/* inherited across fork: the parent's registration is not ours */
		g_f = NULL;
		g_refs = 0;
	}
	if (!g_f) {
		g_f = simf_attach(NULL);
		g_pid = getpid();
	}
	if (g_f)
		g_refs++;
	f = g_f;
	pthread_mutex_unlock(&g_lock);
	return f;
}

void sv_fabric_put(void)
{
	pthread_mutex_lock(&g_lock);
	if (g_f && g_pid == getpid() && --g_refs == 0) {
		simf_detach(g_f);
		g_f = NULL;
	}
	pthread_mutex_unlock(&g_lock);
}

/* ---- device list ----------------------------------------------------------- */

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	struct simf *f;
	int n;

	if (num)
		*num = 0;
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	f = sv_fabric_get();
	if (!f) {
		/* no fabric: no devices, like a host without HCAs */
		int e = errno;

		if (getenv("USCM_SIM_NODE") && !__atomic_exchange_n(&g_warned, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "libibverbs (uscm sim): no fabric in %s: %s\n",
				getenv("USCM_SIM_DIR") ? getenv("USCM_SIM_DIR") : simf_default_dir(),
				strerror(e));
		return list;
	}
	n = f->self;
	if (n < 1 || (unsigned)n > f->st->nnodes || n >= SIMF_MAX_NODES) {
		if (getenv("USCM_SIM_NODE") && !__atomic_exchange_n(&g_warned, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "libibverbs (uscm sim): no node \"%s\" on the fabric\n",
				getenv("USCM_SIM_NODE"));
		sv_fabric_put();
		return list;
	}
	pthread_mutex_lock(&g_lock);
	if (!g_dev || g_dev_pid != getpid() || g_dev->node != n) {
		/* devices are never freed (opened contexts keep pointing at them) */
		struct sv_device *d = calloc(1, sizeof(*d));

		if (d) {
			d->magic = SV_DEVICE_MAGIC;
			d->node = n;
			d->guid = f->st->nodes[n].guid;
			d->dev.node_type = IBV_NODE_CA;
			d->dev.transport_type = IBV_TRANSPORT_IB;
			snprintf(d->dev.name, sizeof(d->dev.name), "uscm_%.32s", f->st->nodes[n].name);
			snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs0");
			snprintf(d->dev.dev_path, sizeof(d->dev.dev_path),
				 "/sys/class/infiniband_verbs/uverbs0");
			snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path),
				 "/sys/class/infiniband/%s", d->dev.name);
			g_dev = d;
			g_dev_pid = getpid();
		}
	}
	if (g_dev) {
		list[0] = &g_dev->dev;
		if (num)
			*num = 1;
	}
	pthread_mutex_unlock(&g_lock);
	return list;
}
SV_COMPAT_1_0(ibv_get_device_list)

int sv_is_device(const struct ibv_device *device)
{
	return device && ((const struct sv_device *)device)->magic == SV_DEVICE_MAGIC;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	if (!list)
		return;
	if (list[0])
		sv_fabric_put();
	free(list);
}
SV_COMPAT_1_0(ibv_free_device_list)

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}
SV_COMPAT_1_0(ibv_get_device_name)

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return htobe64(((struct sv_device *)device)->guid);
}
SV_COMPAT_1_0(ibv_get_device_guid)

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return 0;
}

/* ---- contexts ------------------------------------------------------------------ */

static int sv_query_port_ex(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr, size_t len);
static int sv_query_device_ex(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t len);
static int sv_compat_query_port(struct ibv_context *context, uint8_t port,
				struct _compat_ibv_port_attr *attr);

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_device *d = (struct sv_device *)device;
	struct sv_ctx *c;
	int p[2];

	if (!d) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->f = sv_fabric_get();
	if (!c->f) {
		free(c);
		errno = ENODEV;
		return NULL;
	}
	c->dev = d;
	c->node = d->node;
	c->link = (int)c->f->st->link;
	c->epfd = c->wakefd = c->async_wfd = -1;
	pthread_mutex_init(&c->lock, NULL);
	if (pipe2(p, O_CLOEXEC) < 0)
		goto fail;
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	c->async_wfd = p[1];

	c->vctx.sz = sizeof(struct verbs_context);
	c->vctx.query_port = sv_query_port_ex;
	c->vctx.query_device_ex = sv_query_device_ex;
	c->vctx.create_qp_ex = sv_create_qp_ex;
	c->vctx.open_xrcd = sv_open_xrcd;
	c->vctx.close_xrcd = sv_close_xrcd;
	c->vctx.create_srq_ex = sv_create_srq_ex;
	c->vctx.get_srq_num = sv_get_srq_num;

	struct ibv_context *ic = &c->vctx.context;
	ic->device = device;
	ic->cmd_fd = -1;
	ic->async_fd = p[0];
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ic->ops._compat_query_device = ibv_query_device;
	ic->ops._compat_query_port = sv_compat_query_port;
	ic->ops.poll_cq = sv_poll_cq;
	ic->ops.req_notify_cq = sv_req_notify_cq;
	ic->ops.post_srq_recv = sv_post_srq_recv;
	ic->ops.post_send = sv_post_send;
	ic->ops.post_recv = sv_post_recv;

	if (sv_progress_start(c))
		goto fail;
	return ic;
fail:
	{
		int e = errno;

		if (c->async_wfd >= 0) {
			close(c->async_wfd);
			close(p[0]);
		}
		sv_fabric_put();
		free(c);
		errno = e;
	}
	return NULL;
}
SV_COMPAT_1_0(ibv_open_device)

SV_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct sv_ctx *c = sv_ctx(context);
	struct sv_qp *q, *nq;
	unsigned i;

	sv_progress_stop(c);
	/* objects the application did not destroy: release what holds fds */
	for (q = c->qps; q; q = nq) {
		int g;

		nq = q->next;
		for (g = 0; g < q->nmcg; g++)
			simf_mcast_detach(c->f, c->node, q->mcg[g].gid, q->mcg[g].lid, q->qp.qp_num);
		if (q->fd >= 0)
			close(q->fd);
	}
	for (i = 0; i < c->nidle; i++)
		close(c->idle[i].fd);
	for (i = 0; i < c->nmrs; i++)
		free(c->mrs[i]);
	free(c->mrs);
	while (c->aq_head) {
		struct sv_async *a = c->aq_head;

		c->aq_head = a->next;
		free(a);
	}
	close(context->async_fd);
	close(c->async_wfd);
	sv_fabric_put();
	free(c);
	return 0;
}
SV_COMPAT_1_0(ibv_close_device)

/* ---- node facts -------------------------------------------------------------------- */

int sv_port_active_mtu(const struct sv_ctx *c)
{
	return c->link == SIMF_LINK_ROCE ? IBV_MTU_1024 : IBV_MTU_4096;
}

uint16_t sv_pkey(const struct sv_ctx *c, unsigned idx)
{
	if (idx >= SIMF_PKEYS)
		return 0;
	return c->f->st->nodes[c->node].pkeys[idx];
}

void sv_node_gid(const struct sv_ctx *c, int node, uint8_t gid[16])
{
	memcpy(gid, c->f->st->nodes[node].gid, 16);
}

uint16_t sv_node_lid(const struct sv_ctx *c, int node)
{
	return c->link == SIMF_LINK_IB ? c->f->st->nodes[node].lid : 0;
}

/* ---- device and port queries ------------------------------------------------------- */

static void fill_device_attr(struct sv_ctx *c, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "0.1.0");
	a->node_guid = htobe64(c->dev->guid);
	a->sys_image_guid = htobe64(c->dev->guid);
	a->max_mr_size = ~0ULL;
	a->page_size_cap = 0xFFFFFFFFFFFFF000ULL;
	a->vendor_id = 0;
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_CURR_QP_STATE_MOD |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_XRC;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = SV_MAX_CQ;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = SV_MAX_MR;
	a->max_pd = SV_MAX_PD;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mcast_grp = SV_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SV_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SV_MAX_MCAST_GRP * SV_MAX_MCAST_QP_ATTACH;
	a->max_ah = SV_MAX_AH;
	a->max_srq = SV_MAX_SRQ;
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SRQ_SGE;
	a->max_pkeys = SIMF_PKEYS;
	a->local_ca_ack_delay = SV_LOCAL_CA_ACK_DELAY;
	a->phys_port_cnt = 1;
}

SV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	fill_device_attr(sv_ctx(context), attr);
	return 0;
}
SV_COMPAT_1_0(ibv_query_device)

static int sv_query_device_ex(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex a;

	if (input && input->comp_mask)
		return EINVAL;
	if (len < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	fill_device_attr(sv_ctx(context), &a.orig_attr);
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	a.phys_port_cnt_ex = 1;
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

static void fill_port_attr(struct sv_ctx *c, struct ibv_port_attr *a)
{
	const struct simf_node *n = &c->f->st->nodes[c->node];

	memset(a, 0, sizeof(*a));
	if (!n->link_up || n->port_state == SIMF_PORT_DOWN)
		a->state = IBV_PORT_DOWN;
	else if (n->port_state == SIMF_PORT_ACTIVE)
		a->state = IBV_PORT_ACTIVE;
	else if (n->port_state == SIMF_PORT_ARMED)
		a->state = IBV_PORT_ARMED;
	else
		a->state = IBV_PORT_INIT;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = (enum ibv_mtu)sv_port_active_mtu(c);
	a->gid_tbl_len = SV_GID_TBL_LEN;
	a->max_msg_sz = 0x80000000u;
	a->bad_pkey_cntr = __atomic_load_n(&c->bad_pkey, __ATOMIC_RELAXED) & 0xFFFF;
	a->qkey_viol_cntr = __atomic_load_n(&c->qkey_viol, __ATOMIC_RELAXED) & 0xFFFF;
	a->pkey_tbl_len = SIMF_PKEYS;
	a->max_vl_num = 1;
	a->subnet_timeout = 18;
	a->active_width = 2;          /* 4X */
	a->active_speed = 32;         /* EDR: 25 Gb/s per lane */
	a->phys_state = n->link_up ? 5 /* LinkUp */ : 3 /* Disabled */;
	if (c->link == SIMF_LINK_ROCE) {
		a->link_layer = IBV_LINK_LAYER_ETHERNET;
		a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	} else {
		a->link_layer = IBV_LINK_LAYER_INFINIBAND;
		a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_SYS_IMAGE_GUID_SUP;
		a->lid = n->lid;
		a->sm_lid = n->sm_lid;
		a->lmc = n->lmc;
	}
}

static int sv_query_port_ex(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr a;

	if (port != 1)
		return EINVAL;
	fill_port_attr(sv_ctx(context), &a);
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

static int sv_compat_query_port(struct ibv_context *context, uint8_t port,
				struct _compat_ibv_port_attr *attr)
{
	return sv_query_port_ex(context, port, (struct ibv_port_attr *)attr,
				offsetof(struct ibv_port_attr, flags));
}

/* The exported symbol: binaries built against old headers (the new inline
 * wrapper calls vctx->query_port instead). Fills the old, shorter layout. */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	return sv_compat_query_port(context, port_num, port_attr);
}
SV_COMPAT_1_0(ibv_query_port)

/* RoCE: the node's IPv6 GIDs (GIDs 1..): the IPv6 addresses, link-local
 * ones aside, of the interface holding the node's IPv4 address in this
 * process's network namespace, as the kernel adds a GID for each address
 * of a RoCE netdev. Published in the fabric state (ip_gids, ip_ndev) so
 * that the fabric delivers datagrams to them, and so that a process of the
 * node in a namespace without that interface reports them as the kernel's
 * GID table reports a netdev of another namespace: bound to its ifindex.
 * Their count; *ndev the interface. */
static int ip6_gids(struct sv_ctx *c, uint8_t out[SIMF_IP_GIDS][16], unsigned *ndev)
{
	struct simf_node *nd = &c->f->st->nodes[c->node];
	struct ifaddrs *ifs, *i;
	char ifname[IF_NAMESIZE + 1] = "";
	int n = 0;

	memset(out, 0, SIMF_IP_GIDS * 16);
	*ndev = 0;
	if (c->link != SIMF_LINK_ROCE || getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !ifname[0]; i = i->ifa_next) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)i->ifa_addr;

		if (s && s->sin_family == AF_INET && !memcmp(&s->sin_addr, nd->gid + 12, 4))
			snprintf(ifname, sizeof(ifname), "%s", i->ifa_name);
	}
	for (i = ifs; i && ifname[0] && n < SIMF_IP_GIDS; i = i->ifa_next) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)i->ifa_addr;

		if (!s || s->sin6_family != AF_INET6 || strcmp(i->ifa_name, ifname) ||
		    IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
			continue;
		memcpy(out[n++], &s->sin6_addr, 16);
	}
	freeifaddrs(ifs);
	if (!ifname[0]) {
		/* not in this namespace: where a process of the node found it */
		*ndev = __atomic_load_n(&nd->ip_ndev, __ATOMIC_RELAXED);
		if (!*ndev)
			return 0;
		static const uint8_t zero[16];

		memcpy(out, nd->ip_gids, SIMF_IP_GIDS * 16);
		while (n < SIMF_IP_GIDS && memcmp(out[n], zero, 16))
			n++;
		return n;
	}
	*ndev = if_nametoindex(ifname);
	if (n && memcmp(nd->ip_gids, out, SIMF_IP_GIDS * 16))
		memcpy(nd->ip_gids, out, SIMF_IP_GIDS * 16);
	if (*ndev)
		__atomic_store_n(&nd->ip_ndev, *ndev, __ATOMIC_RELAXED);
	return n;
}

static int gid_entry(struct sv_ctx *c, unsigned idx, union ibv_gid *gid)
{
	uint8_t g6[SIMF_IP_GIDS][16];
	unsigned ndev;

	memset(gid, 0, sizeof(*gid));
	if (idx >= SV_GID_TBL_LEN)
		return -1;
	if (idx == 0)
		sv_node_gid(c, c->node, gid->raw);
	else if (idx <= SIMF_IP_GIDS && (int)idx <= ip6_gids(c, g6, &ndev))
		memcpy(gid->raw, g6[idx - 1], 16);
	return 0;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			    union ibv_gid *gid)
{
	if (port_num != 1 || index < 0 || gid_entry(sv_ctx(context), (unsigned)index, gid)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
SV_COMPAT_1_0(ibv_query_gid)

/* The netdev a RoCE GID is bound to, as the kernel's GID table reports it
 * (roce_gid_mgmt adds a GID for each IP address of a netdev): the
 * interface that holds the node's IPv4 address (::ffff:a.b.c.d) in the
 * calling process's network namespace; else the one a process of the node
 * found in its namespace (ip_ndev: the netdev is in another namespace);
 * 0 if none did (the default fabric: node addresses are not on any
 * interface). */
static unsigned gid_ndev(const struct sv_ctx *c, const uint8_t gid[16])
{
	struct ifaddrs *ifs, *i;
	unsigned idx = 0;

	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)i->ifa_addr;

		if (s && s->sin_family == AF_INET && !memcmp(&s->sin_addr, gid + 12, 4))
			idx = if_nametoindex(i->ifa_name);
	}
	freeifaddrs(ifs);
	if (memcmp(gid, c->f->st->nodes[c->node].gid, 16))
		return idx;
	if (idx)
		__atomic_store_n(&c->f->st->nodes[c->node].ip_ndev, idx, __ATOMIC_RELAXED);
	else
		idx = __atomic_load_n(&c->f->st->nodes[c->node].ip_ndev, __ATOMIC_RELAXED);
	return idx;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				uint32_t gid_index, struct ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	struct sv_ctx *c = sv_ctx(context);
	struct ibv_gid_entry e;

	if (flags || entry_size < sizeof(e) || port_num != 1)
		return EINVAL;
	if (gid_index >= SV_GID_TBL_LEN)
		return EINVAL;
	memset(&e, 0, sizeof(e));
	if (gid_index != 0) {
		uint8_t g6[SIMF_IP_GIDS][16];
		unsigned ndev;

		if (gid_index > SIMF_IP_GIDS || (int)gid_index > ip6_gids(c, g6, &ndev))
			return ENODATA;
		memcpy(e.gid.raw, g6[gid_index - 1], 16);
		e.ndev_ifindex = ndev;
	} else {
		gid_entry(c, 0, &e.gid);
		e.ndev_ifindex = c->link == SIMF_LINK_ROCE ? gid_ndev(c, e.gid.raw) : 0;
	}
	e.gid_index = gid_index;
	e.port_num = 1;
	e.gid_type = c->link == SIMF_LINK_ROCE ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
				       struct ibv_gid_entry *entries, size_t max_entries,
				       uint32_t flags, size_t entry_size)
{
	if (flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (max_entries < 1)
		return -EINVAL;
	ssize_t n = 0;

	/* the valid entries: GID 0, then the IPv6 ones (RoCE) */
	for (uint32_t i = 0; i <= SIMF_IP_GIDS && (size_t)n < max_entries; i++) {
		int r = _ibv_query_gid_ex(context, 1, i, (struct ibv_gid_entry *)(void *)
				((char *)entries + (size_t)n * entry_size), 0, entry_size);
		if (r == ENODATA)
			break;
		if (r)
			return -r;
		n++;
	}
	return n;
}

/* IBVERBS_PRIVATE_34: type 0 = IB / RoCE v1, 1 = RoCE v2 (the sysfs enum). */
SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				 unsigned int index, int *type)
{
	struct sv_ctx *c = sv_ctx(context);

	if (port_num != 1 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = c->link == SIMF_LINK_ROCE ? 1 : 0;
	return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
			     __be16 *pkey)
{
	if (port_num != 1 || index < 0 || index >= SIMF_PKEYS) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(sv_pkey(sv_ctx(context), (unsigned)index));
	return 0;
}
SV_COMPAT_1_0(ibv_query_pkey)

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	struct sv_ctx *c = sv_ctx(context);
	unsigned i;

	if (port_num != 1)
		return -1;
	for (i = 0; i < SIMF_PKEYS; i++)
		if (sv_pkey(c, i) == be16toh(pkey))
			return (int)i;
	return -1;
}

/* ---- sysfs --------------------------------------------------------------------------- */

/* rdma-core's: the sysfs root, a string the library owns (callers append
 * "/class/infiniband" themselves); "/sys" for the simulated device too,
 * whose files ibv_read_sysfs_file synthesizes. */
SV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* Files of our device's ibdev_path are synthesized; other paths are read. */
SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	struct sv_device *d = g_dev;
	char path[512], tmp[128];
	const char *val = NULL;
	ssize_t len;
	int fd;

	if (!dir || !file || !buf || !size)
		return -1;
	if (d && (!strcmp(dir, d->dev.ibdev_path) || !strcmp(dir, d->dev.dev_path))) {
		uint64_t g = d->guid;

		if (!strcmp(file, "node_type")) {
			val = "1: CA";
		} else if (!strcmp(file, "node_guid") || !strcmp(file, "sys_image_guid")) {
			snprintf(tmp, sizeof(tmp), "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xFFFF,
				 (unsigned)(g >> 32) & 0xFFFF, (unsigned)(g >> 16) & 0xFFFF,
				 (unsigned)g & 0xFFFF);
			val = tmp;
		} else if (!strcmp(file, "ibdev")) {
			val = d->dev.name;
		} else if (!strcmp(file, "abi_version")) {
			val = "1";
		} else if (!strcmp(file, "fw_ver")) {
			val = "0.1.0";
		} else {
			return -1;   /* board_id, hca_type, ...: the simulated device has none */
		}
		len = (ssize_t)strlen(val);
		if ((size_t)len >= size)
			return -1;
		memcpy(buf, val, (size_t)len + 1);
		return (int)len;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	close(fd);
	if (len <= 0)
		return -1;
	if (buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if ((size_t)len < size)
		buf[len] = '\0';
	else
		return -1;
	return (int)len;
}

/* ---- strings ------------------------------------------------------------------------- */

SV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};
	if ((int)t < 1 || (size_t)t >= sizeof(s) / sizeof(s[0]) || !s[t])
		return "unknown";
	return s[t];
}

SV_EXPORT const char *ibv_port_state_str(enum ibv_port_state st)
{
	static const char *const s[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					"PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
	if ((unsigned)st >= sizeof(s) / sizeof(s[0]))
		return "unknown";
	return s[st];
}

SV_EXPORT const char *ibv_event_type_str(enum ibv_event_type ev)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)ev >= sizeof(s) / sizeof(s[0]) || !s[ev])
		return "unknown";
	return s[ev];
}

SV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status st)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)st >= sizeof(s) / sizeof(s[0]) || !s[st])
		return "unknown";
	return s[st];
}

/* ---- rates ------------------------------------------------------------------------------ */

static const struct {
	enum ibv_rate rate;
	int mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 2500},   {IBV_RATE_5_GBPS, 5000},     {IBV_RATE_10_GBPS, 10000},
	{IBV_RATE_20_GBPS, 20000},   {IBV_RATE_30_GBPS, 30000},   {IBV_RATE_40_GBPS, 40000},
	{IBV_RATE_60_GBPS, 60000},   {IBV_RATE_80_GBPS, 80000},   {IBV_RATE_120_GBPS, 120000},
	{IBV_RATE_14_GBPS, 14062},   {IBV_RATE_56_GBPS, 56250},   {IBV_RATE_112_GBPS, 112500},
	{IBV_RATE_168_GBPS, 168750}, {IBV_RATE_25_GBPS, 25781},   {IBV_RATE_100_GBPS, 103125},
	{IBV_RATE_200_GBPS, 206250}, {IBV_RATE_300_GBPS, 309375}, {IBV_RATE_28_GBPS, 28125},
	{IBV_RATE_50_GBPS, 53125},   {IBV_RATE_400_GBPS, 425000}, {IBV_RATE_600_GBPS, 637500},
	{IBV_RATE_800_GBPS, 850000}, {IBV_RATE_1200_GBPS, 1275000},
};

SV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	static const struct { enum ibv_rate r; int m; } t[] = {
		{IBV_RATE_2_5_GBPS, 1}, {IBV_RATE_5_GBPS, 2},   {IBV_RATE_10_GBPS, 4},
		{IBV_RATE_20_GBPS, 8},  {IBV_RATE_30_GBPS, 12}, {IBV_RATE_40_GBPS, 16},
		{IBV_RATE_60_GBPS, 24}, {IBV_RATE_80_GBPS, 32}, {IBV_RATE_120_GBPS, 48},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].r == rate)
			return t[i].m;
	return -1;
}

SV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	static const struct { enum ibv_rate r; int m; } t[] = {
		{IBV_RATE_2_5_GBPS, 1}, {IBV_RATE_5_GBPS, 2},   {IBV_RATE_10_GBPS, 4},
		{IBV_RATE_20_GBPS, 8},  {IBV_RATE_30_GBPS, 12}, {IBV_RATE_40_GBPS, 16},
		{IBV_RATE_60_GBPS, 24}, {IBV_RATE_80_GBPS, 32}, {IBV_RATE_120_GBPS, 48},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].m == mult)
			return t[i].r;
	return IBV_RATE_MAX;
}

SV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

SV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- fork: the simulated device has no pinned memory, so fork is safe --------------------- */

SV_EXPORT int ibv_fork_init(void)
{
	return 0;
}

SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* ---- what the simulated device does not have ------------------------------------------------ */

SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

SV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					  uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	struct sv_ctx *c = sv_ctx(context);
	int n;

	if (c->link != SIMF_LINK_ROCE || !attr->is_global) {
		errno = EINVAL;
		return -1;
	}
	n = simf_node_by_gid(c->f, attr->grh.dgid.raw);
	if (n < 0) {
		errno = EHOSTUNREACH;
		return -1;
	}
	/* a locally administered MAC naming the node */
	eth_mac[0] = 0x02;
	eth_mac[1] = 0x55;
	eth_mac[2] = 0x53;
	eth_mac[3] = 0x00;
	eth_mac[4] = 0x00;
	eth_mac[5] = (uint8_t)n;
	if (vid)
		*vid = 0xFFFF;
	return 0;
}
