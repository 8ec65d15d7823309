/* shm.c — the shared-memory link between uroce processes of one host (shm.h,
 * ipc/shm_proto.h, docs/transport.md "The shared-memory link").
 *
 * Send: shm_tx_packet() writes one record (header + packet) at the ring's tail; the batch
 * is published with one store of tail, then the peer is woken if it said it sleeps.  A
 * full ring is waited for, bounded (SHM_FULL_WAIT_NS), on the futex of head: the peer's
 * consumer runs in another process and needs none of our locks, so the wait ends as soon
 * as it has read; a link of a context with itself never waits (its consumer would be us),
 * nor does a sender while the peer has records for us on the link (tx_reserve).
 * What the ring still cannot take after the wait is not lost: it waits, copied, in the
 * link's spill, in send order, and every later packet of the link goes behind it; the
 * consumer writes our wake eventfd when it moves head (prod_waiting bit 1), and whoever
 * drains our links (uroce_shm_poll) or sends next on the link moves the spill into the
 * ring.  Only a full spill (SPILL_MIN, SPILL_RINGS rings) loses packets (shm_tx_full).
 * The wait cannot be unbounded: two processes whose senders wait for room in each other's
 * rings, while the threads that would drain them wait for the senders' QP locks, would
 * wait for ever.
 *
 * Receive: shm_rx_packet() checks a record and its packet as netio checks a datagram
 * (length, uroce_pkt_validate, the ICRC when the sender computed it) and hands it to the
 * engine in place; head moves on after the engine is done with it.
 *
 * The peer is another process, possibly another user, possibly broken: every index,
 * length and header read from the shared memory is read once into a local and checked
 * before use.  A ring that breaks the rules (a length out of bounds, tail behind head,
 * more bytes than the ring holds) makes the link "broken": it is no longer read or
 * written, and behaves like a dead peer (counted in shm_links_broken).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_proto.h"
#include "transport/capture.h"
#include "transport/fault.h"
#include "transport/shm.h"
#include "verbs/verbs.h"
#include "wire/icrc.h"

const char *const uroce_shm_counter_names[UROCE_SHM_C_NUM] = {
#define X(n, s) s,
	UROCE_SHM_COUNTERS(X)
#undef X
};

#define ROCE_PORT 4791
#define REC_HDR ((uint32_t)sizeof(struct uroce_shm_rec))
#define SHM_FULL_WAIT_NS 2000000ull      /* longest a send waits for room in a full ring */
#define HEAD_PUBLISH_EVERY 16            /* records consumed between two stores of head */
#define CACHE_SLOTS 64                   /* QPN blocks remembered (uroce_shm_connect) */
#define CACHE_NEG_NS 1000000000ull       /* a "not by shm" answer is asked again after this */
#define SPILL_MIN (4u << 20)             /* a link's spill holds at least this many bytes */
#define SPILL_RINGS 4u                   /* ... or this many rings' worth, if more */
/* prod_waiting's bits (shm_proto.h): a producer sleeps on the futex of head (FUTEX), or has
 * records in its spill and wants its wake eventfd written when head moves (SPILL). */
#define PROD_WAIT_FUTEX 1u
#define PROD_WAIT_SPILL 2u

/* One ring as one side sees it: the control block and the data in the mapping, and what
 * this side keeps to itself (its own index, never re-read from shared memory). */
struct ring {
	struct uroce_shm_ring *ctl;
	uint8_t *data;
	uint64_t pos;                    /* tail (our tx ring) or head (our rx ring) */
	uint64_t published;              /* the value last stored in ctl (rx: head) */
	uint64_t seen;                   /* tx: the consumer's head as last read (the room it
					  * leaves is only ever more than that says) */
};

struct uroce_shm_link {
	struct uroce_shm *s;
	_Atomic unsigned refs;           /* the list's (while listed) and each user's */
	uint64_t id;
	unsigned side;                   /* ours: the ring we send on */
	bool self;
	uint8_t *map;
	size_t size;
	uint32_t r;                      /* ring bytes, a power of two (copied at map time) */
	const struct uroce_shm_hdr *hdr;
	int peer_efd;
	int32_t peer_pid;
	pthread_mutex_t tx_lock;         /* senders of this link */
	struct ring tx, rx;              /* rx: under the shm's rx_lock */
	/* Packets and bytes written since the last uroce_shm_send or rx_ring added them to
	 * the counters: one atomic add per batch instead of two per packet (a locked add
	 * after a 4 KiB copy into the ring waited for the copy's stores). */
	uint64_t tx_pkts, tx_bytes;      /* under tx_lock */
	uint32_t tx_qpn;                 /* the QP sending (for a capture), under tx_lock */
	/* Fault injection's reorder: a packet held back until the next one (under tx_lock;
	 * allocated only with UROCE_FAULT). */
	uint8_t *held;
	size_t held_len;
	struct uroce_shm_rec held_rec;
	bool has_held;
	atomic_bool broken;              /* the peer broke the ring rules: give it up */
	/* The spill (under tx_lock): records a full ring could not take, in send order, each a
	 * struct spill_ent and its packet, from spill_off to spill_end of a malloc'd buffer of
	 * spill_cap bytes.  While it holds anything, every new packet of the link goes behind
	 * it, so the ring still carries the link's packets in the order they were sent. */
	uint8_t *spill;
	size_t spill_off, spill_end, spill_cap;
	_Atomic size_t spill_bytes;      /* spill_end - spill_off, read without the lock */
	bool tx_nowait;                  /* this send does not wait for room (under tx_lock) */
};

struct spill_ent {
	struct uroce_shm_rec rec;
	uint32_t qpn;                    /* the sending QP (a capture's) */
	uint32_t pad;
};

/* What uroced answered for a destination: a link for the QPN's whole block (the block is
 * the owner's while it lives), or "not by shm" for that one QPN, asked again later (the
 * QP may not exist yet; UD destinations on other hosts are asked once a second). */
struct cache_ent {
	uint8_t gid[16];
	uint32_t block;                  /* QPN / UROCE_IPC_QPN_BLOCK; UINT32_MAX = empty */
	uint32_t qpn;                    /* NULL entries: the QPN asked for */
	struct uroce_shm_link *link;     /* a reference; NULL: use UDP */
	uint64_t until;                  /* NULL entries: ask again after this */
};

struct uroce_shm {
	struct uroce_context *ctx;
	int efd;
	uint64_t own[UROCE_SHM_C_NUM];
	uint64_t *c;                     /* the counters: the caller's block, or own */
	uint32_t ring_bytes;             /* UROCE_SHM_RING_KB, asked for new links */
	bool icrc;                       /* compute the ICRC (UROCE_SHM_ICRC; always with faults) */

