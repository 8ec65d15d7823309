/* rc.h — the Reliable Connected transport engine (IBA chapter 9), internal.
 *
 * Three explicit state machines per QP, one file each:
 *   rc_req.c   requester (IBA 9.7.4): WQEs of the send queue -> request packets
 *   rc_resp.c  responder (IBA 9.7.5): request packets -> placement, receive CQEs, ACK/NAK
 *   rc_comp.c  completer (IBA 9.7.6, 9.9): ACKs/NAKs/responses -> send CQEs, retries
 * rc_err.c holds the one table mapping each error to its NAK syndrome, completion status and
 * async event; timers.c every timer of a QP.  engine.c is the per-context glue (progress
 * thread, QP-type dispatch, netio).
 *
 * Ownership: struct uroce_rc is qp->transport; created by uroce_rc_attach() (at the first
 * transition to RTR), freed by uroce_rc_detach() (destroy / Reset).
 *
 * Locking: every uroce_rc_* entry point that takes a struct uroce_qp expects the caller to
 * hold qp->lock (and NOT sq.lock, unless stated).  The engine takes sq.lock, rq.lock and
 * cq locks inside, in the order of verbs.h.  A QP error found by the engine is recorded in
 * rc->pending_err and raised by uroce_rc_unlock_qp() after qp->lock is released, because
 * uroce_qp_error() takes qp->lock itself.
 *
 * Errors: 0 or -errno.
 */
#ifndef UROCE_TRANSPORT_RC_H
#define UROCE_TRANSPORT_RC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "verbs/verbs.h"
#include "wire/wire.h"

/* Requester limits (rxe's values, docs/transport.md). */
#define UROCE_RC_MAX_PKT_PER_ACK 64     /* AckReq at least every 64 packets (rxe RXE_MAX_PKT_PER_ACK) */
#define UROCE_RC_MAX_UNACKED_PSNS 128   /* send window in PSNs at MTU 4096 (rxe RXE_MAX_UNACKED_PSNS) */
/* The send window is bytes of payload, not packets: rxe's 128 PSNs at MTU 4096, 512 KiB.
 * At a smaller path MTU a window of 128 packets holds less (128 KiB at 1024, a veth's or
 * an Ethernet's of 1500) and a sender waits for ACKs it need not wait for: 4% of
 * ib_write_bw across a veth (bench/RESULTS.md, 2026-12-05).  The IBA bounds the packets a
 * requester has outstanding only by half of the 24-bit PSN space; in bytes the window stays
 * what the receive socket and the credits (engine.c) were sized for. */
#define UROCE_RC_WINDOW_BYTES (UROCE_RC_MAX_UNACKED_PSNS * 4096u)
#define UROCE_RC_MAX_WINDOW_PSNS 512u   /* at MTU 1024 and below */
#define UROCE_RC_MIN_TIMEOUT_NS 1000000ull /* local ACK timeout floor: 1 ms (rxe: 1 jiffy) */
#define UROCE_RC_READ_RETRY_PKTS 64    /* responses asked for per retried READ request */
#define UROCE_RC_MAX_PKT 4200           /* largest packet we build: MTU 4096 + headers + ICRC */
#define UROCE_RC_ACK_DEFER_NS 200000ull /* longest a deferred ACK waits (timers.c t_ack) */
#define UROCE_RC_ACK_DEFER_IF_REQ_NS 1000000ull /* ... deferred only if we sent a request this recently */
#define UROCE_RC_BUSY_RETRY_NS 50000ull /* a requester stopped by io.busy looks again after this */

