/* frame.h — Ethernet / IPv4 / IPv6 / UDP framing around RoCEv2 payloads.
 *
 * Used where uroce handles whole frames: reading and writing capture files, and
 * computing the ICRC (which covers the IP and UDP headers).  The live data path never
 * sees these headers: the kernel's UDP socket strips them (docs/ARCHITECTURE.md).
 *
 * Every parser checks each length before reading a field and never reads past
 * the buffer it is given.  Errors are negative errno values.
 */
#ifndef UROCE_NET_FRAME_H
#define UROCE_NET_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#define UROCE_UDP_PORT 4791 /* IANA RoCEv2, RoCEv2 Annex A17.2 */

/* A parsed frame: pointers into the caller's buffer. */
struct uroce_frame {
	int family;              /* AF_INET or AF_INET6 */
	const uint8_t *ip;       /* IP header (IPv4 with options, or the fixed IPv6 header) */
	size_t ip_len;           /* its length */
	const uint8_t *udp;      /* the 8-byte UDP header */
	const uint8_t *payload;  /* UDP payload: BTH ... ICRC for RoCEv2 */
	size_t payload_len;      /* from the UDP length field, checked against the buffer */
	uint16_t sport, dport;
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} src, dst;
};

/*
 * Parse an Ethernet frame (optionally 802.1Q / 802.1ad tagged) carrying IPv4 or IPv6
 * and UDP.  Returns 0 and fills @out; -EPROTONOSUPPORT for anything that is not
 * IP/UDP (ARP, TCP, ICMP, fragments); -EINVAL for a frame that is truncated or whose
 * length fields disagree with the buffer.  A non-4791 UDP port is not an error:
 * the caller looks at @out->dport.
 */
int uroce_frame_parse_eth(const uint8_t *frame, size_t len, struct uroce_frame *out);

/* The same, starting at the IP header (linktype RAW / a buffer with no Ethernet). */
int uroce_frame_parse_ip(const uint8_t *pkt, size_t len, struct uroce_frame *out);

/* Addresses and ports for building a frame around a UDP payload. */
struct uroce_frame_addr {
	int family;                 /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} src, dst;
	uint16_t sport, dport;
	uint16_t ip_id;             /* IPv4 Identification; uroce sends 0 (design brief) */
	uint8_t ttl;                /* 0 means 64 */
	uint8_t src_mac[6], dst_mac[6];
};

/*
 * Build Ethernet + IP + UDP headers followed by @payload into @buf (capacity @cap).
 * IPv4 gets DF set and a correct header checksum; the UDP checksum is 0 for IPv4
 * (RoCEv2 Annex A17.3 allows it) and computed for IPv6, where it is mandatory.
 * Returns the frame length, or -ENOSPC / -EINVAL.
 */
long uroce_frame_build_eth(uint8_t *buf, size_t cap, const struct uroce_frame_addr *a,
			   const uint8_t *payload, size_t payload_len);

#endif
