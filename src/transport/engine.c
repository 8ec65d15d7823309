/* engine.c — the per-context transport engine: the progress thread, QP-type dispatch of
 * received packets, the binding of each QP's engine to netio, and the hooks the verbs
 * layer calls (verbs.h "transport hooks").
 *
 * Progress thread phases (one iteration; docs/transport.md "Threads and progress"):
 *   1. epoll_wait on { receive socket, timerfd, eventfd doorbell } -- without the socket,
 *      and with a timeout, while an application thread holds the poll lease (wait_events)
 *   2. drain the receive socket (uroce_netio_poll, budget 64 per call, until empty);
 *      skipped under the lease
 *   3. run every QP's due timers (timers.c)
 *   4. arm the timerfd for the earliest deadline of any QP (outside the lease)
 * Application threads also make progress: post_send runs the requester inline, and
 * ibv_poll_cq on an empty CQ drains the socket and, under the lease, runs due timers
 * (uroce_transport_poll).
 *
 * Locking: the receive path holds ctx->lock (QP lookup; keeps the QP alive against
 * ibv_destroy_qp, which unlinks it under ctx->lock first), then qp->lock, and for RC
 * sq.lock, across consecutive packets of one QP (struct rx_batch).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "transport/copy.h"
#include "transport/netio.h"
#include "transport/rc.h"
#include "transport/shm.h"
#include "transport/rc_qp.h"
#include "transport/mcast.h"
#include "transport/uc.h"
#include "transport/ud.h"

#if !UROCE_HAVE_NETIO
/* netio.c is not in the tree yet: link without it; the engine then refuses to start
 * (ENOSYS) and sends stay EOPNOTSUPP, as before the transport existed. */
#pragma weak uroce_netio_open
#pragma weak uroce_netio_close
#pragma weak uroce_netio_fd
#pragma weak uroce_netio_tx_open
#pragma weak uroce_netio_tx_close
#pragma weak uroce_netio_send
#pragma weak uroce_netio_poll
#pragma weak uroce_netio_count_misrouted
#pragma weak uroce_netio_watch
#pragma weak uroce_netio_is_event
#endif

#define PARK_MAX 64                      /* QPs flush_parked visits by number (Autocork) */

struct uroce_engine {
	struct uroce_engine *next_eng;   /* engines list (flush_at_exit) */
	struct uroce_context *ctx;
	struct uroce_netio *nio;
	struct uroce_shm *shm;           /* the same-host link (shm.h); NULL: UDP only */
	int epfd, tfd, efd;
	pthread_t thread;
	atomic_bool stop;
	_Atomic uint64_t armed;          /* deadline the timerfd is set to, 0 = none */
	uint64_t pub_due;                /* next counters publish (rc_qp.h); progress thread only */
	/* The poll lease (see POLL_LEASE_US): when an application thread last busy-polled
	 * (ns, 0 = it stopped), and whether the progress thread took the socket out of its
	 * epoll set because of it (written by the progress thread only). */
	_Atomic uint64_t poll_stamp;
	atomic_bool sock_off;
	uint64_t lease_ns;
	/* Progress thread only: how long it sleeps before it looks at the lease again
	 * (LEASE_CHECK_MAX_NS), and that interval's ceiling. */
	uint64_t lease_check_ns, lease_check_max;
	_Atomic uint64_t lease_looks;    /* wake-ups that found the lease held (ENGINE_STATS) */
	_Atomic uint64_t lease_backoffs; /* leases that ran out with datagrams waiting (ditto) */
	/* Progress thread only: no lease before this time (a lease that ran out left a
	 * datagram waiting, see LEASE_BACKOFF_NS). */
	uint64_t lease_off_until;
	uint64_t lease_backoff_ns;       /* the last back-off (LEASE_BACKOFF_MIN_NS) */
	/* The earliest deadline of any QP as far as known (0 = none): run_timers stores what it
	 * found, eng_timer lowers it for a deadline set since.  The progress thread sleeps
	 * until it under the lease, and a busy-polling application thread runs the timers
	 * itself once it has passed (uroce_transport_poll). */
	_Atomic uint64_t due_hint;
	/* Datagrams drained by the progress thread and by application threads (ibv_poll_cq):
	 * with UROCE_ENGINE_STATS=1, printed to stderr when the context closes, so a test can
	 * see who did the receiving (tests/transport/rc_lease.c). */
	_Atomic uint64_t rx_progress, rx_app;
	/* Autocork (AUTOCORK_NS): a QP's packets may be parked in its cork after a post
	 * (engine_qp.parked); set when one is, cleared by flush_parked before it looks.
	 * park_qpn lists the QPs parked since (under park_lock, a leaf lock), so that
	 * flush_parked visits those and not every QP of the context; more than PARK_MAX
	 * of them, and it walks them all. */
	atomic_bool any_parked;
	pthread_mutex_t park_lock;
	unsigned npark;
	bool park_overflow;
	uint32_t park_qpn[PARK_MAX];
	_Atomic uint64_t park_walks;     /* flushes that walked every QP (UROCE_ENGINE_STATS) */
	_Atomic uint64_t timer_walks;    /* run_timers walks of every QP (UROCE_ENGINE_STATS) */
	_Atomic uint64_t timer_deferred; /* walks that left due timers for the next (ditto) */
	uint32_t timer_resume;           /* QPN the next walk starts at (0: the list's head);
					  * under ctx->lock */
	unsigned timer_fire_max;         /* TIMER_FIRE_MAX, UROCE_TIMER_FIRE_MAX; 0 = no limit */
	uint64_t autocork_ns;            /* 0 = off (UROCE_AUTOCORK=0) */
	/* In-flight budgets, one per UDP destination (see "Credits" below): a list that only
	 * grows while the context lives (pushed under dest_lock, read without it). */
	struct eng_dest *_Atomic dests;
	pthread_mutex_t dest_lock;
	int64_t dest_budget;             /* bytes per destination; 0 = no budgets */
	atomic_bool cr_kick;             /* credits came back while QPs wait for them */
	_Atomic uint64_t cr_waits;       /* requests refused (UROCE_ENGINE_STATS) */
};

/* `uroce stat` reads QP counters from shared memory: publish them this often while they
 * move (rc_qp.h uroce_rc_publish). */
#define ENG_PUBLISH_NS 200000000ull
/* At most this many QPs have their due timers run per walk (run_timers).  What a timer
 * does is send: a t_busy retry or a go-back resends up to a window (128 PSNs, 512 KiB at
 * MTU 4096), and the walk holds ctx->lock, which every receive batch needs too
 * (flush_batch_acks).  With 1,000 QPs due at once (their t_busy, after a full shm ring
 * drained) one walk sent for up to 255 ms while the ACKs that would have closed those
 * windows waited, unread, in the receive ring; the QPs late in the walk passed their
 * 67 ms local ACK timeout meanwhile and resent whole windows that had arrived (bench/
 * RESULTS.md, "1,000 QPs over shm").  A QP past the budget stays due: the walk ends with
 * its deadline at now, the thread drains what has arrived and walks again from that QP
 * on.  UROCE_TIMER_FIRE_MAX=N overrides it, 0 = no limit (the walk as it was). */
#define TIMER_FIRE_MAX 32

/* A batch holds the packets of one 64 KiB message at the QP's path MTU, at least
 * ENG_BATCH_MIN and at most ENG_BATCH (batch_max).  A 64 KiB WRITE at path MTU 1024 (a
 * 1500-byte netdev) is 64 packets, and netio sends them in two GSO runs when it has them
 * all; a batch of 32 had half a message at a time, and three sendmsg per message.  At
 * MTU 4096 it stays 32, as before: batches of 64 there (four messages before the first
 * sendmsg) measured 24.5-29.6 Gbit/s against 30.8-32.2 for 32 on lo, alternated, and
 * ib_send_bw 64 B a few percent less (bench/RESULTS.md, 2026-12-03). */
#define ENG_BATCH 64
#define ENG_BATCH_MIN 32
#define AUTOCORK_NS 20000ull             /* longest a post's packets are parked (Autocork) */
#define AUTOCORK_PKTS 16                 /* a post that collects this many sends at once */
#define ENG_HDR_MAX 128                  /* headers of a piecewise packet, at most */
#define ENG_TAIL_MAX 8                   /* its pad + ICRC slot, at most */
/* A batch slot: ENG_TAIL_MAX bytes for the previous packet's tail, then this packet (whole,
 * or the headers of a piecewise one).  So a piecewise packet's tail ends where the next
 * slot's headers begin, and netio hands the two to the kernel as one piece. */
#define ENG_SLOT (ENG_TAIL_MAX + UROCE_RC_MAX_PKT)

struct engine_qp {                       /* io.arg of an RC QP bound to netio */
	struct uroce_engine *eng;
	struct uroce_netio_tx *tx;
	/* RC/UC: the shared-memory link to the peer QP (shm.h, a reference), NULL when it is
	 * reached over UDP (UD: always NULL; each WQE finds its link, eng_ud_xmit).  src is
	 * what the link tells the receiver in place of the IP and UDP headers. */
	struct uroce_shm_link *link;
	struct uroce_shm_src src;
	struct uroce_netaddr dst;
	uint8_t sgid[16];                /* UD: the source GID tx was opened for (per AH) */
	/* Send batching (cork/uncork): the packets built while the engine runs a QP's
	 * requester, input or timers are collected and leave in one uroce_netio_send, so that
	 * netio sends runs of equal-size packets in one sendmsg with UDP_SEGMENT (GSO) instead
	 * of one sendmsg per packet.  A packet given whole (xmit) is copied into its slot; one
	 * given in pieces (xmitv) keeps only its headers and tail there and points at the
	 * payload in registered memory, which stays valid until uncork: uncork runs before
	 * the QP's lock is released -- or, for a post's packets parked by autocork, until
	 * they leave, which is before their WQE can complete (the application may not reuse
	 * or deregister the buffer before that).  Used under the QP's lock only. */
	bool corked;
	bool parked;                     /* nbatch packets left unsent on purpose (autocork) */
	bool park_listed;                /* in eng->park_qpn, not visited yet by flush_parked */
	uint64_t park_due;               /* ... until then at the latest */
	uint32_t post_resp_psn;          /* the responder's expected PSN, as last seen by a post */
	uint64_t resp_moved;             /* when a post last saw it move (clock ns) */
	unsigned nbatch;
	unsigned nmax;                   /* batch_max() of the QP, set at each cork */
	/* Allocated on first cork, in one block: pk (ENG_BATCH descriptors), then slots
	 * (ENG_BATCH + 1 of ENG_SLOT).  Pages of it that a QP never fills are never touched,
	 * so a QP that sends one packet at a time costs a page or two, not 270 KiB. */
	uint8_t *slots;
	struct uroce_txpkt *pk;
	/* Credits (RC over UDP): the destination's budget, whether the QP is in its queue of
	 * waiters, and bytes granted to it by credit_kick for its next reservation. */
	struct eng_dest *dest;
	bool cr_waiting;
	uint32_t cr_granted;
	uint32_t qpn;                    /* the QP's number (the waiters' queue holds numbers) */
};

/* Where the slots begin in the block: after the descriptors, a multiple of 64 bytes. */
#define ENG_PK_BYTES ((ENG_BATCH * sizeof(struct uroce_txpkt) + 63) & ~(size_t)63)

/* Where batch slot @k's packet (or headers) go; slot ENG_BATCH only holds a tail. */
static uint8_t *slot_at(struct engine_qp *eq, unsigned k)
{
	return eq->slots + (size_t)k * ENG_SLOT + ENG_TAIL_MAX;
}

static bool env_off(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"));
}

/* Thread-locals of a busy-polled path: initial-exec, so that each access is an offset from
 * the thread pointer instead of a __tls_get_addr call (3% of a busy poller's user time).
 * libibverbs is loaded at start-up, or dlopen'ed with a few bytes of TLS, which the
 * static TLS surplus covers. */
