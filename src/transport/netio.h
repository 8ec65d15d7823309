/* netio.h — the data path's sockets: how packets leave and arrive (docs/transport.md).
 *
 * One struct uroce_netio per open device context.  It holds
 *   - the receive socket: a member of the device's SO_REUSEPORT group on UDP 4791, created
 *     by uroced and handed over with SCM_RIGHTS, steered by destination QPN (src/net/steer.c);
 *   - a sender per QP (struct uroce_netio_tx) on a send socket shared by the QPs of one
 *     source GID, port slot and GRH: unconnected, bound to the source GID's address and
 *     the slot's UDP source port (0xC000 + a hash of the QPN cut into UROCE_UDP_SPORTS
 *     slots, default 256: in Soft-RoCE's range), IP_PMTUDISC_DO so that IPv4 packets carry
 *     Identification 0 and the ICRC computed here is the one on the wire.  So a context
 *     holds a few hundred descriptors, not one per QP.
 *
 * The transport (rc_*.c, uc.c, ud.c) builds packets with the wire module; netio completes
 * them (ICRC), applies fault injection (UROCE_FAULT), sends them (runs of equal-size
 * packets in one sendmsg with UDP_SEGMENT where the kernel supports it), receives,
 * validates (uroce_pkt_validate, ICRC included) and counts every drop by reason.
 *
 * Thread safety: a netio_tx is used under its QP's lock; the send sockets the senders
 * share are looked up under netio's own lock, and sendmsg on a shared one is the kernel's
 * to serialise.  uroce_netio_poll() may be called
 * by the progress thread and by application threads (ibv_poll_cq on an empty CQ) at the
 * same time; it serialises internally with a try-lock (a caller that finds another thread
 * draining returns 0 at once).  Counters are atomics.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef UROCE_TRANSPORT_NETIO_H
#define UROCE_TRANSPORT_NETIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire/wire.h"

struct uroce_context;
struct uroce_netio;
struct uroce_netio_tx;

/* A RoCEv2 address: the GID (IPv4-mapped or IPv6) and the UDP port. */
struct uroce_netaddr {
	uint8_t gid[16];
	uint16_t port;               /* host order; 4791 for destinations */
};

/* Open the context's data path: get the receive socket from uroced.  The receive socket's
 * fd is pollable (uroce_netio_fd) for the progress thread's epoll. */
int uroce_netio_open(struct uroce_context *ctx, struct uroce_netio **out);
void uroce_netio_close(struct uroce_netio *nio);
int uroce_netio_fd(const struct uroce_netio *nio);

/* A QP's sender.  @sgid is the source GID (from the QP's AV or the UD AH), @qpn picks the
 * UDP source port, @traffic_class and @hop_limit are the AV's GRH fields (as
 * uroce_netio_tx_set_grh: the sender starts on the shared socket of its own fields, so
 * opening never makes a socket only to leave it).  (netio.c: if another program holds
 * that port exclusively, the next candidates of the range are tried; -EADDRNOTAVAIL if
 * @sgid is not a local address.) */
int uroce_netio_tx_open(struct uroce_netio *nio, const uint8_t sgid[16], uint32_t qpn,
			uint8_t traffic_class, uint8_t hop_limit, struct uroce_netio_tx **out);
void uroce_netio_tx_close(struct uroce_netio_tx *tx);
/* The UDP source port the sender is bound to (what a same-host shm link reports as the
 * packets' source port, shm.h). */
uint16_t uroce_netio_tx_sport(const struct uroce_netio_tx *tx);
/* Added with netio.c: the GRH fields of the QP's AV or the UD AH that IP carries
 * (RoCEv2 A17.4.5): @traffic_class → IPv4 TOS / IPv6 traffic class, @hop_limit → IPv4 TTL /
 * IPv6 hop limit (0: the kernel's default).  The ICRC masks both, so they may change
 * between packets.  IP takes them from the socket's options, so the sender moves to the
 * shared socket of its new fields (opened if none is); unchanged fields cost nothing.
 * 0 or -errno. */
int uroce_netio_tx_set_grh(struct uroce_netio_tx *tx, uint8_t traffic_class, uint8_t hop_limit);

/* One packet to send: the UDP payload as a list of pieces (headers, payload from user
 * memory, pad); the last UROCE_ICRC_LEN bytes of the last piece are the ICRC slot, which
 * netio fills.  netio never writes to the other pieces (they may be application memory). */
struct uroce_txpkt {
	struct iovec iov[4];
	unsigned iovcnt;
	size_t len;                  /* sum of iov lengths */
};

/* Send @n packets to @dst.  Returns the number sent (all, unless the socket's buffer is
 * full: then a short count, and the transport's retransmission covers the rest) or -errno.
 * Packets dropped by fault injection count as sent. */
int uroce_netio_send(struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
		     struct uroce_txpkt *pkts, unsigned n);

/* A received, validated packet.  Valid only during the callback. */
struct uroce_rxpkt {
	struct uroce_pkt pkt;        /* decoded by uroce_pkt_validate; pkt.payload points into buf */
	const uint8_t *buf;          /* the UDP payload */
	size_t len;
	struct uroce_netaddr src;    /* sender's GID and UDP source port */
	uint8_t dgid[16];            /* our GID it was addressed to */
	/* Added with netio.c, for an IPv6 GRH (IBA 8.3: TClass, FlowLabel, HopLmt) and
	 * ibv_init_ah_from_wc: the IP header's variable fields as received. */
	uint8_t traffic_class;       /* IPv4 TOS / IPv6 traffic class */
	uint8_t hop_limit;           /* IPv4 TTL / IPv6 hop limit */
	uint32_t flow_label;         /* IPv6 only (20 bits); 0 for IPv4 */
};