	/* Every mapped link, each holding a reference: under add_lock, which is taken with
	 * no other lock of this file held except rx_lock and cache_lock (a QP's lock may be
	 * held: uroce_shm_connect runs in ibv_modify_qp and ibv_post_send). */
	pthread_mutex_t add_lock;
	struct uroce_shm_link **all;
	unsigned nall, capall;
	_Atomic unsigned gen;            /* moves on when a link is added */
	/* The pollers' copy of it, and their receive rings: under rx_lock (try-locked; the
	 * engine delivers packets with it held, taking the context's and QPs' locks, so
	 * nothing may take rx_lock with one of those held). */
	pthread_mutex_t rx_lock;
	atomic_bool rx_missed;
	struct uroce_shm_link **links;
	unsigned nlinks, caplinks, links_gen;
	uint64_t rx_pkts, rx_bytes;      /* delivered, not yet counted (as tx_pkts) */

	pthread_mutex_t cache_lock;
	struct cache_ent cache[CACHE_SLOTS];

	pthread_mutex_t fault_lock;
	struct uroce_fault fault;
	uint8_t *scratch;                /* a corrupted copy (fault injection) */
	struct uroce_cap *cap;           /* netio's capture tap (capture.h); NULL: none */
};

static inline void ctr_add(struct uroce_shm *s, enum uroce_shm_ctr i, uint64_t v)
{
	__atomic_fetch_add(&s->c[i], v, __ATOMIC_RELAXED);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t rec_size(uint32_t len)
{
	return (REC_HDR + len + UROCE_SHM_ALIGN - 1) & ~(UROCE_SHM_ALIGN - 1);
}

static bool gid_is_v4mapped(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

	return !memcmp(gid, prefix, sizeof(prefix));
}

static void icrc_addr(const uint8_t sgid[16], uint16_t sport, const uint8_t dgid[16],
		      struct uroce_icrc_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (gid_is_v4mapped(sgid)) {
		a->family = AF_INET;
		memcpy(&a->src.v4, sgid + 12, 4);
		memcpy(&a->dst.v4, dgid + 12, 4);
	} else {
		a->family = AF_INET6;
		memcpy(&a->src.v6, sgid, 16);
		memcpy(&a->dst.v6, dgid, 16);
	}
	a->sport = sport;
	a->dport = ROCE_PORT;
}

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

/* head's low 32 bits: what a producer waiting for room sleeps on (little-endian). */
static uint32_t *head_word(struct uroce_shm_ring *ctl)
{
	return (uint32_t *)(void *)&ctl->head;
}

static bool peer_gone(const struct uroce_shm_link *l)
{
	return atomic_load_explicit(&l->broken, memory_order_relaxed) ||
	       __atomic_load_n(&l->hdr->side[l->side ^ 1].gone, __ATOMIC_RELAXED) ||
	       (!l->self && __atomic_load_n(&l->hdr->side[l->side].gone, __ATOMIC_RELAXED));
}

static void link_break(struct uroce_shm_link *l, const char *why)
{
	if (!atomic_exchange(&l->broken, true)) {
		ctr_add(l->s, UROCE_SHM_C_BROKEN, 1);
		fprintf(stderr, "uroce: shm link %llu to pid %d: %s; link given up\n",
			(unsigned long long)l->id, (int)l->peer_pid, why);
	}
}

/* Write 1 to the peer's eventfd.  Only if it is still non-blocking: the peer owns the file
 * description and could clear O_NONBLOCK, and a write to a full counter would then block
 * us (the check and the write are not atomic; a peer that races them can delay us, as one
 * that never reads its ring can). */
static void wake_peer(struct uroce_shm_link *l)
{
	uint64_t one = 1;
	int fl = fcntl(l->peer_efd, F_GETFL);

	if (fl < 0 || !(fl & O_NONBLOCK))
		return;
	if (write(l->peer_efd, &one, sizeof(one)) == sizeof(one))
		ctr_add(l->s, UROCE_SHM_C_WAKE_TX, 1);
}

/* ---------------------------------------------------------------- send */

/* Publish what was written since the last publish; wake a consumer that sleeps. */
static void tx_publish(struct uroce_shm_link *l)
{
	struct uroce_shm_ring *ctl = l->tx.ctl;

	if (l->tx.pos == l->tx.published)
		return;
	l->tx.published = l->tx.pos;
	/* seq_cst store, then a seq_cst load of sleeping: a consumer that set sleeping and
	 * then read tail either sees this tail or is seen sleeping (shm_proto.h). */
	__atomic_store_n(&ctl->tail, l->tx.pos, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ctl->sleeping, __ATOMIC_SEQ_CST) &&
	    __atomic_exchange_n(&ctl->sleeping, 0, __ATOMIC_SEQ_CST))
		wake_peer(l);
}

/* Room for a record of @need bytes at the tail: a pointer to it (after a wrap marker if
 * the space to the end is too short), or NULL when the ring stays full (or the peer is
 * gone or broke the ring: *gone). */
static uint8_t *tx_reserve(struct uroce_shm_link *l, uint32_t need, bool *gone)
{
	struct uroce_shm_ring *ctl = l->tx.ctl;
	uint64_t deadline = 0;
	bool waited = false;

	*gone = false;
	for (;;) {
		uint32_t off = (uint32_t)(l->tx.pos & (l->r - 1)), contig = l->r - off;
		uint64_t want = need <= contig ? need : (uint64_t)contig + need;
		uint64_t head = l->tx.seen, used = l->tx.pos - head;
		uint32_t seen;
		struct timespec ts;
		uint64_t now;

		/* The consumer's line is read only when the head last seen leaves too little
		 * room: it moves on every few records, and each read of it is a miss. */
		if (l->r - used < want) {
			head = __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE);
			used = l->tx.pos - head;
			if (used <= l->r)
				l->tx.seen = head;
		}
		if (used > l->r) {
			link_break(l, "head beyond tail");
			*gone = true;
			return NULL;
		}
		if (l->r - used >= want) {
			if (need > contig) {
				/* Too short to the end: a wrap marker, the record at offset 0. */
				struct uroce_shm_rec *w = (struct uroce_shm_rec *)(void *)(l->tx.data + off);

				w->len = UROCE_SHM_REC_WRAP;
				l->tx.pos += contig;
				off = 0;
			}
			if (waited)
				ctr_add(l->s, UROCE_SHM_C_TX_WAITS, 1);
			return l->tx.data + off;
		}
		/* Full.  Let the consumer see what this batch wrote so far, then wait for it
		 * to move head: bounded, and never for ourselves. */
		tx_publish(l);
		if (l->self || l->tx_nowait || peer_gone(l))
			break;
		/* Nor while the peer has records for us on this link (its tail beyond the head
		 * we published): it may itself be waiting for room in that ring, which only a
		 * drain on our side makes, so two waiting senders would take turns at
		 * SHM_FULL_WAIT_NS each while neither process reads.  With 1,000 QPs a receive
		 * batch of 64 ACKs took up to 140 ms that way, and the ACKs behind it passed
		 * their QPs' local ACK timeout (bench/RESULTS.md, "1,000 QPs over shm").  The
		 * spill takes what does not wait, and RC requesters stop until it drains
		 * (io.busy). */
		if (__atomic_load_n(&l->rx.ctl->tail, __ATOMIC_ACQUIRE) !=
		    __atomic_load_n(&l->rx.ctl->head, __ATOMIC_RELAXED))
			break;
		now = now_ns();
		if (!deadline)
			deadline = now + SHM_FULL_WAIT_NS;
		else if (now >= deadline)
			break;
		waited = true;
		seen = (uint32_t)head;
		__atomic_fetch_or(&ctl->prod_waiting, PROD_WAIT_FUTEX, __ATOMIC_SEQ_CST);
		if ((uint32_t)__atomic_load_n(&ctl->head, __ATOMIC_SEQ_CST) == seen) {
			uint64_t left = deadline - now;

			ts.tv_sec = (time_t)(left / 1000000000ull);
			ts.tv_nsec = (long)(left % 1000000000ull);
			futex(head_word(ctl), FUTEX_WAIT, seen, &ts);
		}
	}
	*gone = peer_gone(l);
	return NULL;
}