#define POLL_TLS __thread __attribute__((tls_model("initial-exec")))

/* Set on the progress thread: it re-arms the timerfd itself after each drain (run_timers),
 * so a timer armed there needs no doorbell. */
static POLL_TLS bool on_progress_thread;

static void doorbell(struct uroce_engine *eng)
{
	uint64_t one = 1;

	if (write(eng->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, the thread will wake. */
	}
}

/* The packets leave on the QP's link: the shared-memory ring to a same-host peer, or its
 * UDP socket. */
static int eq_send(struct engine_qp *eq, struct uroce_txpkt *pk, unsigned n)
{
	if (eq->link)
		return uroce_shm_send(eq->link, &eq->src, &eq->dst, pk, n);
	return uroce_netio_send(eq->tx, &eq->dst, pk, n);
}

static void eng_flush(struct engine_qp *eq)
{
	/* A short count or an error is a loss like any other: the requester's retransmission
	 * covers it, and netio counts it (tx_short / tx_errors), as the shm link does
	 * (shm_tx_full). */
	if (eq->nbatch)
		eq_send(eq, eq->pk, eq->nbatch);
	eq->nbatch = 0;
	eq->parked = false;
}

static int eng_xmit(void *arg, struct uroce_qp *qp, uint8_t *pkt, size_t len);

/* Collect @qp's outgoing packets until uncork() (QPs bound to eng_xmit: RC and UC; NULL:
 * not batched, packets leave one by one).  Caller holds the QP's lock. */
/* The engine's state of an RC or UC QP bound to eng_xmit, or NULL. */
static struct engine_qp *engine_qp_of(const struct uroce_rc *rc)
{
	return rc && rc->io.xmit == eng_xmit ? rc->io.arg : NULL;
}

/* Drop packets autocork parked (uroce_transport_post) if @qp has left RTS/SQD since: a QP
 * in Error sends nothing (IBA 10.3.1); its WQEs complete flushed.  True if none is left. */
static bool park_dropped(const struct uroce_qp *qp, struct engine_qp *eq)
{
	if (!eq->parked)
		return true;
	if (qp->attr.qp_state == IBV_QPS_RTS || qp->attr.qp_state == IBV_QPS_SQD)
		return false;
	eq->nbatch = 0;
	eq->parked = false;
	return true;
}

static unsigned batch_max(const struct uroce_rc *rc)
{
	unsigned n = rc->mtu ? 65536u / rc->mtu : ENG_BATCH;

	return n < ENG_BATCH_MIN ? ENG_BATCH_MIN : n > ENG_BATCH ? ENG_BATCH : n;
}

static struct engine_qp *cork(struct uroce_qp *qp)
{
	struct engine_qp *eq = engine_qp_of(uroce_rc_of(qp));

	if (!eq || eq->corked || !eq->tx)
		return NULL;             /* not batched, or already collecting: the outer uncork sends */
	/* Packets parked by autocork stay first in the batch: this uncork sends them. */
	park_dropped(qp, eq);
	if (!eq->pk) {
		eq->pk = malloc(ENG_PK_BYTES + (size_t)(ENG_BATCH + 1) * ENG_SLOT);
		eq->slots = eq->pk ? (uint8_t *)eq->pk + ENG_PK_BYTES : NULL;
	}
	if (!eq->slots)
		return NULL;
	eq->nmax = batch_max(uroce_rc_of(qp));
	eq->corked = true;
	return eq;
}

static void uncork(struct engine_qp *eq)
{
	if (!eq)
		return;
	eng_flush(eq);
	eq->corked = false;
}

/* One receive batch (poll_batch): consecutive packets for the same RC QP are delivered
 * under one taking of ctx->lock, the QP's lock and its SQ lock, and under one cork,
 * instead of three lock/unlock pairs and a QP lookup per packet (a 64 KiB WRITE is 16
 * packets, mostly read in one recvmmsg).  The locks are kept from one packet to the next
 * only while netio delivers (its rx_lock held, so one poller at a time) and are released
 * when a packet for another QP comes, when the QP has an error or SQ-drain event to raise
 * (uroce_rc_unlock_qp raises those), and at the end of the batch.  Per poller: on the
 * caller's stack. */
#define RX_BUDGET 64                     /* packets per link per receive batch */
#define RX_ACKS_MAX (2 * RX_BUDGET)      /* one per packet at most: UDP + shm */

struct rx_batch {
	struct uroce_engine *eng;
	struct uroce_qp *held;           /* RC QP whose ctx->lock, lock and sq.lock are held */
	struct engine_qp *held_eq;       /* its cork (NULL: not batching its sends) */
	/* The QPs that hold an ACK until the batch ends (rc->ack_batch set here), by number:
	 * flush_batch_acks visits these only, not every QP of the context (with 1,000 RC QPs
	 * the walk was a third of a receiver's CPU).  By number, since a QP may be destroyed
	 * before the batch ends; a number looked up again finds it or nothing. */
	uint32_t acks[RX_ACKS_MAX];
	unsigned nacks;
	bool acks_overflow;              /* more than RX_ACKS_MAX: walk every QP instead */
};

static void rx_release(struct rx_batch *b)
{
	struct uroce_qp *qp = b->held;

	if (!qp)
		return;
	b->held = NULL;
	uncork(b->held_eq);
	pthread_mutex_unlock(&qp->sq.lock);
	uroce_rc_unlock_qp(qp);
	pthread_mutex_unlock(&b->eng->ctx->lock);
}

static void flush_batch_ack(struct uroce_qp *qp, struct uroce_rc *rc);

/* The end of a receive batch's deliveries from one link.  When the QP still held is the
 * only one whose ACK waits for the batch's end (one stream: the common case), that ACK is
 * settled here, under the locks the batch holds and inside its cork, instead of by
 * flush_batch_acks taking ctx->lock and the QP's lock again: two lock pairs of a
 * ping-pong's nine a hop. */
static void rx_end(struct rx_batch *b)
{
	struct uroce_qp *qp = b->held;

	if (qp && b->nacks == 1 && !b->acks_overflow && b->acks[0] == qp->qpx.qp_base.qp_num) {
		flush_batch_ack(qp, uroce_rc_of(qp));
		b->nacks = 0;
	}
	rx_release(b);
}

/* RC input under the held locks; releases them when uroce_rc_unlock_qp has work to do. */
static void rx_rc(struct rx_batch *b, struct uroce_qp *qp, struct uroce_rxpkt *p)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	/* Each QP is listed once: a QP whose flag is already set is listed by this batch or by
	 * another poller's, which flushes it when its batch ends. */
	if (rc->io.defer_acks && !rc->ack_batch) {
		rc->ack_batch = true;
		if (b->nacks < RX_ACKS_MAX)
			b->acks[b->nacks++] = qp->qpx.qp_base.qp_num;
		else
			b->acks_overflow = true;
	}
	uroce_rc_input(qp, &p->pkt);
	if (rc->pending_err != UROCE_RC_ERR_NONE || qp->attr.sq_draining)
		rx_release(b);
}

