/* netio_icrc.c — the ICRC of a packet held in pieces (struct uroce_txpkt), for any IPv4
 * Identification.
 *
 * src/wire/icrc.c computes the ICRC of a contiguous packet sent with IPv4 ID 0.  The send
 * path needs two more things: the packet arrives as an iovec (headers, application payload,
 * pad + ICRC slot), and a UDP_SEGMENT (GSO) send gives its IPv4 segments the IDs 0, 1, 2, ...
 * (Linux's inet_gso_segment numbers the segments of a super-packet from the first one's ID,
 * which is 0 on an unconnected DF socket; checked by capture in tests/netio).  So the
 * pseudo-header is written out here with the ID as a parameter, and the CRC is chained over
 * the pieces with uroce_crc32, which continues zlib's crc32.
 *
 * The pseudo-header is RoCEv2 Annex A17.3.3 (docs/wire.md): 8 bytes of ones, the IP header
 * with its variant fields (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop
 * limit) set to ones, the UDP header with its checksum set to ones, the BTH with byte 4
 * (FECN, BECN, reserved) set to ones.
 */
#include <string.h>

#include "transport/netio.h"

#define UDP_HLEN 8
#define IPV4_HLEN 20
#define IPV6_HLEN 40

uint32_t uroce_netio_icrc(const struct uroce_icrc_addr *a, uint16_t ip_id,
			  const struct iovec *iov, unsigned iovcnt, size_t len)
{
	uint8_t pre[8 + IPV6_HLEN + UDP_HLEN + UROCE_BTH_LEN];
	size_t n = 0, want, left, got = 0;
	uint16_t udp_len = (uint16_t)(UDP_HLEN + len);
	uint32_t crc;
	unsigned i;

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return 0;
	memset(pre, 0xFF, 8);
	n = 8;
	if (a->family == AF_INET6) {
		pre[n] = 0x6F;                          /* version 6, traffic class ones */
		memset(pre + n + 1, 0xFF, 3);           /* traffic class, flow label */
		uroce_put_be16(pre + n + 4, udp_len);   /* payload length */
		pre[n + 6] = IPPROTO_UDP;
		pre[n + 7] = 0xFF;                      /* hop limit */
		memcpy(pre + n + 8, a->src.v6.s6_addr, 16);
		memcpy(pre + n + 24, a->dst.v6.s6_addr, 16);
		n += IPV6_HLEN;
	} else {
		pre[n] = 0x45;
		pre[n + 1] = 0xFF;                      /* TOS */
		uroce_put_be16(pre + n + 2, (uint16_t)(IPV4_HLEN + udp_len));
		uroce_put_be16(pre + n + 4, ip_id);
		uroce_put_be16(pre + n + 6, 0x4000);    /* DF, offset 0 */
		pre[n + 8] = 0xFF;                      /* TTL */
		pre[n + 9] = IPPROTO_UDP;
		pre[n + 10] = pre[n + 11] = 0xFF;       /* header checksum */
		memcpy(pre + n + 12, &a->src.v4, 4);
		memcpy(pre + n + 16, &a->dst.v4, 4);
		n += IPV4_HLEN;
	}
	uroce_put_be16(pre + n, a->sport);
	uroce_put_be16(pre + n + 2, a->dport);
	uroce_put_be16(pre + n + 4, udp_len);
	pre[n + 6] = pre[n + 7] = 0xFF;                 /* UDP checksum */
	n += UDP_HLEN;

	/* The BTH may straddle pieces: gather its 12 bytes, then CRC the rest in place. */
	want = len - UROCE_ICRC_LEN;                    /* bytes covered after the pseudo-header */
	for (i = 0; i < iovcnt && got < UROCE_BTH_LEN; i++) {
		size_t k = iov[i].iov_len;

		if (k > UROCE_BTH_LEN - got)
			k = UROCE_BTH_LEN - got;
		memcpy(pre + n + got, iov[i].iov_base, k);
		got += k;
	}
	if (got < UROCE_BTH_LEN)
		return 0;
	pre[n + 4] = 0xFF;
	crc = uroce_crc32(0, pre, n + UROCE_BTH_LEN);

	left = want - UROCE_BTH_LEN;
	got = 0;                                        /* bytes of the packet passed so far */
	for (i = 0; i < iovcnt && left; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t k = iov[i].iov_len, skip = 0;

		if (got + k <= UROCE_BTH_LEN) {
			got += k;
			continue;
		}
		if (got < UROCE_BTH_LEN)
			skip = UROCE_BTH_LEN - got;
		got += k;
		k -= skip;
		if (k > left)
			k = left;
		crc = uroce_crc32(crc, p + skip, k);
		left -= k;
	}
	return crc;
}
