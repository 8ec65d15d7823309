/* netio_icrc.c — the ICRC of a packet held in pieces (struct uroce_txpkt), for any IPv4
 * Identification.
 *
 * src/wire/icrc.c computes the ICRC of a contiguous packet sent with IPv4 ID 0.  The send
 * path needs two more things: the packet arrives as an iovec (headers, application payload,
 * pad + ICRC slot), and a UDP_SEGMENT (GSO) send gives its IPv4 segments the IDs 0, 1, 2, ...
 * (Linux's inet_gso_segment numbers the segments of a super-packet from the first one's ID,
 * which is 0 on an unconnected DF socket; checked by capture in tests/netio).  So the
 * pseudo-header's CRC comes from uroce_icrc_head with the ID as a parameter, and the CRC is
 * chained over the pieces with uroce_crc32, which continues zlib's crc32.
 *
 * The pseudo-header is RoCEv2 Annex A17.3.3 (docs/wire.md): 8 bytes of ones, the IP header
 * with its variant fields (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop
 * limit) set to ones, the UDP header with its checksum set to ones, the BTH with byte 4
 * (FECN, BECN, reserved) set to ones.
 */
#include <string.h>

#include "transport/netio.h"

uint32_t uroce_netio_icrc(const struct uroce_icrc_addr *a, uint16_t ip_id,
			  const struct iovec *iov, unsigned iovcnt, size_t len)
{
	uint8_t bth[UROCE_BTH_LEN];
	size_t left, got = 0;
	uint32_t crc;
	unsigned i;

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return 0;
	/* The BTH may straddle pieces: gather its 12 bytes (usually all in the first). */
	for (i = 0; i < iovcnt && got < UROCE_BTH_LEN; i++) {
		size_t k = iov[i].iov_len;

		if (k > UROCE_BTH_LEN - got)
			k = UROCE_BTH_LEN - got;
		memcpy(bth + got, iov[i].iov_base, k);
		got += k;
	}
	if (got < UROCE_BTH_LEN)
		return 0;
	/* The masked pseudo-headers from registers (src/wire/icrc.c: a stack buffer handed to
	 * the vector CRC stalls on store forwarding), then the rest in place. */
	crc = uroce_icrc_head(a, ip_id, bth, len);

	left = len - UROCE_ICRC_LEN - UROCE_BTH_LEN;    /* bytes covered after the BTH */
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