/* One record at the tail, not yet published: the only place a packet enters a ring (the
 * capture point, shm.h).  @p is what tx_reserve returned for it. */
static void tx_write(struct uroce_shm_link *l, uint8_t *p, uint32_t qpn, const struct uroce_shm_rec *rec,
		     const struct iovec *iov, unsigned iovcnt)
{
	uint8_t *d = p + REC_HDR;

	memcpy(p, rec, REC_HDR);
	for (unsigned i = 0; i < iovcnt; i++) {
		memcpy(d, iov[i].iov_base, iov[i].iov_len);
		d += iov[i].iov_len;
	}
	l->tx.pos += rec_size(rec->len);
	if (uroce_cap_on(l->s->cap))
		uroce_cap_shm(l->s->cap, false, qpn, rec, iov, iovcnt);
	l->tx_pkts++;
	l->tx_bytes += rec->len;
}

/* The ring stays full and a spill is left: ask the consumer to write our wake eventfd when
 * it moves head, so that whoever drains our links (uroce_shm_poll) sends the spill then
 * even if nothing else runs.  The consumer may have emptied the ring before it saw the
 * request: true when there is room now (try again). */
static bool tx_ask_room(struct uroce_shm_link *l, uint32_t need)
{
	uint32_t off = (uint32_t)(l->tx.pos & (l->r - 1)), contig = l->r - off;
	uint64_t want = need <= contig ? need : (uint64_t)contig + need, head;

	__atomic_fetch_or(&l->tx.ctl->prod_waiting, PROD_WAIT_SPILL, __ATOMIC_SEQ_CST);
	head = __atomic_load_n(&l->tx.ctl->head, __ATOMIC_SEQ_CST);
	return l->tx.pos - head <= l->r && l->r - (l->tx.pos - head) >= want;
}

static void spill_drop(struct uroce_shm_link *l)
{
	struct uroce_shm *s = l->s;
	uint64_t n = 0;

	for (size_t off = l->spill_off; off < l->spill_end;) {
		const struct spill_ent *e = (const struct spill_ent *)(void *)(l->spill + off);

		off += (sizeof(*e) + e->rec.len + 7) & ~(size_t)7;
		n++;
	}
	if (n)
		ctr_add(s, UROCE_SHM_C_TX_LOST, n);
	l->spill_off = l->spill_end = 0;
	atomic_store_explicit(&l->spill_bytes, 0, memory_order_relaxed);
}

/* Move the spill into the ring, as far as it has room (waiting for it as the send does,
 * unless tx_nowait).  Returns 0 (spill empty), -EAGAIN (ring full, spill left),
 * -EPIPE (peer gone: the spill is lost). */
static int spill_flush(struct uroce_shm_link *l)
{
	while (l->spill_off < l->spill_end) {
		const struct spill_ent *e = (const struct spill_ent *)(void *)(l->spill + l->spill_off);
		uint32_t need = rec_size(e->rec.len);
		struct iovec v = { (void *)(e + 1), e->rec.len };
		bool gone;
		uint8_t *p = tx_reserve(l, need, &gone);

		if (!p) {
			if (gone) {
				spill_drop(l);
				return -EPIPE;
			}
			if (tx_ask_room(l, need))
				continue;
			return -EAGAIN;
		}
		tx_write(l, p, e->qpn, &e->rec, &v, 1);
		l->spill_off += (sizeof(*e) + e->rec.len + 7) & ~(size_t)7;
	}
	l->spill_off = l->spill_end = 0;
	atomic_store_explicit(&l->spill_bytes, 0, memory_order_relaxed);
	return 0;
}

/* Keep a packet the ring cannot take now in the spill.  false when the spill is full
 * (SPILL_MIN, or SPILL_RINGS rings): then it is lost, like a datagram to a full socket. */
static bool spill_add(struct uroce_shm_link *l, const struct uroce_shm_rec *rec,
		      const struct iovec *iov, unsigned iovcnt)
{
	size_t max = (size_t)l->r * SPILL_RINGS > SPILL_MIN ? (size_t)l->r * SPILL_RINGS : SPILL_MIN;
	size_t need = (sizeof(struct spill_ent) + rec->len + 7) & ~(size_t)7;
	struct spill_ent *e;
	uint8_t *d;

	if (l->spill_end - l->spill_off + need > max)
		return false;
	if (l->spill_end + need > l->spill_cap && l->spill_off) {
		memmove(l->spill, l->spill + l->spill_off, l->spill_end - l->spill_off);
		l->spill_end -= l->spill_off;
		l->spill_off = 0;
	}
	if (l->spill_end + need > l->spill_cap) {
		size_t cap = l->spill_cap ? l->spill_cap : 64u << 10;
		uint8_t *grown;

		while (cap < l->spill_end + need)
			cap *= 2;
		grown = realloc(l->spill, cap);
		if (!grown)
			return false;
		l->spill = grown;
		l->spill_cap = cap;
	}
	e = (struct spill_ent *)(void *)(l->spill + l->spill_end);
	e->rec = *rec;
	e->qpn = l->tx_qpn;
	e->pad = 0;
	d = (uint8_t *)(e + 1);
	for (unsigned i = 0; i < iovcnt; i++) {
		memcpy(d, iov[i].iov_base, iov[i].iov_len);
		d += iov[i].iov_len;
	}
	l->spill_end += need;
	atomic_store_explicit(&l->spill_bytes, l->spill_end - l->spill_off, memory_order_relaxed);
	ctr_add(l->s, UROCE_SHM_C_TX_SPILLED, 1);
	return true;
}

