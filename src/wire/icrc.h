/* icrc.h — the RoCEv2 Invariant CRC (RoCEv2 Annex A17.3.3, IBA 7.8.1).
 *
 * ICRC = CRC-32 (IEEE 802.3; identical to zlib's crc32()) over
 *     8 bytes 0xFF (stand-in for the LRH RoCEv2 does not have)
 *   | IP header, variant fields set to ones
 *         IPv4: TOS, TTL, header checksum;  IPv6: traffic class, flow label, hop limit
 *   | UDP header, checksum set to 0xFFFF
 *   | BTH with byte 4 (FECN, BECN, 6 reserved bits) set to 0xFF
 *   | the remaining headers, payload and pad
 * stored in the last 4 bytes of the UDP payload least-significant byte first.
 *
 * Two families of calls:
 *  - data path (uroce_icrc_addr): the IP/UDP headers are synthesised from the
 *    addresses, ports and the UDP payload length, as Linux sends them from a
 *    uroce socket: IPv4 without options, Identification 0, DF set (with
 *    IP_PMTUDISC_DO Linux sends ID 0; docs/wire.md), protocol UDP.
 *  - frames (uroce_icrc_frame): the IP header of a captured frame as-is.
 *
 * Receive and the unknown IPv4 Identification: see uroce_icrc_verify() and
 * docs/wire.md "ICRC on receive".
 *
 * All calls are pure functions of their arguments (a few constant tables are
 * built at load time), thread-safe, and never read outside the buffers given.  The
 * addresses' part of the pseudo-header's CRC is memoised per thread (uroce_icrc_base), in a small block
 * allocated at the thread's first call and freed when it exits; without it (an
 * allocation that failed) the calls compute everything, with the same results.
 */
#ifndef UROCE_WIRE_ICRC_H
#define UROCE_WIRE_ICRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

/* Addresses and ports of a packet, as the data path knows them. */
struct uroce_icrc_addr {
	int family;                 /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} src, dst;                 /* network byte order, as in sockaddr */
	uint16_t sport, dport;      /* host byte order */
};

enum uroce_icrc_status {
	UROCE_ICRC_UNCHECKED = 0,
	UROCE_ICRC_OK,      /* full 32-bit match with the synthesised headers (ID 0, DF) */
	UROCE_ICRC_OK_ID,   /* IPv4 only: matched for exactly one Identification value,
			     * recovered from the ICRC; 16 bits of checking remained */
	UROCE_ICRC_BAD,
	UROCE_ICRC_BAD_ID,  /* uroce_icrc_rx_check: the ICRC matches for one Identification
			     * only, and this sender would not have used it (a corruption, or a
			     * sender whose IDs follow no pattern uroce knows) */
};

/* Flags of uroce_icrc_verify(). */
#define UROCE_ICRC_RX_SOLVE_ID 0x1u /* IPv4: on mismatch, solve for the 16-bit Identification */
#define UROCE_ICRC_RX_DF_ANY   0x2u /* ...and also accept a sender that cleared DF (15 bits left) */

/* CRC-32 as zlib's crc32(crc, buf, len) (chainable; start with 0), via ISA-L. */
uint32_t uroce_crc32(uint32_t crc, const void *buf, size_t len);

/*
 * ICRC of the UDP payload @pkt (len bytes, ICRC slot included; len >= 16) sent
 * from a uroce socket: IPv4 ID 0 + DF, or IPv6 with the addresses of @a.
 * Returns the ICRC value (store with uroce_put_le32 at pkt + len - 4).
 * The last 4 bytes are not read.  @len < 16 returns 0.
 */
uint32_t uroce_icrc_compute(const struct uroce_icrc_addr *a, const uint8_t *pkt, size_t len);

/*
 * The CRC (uroce_crc32's convention, to be continued with it) of the masked prefix of a
 * packet of @len bytes (ICRC slot included): the pseudo IP header with Identification
 * @ip_id (IPv4; ignored for IPv6), the UDP header and the BTH @bth (12 bytes, byte 4
 * masked here).  uroce_crc32(head, <the packet after its BTH, up to its ICRC slot>)
 * is the ICRC; the packet may then be in pieces.  Reads 12 bytes at @bth; cannot fail.
 */
uint32_t uroce_icrc_head(const struct uroce_icrc_addr *a, uint16_t ip_id, const uint8_t *bth,
			 size_t len);

/*
 * The CRC of the pseudo-header before the BTH alone (8 bytes of ones, the masked IP and UDP
 * headers) for a @len-byte UDP payload and IPv4 Identification @ip_id:
 * uroce_crc32(pre, <the BTH with byte 4 set to ones, then the packet up to its ICRC slot>)
 * is the ICRC.  The addresses' part is memoised per thread (icrc.c), the length's and the
 * ID's are table lookups.
 */