/* ---- errors: the one table (rc_err.c) ---- */
#define UROCE_RC_ERRORS(X)                                                                   \
	/* name          NAK kind           NAK code                      WC status                  async event on this QP */ \
	X(NONE,          UROCE_AETH_ACK,    0,                            IBV_WC_SUCCESS,            0)                         \
	X(PSN_SEQ,       UROCE_AETH_NAK,    UROCE_NAK_PSN_SEQ,            IBV_WC_SUCCESS,            0)                         \
	X(RNR,           UROCE_AETH_RNR_NAK, 0,                           IBV_WC_SUCCESS,            0)                         \
	X(INV_REQ,       UROCE_AETH_NAK,    UROCE_NAK_INVALID_REQ,        IBV_WC_REM_INV_REQ_ERR,    IBV_EVENT_QP_REQ_ERR)      \
	X(REM_ACCESS,    UROCE_AETH_NAK,    UROCE_NAK_REMOTE_ACCESS,      IBV_WC_REM_ACCESS_ERR,     IBV_EVENT_QP_ACCESS_ERR)   \
	X(REM_OP,        UROCE_AETH_NAK,    UROCE_NAK_REMOTE_OP,          IBV_WC_REM_OP_ERR,         IBV_EVENT_QP_FATAL)        \
	X(INV_RD_REQ,    UROCE_AETH_NAK,    UROCE_NAK_INVALID_RD_REQ,     IBV_WC_REM_INV_RD_REQ_ERR, IBV_EVENT_QP_REQ_ERR)      \
	X(LOC_LEN,       UROCE_AETH_NAK,    UROCE_NAK_INVALID_REQ,        IBV_WC_LOC_LEN_ERR,        IBV_EVENT_QP_REQ_ERR)      \
	X(LOC_PROT,      UROCE_AETH_NAK,    UROCE_NAK_REMOTE_OP,          IBV_WC_LOC_PROT_ERR,       IBV_EVENT_QP_FATAL)        \
	X(LOC_QP_OP,     UROCE_AETH_NAK,    UROCE_NAK_REMOTE_OP,          IBV_WC_LOC_QP_OP_ERR,      IBV_EVENT_QP_FATAL)        \
	X(MW_BIND,       UROCE_AETH_ACK,    0,                            IBV_WC_MW_BIND_ERR,        IBV_EVENT_QP_FATAL)        \
	X(RETRY_EXC,     UROCE_AETH_ACK,    0,                            IBV_WC_RETRY_EXC_ERR,      IBV_EVENT_QP_FATAL)        \
	X(RNR_RETRY_EXC, UROCE_AETH_ACK,    0,                            IBV_WC_RNR_RETRY_EXC_ERR,  IBV_EVENT_QP_FATAL)        \
	/* found by the completer in a response (rc_comp.c; no NAK: a requester never NAKs) */ \
	X(BAD_RESP,      UROCE_AETH_ACK,    0,                            IBV_WC_BAD_RESP_ERR,       IBV_EVENT_QP_FATAL)        \
	X(RESP_LEN,      UROCE_AETH_ACK,    0,                            IBV_WC_LOC_LEN_ERR,        IBV_EVENT_QP_FATAL)

enum uroce_rc_err {
#define X(n, k, c, s, e) UROCE_RC_ERR_##n,
	UROCE_RC_ERRORS(X)
#undef X
	UROCE_RC_ERR_NUM
};

struct uroce_rc_err_info {
	const char *name;
	uint8_t nak_kind;               /* enum uroce_aeth_kind of the NAK the responder sends */
	uint8_t nak_code;               /* enum uroce_nak_code (NAK kind only) */
	enum ibv_wc_status status;      /* completion status of the WQE it ends */
	enum ibv_event_type event;      /* affiliated async event raised with the QP's error */
};
extern const struct uroce_rc_err_info uroce_rc_err_table[UROCE_RC_ERR_NUM];
/* The error a requester infers from a NAK code it received (IBA 9.7.5.2.x); PSN_SEQ for
 * a sequence NAK, INV_REQ for a reserved code (IBA 9.3.5: treated as an invalid request). */
enum uroce_rc_err uroce_rc_err_from_nak(unsigned code);
const char *uroce_rc_err_name(enum uroce_rc_err e);

