/* api.c — the exported verbs of the drop-in libibverbs.so.1 (rdma-core 44 ABI).
 *
 * Each function here is an exact public name from <infiniband/verbs.h>, versioned
 * by libibverbs.map.  They validate what libibverbs itself validates and then call
 * the verbs objects (src/verbs), converting the internal 0/-errno convention to
 * libibverbs': int verbs return an errno value (or 0), pointer verbs return NULL
 * and set errno, and the few "-1 and errno" verbs (ibv_query_gid, ibv_get_cq_event,
 * ibv_get_async_event, ...) keep that contract.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "verbs/verbs.h"
#include "abi/ibverbs/exports.h"

/* The header turns these names into macros over inline helpers; we define the
 * real exported functions. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define RET_ERRNO(expr) ({ int __r = (expr); __r < 0 ? -__r : __r; })
#define NULL_ERRNO(e) do { errno = (e); return NULL; } while (0)

/* ------------------------------------------------------------- devices */

UROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;
	int n = 0, ret = uroce_device_list(&list, &n);

	if (ret) {
		if (num_devices)
			*num_devices = 0;
		NULL_ERRNO(-ret);
	}
	if (num_devices)
		*num_devices = n;
	return list;
}

/* Devices are immortal: only the array is freed (abi-compat §3.3). */
UROCE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

UROCE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

UROCE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct uroce_dev_info info;

	uroce_device_info(uroce_dev_from_ib(device), &info);
	return (__be64)info.node_guid;    /* big-endian already (ipc.h) */
}

UROCE_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return (int)uroce_dev_from_ib(device)->index;
}

UROCE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct uroce_device *dev = uroce_dev_from_ib(device);
	struct uroce_context *ctx;
	int ret;

	if (dev->ops != uroce_device_marker)
		NULL_ERRNO(EINVAL);
	ret = uroce_context_open(dev, &ctx);
	if (ret)
		NULL_ERRNO(-ret);
	return &ctx->vctx.context;
}

UROCE_EXPORT int ibv_close_device(struct ibv_context *context)
{
	return RET_ERRNO(uroce_context_close(uroce_ctx_from_ib(context)));
}

UROCE_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	NULL_ERRNO(EOPNOTSUPP);   /* a context is process-local state here */
}

/* ---------------------------------------------------------- async events */

UROCE_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	int ret = uroce_async_event_get(uroce_ctx_from_ib(context), event);

	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

UROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	uroce_async_event_ack(event);
}

/* --------------------------------------------------------------- queries */

UROCE_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	return RET_ERRNO(uroce_query_device(uroce_ctx_from_ib(context), device_attr));
}

/* The exported symbol fills the 48-byte legacy prefix; the header's inline
 * ibv_query_port uses the query_port op for the full struct. */
UROCE_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
				struct _compat_ibv_port_attr *port_attr)
{
	struct ibv_port_attr full;
	int ret = uroce_query_port(uroce_ctx_from_ib(context), port_num, &full);

	if (ret)
		return -ret;
	memcpy(port_attr, &full, offsetof(struct ibv_port_attr, port_cap_flags2));
	return 0;
}

UROCE_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	int ret;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	ret = uroce_query_gid(uroce_ctx_from_ib(context), port_num, (unsigned)index, gid, NULL, NULL);
	if (ret == -ENODATA) {
		/* An empty slot reads as the zero GID (rdma-core 44). */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

UROCE_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	union ibv_gid gid;
	uint32_t ifindex;
	uint8_t type;
	int ret;

	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (port_num > 255)
		return EINVAL;
	ret = uroce_query_gid(uroce_ctx_from_ib(context), (uint8_t)port_num, gid_index, &gid, &type, &ifindex);
	if (ret)
		return -ret;
	memset(entry, 0, entry_size < sizeof(*entry) ? entry_size : sizeof(*entry));
	entry->gid = gid;
	entry->gid_index = gid_index;
	entry->port_num = port_num;
	entry->gid_type = type;          /* enum ibv_gid_type numbering (ROCE_V2 = 2) */
	entry->ndev_ifindex = ifindex;
	return 0;
}

UROCE_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct uroce_context *ctx = uroce_ctx_from_ib(context);
	size_t n = 0;

	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	for (uint8_t port = 1; port <= UROCE_NUM_PORTS; port++) {
		for (unsigned i = 0; i < UROCE_MAX_GIDS; i++) {
			struct ibv_gid_entry *e;
			union ibv_gid gid;
			uint32_t ifindex;
			uint8_t type;

			if (uroce_query_gid(ctx, port, i, &gid, &type, &ifindex))
				continue;
			if (n >= max_entries)
				return -EINVAL;
			e = (struct ibv_gid_entry *)((char *)entries + n * entry_size);
			memset(e, 0, entry_size);
			e->gid = gid;
			e->gid_index = i;
			e->port_num = port;
			e->gid_type = type;
			e->ndev_ifindex = ifindex;
			n++;
		}
	}
	return (ssize_t)n;
}

