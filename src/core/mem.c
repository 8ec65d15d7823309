/* mem.c — memory keys, regions and windows as the verbs layer registers them and the
 * transports check incoming requests against them (mem.h).
 *
 * Keys come from one process-wide table so that the transport can resolve an R_Key from
 * any QP of the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/mem.h"

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

void uroce_mem_changed(void)
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

/* ------------------------------------------------------------------- MW */

void uroce_mw_unbind(struct uroce_mw *mw)
{
	if (mw->bound_mr)
		atomic_fetch_sub(&mw->bound_mr->num_mw, 1);
	mw->bound_mr = NULL;
	mw->addr = mw->length = 0;
	mw->access = 0;
	mw->qpn = 0;
	uroce_mem_changed();
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
		mw->bound_mr = (struct uroce_mr *)info->mr;
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
