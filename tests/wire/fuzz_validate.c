/* fuzz_validate — libFuzzer target for the RoCEv2 validator and decoder.
 *
 * Every input is a UDP payload.  It is validated with several path MTUs, with
 * and without RD/XRC/CNP allowed, with and without the ICRC check (IPv4 with
 * the ID solver and IPv6).  Invariants, checked on every accepted packet:
 *   - the decoded lengths add up to the input length and stay inside it;
 *   - the payload is no larger than the MTU;
 *   - re-encoding the decoded fields reproduces the input byte for byte.
 * ASan/UBSan (the build flags) catch any read outside the input.
 * Seeded from the golden captures' payloads (fuzz_seeds.c).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/icrc.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond,     \
				__FILE__, __LINE__);                                 \
			abort();                                                     \
		}                                                                    \
	} while (0)

static void check_accepted(const uint8_t *data, size_t size, const struct uroce_pkt *p, uint32_t mtu)
{
	static uint8_t again[1 << 17];

	CHECK(p->op && p->op->name);
	CHECK(p->op == uroce_opcode(data[0]));
	CHECK(p->len == size);
	CHECK(p->payload == data + p->op->length);
	CHECK((size_t)p->op->length + p->payload_len + p->bth.padcnt + UROCE_ICRC_LEN == size);
	CHECK(p->payload + p->payload_len <= data + size - UROCE_ICRC_LEN);
	CHECK(!mtu || p->payload_len <= mtu);
	CHECK(p->bth.tver == 0);
	if (size <= sizeof(again)) {
		CHECK(uroce_pkt_encode(again, size, p) == (long)size);
		CHECK(memcmp(again, data, size) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t mtus[] = { 0, 256, 1024, 4096 };
	struct uroce_icrc_addr a4 = { .family = AF_INET, .sport = 0xC123, .dport = 4791 };
	struct uroce_icrc_addr a6 = { .family = AF_INET6, .sport = 0xC123, .dport = 4791 };
	struct uroce_pkt p;

	a4.src.v4.s_addr = htonl(0xC000020B);
	a4.dst.v4.s_addr = htonl(0xC000020A);
	a6.src.v6.s6_addr[0] = 0x20;
	a6.dst.v6.s6_addr[15] = 1;

	for (size_t m = 0; m < sizeof(mtus) / sizeof(mtus[0]); m++)
		for (int unsup = 0; unsup < 2; unsup++) {
			struct uroce_rx_ctx ctx = { .mtu = mtus[m], .allow_unsupported = unsup };
			enum uroce_rx_err e = uroce_pkt_validate(data, size, &ctx, &p);

			CHECK((unsigned)e < UROCE_RX_NUM);
			CHECK(uroce_rx_err_name(e) != NULL);
			if (e == UROCE_RX_OK)
				check_accepted(data, size, &p, ctx.mtu);
			if (e == UROCE_RX_OPCODE_UNSUPPORTED)
				CHECK(!unsup);
		}
	{
		/* With the ICRC: the solver must recover a consistent ID or refuse. */
		struct uroce_rx_ctx ctx = { .mtu = 4096, .addr = &a4,
					    .icrc_flags = UROCE_ICRC_RX_SOLVE_ID | UROCE_ICRC_RX_DF_ANY };
		enum uroce_rx_err e = uroce_pkt_validate(data, size, &ctx, &p);
		if (e == UROCE_RX_OK) {
			check_accepted(data, size, &p, ctx.mtu);
			CHECK(p.icrc_status == UROCE_ICRC_OK || p.icrc_status == UROCE_ICRC_OK_ID);
		}
		ctx.addr = &a6;
		e = uroce_pkt_validate(data, size, &ctx, &p);
		if (e == UROCE_RX_OK)
			CHECK(p.icrc_status == UROCE_ICRC_OK);
	}
	/* decode() on its own never reads past the buffer, whatever the length. */
	uroce_pkt_decode(data, size, &p);
	return 0;
}