/* Every packet sent on a link passes here: into the ring, or into the spill behind what is
 * there already.  The ring is a lossless link (docs/transport.md): a consumer that does not
 * read for a while (its process descheduled for a few ms on a busy machine) must not cost
 * packets, which UC and UD cannot get back -- the full ring used to drop the rest of the
 * batch after SHM_FULL_WAIT_NS.  Returns 0, -EAGAIN (ring and spill full: lost), -EPIPE
 * (peer gone). */
static int shm_tx_packet(struct uroce_shm_link *l, const struct uroce_shm_rec *rec,
			 const struct iovec *iov, unsigned iovcnt)
{
	uint32_t need = rec_size(rec->len);
	bool gone;
	uint8_t *p;

	if (l->spill_off == l->spill_end) {
		for (;;) {
			p = tx_reserve(l, need, &gone);
			if (p) {
				tx_write(l, p, l->tx_qpn, rec, iov, iovcnt);
				return 0;
			}
			if (gone)
				return -EPIPE;
			if (!tx_ask_room(l, need))
				break;
		}
	}
	return spill_add(l, rec, iov, iovcnt) ? 0 : -EAGAIN;
}

/* The ICRC slot: the last UROCE_ICRC_LEN bytes of the packet, which may straddle the last
 * pieces (netio.c's put_icrc). */
static void put_icrc(struct uroce_txpkt *p, uint32_t icrc)
{
	uint8_t v[UROCE_ICRC_LEN];
	size_t need = UROCE_ICRC_LEN;

	uroce_put_le32(v, icrc);
	for (unsigned i = p->iovcnt; i-- > 0 && need;) {
		size_t k = p->iov[i].iov_len < need ? p->iov[i].iov_len : need;

		memcpy((uint8_t *)p->iov[i].iov_base + p->iov[i].iov_len - k, v + need - k, k);
		need -= k;
	}
}

static void gather(const struct uroce_txpkt *p, uint8_t *dst)
{
	size_t off = 0;

	for (unsigned i = 0; i < p->iovcnt; i++) {
		memcpy(dst + off, p->iov[i].iov_base, p->iov[i].iov_len);
		off += p->iov[i].iov_len;
	}
}

/* One packet through fault injection, as netio.c's send_one_fault: drop, corrupt (a copy),
 * dup, reorder (a copy held until the next packet on this link, as netio holds one per
 * socket).  The decisions are the context's, in send order (fault_lock, which also guards
 * the scratch copy); the held packet is the link's (its tx_lock, held by the caller). */
static int tx_fault(struct uroce_shm_link *l, struct uroce_shm_rec *rec, struct uroce_txpkt *p)
{
	struct uroce_shm *s = l->s;
	struct uroce_fault_action a;
	struct iovec one, *iov = p->iov;
	unsigned iovcnt = p->iovcnt;
	int ret = 0;

	pthread_mutex_lock(&s->fault_lock);
	a = uroce_fault_decide(&s->fault, p->len);
	if (a.flags & UROCE_FAULT_DROP) {
		ctr_add(s, UROCE_SHM_C_FAULT_DROP, 1);
		goto out;
	}
	if (a.flags & UROCE_FAULT_CORRUPT) {
		/* Never the caller's memory: the pieces may be the application's buffers. */
		gather(p, s->scratch);
		uroce_fault_corrupt(s->scratch, p->len, &a);
		one = (struct iovec){ s->scratch, p->len };
		iov = &one;
		iovcnt = 1;
		ctr_add(s, UROCE_SHM_C_FAULT_CORRUPT, 1);
	}
	if (a.flags & UROCE_FAULT_REORDER) {
		if (l->has_held) {
			/* Still holding an earlier one: it goes first (overtaken by nothing). */
			struct iovec h = { l->held, l->held_len };

			ret = shm_tx_packet(l, &l->held_rec, &h, 1);
			if (ret)
				goto out;
			l->has_held = false;
		}
		{
			size_t off = 0;

			for (unsigned i = 0; i < iovcnt; i++) {
				memcpy(l->held + off, iov[i].iov_base, iov[i].iov_len);
				off += iov[i].iov_len;
			}
		}
		l->held_len = p->len;
		l->held_rec = *rec;
		l->has_held = true;
		ctr_add(s, UROCE_SHM_C_FAULT_REORDER, 1);
		if (a.flags & UROCE_FAULT_DUP) {
			/* The duplicate goes now, the original after the next packet. */
			ctr_add(s, UROCE_SHM_C_FAULT_DUP, 1);
			ret = shm_tx_packet(l, rec, iov, iovcnt);
		}
		goto out;
	}
	ret = shm_tx_packet(l, rec, iov, iovcnt);
	if (!ret && (a.flags & UROCE_FAULT_DUP)) {
		ctr_add(s, UROCE_SHM_C_FAULT_DUP, 1);
		ret = shm_tx_packet(l, rec, iov, iovcnt);
	}
	if (!ret && l->has_held) {
		struct iovec h = { l->held, l->held_len };

		/* Sent, or lost to a full ring like any packet. */
		if (shm_tx_packet(l, &l->held_rec, &h, 1) != -EPIPE)
			l->has_held = false;
	}
out:
	pthread_mutex_unlock(&s->fault_lock);
	return ret;
}

