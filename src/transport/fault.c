/* fault.c — seeded fault injection on the transmit path (fault.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/fault.h"

#define BTH_LEN 12
#define ICRC_LEN 4

/* splitmix64: small, fast, and good enough for choosing packets to disturb. */
static uint64_t next64(struct uroce_fault *f)
{
	uint64_t z = (f->state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int parse_prob(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	double p = strtod(v, &end);
	if (errno || end == v || *end || !(p >= 0.0 && p <= 1.0))
		return -EINVAL;
	*out = (uint64_t)(p * 4294967296.0);
	return 0;
}

int uroce_fault_parse(struct uroce_fault *f, const char *spec, char *err, size_t errlen)
{
	memset(f, 0, sizeof(*f));
	f->seed = 1;
	if (!spec || !*spec) {
		f->state = f->seed;
		return 0;
	}
	char *copy = strdup(spec);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = 0;
	char *save = NULL;
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (!eq) {
			snprintf(err, errlen, "%s: \"%s\" is not key=value", UROCE_FAULT_ENV, item);
			rc = -EINVAL;
			break;
		}
		*eq = 0;
		const char *k = item, *v = eq + 1;
		uint64_t *slot = !strcmp(k, "drop")    ? &f->drop :
				 !strcmp(k, "dup")     ? &f->dup :
				 !strcmp(k, "reorder") ? &f->reorder :
				 !strcmp(k, "corrupt") ? &f->corrupt : NULL;
		if (slot) {
			if (parse_prob(v, slot)) {
				snprintf(err, errlen, "%s: %s=%s is not a probability in [0, 1]",
					 UROCE_FAULT_ENV, k, v);
				rc = -EINVAL;
				break;
			}
		} else if (!strcmp(k, "log")) {
			if (!*v || strlen(v) >= sizeof(f->log)) {
				snprintf(err, errlen, "%s: log= needs a path shorter than %zu bytes",
					 UROCE_FAULT_ENV, sizeof(f->log));
				rc = -EINVAL;
				break;
			}
			strcpy(f->log, v);
		} else if (!strcmp(k, "seed")) {
			char *end;
			errno = 0;
			f->seed = strtoull(v, &end, 0);
			if (errno || end == v || *end) {
				snprintf(err, errlen, "%s: seed=%s is not a number", UROCE_FAULT_ENV, v);
				rc = -EINVAL;
				break;
			}
		} else {
			snprintf(err, errlen, "%s: unknown key \"%s\" (drop, dup, reorder, corrupt, seed, log)",
				 UROCE_FAULT_ENV, k);
			rc = -EINVAL;
			break;
		}
	}
	free(copy);
	if (rc) {
		memset(f, 0, sizeof(*f));
		return rc;
	}
	f->enabled = f->drop || f->dup || f->reorder || f->corrupt;
	f->state = f->seed;
	return 0;
}

static bool fires(struct uroce_fault *f, uint64_t threshold)
{
	/* Draw even when the threshold is 0, so that changing one probability does not shift
	 * the decisions made for the others. */
	uint64_t draw = next64(f) >> 32;
	return draw < threshold;
}

static struct uroce_fault_action decide(struct uroce_fault *f, size_t len)
{
	struct uroce_fault_action a = { 0, 0 };

	f->decided++;
	bool drop = fires(f, f->drop);
	bool dup = fires(f, f->dup);
	bool reorder = fires(f, f->reorder);
	bool corrupt = fires(f, f->corrupt);
	uint64_t where = next64(f);
	if (drop) {
		a.flags = UROCE_FAULT_DROP;
		return a;
	}
	if (dup)
		a.flags |= UROCE_FAULT_DUP;
	if (reorder)
		a.flags |= UROCE_FAULT_REORDER;
	/* Only packets with bytes between the BTH and the ICRC can be corrupted: flipping the
	 * BTH could turn a packet into one for another QP, which tests steering, not the ICRC;
	 * flipping the ICRC itself is the trivial case. */
	if (corrupt && len > BTH_LEN + ICRC_LEN) {
		a.flags |= UROCE_FAULT_CORRUPT;
		a.corrupt_bit = (uint32_t)(where % ((len - BTH_LEN - ICRC_LEN) * 8));
	}
	return a;
}

/* One line per disturbed packet (fault.h).  Opened per line: only tests set log=, and it
 * leaves no descriptor for the owner of @f to close. */
static void log_action(const struct uroce_fault *f, uint64_t index, size_t len, unsigned flags)
{
	static const char *const names[] = { "drop", "dup", "reorder", "corrupt" };
	char line[96];
	int n = snprintf(line, sizeof(line), "%llu %zu", (unsigned long long)index, len);
	char sep = ' ';
	int fd;

	for (unsigned i = 0; i < 4; i++)
		if (flags & (1u << i)) {
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%c%s", sep, names[i]);
			sep = '+';
		}
	line[n++] = '\n';
	fd = open(f->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		n = 0;   /* a lost line (fault.h): nothing else to do */
	close(fd);
}

struct uroce_fault_action uroce_fault_decide(struct uroce_fault *f, size_t len)
{
	struct uroce_fault_action a = { 0, 0 };

	if (!f->enabled)
		return a;
	a = decide(f, len);
	if (a.flags && f->log[0])
		log_action(f, f->decided - 1, len, a.flags);
	return a;
}

void uroce_fault_corrupt(uint8_t *pkt, size_t len, const struct uroce_fault_action *a)
{
	if (!(a->flags & UROCE_FAULT_CORRUPT))
		return;
	size_t byte = BTH_LEN + a->corrupt_bit / 8;
	if (byte < len - ICRC_LEN)
		pkt[byte] ^= (uint8_t)(1u << (a->corrupt_bit % 8));
}
