/* cm_fail.c — the one table of the CM's failures (cm.h UROCE_CM_FAILURES) and the
 * name tables of states and drop reasons. */
#include <errno.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_priv.h"

#define EVT(e) EVT_##e
#define EVT_NONE UROCE_CM_EV_NONE
#define EVT_REJECTED RDMA_CM_EVENT_REJECTED
#define EVT_UNREACHABLE RDMA_CM_EVENT_UNREACHABLE
#define EVT_DISCONNECTED RDMA_CM_EVENT_DISCONNECTED
#define EVT_ADDR_ERROR RDMA_CM_EVENT_ADDR_ERROR
#define PST(s) PST_##s
#define PST_REASON UROCE_CM_ST_REASON
#define PST_0 0

static const struct uroce_cm_failure failures[UROCE_CM_NFAILS] = {
#define X(n, w, r, le, ls, pe, ps, d) \
	[UROCE_CM_FAIL_##n] = { #n, UROCE_CM_WIRE_##w, r, EVT(le), ls, EVT(pe), PST(ps), d },
	UROCE_CM_FAILURES(X)
#undef X
};

const struct uroce_cm_failure *uroce_cm_fail_info(enum uroce_cm_fail f)
{
	return (unsigned)f < UROCE_CM_NFAILS ? &failures[f] : NULL;
}

static const char *const drop_names[UROCE_CM_NDROPS] = {
#define X(n, d) [UROCE_CM_DROP_##n] = #n,
	UROCE_CM_DROPS(X)
#undef X
};
static const char *const drop_descs[UROCE_CM_NDROPS] = {
#define X(n, d) [UROCE_CM_DROP_##n] = d,
	UROCE_CM_DROPS(X)
#undef X
};

const char *uroce_cm_drop_name(unsigned d)
{
	return d < UROCE_CM_NDROPS ? drop_names[d] : "UNKNOWN";
}

const char *uroce_cm_drop_desc(unsigned d)
{
	return d < UROCE_CM_NDROPS ? drop_descs[d] : "unknown reason";
}

const char *uroce_cm_state_name(unsigned s)
{
	static const char *const n[UROCE_CM_NSTATES] = {
		"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
		"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING",
	};

	return s < UROCE_CM_NSTATES ? n[s] : "UNKNOWN";
}

const char *cm_ib_state_name(unsigned s)
{
	static const char *const n[IB_NSTATES] = {
		"IDLE", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD", "REP_SENT",
		"REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT",
		"DREQ_RCVD", "TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD",
	};

	return s < IB_NSTATES ? n[s] : "UNKNOWN";
}