static int rx_one(void *arg, struct uroce_rxpkt *p)
{
	struct rx_batch *b = arg;
	struct uroce_engine *eng = b->eng;
	struct uroce_context *ctx = eng->ctx;
	struct uroce_qp *found = NULL;

	if (b->held) {
		if (p->pkt.bth.dqpn == b->held->qpx.qp_base.qp_num) {
			rx_rc(b, b->held, p);
			return 0;
		}
		rx_release(b);
	}
	pthread_mutex_lock(&ctx->lock);
	if (p->pkt.bth.dqpn == UROCE_MCAST_QPN) {
		/* IBA 10.5 / mcast.h: a multicast datagram goes to every attached UD QP. */
		bool any = false;

		for (struct uroce_list *n = ctx->qps.next; n != &ctx->qps; n = n->next) {
			struct uroce_qp *qp = container_of(n, struct uroce_qp, ctx_node);

			if (qp->qpx.qp_base.qp_type != IBV_QPT_UD || !qp->transport ||
			    !uroce_mcast_member(qp, p->dgid))
				continue;
			any = true;
			pthread_mutex_lock(&qp->lock);
			uroce_ud_input(qp, p);
			uroce_rc_unlock_qp(qp);
		}
		pthread_mutex_unlock(&ctx->lock);
		if (!any)
			uroce_netio_count_misrouted(eng->nio);
		return 0;
	}
	/* O(1) whatever the number of QPs (core/qptable.h; a list walk per packet before). */
	found = uroce_qptable_lookup(&ctx->qp_by_num, p->pkt.bth.dqpn);
	if (!found || !found->transport) {
		pthread_mutex_unlock(&ctx->lock);
		uroce_netio_count_misrouted(eng->nio);
		return 0;
	}
	pthread_mutex_lock(&found->lock);
	/* QP-type dispatch: each service type has its own input (rc_resp/rc_comp, uc.c, ud.c). */
	switch (found->qpx.qp_base.qp_type) {
	case IBV_QPT_RC:
		/* ACKs, READ responses, and the requests an ACK lets go leave together: the
		 * cork lasts while the locks are held (rx_release). */
		pthread_mutex_lock(&found->sq.lock);
		b->held = found;
		b->held_eq = cork(found);
		rx_rc(b, found, p);
		return 0;   /* ctx->lock and the QP's locks stay held (struct rx_batch) */
	case IBV_QPT_UD:
		uroce_ud_input(found, p);
		break;
	case IBV_QPT_UC:
		uroce_uc_input(found, &p->pkt);
		break;
	default:
		break;
	}
	uroce_rc_unlock_qp(found);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

/* Run @fn on every RC QP of @eng's context that has a transport, under the context's lock
 * and the QP's. */
/* Run @fn on @qp under its lock if it is an RC QP with a transport (ctx->lock held). */
static void on_rc_qp(struct uroce_qp *qp, void (*fn)(struct uroce_qp *, struct uroce_rc *))
{
	struct uroce_rc *rc;

	if (!qp || qp->qpx.qp_base.qp_type != IBV_QPT_RC || !qp->transport)
		return;
	pthread_mutex_lock(&qp->lock);
	rc = uroce_rc_of(qp);
	if (rc)
		fn(qp, rc);
	uroce_rc_unlock_qp(qp);
}

static void each_rc_qp(struct uroce_engine *eng, void (*fn)(struct uroce_qp *, struct uroce_rc *))
{
	struct uroce_context *ctx = eng->ctx;

	pthread_mutex_lock(&ctx->lock);
	for (struct uroce_list *n = ctx->qps.next; n != &ctx->qps; n = n->next)
		on_rc_qp(container_of(n, struct uroce_qp, ctx_node), fn);
	pthread_mutex_unlock(&ctx->lock);
}

static void flush_batch_ack(struct uroce_qp *qp, struct uroce_rc *rc)
{
	(void)qp;
	if (rc->ack_batch) {
		rc->ack_batch = false;
		if (rc->ack_pending && !rc->t_ack)
			uroce_rc_flush_ack(rc);
	}
}

/* The end of a receive batch: send the ACKs its packets asked for, one per QP (the
 * responder coalesced them, rc_resp.c acknowledge).  An ACK deferred on a timer (the QP is
 * sending too) stays deferred. */
static void flush_batch_acks(struct rx_batch *b)
{
	struct uroce_context *ctx = b->eng->ctx;

	if (b->acks_overflow) {
		each_rc_qp(b->eng, flush_batch_ack);
	} else if (b->nacks) {
		pthread_mutex_lock(&ctx->lock);
		for (unsigned i = 0; i < b->nacks; i++)
			on_rc_qp(uroce_qptable_lookup(&ctx->qp_by_num, b->acks[i]), flush_batch_ack);
		pthread_mutex_unlock(&ctx->lock);
	}
	b->nacks = 0;
	b->acks_overflow = false;
}

/* ------------------------------------------------------------ credits */

/* Credits: an in-flight budget per UDP destination, shared by the context's RC QPs that
 * reach it (rc.h io.credit_take).  Each QP's window alone (UROCE_RC_WINDOW_BYTES) is
 * what one receive socket absorbs, but the receiving context has one socket for all its
 * QPs: 1,000 windows are 128 MiB in flight against a buffer of 4 MiB at most (rmem_max),
 * and the overflow was half of all packets sent again, after local ACK timeouts (bench/
 * RESULTS.md, "Scale").  So the QPs reserve from one budget per destination GID, sized
 * from our own receive buffer (the peer's is not known; a same-host peer's is the same).
 * A QP refused waits in the destination's queue, first come first served: a request
 * while others wait joins the queue, and credit_kick hands credits that came back to the
 * queue's head, reserved for it, and runs its requester.  The budget covers RC only: UC
 * and UD have no ACKs to return credits (they are unreliable; a lost packet is theirs to
 * lose), and the shared-memory link has its own backpressure (io.busy). */
struct eng_dest {
	struct eng_dest *next;
	uint8_t gid[16];
	_Atomic int64_t free;            /* bytes not reserved */
	atomic_uint nwait;               /* QPs in the queue */
	pthread_mutex_t lock;            /* the queue */
	struct dest_waiter {
		uint32_t qpn, bytes;
	} *q;
	unsigned head, cap;              /* ring of cap entries, nwait of them from head */
};

/* A budget is at least one QP's whole window (its bytes are the same at every MTU): a single
 * QP is limited by its window only, as without budgets, and the largest reservation (a
 * READ's, a window of responses) always fits. */
#define CREDIT_MIN_BYTES UROCE_RC_WINDOW_BYTES

static struct eng_dest *dest_get(struct uroce_engine *eng, const uint8_t gid[16])
{
	struct eng_dest *d;

	pthread_mutex_lock(&eng->dest_lock);
	for (d = atomic_load(&eng->dests); d; d = d->next)
		if (!memcmp(d->gid, gid, 16))
			break;
	if (!d && (d = calloc(1, sizeof(*d)))) {
		memcpy(d->gid, gid, 16);
		atomic_init(&d->free, eng->dest_budget);
		pthread_mutex_init(&d->lock, NULL);
		d->next = atomic_load(&eng->dests);
		atomic_store(&eng->dests, d);
	}
	pthread_mutex_unlock(&eng->dest_lock);
	return d;
}

static void dests_free(struct uroce_engine *eng)
{
	struct eng_dest *d = atomic_load(&eng->dests), *next;

	for (; d; d = next) {
		next = d->next;
		pthread_mutex_destroy(&d->lock);
		free(d->q);
		free(d);
	}
	pthread_mutex_destroy(&eng->dest_lock);
	pthread_mutex_destroy(&eng->park_lock);
}

/* This thread is in a receive batch (poll_batch) or a post (uroce_transport_post up to
 * uroce_transport_unlock_qp): it runs credit_kick itself when it has released its locks. */
static POLL_TLS bool kick_here;

/* Credits came back or a waiter joined: credit_kick soon -- by this thread at the end of
 * its batch or post, else by the progress thread, which the doorbell wakes.  (A doorbell
 * per post was 48,000 write calls a second in ib_write_bw -q 1000 over UDP.) */
static void kick_soon(struct uroce_engine *eng)
{
	atomic_store(&eng->cr_kick, true);
	if (!kick_here)
		doorbell(eng);
}

static void credit_return(struct engine_qp *eq, struct eng_dest *d, uint32_t bytes)
{
	/* seq_cst, with credit_take's: either the giver sees the new waiter, or the waiter
	 * sees the credits. */
	atomic_fetch_add(&d->free, bytes);
	if (atomic_load(&d->nwait))
		kick_soon(eq->eng);
}

/* Take @bytes from @d's budget if it has them. */
static bool dest_reserve(struct eng_dest *d, uint32_t bytes)
{
	int64_t cur = atomic_load(&d->free);

	while (cur >= bytes)
		if (atomic_compare_exchange_weak(&d->free, &cur, cur - bytes))
			return true;
	return false;
}

static bool eng_credit_take(void *arg, uint32_t bytes)
{
	struct engine_qp *eq = arg;
	struct eng_dest *d = eq->dest;

	if (eq->cr_granted) {                   /* credit_kick's grant */
		uint32_t g = eq->cr_granted;

		eq->cr_granted = 0;
		if (g >= bytes) {
			if (g > bytes)
				credit_return(eq, d, g - bytes);
			return true;
		}
		credit_return(eq, d, g);
	}
	if (!eq->cr_waiting && !atomic_load(&d->nwait) && dest_reserve(d, bytes))
		return true;
	atomic_fetch_add_explicit(&eq->eng->cr_waits, 1, memory_order_relaxed);
	if (eq->cr_waiting)
		return false;                   /* queued already: its turn comes */
	pthread_mutex_lock(&d->lock);
	if (atomic_load(&d->nwait) == d->cap) {
		unsigned cap = d->cap ? 2 * d->cap : 64, n = atomic_load(&d->nwait);
		struct dest_waiter *q = malloc(cap * sizeof(*q));

		if (!q) {
			/* Not queued, nothing would wake it: better over the budget than stuck. */
			pthread_mutex_unlock(&d->lock);
			atomic_fetch_sub(&d->free, bytes);
			return true;
		}
		for (unsigned i = 0; i < n; i++)   /* n == cap: none while cap is 0 */
			q[i] = d->q[(d->head + i) % d->cap];
		free(d->q);
		d->q = q;
		d->head = 0;
		d->cap = cap;
	}
	d->q[(d->head + atomic_load(&d->nwait)) % d->cap] = (struct dest_waiter){ eq->qpn, bytes };
	atomic_fetch_add(&d->nwait, 1);
	eq->cr_waiting = true;
	pthread_mutex_unlock(&d->lock);
	/* Credits returned between the look above and the queueing saw no waiter. */
	if (atomic_load(&d->free) >= bytes)
		kick_soon(eq->eng);
	return false;
}

static void eng_credit_give(void *arg, uint32_t bytes)
{
	struct engine_qp *eq = arg;

	credit_return(eq, eq->dest, bytes);
}

/* Run the requester of a QP that credit_kick granted @bytes (ctx->lock held). */
static void credit_resume(struct uroce_engine *eng, struct eng_dest *d, uint32_t qpn, uint32_t bytes)
{
	struct uroce_qp *qp = uroce_qptable_lookup(&eng->ctx->qp_by_num, qpn);
	struct engine_qp *eq, *ceq;

	if (qp && qp->qpx.qp_base.qp_type == IBV_QPT_RC && qp->transport) {
		pthread_mutex_lock(&qp->lock);
		eq = engine_qp_of(uroce_rc_of(qp));
		if (eq && eq->dest == d && eq->cr_waiting) {
			eq->cr_waiting = false;
			eq->cr_granted += bytes;
			pthread_mutex_lock(&qp->sq.lock);
			ceq = cork(qp);
			uroce_rc_requester(qp, true);
			uncork(ceq);
			pthread_mutex_unlock(&qp->sq.lock);
			/* What it did not use (nothing to send, or it wants more): back to the pool. */
			bytes = eq->cr_granted;
			eq->cr_granted = 0;
		}
		uroce_rc_unlock_qp(qp);
	}
	if (bytes)
		atomic_fetch_add(&d->free, bytes);
}

/* Hand credits that came back to the waiters, in the order they came, while the head's
 * request fits (no locks held). */
static void credit_kick(struct uroce_engine *eng)
{
	if (!atomic_load_explicit(&eng->cr_kick, memory_order_relaxed) ||
	    !atomic_exchange(&eng->cr_kick, false))
		return;
	for (struct eng_dest *d = atomic_load(&eng->dests); d; d = d->next) {
		while (atomic_load(&d->nwait)) {
			struct dest_waiter w;

			pthread_mutex_lock(&d->lock);
			if (!atomic_load(&d->nwait)) {
				pthread_mutex_unlock(&d->lock);
				break;
			}
			w = d->q[d->head];
			if (!dest_reserve(d, w.bytes)) {
				pthread_mutex_unlock(&d->lock);
				break;          /* the next return kicks again */
			}
			d->head = (d->head + 1) % d->cap;
			atomic_fetch_sub(&d->nwait, 1);
			pthread_mutex_unlock(&d->lock);
			pthread_mutex_lock(&eng->ctx->lock);
			credit_resume(eng, d, w.qpn, w.bytes);
			pthread_mutex_unlock(&eng->ctx->lock);
		}
	}
}

/* poll_batch (below): one receive batch from each link, the UDP socket and the
 * shared-memory rings, up to RX_BUDGET packets each.  *more: a budget was used up, more
 * may be waiting. */

/* A context with shared-memory links whose UDP socket was empty at the last UDP_QUIET
 * polls of this thread reads it at every UDP_QUIET_EVERY-th poll only: a busy poller, or
 * the progress thread spinning on a stream of shm records, otherwise spent a system call
 * per turn on a socket with nothing in it (15% of a shm bandwidth target's CPU).  A
 * datagram then waits a few turns of a loop that takes well under a microsecond; the
 * progress thread woken by the socket's edge reads it at once (@udp).  Without shm links
 * (another host, UROCE_LINK=udp) the socket is read at every poll, as before. */
#define UDP_QUIET 64
#define UDP_QUIET_EVERY 16
static POLL_TLS unsigned udp_empty, udp_turn;

static bool udp_due(struct uroce_engine *eng)
{
	if (udp_empty < UDP_QUIET || !uroce_shm_active(eng->shm))
		return true;
	return ++udp_turn % UDP_QUIET_EVERY == 0;
}

static int poll_batch(struct uroce_engine *eng, bool *more, bool udp)
{
	/* Not `= { .eng = eng }`: that would zero acks[] (512 bytes) at every poll, a busy
	 * poller's too; only nacks says how much of it is used. */
	struct rx_batch b;
	int n = 0, m = 0;

	b.eng = eng;
	b.held = NULL;
	b.held_eq = NULL;
	b.nacks = 0;
	b.acks_overflow = false;
	kick_here = true;

	if (udp || udp_due(eng)) {
		/* An application thread polls again at once: it may read short (netio.h). */
		n = on_progress_thread ? uroce_netio_poll(eng->nio, RX_BUDGET, rx_one, &b)
				       : uroce_netio_poll_spin(eng->nio, RX_BUDGET, rx_one, &b);
		udp_empty = n ? 0 : udp_empty + 1;
	}
	rx_end(&b);
	if (eng->shm) {
		m = uroce_shm_poll(eng->shm, RX_BUDGET, rx_one, &b);
		rx_end(&b);
	}
	*more = n == RX_BUDGET || m == RX_BUDGET;
	n += m;
	if (n > 0)
		atomic_fetch_add_explicit(on_progress_thread ? &eng->rx_progress : &eng->rx_app,
					  (uint64_t)n, memory_order_relaxed);

	flush_batch_acks(&b);
	credit_kick(eng);
	kick_here = false;
	return n;
}

/* @udp: read the UDP socket whatever udp_due says (its edge woke the progress thread). */
static int drain(struct uroce_engine *eng, bool udp)
{
	int total = 0;
	bool more;

	do
		total += poll_batch(eng, &more, udp);
	while (more);
	return total;
}

static void unpark(struct uroce_qp *qp, struct uroce_rc *rc);

/* Lower eng->due_hint to @d (0: nothing). */
static void due_hint_min(struct uroce_engine *eng, uint64_t d)
{
	uint64_t cur = atomic_load(&eng->due_hint);

	while (d && (!cur || d < cur) && !atomic_compare_exchange_weak(&eng->due_hint, &cur, d))
		;
}

/* Run every QP's due timers and find the next deadline.  The progress thread also
 * publishes the counters (pub_due is its own); an application thread polling under the
 * lease runs only the timers. */
static void run_timers(struct uroce_engine *eng)
{
	struct uroce_context *ctx = eng->ctx;
	uint64_t now = uroce_rc_clock(), next = 0;
	bool publish = on_progress_thread && now >= eng->pub_due, changed = false;
	struct uroce_list *start;
	unsigned fired = 0;

	/* Deadlines set from here on lower the hint again (eng_timer); what the walk finds is
	 * merged in at the end. */
	atomic_store(&eng->due_hint, 0);
	atomic_fetch_add_explicit(&eng->timer_walks, 1, memory_order_relaxed);

	pthread_mutex_lock(&ctx->lock);
	/* From the first QP the last walk left due, round the list to it: a QP late in the
	 * list gets its turn as often as one at the head. */
	start = ctx->qps.next;
	if (eng->timer_resume) {
		struct uroce_qp *rq = uroce_qptable_lookup(&ctx->qp_by_num, eng->timer_resume);

		if (rq)
			start = &rq->ctx_node;
		eng->timer_resume = 0;
	}
	for (struct uroce_list *n = start; n != &ctx->qps;) {
		struct uroce_qp *qp = container_of(n, struct uroce_qp, ctx_node);
		uint64_t d;

		n = n->next == &ctx->qps ? ctx->qps.next : n->next;
		if (n == start)
			n = &ctx->qps;   /* round the list once */
		if (!qp->transport)
			continue;
		pthread_mutex_lock(&qp->lock);
		if (publish)
			changed |= uroce_rc_publish(qp);
		/* Autocork: parked packets leave at park_due at the latest. */
		{
			struct engine_qp *peq = engine_qp_of(uroce_rc_of(qp));

			if (peq && peq->parked && !peq->corked) {
				if (peq->park_due <= now)
					unpark(qp, uroce_rc_of(qp));
				else if (!next || peq->park_due < next)
					next = peq->park_due;
			}
		}
		d = uroce_rc_next_deadline(qp);
		if (d && d <= now && eng->timer_fire_max && fired == eng->timer_fire_max) {
			/* Over budget: due at once, after the next drain (TIMER_FIRE_MAX). */
			if (!eng->timer_resume)
				eng->timer_resume = qp->qpx.qp_base.qp_num;
			d = now;
		} else if (d && d <= now) {
			struct engine_qp *eq;

			fired++;
			pthread_mutex_lock(&qp->sq.lock);
			eq = cork(qp);   /* a go-back resends a window at once */
			d = uroce_rc_timers_run(qp, now);
			uncork(eq);
			pthread_mutex_unlock(&qp->sq.lock);
		}
		uroce_rc_unlock_qp(qp);
		if (d && (!next || d < next))
			next = d;
	}
	if (eng->timer_resume)
		atomic_fetch_add_explicit(&eng->timer_deferred, 1, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->lock);
	/* Counters: a wake-up before the publish is due means activity since the last one,
	 * and a publish that found changes may be followed by more; either way come back at
	 * pub_due, so the last values of a burst reach `uroce stat` within 2 periods.  Once a
	 * publish finds nothing changed, no more wake-ups for it. */
	if (publish)
		eng->pub_due = now + ENG_PUBLISH_NS;
	if (on_progress_thread && (changed || !publish) && (!next || eng->pub_due < next))
		next = eng->pub_due;
	due_hint_min(eng, next);
}

/* run_timers on the progress thread, only when a deadline has come (eng->due_hint, which
 * every deadline set lowers: eng_timer, park) or the counters' publish is due.  The thread
 * wakes for every doorbell, shm record and datagram, and each walk takes two mutexes per
 * QP: with 1,000 QPs an unconditional walk after each wake-up (12,000 a second at a
 * bandwidth target, none with a deadline due) was a quarter of its CPU.  A deadline that
 * moved later or went away leaves the hint early: one walk for nothing, which sets it
 * right. */
static void run_timers_if_due(struct uroce_engine *eng)
{
	uint64_t now = uroce_rc_clock(), due = atomic_load(&eng->due_hint);

	if ((due && now >= due) || now >= eng->pub_due)
		run_timers(eng);
}

/* Set the timerfd for @next (0: nothing due).  timerfd_settime costs a system call (and
 * kernel locking) per wake-up, and most wake-ups leave the earliest deadline where it was.
 * Set it only when it must move earlier, or when nothing is armed (it expired).  A
 * deadline that moved later or went away (every PSN acknowledged) is left armed: the
 * thread then wakes once for nothing and re-arms here.  That also spares the doorbell of
 * eng_timer when the next post re-arms the retransmit timer after an ACK emptied the
 * window (one message at a time), since its new deadline is later than the one still
 * armed. */
static void arm_timerfd(struct uroce_engine *eng, uint64_t next)
{
	struct itimerspec its = { 0 };
	uint64_t armed;

	if (!next)
		return;
	armed = atomic_load(&eng->armed);
	if (armed && armed <= next && armed > uroce_rc_clock())
		return;
	its.it_value.tv_sec = (time_t)(next / 1000000000ull);
	its.it_value.tv_nsec = (long)(next % 1000000000ull);
	atomic_store(&eng->armed, next);
	timerfd_settime(eng->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* After a drain that read at least RX_SPIN_MIN_PKTS packets the progress thread keeps
 * polling until RX_SPIN_US pass with nothing read (UROCE_RX_SPIN_US=N overrides, 0 = off)
 * instead of sleeping in epoll_wait.  A bandwidth target's progress thread places every
 * packet, and it shares its CPU with whatever else runs there: a thread that sleeps
 * between bursts must wait for the scheduler to give it the CPU back at each datagram's
 * wake-up, while the sender waits for the ACK that frees its window, so a sleeper got
 * about a third of the CPU a runnable thread gets (bench/RESULTS.md).  Small exchanges
 * (ping-pong, latency) never read that many at once and sleep as before. */
#define RX_SPIN_US 100
#define RX_SPIN_MIN_PKTS 16

/* The poll lease.  An application thread that busy-polls an empty CQ drains the socket
 * itself (uroce_transport_poll), and finds a datagram within a poll or two of its arrival.
 * If the progress thread also waits on the socket, every arrival wakes it too -- on the
 * application's CPU, where it preempts the poller, finds the datagram taken or takes it
 * first: a context switch or two in the middle of each half round trip, which was most
 * of ib_write_lat's time.  So while an application thread busy-polls, the progress thread
 * takes the socket out of its epoll set and sleeps (timers and doorbells still wake it)
 * until POLL_LEASE_US after the last busy poll; then it waits on the socket again.  A
 * thread that stops polling to sleep says so (ibv_req_notify_cq, ibv_get_cq_event:
 * uroce_transport_will_sleep) and gives the socket back at once; one that stops without
 * a word (perftest spinning on a memory byte) leaves datagrams to the progress thread
 * at most POLL_LEASE_US late.  UROCE_POLL_LEASE_US=N overrides it, 0 turns it off. */
#define POLL_LEASE_US 200
/* Empty polls at most this far apart make a busy-polling thread; an application polling
 * once after each completion event does not take the lease. */
#define POLL_SPIN_GAP_NS 20000ull
/* A poll that finds packets renews the lease if this thread's previous poll was at most
 * this long ago: ib_write_bw's sender polls the transport 0.1-1 ms apart (its CQ is rarely
 * empty; 100 us kept the futex storm below), an application woken less than 1,000 times a
 * second does not take the lease.  One woken more often that then waits on the channel's
 * fd without ibv_get_cq_event leaves a datagram at most POLL_LEASE_US late, once per
 * LEASE_BACKOFF_NS, as an application that stops busy-polling without a word. */
#define POLL_FOUND_GAP_NS 1000000ull

/* A lease that ran out with a datagram waiting in the socket delayed it by up to
 * POLL_LEASE_US: the application had stopped polling to wait some other way (a byte of its
 * buffer) while the peer's next request was still to come -- a peer that acknowledges at
 * once, such as Linux Soft-RoCE, instead of behind its own next request.  Then no lease
 * for this long: the progress thread watches the socket again, as without the lease, and
 * the lease is tried again afterwards (one late datagram per period at worst). */
#define LEASE_BACKOFF_NS 10000000ull
/* ... but only after lapses in a row: the first is LEASE_BACKOFF_MIN_NS, and each lapse
 * less than LEASE_BACKOFF_RUN_NS after the previous back-off ended doubles it, up to
 * LEASE_BACKOFF_NS.  A peer that acknowledges at once lapses the lease as soon as it is
 * back (1, 2, 4, 8, then 10 ms: the pattern above).  Between two uroce processes a lapse
 * is a one-off: one side stalled for over UROCE_RC_ACK_DEFER_IF_REQ_NS (a busy machine),
 * so the other acknowledged its WRITE at once, and its next WRITE came while the poller
 * spun on memory.  The ten milliseconds without a lease that followed, every datagram a
 * wake-up, were where ib_write_lat's 99th percentile came from. */
#define LEASE_BACKOFF_MIN_NS 1000000ull
#define LEASE_BACKOFF_RUN_NS 100000000ull

/* How often the progress thread looks whether a lease still holds.  Each look is a
 * wake-up on the poller's CPU: a timer interrupt, two context switches and the caches the
 * poller loses.  At the lease's end and at the earliest deadline, as before, the
 * progress thread woke 7,000-11,000 times a second during an ib_write_lat across a veth,
 * once every six half round trips, and ib_write_lat's typical latency was 8.5-9.8 us
 * against 6.5-8.3 with looks 1 ms apart (bench/RESULTS.md).  So while the poller keeps
 * its lease, each look that finds it held doubles the interval to the next, up to this;
 * a lease that starts (again) is looked at when it ends.  The deadlines are not looked
 * for: the poller runs them (uroce_transport_poll).  The price is paid by a poller that
 * stops without a word after it held the lease long: what arrives then, and what comes
 * due, waits up to this long once, after which the lease backs off (LEASE_BACKOFF_NS).  A
 * poller that stops soon after the lease began (Linux Soft-RoCE's peer acknowledging at
 * once: its poll returns on the ACK, the WRITE comes while it spins on memory) is found at
 * the first look, POLL_LEASE_US late, as before.  UROCE_POLL_CHECK_MAX_US=N overrides it
 * (N at most POLL_LEASE_US: the old looks). */
#define LEASE_CHECK_MAX_NS 1600000ull

/* An application thread busy-polled less than the lease ago.  A seq_cst load: wait_events
 * relies on it after storing sock_off. */
static bool lease_held(struct uroce_engine *eng, uint64_t now)
{
	uint64_t st = atomic_load(&eng->poll_stamp);

	/* Signed: a stamp may lie ahead of now (a lease longer than lease_ns, see
	 * uroce_transport_poll). */
	return eng->lease_ns && st && (int64_t)(now - st) < (int64_t)eng->lease_ns;
}

/* Renew the lease to @stamp unless it already lasts longer: an empty poll right after a
 * poll that extended the lease (uroce_transport_poll) must not cut it back to lease_ns.
 * Two application threads racing here may leave the shorter of their stamps: harmless. */
static void lease_renew(struct uroce_engine *eng, uint64_t stamp)
{
	uint64_t cur = atomic_load_explicit(&eng->poll_stamp, memory_order_relaxed);

	if (!cur || (int64_t)(stamp - cur) > 0)
		atomic_store_explicit(&eng->poll_stamp, stamp, memory_order_relaxed);
}

/* Put the socket into the progress thread's epoll set, or take it out (events 0).  A
 * socket put back with data queued reports it at the next epoll_wait. */
static void sock_watch(struct uroce_engine *eng, bool on)
{
	uroce_netio_watch(eng->nio, eng->epfd, on);
	atomic_store(&eng->sock_off, !on);
}

/* epoll_pwait2 (Linux 5.11) takes the lease's microseconds; where it is missing (older
 * kernels, valgrind) epoll_wait rounds the timeout up to a millisecond. */
static int epoll_wait_ts(struct uroce_engine *eng, struct epoll_event *ev, int nev,
			 const struct timespec *tp)
{
	static atomic_bool no_pwait2;
	int n;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		n = epoll_pwait2(eng->epfd, ev, nev, tp, NULL);
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store(&no_pwait2, true);
	}
	return epoll_wait(eng->epfd, ev, nev,
			  tp ? (int)(tp->tv_sec * 1000 + (tp->tv_nsec + 999999) / 1000000) : -1);
}

/* epoll_wait of the progress thread, under the poll lease: without the socket and until
 * the lease ends while an application thread busy-polls, with it and without a timeout
 * otherwise. */
static int wait_events(struct uroce_engine *eng, struct epoll_event *ev, int nev)
{
	uint64_t now = uroce_rc_clock();
	struct timespec ts, *tp = NULL;

	if (lease_held(eng, now) && now >= eng->lease_off_until) {
		if (!atomic_load(&eng->sock_off)) {
			sock_watch(eng, false);
			eng->lease_check_ns = 0;   /* a new lease: looked at when it ends */
		} else {
			/* Woken under a lease that still holds (LEASE_CHECK_MAX_NS). */
			atomic_fetch_add_explicit(&eng->lease_looks, 1, memory_order_relaxed);
			eng->lease_check_ns = eng->lease_check_ns ? 2 * eng->lease_check_ns
								  : eng->lease_ns;
			if (eng->lease_check_ns > eng->lease_check_max)
				eng->lease_check_ns = eng->lease_check_max;
		}
		/* Look at the stamp (again): a will_sleep that ran before sock_off was set
		 * saw it clear and rang no doorbell (both sides store before they load,
		 * seq_cst). */
		if (lease_held(eng, now)) {
			/* No deadline shortens this sleep: the poller runs the timers that
			 * come due (uroce_transport_poll), and if it stops polling, they wait
			 * for the next look, as datagrams do (LEASE_CHECK_MAX_NS). */
			uint64_t end = atomic_load(&eng->poll_stamp) + eng->lease_ns, left;

			if (end < now + eng->lease_check_ns)
				end = now + eng->lease_check_ns;
			left = end > now ? end - now : 0;
			ts.tv_sec = (time_t)(left / 1000000000ull);
			ts.tv_nsec = (long)(left % 1000000000ull);
			tp = &ts;
		}
	}
	if (!tp) {
		if (atomic_load(&eng->sock_off)) {
			/* Back on the socket.  A deadline an application thread set while
			 * sock_off was still true rang no doorbell: collect it now (it
			 * stored its deadline under the QP's lock before it read sock_off). */
			sock_watch(eng, true);
			run_timers(eng);
			/* A lease that ran out (rather than ended by will_sleep) and left
			 * datagrams waiting delayed them: back off (LEASE_BACKOFF_NS). */
			if (atomic_load(&eng->poll_stamp) && drain(eng, true)) {
				uint64_t t = uroce_rc_clock();

				eng->lease_backoff_ns =
					eng->lease_backoff_ns && t - eng->lease_off_until < LEASE_BACKOFF_RUN_NS
						? 2 * eng->lease_backoff_ns : LEASE_BACKOFF_MIN_NS;
				if (eng->lease_backoff_ns > LEASE_BACKOFF_NS)
					eng->lease_backoff_ns = LEASE_BACKOFF_NS;
				eng->lease_off_until = t + eng->lease_backoff_ns;
				atomic_fetch_add_explicit(&eng->lease_backoffs, 1, memory_order_relaxed);
			}
		}
		arm_timerfd(eng, atomic_load(&eng->due_hint));
		/* The shared-memory rings: peers wake us only after we said we sleep, and
		 * records that came before that are drained now instead. */
		if (eng->shm && !uroce_shm_sleep_prepare(eng->shm))
			return 0;
	}
	{
		int n = epoll_wait_ts(eng, ev, nev, tp);

		if (!tp && eng->shm)
			uroce_shm_sleep_done(eng->shm);
		return n;
	}
}

static void *progress_thread(void *arg)
{
	struct uroce_engine *eng = arg;
	struct epoll_event ev[4];
	const char *sv = getenv("UROCE_RX_SPIN_US");
	uint64_t spin_ns = (sv ? strtoull(sv, NULL, 10) : RX_SPIN_US) * 1000ull;
	int got;

	on_progress_thread = true;
	/* The lease's timeouts are tens of microseconds: the default slack (50 us) would
	 * double them. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!atomic_load(&eng->stop)) {
		int n = wait_events(eng, ev, 4);
		bool sock = false;
		uint64_t v;

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == eng->tfd) {
				if (read(eng->tfd, &v, sizeof(v)) < 0) {
					/* spurious: nothing expired */
				} else {
					atomic_store(&eng->armed, 0);   /* one-shot: it fired */
				}
			} else if (ev[i].data.fd == eng->efd) {
				if (read(eng->efd, &v, sizeof(v)) < 0) {
					/* already drained */
				}
			} else if (uroce_netio_is_event(eng->nio, ev[i].data.u64)) {
				sock = true;   /* the group member or a connected socket */
			} else if (eng->shm && ev[i].data.fd == uroce_shm_fd(eng->shm)) {
				/* A peer's records, or new / dead links (shm.h). */
				uroce_shm_wakeup(eng->shm);
			}
		}
		/* Credits returned where no batch or post followed (a destroy, a timer's
		 * error): the doorbell woke us for them, whoever holds the socket. */
		credit_kick(eng);
		/* Under the lease the application thread receives: only timers here. */
		if (atomic_load(&eng->sock_off)) {
			run_timers_if_due(eng);
			continue;
		}
		got = drain(eng, sock);
		/* A stream in flight: keep polling instead of sleeping (see RX_SPIN_US). */
		if (got >= RX_SPIN_MIN_PKTS && spin_ns) {
			uint64_t now = uroce_rc_clock(), end = now + spin_ns, timers = now;

			do {
				/* An application thread busy-polls (the poll lease): it
				 * receives; a second spinner on its CPU would only slow it. */
				if (lease_held(eng, now))
					break;
				/* One clock read per turn (3% of a UDP receiver's CPU was
				 * clock_gettime here, two per turn that found packets). */
				got = drain(eng, false);
				now = uroce_rc_clock();
				if (got)
					end = now + spin_ns;
				/* Deadlines (retransmit, t_ack, counters) come due while spinning,
				 * and doorbells for new ones are not read: look every half spin. */
				if (now - timers >= spin_ns / 2) {
					run_timers_if_due(eng);
					timers = now;
				}
			} while (now < end && !atomic_load(&eng->stop));
		}
		run_timers_if_due(eng);
	}
	return NULL;
}

