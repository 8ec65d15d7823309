/* mem.h — memory keys, regions and windows (below the verbs layer and the transports).
 *
 * The verbs layer registers regions and binds windows; the transports resolve the keys of
 * incoming requests and execute the binds and invalidations of the send queue (IBA 10.6).
 * Memory is the process's own virtual memory: registering pins nothing, it only records
 * (addr, length, iova, access) under a key.
 */
#ifndef UROCE_CORE_MEM_H
#define UROCE_CORE_MEM_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- memory keys (process-wide table shared by MRs and MWs) ---- */
enum uroce_key_kind { UROCE_KEY_MR = 1, UROCE_KEY_MW = 2 };
/* key = index << 8 | variant (rxe's layout): index names the slot, the 8-bit
 * variant changes on every reuse so a stale key never matches a new object. */
int uroce_key_alloc(enum uroce_key_kind kind, void *obj, uint32_t *key);
void uroce_key_free(uint32_t key);
/* A bound memory window's new R_Key (IBA 10.6.7: the consumer-owned low 8 bits change at
 * each bind): same index, new variant.  0, -EINVAL (other index), -ENOENT (stale key). */
int uroce_key_rekey(uint32_t key, uint32_t new_key);
/* Look an object up by key; NULL when the key is unknown or of another kind. */
void *uroce_key_lookup(uint32_t key, enum uroce_key_kind kind);
/* Moves on whenever what a key grants may have changed (an MR reregistered or
 * deregistered; a window bound, unbound or freed): the responder re-checks the R_Key of a
 * WRITE it is in the middle of when it has moved since the WRITE's first packet. */
uint32_t uroce_mem_epoch(void);
void uroce_mem_changed(void);

/* ---- memory region ---- */
struct uroce_mr {
	struct ibv_mr mr;
	unsigned access;                      /* IBV_ACCESS_* minus the optional range */
	uint64_t iova;                        /* what remote addresses are relative to */
	atomic_uint num_mw;                   /* MWs bound to this MR */
	void *transport;
};
static inline struct uroce_mr *uroce_mr_from_ib(struct ibv_mr *m) { return (struct uroce_mr *)m; }

/* ---- memory window ---- */
struct uroce_mw {
	struct ibv_mw mw;
	/* The R_Key the key table and the responder honour.  mw.rkey is the consumer's view:
	 * ibv_bind_mw(3) writes a type 1 window's next key there when the bind is posted, the
	 * window takes it when the bind executes in send-queue order (IBA 10.6.7.1). */
	uint32_t key;
	struct uroce_mr *bound_mr;            /* NULL when unbound (type 2: Free state) */
	uint64_t addr, length;                /* in the MR's iova space */
	unsigned access;                      /* REMOTE_READ/WRITE/ATOMIC, ZERO_BASED */
	uint32_t qpn;                         /* type 2: the QP it is bound to (IBA 10.6.7.2.2) */
};
/* Access flags a bind may carry: the window's remote rights, ZERO_BASED, and the MR's
 * local rights, which mean nothing for a window and are ignored (rdma-core's tests pass
 * LOCAL_WRITE; rxe and mlx5 accept it). */
#define UROCE_MW_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			       IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | \
			       IBV_ACCESS_OPTIONAL_RANGE)
/* The rules of a bind that do not depend on what the send queue executes before it
 * (IBA 10.6.7.1, 10.6.7.2; the table in mem.c): checked when the bind is posted and
 * again when it executes.  @qp_pd: the PD of the QP it is posted to.  0 or -errno. */
int uroce_mw_bind_check(const struct uroce_mw *mw, const struct ibv_pd *qp_pd,
			const struct ibv_mw_bind_info *info);
/* Execute a bind in send-queue order for QP @qpn of @qp_pd: the static rules again, then
 * the window's state (a bound type 2 window is not bound again, IBA 10.6.7.2.2); on success
 * the window is (un)bound and takes @new_key's low 8 bits.  0 or -errno. */
int uroce_mw_bind_exec(struct uroce_mw *mw, const struct ibv_pd *qp_pd, uint32_t qpn,
		       const struct ibv_mw_bind_info *info, uint32_t new_key);
/* Unbind (LOCAL_INV, Send with Invalidate, a zero-length type 1 bind, dealloc). */
void uroce_mw_unbind(struct uroce_mw *mw);

#endif