/* ---- counters (`uroce stat`, docs/transport.md) ---- */
#define UROCE_RC_DROPS(X)                                                    \
	X(NOT_READY, "QP not in a state that receives")                      \
	X(PSN_OUT_OF_SEQ, "request after a gap, NAK already sent")           \
	X(DUP_UNKNOWN, "duplicate READ/atomic with no saved resource")       \
	X(RESP_PSN, "response or ACK outside the outstanding PSNs")          \
	X(RESP_OPCODE, "response of an unexpected kind for the WQE")         \
	X(RESP_GAP, "response after a missing one: dropped, go back asked")  \
	X(RESP_QP_ERR, "response for a QP in error")                         \
	X(WRONG_TRANSPORT, "opcode of another transport for this QP")        \
	X(TX_FAIL, "send failed (socket buffer full): left to retransmission") \
	X(QKEY, "UD: Q_Key differs from the QP's (IBA C9-44)")            \
	X(NO_RWQE, "UD: no receive WQE posted (no RNR for UD)")             \
	X(UD_RX_LEN, "UD: message longer than the receive WQE (LOC_LEN_ERR)") \
	X(UD_TOO_LONG, "UD: send longer than the port MTU, not sent (C10-93.1.1)") \
	X(UC_MSG_LOST, "UC: message abandoned (a packet of it lost or malformed)") \
	X(UC_RKEY, "UC: WRITE with a bad R_Key / range: message dropped") \
	X(BAD_PKEY, "BTH P_Key does not match the QP's P_Key table entry (IBA 9.6.1.1)")

enum uroce_rc_drop {
#define X(n, d) UROCE_RC_DROP_##n,
	UROCE_RC_DROPS(X)
#undef X
	UROCE_RC_DROP_NUM
};
const char *uroce_rc_drop_name(enum uroce_rc_drop d);

struct uroce_rc_stats {
	uint64_t tx_packets, rx_packets;
	uint64_t tx_bytes, rx_bytes;             /* payload bytes */
	uint64_t retransmissions;                /* packets sent again (go-back-N, RNR) */
	uint64_t timeouts;                       /* local ACK timer expiries */
	uint64_t seq_naks_rx, rnr_naks_rx;       /* received by our requester */
	uint64_t naks_tx[5];                     /* sent by our responder, by NAK code */
	uint64_t naks_rx[5];                     /* received by our requester, by NAK code */
	uint64_t rnr_naks_tx;
	uint64_t acks_tx, acks_rx;
	uint64_t dup_requests;                   /* duplicates our responder answered */
	uint64_t dup_responses;                  /* ACKs/responses our completer ignored */
	uint64_t atomic_replays;                 /* duplicate atomics answered from the cache */
	uint64_t read_replays;
	uint64_t drops[UROCE_RC_DROP_NUM];
	uint64_t credit_waits;                   /* the requester waited for budget (io.credit_take) */
	uint64_t tx_runs;                        /* MIDDLE packets built in runs (rc_req.c burst_middle) */
};

/* ---- the per-QP engine state ---- */

/* Side data of one send-queue slot (indexed like the SQ ring). */
struct uroce_rc_swqe {
	uint32_t first_psn, last_psn;    /* PSNs the WQE uses (responses of a READ included) */
	uint32_t len;                    /* message length */
	uint32_t read_done;              /* READ: response bytes placed */
	uint64_t atomic_orig;
	uint8_t started, sent, done;     /* started: PSNs assigned; sent: all request packets out; done: acked */
	uint8_t pieces;                  /* READ: asked again in pieces (rc_req.c): a LAST may end a piece */
	enum ibv_wc_status status;
};

