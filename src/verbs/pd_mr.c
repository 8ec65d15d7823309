/* pd_mr.c — protection domains, and the verbs that register memory regions and allocate
 * memory windows.
 *
 * Memory is the process's own virtual memory: registering pins nothing, it only
 * records (addr, length, iova, access) under a key that incoming requests will be
 * checked against (IBA 10.6).  The key table, the window binds and the rules they follow
 * are in src/core/mem.c, below the transports, which check requests against them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs.h"

/* ------------------------------------------------------------------- PD */

int uroce_pd_alloc(struct uroce_context *ctx, struct uroce_pd **out)
{
	struct uroce_pd *pd;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_PD);
	if (ret)
		return ret;
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		uroce_obj_put(ctx->dev, UROCE_OBJ_PD);
		return -ENOMEM;
	}
	pd->pd.context = &ctx->vctx.context;
	*out = pd;
	return 0;
}

int uroce_pd_dealloc(struct uroce_pd *pd)
{
	if (atomic_load(&pd->usecnt))
		return -EBUSY;
	uroce_obj_put(uroce_ctx_from_ib(pd->pd.context)->dev, UROCE_OBJ_PD);
	free(pd);
	return 0;
}

/* ------------------------------------------------------------------- MR */

/* Access flags a registration may carry.  ZERO_BASED and HUGETLB change nothing
 * for plain virtual memory; ON_DEMAND is rejected like a device without ODP. */
#define MR_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | \
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

int uroce_mr_check_access(unsigned access)
{
	/* Optional-range bits are hints a device may ignore (abi-compat §5.14). */
	access &= ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE;
	if (access & ~(unsigned)MR_ACCESS_KNOWN)
		return -EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return -EOPNOTSUPP;
	/* IBA 10.6.3 (memory access rights): remote write or atomic access requires
	 * local write. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return (int)access;
}

static int check_range(const void *addr, size_t length)
{
	uintptr_t a = (uintptr_t)addr;

	if (!length)
		return -EINVAL;
	if (a + length < a)
		return -EINVAL;
	return 0;
}

int uroce_mr_reg(struct uroce_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access,
		 struct uroce_mr **out)
{
	struct uroce_context *ctx = uroce_ctx_from_ib(pd->pd.context);
	struct uroce_mr *mr;
	int acc, ret;

	ret = uroce_context_alive(ctx);
	if (ret)
		return ret;
	acc = uroce_mr_check_access(access);
	if (acc < 0)
		return acc;
	ret = check_range(addr, length);
	if (ret)
		return ret;
	if (iova + length < iova)
		return -EINVAL;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_MR);
	if (ret)
		return ret;
	mr = calloc(1, sizeof(*mr));
	ret = mr ? uroce_key_alloc(UROCE_KEY_MR, mr, &mr->mr.lkey) : -ENOMEM;
	if (ret) {
		free(mr);
		uroce_obj_put(ctx->dev, UROCE_OBJ_MR);
		return ret;
	}
	mr->mr.rkey = mr->mr.lkey;
	mr->mr.context = pd->pd.context;
	mr->mr.pd = &pd->pd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->access = (unsigned)acc;
	mr->iova = iova;
	atomic_fetch_add(&pd->usecnt, 1);
	*out = mr;
	return 0;
}

/* ibv_rereg_mr, as the kernel's rereg path does it (ib_uverbs_rereg_mr): every input is
 * checked before anything changes, so a failed call leaves the MR as it was; then the PD,
 * the access rights and the translation change in place.  The keys stay (as rxe and
 * mlx5's in-place rereg keep them): a peer that was handed the R_Key goes on using it
 * and is checked against the new PD, rights and range from its next packet on
 * (uroce_mem_epoch: a WRITE under way is checked again too).  The caller (ibv_rereg_mr)
 * reads lkey/rkey back from the struct ibv_mr. */
int uroce_mr_rereg(struct uroce_mr *mr, int flags, struct uroce_pd *pd, void *addr, size_t length,
		   unsigned access)
{
	int acc = (int)mr->access, ret;

	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED || !flags)
		return -EINVAL;
	/* A region with windows bound to it stays as it is (IBA 10.6.7.2.6, which rxe cites
	 * when it refuses to deregister one): first unbind or invalidate them. */
	if (atomic_load(&mr->num_mw))
		return -EBUSY;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		acc = uroce_mr_check_access(access);
		if (acc < 0)
			return acc;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ret = check_range(addr, length);
		if (ret)
			return ret;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		if (!pd || pd->pd.context != mr->mr.context)
			return -EINVAL;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_sub(&uroce_pd_from_ib(mr->mr.pd)->usecnt, 1);
		atomic_fetch_add(&pd->usecnt, 1);
		mr->mr.pd = &pd->pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = (unsigned)acc;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		/* libibverbs passes the new address as the new iova (ibv_cmd_rereg_mr's hca_va). */
		mr->mr.addr = addr;
		mr->mr.length = length;
		mr->iova = (uintptr_t)addr;
	}
	uroce_mem_changed();
	return 0;
}

int uroce_mr_dereg(struct uroce_mr *mr)
{
	if (atomic_load(&mr->num_mw))
		return -EBUSY;
	uroce_key_free(mr->mr.lkey);
	uroce_mem_changed();
	atomic_fetch_sub(&uroce_pd_from_ib(mr->mr.pd)->usecnt, 1);
	uroce_obj_put(uroce_ctx_from_ib(mr->mr.context)->dev, UROCE_OBJ_MR);
	free(mr);
	return 0;
}

/* ------------------------------------------------------------------- MW */

int uroce_mw_alloc(struct uroce_pd *pd, enum ibv_mw_type type, struct uroce_mw **out)
{
	struct uroce_context *ctx = uroce_ctx_from_ib(pd->pd.context);
	struct uroce_mw *mw;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return -EINVAL;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_MW);
	if (ret)
		return ret;
	mw = calloc(1, sizeof(*mw));
	ret = mw ? uroce_key_alloc(UROCE_KEY_MW, mw, &mw->key) : -ENOMEM;
	if (ret) {
		free(mw);
		uroce_obj_put(ctx->dev, UROCE_OBJ_MW);
		return ret;
	}
	mw->mw.rkey = mw->key;
	mw->mw.context = pd->pd.context;
	mw->mw.pd = &pd->pd;
	mw->mw.type = type;
	atomic_fetch_add(&pd->usecnt, 1);
	*out = mw;
	return 0;
}

int uroce_mw_dealloc(struct uroce_mw *mw)
{
	uroce_mw_unbind(mw);
	uroce_key_free(mw->key);
	atomic_fetch_sub(&uroce_pd_from_ib(mw->mw.pd)->usecnt, 1);
	uroce_obj_put(uroce_ctx_from_ib(mw->mw.context)->dev, UROCE_OBJ_MW);
	free(mw);
	return 0;
}