/* ------------------------------------------------------------ deferred ACKs at the end */

/* A deferred ACK (rc_resp.c) must not be lost because the QP or the process goes away
 * first: the peer would wait for its send completion until it gives up.  Destroy and
 * Reset send it (below); a process that exits without destroying its QPs gets it sent by
 * this destructor, with try-locks only (a thread may have died holding a lock). */
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_engine *engines;

static void flush_qp_ack(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (rc && rc->ack_pending && qp->qpx.qp_base.qp_type == IBV_QPT_RC)
		uroce_rc_flush_ack(rc);
}

__attribute__((destructor)) static void flush_at_exit(void)
{
	if (pthread_mutex_trylock(&engines_lock))
		return;
	for (struct uroce_engine *e = engines; e; e = e->next_eng) {
		struct uroce_context *ctx = e->ctx;

		if (pthread_mutex_trylock(&ctx->lock))
			continue;
		for (struct uroce_list *n = ctx->qps.next; n != &ctx->qps; n = n->next) {
			struct uroce_qp *qp = container_of(n, struct uroce_qp, ctx_node);

			if (pthread_mutex_trylock(&qp->lock))
				continue;
			flush_qp_ack(qp);
			pthread_mutex_unlock(&qp->lock);
		}
		pthread_mutex_unlock(&ctx->lock);
	}
	pthread_mutex_unlock(&engines_lock);
}

