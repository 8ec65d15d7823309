/* icrc_bench — ICRC throughput on 4 KiB RoCEv2 packets, against zlib's crc32()
 * over the same buffers, measured in the same run (bench/README.md).
 *
 *   icrc_bench [SECONDS_PER_ROUND]        default 0.3 s, 5 rounds each, best round kept
 *
 * Lines printed:
 *   uroce ICRC compute (IPv4, ID 0)       the transmit path: uroce_icrc_compute()
 *   uroce ICRC verify  (ID solved)        receive from a Linux rxe peer: mismatch + GF(2) solve
 *   zlib crc32                            the peer: crc32() over the same 4 KiB packets
 *   ratio                                 uroce compute / zlib
 * Bytes counted are the UDP payload (BTH..ICRC) per packet for all three.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <zlib.h>

#include "wire/icrc.h"
#include "wire/wire.h"

#define PKT_LEN (UROCE_BTH_LEN + 4096 + UROCE_ICRC_LEN) /* SEND_ONLY with 4 KiB payload */
#define NPKT 64                                          /* 262 KiB working set: cache-resident, like a send batch */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile uint32_t sink;

enum which { COMPUTE, VERIFY_ID, ZLIB };

static double round_gbps(enum which w, uint8_t (*pkts)[PKT_LEN], const struct uroce_icrc_addr *a, double secs)
{
	double t0 = now(), t;
	uint64_t bytes = 0;
	uint32_t acc = 0;

	do {
		for (int rep = 0; rep < 16; rep++)
			for (int i = 0; i < NPKT; i++) {
				switch (w) {
				case COMPUTE:
					acc ^= uroce_icrc_compute(a, pkts[i], PKT_LEN);
					break;
				case VERIFY_ID: {
					uint16_t id;
					acc ^= (uint32_t)uroce_icrc_verify(a, pkts[i], PKT_LEN, UROCE_ICRC_RX_SOLVE_ID, &id);
					acc ^= id;
					break;
				}
				case ZLIB:
					acc ^= (uint32_t)crc32(0, pkts[i], PKT_LEN);
					break;
				}
				bytes += PKT_LEN;
			}
		t = now();
	} while (t - t0 < secs);
	sink = acc;
	return (double)bytes / (t - t0) / 1e9;
}

static double best_of(int rounds, enum which w, uint8_t (*pkts)[PKT_LEN], const struct uroce_icrc_addr *a,
		      double secs)
{
	double best = 0;
	for (int r = 0; r < rounds; r++) {
		double g = round_gbps(w, pkts, a, secs);
		if (g > best)
			best = g;
	}
	return best;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0.3;
	uint8_t (*pkts)[PKT_LEN] = aligned_alloc(64, sizeof(*pkts) * NPKT);
	uint8_t (*rxe)[PKT_LEN] = aligned_alloc(64, sizeof(*rxe) * NPKT);
	struct uroce_icrc_addr a = { .family = AF_INET, .sport = 0xC123, .dport = 4791 };
	uint64_t x = 88172645463325252ull;
	double comp, ver, zl;
	int ok = 0;

	if (!pkts || !rxe || secs <= 0) {
		fprintf(stderr, "usage: icrc_bench [SECONDS_PER_ROUND]\n");
		return 2;
	}
	inet_pton(AF_INET, "192.0.2.10", &a.src.v4);
	inet_pton(AF_INET, "192.0.2.11", &a.dst.v4);
	for (int i = 0; i < NPKT; i++) {
		for (size_t j = 0; j < PKT_LEN; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			pkts[i][j] = (uint8_t)x;
		}
		pkts[i][0] = UROCE_OP_SEND_ONLY;
		pkts[i][1] = 0;
		uroce_icrc_set(&a, pkts[i], PKT_LEN);
		memcpy(rxe[i], pkts[i], PKT_LEN);
	}
	/* The rxe copies: ICRC over a real IPv4 header with a non-zero ID, as Linux
	 * Soft-RoCE sends them; the receiver has to solve for the ID. */
	for (int i = 0; i < NPKT; i++) {
		uint8_t ip[20] = { 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0 };
		uint8_t udp[8];
		uint32_t c;

		uroce_put_be16(ip + 2, (uint16_t)(20 + 8 + PKT_LEN));
		uroce_put_be16(ip + 4, (uint16_t)(0x1000 + i * 977));
		memcpy(ip + 12, &a.src.v4, 4);
		memcpy(ip + 16, &a.dst.v4, 4);
		uroce_put_be16(udp, a.sport);
		uroce_put_be16(udp + 2, a.dport);
		uroce_put_be16(udp + 4, (uint16_t)(8 + PKT_LEN));
		udp[6] = udp[7] = 0;
		uroce_icrc_frame(AF_INET, ip, 20, udp, rxe[i], PKT_LEN, &c);
		uroce_put_le32(rxe[i] + PKT_LEN - 4, c);
		ok += uroce_icrc_verify(&a, rxe[i], PKT_LEN, UROCE_ICRC_RX_SOLVE_ID, NULL) == UROCE_ICRC_OK_ID;
		ok += uroce_icrc_verify(&a, pkts[i], PKT_LEN, 0, NULL) == UROCE_ICRC_OK;
		ok += (uint32_t)crc32(0, pkts[i], 100) == uroce_crc32(0, pkts[i], 100);
	}
	if (ok != 3 * NPKT) {
		fprintf(stderr, "icrc_bench: self-check failed (%d of %d)\n", ok, 3 * NPKT);
		return 1;
	}

	/* Interleave rounds so drift on a shared machine hits all three alike. */
	comp = ver = zl = 0;
	for (int r = 0; r < 5; r++) {
		double g;
		if ((g = best_of(1, COMPUTE, pkts, &a, secs)) > comp)
			comp = g;
		if ((g = best_of(1, VERIFY_ID, rxe, &a, secs)) > ver)
			ver = g;
		if ((g = best_of(1, ZLIB, pkts, &a, secs)) > zl)
			zl = g;
	}
	printf("packet: %d bytes (BTH + 4096 B payload + ICRC), %d packets in rotation, best of 5 rounds of %.2f s\n",
	       PKT_LEN, NPKT, secs);
	printf("uroce ICRC compute (IPv4, ID 0):          %7.2f GB/s\n", comp);
	printf("uroce ICRC verify  (rxe peer, ID solved): %7.2f GB/s\n", ver);
	printf("zlib crc32 (same bytes):                  %7.2f GB/s\n", zl);
	printf("ratio uroce compute / zlib:               %7.2f x\n", comp / zl);
	printf("ratio uroce verify-with-ID / zlib:        %7.2f x\n", ver / zl);
	free(pkts);
	free(rxe);
	return 0;
}