/* Responder resource: a READ or atomic kept for duplicates (IBA 9.7.5.1.3 / C9-xx). */
struct uroce_rc_res {
	uint8_t kind;                    /* 0 free, 1 READ, 2 atomic */
	uint32_t first_psn, last_psn;
	uint64_t va;
	uint32_t rkey, len;
	uint64_t orig;                   /* atomic: the original value sent back */
	uint8_t opcode;
	uint64_t swap_add, compare;
};

/* A QP-independent packet sink: the engine hands finished packets (ICRC slot included,
 * not yet filled) to io.xmit.  engine.c binds it to netio; unit tests to a mock wire. */
struct uroce_rc_io {
	int (*xmit)(void *arg, struct uroce_qp *qp, uint8_t *pkt, size_t len);
	/* Optional (NULL: everything goes through xmit): the same, with the payload left where
	 * it is — @hdr (@hlen bytes of headers), @ndata (1 or 2) pieces of payload in registered
	 * memory, @tail (@tlen bytes: pad and the ICRC slot).  hdr and tail are copied before
	 * it returns; the payload is read no later than the end of the engine call that handed
	 * it over (engine.c sends its batch before it releases the QP's lock), so the data is
	 * copied once, by the kernel.  Returns like xmit. */
	int (*xmitv)(void *arg, struct uroce_qp *qp, const uint8_t *hdr, size_t hlen,
		     const struct iovec *data, unsigned ndata, const uint8_t *tail, size_t tlen);
	void (*timer)(void *arg, uint64_t deadline);   /* a timer was armed (may be NULL) */
	void (*release)(void *arg);                     /* at detach (may be NULL) */
	/* Optional: send what the engine has collected for this QP now, so that payload given
	 * to xmitv is read before the caller changes that memory (rc_resp.c reads_first). */
	void (*flush)(void *arg);
	/* Optional: the link holds packets it could not send yet (a shared-memory ring that
	 * stayed full, shm.c's spill): the requester starts nothing new, as for a closed
	 * window, and looks again at t_busy (timers.c).  Backpressure instead of loss: 1,000
	 * QPs' windows are 500 MiB against a 1 MiB ring. */
	bool (*busy)(void *arg);
	/* Optional: a budget of PSNs in flight that the QP shares with other QPs (engine.c:
	 * those of a context that reach one destination over UDP, so that 1,000 windows do not
	 * overflow the one receive socket behind it).  The requester reserves a run of PSNs
	 * ending with an AckReq before it sends the run's first packet (rc_req.c credits);
	 * credit_take returns false when the budget has none now: the QP waits, and the sink
	 * runs its requester again when credits come back.  credit_give returns what the
	 * completer freed.  Counted in bytes: PSNs times the path MTU (fixed while the QP
	 * holds credits, from RTS on).  Both under the QP's lock. */
	bool (*credit_take)(void *arg, uint32_t bytes);
	void (*credit_give)(void *arg, uint32_t bytes);
	void *arg;
	/* ACK policy (rc_resp.c acknowledge).  defer_acks: one ACK per receive batch (the
	 * engine sets rc->ack_batch while it delivers one).  defer_timed: also hold ACKs while
	 * the QP sends requests of its own, until its next request packets or t_ack
	 * (timers.c).  Both off for the unit tests' wire (exact packet sequences). */
	bool defer_acks;
	bool defer_timed;
};

