/* test_wire_unit.c — table-driven edge cases of the wire module:
 * PSN arithmetic at the 2^23 / 2^24 edges, opcode table consistency, every
 * truncation of every opcode, every pad count, reserved and unsupported
 * opcodes, MTU limits, and encode/decode round trips of every opcode.
 *
 * Links uroce_wire; everything tested here is public API.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "wire/psn.h"
#include "wire/wire.h"

/* ------------------------------------------------------------------ PSN */

static void test_psn_cmp_table(void **state)
{
	static const struct {
		uint32_t a, b;
		int want; /* sign of psn_cmp(a, b) */
	} rows[] = {
		{ 0, 0, 0 },
		{ 1, 0, 1 },
		{ 0, 1, -1 },
		{ 0, 0xFFFFFF, 1 },          /* 0 follows 2^24-1: wrap */
		{ 0xFFFFFF, 0, -1 },
		{ 0xFFFFFE, 0x000001, -1 },
		{ 0x000005, 0xFFFFFA, 1 },
		{ 0x7FFFFF, 0, 1 },          /* 2^23-1 ahead: still after */
		{ 0, 0x7FFFFF, -1 },
		{ 0x800001, 0, -1 },         /* 2^23+1 ahead means 2^23-1 behind */
		{ 0, 0x800001, 1 },
		{ 0x800000, 0x7FFFFF, 1 },   /* straddling 2^23 */
		{ 0x7FFFFF, 0x800000, -1 },
		{ 0x123456, 0x123456, 0 },
		{ 0x1123456, 0x123456, 0 },  /* bits above 24 are ignored */
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int got = psn_cmp(rows[i].a, rows[i].b);
		if (got != rows[i].want)
			fail_msg("row %zu: psn_cmp(0x%x, 0x%x) = %d, want %d", i, rows[i].a, rows[i].b, got,
				 rows[i].want);
	}
	/* 2^23 apart is ambiguous by construction: both directions say "before". */
	assert_true(psn_cmp(0x800000, 0) < 0 && psn_cmp(0, 0x800000) < 0);
}

static void test_psn_add_dist_window(void **state)
{
	assert_int_equal(psn_add(0xFFFFFF, 1), 0);
	assert_int_equal(psn_add(0xFFFFFE, 5), 3);
	assert_int_equal(psn_add(0x7FFFFF, 1), 0x800000);
	assert_int_equal(psn_add(5, 0x1000000), 5);
	assert_int_equal(psn_sub(0, 1), 0xFFFFFF);
	assert_int_equal(psn_sub(0x800000, 1), 0x7FFFFF);
	assert_int_equal(psn_dist(0xFFFFFF, 0), 1);
	assert_int_equal(psn_dist(0, 0xFFFFFF), 0xFFFFFF);
	assert_int_equal(psn_dist(0xFFFFF0, 0x10), 0x20);
	assert_true(psn_in_window(0x000002, 0xFFFFFE, 8));
	assert_true(psn_in_window(0xFFFFFE, 0xFFFFFE, 8));
	assert_false(psn_in_window(0x000006, 0xFFFFFE, 8));
	assert_false(psn_in_window(0xFFFFFD, 0xFFFFFE, 8));
	assert_true(psn_in_range(0, 0xFFFFF0, 0x10));
	assert_false(psn_in_range(0x11, 0xFFFFF0, 0x10));
	assert_true(psn_in_range(0x7FFFFF, 0x7FFFF0, 0x800010));

	/* Consistency over the whole ring around both edges: add/dist/cmp agree. */
	static const uint32_t bases[] = { 0, 0x7FFF00, 0x7FFFFF, 0x800000, 0xFFFF00, 0xFFFFFF };
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++)
		for (uint32_t n = 0; n < 0x200; n++) {
			uint32_t b = bases[i], a = psn_add(b, n);
			assert_int_equal(psn_dist(b, a), n);
			assert_int_equal(psn_sub(a, n), b);
			assert_int_equal(psn_cmp(a, b), n ? 1 : 0);
			assert_int_equal(psn_cmp(b, a), n ? -1 : 0);
			assert_true(psn_after(a, b) == (n != 0));
			assert_true(psn_before(b, a) == (n != 0));
		}
}

/* --------------------------------------------------------- opcode table */

