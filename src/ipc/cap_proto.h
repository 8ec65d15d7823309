/* cap_proto.h — the capture ring: where an engine process copies the packets it sends and
 * receives while `uroce capture` runs (docs/daemon.md "Capturing", issue #15).
 *
 * Each context's data path (transport/capture.c) creates one memfd per device: a header
 * page and a byte ring of records, sealed against shrinking, and registers it with uroced
 * (CAP_REGISTER).  Nothing is written while the header's `active` word is 0, which is the
 * only thing the data path reads per packet.  `uroce capture` asks uroced for the rings of
 * a device (CAP_START, then CAP_NEXT until -ENOENT, again while it runs); the daemon hands
 * over only the rings of processes of the capturer's uid (all to root), resets each one's
 * head to its tail and sets `active` to the session number, and clears it again when the
 * capturer's connection closes.
 *
 * One producer (the process, serialised by a lock of its own), one consumer (the capture).
 * Lossy: a record that does not fit is not written and counted in `missed`.  Neither side
 * trusts the other: the producer keeps its tail to itself and checks the head it reads,
 * the consumer checks every length and index it reads before using it.
 *
 * Records are 8-byte aligned: struct uroce_cap_rec, then `len` packet bytes (BTH ... ICRC
 * slot, the UDP payload), padded to 8.  A record never wraps: when it does not fit before
 * the ring's end, the producer writes a record header with len UROCE_CAP_REC_WRAP there
 * (if 4 bytes remain) and continues at the ring's start.
 */
#ifndef UROCE_IPC_CAP_PROTO_H
#define UROCE_IPC_CAP_PROTO_H

#include <stdint.h>

#define UROCE_CAP_MAGIC 0x50414355u      /* "UCAP" */
#define UROCE_CAP_VERSION 1
#define UROCE_CAP_HDR_BYTES 4096u
#define UROCE_CAP_RING_MIN (64u << 10)
#define UROCE_CAP_RING_MAX (64u << 20)
#define UROCE_CAP_RING_DEFAULT (2u << 20)  /* $UROCE_CAPTURE_RING_KB */
#define UROCE_CAP_REC_WRAP 0xffffffffu
#define UROCE_CAP_PKT_MAX 65536u

struct uroce_cap_hdr {
	uint32_t magic, version;
	uint64_t size;                   /* bytes of the memfd */
	uint32_t ring_bytes;             /* a power of two */
	int32_t pid;                     /* the producer */
	uint32_t active;                 /* uroced: 0, or the capture session writing here */
	uint32_t gone;                   /* uroced: the producer's connection closed */
	uint64_t missed_base;            /* uroced: `missed` when the session began */
	uint8_t pad0[24];
	/* the producer's line */
	uint64_t tail;                   /* bytes written (published with release) */
	uint64_t missed;                 /* packets not recorded: the ring was full */
	uint64_t recorded;               /* packets recorded */
	uint8_t pad1[40];
	/* the consumer's line */
	uint64_t head;                   /* bytes read */
	uint8_t pad2[56];
};

enum uroce_cap_dir { UROCE_CAP_TX = 0, UROCE_CAP_RX = 1 };
enum uroce_cap_link { UROCE_CAP_UDP = 0, UROCE_CAP_SHM = 1 };
/* The packet's ICRC slot holds the ICRC as sent or received.  Without it (the shm link
 * without UROCE_SHM_ICRC: the slot is zero) the capture computes it for the headers it
 * writes. */
#define UROCE_CAP_F_ICRC 0x1u

/* One packet.  Addresses are GIDs (IPv4-mapped for IPv4); ports host order; ip_id is the
 * IPv4 Identification it had on the wire (GSO segment k: k). */
struct uroce_cap_rec {
	uint32_t len;                    /* packet bytes; UROCE_CAP_REC_WRAP: skip to start */
	uint8_t dir, link, flags, tclass;
	uint64_t ts_ns;                  /* CLOCK_REALTIME */
	uint8_t sgid[16], dgid[16];
	uint16_t sport, dport;
	uint16_t ip_id;
	uint8_t hop_limit;
	uint8_t state;                   /* UROCE_CAP_ST_* */
	uint32_t flow_label;
	uint32_t sqpn;                   /* sent: the sending QP; received: UROCE_CAP_NO_QPN */
};
#define UROCE_CAP_NO_QPN 0xffffffffu
/* A UDP send is recorded before its sendmsg (so that the capture knows of it before the
 * receiver's copy can arrive) as PENDING, then set VALID or CANCELLED (the kernel took
 * nothing).  The capture reads no further in a ring than its first PENDING record, and
 * writes nothing younger than it, until it is settled (or 1 s old: a producer that
 * stopped). */
#define UROCE_CAP_ST_VALID 0
#define UROCE_CAP_ST_PENDING 1
#define UROCE_CAP_ST_CANCELLED 2
#define UROCE_CAP_PENDING_MAX_NS 1000000000ull

_Static_assert(sizeof(struct uroce_cap_hdr) == 192, "capture header layout");
_Static_assert(sizeof(struct uroce_cap_rec) == 64, "capture record layout");

static inline uint32_t uroce_cap_rec_size(uint32_t len)
{
	return (uint32_t)sizeof(struct uroce_cap_rec) + ((len + 7u) & ~7u);
}

#endif
