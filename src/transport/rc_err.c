/* rc_err.c — the one place that maps an RC error to its NAK syndrome (AETH, IBA 9.3.5
 * table 44), its completion status (IBA 10.10.3 / 11.6.2) and the affiliated asynchronous
 * event of the QP that detects it (IBA 11.6.3.1).  Nothing else in the engine chooses a NAK
 * code or a failure status.
 */
#include "transport/rc.h"

const struct uroce_rc_err_info uroce_rc_err_table[UROCE_RC_ERR_NUM] = {
#define X(n, k, c, s, e) [UROCE_RC_ERR_##n] = { #n, k, c, s, (enum ibv_event_type)(e) },
	UROCE_RC_ERRORS(X)
#undef X
};

const char *uroce_rc_err_name(enum uroce_rc_err e)
{
	return (unsigned)e < UROCE_RC_ERR_NUM ? uroce_rc_err_table[e].name : "?";
}

/* IBA 9.7.5.2: what the requester makes of a NAK.  A sequence NAK is not an error (go back
 * and retransmit, IBA 9.7.5.2.1); the others end the WQE with the status of the row whose
 * NAK code it is.  Reserved codes are treated as invalid requests (IBA 9.3.5). */
enum uroce_rc_err uroce_rc_err_from_nak(unsigned code)
{
	static const enum uroce_rc_err by_code[] = {
		[UROCE_NAK_PSN_SEQ] = UROCE_RC_ERR_PSN_SEQ,
		[UROCE_NAK_INVALID_REQ] = UROCE_RC_ERR_INV_REQ,
		[UROCE_NAK_REMOTE_ACCESS] = UROCE_RC_ERR_REM_ACCESS,
		[UROCE_NAK_REMOTE_OP] = UROCE_RC_ERR_REM_OP,
		[UROCE_NAK_INVALID_RD_REQ] = UROCE_RC_ERR_INV_RD_REQ,
	};

	if (code < sizeof(by_code) / sizeof(by_code[0]))
		return by_code[code];
	return UROCE_RC_ERR_INV_REQ;
}

static const char *const drop_names[UROCE_RC_DROP_NUM] = {
#define X(n, d) [UROCE_RC_DROP_##n] = #n,
	UROCE_RC_DROPS(X)
#undef X
};

const char *uroce_rc_drop_name(enum uroce_rc_drop d)
{
	return (unsigned)d < UROCE_RC_DROP_NUM ? drop_names[d] : "?";
}

const char *const uroce_req_state_name[UROCE_REQ_NUM] = {
#define X(n) [UROCE_REQ_##n] = #n,
	UROCE_REQ_STATES(X)
#undef X
};
const char *const uroce_resp_state_name[UROCE_RESP_NUM] = {
#define X(n) [UROCE_RESP_##n] = #n,
	UROCE_RESP_STATES(X)
#undef X
};
const char *const uroce_comp_state_name[UROCE_COMP_NUM] = {
#define X(n) [UROCE_COMP_##n] = #n,
	UROCE_COMP_STATES(X)
#undef X
};

/* Record a fatal error of the QP: the QP enters Error once qp->lock is released
 * (uroce_rc_unlock_qp), flushing what is outstanding (IBA 10.3.1, 11.6.2). */
void uroce_rc_fail(struct uroce_rc *rc, enum uroce_rc_err err)
{
	if (rc->pending_err != UROCE_RC_ERR_NONE)
		return;
	rc->pending_err = err;
	rc->pending_event = uroce_rc_err_table[err].event;
}