int uroce_shm_send(struct uroce_shm_link *l, const struct uroce_shm_src *src,
		   const struct uroce_netaddr *dst, struct uroce_txpkt *pkts, unsigned n)
{
	struct uroce_shm *s;
	struct uroce_shm_rec rec;
	struct uroce_icrc_addr ia;
	unsigned i;
	int ret = 0;

	if (!l || !src || !dst || (!pkts && n))
		return -EINVAL;
	s = l->s;
	for (unsigned k = 0; k < n; k++)
		if (pkts[k].iovcnt == 0 || pkts[k].iovcnt > 4 ||
		    pkts[k].len < UROCE_BTH_LEN + UROCE_ICRC_LEN || pkts[k].len > UROCE_SHM_PKT_MAX)
			return -EINVAL;
	if (gid_is_v4mapped(dst->gid) != gid_is_v4mapped(src->sgid))
		return -EAFNOSUPPORT;
	if (peer_gone(l)) {
		/* Lost, as on a wire to a dead host: the QP's retries end in RETRY_EXC_ERR. */
		ctr_add(s, UROCE_SHM_C_TX_LOST, n);
		if (atomic_load_explicit(&l->spill_bytes, memory_order_relaxed)) {
			pthread_mutex_lock(&l->tx_lock);
			spill_drop(l);
			pthread_mutex_unlock(&l->tx_lock);
		}
		return (int)n;
	}
	memset(&rec, 0, sizeof(rec));
	memcpy(rec.sgid, src->sgid, 16);
	memcpy(rec.dgid, dst->gid, 16);
	rec.sport = src->sport;
	rec.tclass = src->tclass;
	rec.hop_limit = src->hop_limit ? src->hop_limit : 64;
	rec.flags = s->icrc ? UROCE_SHM_REC_ICRC : 0;
	if (s->icrc)
		icrc_addr(src->sgid, src->sport, dst->gid, &ia);
	pthread_mutex_lock(&l->tx_lock);
	l->tx_nowait = false;
	/* What a full ring left in the spill goes first (send order); what it cannot take
	 * now, the new packets queue behind. */
	if (l->spill_off != l->spill_end)
		spill_flush(l);
	l->tx_qpn = src->qpn;
	for (i = 0; i < n; i++) {
		struct uroce_txpkt *p = &pkts[i];

		rec.len = (uint32_t)p->len;
		/* Like a UDP send: the ICRC for IPv4 Identification 0 (no GSO here), or a zero
		 * slot that says "not computed" (the record's flag). */
		put_icrc(p, s->icrc ? uroce_netio_icrc(&ia, 0, p->iov, p->iovcnt, p->len) : 0);
		ret = s->fault.enabled ? tx_fault(l, &rec, p) : shm_tx_packet(l, &rec, p->iov, p->iovcnt);
		if (ret)
			break;
	}
	tx_publish(l);
	ctr_add(s, UROCE_SHM_C_TX_PACKETS, l->tx_pkts);
	ctr_add(s, UROCE_SHM_C_TX_BYTES, l->tx_bytes);
	l->tx_pkts = l->tx_bytes = 0;
	pthread_mutex_unlock(&l->tx_lock);
	if (ret == -EPIPE) {
		ctr_add(s, UROCE_SHM_C_TX_LOST, n - i);
		return (int)n;
	}
	if (ret == -EAGAIN) {
		ctr_add(s, UROCE_SHM_C_TX_FULL, 1);
		return (int)i;
	}
	return (int)n;
}

bool uroce_shm_link_busy(const struct uroce_shm_link *l)
{
	return l && atomic_load_explicit(&l->spill_bytes, memory_order_relaxed) != 0;
}

/* ---------------------------------------------------------------- receive */

/* Every packet that comes out of a ring passes here (the capture point, shm.h): @rec is
 * the record header (a private copy), @pkt its packet in the ring.  Validated as netio
 * validates a datagram, then delivered.  Returns fn's result. */
static int shm_rx_packet(struct uroce_shm *s, const struct uroce_shm_rec *rec, const uint8_t *pkt,
			 uroce_netio_rx_fn fn, void *arg)
{
	struct uroce_rx_ctx rc = { .mtu = 0, .addr = NULL };
	struct uroce_rxpkt p;
	enum uroce_rx_err e;

	if (uroce_cap_on(s->cap)) {   /* dropped ones too: what arrived */
		struct iovec v = { (void *)pkt, rec->len };

		uroce_cap_shm(s->cap, true, 0, rec, &v, 1);
	}
	memset(&p, 0, sizeof(p));
	memcpy(p.src.gid, rec->sgid, 16);
	p.src.port = rec->sport;
	memcpy(p.dgid, rec->dgid, 16);
	e = uroce_pkt_validate(pkt, rec->len, &rc, &p.pkt);
	if (e == UROCE_RX_OK && (rec->flags & UROCE_SHM_REC_ICRC)) {
		struct uroce_icrc_addr ia;

		icrc_addr(rec->sgid, rec->sport, rec->dgid, &ia);
		/* No GSO on this link: a sender computes every ICRC for ID 0. */
		p.pkt.icrc_status = uroce_icrc_verify(&ia, pkt, rec->len, 0, NULL);
		if (p.pkt.icrc_status != UROCE_ICRC_OK) {
			ctr_add(s, UROCE_SHM_C_RX_BAD_ICRC, 1);
			e = UROCE_RX_BAD_ICRC;
		}
	}
	if (e != UROCE_RX_OK || gid_is_v4mapped(rec->sgid) != gid_is_v4mapped(rec->dgid)) {
		ctr_add(s, UROCE_SHM_C_RX_DROPS, 1);
		return 0;
	}
	p.buf = pkt;
	p.len = rec->len;
	p.traffic_class = rec->tclass;
	p.hop_limit = rec->hop_limit;
	p.flow_label = gid_is_v4mapped(rec->sgid) ? 0 : rec->flow_label & 0xFFFFF;
	s->rx_pkts++;
	s->rx_bytes += rec->len;
	return fn(arg, &p);
}

static void rx_publish(struct uroce_shm_link *l)
{
	struct uroce_shm_ring *ctl = l->rx.ctl;

	if (l->rx.pos == l->rx.published)
		return;
	l->rx.published = l->rx.pos;
	__atomic_store_n(&ctl->head, l->rx.pos, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ctl->prod_waiting, __ATOMIC_SEQ_CST)) {
		uint32_t w = __atomic_exchange_n(&ctl->prod_waiting, 0, __ATOMIC_SEQ_CST);

		if (w & PROD_WAIT_FUTEX)
			futex(head_word(ctl), FUTEX_WAKE, 1, NULL);
		/* The producer left records in its spill: its wake eventfd tells whoever
		 * drains its links (its progress thread, or a busy poller) to send them. */
		if (w & PROD_WAIT_SPILL)
			wake_peer(l);
	}
}

/* Move @l's spill into its ring if it has room now; never waits (the caller drains). */
static void tx_spill_retry(struct uroce_shm_link *l)
{
	if (!atomic_load_explicit(&l->spill_bytes, memory_order_relaxed) || pthread_mutex_trylock(&l->tx_lock))
		return;   /* a sender holds the lock: it sends the spill first itself */
	if (peer_gone(l)) {
		spill_drop(l);
	} else {
		l->tx_nowait = true;
		spill_flush(l);
		l->tx_nowait = false;
		tx_publish(l);
		ctr_add(l->s, UROCE_SHM_C_TX_PACKETS, l->tx_pkts);
		ctr_add(l->s, UROCE_SHM_C_TX_BYTES, l->tx_bytes);
		l->tx_pkts = l->tx_bytes = 0;
	}
	pthread_mutex_unlock(&l->tx_lock);
}

