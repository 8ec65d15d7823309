/* shm_proto.h — the memory of a shared-memory link between two uroce processes of one
 * host (docs/transport.md "The shared-memory link"), as uroced creates it and both ends
 * map it.
 *
 * uroced creates one link per pair of client connections (two contexts, in two processes
 * or in one) when the first of them asks to reach a QP the other owns (UROCE_OP_SHM_LINK,
 * proto.h): a memfd sealed against resizing (so that neither end can make the other's
 * reads fault), handed to both over their IPC connections with the peer's wake eventfd.
 * Both ends are untrusted by each other: every index and length read from it is checked
 * before use, and a ring that breaks the rules is given up (the link then behaves like a
 * dead peer).
 *
 * Layout (offsets in bytes):
 *   0                        struct uroce_shm_hdr (one page)
 *   UROCE_SHM_RING_OFF(r, k) ring k: struct uroce_shm_ring (two cache lines), then
 *                            r bytes of records.  Ring k carries what side k sends;
 *                            a link of one connection with itself (self) uses ring 0 only.
 *
 * A ring is a single-producer, single-consumer byte ring of records.  tail (producer) and
 * head (consumer) are free-running byte counts; a record starts at tail % r, 64-byte
 * aligned: struct uroce_shm_rec, then the packet (a RoCEv2 UDP payload: BTH ... ICRC).  A
 * record never wraps: when the space to the end is too short, the producer writes a record
 * with len UROCE_SHM_REC_WRAP there and starts again at offset 0.  The producer publishes
 * tail with a release store after the records; the consumer publishes head after it is
 * done with them (the packets are read in place).
 *
 * Waking: a consumer about to sleep sets `sleeping`, then looks at tail again; a producer
 * that published records and finds `sleeping` set clears it and writes 1 to the
 * consumer's wake eventfd (both sides use sequentially consistent operations, so one of
 * them sees the other).  A producer that finds the ring full sets bit 0 of `prod_waiting`
 * and sleeps on the futex of head's low 32 bits, for a bounded time; one that keeps
 * records the ring could not take (its spill, src/transport/shm.c) sets bit 1.  A
 * consumer that advances head and finds `prod_waiting` set clears it, wakes the futex for
 * bit 0 and writes the producer's wake eventfd for bit 1.
 *
 * Death: when a side's connection closes (exit or crash) uroced sets that side's `gone`
 * and writes UROCE_SHM_WAKE_LINKS to the other side's eventfd; the survivor's packets to
 * it are then dropped (counted), so its QPs see a dead peer: retries, then RETRY_EXC_ERR.
 */
#ifndef UROCE_IPC_SHM_PROTO_H
#define UROCE_IPC_SHM_PROTO_H

#include <stdint.h>

#define UROCE_SHM_MAGIC 0x4d485355u      /* "USHM" */
#define UROCE_SHM_VERSION 1
#define UROCE_SHM_HDR_BYTES 4096u
#define UROCE_SHM_CTL_BYTES 128u         /* struct uroce_shm_ring, padded */
#define UROCE_SHM_ALIGN 64u              /* records start at multiples of this */
#define UROCE_SHM_RING_MIN (64u << 10)
#define UROCE_SHM_RING_MAX (64u << 20)
#define UROCE_SHM_RING_DEFAULT (1u << 20)
/* The largest packet a record may hold: a RoCEv2 UDP payload at MTU 4096 with every
 * header fits with room to spare (UD: DETH; the ICRC included). */
#define UROCE_SHM_PKT_MAX 8192u
#define UROCE_SHM_REC_WRAP 0xFFFFFFFFu   /* len of a record that says "go to offset 0" */
/* What uroced writes to a side's wake eventfd when that side's links changed (a new one
 * to accept, a peer gone); peers write 1 for "records".  The reader tells them apart by
 * the sum's high bits. */
#define UROCE_SHM_WAKE_LINKS (1ull << 32)

struct uroce_shm_side {
	int32_t pid;                     /* the connection's process (SO_PEERCRED) */
	uint32_t uid;
	uint32_t gone;                   /* set by uroced when the connection closed */
	uint32_t pad;
};

struct uroce_shm_hdr {
	uint32_t magic, version;
	uint64_t size;                   /* bytes of the memfd */
	uint64_t link_id;                /* unique while the daemon runs */
	uint32_t ring_bytes;             /* r: data bytes of each ring, a power of two */
	uint32_t self;                   /* 1: both sides are one connection (ring 0 only) */
	struct uroce_shm_side side[2];
};

struct uroce_shm_ring {
	/* the producer's cache line */
	uint64_t tail;
	uint32_t prod_waiting;
	uint8_t pad0[UROCE_SHM_ALIGN - 12];
	/* the consumer's cache line (head's low 32 bits are the producer's futex) */
	uint64_t head;
	uint32_t sleeping;
	uint8_t pad1[UROCE_SHM_ALIGN - 12];
};

/* One packet in a ring.  sgid/dgid/sport/tclass/hop_limit/flow_label are what the UDP
 * path's receiver learns from the IP and UDP headers (struct uroce_rxpkt). */
struct uroce_shm_rec {
	uint32_t len;                    /* packet bytes; UROCE_SHM_REC_WRAP: see above */
	uint16_t flags;                  /* UROCE_SHM_REC_* */
	uint16_t sport;                  /* the sender's UDP source port (host order) */
	uint8_t sgid[16];
	uint8_t dgid[16];
	uint8_t tclass, hop_limit;
	uint16_t pad;
	uint32_t flow_label;
};
/* The packet's ICRC slot holds its ICRC (computed for IPv4 Identification 0 and UDP
 * destination port 4791, as for a plain UDP send); without it the slot is zero and the
 * receiver skips the check (docs/transport.md: when the shm link computes the ICRC). */
#define UROCE_SHM_REC_ICRC 0x1u

_Static_assert(sizeof(struct uroce_shm_ring) == 2 * UROCE_SHM_ALIGN, "two cache lines");
_Static_assert(sizeof(struct uroce_shm_ring) <= UROCE_SHM_CTL_BYTES, "ring control fits");
_Static_assert(sizeof(struct uroce_shm_rec) == 48, "record header");
_Static_assert(sizeof(struct uroce_shm_hdr) <= UROCE_SHM_HDR_BYTES, "header page");

static inline uint64_t uroce_shm_ring_off(uint32_t ring_bytes, unsigned k)
{
	return UROCE_SHM_HDR_BYTES + (uint64_t)k * (UROCE_SHM_CTL_BYTES + ring_bytes);
}

static inline uint64_t uroce_shm_size(uint32_t ring_bytes)
{
	return uroce_shm_ring_off(ring_bytes, 2);
}

#endif