/* The same-host link (docs/transport.md "The shared-memory link"): UROCE_LINK=shm|udp, or
 * the device's option (`uroce link set DEV loopback shm|udp`, shm by default).  A peer is
 * reached over shm when both ends take part.  A daemon that does not know shm links (or
 * refuses) leaves UDP.  0, or -EINVAL for a UROCE_LINK that is neither (a learner who
 * typed it wants to know). */
static int shm_start(struct uroce_engine *eng)
{
	struct uroce_context *ctx = eng->ctx;
	const char *v = getenv("UROCE_LINK");
	struct uroce_dev_info info;
	bool want;

	if (v && *v) {
		if (strcmp(v, "shm") && strcmp(v, "udp")) {
			fprintf(stderr, "uroce: UROCE_LINK=%s: shm or udp\n", v);
			return -EINVAL;
		}
		want = !strcmp(v, "shm");
	} else {
		uroce_devview_get(&ctx->dev->view, &info);
		want = info.loopback != UROCE_LOOPBACK_UDP;
	}
	if (want && uroce_shm_open(ctx, uroce_netio_shm_counters(eng->nio), &eng->shm))
		eng->shm = NULL;
	uroce_shm_set_capture(eng->shm, uroce_netio_cap(eng->nio));
	return 0;
}

static int engine_start(struct uroce_context *ctx, struct uroce_engine **out)
{
	struct uroce_engine *eng;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ret;

#if !UROCE_HAVE_NETIO
	if (!uroce_netio_open)
		return -ENOSYS;
#endif
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return -ENOMEM;
	eng->ctx = ctx;
	eng->epfd = eng->tfd = eng->efd = -1;
	pthread_mutex_init(&eng->dest_lock, NULL);
	pthread_mutex_init(&eng->park_lock, NULL);
	{
		const char *v = getenv("UROCE_POLL_LEASE_US");

		eng->lease_ns = (v ? strtoull(v, NULL, 10) : POLL_LEASE_US) * 1000ull;
		v = getenv("UROCE_POLL_CHECK_MAX_US");
		eng->lease_check_max = v && *v ? strtoull(v, NULL, 10) * 1000ull : LEASE_CHECK_MAX_NS;
		v = getenv("UROCE_TIMER_FIRE_MAX");
		eng->timer_fire_max = v && *v ? (unsigned)strtoul(v, NULL, 10) : TIMER_FIRE_MAX;
		v = getenv("UROCE_AUTOCORK_US");
		eng->autocork_ns = env_off("UROCE_AUTOCORK") ? 0
				   : v ? strtoull(v, NULL, 10) * 1000ull : AUTOCORK_NS;
	}
	ret = uroce_netio_open(ctx, &eng->nio);
	if (ret)
		goto err;
	ret = shm_start(eng);
	if (ret)
		goto err;
	{
		/* Credits: the budget per UDP destination is a quarter of what SO_RCVBUF
		 * reads, the limit the kernel holds a socket's queued datagrams to, counted
		 * with their overhead (it reads twice the size asked for).  Measured with
		 * 1,000 QPs on lo at MTU 4096 and an 8 MiB reading: a half still overflowed
		 * the receiver (200 UdpRcvbufErrors in 5 s), a quarter never did (bench/
		 * RESULTS.md).  UROCE_UDP_INFLIGHT_KB overrides it, 0 = no budgets. */
		const char *v = getenv("UROCE_UDP_INFLIGHT_KB");
		int rb = 0;
		socklen_t sl = sizeof(rb);

		if (v && *v)
			eng->dest_budget = strtoll(v, NULL, 10) * 1024;
		else if (!getsockopt(uroce_netio_fd(eng->nio), SOL_SOCKET, SO_RCVBUF, &rb, &sl))
			eng->dest_budget = rb / 4;
		if (eng->dest_budget > 0 && eng->dest_budget < CREDIT_MIN_BYTES)
			eng->dest_budget = CREDIT_MIN_BYTES;
		if (eng->dest_budget < 0)
			eng->dest_budget = 0;
	}
	eng->epfd = epoll_create1(EPOLL_CLOEXEC);
	eng->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	eng->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (eng->epfd < 0 || eng->tfd < 0 || eng->efd < 0) {
		ret = -errno;
		goto err;
	}
	/* Edge-triggered: application threads drain the socket too (ibv_poll_cq); level-
	 * triggered, the progress thread would wake again and again for datagrams an
	 * application thread is reading, on that thread's CPU.  A new datagram is a new edge;
	 * data left behind is covered by drain() reading until empty, netio's hand-off
	 * between concurrent pollers (rx_missed) and uroce_transport_poll's doorbell when it
	 * stops at its budget. */
	uroce_netio_watch(eng->nio, eng->epfd, true);
	ev.events = EPOLLIN;
	ev.data.fd = eng->tfd;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->tfd, &ev);
	ev.data.fd = eng->efd;
	epoll_ctl(eng->epfd, EPOLL_CTL_ADD, eng->efd, &ev);
	if (eng->shm) {
		ev.data.fd = uroce_shm_fd(eng->shm);
		epoll_ctl(eng->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev);
	}
	ret = -pthread_create(&eng->thread, NULL, progress_thread, eng);
	if (ret)
		goto err;
	pthread_mutex_lock(&engines_lock);
	eng->next_eng = engines;
	engines = eng;
	pthread_mutex_unlock(&engines_lock);
	*out = eng;
	return 0;
