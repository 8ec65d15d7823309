/* psn.h — 24-bit Packet Sequence Number arithmetic (IBA 9.7.1).
 *
 * PSNs are 24-bit counters that wrap.  Every comparison, increment and window
 * test in uroce goes through these helpers; nothing else open-codes the mask.
 *
 * Ordering (IBA 9.7.1.1 / C9-5x: the responder treats the PSN space as a ring
 * split in half around the expected PSN): a is "before" b when b - a, taken
 * modulo 2^24, lies in [1, 2^23).  psn_cmp() computes this like Linux rxe:
 * shift the 24-bit difference into the top of a 32-bit signed integer and look
 * at its sign.  A difference of exactly 2^23 is ambiguous: it sets the sign
 * bit either way, so psn_cmp(a, b) and psn_cmp(b, a) are both negative.
 * Callers keep windows well below 2^23 (IBA 9.7.1.1 limits outstanding PSNs
 * to half the space).
 *
 * All functions are pure and cannot fail.
 */
#ifndef UROCE_WIRE_PSN_H
#define UROCE_WIRE_PSN_H

#include <stdbool.h>
#include <stdint.h>

#define UROCE_PSN_BITS 24
#define UROCE_PSN_MASK 0x00FFFFFFu
#define UROCE_PSN_HALF 0x00800000u /* 2^23: the ordering horizon */

static inline uint32_t psn_mask(uint32_t v)
{
	return v & UROCE_PSN_MASK;
}

/* a + n, wrapped to 24 bits.  n may be any 32-bit value (n mod 2^24 is added). */
static inline uint32_t psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & UROCE_PSN_MASK;
}

/* a - n, wrapped. */
static inline uint32_t psn_sub(uint32_t a, uint32_t n)
{
	return (a - n) & UROCE_PSN_MASK;
}

/* Forward distance from a to b: the n in [0, 2^24) with psn_add(a, n) == b. */
static inline uint32_t psn_dist(uint32_t a, uint32_t b)
{
	return (b - a) & UROCE_PSN_MASK;
}

/*
 * Wrap-aware comparison: <0 when a is before b, 0 when equal, >0 when after.
 * The 24-bit difference is moved to bits 31..8 so the int32 sign is the sign
 * of the difference in the ring (the same trick as rxe's psn_compare()).
 */
static inline int psn_cmp(uint32_t a, uint32_t b)
{
	int32_t d = (int32_t)((a - b) << 8);
	return d < 0 ? -1 : d > 0 ? 1 : 0;
}

static inline bool psn_before(uint32_t a, uint32_t b)
{
	return psn_cmp(a, b) < 0;
}

static inline bool psn_after(uint32_t a, uint32_t b)
{
	return psn_cmp(a, b) > 0;
}

/* Is psn inside the window [start, start + len)?  len must be < 2^24. */
static inline bool psn_in_window(uint32_t psn, uint32_t start, uint32_t len)
{
	return psn_dist(start, psn) < len;
}

/* Is psn inside the closed range [lo, hi] (lo before-or-equal hi in the ring)? */
static inline bool psn_in_range(uint32_t psn, uint32_t lo, uint32_t hi)
{
	return psn_dist(lo, psn) <= psn_dist(lo, hi);
}

#endif