static unsigned hdr_sum(uint32_t mask)
{
	unsigned s = 0;
	for (int h = 0; h < UROCE_HDR_NUM; h++)
		if (h == UROCE_HDR_BTH || (mask & UROCE_OPF_HDR(h)))
			s += uroce_hdr_len[h];
	return s;
}

static void test_table_consistency(void **state)
{
	unsigned defined = 0;

	for (int oc = 0; oc < 256; oc++) {
		const struct uroce_opcode_info *op = uroce_opcode((uint8_t)oc);
		unsigned end = UROCE_BTH_LEN;

		if (!op->name) {
			assert_int_equal(op->mask, 0);
			continue;
		}
		defined++;
		assert_int_equal(op->length, hdr_sum(op->mask));
		/* Headers appear in canonical order, contiguous, after the BTH. */
		for (int h = 1; h < UROCE_HDR_NUM; h++) {
			if (!(op->mask & UROCE_OPF_HDR(h)))
				continue;
			assert_int_equal(op->offset[h], end);
			end += uroce_hdr_len[h];
		}
		assert_int_equal(end, op->length);
		assert_int_equal(op->length % 4, 0);
		/* Exactly one direction (CNP is neither). */
		if (!(op->mask & UROCE_OPF_CNP))
			assert_true(!!(op->mask & UROCE_OPF_REQ) != !!(op->mask & UROCE_OPF_RESP));
		/* A position in a message. */
		assert_true(op->mask & (UROCE_OPF_FIRST | UROCE_OPF_MIDDLE | UROCE_OPF_LAST));
		assert_false((op->mask & UROCE_OPF_MIDDLE) && (op->mask & (UROCE_OPF_FIRST | UROCE_OPF_LAST)));
		if (op->mask & UROCE_OPF_IMM)
			assert_true(op->mask & UROCE_OPF_IMMDT);
		if (op->mask & UROCE_OPF_INV)
			assert_true(op->mask & UROCE_OPF_IETH);
		if (op->mask & UROCE_OPF_ACK)
			assert_true(op->mask & UROCE_OPF_AETH);
		/* Transports uroce implements are exactly RC, UC, UD. */
		enum uroce_transport t = uroce_opcode_transport((uint8_t)oc);
		assert_true(!(op->mask & UROCE_OPF_UNSUPPORTED) ==
			    (t == UROCE_TRANSPORT_RC || t == UROCE_TRANSPORT_UC || t == UROCE_TRANSPORT_UD));
		/* Name prefix matches the transport bits. */
		static const char *const pfx[8] = { "RC_", "UC_", "RD_", "UD_", "CNP", "XRC_", "?", "?" };
		assert_memory_equal(op->name, pfx[t], strlen(pfx[t]));
		/* UC: only SEND and WRITE; UD: only SEND ONLY (IBA table 43). */
		if (t == UROCE_TRANSPORT_UC)
			assert_true(op->mask & (UROCE_OPF_SEND | UROCE_OPF_WRITE));
		if (t == UROCE_TRANSPORT_UD)
			assert_true((op->mask & UROCE_OPF_SEND) && (op->mask & UROCE_OPF_ONLY) == UROCE_OPF_ONLY &&
				    (op->mask & UROCE_OPF_DETH));
	}
	/* RC 25 (incl. FLUSH, ATOMIC WRITE), UC 12, RD 22 (0x40-0x55), UD 2, CNP 1,
	 * XRC 23 (0xA0-0xB4, 0xB6, 0xB7). */
	assert_int_equal(defined, 25 + 12 + 22 + 2 + 1 + 23);
}