err:
	uroce_shm_close(eng->shm);
	if (eng->nio)
		uroce_netio_close(eng->nio);
	if (eng->epfd >= 0)
		close(eng->epfd);
	if (eng->tfd >= 0)
		close(eng->tfd);
	if (eng->efd >= 0)
		close(eng->efd);
	pthread_mutex_destroy(&eng->dest_lock);
	pthread_mutex_destroy(&eng->park_lock);
	free(eng);
	return ret;
}

/* ------------------------------------------------------------ io binding */

static int eng_xmit(void *arg, struct uroce_qp *qp, uint8_t *pkt, size_t len)
{
	struct engine_qp *eq = arg;
	struct uroce_txpkt t = { .iov = { { pkt, len } }, .iovcnt = 1, .len = len };

	(void)qp;
	if (eq->corked && len <= UROCE_RC_MAX_PKT) {
		uint8_t *slot;

		if (eq->nbatch >= eq->nmax)
			eng_flush(eq);
		slot = slot_at(eq, eq->nbatch);
		memcpy(slot, pkt, len);
		eq->pk[eq->nbatch++] = (struct uroce_txpkt){ .iov = { { slot, len } }, .iovcnt = 1,
							     .len = len };
		return 1;
	}
	eng_flush(eq);   /* parked packets (autocork) go first: PSN order */
	return eq_send(eq, &t, 1);
}

static int eng_xmitv(void *arg, struct uroce_qp *qp, const uint8_t *hdr, size_t hlen,
		     const struct iovec *data, unsigned ndata, const uint8_t *tail, size_t tlen)
{
	struct engine_qp *eq = arg;
	struct uroce_txpkt one, *t = &one;
	uint8_t buf[ENG_HDR_MAX + ENG_TAIL_MAX], *slot = buf, *tslot = buf + ENG_HDR_MAX;
	bool batch = eq->corked;

	(void)qp;
	if (ndata > 2 || hlen > ENG_HDR_MAX || tlen > ENG_TAIL_MAX)
		return -EINVAL;
	if (batch) {
		if (eq->nbatch >= eq->nmax)
			eng_flush(eq);
		slot = slot_at(eq, eq->nbatch);
		tslot = slot_at(eq, eq->nbatch + 1) - tlen;   /* right before the next headers */
		t = &eq->pk[eq->nbatch];                      /* built where it is kept */
	}
	/* Headers and tail into the slots (netio writes the ICRC into the tail); the payload
	 * is read from where it is, by the ICRC and by the kernel's copy. */
	uroce_copy_small(slot, hdr, hlen);
	uroce_copy_small(tslot, tail, tlen);
	t->iov[0] = (struct iovec){ slot, hlen };
	t->iovcnt = 1;
	t->len = hlen + tlen;
	for (unsigned i = 0; i < ndata; i++) {
		t->iov[t->iovcnt++] = data[i];
		t->len += data[i].iov_len;
	}
	t->iov[t->iovcnt++] = (struct iovec){ tslot, tlen };
	if (batch) {
		eq->nbatch++;
		return 1;
	}
	eng_flush(eq);   /* parked packets (autocork) go first: PSN order */
	return eq_send(eq, t, 1);
}

/* io.flush: the batch leaves now (the responder is about to overwrite memory that READ
 * responses in it point at); the QP stays corked. */
static void eng_io_flush(void *arg)
{
	struct engine_qp *eq = arg;

	if (eq->corked)
		eng_flush(eq);
}

/* io.busy: the QP's shared-memory link holds packets its full ring could not take yet. */
static bool eng_busy(void *arg)
{
	const struct engine_qp *eq = arg;

	return uroce_shm_link_busy(eq->link);
}

static void eng_timer(void *arg, uint64_t deadline)
{
	struct engine_qp *eq = arg;

	due_hint_min(eq->eng, deadline);
	/* Wake the thread only when the new deadline is earlier than what it sleeps for.  The
	 * progress thread re-arms after each drain.  Under the poll lease the busy-polling
	 * thread runs the timers once due_hint has passed, and the progress thread wakes by
	 * the lease's end at the latest (wait_events). */
	if (on_progress_thread || atomic_load(&eq->eng->sock_off))
		return;
	if (!eq->eng->armed || deadline < eq->eng->armed)
		doorbell(eq->eng);
}

static void eng_release(void *arg)
{
	struct engine_qp *eq = arg;

	if (eq->link)
		uroce_shm_link_put(eq->link);
	if (eq->tx)
		uroce_netio_tx_close(eq->tx);
	free(eq->pk);   /* the block the slots are in */
	free(eq);
}

/* A weak reference: the unit tests' in-memory netio (tests/transport/rc_world.h) does not
 * define it, and a strong one would pull netio.c into those tests. */
#pragma weak uroce_netio_tx_set_grh

/* UD (ud.c): each WQE names its destination and source GID through its AH; the QP's
 * send socket is (re)opened for the AH's source GID when it changes. */
static int eng_ud_xmit(struct uroce_qp *qp, const struct uroce_ah *ah, uint8_t *pkt, size_t len)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	struct engine_qp *eq = rc->io.arg;
	struct uroce_txpkt t = { .iov = { { pkt, len } }, .iovcnt = 1, .len = len };
	int ret;

	if (eq->tx && memcmp(eq->sgid, ah->sgid, 16)) {
		uroce_netio_tx_close(eq->tx);
		eq->tx = NULL;
	}
	if (!eq->tx) {
		ret = uroce_netio_tx_open(eq->eng->nio, ah->sgid, qp->qpx.qp_base.qp_num,
					  ah->attr.grh.traffic_class, ah->attr.grh.hop_limit, &eq->tx);
		if (ret)
			return ret;
		memcpy(eq->sgid, ah->sgid, 16);
	}
	memcpy(eq->dst.gid, ah->attr.grh.dgid.raw, 16);
	eq->dst.port = 4791;
	/* A destination QP of a same-host uroce context: its shared-memory link (the
	 * destination QPN is the BTH's, bytes 5-7). */
	if (eq->eng->shm && len >= UROCE_BTH_LEN) {
		uint32_t dqpn = (uint32_t)pkt[5] << 16 | (uint32_t)pkt[6] << 8 | pkt[7];
		struct uroce_shm_link *l;

		if (!uroce_shm_connect(eq->eng->shm, eq->dst.gid, dqpn, &l)) {
			memcpy(eq->src.sgid, ah->sgid, 16);
			eq->src.sport = uroce_netio_tx_sport(eq->tx);
			eq->src.qpn = qp->qpx.qp_base.qp_num;
			eq->src.tclass = ah->attr.grh.traffic_class;
			eq->src.hop_limit = ah->attr.grh.hop_limit;
			ret = uroce_shm_send(l, &eq->src, &eq->dst, &t, 1);
			uroce_shm_link_put(l);
			return ret;
		}
	}
	if (uroce_netio_tx_set_grh)
		uroce_netio_tx_set_grh(eq->tx, ah->attr.grh.traffic_class, ah->attr.grh.hop_limit);
	return uroce_netio_send(eq->tx, &eq->dst, &t, 1);
}

/* A UD message may be as long as the port's MTU (IBA C10-93.1.1); UD QPs have no path MTU. */
static void ud_set_mtu(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (rc)
		uroce_rc_set_mtu(rc, 128u << uroce_devview_active_mtu(&qp->uctx->dev->view));
}

/* ------------------------------------------------------------ verbs hooks */

