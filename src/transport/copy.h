/* copy.h — copies of a few bytes on the per-packet path.
 *
 * The send path copies each packet's headers (12-28 bytes) and tail (4-8) into the engine's
 * batch slots and gathers a BTH for the ICRC.  memcpy with a length known only at run time
 * is a call into libc, about 25 instructions for 12 bytes; two overlapping moves of a fixed
 * size do the same inline.  Reads and writes exactly [s, s + n) and [d, d + n).
 */
#ifndef UROCE_TRANSPORT_COPY_H
#define UROCE_TRANSPORT_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void uroce_copy_small(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (n >= 16 && n <= 32) {
		memcpy(d, s, 16);
		memcpy(d + n - 16, s + n - 16, 16);
	} else if (n >= 8 && n < 16) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4 && n < 8) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else {
		memcpy(d, s, n);
	}
}

#endif