/* Layout spot checks straight from IBA 9.3 / table 43, independent of the macros. */
static void test_table_layouts(void **state)
{
	static const struct {
		uint8_t oc;
		uint8_t len;
		int hdr;
		uint8_t off;
	} rows[] = {
		{ 0x04, 12, UROCE_HDR_BTH, 0 },
		{ 0x05, 16, UROCE_HDR_IMMDT, 12 },
		{ 0x06, 28, UROCE_HDR_RETH, 12 },
		{ 0x0B, 32, UROCE_HDR_RETH, 12 },
		{ 0x0B, 32, UROCE_HDR_IMMDT, 28 },
		{ 0x0C, 28, UROCE_HDR_RETH, 12 },
		{ 0x0D, 16, UROCE_HDR_AETH, 12 },
		{ 0x0E, 12, UROCE_HDR_BTH, 0 },
		{ 0x11, 16, UROCE_HDR_AETH, 12 },
		{ 0x12, 24, UROCE_HDR_AETH, 12 },
		{ 0x12, 24, UROCE_HDR_ATMACK, 16 },
		{ 0x13, 40, UROCE_HDR_ATMETH, 12 },
		{ 0x14, 40, UROCE_HDR_ATMETH, 12 },
		{ 0x17, 16, UROCE_HDR_IETH, 12 },
		{ 0x1C, 32, UROCE_HDR_FETH, 12 },
		{ 0x1C, 32, UROCE_HDR_RETH, 16 },
		{ 0x1D, 28, UROCE_HDR_RETH, 12 },
		{ 0x29, 16, UROCE_HDR_IMMDT, 12 },
		{ 0x44, 24, UROCE_HDR_DETH, 16 },
		{ 0x4C, 40, UROCE_HDR_RETH, 24 },
		{ 0x64, 20, UROCE_HDR_DETH, 12 },
		{ 0x65, 24, UROCE_HDR_DETH, 12 },
		{ 0x65, 24, UROCE_HDR_IMMDT, 20 },
		{ 0xAC, 32, UROCE_HDR_RETH, 16 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct uroce_opcode_info *op = uroce_opcode(rows[i].oc);
		assert_non_null(op->name);
		if (op->length != rows[i].len || op->offset[rows[i].hdr] != rows[i].off ||
		    (rows[i].hdr && !(op->mask & UROCE_OPF_HDR(rows[i].hdr))))
			fail_msg("row %zu opcode 0x%02x: len %u off %u", i, rows[i].oc, op->length,
				 op->offset[rows[i].hdr]);
	}
	assert_string_equal(uroce_opcode_name(0x15), "RESERVED_0x15");
	assert_string_equal(uroce_opcode_name(0x11), "RC_ACKNOWLEDGE");
}

/* ------------------------------------------------------- packet helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic so failures reproduce. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Payload length that is legal for the opcode with the given MTU. */
static uint32_t legal_payload(const struct uroce_opcode_info *op, uint32_t mtu)
{
	if (!(op->mask & UROCE_OPF_PAYLOAD))
		return 0;
	if (op->mask & UROCE_OPF_ATOMIC_WRITE)
		return UROCE_ATOMIC_WRITE_LEN;
	if (op->mask & UROCE_OPF_CNP)
		return UROCE_CNP_RESV_LEN;
	if (!(op->mask & UROCE_OPF_LAST))
		return mtu; /* FIRST / MIDDLE carry exactly the PMTU */
	return (uint32_t)(rnd() % (mtu + 1));
}

static void random_fields(struct uroce_pkt *p, uint8_t oc)
{
	memset(p, 0, sizeof(*p));
	p->bth.opcode = oc;
	p->bth.se = rnd() & 1;
	p->bth.mig = rnd() & 1;
	p->bth.tver = 0;
	p->bth.pkey = (uint16_t)rnd();
	p->bth.fecn = rnd() & 1;
	p->bth.becn = rnd() & 1;
	p->bth.resv6 = rnd() & 0x3F;
	p->bth.dqpn = rnd() & 0xFFFFFF;
	p->bth.ackreq = rnd() & 1;
	p->bth.resv7 = rnd() & 0x7F;
	p->bth.psn = rnd() & 0xFFFFFF;
	p->rdeth.resv = (uint8_t)rnd();
	p->rdeth.een = rnd() & 0xFFFFFF;
	p->deth.qkey = (uint32_t)rnd();
	p->deth.resv = (uint8_t)rnd();
	p->deth.srcqp = rnd() & 0xFFFFFF;
	p->xrceth.resv = (uint8_t)rnd();
	p->xrceth.xrcsrq = rnd() & 0xFFFFFF;
	p->feth = (uint32_t)rnd();
	p->reth.va = rnd();
	p->reth.rkey = (uint32_t)rnd();
	p->reth.len = (uint32_t)rnd();
	p->aeth.syndrome = (uint8_t)rnd();
	p->aeth.msn = rnd() & 0xFFFFFF;
	p->atmeth.va = rnd();
	p->atmeth.rkey = (uint32_t)rnd();
	p->atmeth.swap_add = rnd();
	p->atmeth.compare = rnd();
	p->atmack = rnd();
	p->imm = (uint32_t)rnd();
	p->ieth = (uint32_t)rnd();
}

/* Clear the fields of headers @oc does not carry (decode leaves them zero). */
static void keep_present(struct uroce_pkt *p)
{
	uint32_t m = uroce_opcode(p->bth.opcode)->mask;
	if (!(m & UROCE_OPF_RDETH))
		memset(&p->rdeth, 0, sizeof(p->rdeth));
	if (!(m & UROCE_OPF_DETH))
		memset(&p->deth, 0, sizeof(p->deth));
	if (!(m & UROCE_OPF_XRCETH))
		memset(&p->xrceth, 0, sizeof(p->xrceth));
	if (!(m & UROCE_OPF_FETH))
		p->feth = 0;
	if (!(m & UROCE_OPF_RETH))
		memset(&p->reth, 0, sizeof(p->reth));
	if (!(m & UROCE_OPF_AETH))
		memset(&p->aeth, 0, sizeof(p->aeth));
	if (!(m & UROCE_OPF_ATMETH))
		memset(&p->atmeth, 0, sizeof(p->atmeth));
	if (!(m & UROCE_OPF_ATMACK))
		p->atmack = 0;
	if (!(m & UROCE_OPF_IMMDT))
		p->imm = 0;
	if (!(m & UROCE_OPF_IETH))
		p->ieth = 0;
}

/* Build a valid packet for @oc into a fresh heap buffer of exactly its size. */
static uint8_t *build(uint8_t oc, uint32_t mtu, struct uroce_pkt *want, size_t *len)
{
	const struct uroce_opcode_info *op = uroce_opcode(oc);
	static uint8_t payload[4096];
	uint8_t *buf;
	long n;

	random_fields(want, oc);
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd();
	want->payload = payload;
	want->payload_len = legal_payload(op, mtu);
	want->bth.padcnt = (uint8_t)uroce_pad_for(want->payload_len);
	for (unsigned i = 0; i < want->bth.padcnt; i++)
		want->pad[i] = (uint8_t)rnd();
	want->icrc = (uint32_t)rnd();
	*len = uroce_pkt_size(oc, want->payload_len);
	assert_true(*len > 0);
	buf = malloc(*len);
	n = uroce_pkt_encode(buf, *len, want);
	assert_int_equal(n, (long)*len);
	assert_int_equal(uroce_pkt_encode(buf, *len - 1, want), -ENOSPC);
	return buf;
}

static const struct uroce_rx_ctx ctx_all = { .mtu = 1024, .allow_unsupported = true };

/* ---------------------------------------------------------- round trip */

static void test_roundtrip_every_opcode(void **state)
{
	for (int oc = 0; oc < 256; oc++) {
		if (!uroce_opcode((uint8_t)oc)->name)
			continue;
		for (int rep = 0; rep < 50; rep++) {
			struct uroce_pkt want, got;
			size_t len;
			uint8_t *buf = build((uint8_t)oc, 1024, &want, &len), *again;
			enum uroce_rx_err e = uroce_pkt_validate(buf, len, &ctx_all, &got);

			if (e != UROCE_RX_OK)
				fail_msg("opcode 0x%02x rep %d: %s", oc, rep, uroce_rx_err_name(e));
			/* Every field comes back. */
			keep_present(&want);
			assert_memory_equal(&got.bth, &want.bth, sizeof(got.bth));
			assert_memory_equal(&got.rdeth, &want.rdeth, sizeof(got.rdeth));
			assert_memory_equal(&got.deth, &want.deth, sizeof(got.deth));
			assert_memory_equal(&got.xrceth, &want.xrceth, sizeof(got.xrceth));
			assert_memory_equal(&got.reth, &want.reth, sizeof(got.reth));
			assert_memory_equal(&got.aeth, &want.aeth, sizeof(got.aeth));
			assert_memory_equal(&got.atmeth, &want.atmeth, sizeof(got.atmeth));
			assert_int_equal(got.feth, want.feth);
			assert_int_equal(got.atmack, want.atmack);
			assert_int_equal(got.imm, want.imm);
			assert_int_equal(got.ieth, want.ieth);
			assert_int_equal(got.payload_len, want.payload_len);
			assert_memory_equal(got.payload, want.payload, want.payload_len);
			assert_memory_equal(got.pad, want.pad, want.bth.padcnt);
			assert_int_equal(got.icrc, want.icrc);
			assert_ptr_equal(got.op, uroce_opcode((uint8_t)oc));
			/* And re-encoding the decoded struct gives the same bytes. */
			again = malloc(len);
			assert_int_equal(uroce_pkt_encode(again, len, &got), (long)len);
			assert_memory_equal(again, buf, len);
			free(again);
			free(buf);
		}
	}
}

/* ---------------------------------------------------- truncation / short */

static enum uroce_rx_err expect_pad(const struct uroce_opcode_info *op, size_t rest, unsigned pad);

static void test_every_truncation(void **state)
{
	for (int oc = 0; oc < 256; oc++) {
		const struct uroce_opcode_info *op = uroce_opcode((uint8_t)oc);
		struct uroce_pkt want, got;
		size_t full;
		uint8_t *buf;

		if (!op->name)
			continue;
		buf = build((uint8_t)oc, ctx_all.mtu, &want, &full);
		/* Every length from 0 to header length + ICRC (inclusive), each in a
		 * heap buffer of exactly that size so ASan sees any over-read. */
		for (size_t l = 0; l <= (size_t)op->length + UROCE_ICRC_LEN && l <= full; l++) {
			uint8_t *b = malloc(l ? l : 1);
			enum uroce_rx_err e, want_e;

			memcpy(b, buf, l);
			e = uroce_pkt_validate(b, l, &ctx_all, &got);
			if (l < UROCE_BTH_LEN + UROCE_ICRC_LEN)
				want_e = UROCE_RX_TOO_SHORT;
			else if (l < (size_t)op->length + UROCE_ICRC_LEN)
				want_e = UROCE_RX_HDR_TRUNCATED;
			else if (l & 3)
				want_e = UROCE_RX_LEN_UNALIGNED;
			else {
				/* Headers complete, nothing after them: what an honest
				 * zero-payload packet with this pad count gets. */
				want_e = expect_pad(op, 0, want.bth.padcnt);
				if (want_e == UROCE_RX_OK && (op->mask & UROCE_OPF_PAYLOAD) &&
				    !(op->mask & UROCE_OPF_LAST))
					want_e = UROCE_RX_PAYLOAD_NOT_PMTU;
			}
			if (e != want_e)
				fail_msg("opcode 0x%02x len %zu/%zu: got %s want %s", oc, l, full,
					 uroce_rx_err_name(e), uroce_rx_err_name(want_e));
			free(b);
		}
		free(buf);
	}
}

static void test_reserved_and_unsupported(void **state)
{
	uint8_t b[64] = { 0 };
	struct uroce_pkt p;
	struct uroce_rx_ctx strict = { .mtu = 1024 };
	unsigned reserved = 0, unsupported = 0;

	for (int oc = 0; oc < 256; oc++) {
		const struct uroce_opcode_info *op = uroce_opcode((uint8_t)oc);
		enum uroce_rx_err e;

		b[0] = (uint8_t)oc;
		e = uroce_pkt_validate(b, sizeof(b), &strict, &p);
		if (!op->name) {
			assert_int_equal(e, UROCE_RX_OPCODE_RESERVED);
			reserved++;
		} else if (op->mask & UROCE_OPF_UNSUPPORTED) {
			assert_int_equal(e, UROCE_RX_OPCODE_UNSUPPORTED);
			unsupported++;
		} else {
			assert_true(e != UROCE_RX_OPCODE_RESERVED && e != UROCE_RX_OPCODE_UNSUPPORTED);
		}
	}
	assert_int_equal(reserved, 256 - 85);
	assert_int_equal(unsupported, 22 + 23 + 1);
	/* Every other transport version is refused before anything else (IBA 9.6.1.1). */
	for (unsigned tv = 1; tv < 16; tv++) {
		b[0] = UROCE_OP_SEND_ONLY;
		b[1] = (uint8_t)tv;
		assert_int_equal(uroce_pkt_validate(b, sizeof(b), &strict, &p), UROCE_RX_BAD_TVER);
	}
	assert_string_equal(uroce_rx_err_name(UROCE_RX_BAD_ICRC), "BAD_ICRC");
	assert_string_equal(uroce_rx_err_name(UROCE_RX_NUM), "UNKNOWN");
	for (int e = 0; e < UROCE_RX_NUM; e++)
		assert_non_null(uroce_rx_err_desc((enum uroce_rx_err)e));
}

/* -------------------------------------------------------------- pad count */

/* For a given opcode, every (bytes after headers, pad count) combination. */
static enum uroce_rx_err expect_pad(const struct uroce_opcode_info *op, size_t rest, unsigned pad)
{
	if (rest & 3)
		return UROCE_RX_LEN_UNALIGNED;
	if (!(op->mask & UROCE_OPF_PAYLOAD))
		return rest ? UROCE_RX_PAYLOAD_NOT_ALLOWED : pad ? UROCE_RX_PAD_INCONSISTENT : UROCE_RX_OK;
	if (pad > rest)
		return UROCE_RX_PAD_EXCEEDS_PAYLOAD;
	if (pad && !(op->mask & UROCE_OPF_LAST))
		return UROCE_RX_PAD_INCONSISTENT;
	if ((op->mask & UROCE_OPF_ATOMIC_WRITE) && rest - pad != 8)
		return UROCE_RX_PAYLOAD_LENGTH;
	if ((op->mask & UROCE_OPF_CNP) && rest - pad != 16)
		return UROCE_RX_PAYLOAD_LENGTH;
	return UROCE_RX_OK;
}

static void test_every_pad_count(void **state)
{
	struct uroce_rx_ctx nomtu = { .allow_unsupported = true };

	for (int oc = 0; oc < 256; oc++) {
		const struct uroce_opcode_info *op = uroce_opcode((uint8_t)oc);
		if (!op->name)
			continue;
		for (size_t rest = 0; rest <= 20; rest++)
			for (unsigned pad = 0; pad < 4; pad++) {
				size_t len = op->length + rest + UROCE_ICRC_LEN;
				uint8_t *b = calloc(1, len);
				struct uroce_pkt p;
				enum uroce_rx_err e, w = expect_pad(op, rest, pad);

				b[0] = (uint8_t)oc;
				b[1] = (uint8_t)(pad << 4);
				e = uroce_pkt_validate(b, len, &nomtu, &p);
				if (e != w)
					fail_msg("opcode %s rest %zu pad %u: got %s want %s", op->name, rest, pad,
						 uroce_rx_err_name(e), uroce_rx_err_name(w));
				if (e == UROCE_RX_OK)
					assert_int_equal(p.payload_len, rest - pad);
				free(b);
			}
	}
}

/* -------------------------------------------------------------------- MTU */

static void test_mtu_limits(void **state)
{
	static const uint32_t mtus[] = { 256, 512, 1024, 2048, 4096 };
	static uint8_t b[12 + 28 + 4096 + 8 + 4];

	for (size_t i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		struct uroce_rx_ctx c = { .mtu = mtus[i] };
		uint32_t m = mtus[i];
		struct {
			uint8_t oc;
			uint32_t payload;
			enum uroce_rx_err want;
		} rows[] = {
			{ UROCE_OP_SEND_ONLY, m, UROCE_RX_OK },
			{ UROCE_OP_SEND_ONLY, m + 4, UROCE_RX_PAYLOAD_EXCEEDS_MTU },
			{ UROCE_OP_SEND_ONLY, 0, UROCE_RX_OK },
			{ UROCE_OP_SEND_FIRST, m, UROCE_RX_OK },
			{ UROCE_OP_SEND_FIRST, m - 4, UROCE_RX_PAYLOAD_NOT_PMTU },
			{ UROCE_OP_SEND_MIDDLE, m, UROCE_RX_OK },
			{ UROCE_OP_SEND_MIDDLE, m + 4, UROCE_RX_PAYLOAD_EXCEEDS_MTU },
			{ UROCE_OP_SEND_LAST, 4, UROCE_RX_OK },
			{ UROCE_OP_UC + UROCE_OP_WRITE_FIRST, m, UROCE_RX_OK },
			{ UROCE_OP_UC + UROCE_OP_WRITE_FIRST, 4, UROCE_RX_PAYLOAD_NOT_PMTU },
			{ UROCE_OP_READ_RESP_MIDDLE, m, UROCE_RX_OK },
			{ UROCE_OP_READ_RESP_ONLY, m + 8, UROCE_RX_PAYLOAD_EXCEEDS_MTU },
			{ UROCE_OP_UD + UROCE_OP_SEND_ONLY, m, UROCE_RX_OK },
			{ UROCE_OP_UD + UROCE_OP_SEND_ONLY, m + 4, UROCE_RX_PAYLOAD_EXCEEDS_MTU },
			{ UROCE_OP_ATOMIC_WRITE, 8, UROCE_RX_OK },
			{ UROCE_OP_ATOMIC_WRITE, 4, UROCE_RX_PAYLOAD_LENGTH },
			{ UROCE_OP_ATOMIC_WRITE, 12, UROCE_RX_PAYLOAD_LENGTH },
		};
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
			const struct uroce_opcode_info *op = uroce_opcode(rows[r].oc);
			size_t len = op->length + rows[r].payload + UROCE_ICRC_LEN;
			struct uroce_pkt p;
			enum uroce_rx_err e;

			memset(b, 0, sizeof(b));
			b[0] = rows[r].oc;
			e = uroce_pkt_validate(b, len, &c, &p);
			if (e != rows[r].want)
				fail_msg("mtu %u row %zu (%s, %u): got %s", m, r, op->name, rows[r].payload,
					 uroce_rx_err_name(e));
		}
	}
}