/* The context's engine, started on first use.  0, -ENOSYS (no data path linked), -errno. */
static int eng_get(struct uroce_context *ctx, struct uroce_engine **out)
{
	struct uroce_engine *eng;
	int ret = 0;

	pthread_mutex_lock(&ctx->lock);
	if (!ctx->transport) {
		ret = engine_start(ctx, &eng);
		if (!ret)
			ctx->transport = eng;
	}
	*out = ctx->transport;
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

void uroce_transport_ctx_start(struct uroce_context *ctx)
{
	struct uroce_engine *eng;

	(void)eng_get(ctx, &eng);
}

int uroce_transport_qp_modify(struct uroce_qp *qp, enum ibv_qp_state cur, enum ibv_qp_state next)
{
	struct uroce_context *ctx = qp->uctx;
	struct uroce_engine *eng = NULL;
	struct engine_qp *eq;
	struct uroce_rc_io io = { 0 };
	union ibv_gid sgid;
	int ret;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_RC && qp->qpx.qp_base.qp_type != IBV_QPT_UD &&
	    qp->qpx.qp_base.qp_type != IBV_QPT_UC)
		return 0;
	if (next == IBV_QPS_RESET) {
		flush_qp_ack(qp);
		uroce_rc_detach(qp);
		return 0;
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		uroce_rc_to_rts(qp);
		if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
			ud_set_mtu(qp);
		return 0;
	}
	if (next != IBV_QPS_RTR || cur != IBV_QPS_INIT || qp->transport)
		return 0;

	ret = eng_get(ctx, &eng);
	if (ret)
		return ret == -ENOSYS ? 0 : ret;

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		/* UD: no fixed peer; the send socket opens at the first send (eng_ud_xmit).
		 * Its receives report a GRH: from now on the socket must say what IP header
		 * each datagram came with. */
		uroce_netio_rx_grh(eng->nio);
		eq = calloc(1, sizeof(*eq));
		if (!eq)
			return -ENOMEM;
		eq->eng = eng;
		uroce_ud_xmit = eng_ud_xmit;
		io.xmit = eng_xmit;
		io.timer = eng_timer;
		io.release = eng_release;
		io.arg = eq;
		ret = uroce_rc_attach(qp, &io);
		if (ret)
			eng_release(eq);
		else
			ud_set_mtu(qp);
		return ret;
	}
	ret = uroce_devview_gid(&ctx->dev->view, qp->attr.ah_attr.grh.sgid_index, sgid.raw, NULL, NULL);
	if (ret)
		return ret;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -ENOMEM;
	eq->eng = eng;
	memcpy(eq->dst.gid, qp->attr.ah_attr.grh.dgid.raw, 16);
	eq->dst.port = 4791;
	/* IP carries the AV's GRH traffic class and hop limit (RoCEv2 A17.4.5), as rxe
	 * sends them for connected QPs too. */
	ret = uroce_netio_tx_open(eng->nio, sgid.raw, qp->qpx.qp_base.qp_num,
				  qp->attr.ah_attr.grh.traffic_class, qp->attr.ah_attr.grh.hop_limit,
				  &eq->tx);
	if (ret) {
		free(eq);
		return ret;
	}
	/* The peer QP in a same-host uroce context: its packets take the shared-memory link
	 * (-ENOENT / -ENOTCONN: another host, or a peer that takes no part: UDP). */
	if (eng->shm &&
	    !uroce_shm_connect(eng->shm, eq->dst.gid, qp->attr.dest_qp_num, &eq->link)) {
		memcpy(eq->src.sgid, sgid.raw, 16);
		eq->src.sport = uroce_netio_tx_sport(eq->tx);
		eq->src.qpn = qp->qpx.qp_base.qp_num;
		eq->src.tclass = qp->attr.ah_attr.grh.traffic_class;
		eq->src.hop_limit = qp->attr.ah_attr.grh.hop_limit;   /* 0: shm.c records 64 */
	}
	io.xmit = eng_xmit;
	io.xmitv = eng_xmitv;
	io.flush = eng_io_flush;
	io.busy = eq->link ? eng_busy : NULL;
	eq->qpn = qp->qpx.qp_base.qp_num;
	if (!eq->link && qp->qpx.qp_base.qp_type == IBV_QPT_RC && eng->dest_budget &&
	    (eq->dest = dest_get(eng, eq->dst.gid))) {
		io.credit_take = eng_credit_take;
		io.credit_give = eng_credit_give;
	}
	/* UROCE_ACK_BATCH=0: an ACK per AckReq at once, as rxe; UROCE_ACK_DEFER=0: no timed
	 * deferral behind the QP's next request (rc_resp.c acknowledge). */
	io.defer_acks = qp->qpx.qp_base.qp_type == IBV_QPT_RC && !env_off("UROCE_ACK_BATCH");
	io.defer_timed = io.defer_acks && !env_off("UROCE_ACK_DEFER");
	io.timer = eng_timer;
	io.release = eng_release;
	io.arg = eq;
	eq->post_resp_psn = qp->attr.rq_psn;   /* the responder starts there (autocork) */
	ret = uroce_rc_attach(qp, &io);
	if (ret)
		eng_release(eq);
	return ret;
}

void uroce_transport_qp_destroy(struct uroce_qp *qp)
{
	struct uroce_engine *eng = qp->uctx->transport;
	uint32_t ifindex = 0;
	union ibv_gid g;

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		uroce_devview_gid(&qp->uctx->dev->view, 0, g.raw, NULL, &ifindex);
		uroce_mcast_qp_gone(qp, eng ? uroce_netio_fd(eng->nio) : -1, (int)ifindex);
	}
	flush_qp_ack(qp);
	uroce_rc_detach(qp);
}

int uroce_transport_mcast(struct uroce_qp *qp, const union ibv_gid *gid, bool attach)
{
	struct uroce_context *ctx = qp->uctx;
	struct uroce_engine *eng;
	uint32_t ifindex = 0;
	union ibv_gid g;
	int ret;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_UD || !uroce_mcast_gid_ok(gid->raw))
		return -EINVAL;
	/* The group is joined on the context's receive socket: start the data path now if no
	 * QP has reached RTR yet. */
	ret = eng_get(ctx, &eng);
	if (ret)
		return ret == -ENOSYS ? -EOPNOTSUPP : ret;
	ret = uroce_devview_gid(&ctx->dev->view, 0, g.raw, NULL, &ifindex);
	if (ret)
		return ret;
	if (attach)
		return uroce_mcast_attach(qp, gid->raw, uroce_netio_fd(eng->nio), (int)ifindex);
	return uroce_mcast_detach(qp, gid->raw, uroce_netio_fd(eng->nio), (int)ifindex);
}

/*
 * Autocork.  An application that streams small messages (ib_send_bw 64 B) posts one WQE per
 * ibv_post_send, and each post was one sendmsg: a system call, an skb, a softirq delivery
 * and a receive for every 64 bytes, on both sides.  Like TCP's autocorking, a post made
 * while earlier packets of the QP are still unacknowledged leaves its packets in the QP's
 * cork ("parked") instead of sending them: the next post adds to them, and they leave
 * together, as one GSO send, once AUTOCORK_PKTS are collected or when anything else runs
 * the QP (an ACK coming in, a timer), when the application polls a CQ or goes to sleep on
 * one, or at AUTOCORK_NS after parking (run_timers) at the latest.  A post with nothing in
 * flight (a ping-pong, a latency test, a first message) is sent at once as before, and a
 * post of AUTOCORK_PKTS packets or more (a 64 KiB WRITE) is not held either.  The wait is
 * never more than the earlier packets' own acknowledgment takes: their ACK runs the QP.
 * UROCE_AUTOCORK=0 turns it off; UROCE_AUTOCORK_US=N sets the longest wait (a test makes
 * it long to catch a parked packet deterministically).
 */

/* Leave @eq's collected packets unsent (see Autocork); under the QP's lock. */
static void park(struct engine_qp *eq, struct uroce_rc *rc, uint64_t now)
{
	uint64_t wait = eq->eng->autocork_ns, tmo = rc->qp->attr.timeout;

	/* At most a quarter of the QP's local ACK timeout, 4.096 us * 2^timeout (IBA 9.7.6.1.3;
	 * timers.c's rule for a deferred ACK). */
	if (tmo && tmo < 32 && (4096ull << tmo) / 4 < wait)
		wait = (4096ull << tmo) / 4;
	if (!eq->parked) {
		eq->parked = true;
		eq->park_due = now + wait;
	}
	eq->corked = false;
	if (!eq->park_listed) {
		struct uroce_engine *eng = eq->eng;

		pthread_mutex_lock(&eng->park_lock);
		if (eng->npark < PARK_MAX) {
			eng->park_qpn[eng->npark++] = eq->qpn;
			eq->park_listed = true;
		} else {
			eng->park_overflow = true;
		}
		pthread_mutex_unlock(&eng->park_lock);
	}
	/* After the list: a flush that clears the flag takes the list after it. */
	atomic_store(&eq->eng->any_parked, true);
	/* No doorbell (it would cost the progress thread a wake-up per batch on the poster's
	 * CPU): the ACK of the packets in flight runs the QP, and the peer sends it at once
	 * since it is not sending requests itself (see uroce_transport_post).  The progress
	 * thread also takes park_due at its next wake-up, a busy poller at its next poll; a
	 * poller that stops calling verbs under the lease leaves them until the lease ends, like
	 * anything that arrives meanwhile. */
	due_hint_min(eq->eng, eq->park_due);
}

/* Send @qp's parked packets (or drop them: park_dropped).  Under its lock. */
static void unpark(struct uroce_qp *qp, struct uroce_rc *rc)
{
	struct engine_qp *eq = engine_qp_of(rc);

	if (eq && !eq->corked && !park_dropped(qp, eq))
		eng_flush(eq);
}

/* flush_parked's visit: the QP may park again and be listed anew. */
static void unpark_listed(struct uroce_qp *qp, struct uroce_rc *rc)
{
	struct engine_qp *eq = engine_qp_of(rc);

	if (eq)
		eq->park_listed = false;
	unpark(qp, rc);
}

/* Send the parked packets of every QP parked since the last flush (an application thread
 * polls or sleeps).  The relaxed load keeps the common case -- nothing parked -- to one
 * read on a busy poll.  A QP listed and destroyed since is not found by its number; one
 * whose number was reused meanwhile has at worst its cork sent early. */
static void flush_parked(struct uroce_engine *eng)
{
	struct uroce_context *ctx = eng->ctx;
	uint32_t qpn[PARK_MAX];
	unsigned n;
	bool all;

	if (!atomic_load_explicit(&eng->any_parked, memory_order_relaxed) ||
	    !atomic_exchange(&eng->any_parked, false))
		return;
	pthread_mutex_lock(&eng->park_lock);
	n = eng->npark;
	all = eng->park_overflow;
	memcpy(qpn, eng->park_qpn, n * sizeof(qpn[0]));
	eng->npark = 0;
	eng->park_overflow = false;
	pthread_mutex_unlock(&eng->park_lock);
	if (all) {
		atomic_fetch_add_explicit(&eng->park_walks, 1, memory_order_relaxed);
		each_rc_qp(eng, unpark_listed);
		return;
	}
	pthread_mutex_lock(&ctx->lock);
	for (unsigned i = 0; i < n; i++)
		on_rc_qp(uroce_qptable_lookup(&ctx->qp_by_num, qpn[i]), unpark_listed);
	pthread_mutex_unlock(&ctx->lock);
}

bool uroce_transport_post(struct uroce_qp *qp)
{
	if (!qp->transport)
		return false;
	kick_here = true;   /* until uroce_transport_unlock_qp, which verbs calls next */
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		uroce_ud_requester(qp);
		return true;
	}
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UC) {
		struct engine_qp *eq = cork(qp);

		uroce_uc_requester(qp);
		uncork(eq);
		return true;
	}
	if (qp->qpx.qp_base.qp_type != IBV_QPT_RC) {
		return false;
	} else {
		/* A message of several packets (or several WQEs) leaves in few sendmsg: GSO. */
		struct uroce_rc *rc = uroce_rc_of(qp);
		struct engine_qp *eq = cork(qp);
		bool quiet = false;
		uint64_t now = 0;

		/* Autocork only while earlier packets are unacknowledged (so a ping-pong or a
		 * first message is never held), and only while the peer has sent no request
		 * for UROCE_RC_ACK_DEFER_IF_REQ_NS, as far as our posts saw: such a peer
		 * acknowledges at once, where one that sends may hold its ACK for its own next
		 * request (rc_resp.c).  The clock is read only when packets are in flight. */
		if (eq && rc->comp_psn != rc->req_psn && eq->eng->autocork_ns) {
			now = uroce_rc_clock();
			if (rc->resp_psn != eq->post_resp_psn) {
				eq->post_resp_psn = rc->resp_psn;
				eq->resp_moved = now;
			}
			quiet = now - eq->resp_moved >= UROCE_RC_ACK_DEFER_IF_REQ_NS;
		}
		/* The clock read that times the retransmission and stamps last_req waits until
		 * the packets have left (uroce_rc_stamp): it no longer comes between the
		 * application's post and its packets' sendmsg. */
		if (rc)
			rc->stamp_late = true;
		uroce_rc_requester(qp, true);
		if (quiet && eq->nbatch && eq->nbatch < AUTOCORK_PKTS && rc->io.arg == eq) {
			park(eq, rc, now);
			uroce_rc_stamp(rc);
			return true;
		}
		uncork(eq);
		if (rc)
			uroce_rc_stamp(rc);
	}
	return true;
}

void uroce_transport_unlock_qp(struct uroce_qp *qp)
{
	struct uroce_engine *eng = qp->uctx->transport;

	kick_here = true;   /* the unlock may return credits (uroce_rc_credit_sync) */
	uroce_rc_unlock_qp(qp);
	if (eng)
		credit_kick(eng);   /* no lock held here (verbs' post and modify paths) */
	kick_here = false;
}

