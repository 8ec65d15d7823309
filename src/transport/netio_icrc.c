/* netio_icrc.c — the ICRC of a packet held in pieces (struct uroce_txpkt), for any IPv4
 * Identification.
 *
 * src/wire/icrc.c computes the ICRC of a contiguous packet sent with IPv4 ID 0.  The send
 * path needs two more things: the packet arrives as an iovec (headers, application payload,
 * pad + ICRC slot), and a UDP_SEGMENT (GSO) send gives its IPv4 segments the IDs 0, 1, 2, ...
 * (Linux's inet_gso_segment numbers the segments of a super-packet from the first one's ID,
 * which is 0 on an unconnected DF socket; checked by capture in tests/netio).  So the
 * pseudo-header's CRC comes from uroce_icrc_pre with the ID as a parameter, and the CRC is
 * chained over the pieces with uroce_crc32, which continues zlib's crc32.
 *
 * The pseudo-header is RoCEv2 Annex A17.3.3 (docs/wire.md): 8 bytes of ones, the IP header
 * with its variant fields (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop
 * limit) set to ones, the UDP header with its checksum set to ones, the BTH with byte 4
 * (FECN, BECN, reserved) set to ones.
 */
#include <string.h>

#include "transport/copy.h"
#include "transport/netio.h"

/* Copy the packet's first @n bytes out of its pieces into @dst. */
static void gather_head(const struct iovec *iov, unsigned iovcnt, size_t n, uint8_t *dst)
{
	for (unsigned i = 0; i < iovcnt && n; i++) {
		size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;

		uroce_copy_small(dst, iov[i].iov_base, k);
		dst += k;
		n -= k;
	}
}

uint32_t uroce_netio_icrc(const struct uroce_icrc_addr *a, uint16_t ip_id,
			  const struct iovec *iov, unsigned iovcnt, size_t len)
{
	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return 0;
	return uroce_netio_icrc_pre(uroce_icrc_pre(a, ip_id, len), iov, iovcnt, len);
}

uint32_t uroce_netio_icrc_pre(uint32_t pre, const struct iovec *iov, unsigned iovcnt, size_t len)
{
	uint8_t head[UROCE_ICRC_SMALL];
	size_t left, got, n;
	uint32_t crc;
	unsigned i;

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return 0;
	/* A small packet (an ACK, a short SEND or WRITE: three or four pieces) is gathered
	 * and CRC'd in one call: ISA-L costs about the same per call up to 64 bytes, more
	 * below 16 (src/wire/icrc.c, icrc_of).  A larger one: its BTH (which may straddle
	 * pieces) from a masked copy, then the rest in place, from right after the BTH: a
	 * payload of whole 64-byte blocks in one call (icrc_of says why). */
	n = len - UROCE_ICRC_LEN;
	if (n > UROCE_ICRC_SMALL)
		n = UROCE_BTH_LEN;
	gather_head(iov, iovcnt, n, head);
	head[4] = 0xFF;                                 /* BTH byte 4 */
	crc = uroce_crc32(pre, head, n);

	left = len - UROCE_ICRC_LEN - n;                /* covered bytes after those */
	got = 0;                                        /* bytes of the packet passed so far */
	for (i = 0; i < iovcnt && left; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t k = iov[i].iov_len, skip = 0;

		if (got + k <= n) {
			got += k;
			continue;
		}
		if (got < n)
			skip = n - got;
		got += k;
		k -= skip;
		if (k > left)
			k = left;
		crc = uroce_crc32(crc, p + skip, k);
		left -= k;
	}
	return crc;
}
