/* test_icrc_hint.c — the receive path's ICRC check with an Identification hint
 * (uroce_icrc_verify_hint, used by netio for the segments of a UDP_GRO buffer) against the
 * ICRC computed independently over a real IPv4 header (uroce_icrc_frame):
 *   - the hinted ID matches: UROCE_ICRC_OK_ID and that ID (or OK for ID 0, hint 0);
 *   - a wrong hint (any, including 0): the solver still recovers the sender's ID;
 *   - one flipped bit anywhere in the covered bytes: BAD, whatever the hint;
 *   - IPv6 ignores the hint;
 *   - uroce_icrc_head + uroce_crc32 over the rest = uroce_icrc_compute (ID 0).
 */
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "wire/icrc.h"
#include "wire/wire.h"

static void v4_frame_icrc(const struct uroce_icrc_addr *a, uint16_t id, uint8_t *pkt, size_t len)
{
	uint8_t ip[20] = { 0x45, 0x00 }, udp[8];
	uint32_t c = 0;

	uroce_put_be16(ip + 2, (uint16_t)(28 + len));
	uroce_put_be16(ip + 4, id);
	uroce_put_be16(ip + 6, 0x4000);           /* DF */
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &a->src.v4, 4);
	memcpy(ip + 16, &a->dst.v4, 4);
	uroce_put_be16(udp, a->sport);
	uroce_put_be16(udp + 2, a->dport);
	uroce_put_be16(udp + 4, (uint16_t)(8 + len));
	uroce_put_be16(udp + 6, 0);
	CHECK(uroce_icrc_frame(AF_INET, ip, 20, udp, pkt, len, &c) == 0, "frame");
	uroce_put_le32(pkt + len - 4, c);
}

int main(void)
{
	static uint8_t pkt[4096 + 32];
	static const size_t lens[] = { 16, 28, 60, 1052, 4124 };
	static const uint16_t ids[] = { 0, 1, 2, 15, 63, 0x1234, 0xFFFF };
	struct uroce_icrc_addr a4 = { .family = AF_INET, .sport = 0xC123, .dport = 4791 };
	struct uroce_icrc_addr a6 = { .family = AF_INET6, .sport = 0xC456, .dport = 4791 };
	enum uroce_icrc_status st;
	uint16_t got;

	a4.src.v4.s_addr = 0x0100007f;               /* 127.0.0.1 */
	a4.dst.v4.s_addr = 0x0200007f;
	for (int i = 0; i < 16; i++) {
		a6.src.v6.s6_addr[i] = (uint8_t)(0x20 + i);
		a6.dst.v6.s6_addr[i] = (uint8_t)(0x90 - i);
	}
	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)(i * 7 + 3);
	pkt[0] = 0x0A;                               /* any BTH: the CRC does not look at it */

	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		size_t len = lens[li];

		/* head + the rest chained = the one-call ICRC (ID 0) */
		CHECK(uroce_crc32(uroce_icrc_head(&a4, 0, pkt, len), pkt + 12, len - 16) ==
			      uroce_icrc_compute(&a4, pkt, len),
		      "head v4 len %zu", len);
		CHECK(uroce_crc32(uroce_icrc_head(&a6, 0x77, pkt, len), pkt + 12, len - 16) ==
			      uroce_icrc_compute(&a6, pkt, len),
		      "head v6 len %zu", len);

		for (size_t ii = 0; ii < sizeof(ids) / sizeof(ids[0]); ii++) {
			uint16_t id = ids[ii];

			v4_frame_icrc(&a4, id, pkt, len);
			for (size_t hi = 0; hi < sizeof(ids) / sizeof(ids[0]); hi++) {
				uint16_t hint = ids[hi];

				got = 0xBEEF;
				st = uroce_icrc_verify_hint(&a4, pkt, len, UROCE_ICRC_RX_SOLVE_ID, hint,
							    &got);
				CHECK(st == (id || hint ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK) && got == id,
				      "len %zu id %u hint %u: status %d id %u", len, id, hint, st, got);
			}
			/* Without the solver only the hinted ID is accepted. */
			CHECK(uroce_icrc_verify_hint(&a4, pkt, len, 0, id, NULL) ==
				      (id ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK),
			      "len %zu id %u exact hint, no solver", len, id);
			CHECK(uroce_icrc_verify_hint(&a4, pkt, len, 0, (uint16_t)(id ^ 1), NULL) ==
				      UROCE_ICRC_BAD,
			      "len %zu id %u wrong hint, no solver", len, id);
			/* A flipped bit: BAD with the right hint and with hint 0 (the solver must
			 * not explain it away as another ID). */
			for (size_t bit = 0; bit < len * 8; bit += len > 100 ? 997 : 13) {
				if (bit / 8 == 4)
					continue;        /* BTH byte 4 is masked out of the ICRC */
				pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
				CHECK(uroce_icrc_verify_hint(&a4, pkt, len, UROCE_ICRC_RX_SOLVE_ID, id,
							     NULL) == UROCE_ICRC_BAD,
				      "len %zu id %u bit %zu", len, id, bit);
				CHECK(uroce_icrc_verify_hint(&a4, pkt, len, UROCE_ICRC_RX_SOLVE_ID, 0,
							     NULL) == UROCE_ICRC_BAD,
				      "len %zu id %u bit %zu hint 0", len, id, bit);
				pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			}
		}
		/* IPv6: no Identification; the hint must not change anything. */
		uroce_icrc_set(&a6, pkt, len);
		CHECK(uroce_icrc_verify_hint(&a6, pkt, len, UROCE_ICRC_RX_SOLVE_ID, 5, &got) ==
			      UROCE_ICRC_OK && got == 0,
		      "v6 len %zu", len);
		pkt[len / 2] ^= 0x10;
		CHECK(uroce_icrc_verify_hint(&a6, pkt, len, UROCE_ICRC_RX_SOLVE_ID, 5, NULL) ==
			      UROCE_ICRC_BAD,
		      "v6 len %zu corrupted", len);
		pkt[len / 2] ^= 0x10;
	}
	CHECK(uroce_icrc_verify_hint(&a4, pkt, 15, UROCE_ICRC_RX_SOLVE_ID, 0, NULL) == UROCE_ICRC_BAD,
	      "short");
	return check_summary();
}