/* Empty drains in a row after which a busy-polling thread yields its CPU (default; the
 * environment's UROCE_POLL_YIELD=N overrides it, 0 = never).  With shared-memory links an
 * empty drain costs no system call (a load per ring; the socket at every UDP_QUIET_EVERY-th
 * drain): about 0.1 us instead of 0.4, so the yield comes after POLL_IDLE_YIELD_SHM of
 * them, a wait as long as before.  Yielding after 4 made every wait of an ib_write_lat
 * ping-pong over shm pay a sched_yield (16% of both CPUs in the profile). */
#define POLL_IDLE_YIELD 4
#define POLL_IDLE_YIELD_SHM 64
#define POLL_CLOCK_EVERY 4

/* A thread whose yields have not given its CPU away for POLL_ALONE_NS is alone on it: it
 * yields POLL_ALONE_X times less often, until one of its yields takes POLL_AWAY_NS or more
 * (another thread ran meanwhile).  A yield that returns at once is a system call and a
 * pass through the scheduler for nothing, and its cost falls into the wait for the peer's
 * packet: across a veth a poller yields in nearly every hop of ib_write_lat (20,499 yields
 * in 20,000 iterations; 8,979 on lo, where the reply comes sooner), and UROCE_POLL_YIELD=0
 * took the hop from 6.17-6.22 to 5.80-5.83 us (bench/RESULTS.md).  What the duration of
 * one yield says is one-sided: under EEVDF a yield may come back at once while another
 * spinner waits on the same CPU, but a yield that took long means someone else ran.  Two
 * spinners sharing a CPU hand it over in a long yield each half round trip, far more often
 * than once per POLL_ALONE_NS, so they keep the short cadence; a lone poller drops to the
 * long one after POLL_ALONE_NS, and the first yield that gives the CPU away (at most
 * POLL_ALONE_X times the short cadence later) brings the short one back. */
#define POLL_AWAY_NS 3000ull
#define POLL_ALONE_NS 1000000ull
#define POLL_ALONE_X 16

/* sched_yield, timed: how this thread's yields went decides their cadence (*alone). */
static void poll_yield(bool *alone)
{
	static POLL_TLS uint64_t away_at;       /* when a yield last gave the CPU away */
	uint64_t t0 = uroce_rc_clock(), t1;

	sched_yield();
	t1 = uroce_rc_clock();
	if (!away_at || t1 - t0 >= POLL_AWAY_NS)
		away_at = t1;   /* the first yield counts as one: the short cadence at first */
	*alone = t1 - away_at >= POLL_ALONE_NS;
}

int uroce_transport_poll(struct uroce_context *ctx)
{
	static POLL_TLS int every = -1;         /* UROCE_POLL_YIELD, 0 if turned off, -2 unset */
	static POLL_TLS int idle;               /* empty drains in a row, this thread */
	static POLL_TLS bool alone;             /* its yields find nobody else (poll_yield) */
	static POLL_TLS uint64_t last_empty;    /* when this thread last drained nothing */
	static POLL_TLS uint64_t last_poll;     /* ... last drained, as far as it read the clock */
	static POLL_TLS unsigned empties;       /* empty drains in a row, this thread */
	struct uroce_engine *eng = ctx->transport;
	uint64_t now;
	const char *v;
	bool tick;
	int got;

	if (!eng)
		return 0;
	/* A thread that polls its CQ waits for what it posted: parked packets go now. */
	flush_parked(eng);
	{
		bool more;

		got = poll_batch(eng, &more, false);
		/* Stopped by the budget: more may be waiting, for which no new edge will come. */
		if (more)
			doorbell(eng);
	}
	/* A thread that keeps finding nothing is busy-polling for its peer.  When there are
	 * fewer free CPUs than spinning threads, that peer (the other process of a ping-pong,
	 * which must reply before anything can arrive, or our own progress thread) may be
	 * runnable on this very CPU: without a yield the two alternate only at the scheduler
	 * tick (4 ms at HZ=250), one tick per half round trip.  sched_yield returns at once
	 * when nothing else is runnable here, and with autogroups it gives way only within
	 * our session, so a lone spinner keeps its CPU. */
	if (got) {
		/* Two or more empty drains just before this one: the thread was spinning, and
		 * its empty drains renewed the lease and looked at the timers at most
		 * POLL_CLOCK_EVERY drains ago (microseconds, against a lease of hundreds).
		 * Then this poll leaves both to its next empty drains and returns without a
		 * clock read: that read, 23 ns here, came between a ping-pong's arriving
		 * packet and the application seeing it, every hop. */
		bool spinning = empties >= 2;

		idle = 0;
		empties = 0;
		/* A thread whose polls keep finding packets (a stream's ACKs between its
		 * posts, at most POLL_FOUND_GAP_NS apart) receives as well as one whose
		 * polls find nothing: it renews the lease too, or the progress thread, woken
		 * by each datagram on this thread's CPU, blocks on the QP lock the poster
		 * holds (a futex wait and two context switches per ACK: 13% of an
		 * ib_write_bw sender's CPU over UDP).  A clock read per such poll: it has
		 * just processed packets, which costs far more. */
		if (eng->lease_ns && !spinning) {
			uint64_t gap;

			now = uroce_rc_clock();
			gap = now - last_poll;
			/* The lease lasts until the thread's next poll is due: four times the
			 * gap since its last one, if that is longer than lease_ns, and at most
			 * POLL_FOUND_GAP_NS.  ib_write_bw's sender polls 0.1-1 ms apart: with
			 * 200 us the lease ran out between most of its polls, the progress
			 * thread took the socket back and received 50,000-75,000 of its
			 * ~200,000 datagrams in 4 s (twice the gap: still 45,000-55,000).
			 * The stamp then lies ahead of now.  An application that stops
			 * polling without a word leaves a datagram at most that late, once per
			 * LEASE_BACKOFF_NS. */
			if (gap < POLL_FOUND_GAP_NS) {
				uint64_t len = 4 * gap < POLL_FOUND_GAP_NS ? 4 * gap : POLL_FOUND_GAP_NS;

				if (len < eng->lease_ns)
					len = eng->lease_ns;
				lease_renew(eng, now + (len - eng->lease_ns));
			}
			last_poll = now;
			/* The progress thread does not wake for deadlines under the lease
			 * (LEASE_CHECK_MAX_NS): a poller whose polls keep finding packets runs
			 * them too. */
			if (atomic_load(&eng->sock_off)) {
				uint64_t due = atomic_load_explicit(&eng->due_hint, memory_order_relaxed);

				if (due && now >= due)
					run_timers(eng);
			}
		}
		return got;
	}
	/* Two empty drains close together: this thread busy-polls; renew the lease, and run
	 * the timers that came due (retransmission, RNR retry, a deferred ACK): under the
	 * lease the progress thread does not wake for them.  The clock is read at the first
	 * two empty drains after a non-empty one (two drains in a row: the lease's test, even
	 * for short waits and on a loaded CPU) and then at every POLL_CLOCK_EVERY-th only (a
	 * clock read was 10% of a busy poller's user time); timers are still checked within
	 * microseconds. */
	tick = empties < 2 || !(empties % POLL_CLOCK_EVERY);
	empties++;
	if (eng->lease_ns && tick) {
		uint64_t due = atomic_load_explicit(&eng->due_hint, memory_order_relaxed);

		now = uroce_rc_clock();
		if (now - last_empty < POLL_SPIN_GAP_NS)
			lease_renew(eng, now);
		last_empty = last_poll = now;
		if (due && now >= due && atomic_load(&eng->sock_off)) {
			run_timers(eng);
			got = 1;   /* a timer may have completed WQEs (errors, flushes) */
		}
	}
	if (every == -1) {
		v = getenv("UROCE_POLL_YIELD");
		every = v ? atoi(v) : -2;
		if (v && every < 0)
			every = 0;
	}
	if (every > 0 && ++idle >= every) {
		idle = 0;
		sched_yield();
	} else if (every < 0 && ++idle >= (uroce_shm_active(eng->shm) ? POLL_IDLE_YIELD_SHM : POLL_IDLE_YIELD) *
						  (alone ? POLL_ALONE_X : 1)) {
		idle = 0;
		poll_yield(&alone);
	}
	return got;
}

void uroce_transport_will_sleep(struct uroce_context *ctx)
{
	struct uroce_engine *eng = ctx ? ctx->transport : NULL;

	if (eng)
		flush_parked(eng);   /* about to wait for what was posted */
	if (!eng || !eng->lease_ns || !atomic_load_explicit(&eng->poll_stamp, memory_order_relaxed))
		return;
	atomic_store(&eng->poll_stamp, 0);
	if (atomic_load(&eng->sock_off))
		doorbell(eng);
}

void uroce_transport_ctx_close(struct uroce_context *ctx)
{
	struct uroce_engine *eng = ctx->transport;

	if (!eng)
		return;
	pthread_mutex_lock(&engines_lock);
	for (struct uroce_engine **pp = &engines; *pp; pp = &(*pp)->next_eng) {
		if (*pp == eng) {
			*pp = eng->next_eng;
			break;
		}
	}
	pthread_mutex_unlock(&engines_lock);
	atomic_store(&eng->stop, true);
	doorbell(eng);
	pthread_join(eng->thread, NULL);
	if (getenv("UROCE_ENGINE_STATS")) {
		struct uroce_netio_stats st;
		const uint64_t *sc = uroce_netio_shm_counters(eng->nio);

		uroce_netio_stats(eng->nio, &st);
		fprintf(stderr, "UROCE_ENGINE_STATS pid=%d rx_app=%llu rx_progress=%llu tx_packets=%llu "
			"tx_gso_sends=%llu shm_tx_packets=%llu shm_rx_packets=%llu shm_wakeups_tx=%llu "
			"shm_tx_waits=%llu shm_tx_full=%llu credit_waits=%llu tx_sockets_max=%llu park_walks=%llu "
			"timer_walks=%llu timer_deferred=%llu rx_socket_drops=%llu lease_looks=%llu "
			"lease_backoffs=%llu rx_connected=%llu rx_conn_sockets=%llu rx_conn_shared=%llu\n",
			(int)getpid(),
			(unsigned long long)atomic_load(&eng->rx_app),
			(unsigned long long)atomic_load(&eng->rx_progress),
			(unsigned long long)st.tx_packets, (unsigned long long)st.tx_gso_sends,
			(unsigned long long)(sc ? sc[UROCE_SHM_C_TX_PACKETS] : 0),
			(unsigned long long)(sc ? sc[UROCE_SHM_C_RX_PACKETS] : 0),
			(unsigned long long)(sc ? sc[UROCE_SHM_C_WAKE_TX] : 0),
			(unsigned long long)(sc ? sc[UROCE_SHM_C_TX_WAITS] : 0),
			(unsigned long long)(sc ? sc[UROCE_SHM_C_TX_FULL] : 0),
			(unsigned long long)atomic_load(&eng->cr_waits),
			(unsigned long long)st.tx_sockets_max,
			(unsigned long long)atomic_load(&eng->park_walks),
			(unsigned long long)atomic_load(&eng->timer_walks),
			(unsigned long long)atomic_load(&eng->timer_deferred),
			(unsigned long long)st.rx_socket_drops,
			(unsigned long long)atomic_load(&eng->lease_looks),
			(unsigned long long)atomic_load(&eng->lease_backoffs),
			(unsigned long long)st.rx_connected, (unsigned long long)st.rx_conn_sockets,
			(unsigned long long)st.rx_conn_shared);
	}
	uroce_shm_close(eng->shm);
	uroce_netio_close(eng->nio);
	close(eng->epfd);
	close(eng->tfd);
	close(eng->efd);
	dests_free(eng);
	free(eng);
	ctx->transport = NULL;
}

int uroce_transport_qp_stats(struct uroce_qp *qp, struct uroce_rc_stats *out)
{
	int ret;

	pthread_mutex_lock(&qp->lock);
	ret = uroce_rc_stats(qp, out);
	pthread_mutex_unlock(&qp->lock);
	return ret;
}