/* Up to @budget records of @l's receive ring; under rx_lock. */
static int rx_ring(struct uroce_shm_link *l, int budget, uroce_netio_rx_fn fn, void *arg, bool *stop)
{
	struct uroce_shm_ring *ctl = l->rx.ctl;
	uint64_t tail = __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
	unsigned since = 0;
	int done = 0;

	if (l->rx.pos == tail || atomic_load_explicit(&l->broken, memory_order_relaxed))
		return 0;
	if (tail - l->rx.pos > l->r) {
		link_break(l, "tail beyond the ring");
		return 0;
	}
	while (l->rx.pos != tail && done < budget && !*stop) {
		uint32_t off = (uint32_t)(l->rx.pos & (l->r - 1)), avail = l->r - off, need;
		struct uroce_shm_rec rec;

		memcpy(&rec, l->rx.data + off, sizeof(rec.len));
		if (rec.len == UROCE_SHM_REC_WRAP) {
			if (avail > tail - l->rx.pos) {
				link_break(l, "wrap beyond tail");
				break;
			}
			l->rx.pos += avail;
			continue;
		}
		if (avail < REC_HDR || tail - l->rx.pos < REC_HDR) {
			link_break(l, "record header beyond tail");
			break;
		}
		/* One read of the header into our memory: what is checked is what is used. */
		memcpy(&rec, l->rx.data + off, sizeof(rec));
		need = rec.len <= UROCE_SHM_PKT_MAX ? rec_size(rec.len) : 0;
		if (!need || need > avail || need > tail - l->rx.pos) {
			link_break(l, "record length out of bounds");
			break;
		}
		done++;
		if (shm_rx_packet(l->s, &rec, l->rx.data + off + REC_HDR, fn, arg))
			*stop = true;
		l->rx.pos += need;
		if (++since == HEAD_PUBLISH_EVERY) {
			since = 0;
			rx_publish(l);
		}
	}
	rx_publish(l);
	return done;
}

/* Bring the pollers' list up to date with `all`; under rx_lock. */
static void links_refresh(struct uroce_shm *s)
{
	unsigned g = atomic_load_explicit(&s->gen, memory_order_acquire);

	if (g == s->links_gen)
		return;
	pthread_mutex_lock(&s->add_lock);
	if (s->nall > s->caplinks) {
		struct uroce_shm_link **grown = realloc(s->links, s->capall * sizeof(*grown));

		if (!grown) {
			pthread_mutex_unlock(&s->add_lock);
			return;   /* the new links are read at a later poll */
		}
		s->links = grown;
		s->caplinks = s->capall;
	}
	memcpy(s->links, s->all, s->nall * sizeof(*s->links));
	s->nlinks = s->nall;
	s->links_gen = atomic_load(&s->gen);
	pthread_mutex_unlock(&s->add_lock);
}

static void links_reap(struct uroce_shm *s);

int uroce_shm_poll(struct uroce_shm *s, int budget, uroce_netio_rx_fn fn, void *arg)
{
	int done = 0;
	bool stop = false;

	if (!s || !fn || budget <= 0)
		return 0;
	if (pthread_mutex_trylock(&s->rx_lock)) {
		/* Another poller drains: it reads once more for us (netio.c's hand-off). */
		atomic_store(&s->rx_missed, true);
		if (pthread_mutex_trylock(&s->rx_lock))
			return 0;
	}
again:
	atomic_store(&s->rx_missed, false);
	links_refresh(s);
	for (unsigned i = 0; i < s->nlinks && done < budget && !stop; i++)
		done += rx_ring(s->links[i], budget - done, fn, arg, &stop);
	/* Spills whose ring has room again (the peer read, or, on a link with ourselves, we
	 * just did). */
	for (unsigned i = 0; i < s->nlinks; i++)
		tx_spill_retry(s->links[i]);
	/* A link whose peer is gone is let go once its ring is read: here too, not only at
	 * uroced's wake-up (uroce_shm_wakeup), which may come while the dead peer's last
	 * records are still unread -- and nothing wakes us for that link again
	 * (transport_shm_kill once waited 5 s for shm_peers_gone). */
	for (unsigned i = 0; i < s->nlinks; i++)
		if (peer_gone(s->links[i])) {
			links_reap(s);
			break;
		}
	if (s->rx_pkts) {
		ctr_add(s, UROCE_SHM_C_RX_PACKETS, s->rx_pkts);
		ctr_add(s, UROCE_SHM_C_RX_BYTES, s->rx_bytes);
		s->rx_pkts = s->rx_bytes = 0;
	}
	pthread_mutex_unlock(&s->rx_lock);
	if (done < budget && !stop && atomic_load(&s->rx_missed) && !pthread_mutex_trylock(&s->rx_lock))
		goto again;
	return done;
}

bool uroce_shm_sleep_prepare(struct uroce_shm *s)
{
	bool waiting = false;

	if (!s)
		return true;
	pthread_mutex_lock(&s->rx_lock);
	links_refresh(s);
	for (unsigned i = 0; i < s->nlinks; i++) {
		struct uroce_shm_link *l = s->links[i];

		if (atomic_load_explicit(&l->broken, memory_order_relaxed))
			continue;
		__atomic_store_n(&l->rx.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&l->rx.ctl->tail, __ATOMIC_SEQ_CST) != l->rx.pos)
			waiting = true;
	}
	pthread_mutex_unlock(&s->rx_lock);
	if (waiting)
		uroce_shm_sleep_done(s);
	return !waiting;
}

void uroce_shm_sleep_done(struct uroce_shm *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->rx_lock);
	for (unsigned i = 0; i < s->nlinks; i++)
		if (__atomic_load_n(&s->links[i]->rx.ctl->sleeping, __ATOMIC_RELAXED))
			__atomic_store_n(&s->links[i]->rx.ctl->sleeping, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->rx_lock);
}

/* ---------------------------------------------------------------- links */

static void link_unmap(struct uroce_shm_link *l)
{
	if (l->map)
		munmap(l->map, l->size);
	if (l->peer_efd >= 0)
		close(l->peer_efd);
	pthread_mutex_destroy(&l->tx_lock);
	free(l->held);   /* a packet still held back for reordering is lost, like a drop */
	free(l->spill);  /* so is a spill: the link is let go of only when its peer is gone */
	free(l);
}

void uroce_shm_link_put(struct uroce_shm_link *l)
{
	if (l && atomic_fetch_sub(&l->refs, 1) == 1)
		link_unmap(l);
}

/* Map the link uroced described; takes ownership of both descriptors (closes memfd).
 * NULL if the memory is not what the description says. */
