/* qp_state.c — the IBTA QP state machine's attribute rules.
 *
 * IBA 10.3.1 (figure "QP/EE state diagram") lists the legal transitions; the
 * tables of IBA 11.2.4.2 (Modify QP) list, for each transition and each service
 * type, the attributes that MUST be supplied and those that MAY be.  A Modify QP
 * that omits a required attribute or carries one outside both sets is rejected
 * with EINVAL.
 *
 * Rows: from-state; columns: to-state.  Transitions to Reset (from every state)
 * and to Error (from every state but Reset) take no attribute.  SQE → RTS exists only for
 * UD and UC (an RC send-queue error goes straight to Error).
 */
#include "verbs/verbs.h"

enum { T_RC, T_UC, T_UD, T_NUM };

struct transition {
	bool valid;
	int req[T_NUM];
	int opt[T_NUM];
};

#define N_STATES (IBV_QPS_ERR + 1)

/* Attribute groups that recur in the tables. */
#define PRIMARY_PATH_OPT (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE)

static const struct transition table[N_STATES][N_STATES] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_INIT] = { true,
			.req = { [T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
				 [T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
				 [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY } },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { true,
			.opt = { [T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
				 [T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
				 [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY } },
		[IBV_QPS_RTR] = { true,
			.req = { [T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
				 [T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
				 [T_UD] = 0 },
			.opt = { [T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
				 [T_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
				 [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY } },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { true,
			.req = { [T_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
				 [T_UC] = IBV_QP_SQ_PSN,
				 [T_UD] = IBV_QP_SQ_PSN },
			.opt = { [T_RC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT | IBV_QP_MIN_RNR_TIMER,
				 [T_UC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT,
				 [T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY } },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { true,
			.opt = { [T_RC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT | IBV_QP_MIN_RNR_TIMER,
				 [T_UC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT,
				 [T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY } },
		[IBV_QPS_SQD] = { true,
			.opt = { [T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				 [T_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				 [T_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY } },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = { true,
			.opt = { [T_RC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT | IBV_QP_MIN_RNR_TIMER,
				 [T_UC] = IBV_QP_CUR_STATE | PRIMARY_PATH_OPT,
				 [T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY } },
		[IBV_QPS_SQD] = { true,
			.opt = { [T_RC] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
					  IBV_QP_MAX_DEST_RD_ATOMIC | PRIMARY_PATH_OPT |
					  IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER,
				 [T_UC] = IBV_QP_AV | PRIMARY_PATH_OPT | IBV_QP_PKEY_INDEX,
				 [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY } },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { true,
			.opt = { [T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS,
				 [T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY } },
	},
};

static int type_index(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return T_RC;
	case IBV_QPT_UC: return T_UC;
	case IBV_QPT_UD: return T_UD;
	default: return -1;
	}
}

bool uroce_qp_transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next,
			    enum ibv_qp_type type, int mask)
{
	int t = type_index(type);
	const struct transition *tr;

	if ((unsigned)cur >= N_STATES || (unsigned)next >= N_STATES || t < 0)
		return false;
	/* IBV_QP_CUR_STATE only means something where the QP may have moved on
	 * by itself (RTR, RTS, SQD, SQE: IBA 11.2.4.2). */
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS &&
	    cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
		return false;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		/* Any state → Reset and any state but Reset → Error, without
		 * attributes.  Reset → Error is refused as the Linux verbs core
		 * does: a Reset QP has nothing to flush and no port yet. */
		if (cur == IBV_QPS_RESET && next == IBV_QPS_ERR)
			return false;
		return !(mask & ~IBV_QP_STATE);
	}
	tr = &table[cur][next];
	if (!tr->valid)
		return false;
	if ((mask & tr->req[t]) != tr->req[t])
		return false;
	if (mask & ~(tr->req[t] | tr->opt[t] | IBV_QP_STATE))
		return false;
	return true;
}

const char *uroce_qp_state_name(enum ibv_qp_state s)
{
	static const char *const names[N_STATES] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
		[IBV_QPS_RTS] = "RTS", [IBV_QPS_SQD] = "SQD", [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned)s < N_STATES ? names[s] : "?";
}