/* ----------------------------------------------------------- AETH helpers */

static void test_aeth_and_rnr(void **state)
{
	uint8_t s = uroce_aeth_syndrome(UROCE_AETH_NAK, UROCE_NAK_REMOTE_ACCESS);
	assert_int_equal(s, 0x62);
	assert_int_equal(uroce_aeth_kind(s), UROCE_AETH_NAK);
	assert_int_equal(uroce_aeth_value(s), 2);
	assert_string_equal(uroce_nak_code_name(uroce_aeth_value(s)), "REMOTE_ACCESS_ERR");
	assert_string_equal(uroce_nak_code_name(9), "NAK_RESERVED");
	assert_int_equal(uroce_aeth_kind(0x2e), UROCE_AETH_RNR_NAK);
	assert_int_equal(uroce_rnr_timer_usec(0), 655360);
	assert_int_equal(uroce_rnr_timer_usec(1), 10);
	assert_int_equal(uroce_rnr_timer_usec(14), 1280);
	assert_int_equal(uroce_rnr_timer_usec(31), 491520);
	/* Table 45 is monotone from code 1 upwards. */
	for (unsigned c = 2; c < 32; c++)
		assert_true(uroce_rnr_timer_usec(c) > uroce_rnr_timer_usec(c - 1));
}