uint32_t uroce_icrc_pre(const struct uroce_icrc_addr *a, uint16_t ip_id, size_t len);

/* The CRC of that pseudo-header with both length fields and the Identification zero: a
 * function of the addresses and ports alone, which a caller that sends or receives a
 * stream can keep (netio does, per destination and per source) and pass to the _base
 * calls, instead of the memo's lookup in every call.  Memoised per thread. */
uint32_t uroce_icrc_base(const struct uroce_icrc_addr *a);

/* uroce_icrc_pre from the base of its addresses (uroce_icrc_base(a), a->family). */
uint32_t uroce_icrc_pre_base(uint32_t base, int family, uint16_t ip_id, size_t len);

/* uroce_icrc_pre for Identification @ip_id from its value @pre for ID 0 (the same
 * addresses and length): a GSO run's packets differ only in it. */
uint32_t uroce_icrc_with_id(uint32_t pre, int family, uint16_t ip_id);

/* Packets whose covered bytes after the pseudo-header (BTH to pad) are at most this many
 * are CRC'd from one masked copy, in one call. */
#define UROCE_ICRC_SMALL 128

/* Compute and store the ICRC in the last 4 bytes of @pkt. */
void uroce_icrc_set(const struct uroce_icrc_addr *a, uint8_t *pkt, size_t len);

/*
 * Check the ICRC of a received UDP payload whose IP header the receiver did not
 * see.  First a full 32-bit check assuming the sender was uroce (IPv4 ID 0, DF).
 * If that fails, the packet is IPv4 and flags has UROCE_ICRC_RX_SOLVE_ID: solve
 * for the Identification (CRC-32 is linear over GF(2)); accept only if the
 * difference lies in the image of the 16 ID bits, and store the ID in *ip_id.
 * Returns UROCE_ICRC_OK, UROCE_ICRC_OK_ID or UROCE_ICRC_BAD.  @ip_id may be NULL.
 */
enum uroce_icrc_status uroce_icrc_verify(const struct uroce_icrc_addr *a, const uint8_t *pkt,
					 size_t len, unsigned flags, uint16_t *ip_id);

/*
 * uroce_icrc_verify, trying IPv4 Identification @id_hint first instead of 0 (the
 * segment's index in a UDP_GRO buffer: uroce's GSO sends number their segments 0, 1, ...),
 * so that the common case costs one CRC and no solving.  A match for a non-zero ID is
 * UROCE_ICRC_OK_ID with *ip_id set, as a solved one; otherwise the same as
 * uroce_icrc_verify (which is this with hint 0).
 */
enum uroce_icrc_status uroce_icrc_verify_hint(const struct uroce_icrc_addr *a, const uint8_t *pkt,
					      size_t len, unsigned flags, uint16_t id_hint,
					      uint16_t *ip_id);

/*
 * Receive with what is known of the sender: the IPv4 Identifications it uses
 * (docs/wire.md "Which Identifications a receiver accepts").  uroce_icrc_verify_hint
 * finds the one ID (if any) that makes the ICRC match; a corrupted packet has one with
 * probability 2^-16.  Accepting any such ID would let 2^-16 of the corruptions through,
 * so the ID must also be one this sender (source and destination address) would have
 * sent:
 *   - a uroce sender (it has sent ID 0 twice where Linux's counter would not have been
 *     at 0): ID 0, the hint (the segment's index in a GRO buffer), or the ID after the
 *     last one accepted from the same source port for the same QP (the next segment of
 *     a GSO run, when the receiver's GRO split it);
 *   - any other sender (Linux: a counter per address pair, +1 per packet, plus a random
 *     jump of less than the jiffies since its last use): those three, or an ID at most
 *     UROCE_ICRC_ID_WINDOW + (time since the last accepted packet) / 1 us after the last
 *     accepted one, or at most UROCE_ICRC_ID_BACK before it or equal to it (reordering,
 *     duplicates); after a refused
 *     ID, also the same window after that ID (the sender's counter jumped: one packet is
 *     lost, the next is accepted);
 *   - a sender never seen (or forgotten: the table holds UROCE_ICRC_PEERS senders): any
 *     ID (its first packet has 16 bits of checking, as before).
 * Accepting one of a set S of IDs lets a corrupted packet through with probability
 * |S| / 2^32: at most 3 * 2^-32 from a uroce sender, about (UROCE_ICRC_ID_WINDOW +
 * UROCE_ICRC_ID_BACK + 3 + gap in us) / 2^32 from a Linux sender (docs/wire.md).
 *
 * The state is the caller's (struct uroce_icrc_rx, zeroed before first use; not
 * thread-safe: one caller at a time), the time too: *@now_ns in ns of CLOCK_MONOTONIC (or
 * any monotonic clock the caller always uses); 0 means "not read yet": the call reads
 * CLOCK_MONOTONIC if it needs the time and stores it there, so that a batch of packets
 * reads it at most once (and a uroce sender's packets never).
 * IPv6 has no Identification: the plain 32-bit check, the state untouched.
 * Returns UROCE_ICRC_OK (ID 0 matched), UROCE_ICRC_OK_ID (*ip_id, non-zero, matched and
 * accepted), UROCE_ICRC_BAD (no ID matches) or UROCE_ICRC_BAD_ID (*ip_id matches but is
 * not accepted).  With rx->any_id every matching ID is accepted (the behaviour before
 * this check existed; UROCE_NETIO_ICRC_ANY_ID=1 in netio, for senders with random IDs).
 */
