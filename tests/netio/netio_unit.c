/* netio_unit.c — pieces of netio that need no sockets: the iovec ICRC against the wire
 * module's (contiguous, ID 0) and against a full IPv4 header with Identification k (what
 * a GSO segment carries), the ICRC slot split over pieces, the source-port hash range. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <string.h>

#include "check.h"
#include "transport/netio.c"   /* statics: sport_for, put_icrc */

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 5));
}

int main(void)
{
	uint8_t pkt[600], ip[20], udp[8];
	struct uroce_icrc_addr a4 = { .family = AF_INET, .sport = 0xC123, .dport = 4791 };
	struct uroce_icrc_addr a6 = { .family = AF_INET6, .sport = 0xFFFF, .dport = 4791 };

	inet_pton(AF_INET, "192.0.2.1", &a4.src.v4);
	inet_pton(AF_INET, "192.0.2.2", &a4.dst.v4);
	inet_pton(AF_INET6, "2001:db8::1", &a6.src.v6);
	inet_pton(AF_INET6, "fe80::2", &a6.dst.v6);

	for (size_t len = 16; len <= sizeof(pkt); len += 4) {
		fill(pkt, len, (unsigned)len);
		for (int f = 0; f < 2; f++) {
			const struct uroce_icrc_addr *a = f ? &a6 : &a4;
			uint32_t want = uroce_icrc_compute(a, pkt, len);
			struct iovec one = { pkt, len };

			CHECK(uroce_netio_icrc(a, 0, &one, 1, len) == want, "len %zu fam %d one piece", len, f);
			/* Every split into three pieces, the BTH straddling included (sampled). */
			for (size_t c1 = 0; c1 <= len; c1 += (len > 64 ? 7 : 1))
				for (size_t c2 = c1; c2 <= len; c2 += (len > 64 ? 13 : 1)) {
					struct iovec v[3] = { { pkt, c1 }, { pkt + c1, c2 - c1 },
							      { pkt + c2, len - c2 } };

					CHECK(uroce_netio_icrc(a, 0, v, 3, len) == want,
					      "len %zu split %zu/%zu", len, c1, c2);
				}
		}
		/* IPv4 with Identification k: the ICRC over the real header agrees. */
		for (uint16_t id = 0; id < 70; id += 23) {
			struct iovec one = { pkt, len };
			uint32_t c;

			memset(ip, 0, sizeof(ip));
			ip[0] = 0x45;
			ip[1] = 0x2E;                  /* any TOS: masked */
			uroce_put_be16(ip + 2, (uint16_t)(28 + len));
			uroce_put_be16(ip + 4, id);
			uroce_put_be16(ip + 6, 0x4000);
			ip[8] = 17;                    /* any TTL */
			ip[9] = 17;
			memcpy(ip + 12, &a4.src.v4, 4);
			memcpy(ip + 16, &a4.dst.v4, 4);
			uroce_put_be16(udp, a4.sport);
			uroce_put_be16(udp + 2, a4.dport);
			uroce_put_be16(udp + 4, (uint16_t)(8 + len));
			uroce_put_be16(udp + 6, 0x1234);
			CHECK(uroce_icrc_frame(AF_INET, ip, 20, udp, pkt, len, &c) == 0, "frame");
			CHECK(uroce_netio_icrc(&a4, id, &one, 1, len) == c, "len %zu ID %u", len, id);
		}
	}
	CHECK(uroce_netio_icrc(&a4, 0, NULL, 0, 15) == 0, "short packet");

	/* The ICRC slot across the last pieces. */
	{
		uint8_t x[20] = { 0 }, y[2] = { 0 }, z[2] = { 0 };
		struct uroce_txpkt t = { .iov = { { x, 20 }, { y, 2 }, { z, 2 } }, .iovcnt = 3, .len = 24 };

		put_icrc(&t, 0x11223344);
		CHECK(y[0] == 0x44 && y[1] == 0x33 && z[0] == 0x22 && z[1] == 0x11 && x[19] == 0,
		      "ICRC slot split over two pieces, little-endian");
	}
	/* Source ports: Soft-RoCE's range, spread. */
	{
		unsigned seen_low = 0, seen_high = 0;

		for (uint32_t q = 2; q < 5000; q++) {
			uint16_t p = sport_for(q);

			CHECK(p >= 0xC000, "QPN %u port %#x", q, p);
			seen_low += p < 0xE000;
			seen_high += p >= 0xE000;
		}
		CHECK(seen_low > 1000 && seen_high > 1000, "ports spread over the range");
	}
	return check_summary();
}