static void test_build_hdrs_errors(void **state)
{
	struct uroce_pkt p;
	uint8_t b[64];

	memset(&p, 0, sizeof(p));
	p.bth.opcode = 0x15; /* reserved for RC */
	assert_int_equal(uroce_pkt_build_hdrs(b, sizeof(b), &p), -EINVAL);
	assert_int_equal(uroce_pkt_encode(b, sizeof(b), &p), -EINVAL);
	assert_int_equal(uroce_pkt_size(0x15, 10), 0);
	p.bth.opcode = UROCE_OP_CMP_SWAP;
	assert_int_equal(uroce_pkt_build_hdrs(b, 39, &p), -ENOSPC);
	assert_int_equal(uroce_pkt_build_hdrs(b, 40, &p), 40);
	p.bth.opcode = UROCE_OP_SEND_ONLY;
	p.payload_len = 4;
	p.payload = NULL;
	assert_int_equal(uroce_pkt_encode(b, sizeof(b), &p), -EINVAL);
	assert_int_equal(uroce_pkt_size(UROCE_OP_SEND_ONLY, 5), 12 + 5 + 3 + 4);
}

/* uroce_ack_put writes what the table-driven encoder writes for an ACKNOWLEDGE. */
static void test_ack_put(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 2000; i++) {
		struct uroce_pkt p;
		uint8_t a[64], b[64];

		memset(&p, 0, sizeof(p));
		memset(a, 0xA5, sizeof(a));
		memset(b, 0xA5, sizeof(b));
		p.bth.opcode = i & 1 ? UROCE_OP_ACK : UROCE_OP_XRC | UROCE_OP_ACK; /* 0xB1 */
		p.bth.se = i >> 1 & 1;
		p.bth.mig = i >> 2 & 1;
		p.bth.padcnt = (uint8_t)(i >> 3 & 3);
		p.bth.pkey = (uint16_t)(i * 0x9E37u);
		p.bth.dqpn = (i * 0x01234567u) & 0xFFFFFF;
		p.bth.ackreq = i >> 5 & 1;
		p.bth.psn = (i * 0x00ABCDEFu) & 0xFFFFFF;
		p.aeth.syndrome = (uint8_t)(i * 37u);
		p.aeth.msn = (i * 0x00FEDCBAu) & 0xFFFFFF;
		assert_int_equal(uroce_pkt_build_hdrs(a, sizeof(a), &p), UROCE_ACK_HDR_LEN);
		uroce_ack_put(b, &p.bth, p.aeth.syndrome, p.aeth.msn);
		assert_memory_equal(a, b, sizeof(a));
	}
}

