/* ref_icrc.h — an independent ICRC reference for the tests: zlib's crc32()
 * over the RoCEv2 A17.3.3 masked copy of an Ethernet frame, written separately
 * from src/wire/icrc.c.  Needs <zlib.h>, <string.h> and cmocka included first. */
#ifndef UROCE_TESTS_WIRE_REF_ICRC_H
#define UROCE_TESTS_WIRE_REF_ICRC_H

/* Reference ICRC of an Ethernet frame: the RoCEv2 A17.3.3 recipe with zlib,
 * written independently of src/wire/icrc.c (same rules as the capture README). */
static inline uint32_t ref_icrc(const uint8_t *fr, size_t len)
{
	uint8_t buf[9200];
	size_t off = 14, n = 0, ihl, l4, end;
	uint16_t et = (uint16_t)(fr[12] << 8 | fr[13]);

	memset(buf, 0xFF, 8);
	n = 8;
	if (et == 0x0800) {
		ihl = (size_t)(fr[off] & 0xF) * 4;
		end = off + (size_t)(fr[off + 2] << 8 | fr[off + 3]);
		memcpy(buf + n, fr + off, ihl);
		buf[n + 1] = 0xFF;
		buf[n + 8] = 0xFF;
		buf[n + 10] = buf[n + 11] = 0xFF;
		n += ihl;
		l4 = off + ihl;
	} else {
		end = off + 40 + (size_t)(fr[off + 4] << 8 | fr[off + 5]);
		memcpy(buf + n, fr + off, 40);
		buf[n] |= 0x0F;
		buf[n + 1] = buf[n + 2] = buf[n + 3] = 0xFF;
		buf[n + 7] = 0xFF;
		n += 40;
		l4 = off + 40;
	}
	assert_true(end <= len && end - l4 < sizeof(buf) - n);
	memcpy(buf + n, fr + l4, end - l4 - 4);
	buf[n + 6] = buf[n + 7] = 0xFF;   /* UDP checksum */
	buf[n + 8 + 4] = 0xFF;            /* BTH byte 4 */
	n += end - l4 - 4;
	return (uint32_t)crc32(0, buf, (uInt)n);
}

#endif