/* Called for each valid packet.  Returning non-zero stops the drain early. */
typedef int (*uroce_netio_rx_fn)(void *arg, struct uroce_rxpkt *p);

/* Drain up to @budget datagrams without blocking.  Returns the number of datagrams
 * consumed (valid or dropped), 0 when none was waiting (or another thread is draining).
 * (netio.c: a buffer the kernel coalesced with UDP_GRO counts as its packets and is
 * delivered whole once read, so the count is capped at @budget: a return of @budget means
 * "budget used up, more may be waiting".  After fn returns non-zero, packets already read
 * in the same batch are still delivered.) */
int uroce_netio_poll(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg);

/* The same for an application thread that busy-polls (it calls again at once): after a
 * drain that found nothing it may read a single datagram and leave the rest to its next
 * call.  Not for a thread woken by the socket's edge-triggered readiness. */
int uroce_netio_poll_spin(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg);

/* Have the kernel report the IP header fields a UD GRH carries (TOS/traffic class, TTL/hop
 * limit, flow label) from now on; off until the first call (the cmsgs cost every receive).
 * Cannot fail (an option the kernel refuses leaves that field at its default). */
void uroce_netio_rx_grh(struct uroce_netio *nio);

/* Counters (also reported by `uroce stat`). */
struct uroce_netio_stats {
	uint64_t tx_packets, tx_bytes, tx_errors;
	uint64_t rx_packets, rx_bytes;
	uint64_t rx_drop[UROCE_RX_NUM];      /* by validation reason (ICRC included) */
	uint64_t rx_misrouted;               /* for a QPN this process does not own */
	uint64_t fault_drop, fault_dup, fault_reorder, fault_corrupt;
	/* Added with netio.c (after the fields above, which keep their meaning): */
	uint64_t tx_gso_sends;               /* sendmsg calls that carried > 1 packet (UDP_SEGMENT) */
	uint64_t tx_short;                   /* sends cut short by a full socket buffer (EAGAIN/ENOBUFS) */
	uint64_t rx_gro_datagrams;           /* datagrams the kernel coalesced (UDP_GRO), split here */
	uint64_t rx_truncated;               /* datagrams larger than the receive buffer (not RoCE),
					      * or whose control data was cut (MSG_CTRUNC) */
	uint64_t tx_sockets;                 /* send sockets open now (shared by the QPs of a
					      * port slot; at most UROCE_UDP_SPORTS per source
					      * GID and GRH) */
	uint64_t tx_sockets_max;             /* the most send sockets open at once */
	uint64_t rx_socket_drops;            /* datagrams the kernel dropped at the receive
					      * socket, its buffer full (SO_MEMINFO): this
					      * context's share of UdpRcvbufErrors */
	uint64_t rx_connected;               /* datagrams read from connected receive sockets */
	uint64_t rx_conn_sockets;            /* connected receive sockets opened */
	uint64_t rx_conn_shared;             /* ... and closed: their sender also talks to
					      * another process's QP from that port */
};
void uroce_netio_stats(const struct uroce_netio *nio, struct uroce_netio_stats *out);

/* The progress thread's epoll set @epfd: put this context's receive sockets in it
 * (edge-triggered, @on) or keep them there without events (!@on, under the poll lease).
 * The first call adds them; connected receive sockets opened later join with the same
 * events.  uroce_netio_is_event: an epoll_event's data (u64) is one of these sockets. */
#define UROCE_NETIO_CONN_TAG (1ull << 40)
void uroce_netio_watch(struct uroce_netio *nio, int epfd, bool on);
bool uroce_netio_is_event(const struct uroce_netio *nio, uint64_t data);
/* The transport found no QP of this process for a valid packet's destination QPN (a
 * steering change in flight, or a stale peer): counted here with the other drops. */
void uroce_netio_count_misrouted(struct uroce_netio *nio);
/* Where the context's shared-memory link counts (UROCE_SHM_C_NUM counters, shm.h): in the
 * block netio publishes, after its own, so that `uroce stat` shows both paths. */
uint64_t *uroce_netio_shm_counters(struct uroce_netio *nio);
/* The context's capture tap (transport/capture.h), for the shared-memory link; NULL if
 * the daemon took none. */
struct uroce_cap;
struct uroce_cap *uroce_netio_cap(struct uroce_netio *nio);

/* Added with netio.c: the ICRC (RoCEv2 A17.3.3) of a packet of @len bytes held in @iovcnt
 * pieces (the last UROCE_ICRC_LEN bytes, the ICRC slot, are not read), sent with IPv4
 * Identification @ip_id (ignored for IPv6).  Equal to uroce_icrc_compute() for ip_id 0 and a
 * single piece.  Returns 0 for a packet shorter than BTH + ICRC.  Pure; never fails. */
uint32_t uroce_netio_icrc(const struct uroce_icrc_addr *a, uint16_t ip_id,
			  const struct iovec *iov, unsigned iovcnt, size_t len);
/* The same from the pseudo-header's CRC @pre (uroce_icrc_pre for this packet's addresses,
 * length and Identification): a sender of packets of one length computes it once. */
uint32_t uroce_netio_icrc_pre(uint32_t pre, const struct iovec *iov, unsigned iovcnt, size_t len);

#endif
