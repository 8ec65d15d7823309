/* fuzz_mad — libFuzzer target for the MAD / CM decoders and the describer.
 *
 * Any input: uroce_mad_decode, uroce_cm_decode and uroce_mad_describe must return
 * without reading past the input (ASan) or misbehaving (UBSan).  An accepted CM MAD
 * must re-encode to exactly the input bytes, and decode again to the same struct.
 * Build: CC=clang cmake -DUROCE_FUZZ=ON ...; ctest -R mad_fuzz runs it for 30 s.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uroce_cm_msg m, back;
	struct uroce_mad mad;
	struct uroce_cma_hdr cma;
	uint8_t out[UROCE_MAD_SIZE];
	char line[512];
	char tiny[7];

	(void)uroce_mad_describe(data, size, line, sizeof(line));
	(void)uroce_mad_describe(data, size, tiny, sizeof(tiny));
	(void)uroce_cma_hdr_decode(data, size, &cma);
	if (uroce_mad_decode(data, size, &mad) == 0) {
		if (uroce_mad_encode(&mad, out, sizeof(out)) != (int)UROCE_MAD_SIZE ||
		    memcmp(out, data, size) != 0)
			abort();
	}
	if (uroce_cm_decode(data, size, &m) != 0)
		return 0;
	if (uroce_cm_encode(&m, out, sizeof(out)) != (int)UROCE_MAD_SIZE)
		abort();
	if (memcmp(out, data, size) != 0)
		abort();
	if (uroce_cm_decode(out, sizeof(out), &back) != 0 || memcmp(&back, &m, sizeof(m)) != 0)
		abort();
	return 0;
}