/* ----------------------------------------------------------- P_Key matching (IBA 10.9) */

static void test_pkey_match(void **state)
{
	/* A table like a subnet manager's: the default partition as a limited member, then
	 * partition 0x1234 full and 0x0042 limited. */
	static const uint16_t tbl[] = { 0x7FFF, 0x9234, 0x0042 };

	(void)state;
	/* Every pair of keys, against the rule written out: same 15-bit partition, not the
	 * invalid partition 0, at least one full member. */
	for (uint32_t a = 0; a < 0x10000; a += 0x0101)
		for (uint32_t b = 0; b < 0x10000; b += 0x0F0F) {
			bool want = (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) &&
				    ((a >> 15) || (b >> 15));

			assert_int_equal(uroce_pkey_match((uint16_t)a, (uint16_t)b), want);
			assert_int_equal(uroce_pkey_match((uint16_t)b, (uint16_t)a), want);
		}
	assert_true(uroce_pkey_match(0xFFFF, 0xFFFF));
	assert_true(uroce_pkey_match(0x7FFF, 0xFFFF));   /* limited with full */
	assert_true(uroce_pkey_match(0xFFFF, 0x7FFF));
	assert_false(uroce_pkey_match(0x7FFF, 0x7FFF));  /* two limited members */
	assert_false(uroce_pkey_match(0x1234, 0x1234));
	assert_true(uroce_pkey_match(0x9234, 0x1234));
	assert_false(uroce_pkey_match(0x8000, 0x8000));  /* the invalid P_Key matches nothing */
	assert_false(uroce_pkey_match(0x0000, 0x8000));
	assert_false(uroce_pkey_match(0xFFFE, 0xFFFF));
	assert_false(uroce_pkey_match(0x7FFF, 0xFFFE));

	/* QP1's search of the whole table (IBA 9.6.1.1). */
	assert_int_equal(uroce_pkey_find(tbl, 3, 0xFFFF), 0);   /* full key vs limited entry */
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x7FFF), -1);  /* limited vs limited */
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x1234), 1);
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x9234), 1);
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x8042), 2);
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x0042), -1);
	assert_int_equal(uroce_pkey_find(tbl, 3, 0x8000), -1);
	assert_int_equal(uroce_pkey_find(tbl, 0, 0xFFFF), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psn_cmp_table),
		cmocka_unit_test(test_psn_add_dist_window),
		cmocka_unit_test(test_table_consistency),
		cmocka_unit_test(test_table_layouts),
		cmocka_unit_test(test_roundtrip_every_opcode),
		cmocka_unit_test(test_every_truncation),
		cmocka_unit_test(test_reserved_and_unsupported),
		cmocka_unit_test(test_every_pad_count),
		cmocka_unit_test(test_mtu_limits),
		cmocka_unit_test(test_aeth_and_rnr),
		cmocka_unit_test(test_build_hdrs_errors),
		cmocka_unit_test(test_ack_put),
		cmocka_unit_test(test_pkey_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
