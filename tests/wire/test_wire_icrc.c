/* test_wire_icrc.c — the ICRC against an independent reference (zlib + the
 * masking rules written out again here), and the receive-side solver for the
 * unknown IPv4 Identification (docs/wire.md "ICRC on receive").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <zlib.h>

#include "net/frame.h"
#include "ref_icrc.h"
#include "wire/icrc.h"
#include "wire/wire.h"

static uint64_t rng_state = 0xD1B54A32D192ED03ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_addr(int family, struct uroce_icrc_addr *ia, struct uroce_frame_addr *fa)
{
	memset(ia, 0, sizeof(*ia));
	memset(fa, 0, sizeof(*fa));
	ia->family = fa->family = family;
	if (family == AF_INET) {
		ia->src.v4.s_addr = htonl(0xC0000200u | (uint32_t)(rnd() & 0xFF));
		ia->dst.v4.s_addr = htonl(0xC0000200u | (uint32_t)(rnd() & 0xFF));
		fa->src.v4 = ia->src.v4;
		fa->dst.v4 = ia->dst.v4;
	} else {
		for (int i = 0; i < 16; i++) {
			ia->src.v6.s6_addr[i] = (uint8_t)rnd();
			ia->dst.v6.s6_addr[i] = (uint8_t)rnd();
		}
		fa->src.v6 = ia->src.v6;
		fa->dst.v6 = ia->dst.v6;
	}
	ia->sport = fa->sport = (uint16_t)(0xC000 | (rnd() & 0x3FFF));
	ia->dport = fa->dport = UROCE_UDP_PORT;
	fa->ttl = (uint8_t)(1 + rnd() % 255);
}

/* A random but well-formed RoCEv2 packet of @len bytes (multiple of 4). */
static void random_pkt(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rnd();
	p[0] = UROCE_OP_SEND_ONLY;
	p[1] &= 0xC0; /* pad 0, tver 0 */
}

static void test_crc32_is_zlib(void **state)
{
	static uint8_t buf[9000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	for (int rep = 0; rep < 2000; rep++) {
		size_t len = rnd() % sizeof(buf), cut = len ? rnd() % len : 0;
		uint32_t z = (uint32_t)crc32(0, buf, (uInt)len);
		uint32_t u = uroce_crc32(0, buf, len);
		assert_int_equal(u, z);
		/* chaining */
		assert_int_equal(uroce_crc32(uroce_crc32(0, buf, cut), buf + cut, len - cut), z);
	}
	assert_int_equal(uroce_crc32(0, "123456789", 9), 0xCBF43926u); /* CRC-32 check value */
}

/* Data-path ICRC (headers synthesised) == reference over a real frame built
 * the way Linux sends uroce's packets (ID 0, DF), for IPv4 and IPv6. */
static void test_compute_matches_reference(void **state)
{
	static uint8_t pkt[4200], frame[4400];

	for (int rep = 0; rep < 400; rep++) {
		int fam = rep & 1 ? AF_INET6 : AF_INET;
		struct uroce_icrc_addr ia;
		struct uroce_frame_addr fa;
		struct uroce_frame f;
		size_t len = 16 + 4 * (rnd() % 1040);
		long fl;
		uint32_t c;

		fill_addr(fam, &ia, &fa);
		random_pkt(pkt, len);
		uroce_icrc_set(&ia, pkt, len);
		fl = uroce_frame_build_eth(frame, sizeof(frame), &fa, pkt, len);
		assert_true(fl > 0);
		assert_int_equal(uroce_frame_parse_eth(frame, (size_t)fl, &f), 0);
		assert_int_equal(uroce_get_le32(pkt + len - 4), ref_icrc(frame, (size_t)fl));
		assert_int_equal(uroce_icrc_frame(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len, &c), 0);
		assert_int_equal(c, ref_icrc(frame, (size_t)fl));
		assert_true(uroce_icrc_frame_ok(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len));
		assert_int_equal(uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID, NULL), UROCE_ICRC_OK);
		/* The variant fields really are masked: FECN/BECN/resv in the BTH. */
		pkt[4] ^= 0xC1;
		assert_int_equal(uroce_icrc_verify(&ia, pkt, len, 0, NULL), UROCE_ICRC_OK);
		pkt[4] ^= 0xC1;
	}
}

/* The pseudo-header's CRC is memoised per thread and an Identification applied by
 * linearity (icrc.c, pre_crc): with a pool of keys larger than the memo, reused at random
 * (hits, misses, evictions, keys that differ in one field only), every packet's ICRC, for
 * any ID, must still be the reference's over a real frame with that ID. */