#define UROCE_ICRC_PEERS 512            /* senders remembered (128 sets of 4) */
#define UROCE_ICRC_ID_WINDOW 128        /* IDs a Linux sender may skip at no time apart */
#define UROCE_ICRC_ID_NS 1000           /* ... and one more per this many ns apart */
#define UROCE_ICRC_ID_BACK 32           /* IDs it may arrive behind the newest (reordering) */
#define UROCE_ICRC_RUNS 4               /* GSO runs followed per uroce sender */

struct uroce_icrc_peer {
	uint32_t src, dst;          /* IPv4 addresses (network order) */
	uint64_t last_ns;           /* when its last accepted packet came (not kept for a
				     * uroce sender, which needs no time); 0: a free slot */
	uint32_t used;              /* rx->tick at its last accepted packet (replacement) */
	uint64_t miss_ns;           /* when its last refused ID came */
	uint16_t last;              /* the Identification of its last accepted packet */
	uint16_t miss;              /* the last refused ID (misses > 0) */
	uint8_t zeros;              /* ID-0 packets Linux's counter does not explain; 2: uroce */
	uint8_t misses;             /* IDs refused since the last accepted packet */
	uint8_t run_rr;             /* the runs[] slot to reuse next */
	struct {
		uint32_t qpn;       /* destination QPN | 1 << 31 (0: unused) */
		uint16_t sport;
		uint16_t next;      /* the ID the next segment of this run carries */
	} runs[UROCE_ICRC_RUNS];
};

struct uroce_icrc_rx {
	struct uroce_icrc_peer peer[UROCE_ICRC_PEERS];
	uint32_t tick;              /* accepted IPv4 packets, for replacement */
	uint16_t last_peer;         /* 1 + the index of the last accepted packet's sender */
	bool any_id;
};

enum uroce_icrc_status uroce_icrc_rx_check(struct uroce_icrc_rx *rx, const struct uroce_icrc_addr *a,
					   const uint8_t *pkt, size_t len, uint16_t id_hint,
					   uint64_t *now_ns, uint16_t *ip_id);

/* uroce_icrc_rx_check with @base = uroce_icrc_base(a) given (the caller keeps it). */
enum uroce_icrc_status uroce_icrc_rx_check_base(struct uroce_icrc_rx *rx,
						const struct uroce_icrc_addr *a, uint32_t base,
						const uint8_t *pkt, size_t len, uint16_t id_hint,
						uint64_t *now_ns, uint16_t *ip_id);

/*
 * ICRC computed over a captured frame's own IP header.  @ip/@ip_len is the IP
 * header (IPv4 with options, or the 40-byte IPv6 header; extension headers are
 * not supported: -EPROTONOSUPPORT), @udp the 8-byte UDP header, @pkt/@len the
 * UDP payload including the ICRC slot.  Returns 0 and *icrc, or -EINVAL.
 */
int uroce_icrc_frame(int family, const uint8_t *ip, size_t ip_len, const uint8_t *udp,
		     const uint8_t *pkt, size_t len, uint32_t *icrc);

/* The same, compared with the ICRC stored in the packet: true if it matches. */
bool uroce_icrc_frame_ok(int family, const uint8_t *ip, size_t ip_len, const uint8_t *udp,
			 const uint8_t *pkt, size_t len);

/* Pseudo-header memo misses of the calling thread so far (tests: the memo keeps what a
 * stream uses; 0 before the thread's first ICRC). */
unsigned long uroce_icrc_memo_misses(void);

#endif