/* Private to rdma-core but called by ibv_devinfo and pyverbs (abi-compat §2.3):
 * answers with the *sysfs* numbering, 0 = IB/RoCE v1, 1 = RoCE v2. */
UROCE_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
				    enum ibv_gid_type *type)
{
	uint8_t t;
	int ret = uroce_query_gid(uroce_ctx_from_ib(context), port_num, index, NULL, &t, NULL);

	if (ret == -ENODATA) {
		*type = 0;
		return 0;
	}
	if (ret) {
		errno = -ret;
		return -1;
	}
	*type = t == UROCE_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

UROCE_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	uint16_t k;

	if (index < 0 || uroce_query_pkey(uroce_ctx_from_ib(context), port_num, (unsigned)index, &k)) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(k);
	return 0;
}

UROCE_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 p;

	for (int i = 0; i < UROCE_PKEY_TBL_LEN; i++) {
		if (ibv_query_pkey(context, port_num, i, &p))
			return -1;
		if (p == pkey)
			return i;
	}
	errno = ENOENT;
	return -1;
}

/* ----------------------------------------------------------- sysfs access */

static char sysfs_path[256];
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

static void sysfs_path_init(void)
{
	const char *env = NULL;

	/* $SYSFS_PATH is honoured except in set-id programs, as in rdma-core. */
	if (!getauxval(AT_SECURE))
		env = getenv("SYSFS_PATH");
	snprintf(sysfs_path, sizeof(sysfs_path), "%s", env && *env ? env : "/sys");
	for (size_t len = strlen(sysfs_path); len > 1 && sysfs_path[len - 1] == '/'; len--)
		sysfs_path[len - 1] = '\0';
}

UROCE_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, sysfs_path_init);
	return sysfs_path;
}

UROCE_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char *path;
	ssize_t len;
	int fd;

	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	close(fd);
	if (len > 0) {
		if (buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if ((size_t)len < size)
			buf[len] = '\0';
		else
			buf[size - 1] = '\0';
	}
	return (int)len;
}

/* --------------------------------------------------------------- PD / MR */

UROCE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct uroce_pd *pd;
	int ret = uroce_pd_alloc(uroce_ctx_from_ib(context), &pd);

	if (ret)
		NULL_ERRNO(-ret);
	return &pd->pd;
}

UROCE_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return RET_ERRNO(uroce_pd_dealloc(uroce_pd_from_ib(pd)));
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
					     unsigned int access)
{
	struct uroce_mr *mr;
	int ret = uroce_mr_reg(uroce_pd_from_ib(pd), addr, length, iova, access, &mr);

	if (ret)
		NULL_ERRNO(-ret);
	return &mr->mr;
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
					    int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

UROCE_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					      uint64_t iova, int fd, int access)
{
	(void)pd; (void)offset; (void)length; (void)iova; (void)fd; (void)access;
	NULL_ERRNO(EOPNOTSUPP);   /* no device memory to import from */
}

UROCE_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
			      int access)
{
	int ret;

	/* Input checks libibverbs itself makes before asking the provider. */
	if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	ret = uroce_mr_rereg(uroce_mr_from_ib(mr), flags, pd ? uroce_pd_from_ib(pd) : NULL, addr, length,
			     (unsigned)access);
	if (ret) {
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	return 0;
}

UROCE_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return RET_ERRNO(uroce_mr_dereg(uroce_mr_from_ib(mr)));
}

UROCE_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context; (void)pd_handle;
	NULL_ERRNO(EOPNOTSUPP);
}

UROCE_EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }

UROCE_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd; (void)mr_handle;
	NULL_ERRNO(EOPNOTSUPP);
}

UROCE_EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }

UROCE_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context; (void)dm_handle;
	NULL_ERRNO(EOPNOTSUPP);
}

UROCE_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

/* Registered memory is plain process memory here, so fork() cannot corrupt it:
 * nothing to set up (abi-compat §5.6). */
UROCE_EXPORT int ibv_fork_init(void) { return 0; }
UROCE_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
UROCE_EXPORT int ibv_dontfork_range(void *base, size_t size) { (void)base; (void)size; return 0; }
UROCE_EXPORT int ibv_dofork_range(void *base, size_t size) { (void)base; (void)size; return 0; }

/* ------------------------------------------------------------- CQ, channel */

UROCE_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct uroce_comp_channel *ch;
	int ret = uroce_comp_channel_create(uroce_ctx_from_ib(context), &ch);

	if (ret)
		NULL_ERRNO(-ret);
	return &ch->ch;
}

UROCE_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	return RET_ERRNO(uroce_comp_channel_destroy(container_of(channel, struct uroce_comp_channel, ch)));
}