static void test_prefix_memo_and_ids(void **state)
{
	enum { KEYS = 40 };
	static uint8_t pkt[2100], frame[2300];
	struct uroce_icrc_addr ia[KEYS];
	struct uroce_frame_addr fa[KEYS];
	size_t klen[KEYS];

	(void)state;
	for (int k = 0; k < KEYS; k++) {
		fill_addr(k % 3 ? AF_INET : AF_INET6, &ia[k], &fa[k]);
		klen[k] = 16 + 4 * (rnd() % 500);
		if (k >= 2 && k % 5 == 0) {     /* the same as the one before but for one field */
			ia[k] = ia[k - 1];
			fa[k] = fa[k - 1];
			klen[k] = klen[k - 1];
			switch (k % 4) {
			case 0: klen[k] += 4; break;
			case 1: ia[k].sport ^= 1; fa[k].sport = ia[k].sport; break;
			case 2: ia[k].dport ^= 0x100; fa[k].dport = ia[k].dport; break;
			default: /* swap directions */
				ia[k].src = ia[k - 1].dst; ia[k].dst = ia[k - 1].src;
				fa[k].src = fa[k - 1].dst; fa[k].dst = fa[k - 1].src;
			}
		}
	}
	for (int rep = 0; rep < 3000; rep++) {
		int k = (int)(rnd() % KEYS);
		size_t len = klen[k];
		uint16_t id = rep % 3 == 0 ? 0 : rep % 3 == 1 ? (uint16_t)(rnd() % 64) : (uint16_t)rnd();
		struct uroce_frame f;
		uint32_t c;
		long fl;

		random_pkt(pkt, len);
		fa[k].ip_id = id;
		fl = uroce_frame_build_eth(frame, sizeof(frame), &fa[k], pkt, len);
		assert_true(fl > 0);
		assert_int_equal(uroce_frame_parse_eth(frame, (size_t)fl, &f), 0);
		c = uroce_crc32(uroce_icrc_head(&ia[k], id, pkt, len), pkt + UROCE_BTH_LEN,
				len - UROCE_BTH_LEN - UROCE_ICRC_LEN);
		assert_int_equal(c, ref_icrc(frame, (size_t)fl));
		assert_int_equal(uroce_icrc_with_id(uroce_icrc_pre(&ia[k], 0, len), ia[k].family, id),
				 uroce_icrc_pre(&ia[k], id, len));
		/* Received: verified for that ID (the hint), both small and large packets. */
		uroce_put_le32(pkt + len - UROCE_ICRC_LEN, c);
		assert_int_equal(uroce_icrc_verify_hint(&ia[k], pkt, len, 0, id, NULL),
				 id && ia[k].family == AF_INET ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK);
	}
}

/* The memo keeps any two keys together: after their first use, alternating between them
 * never misses (a direct-mapped memo evicts one by the other whenever they share an entry:
 * about one pair in 16, so most of the 400 pairs here would find one). */
static void test_prefix_memo_keeps_pairs(void **state)
{
	struct uroce_icrc_addr a, b;
	struct uroce_frame_addr fa;
	unsigned long m0;

	(void)state;
	m0 = uroce_icrc_memo_misses();
	fill_addr(AF_INET, &a, &fa);
	(void)uroce_icrc_pre(&a, 0, 100);
	assert_true(uroce_icrc_memo_misses() == m0 + 1);   /* a new key is a miss */
	for (int pair = 0; pair < 400; pair++) {
		size_t la = 16 + 4 * (rnd() % 500), lb = 16 + 4 * (rnd() % 500);
		unsigned long m;

		fill_addr(pair % 3 ? AF_INET : AF_INET6, &a, &fa);
		fill_addr(pair % 3 ? AF_INET : AF_INET6, &b, &fa);
		(void)uroce_icrc_pre(&a, 0, la);
		(void)uroce_icrc_pre(&b, 0, lb);
		m = uroce_icrc_memo_misses();
		for (int i = 0; i < 8; i++) {
			assert_int_equal(uroce_icrc_pre(&a, 0, la), uroce_icrc_pre(&a, 0, la));
			(void)uroce_icrc_pre(&b, (uint16_t)i, lb);
		}
		assert_true(uroce_icrc_memo_misses() == m);
	}
}

/* Build an IPv4 frame with a given Identification (and DF or not), put the
 * ICRC computed over that real header into it, return the UDP payload. */
