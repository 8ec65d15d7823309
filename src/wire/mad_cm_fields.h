/* mad_cm_fields.h — the CM message layout tables (internal to src/wire/mad*.c and
 * tests/mad; not part of the public wire API). */
#ifndef UROCE_WIRE_MAD_CM_FIELDS_H
#define UROCE_WIRE_MAD_CM_FIELDS_H

#include <stddef.h>
#include <stdint.h>

enum { CM_FK_INT, CM_FK_BYTES };

/* One field: bits [shift, shift+width) of the big-endian @nbytes-byte container at MAD
 * data offset @off hold bits [vshift, vshift+width) of the struct member at @moff
 * (size @msize).  A byte array (CM_FK_BYTES) is @msize bytes at @off. */
struct cm_field {
	const char *name;
	uint8_t off;
	uint8_t nbytes;
	uint8_t shift;
	uint8_t width;
	uint8_t vshift;
	uint8_t top;      /* most significant piece: bounds the member's value on encode */
	uint8_t kind;
	uint8_t msize;
	uint16_t moff;
};

struct cm_msg_desc {
	uint16_t attr_id;
	const struct cm_field *fields;
	size_t nfields;
	size_t size;      /* sizeof the message struct */
};

extern const struct cm_msg_desc uroce_cm_msg_descs[];
extern const size_t uroce_cm_msg_ndescs;

/* NULL for attributes kept as raw bytes. */
const struct cm_msg_desc *uroce_cm_msg_desc(uint16_t attr_id);
uint64_t uroce_cm_field_get(const void *msg, const struct cm_field *f);
/* Zero @msg then fill it from the 232-byte @data. */
void uroce_cm_fields_decode(const struct cm_msg_desc *d, const uint8_t *data, void *msg);
/* Write all 232 bytes of @data; -EINVAL (and @data untouched) if a member is too wide. */
int uroce_cm_fields_encode(const struct cm_msg_desc *d, const void *msg, uint8_t *data);

#endif
