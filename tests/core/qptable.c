/* qptable.c — the QPN table of the receive path (src/core/qptable.h): every QPN inserted is
 * found, removed ones are not, against a plain reference array, through growth, through
 * the backward-shift deletion in every cyclic position, and through churn (a table that
 * sees many QPs come and go must not grow: no tombstones).  No timing: the O(1) claim is
 * checked as the probe bound a half-full linear-probing table gives, by construction
 * (its capacity stays within 4x the live count). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/qptable.h"
#include "../check.h"

#define QPN_SPACE (1u << 24)

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

/* Reference: obj[qpn] = the object (the address of a marker), or NULL; over a small QPN
 * window so that collisions and removals hit each other. */
static void random_ops(uint32_t window, unsigned ops)
{
	struct uroce_qptable t;
	void **ref = calloc(window, sizeof(*ref));
	static char marker[1];
	uint32_t live = 0, max_cap = 0;
	int bad = 0;

	uroce_qptable_init(&t);
	for (unsigned k = 0; k < ops; k++) {
		uint32_t q = rnd() % window;
		void *obj = marker + 0;

		if (rnd() % 3) {
			int ret = uroce_qptable_insert(&t, q, (char *)obj + 0);

			if (ref[q] ? ret != -EEXIST : ret != 0)
				bad++;
			if (!ref[q] && !ret) {
				ref[q] = obj;
				live++;
			}
		} else {
			void *got = uroce_qptable_remove(&t, q);

			if (got != ref[q])
				bad++;
			if (ref[q])
				live--;
			ref[q] = NULL;
		}
		if (t.count != live)
			bad++;
		if (t.cap > max_cap)
			max_cap = t.cap;
	}
	for (uint32_t q = 0; q < window; q++)
		if (uroce_qptable_lookup(&t, q) != ref[q])
			bad++;
	CHECK(!bad, "window %u: %d mismatches against the reference", window, bad);
	CHECK(t.count == live, "count %u, live %u", t.count, live);
	/* The load never passes 1/2; live never exceeds window, so neither does cap/2. */
	CHECK(max_cap <= 4 * window + 64, "window %u: table grew to %u", window, max_cap);
	uroce_qptable_fini(&t);
	free(ref);
}

int main(void)
{
	struct uroce_qptable t;
	static int objs[20000];
	int ret;

	uroce_qptable_init(&t);
	CHECK(uroce_qptable_lookup(&t, 5) == NULL, "empty table finds nothing");
	CHECK(uroce_qptable_remove(&t, 5) == NULL, "empty table removes nothing");
	CHECK(uroce_qptable_insert(&t, 5, NULL) == -EINVAL, "a NULL object is refused");

	/* 10,000 QPNs in blocks of 64 as the daemon hands them out to one process (runs of
	 * consecutive numbers, blocks far apart), then every second one removed. */
	for (int i = 0; i < 10000; i++) {
		uint32_t qpn = (uint32_t)(i / 64) * 64 * 37 + 64 + (uint32_t)(i % 64);

		ret = uroce_qptable_insert(&t, qpn, &objs[i]);
		CHECK(!ret, "insert %u: %d", qpn, ret);
	}
	CHECK(t.count == 10000, "count %u", t.count);
	CHECK(t.cap <= 32768, "10,000 QPs in a table of %u slots (at most half full)", t.cap);
	CHECK(uroce_qptable_insert(&t, 64, &objs[0]) == -EEXIST, "a QPN is mapped once");
	for (int i = 0; i < 10000; i += 2)
		uroce_qptable_remove(&t, (uint32_t)(i / 64) * 64 * 37 + 64 + (uint32_t)(i % 64));
	{
		int bad = 0;

		for (int i = 0; i < 10000; i++) {
			uint32_t qpn = (uint32_t)(i / 64) * 64 * 37 + 64 + (uint32_t)(i % 64);
			void *want = i % 2 ? &objs[i] : NULL;

			if (uroce_qptable_lookup(&t, qpn) != want)
				bad++;
		}
		CHECK(!bad, "%d lookups wrong after removing the even ones", bad);
	}
	CHECK(t.count == 5000, "count %u after removals", t.count);
	CHECK(uroce_qptable_lookup(&t, QPN_SPACE - 1) == NULL, "an unknown QPN is not found");
	uroce_qptable_fini(&t);

	/* Churn: 100 live QPs, a million created and destroyed one after the other (new QPNs
	 * each time, as the daemon's cursor moves on): the table stays small. */
	uroce_qptable_init(&t);
	for (uint32_t q = 0; q < 100; q++)
		uroce_qptable_insert(&t, q, &objs[q]);
	for (uint32_t q = 100; q < 1000100; q++) {
		uroce_qptable_remove(&t, q - 100);
		ret = uroce_qptable_insert(&t, q % QPN_SPACE, &objs[q % 20000]);
		if (ret) {
			CHECK(!ret, "churn insert %u: %d", q, ret);
			break;
		}
	}
	CHECK(t.count == 100, "churn: count %u", t.count);
	CHECK(t.cap <= 256, "churn: the table grew to %u slots for 100 QPs", t.cap);
	CHECK(uroce_qptable_lookup(&t, 1000099) == &objs[1000099 % 20000], "churn: the last QP is found");
	uroce_qptable_fini(&t);

	/* Random inserts and removals against the reference, small and large windows (the
	 * small one wraps the probe runs around the end of the table often). */
	random_ops(50, 200000);
	random_ops(1000, 200000);
	random_ops(40000, 300000);
	return check_summary();
}