static void sender_with_id(struct uroce_icrc_addr *ia, uint8_t *pkt, size_t len, uint16_t id, int df)
{
	static uint8_t frame[9100];
	struct uroce_frame_addr fa;
	struct uroce_frame f;
	uint32_t c;
	long fl;

	fill_addr(AF_INET, ia, &fa);
	fa.ip_id = id;
	random_pkt(pkt, len);
	fl = uroce_frame_build_eth(frame, sizeof(frame), &fa, pkt, len);
	assert_true(fl > 0);
	if (!df)
		frame[14 + 6] &= (uint8_t)~0x40;
	assert_int_equal(uroce_frame_parse_eth(frame, (size_t)fl, &f), 0);
	assert_int_equal(uroce_icrc_frame(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len, &c), 0);
	assert_int_equal(c, ref_icrc(frame, (size_t)fl));
	uroce_put_le32(pkt + len - 4, c);
}

static void test_unknown_id_recovered(void **state)
{
	static uint8_t pkt[9000];
	static const uint16_t edge_ids[] = { 0x0001, 0x8000, 0xFFFF, 0x1234, 0x00FF, 0xFF00 };

	for (int rep = 0; rep < 3000; rep++) {
		struct uroce_icrc_addr ia;
		uint16_t id = rep < 6 ? edge_ids[rep] : (uint16_t)rnd(), got = 0;
		size_t len = 16 + 4 * (rnd() % (rep < 100 ? 2240 : 300));

		sender_with_id(&ia, pkt, len, id, 1);
		if (uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID, &got) != UROCE_ICRC_OK_ID || got != id)
			fail_msg("rep %d len %zu id 0x%04x: not recovered (got 0x%04x)", rep, len, id, got);
		/* Without permission to solve, a non-zero ID is a mismatch. */
		assert_int_equal(uroce_icrc_verify(&ia, pkt, len, 0, NULL), UROCE_ICRC_BAD);
	}
	/* ID 0 is the full 32-bit match. */
	{
		struct uroce_icrc_addr ia;
		uint16_t got = 7;
		sender_with_id(&ia, pkt, 64, 0, 1);
		assert_int_equal(uroce_icrc_verify(&ia, pkt, 64, UROCE_ICRC_RX_SOLVE_ID, &got), UROCE_ICRC_OK);
		assert_int_equal(got, 0);
	}
}

static void test_df_clear(void **state)
{
	static uint8_t pkt[2048];
	unsigned rejected_strict = 0;

	for (int rep = 0; rep < 500; rep++) {
		struct uroce_icrc_addr ia;
		uint16_t id = (uint16_t)rnd(), got = 0;
		size_t len = 16 + 4 * (rnd() % 500);

		sender_with_id(&ia, pkt, len, id, 0);
		if (uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID, NULL) == UROCE_ICRC_BAD)
			rejected_strict++;
		assert_int_equal(uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID | UROCE_ICRC_RX_DF_ANY, &got),
				 UROCE_ICRC_OK_ID);
		assert_int_equal(got, id);
	}
	/* A DF-clear sender is a different header: only a 2^-16 fluke passes strict mode. */
	printf("# DF clear, strict mode rejected %u of 500\n", rejected_strict);
	assert_true(rejected_strict >= 498);
}

