/* mad_bytes.h — big-endian accessors for the MAD code (internal to src/wire/mad*.c).
 * Callers have checked the buffer length; these never check. */
#ifndef UROCE_WIRE_MAD_BYTES_H
#define UROCE_WIRE_MAD_BYTES_H

#include <stdint.h>

static inline uint16_t mad_get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t mad_get24(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }
static inline uint32_t mad_get32(const uint8_t *p) { return (uint32_t)p[0] << 24 | mad_get24(p + 1); }
static inline uint64_t mad_get64(const uint8_t *p) { return (uint64_t)mad_get32(p) << 32 | mad_get32(p + 4); }

static inline void mad_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void mad_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v;
}
static inline void mad_put32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24); mad_put24(p + 1, v); }
static inline void mad_put64(uint8_t *p, uint64_t v) { mad_put32(p, (uint32_t)(v >> 32)); mad_put32(p + 4, (uint32_t)v); }

#endif