enum uroce_req_state {
#define UROCE_REQ_STATES(X) X(IDLE) X(NEXT_WQE) X(LOCAL_OP) X(CHECK_WINDOW) X(BUILD) X(WAIT) X(DONE)
#define X(n) UROCE_REQ_##n,
	UROCE_REQ_STATES(X)
#undef X
	UROCE_REQ_NUM
};
enum uroce_resp_state {
#define UROCE_RESP_STATES(X) X(CHECK_PSN) X(DUPLICATE) X(CHECK_OP_SEQ) X(CHECK_RESOURCE) \
	X(CHECK_RKEY) X(EXECUTE) X(READ_REPLY) X(ATOMIC_REPLY) X(COMPLETE) X(ACKNOWLEDGE) \
	X(ERROR) X(DONE)
#define X(n) UROCE_RESP_##n,
	UROCE_RESP_STATES(X)
#undef X
	UROCE_RESP_NUM
};
enum uroce_comp_state {
#define UROCE_COMP_STATES(X) X(CHECK_PSN) X(CHECK_ACK) X(READ) X(ATOMIC) X(ACK_WQES) \
	X(IMPLIED_NAK) X(RETRY) X(RNR) X(ERROR) X(DONE)
#define X(n) UROCE_COMP_##n,
	UROCE_COMP_STATES(X)
#undef X
	UROCE_COMP_NUM
};
extern const char *const uroce_req_state_name[UROCE_REQ_NUM];
extern const char *const uroce_resp_state_name[UROCE_RESP_NUM];
extern const char *const uroce_comp_state_name[UROCE_COMP_NUM];

struct uroce_rc {
	struct uroce_qp *qp;
	struct uroce_rc_io io;
	uint32_t mtu;                    /* path MTU in bytes (set with uroce_rc_set_mtu) */
	uint32_t window;                 /* send window in PSNs for that MTU */
	struct uroce_rc_swqe *swqe;      /* qp->sq.size entries */

	/* requester */
	uint32_t req_idx;                /* SQ index of the WQE being sent (head <= idx <= tail) */
	uint32_t req_off;                /* bytes of that WQE already sent */
	uint32_t sent_idx;               /* one past the newest WQE ever started */
	uint32_t req_psn;                /* next PSN to send */
	uint32_t noack_pkts;             /* packets since the last AckReq */
	uint32_t rd_atomic;              /* READ/atomic WQEs sent and not completed */
	uint32_t high_psn;               /* one past the highest PSN ever sent (retransmission count) */
	uint32_t gb_psn;                 /* last PSN we went back to (one go-back per gap) */
	bool gb_valid;
	/* Credits of io.credit_take: cr_held PSNs of the shared budget are held for the PSNs
	 * before cr_psn not yet acknowledged (uroce_rc_credit_sync returns the rest). */
	uint32_t cr_psn;
	uint32_t cr_held;

	/* completer */
	uint32_t comp_psn;               /* oldest PSN not yet acknowledged */
	uint32_t retry_left, rnr_left;   /* 7 = forever (rxe); reloaded on progress */
	bool rnr_wait;                   /* requester paused by an RNR NAK */
	bool rd_cont;                    /* a READ response FIRST/MIDDLE was the last placed: */
	uint32_t rd_cont_psn;            /* ...MIDDLE or LAST must follow at this PSN, unless */
	uint64_t rd_cont_retx;           /* ...a request was sent again since (st.retransmissions) */

	/* timers (timers.c), CLOCK_MONOTONIC ns, 0 = off */
	uint64_t t_retrans, t_rnr;
	uint64_t t_ack;                  /* a deferred ACK leaves at the latest then */
	uint64_t t_busy;                 /* the requester looks at io.busy again then */
	uint64_t last_req;               /* when the requester last sent a packet (clock ns) */
	/* A post's requester run (stamp_late, set by the engine around it) leaves the clock
	 * read, the retransmission timer and last_req to uroce_rc_stamp, after the packets
	 * have left: between an application's post and its sendmsg they cost a clock read. */
	bool stamp_late, stamp_retrans, stamp_req;
	uint8_t backoff;                 /* local ACK timeouts in a row without progress (max 4) */