static struct uroce_shm_link *link_map(struct uroce_shm *s, const struct uroce_shm_link_info *info,
				       int memfd, int peer_efd)
{
	struct uroce_shm_link *l = calloc(1, sizeof(*l));
	const struct uroce_shm_hdr *h;
	struct stat st;
	uint32_t r = info->ring_bytes;
	unsigned tx_k, rx_k;

	if (!l)
		goto fail;
	l->peer_efd = peer_efd;
	peer_efd = -1;
	pthread_mutex_init(&l->tx_lock, NULL);
	if (info->side > 1 || r < UROCE_SHM_RING_MIN || r > UROCE_SHM_RING_MAX || (r & (r - 1)) ||
	    info->size != uroce_shm_size(r) || fstat(memfd, &st) < 0 || (uint64_t)st.st_size != info->size)
		goto fail;
	l->map = mmap(NULL, info->size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (l->map == MAP_FAILED) {
		l->map = NULL;
		goto fail;
	}
	close(memfd);
	memfd = -1;
	h = (const struct uroce_shm_hdr *)(void *)l->map;
	/* Read once; the header is writable by the peer, so only what is copied counts. */
	if (h->magic != UROCE_SHM_MAGIC || h->version != UROCE_SHM_VERSION || h->link_id != info->id)
		goto fail;
	l->s = s;
	l->hdr = h;
	l->id = info->id;
	l->side = info->side;
	l->self = info->self;
	l->size = info->size;
	l->r = r;
	l->peer_pid = info->peer_pid;
	tx_k = l->self ? 0 : l->side;
	rx_k = l->self ? 0 : l->side ^ 1;
	l->tx.ctl = (struct uroce_shm_ring *)(void *)(l->map + uroce_shm_ring_off(r, tx_k));
	l->tx.data = (uint8_t *)l->tx.ctl + UROCE_SHM_CTL_BYTES;
	l->rx.ctl = (struct uroce_shm_ring *)(void *)(l->map + uroce_shm_ring_off(r, rx_k));
	l->rx.data = (uint8_t *)l->rx.ctl + UROCE_SHM_CTL_BYTES;
	/* A new link's rings are empty; our own indexes start where the rings are. */
	l->tx.pos = l->tx.published = __atomic_load_n(&l->tx.ctl->tail, __ATOMIC_ACQUIRE);
	l->tx.seen = l->tx.pos;
	l->rx.pos = l->rx.published = __atomic_load_n(&l->rx.ctl->head, __ATOMIC_ACQUIRE);
	/* The progress thread may be asleep already, with the links it knew when it went to
	 * sleep asking to be woken: this one asks too, so that its first records wake it (a
	 * wake-up it did not need costs it one turn). */
	__atomic_store_n(&l->rx.ctl->sleeping, 1, __ATOMIC_SEQ_CST);
	atomic_init(&l->refs, 1);
	if (s->fault.enabled && !(l->held = malloc(UROCE_SHM_PKT_MAX))) {
		munmap(l->map, l->size);
		close(l->peer_efd);
		pthread_mutex_destroy(&l->tx_lock);
		free(l);
		return NULL;
	}
	return l;
fail:
	if (memfd >= 0)
		close(memfd);
	if (peer_efd >= 0)
		close(peer_efd);
	if (l) {
		if (l->map)
			munmap(l->map, info->size);
		if (l->peer_efd >= 0)
			close(l->peer_efd);
		pthread_mutex_destroy(&l->tx_lock);
		free(l);
	}
	return NULL;
}

/* The mapped link with @id, or NULL; under add_lock. */
static struct uroce_shm_link *link_find(struct uroce_shm *s, uint64_t id)
{
	for (unsigned i = 0; i < s->nall; i++)
		if (s->all[i]->id == id)
			return s->all[i];
	return NULL;
}

/* Map a link uroced handed us (SHM_LINK or SHM_ACCEPT) and add it to `all`; one we have
 * already is not mapped twice.  Returns the link (not referenced for the caller), or NULL.
 * Takes the descriptors. */
static struct uroce_shm_link *link_take(struct uroce_shm *s, const struct uroce_shm_link_info *info,
					int memfd, int peer_efd)
{
	struct uroce_shm_link *l;

	pthread_mutex_lock(&s->add_lock);
	l = link_find(s, info->id);
	if (l) {
		pthread_mutex_unlock(&s->add_lock);
		close(memfd);
		close(peer_efd);
		return l;
	}
	if (s->nall == s->capall) {
		unsigned cap = s->capall ? s->capall * 2 : 8;
		struct uroce_shm_link **grown = realloc(s->all, cap * sizeof(*grown));

		if (!grown) {
			pthread_mutex_unlock(&s->add_lock);
			close(memfd);
			close(peer_efd);
			return NULL;
		}
		s->all = grown;
		s->capall = cap;
	}
	l = link_map(s, info, memfd, peer_efd);
	if (l) {
		s->all[s->nall++] = l;
		atomic_fetch_add_explicit(&s->gen, 1, memory_order_release);
		ctr_add(s, UROCE_SHM_C_LINKS, 1);
	}
	pthread_mutex_unlock(&s->add_lock);
	return l;
}

/* Let go of links whose peer is gone, once their ring is read; under rx_lock. */
static void links_reap(struct uroce_shm *s)
{
	links_refresh(s);
	for (unsigned i = 0; i < s->nlinks;) {
		struct uroce_shm_link *l = s->links[i];

		if (!peer_gone(l) ||
		    (!atomic_load(&l->broken) && __atomic_load_n(&l->rx.ctl->tail, __ATOMIC_ACQUIRE) != l->rx.pos)) {
			i++;
			continue;
		}
		s->links[i] = s->links[--s->nlinks];
		ctr_add(s, UROCE_SHM_C_PEERS_GONE, 1);
		pthread_mutex_lock(&s->add_lock);
		for (unsigned k = 0; k < s->nall; k++) {
			if (s->all[k] == l) {
				s->all[k] = s->all[--s->nall];
				break;
			}
		}
		pthread_mutex_unlock(&s->add_lock);
		uroce_shm_link_put(l);   /* the list's; QPs and the cache may still hold theirs */
	}
}

bool uroce_shm_wakeup(struct uroce_shm *s)
{
	uint64_t v = 0;

	if (!s || read(s->efd, &v, sizeof(v)) != sizeof(v))
		return false;
	if (v & (UROCE_SHM_WAKE_LINKS - 1))
		ctr_add(s, UROCE_SHM_C_WAKE_RX, 1);
	if (v >= UROCE_SHM_WAKE_LINKS) {
		/* uroced: a peer opened a link to us, or one of our peers is gone. */
		struct uroce_shm_link_info info;
		int memfd, peer_efd;

		while (uroce_ipc_shm_accept(s->ctx->ipc, s->ctx->dev->ibdev.name, &info, &memfd,
					    &peer_efd) == 0)
			link_take(s, &info, memfd, peer_efd);
		pthread_mutex_lock(&s->rx_lock);
		links_reap(s);
		pthread_mutex_unlock(&s->rx_lock);
	}
	return true;
}

/* The cache slot of (gid, block); under cache_lock. */
static struct cache_ent *cache_slot(struct uroce_shm *s, const uint8_t gid[16], uint32_t block)
{
	uint32_t h = block * 0x9E3779B1u;

	for (int i = 0; i < 16; i++)
		h = (h ^ gid[i]) * 0x01000193u;
	return &s->cache[h % CACHE_SLOTS];
}

int uroce_shm_connect(struct uroce_shm *s, const uint8_t dgid[16], uint32_t dqpn,
		      struct uroce_shm_link **out)
{
	struct uroce_shm_link_info info;
	struct uroce_shm_link *l;
	struct cache_ent *e;
	uint32_t block = dqpn / UROCE_IPC_QPN_BLOCK;
	int memfd, peer_efd, ret;

	*out = NULL;
	if (!s)
		return -ENOTCONN;
	/* QP1 is the daemon's (the connection manager); the multicast QPN is the kernel's. */
	if (dqpn <= 1 || dqpn >= 0xFFFFFF)
		return -ENOENT;
	pthread_mutex_lock(&s->cache_lock);
	e = cache_slot(s, dgid, block);
	if (e->block == block && !memcmp(e->gid, dgid, 16)) {
		if (e->link && !peer_gone(e->link)) {
			atomic_fetch_add(&e->link->refs, 1);
			*out = e->link;
			pthread_mutex_unlock(&s->cache_lock);
			return 0;
		}
		if (!e->link && e->qpn == dqpn && now_ns() < e->until) {
			pthread_mutex_unlock(&s->cache_lock);
			return -ENOENT;
		}
	}
	/* Ask the daemon (under the cache lock: one question per block at a time). */
	ret = uroce_ipc_shm_link(s->ctx->ipc, s->ctx->dev->ibdev.name, dgid, dqpn, s->ring_bytes,
				 &info, &memfd, &peer_efd);
	l = ret ? NULL : link_take(s, &info, memfd, peer_efd);
	if (!ret && !l)
		ret = -EIO;
	if (e->link)
		uroce_shm_link_put(e->link);
	memcpy(e->gid, dgid, 16);
	e->block = block;
	e->qpn = dqpn;
	e->link = l;
	e->until = now_ns() + CACHE_NEG_NS;
	if (l) {
		atomic_fetch_add(&l->refs, 2);   /* the cache's and the caller's */
		*out = l;
	}
	pthread_mutex_unlock(&s->cache_lock);
	return ret;
}

/* ---------------------------------------------------------------- open / close */

static bool env_is(const char *name, const char *v1, const char *v2)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, v1) || !strcmp(v, v2));
}

