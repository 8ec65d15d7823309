/* fault.h — fault injection on the transmit path, for tests.
 *
 * These machines have no netem, so loss, duplication, reordering and corruption are made by
 * uroce itself, just before a packet leaves.  Configured from the environment:
 *
 *     UROCE_FAULT="drop=0.05,dup=0.02,reorder=0.02,corrupt=0.01,seed=7"
 *
 * Each probability is per packet, in [0, 1].  The sequence of decisions is a pure function
 * of the seed and the number of packets decided so far, so a failing run can be replayed.
 * Unknown keys and malformed values are errors (a typo must not silently test nothing).
 *
 * log=PATH (optional) appends one line per packet that gets an action, so a test can tell
 * exactly which packets were disturbed:
 *
 *     <index> <len> <action>[+<action>...]      e.g.  "17 1060 drop", "40 76 dup+reorder"
 *
 * index counts the packets decided by this fault state from 0 (one state per context: the
 * order in which the context sent them), len is the packet's length (BTH to ICRC), actions
 * are drop, dup, reorder, corrupt.  Each line is one O_APPEND write, so processes may share
 * a file.  A log that cannot be written loses its lines (the decisions are unchanged).
 *
 * corrupt flips one bit of the packet after the BTH (payload, or an extension header), so
 * the receiver's ICRC check must catch it; reorder holds the packet back and sends it after
 * the next one; dup sends it twice.  A packet gets at most one of drop/reorder, and dup
 * and corrupt may combine with reorder.
 */
#ifndef UROCE_TRANSPORT_FAULT_H
#define UROCE_TRANSPORT_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UROCE_FAULT_ENV "UROCE_FAULT"

struct uroce_fault {
	bool enabled;
	/* Thresholds on a 32-bit uniform draw: P * 2^32, so 1.0 always fires. */
	uint64_t drop, dup, reorder, corrupt;
	uint64_t state; /* splitmix64 */
	uint64_t seed;
	uint64_t decided;
	char log[256];   /* log=PATH, "" for none */
};

enum {
	UROCE_FAULT_DROP    = 1 << 0,
	UROCE_FAULT_DUP     = 1 << 1,
	UROCE_FAULT_REORDER = 1 << 2,
	UROCE_FAULT_CORRUPT = 1 << 3,
};

/* What to do with one packet. */
struct uroce_fault_action {
	unsigned flags;        /* UROCE_FAULT_* */
	uint32_t corrupt_bit;  /* with CORRUPT: bit index counted from the first byte after the BTH */
};

/*
 * Parse @spec (NULL or "" disables).  Returns 0, or -EINVAL with a message in @err (also
 * for a log path of 256 bytes or more).
 */
int uroce_fault_parse(struct uroce_fault *f, const char *spec, char *err, size_t errlen);

/* Decide the fate of one packet of @len bytes (BTH included, ICRC included); with log=,
 * appends the line for a packet that gets an action. */
struct uroce_fault_action uroce_fault_decide(struct uroce_fault *f, size_t len);

/* Apply a CORRUPT action to @pkt (len bytes): flips the chosen bit. */
void uroce_fault_corrupt(uint8_t *pkt, size_t len, const struct uroce_fault_action *a);

#endif
