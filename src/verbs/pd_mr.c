/* pd_mr.c — protection domains, memory regions, memory windows, memory keys.
 *
 * Memory is the process's own virtual memory: registering pins nothing, it only
 * records (addr, length, iova, access) under a key that incoming requests will be
 * checked against (IBA 10.6).  Keys come from one process-wide table so that the
 * transport can resolve an rkey from any QP of the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "verbs/verbs.h"

/* ------------------------------------------------------------------- PD */

int uroce_pd_alloc(struct uroce_context *ctx, struct uroce_pd **out)
{
	struct uroce_pd *pd;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->pd.context = &ctx->vctx.context;
	*out = pd;
	return 0;
}

int uroce_pd_dealloc(struct uroce_pd *pd)
{
	if (atomic_load(&pd->usecnt))
		return -EBUSY;
	free(pd);
	return 0;
}

/* ------------------------------------------------------------------- keys */

struct key_slot {
	void *obj;
	uint8_t kind;
	uint8_t variant;
};

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct key_slot *keys;          /* slot 0 unused: key 0 is never valid */
static uint32_t keys_cap;
static uint32_t keys_scan = 1;         /* where the search for a free slot starts */
#define KEY_INDEX_MAX 0xFFFFFFu        /* 24-bit index */

static void key_claim(uint32_t i, enum uroce_key_kind kind, void *obj, uint32_t *key)
{
	keys[i].obj = obj;
	keys[i].kind = kind;
	keys[i].variant++;
	*key = i << 8 | keys[i].variant;
	keys_scan = i + 1 < keys_cap ? i + 1 : 1;
}

int uroce_key_alloc(enum uroce_key_kind kind, void *obj, uint32_t *key)
{
	int ret = 0;

	pthread_mutex_lock(&keys_lock);
	/* Scan on from the last allocation so freed keys are reused late. */
	for (uint32_t n = 0; keys_cap > 1 && n < keys_cap - 1; n++) {
		uint32_t i = 1 + (keys_scan - 1 + n) % (keys_cap - 1);

		if (!keys[i].obj) {
			key_claim(i, kind, obj, key);
			goto out;
		}
	}
	{
		uint32_t ncap = keys_cap ? keys_cap * 2 : 256, first = keys_cap ? keys_cap : 1;
		struct key_slot *n;

		if (ncap > KEY_INDEX_MAX + 1)
			ncap = KEY_INDEX_MAX + 1;
		if (ncap <= keys_cap) {
			ret = -ENOMEM;
			goto out;
		}
		n = realloc(keys, ncap * sizeof(*n));
		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		memset(n + keys_cap, 0, (ncap - keys_cap) * sizeof(*n));
		/* Random first variants, as rxe: keys are not guessable from the
		 * allocation order, and two processes rarely hand out equal keys. */
		{
			uint64_t x = 0;

			if (getrandom(&x, sizeof(x), 0) != sizeof(x) || !x)
				x = 0x9E3779B97F4A7C15ull ^ (uintptr_t)n;
			for (uint32_t i = keys_cap; i < ncap; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				n[i].variant = (uint8_t)x;
			}
		}
		keys = n;
		keys_cap = ncap;
		key_claim(first, kind, obj, key);
	}
out:
	pthread_mutex_unlock(&keys_lock);
	return ret;
}

void uroce_key_free(uint32_t key)
{
	uint32_t i = key >> 8;

	pthread_mutex_lock(&keys_lock);
	if (i && i < keys_cap && keys[i].variant == (key & 0xFF))
		keys[i].obj = NULL;
	pthread_mutex_unlock(&keys_lock);
}

int uroce_key_rekey(uint32_t key, uint32_t new_key)
{
	uint32_t i = key >> 8;
	int ret = -ENOENT;

	if ((new_key >> 8) != i)
		return -EINVAL;
	pthread_mutex_lock(&keys_lock);
	if (i && i < keys_cap && keys[i].obj && keys[i].variant == (key & 0xFF)) {
		keys[i].variant = (uint8_t)new_key;
		ret = 0;
	}
	pthread_mutex_unlock(&keys_lock);
	return ret;
}

static atomic_uint mem_epoch;

uint32_t uroce_mem_epoch(void)
{
	return atomic_load_explicit(&mem_epoch, memory_order_acquire);
}

static void mem_changed(void)
{
	atomic_fetch_add_explicit(&mem_epoch, 1, memory_order_release);
}