int uroce_shm_open(struct uroce_context *ctx, uint64_t *counters, struct uroce_shm **out)
{
	struct uroce_shm *s;
	const char *kb = getenv("UROCE_SHM_RING_KB");
	char err[128];
	int ret;

	if (!ctx || !ctx->ipc || !ctx->dev || !out)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	s->efd = -1;
	s->c = counters ? counters : s->own;
	s->ring_bytes = kb ? (uint32_t)strtoul(kb, NULL, 10) << 10 : 0;
	for (int i = 0; i < CACHE_SLOTS; i++)
		s->cache[i].block = UINT32_MAX;
	pthread_mutex_init(&s->add_lock, NULL);
	pthread_mutex_init(&s->rx_lock, NULL);
	pthread_mutex_init(&s->cache_lock, NULL);
	pthread_mutex_init(&s->fault_lock, NULL);
	ret = uroce_fault_parse(&s->fault, getenv(UROCE_FAULT_ENV), err, sizeof(err));
	if (ret) {
		fprintf(stderr, "uroce: %s: %s\n", UROCE_FAULT_ENV, err);
		goto fail;
	}
	/* The ICRC: a ring does not corrupt, so it is computed only when asked for
	 * (UROCE_SHM_ICRC=1) and whenever faults are injected, which must be caught by it
	 * exactly as on UDP (docs/transport.md). */
	s->icrc = s->fault.enabled || env_is("UROCE_SHM_ICRC", "1", "on");
	if (s->fault.enabled) {
		s->scratch = malloc(UROCE_SHM_PKT_MAX);
		if (!s->scratch) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = uroce_ipc_shm_attach(ctx->ipc, ctx->dev->ibdev.name, s->efd);
	if (ret)
		goto fail;
	*out = s;
	return 0;
fail:
	if (s->efd >= 0)
		close(s->efd);
	free(s->scratch);
	pthread_mutex_destroy(&s->add_lock);
	pthread_mutex_destroy(&s->rx_lock);
	pthread_mutex_destroy(&s->cache_lock);
	pthread_mutex_destroy(&s->fault_lock);
	free(s);
	return ret;
}

void uroce_shm_set_capture(struct uroce_shm *s, struct uroce_cap *cap)
{
	if (s)
		s->cap = cap;
}

void uroce_shm_close(struct uroce_shm *s)
{
	if (!s)
		return;
	/* What a full ring left in a spill (the last ACKs, a UC message) gets a bounded
	 * chance to leave: the peers are still reading, our going away should not lose it. */
	for (unsigned i = 0; i < s->nall; i++) {
		struct uroce_shm_link *l = s->all[i];
		uint64_t end = now_ns() + 100 * SHM_FULL_WAIT_NS;

		pthread_mutex_lock(&l->tx_lock);
		l->tx_nowait = false;
		while (l->spill_off != l->spill_end && !peer_gone(l) && !l->self && now_ns() < end)
			spill_flush(l);
		tx_publish(l);
		pthread_mutex_unlock(&l->tx_lock);
	}
	for (int i = 0; i < CACHE_SLOTS; i++)
		if (s->cache[i].link)
			uroce_shm_link_put(s->cache[i].link);
	for (unsigned i = 0; i < s->nall; i++)
		uroce_shm_link_put(s->all[i]);
	free(s->all);
	free(s->links);
	close(s->efd);
	free(s->scratch);
	pthread_mutex_destroy(&s->add_lock);
	pthread_mutex_destroy(&s->rx_lock);
	pthread_mutex_destroy(&s->cache_lock);
	pthread_mutex_destroy(&s->fault_lock);
	free(s);
}

bool uroce_shm_active(const struct uroce_shm *s)
{
	return s && __atomic_load_n(&s->nall, __ATOMIC_RELAXED) != 0;
}

int uroce_shm_fd(const struct uroce_shm *s)
{
	return s ? s->efd : -1;
}