UROCE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = cqe < 0 ? 0 : (uint32_t)cqe, .cq_context = cq_context, .channel = channel,
		.comp_vector = comp_vector < 0 ? UINT32_MAX : (uint32_t)comp_vector,
	};
	struct uroce_cq *cq;
	int ret;

	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	ret = uroce_cq_create(uroce_ctx_from_ib(context), &attr, &cq);
	if (ret)
		NULL_ERRNO(-ret);
	return (struct ibv_cq *)&cq->cqx;
}

UROCE_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return RET_ERRNO(uroce_cq_resize(uroce_cq_from_ib(cq), cqe));
}

UROCE_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	return RET_ERRNO(uroce_cq_destroy(uroce_cq_from_ib(cq)));
}

UROCE_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	int ret = uroce_comp_channel_get(container_of(channel, struct uroce_comp_channel, ch), cq);

	if (ret) {
		errno = -ret;
		return -1;
	}
	*cq_context = (*cq)->cq_context;
	return 0;
}

/* As the struct ibv_cq contract implies: count under cq->mutex, wake a destroy
 * waiting for the acks. */
UROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* -------------------------------------------------------------------- SRQ */

UROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	struct uroce_srq *srq;
	int ret = uroce_srq_create(uroce_pd_from_ib(pd), srq_init_attr, &srq);

	if (ret)
		NULL_ERRNO(-ret);
	return &srq->srq;
}

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	return RET_ERRNO(uroce_srq_modify(uroce_srq_from_ib(srq), srq_attr, srq_attr_mask));
}

UROCE_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	return RET_ERRNO(uroce_srq_query(uroce_srq_from_ib(srq), srq_attr));
}

UROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	return RET_ERRNO(uroce_srq_destroy(uroce_srq_from_ib(srq)));
}

/* --------------------------------------------------------------------- QP */

UROCE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax = {
		.qp_context = qp_init_attr->qp_context, .send_cq = qp_init_attr->send_cq,
		.recv_cq = qp_init_attr->recv_cq, .srq = qp_init_attr->srq, .cap = qp_init_attr->cap,
		.qp_type = qp_init_attr->qp_type, .sq_sig_all = qp_init_attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct uroce_qp *qp;
	int ret = uroce_qp_create(uroce_ctx_from_ib(pd->context), &ax, &qp);

	if (ret)
		NULL_ERRNO(-ret);
	qp_init_attr->cap = ax.cap;
	return &qp->qpx.qp_base;
}

UROCE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct uroce_qp *q = uroce_qp_from_ib(qp);

	return q->is_qp_ex ? &q->qpx : NULL;
}

UROCE_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			      struct ibv_qp_init_attr *init_attr)
{
	int ret = uroce_qp_query(uroce_qp_from_ib(qp), attr, attr_mask, init_attr);

	if (ret)
		return -ret;
	if (attr_mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

UROCE_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	return RET_ERRNO(uroce_qp_modify(uroce_qp_from_ib(qp), attr, attr_mask));
}

UROCE_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return RET_ERRNO(uroce_qp_destroy(uroce_qp_from_ib(qp)));
}

UROCE_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp; (void)ece;
	return EOPNOTSUPP;
}

UROCE_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp; (void)ece;
	return EOPNOTSUPP;
}

/* No ordering guarantee is advertised until the transports exist. */
UROCE_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op; (void)flags;
	return 0;
}

UROCE_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;   /* RoCE: the GID is the IP multicast group; there are no LIDs */
	if (!qp || !gid)
		return EINVAL;
	return -uroce_transport_mcast(uroce_qp_from_ib(qp), gid, true);
}

UROCE_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	if (!qp || !gid)
		return EINVAL;
	return -uroce_transport_mcast(uroce_qp_from_ib(qp), gid, false);
}

/* --------------------------------------------------------------------- AH */

UROCE_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct uroce_ah *ah;
	int ret = uroce_ah_create(uroce_pd_from_ib(pd), attr, &ah);

	if (ret)
		NULL_ERRNO(-ret);
	return &ah->ah;
}

UROCE_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return RET_ERRNO(uroce_ah_destroy((struct uroce_ah *)ah));
}

UROCE_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				     struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	int ret = uroce_ah_attr_from_wc(uroce_ctx_from_ib(context), port_num, wc, grh, ah_attr);

	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
						  uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* Layer-2 resolution is the kernel neighbour table's job on a NIC; uroce sends
 * over UDP sockets and never needs a MAC. */
UROCE_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					     uint8_t eth_mac[6], uint16_t *vid)
{
	(void)context; (void)attr; (void)eth_mac; (void)vid;
	return -EOPNOTSUPP;
}

/* -------------------------------------------------- kernel ABI marshalling */

UROCE_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

UROCE_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

UROCE_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->reversible = (int)src->reversible;
	dst->mtu = (uint8_t)src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

UROCE_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (uint32_t)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->reversible = (uint32_t)src->reversible;
	dst->mtu = src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}
