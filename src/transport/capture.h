/* capture.h — the data path's capture tap (`uroce capture`, issue #15; the ring's layout
 * is ipc/cap_proto.h, the whole design docs/daemon.md "Capturing").
 *
 * netio (UDP) and shm (same-host rings) call the tap for every packet they send or
 * receive, behind uroce_cap_on(): one load of a word in the ring's header, which uroced
 * sets while a capture that may see this process runs.  Without a capture nothing else
 * is done.  The tap copies the packet and what the IP and UDP headers said into the ring;
 * a full ring counts the packet as missed.  Thread safety: any thread, a lock of the ring's
 * own (taken only while a capture runs).
 */
#ifndef UROCE_TRANSPORT_CAPTURE_H
#define UROCE_TRANSPORT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ipc/cap_proto.h"

struct uroce_context;
struct uroce_shm_rec;

struct uroce_cap {
	struct uroce_cap_hdr *hdr;       /* the mapping: header page, then the ring */
	/* the rest: this process's own */
	uint8_t *data;
	size_t size;
	uint32_t ring_bytes;
	int fd;
	uint64_t tail, missed, recorded; /* under lock; the header's copies are published */
	uint64_t *missed_ctr;            /* `uroce stat`'s capture_missed, or NULL */
	void *lock;                      /* pthread_mutex_t, allocated with the object */
};

/* Create the context's ring on its device and register it with uroced: 0, or -errno (an
 * older daemon: -EOPNOTSUPP; the data path then runs without a tap).  @missed (or NULL):
 * a published counter that counts the packets a full ring did not take as well. */
int uroce_cap_open(struct uroce_context *ctx, uint64_t *missed, struct uroce_cap **out);
void uroce_cap_close(struct uroce_cap *c);

static inline bool uroce_cap_on(const struct uroce_cap *c)
{
	return c && __atomic_load_n(&c->hdr->active, __ATOMIC_RELAXED) != 0;
}

/* CLOCK_REALTIME in ns: a record's time. */
uint64_t uroce_cap_now(void);

/* The UDP path: a sendmsg of @bytes in @iov that the kernel segments at @seg (cnt > 1:
 * segment k gets IPv4 Identification k) -- one record per segment, as on the wire --
 * recorded before the sendmsg (a receiver may see the packet before it returns) as
 * pending, and settled by _end after it (@sent: the kernel took it; otherwise the
 * records are cancelled). */
struct uroce_cap_tx {
	uint32_t first;                  /* the first record's offset in the ring */
	unsigned n;                      /* records written (0: nothing to settle) */
};
void uroce_cap_udp_tx_begin(struct uroce_cap *c, struct uroce_cap_tx *t, uint32_t sqpn,
			    const uint8_t sgid[16], uint16_t sport, const uint8_t dgid[16],
			    uint16_t dport, uint8_t tclass, uint8_t hop_limit,
			    const struct iovec *iov, unsigned iovcnt, unsigned cnt, size_t bytes,
			    uint16_t seg);
void uroce_cap_udp_tx_end(struct uroce_cap *c, const struct uroce_cap_tx *t, bool sent);
/* A received packet (one segment of a coalesced datagram), with what the IP and UDP
 * headers said and the IPv4 Identification it was sent with (as far as known). */
void uroce_cap_udp_rx(struct uroce_cap *c, const uint8_t sgid[16], uint16_t sport,
		      const uint8_t dgid[16], uint8_t tclass, uint8_t hop_limit,
		      uint32_t flow_label, uint16_t ip_id, const uint8_t *pkt, size_t len);
/* The shared-memory link: a packet going into (@rx false; @sqpn: the sending QP) or out
 * of a ring. */
void uroce_cap_shm(struct uroce_cap *c, bool rx, uint32_t sqpn, const struct uroce_shm_rec *rec,
		   const struct iovec *iov, unsigned iovcnt);

#endif