void *uroce_key_lookup(uint32_t key, enum uroce_key_kind kind)
{
	uint32_t i = key >> 8;
	void *obj = NULL;

	pthread_mutex_lock(&keys_lock);
	if (i && i < keys_cap && keys[i].obj && keys[i].kind == kind &&
	    keys[i].variant == (key & 0xFF))
		obj = keys[i].obj;
	pthread_mutex_unlock(&keys_lock);
	return obj;
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
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	ret = uroce_key_alloc(UROCE_KEY_MR, mr, &mr->mr.lkey);
	if (ret) {
		free(mr);
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
	mem_changed();
	return 0;
}

int uroce_mr_dereg(struct uroce_mr *mr)
{
	if (atomic_load(&mr->num_mw))
		return -EBUSY;
	uroce_key_free(mr->mr.lkey);
	mem_changed();
	atomic_fetch_sub(&uroce_pd_from_ib(mr->mr.pd)->usecnt, 1);
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
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	ret = uroce_key_alloc(UROCE_KEY_MW, mw, &mw->key);
	if (ret) {
		free(mw);
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

void uroce_mw_unbind(struct uroce_mw *mw)
{
	if (mw->bound_mr)
		atomic_fetch_sub(&mw->bound_mr->num_mw, 1);
	mw->bound_mr = NULL;
	mw->addr = mw->length = 0;
	mw->access = 0;
	mw->qpn = 0;
	mem_changed();
}

int uroce_mw_dealloc(struct uroce_mw *mw)
{
	uroce_mw_unbind(mw);
	uroce_key_free(mw->key);
	atomic_fetch_sub(&uroce_pd_from_ib(mw->mw.pd)->usecnt, 1);
	free(mw);
	return 0;
}

/* The rules of a bind, in the order they are checked (IBA 10.6.7.1 type 1, 10.6.7.2 type 2;
 * the compliance numbers are those rxe's rxe_mw.c cites):
 *
 *   rule                                                        errno
 *   access bits outside UROCE_MW_ACCESS_KNOWN                   EINVAL
 *   the window's PD is not the QP's (both types: a type 1
 *     window is bound through a QP of its PD; type 2 C10-72)    EINVAL
 *   type 1, ZERO_BASED (o10-36.2.2: type 1 windows are VA based) EINVAL
 *   type 2, no MR or zero length (o10-37.2.40: a type 2 window
 *     is unbound by invalidation, not by a bind)                EINVAL
 *   type 1, zero length: an unbind; nothing more is checked     -
 *   type 1, no MR but a length                                  EINVAL
 *   MR of another context                                       EINVAL
 *   MR of another PD than the window (IBA 10.6.7: a window is
 *     bound to a region of its own PD; mlx5 answers EPERM)      EPERM
 *   MR registered ZERO_BASED (rxe and mlx5 refuse it)           EINVAL
 *   MR without MW_BIND (C10-73)                                 EINVAL
 *   REMOTE_WRITE or REMOTE_ATOMIC on an MR without
 *     LOCAL_WRITE (C10-74)                                      EINVAL
 *   [addr, addr + length) not inside the MR's iova range, or
 *     wrapping (C10-75; zero based too: the window still
 *     starts at addr inside the MR)                             EINVAL
 *
 * The window's rights are its remote ones: LOCAL_WRITE and MW_BIND are accepted and
 * ignored.  What depends on the window's state (a bound type 2 window) is checked when the
 * bind executes (uroce_mw_bind_exec). */
int uroce_mw_bind_check(const struct uroce_mw *mw, const struct ibv_pd *qp_pd,
			const struct ibv_mw_bind_info *info)
{
	const struct uroce_mr *mr;
	unsigned acc = info->mw_access_flags;
	uint64_t start, end;

	if (!mw || (acc & ~(unsigned)UROCE_MW_ACCESS_KNOWN))
		return -EINVAL;
	if (mw->mw.pd != qp_pd)
		return -EINVAL;
	if (mw->mw.type == IBV_MW_TYPE_1) {
		if (acc & IBV_ACCESS_ZERO_BASED)
			return -EINVAL;
		if (!info->length)
			return 0;
		if (!info->mr)
			return -EINVAL;
	} else if (!info->mr || !info->length) {
		return -EINVAL;
	}
	mr = (const struct uroce_mr *)info->mr;
	if (mr->mr.context != mw->mw.context)
		return -EINVAL;
	if (mr->mr.pd != mw->mw.pd)
		return -EPERM;
	if (mr->access & IBV_ACCESS_ZERO_BASED)
		return -EINVAL;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	if ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	start = mr->iova;
	end = start + mr->mr.length;
	if (info->addr < start || info->addr + info->length < info->addr || info->addr + info->length > end)
		return -EINVAL;
	return 0;
}

int uroce_mw_bind_exec(struct uroce_mw *mw, const struct ibv_pd *qp_pd, uint32_t qpn,
		       const struct ibv_mw_bind_info *info, uint32_t new_key)
{
	uint32_t nk;
	int ret = uroce_mw_bind_check(mw, qp_pd, info);

	if (ret)
		return ret;
	/* o10-37.2.30: a type 2 window is bound only from the Free state; it is freed by
	 * LOCAL_INV or Send with Invalidate, never by binding it again. */
	if (mw->mw.type == IBV_MW_TYPE_2 && mw->bound_mr)
		return -EINVAL;
	/* The consumer owns the low 8 bits of the new R_Key (IBA 10.6.7.1, 10.6.7.2.1: the
	 * key tag); the key table follows, so the old key no longer resolves. */
	nk = (mw->key & ~0xFFu) | (new_key & 0xFFu);
	if (nk != mw->key) {
		ret = uroce_key_rekey(mw->key, nk);
		if (ret)
			return ret;
		mw->key = nk;
	}
	if (mw->mw.type == IBV_MW_TYPE_2)
		mw->mw.rkey = nk;
	uroce_mw_unbind(mw);
	if (info->length) {
		mw->bound_mr = uroce_mr_from_ib(info->mr);
		atomic_fetch_add(&mw->bound_mr->num_mw, 1);
		mw->addr = info->addr;
		mw->length = info->length;
		mw->access = info->mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED);
		if (mw->mw.type == IBV_MW_TYPE_2)
			mw->qpn = qpn;
	}
	return 0;
}
