/* shm.h — the shared-memory link between uroce processes of one host (docs/transport.md
 * "The shared-memory link"; the memory's layout is ipc/shm_proto.h).
 *
 * When a QP's destination is a QP of another uroce context served by the same uroced (the
 * same network namespace), the engine sends its packets into a ring in memory the daemon
 * handed both processes instead of a UDP socket.  They are the same RoCEv2 packets the
 * UDP path carries (BTH ... ICRC slot), built by the same requester, responder and
 * completer; the ring is a lossless link, so PSNs, ACKs, RNR, retransmission, the error
 * paths, the counters and UROCE_FAULT mean what they mean on UDP.
 *
 * One struct uroce_shm per context (engine.c): its wake eventfd (in the progress
 * thread's epoll set), and its links, one per peer context.  A link has a ring it sends on
 * and a ring it receives from (the same one for a link of a context with itself).
 *
 * Every packet that goes into a ring passes through one function, shm_tx_packet(), and
 * every packet that comes out through one, shm_rx_packet() (shm.c): the place for a capture
 * tap (`uroce capture`, issue #15).
 *
 * Thread safety: uroce_shm_send() serialises the senders of one link (its own lock; the
 * caller holds its QP's lock).  uroce_shm_poll() may be called by the progress thread and
 * by application threads at once; like uroce_netio_poll it try-locks, and a poller that
 * finds the lock taken makes the holder read again.  Errors: 0 or a negative errno.
 */
#ifndef UROCE_TRANSPORT_SHM_H
#define UROCE_TRANSPORT_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/netio.h"

struct uroce_context;
struct uroce_shm;
struct uroce_shm_link;

/* The counters, in this order, published after netio's in the context's block (names as
 * `uroce stat` prints them): packets and bytes through the rings, sends that found the
 * ring full for longer than the bounded wait (left to retransmission), packets dropped
 * because the peer is gone or broke its ring, received packets dropped (bad ICRC
 * included), wake-ups sent to a sleeping peer and received, links mapped, links let go of
 * because uroced reported their peer gone (or it broke the ring), links given up as
 * broken, fault injection's decisions on this link. */
#define UROCE_SHM_COUNTERS(X)                     \
	X(TX_PACKETS, "shm_tx_packets")           \
	X(TX_BYTES, "shm_tx_bytes")               \
	X(RX_PACKETS, "shm_rx_packets")           \
	X(RX_BYTES, "shm_rx_bytes")               \
	X(TX_FULL, "shm_tx_full")                 \
	X(TX_WAITS, "shm_tx_waits")               \
	X(TX_LOST, "shm_tx_peer_gone")            \
	X(RX_DROPS, "shm_rx_drops")               \
	X(RX_BAD_ICRC, "shm_rx_bad_icrc")         \
	X(WAKE_TX, "shm_wakeups_tx")              \
	X(WAKE_RX, "shm_wakeups_rx")              \
	X(LINKS, "shm_links")                     \
	X(PEERS_GONE, "shm_peers_gone")           \
	X(BROKEN, "shm_links_broken")             \
	X(FAULT_DROP, "shm_fault_drop")           \
	X(FAULT_DUP, "shm_fault_dup")             \
	X(FAULT_REORDER, "shm_fault_reorder")     \
	X(FAULT_CORRUPT, "shm_fault_corrupt")     \
	X(TX_SPILLED, "shm_tx_spilled")

enum uroce_shm_ctr {
#define X(n, s) UROCE_SHM_C_##n,
	UROCE_SHM_COUNTERS(X)
#undef X
	UROCE_SHM_C_NUM
};
extern const char *const uroce_shm_counter_names[UROCE_SHM_C_NUM];

/* Take part in shm links on @ctx's device: create the wake eventfd, attach it to uroced.
 * @counters: UROCE_SHM_C_NUM counters to count into (netio's published block), or NULL.
 * -EOPNOTSUPP from an older daemon, -errno. */
int uroce_shm_open(struct uroce_context *ctx, uint64_t *counters, struct uroce_shm **out);
void uroce_shm_close(struct uroce_shm *s);
/* Tap every packet into @cap while a capture runs (netio's: uroce_netio_cap). */
struct uroce_cap;
void uroce_shm_set_capture(struct uroce_shm *s, struct uroce_cap *cap);
/* The context has a link mapped (a peer to read from): cheap, may be stale. */
bool uroce_shm_active(const struct uroce_shm *s);
/* The wake eventfd: readable when a peer woke us or our links changed. */
int uroce_shm_fd(const struct uroce_shm *s);
/* The fd was readable: read it; take new links, let go of dead ones.  Returns true if a
 * peer's records may be waiting (drain). */
bool uroce_shm_wakeup(struct uroce_shm *s);

/* The link to QP @dqpn at GID @dgid, if that QP belongs to a uroce context of this daemon
 * that takes part: 0 and a reference in *out (uroce_shm_link_put), or -ENOENT / -ENOTCONN
 * (use UDP), -errno.  Remembers the answer per QPN block (the daemon hands QPNs out in
 * blocks, a block stays with its context while it lives), so most calls ask no one. */
int uroce_shm_connect(struct uroce_shm *s, const uint8_t dgid[16], uint32_t dqpn,
		      struct uroce_shm_link **out);
void uroce_shm_link_put(struct uroce_shm_link *l);

/* What the UDP path's receiver reads from the IP and UDP headers of a packet. */
struct uroce_shm_src {
	uint8_t sgid[16];
	uint16_t sport;
	uint8_t tclass, hop_limit;
	uint32_t qpn;                    /* the sending QP (for a capture, not sent) */
};

/* Send @n packets like uroce_netio_send (same packets, same ICRC slot): returns the number
 * sent -- all: what a ring that stayed full through the bounded wait cannot take waits in
 * the link's spill (copied) and leaves, in order, when the consumer has read (shm.c); only
 * when the spill is full too is the count short (the transport's retransmission covers
 * the rest, as for a full socket buffer) -- or -errno.  Packets to a peer that is gone
 * count as sent (lost). */
/* @l holds packets in its spill (its ring stayed full): senders that can wait (an RC
 * requester, io.busy) should.  A relaxed load. */
bool uroce_shm_link_busy(const struct uroce_shm_link *l);
int uroce_shm_send(struct uroce_shm_link *l, const struct uroce_shm_src *src,
		   const struct uroce_netaddr *dst, struct uroce_txpkt *pkts, unsigned n);

/* Drain up to @budget packets from every link's receive ring, delivering each valid one to
 * @fn as netio does (struct uroce_rxpkt; valid during the call).  Returns the number
 * consumed (valid or dropped); @budget means "more may be waiting". */
int uroce_shm_poll(struct uroce_shm *s, int budget, uroce_netio_rx_fn fn, void *arg);

/* The progress thread is about to sleep on the eventfd: ask the peers to wake it.  False
 * when records are waiting already (drain instead of sleeping).  uroce_shm_sleep_done()
 * after the wait: the peers stop waking it. */
bool uroce_shm_sleep_prepare(struct uroce_shm *s);
void uroce_shm_sleep_done(struct uroce_shm *s);

#endif