	/* responder */
	uint32_t resp_psn;               /* expected PSN */
	uint32_t msn;                    /* messages completed (24 bits) */
	bool nak_sent;                   /* one sequence NAK per gap (rxe sent_psn_nak) */
	bool resp_read_unsent;           /* READ responses handed to xmitv may not have left */
	bool ack_pending;                /* an ACK for ack_psn is held (ack_batch or io.defer_timed) */
	bool ack_batch;                  /* set by the engine while it delivers a receive batch:
					  * ACKs wait for the batch's end (one for several messages) */
	uint32_t ack_psn, ack_msn;
	uint8_t resp_opseq;              /* 0 none, 1 in a SEND, 2 in a WRITE */
	bool resp_has_rwqe;              /* a receive WQE is held for the SEND in progress */
	bool resp_rwqe_srq;
	uint32_t resp_rcv_off;           /* bytes placed into the receive WQE */
	struct uroce_wqe *resp_rwqe;     /* storage for the held receive WQE (max_sge SGEs) */
	uint8_t *resp_wr_ptr;            /* WRITE in progress: next byte of target memory */
	uint32_t resp_wr_left;           /* bytes still expected for the WRITE */
	uint32_t resp_wr_total;
	uint32_t resp_wr_rkey;           /* ... its R_Key and first VA (uroce_rc_write_recheck) */
	uint64_t resp_wr_va;
	uint32_t resp_wr_epoch;          /* uroce_mem_epoch() when resp_wr_ptr was resolved */
	struct uroce_rc_res *res;        /* responder resources, nres entries (power of two) */
	uint32_t nres, res_next;
	uint8_t *scratch;                /* packet build buffer, UROCE_RC_MAX_PKT */
	bool burst;                      /* MIDDLE packets in runs (rc_req.c burst_middle);
					  * UROCE_RC_BURST=0 turns it off */

	bool uc_drop_msg;                /* UC responder: dropping until the next FIRST/ONLY (uc.c) */
	enum uroce_rc_err pending_err;   /* raised after qp->lock is dropped */
	enum ibv_event_type pending_event;
	struct uroce_rc_stats st;
	/* The QP's slot in the context's counter block (`uroce stat`), or -1 for none: kept
	 * rather than looked up at each publish, since a QP past the block's PUB_SLOTS has
	 * none and the lookup of one that has none scans every slot (with 50,000 QPs that
	 * was 57% of the CPU of bench/qp_scale's WRITE phase). */
	int pub_slot;
};

/* The path MTU, and the send window that goes with it (UROCE_RC_WINDOW_BYTES). */
static inline void uroce_rc_set_mtu(struct uroce_rc *rc, uint32_t mtu)
{
	uint32_t w = mtu ? UROCE_RC_WINDOW_BYTES / mtu : UROCE_RC_MAX_UNACKED_PSNS;

	rc->mtu = mtu;
	rc->window = w < UROCE_RC_MAX_UNACKED_PSNS ? UROCE_RC_MAX_UNACKED_PSNS
		     : w > UROCE_RC_MAX_WINDOW_PSNS ? UROCE_RC_MAX_WINDOW_PSNS : w;
}

/* ---- engine entry points (caller holds qp->lock) ---- */

/* Attach / detach the engine to an RC QP.  attach: at Reset/Init -> RTR (after the
 * attributes are applied).  0, -ENOMEM. */
int uroce_rc_attach(struct uroce_qp *qp, const struct uroce_rc_io *io);
void uroce_rc_detach(struct uroce_qp *qp);
/* The QP moved to RTS: load the requester's PSN and retry counters. */
void uroce_rc_to_rts(struct uroce_qp *qp);
/* Run the requester (caller also holds sq.lock when @sq_locked). */
void uroce_rc_requester(struct uroce_qp *qp, bool sq_locked);
/* The requester's run with rc->stamp_late set: its packets have left (or are parked);
 * arm the retransmission timer and stamp last_req as the run would have, and clear
 * stamp_late.  Under the QP's lock, right after that run. */
void uroce_rc_stamp(struct uroce_rc *rc);
/* Return to io.credit_give the credits of PSNs acknowledged since (all of them with @all:
 * the QP stops sending, at error or detach).  Under the QP's lock. */
