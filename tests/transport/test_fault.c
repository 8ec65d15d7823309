/* test_fault.c — UROCE_FAULT parsing and decisions (src/transport/fault.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "transport/fault.h"


static void test_parse(void)
{
	struct uroce_fault f;
	char err[200];
	CHECK(uroce_fault_parse(&f, NULL, err, sizeof(err)) == 0 && !f.enabled, "NULL");
	CHECK(uroce_fault_parse(&f, "", err, sizeof(err)) == 0 && !f.enabled, "empty");
	CHECK(uroce_fault_parse(&f, "drop=0", err, sizeof(err)) == 0 && !f.enabled, "all zero");
	CHECK(uroce_fault_parse(&f, "drop=0.05,dup=0.02,reorder=0.02,corrupt=0.01,seed=9", err,
				sizeof(err)) == 0 && f.enabled && f.seed == 9, "full");
	CHECK(uroce_fault_parse(&f, "seed=0x10,drop=1", err, sizeof(err)) == 0 && f.seed == 16,
	      "hex seed");
	const char *bad[] = { "drop", "drop=", "drop=x", "drop=1.5", "drop=-0.1", "lose=0.1",
			      "seed=abc", "drop=0.1junk", "dup=nan" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = uroce_fault_parse(&f, bad[i], err, sizeof(err));
		CHECK(rc == -EINVAL && strstr(err, "UROCE_FAULT"), "\"%s\" accepted (rc %d)", bad[i], rc);
		CHECK(!f.enabled, "\"%s\" left injection enabled", bad[i]);
	}
}

/* Rates come out as configured (binomial, 10^6 draws: 6 sigma is well under 0.2%). */
static void test_rates(void)
{
	struct uroce_fault f;
	char err[200];
	CHECK(uroce_fault_parse(&f, "drop=0.05,dup=0.02,reorder=0.03,corrupt=0.01,seed=42", err,
				sizeof(err)) == 0, "%s", err);
	const int n = 1000000;
	int drop = 0, dup = 0, reorder = 0, corrupt = 0, both = 0;
	for (int i = 0; i < n; i++) {
		struct uroce_fault_action a = uroce_fault_decide(&f, 1024 + 16);
		drop += !!(a.flags & UROCE_FAULT_DROP);
		dup += !!(a.flags & UROCE_FAULT_DUP);
		reorder += !!(a.flags & UROCE_FAULT_REORDER);
		corrupt += !!(a.flags & UROCE_FAULT_CORRUPT);
		both += (a.flags & UROCE_FAULT_DROP) && (a.flags & ~UROCE_FAULT_DROP);
		if (a.flags & UROCE_FAULT_CORRUPT)
			CHECK(a.corrupt_bit < 1024 * 8, "bit %u out of range", a.corrupt_bit);
	}
	/* A dropped packet is not also duplicated: the others are conditional on not dropping. */
	CHECK(fabs(drop / (double)n - 0.05) < 0.002, "drop %f", drop / (double)n);
	CHECK(fabs(dup / (double)n - 0.02 * 0.95) < 0.002, "dup %f", dup / (double)n);
	CHECK(fabs(reorder / (double)n - 0.03 * 0.95) < 0.002, "reorder %f", reorder / (double)n);
	CHECK(fabs(corrupt / (double)n - 0.01 * 0.95) < 0.002, "corrupt %f", corrupt / (double)n);
	CHECK(both == 0, "drop combined with another action %d times", both);
	CHECK(f.decided == (uint64_t)n, "decided %llu", (unsigned long long)f.decided);
}

/* Same seed, same decisions; different seed, different decisions. */
static void test_replay(void)
{
	struct uroce_fault a, b, c;
	char err[200];
	uroce_fault_parse(&a, "drop=0.3,corrupt=0.3,seed=5", err, sizeof(err));
	uroce_fault_parse(&b, "drop=0.3,corrupt=0.3,seed=5", err, sizeof(err));
	uroce_fault_parse(&c, "drop=0.3,corrupt=0.3,seed=6", err, sizeof(err));
	int same = 1, differ = 0;
	for (int i = 0; i < 1000; i++) {
		struct uroce_fault_action x = uroce_fault_decide(&a, 100), y = uroce_fault_decide(&b, 100),
					  z = uroce_fault_decide(&c, 100);
		same &= x.flags == y.flags && x.corrupt_bit == y.corrupt_bit;
		differ |= x.flags != z.flags;
	}
	CHECK(same, "same seed diverged");
	CHECK(differ, "different seeds agreed on 1000 packets");
}

/* corrupt flips exactly one bit, never in the BTH or the ICRC; tiny packets are spared. */
static void test_corrupt(void)
{
	struct uroce_fault f;
	char err[200];
	uroce_fault_parse(&f, "corrupt=1", err, sizeof(err));
	for (int i = 0; i < 10000; i++) {
		uint8_t pkt[60], orig[60];
		for (size_t k = 0; k < sizeof(pkt); k++)
			pkt[k] = orig[k] = (uint8_t)(k * 7 + i);
		struct uroce_fault_action a = uroce_fault_decide(&f, sizeof(pkt));
		CHECK(a.flags & UROCE_FAULT_CORRUPT, "corrupt=1 did not fire");
		uroce_fault_corrupt(pkt, sizeof(pkt), &a);
		int flipped = 0;
		for (size_t k = 0; k < sizeof(pkt); k++) {
			if (pkt[k] != orig[k]) {
				CHECK(k >= 12 && k < sizeof(pkt) - 4, "flipped byte %zu", k);
				flipped += __builtin_popcount(pkt[k] ^ orig[k]);
			}
		}
		if (flipped != 1)
			CHECK(0, "%d bits flipped", flipped);
	}
	struct uroce_fault_action a = uroce_fault_decide(&f, 16); /* BTH + ICRC only */
	CHECK(!(a.flags & UROCE_FAULT_CORRUPT), "corrupted a packet with no payload");
}

int main(void)
{
	test_parse();
	test_rates();
	test_replay();
	test_corrupt();
	return check_summary();
}