/* IPv6 has no Identification: always the full check, no solving. */
static void test_ipv6_full_check(void **state)
{
	static uint8_t pkt[1100];
	struct uroce_icrc_addr ia;
	struct uroce_frame_addr fa;

	fill_addr(AF_INET6, &ia, &fa);
	random_pkt(pkt, 1040);
	uroce_icrc_set(&ia, pkt, 1040);
	assert_int_equal(uroce_icrc_verify(&ia, pkt, 1040, UROCE_ICRC_RX_SOLVE_ID | UROCE_ICRC_RX_DF_ANY, NULL),
			 UROCE_ICRC_OK);
	for (size_t bit = 0; bit < 8 * 1036; bit++) {
		if (bit / 8 == 4)
			continue; /* BTH byte 4 is masked */
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_equal(uroce_icrc_verify(&ia, pkt, 1040, UROCE_ICRC_RX_SOLVE_ID | UROCE_ICRC_RX_DF_ANY, NULL),
				 UROCE_ICRC_BAD);
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* The addresses are covered too. */
	ia.src.v6.s6_addr[15] ^= 1;
	assert_int_equal(uroce_icrc_verify(&ia, pkt, 1040, UROCE_ICRC_RX_SOLVE_ID, NULL), UROCE_ICRC_BAD);
}

/*
 * Corruption through the 16-bit path.  Every single-bit flip of a 4 KiB-MTU
 * packet (all bit positions of BTH..ICRC, for a sender with a non-zero ID) and
 * N random multi-byte corruptions of smaller packets.  The 32-bit path (ID 0)
 * must reject every flip; the solver may accept at most a handful: a random
 * error lies in the 16-dimensional image with probability 2^-16.
 */
static void test_corruption_counts(void **state)
{
	static uint8_t pkt[12 + 28 + 4096 + 4];
	const size_t len = sizeof(pkt);
	struct uroce_icrc_addr ia;
	unsigned flips = 0, flips_ok = 0, flips_ok32 = 0, rnd_n = 200000, rnd_ok = 0;

	sender_with_id(&ia, pkt, len, 0x5A5A, 1);
	assert_int_equal(uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID, NULL), UROCE_ICRC_OK_ID);
	for (size_t bit = 0; bit < 8 * len; bit++) {
		if (bit / 8 == 4)
			continue;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		flips++;
		if (uroce_icrc_verify(&ia, pkt, len, UROCE_ICRC_RX_SOLVE_ID, NULL) != UROCE_ICRC_BAD)
			flips_ok++;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* The same flips against a uroce sender (ID 0): the full CRC catches all. */
	sender_with_id(&ia, pkt, len, 0, 1);
	for (size_t bit = 0; bit < 8 * len; bit++) {
		if (bit / 8 == 4)
			continue;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (uroce_icrc_verify(&ia, pkt, len, 0, NULL) != UROCE_ICRC_BAD)
			flips_ok32++;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* Random corruptions: 1..8 random bytes replaced, in packets of 16..1040 bytes. */
	for (unsigned i = 0; i < rnd_n; i++) {
		static uint8_t q[1040];
		size_t ql = 16 + 4 * (rnd() % 257);
		unsigned nb = 1 + (unsigned)(rnd() % 8);
		int changed = 0;

		/* a fresh rxe-like packet (non-zero ID) each time */
		sender_with_id(&ia, q, ql, (uint16_t)(1 + rnd() % 0xFFFF), 1);
		for (unsigned k = 0; k < nb; k++) {
			size_t at = rnd() % ql;
			uint8_t v = (uint8_t)rnd();
			if (at == 4)
				continue;
			changed |= q[at] != v;
			q[at] = v;
		}
		if (!changed) {
			i--;
			continue;
		}
		if (uroce_icrc_verify(&ia, q, ql, UROCE_ICRC_RX_SOLVE_ID, NULL) != UROCE_ICRC_BAD)
			rnd_ok++;
	}
	printf("# single-bit flips of a %zu-byte packet: 16-bit path accepted %u of %u; "
	       "32-bit path accepted %u\n", len, flips_ok, flips, flips_ok32);
	printf("# random corruptions: 16-bit path accepted %u of %u (expected ~%.1f = N/65536)\n", rnd_ok,
	       rnd_n, rnd_n / 65536.0);
	assert_int_equal(flips_ok32, 0);
	assert_true(flips_ok <= 2);
	assert_true(rnd_ok <= 15); /* Poisson(3.05): P(>15) < 1e-6 */
}

static void test_bad_inputs(void **state)
{
	uint8_t b[16] = { 0 };
	struct uroce_icrc_addr ia = { .family = AF_INET };
	uint32_t c;

	assert_int_equal(uroce_icrc_compute(&ia, b, 15), 0);
	assert_int_equal(uroce_icrc_verify(&ia, b, 15, UROCE_ICRC_RX_SOLVE_ID, NULL), UROCE_ICRC_BAD);
	assert_int_equal(uroce_icrc_frame(AF_INET, b, 19, b, b, 16, &c), -EINVAL);
	assert_int_equal(uroce_icrc_frame(AF_INET6, b, 48, b, b, 16, &c), -EPROTONOSUPPORT);
	assert_int_equal(uroce_icrc_frame(AF_UNIX, b, 20, b, b, 16, &c), -EINVAL);
	assert_int_equal(uroce_icrc_frame(AF_INET, b, 20, b, b, 15, &c), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32_is_zlib),
		cmocka_unit_test(test_compute_matches_reference),
		cmocka_unit_test(test_prefix_memo_and_ids),
		cmocka_unit_test(test_prefix_memo_keeps_pairs),
		cmocka_unit_test(test_unknown_id_recovered),
		cmocka_unit_test(test_df_clear),
		cmocka_unit_test(test_ipv6_full_check),
		cmocka_unit_test(test_corruption_counts),
		cmocka_unit_test(test_bad_inputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