void uroce_rc_credit_sync(struct uroce_rc *rc, bool all);
/* One received, validated packet for this QP. */
void uroce_rc_input(struct uroce_qp *qp, const struct uroce_pkt *pkt);
/* Timers: run every timer of the QP due at @now; return the next deadline (0 = none). */
uint64_t uroce_rc_timers_run(struct uroce_qp *qp, uint64_t now);
uint64_t uroce_rc_next_deadline(const struct uroce_qp *qp);
/* IBA 9.6.1.1: does @pkt's BTH P_Key match the port's P_Key table entry at the QP's P_Key
 * index (IBA 10.9 matching rules)?  If not, counts the drop (BAD_PKEY) and returns false:
 * the caller drops the packet silently, request or response, RC, UC or UD alike. */
bool uroce_rc_pkey_ok(struct uroce_rc *rc, const struct uroce_pkt *pkt);
/* Release qp->lock and raise the error recorded while it was held, if any. */
void uroce_rc_unlock_qp(struct uroce_qp *qp);
/* Copy the QP's counters (any lock state; a torn read of one counter is acceptable). */
int uroce_rc_stats(struct uroce_qp *qp, struct uroce_rc_stats *out);

/* The same, for `uroce stat` and tests: takes qp->lock.  0, or -ENOENT (no RC engine). */
int uroce_transport_qp_stats(struct uroce_qp *qp, struct uroce_rc_stats *out);

/* ---- shared by the three engines (rc_*.c) ---- */
uint64_t uroce_rc_now(void);
extern uint64_t (*uroce_rc_clock)(void);     /* tests replace it with a virtual clock */
void uroce_rc_timer_retrans_arm(struct uroce_rc *rc);
/* The same with the clock the caller has just read (a clock read is a vDSO call, and the
 * post and receive paths of a ping-pong made four of them). */
void uroce_rc_timer_retrans_arm_at(struct uroce_rc *rc, uint64_t now);
void uroce_rc_timer_retrans_stop(struct uroce_rc *rc);
void uroce_rc_timer_rnr_arm(struct uroce_rc *rc, unsigned rnr_code);
void uroce_rc_timer_ack_arm(struct uroce_rc *rc);
void uroce_rc_timer_ack_arm_at(struct uroce_rc *rc, uint64_t now);
void uroce_rc_timer_busy_arm(struct uroce_rc *rc);
/* rc_resp.c: send the deferred ACK now, if there is one. */
void uroce_rc_flush_ack(struct uroce_rc *rc);
int uroce_rc_xmit(struct uroce_rc *rc, uint8_t *pkt, size_t len);
/* rc_req.c: send the packet built in rc->scratch by uroce_rc_build(rc, p, @n, &pl) without
 * copying its @n payload bytes into it: they are @data (@ndata pieces, at most
 * UROCE_RC_XMITV_MAX).  Counts like uroce_rc_xmit.  -EOPNOTSUPP (nothing sent, nothing
 * counted) when the sink has no xmitv: the caller copies the payload and uses uroce_rc_xmit. */
#define UROCE_RC_XMITV_MAX 2
int uroce_rc_xmit_pieces(struct uroce_rc *rc, size_t len, uint32_t n, const struct iovec *data,
			 unsigned ndata);
/* Set the BTH fields every packet of the QP carries: the default P_Key, TVer 0 (IBA
 * 9.2.5), the destination QP.  uroce_rc_build does it; a packet built without it (an
 * ACK, a burst's template) calls it. */
void uroce_rc_bth_fill(const struct uroce_rc *rc, struct uroce_bth *b);
/* Build a packet from @p's headers plus @payload_len bytes gathered by the caller at
 * the returned payload pointer; returns the packet length, the payload pointer via @pl. */
size_t uroce_rc_build(struct uroce_rc *rc, struct uroce_pkt *p, uint32_t payload_len, uint8_t **pl);
void uroce_rc_fail(struct uroce_rc *rc, enum uroce_rc_err err);
/* Memory: resolve [addr, addr+len) of a local SGE / remote key to a pointer, or NULL. */
uint8_t *uroce_rc_local_ptr(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t off,
			    uint32_t len, unsigned need_access);
enum uroce_rc_err uroce_rc_remote_ptr(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
				      unsigned need_access, uint8_t **out);
/* A WRITE's target (RC and UC responders): _start resolves the R_Key at the first packet;
 * _recheck, at each later packet, resolves it again for the rest of the message if MRs or
 * windows changed in between (uroce_mem_epoch), so a reregistration or deregistration
 * takes effect from the next packet on and nothing lands in memory the key no longer
 * names. */
enum uroce_rc_err uroce_rc_write_start(struct uroce_qp *qp, struct uroce_rc *rc, uint32_t rkey, uint64_t va,
				       uint32_t len);
enum uroce_rc_err uroce_rc_write_recheck(struct uroce_qp *qp, struct uroce_rc *rc);
/* [off, off + len) of an SGE list as pointers into registered memory (checked for
 * @need_access): the number of pieces, 0 when more than @max are needed, or -1 with *err
 * set (LOC_LEN past the list, LOC_PROT for a bad L_Key or range). */
int uroce_rc_sge_iov(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		     uint32_t len, unsigned need_access, struct iovec *iov, unsigned max,
		     enum uroce_rc_err *err);
/* Copy between an SGE list and a flat buffer, starting @off bytes into the list.
 * 0 or the error (LOC_PROT / LOC_LEN). */
enum uroce_rc_err uroce_rc_sge_copy(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t nsge,
				    uint32_t off, uint8_t *buf, uint32_t len, bool to_sge);
uint32_t uroce_rc_wqe_len(const struct uroce_qp *qp, const struct uroce_wqe *w);
const uint8_t *uroce_rc_wqe_inline(const struct uroce_qp *qp, const struct uroce_wqe *w);

/* The three machines (rc_req.c, rc_resp.c, rc_comp.c); caller holds qp->lock and sq.lock. */
void uroce_rc_responder(struct uroce_qp *qp, const struct uroce_pkt *pkt);
void uroce_rc_completer(struct uroce_qp *qp, const struct uroce_pkt *pkt);
bool uroce_rc_is_rd_atomic(uint32_t wr_opcode);

/* Completer/responder helpers used across files. */
void uroce_rc_complete_ready(struct uroce_qp *qp);
/* The oldest outstanding WQE ends with @e's status (in order), then the QP fails. */
void uroce_rc_fail_wqe(struct uroce_rc *rc, enum uroce_rc_err e);
void uroce_rc_go_back(struct uroce_rc *rc, uint32_t psn);
void uroce_rc_send_ack(struct uroce_rc *rc, uint8_t syndrome, uint32_t psn);

static inline struct uroce_rc *uroce_rc_of(const struct uroce_qp *qp)
{
	return (struct uroce_rc *)qp->transport;
}

/* The oldest receive WQE of @qp's SRQ (core/queue.h: the SRQ limit event included). */
static inline int uroce_rc_srq_pop(struct uroce_qp *qp, struct uroce_wqe *out)
{
	struct uroce_srq *srq = uroce_srq_from_ib(qp->qpx.qp_base.srq);

	return uroce_wq_pop_srq(&srq->rq, &srq->srq_limit, out, srq->uctx, &srq->srq);
}

/* rc_resp.c: take the receive WQE for the current message (RC and UC responders). */
bool uroce_rc_take_rwqe(struct uroce_rc *rc);
/* rc_resp.c: complete the held receive WQE of the message @pkt ends (RC and UC: the
 * completion's opcode, length, immediate and invalidated R_Key come from the packet). */
void uroce_rc_complete_rwqe(struct uroce_rc *rc, const struct uroce_pkt *pkt, enum ibv_wc_status st);

#endif
