/* hdr.c — decode and encode BTH and extension headers (IBA 9.2, 9.3).
 *
 * Both directions walk the same opcode table entry: for each header kind the
 * entry says whether it is present and at which offset.  Every field, reserved
 * bits included, goes through struct uroce_pkt so encode(decode(x)) == x.
 */
#include <errno.h>
#include <string.h>

#include "wire/wire.h"

size_t uroce_pkt_size(uint8_t opcode, size_t payload_len)
{
	const struct uroce_opcode_info *op = uroce_opcode(opcode);

	if (!op->name)
		return 0;
	return op->length + payload_len + uroce_pad_for(payload_len) + UROCE_ICRC_LEN;
}

static void decode_bth(const uint8_t *b, struct uroce_bth *h)
{
	h->opcode = b[0];
	h->se = !!(b[1] & UROCE_BTH_SE);
	h->mig = !!(b[1] & UROCE_BTH_MIG);
	h->padcnt = (uint8_t)((b[1] & UROCE_BTH_PAD_MASK) >> UROCE_BTH_PAD_SHIFT);
	h->tver = b[1] & UROCE_BTH_TVER_MASK;
	h->pkey = uroce_get_be16(b + 2);
	h->fecn = !!(b[4] & UROCE_BTH_FECN);
	h->becn = !!(b[4] & UROCE_BTH_BECN);
	h->resv6 = b[4] & UROCE_BTH_RESV6;
	h->dqpn = uroce_get_be24(b + 5);
	h->ackreq = !!(b[8] & UROCE_BTH_ACKREQ);
	h->resv7 = b[8] & UROCE_BTH_RESV7;
	h->psn = uroce_get_be24(b + 9);
}

void uroce_bth_put(uint8_t *b, const struct uroce_bth *h)
{
	b[0] = h->opcode;
	b[1] = (uint8_t)((h->se ? UROCE_BTH_SE : 0) | (h->mig ? UROCE_BTH_MIG : 0) |
			 ((h->padcnt << UROCE_BTH_PAD_SHIFT) & UROCE_BTH_PAD_MASK) |
			 (h->tver & UROCE_BTH_TVER_MASK));
	uroce_put_be16(b + 2, h->pkey);
	b[4] = (uint8_t)((h->fecn ? UROCE_BTH_FECN : 0) | (h->becn ? UROCE_BTH_BECN : 0) |
			 (h->resv6 & UROCE_BTH_RESV6));
	uroce_put_be24(b + 5, h->dqpn);
	b[8] = (uint8_t)((h->ackreq ? UROCE_BTH_ACKREQ : 0) | (h->resv7 & UROCE_BTH_RESV7));
	uroce_put_be24(b + 9, h->psn);
}

void uroce_ack_put(uint8_t *b, const struct uroce_bth *h, uint8_t syndrome, uint32_t msn)
{
	uroce_bth_put(b, h);
	b[UROCE_BTH_LEN] = syndrome;                   /* IBA 9.3.5 */
	uroce_put_be24(b + UROCE_BTH_LEN + 1, msn);
}

/* Decode every extension header the table says @op carries. */
static void decode_eths(const uint8_t *b, const struct uroce_opcode_info *op, struct uroce_pkt *p)
{
	const uint8_t *h;

	if (op->mask & UROCE_OPF_RDETH) {
		h = b + op->offset[UROCE_HDR_RDETH];
		p->rdeth.resv = h[0];
		p->rdeth.een = uroce_get_be24(h + 1);
	}
	if (op->mask & UROCE_OPF_DETH) {
		h = b + op->offset[UROCE_HDR_DETH];
		p->deth.qkey = uroce_get_be32(h);
		p->deth.resv = h[4];
		p->deth.srcqp = uroce_get_be24(h + 5);
	}
	if (op->mask & UROCE_OPF_XRCETH) {
		h = b + op->offset[UROCE_HDR_XRCETH];
		p->xrceth.resv = h[0];
		p->xrceth.xrcsrq = uroce_get_be24(h + 1);
	}
	if (op->mask & UROCE_OPF_FETH)
		p->feth = uroce_get_be32(b + op->offset[UROCE_HDR_FETH]);
	if (op->mask & UROCE_OPF_RETH) {
		h = b + op->offset[UROCE_HDR_RETH];
		p->reth.va = uroce_get_be64(h);
		p->reth.rkey = uroce_get_be32(h + 8);
		p->reth.len = uroce_get_be32(h + 12);
	}
	if (op->mask & UROCE_OPF_AETH) {
		h = b + op->offset[UROCE_HDR_AETH];
		p->aeth.syndrome = h[0];
		p->aeth.msn = uroce_get_be24(h + 1);
	}
	if (op->mask & UROCE_OPF_ATMETH) {
		h = b + op->offset[UROCE_HDR_ATMETH];
		p->atmeth.va = uroce_get_be64(h);
		p->atmeth.rkey = uroce_get_be32(h + 8);
		p->atmeth.swap_add = uroce_get_be64(h + 12);
		p->atmeth.compare = uroce_get_be64(h + 20);
	}
	if (op->mask & UROCE_OPF_ATMACK)
		p->atmack = uroce_get_be64(b + op->offset[UROCE_HDR_ATMACK]);
	if (op->mask & UROCE_OPF_IMMDT)
		p->imm = uroce_get_be32(b + op->offset[UROCE_HDR_IMMDT]);
	if (op->mask & UROCE_OPF_IETH)
		p->ieth = uroce_get_be32(b + op->offset[UROCE_HDR_IETH]);
}

static void encode_eths(uint8_t *b, const struct uroce_opcode_info *op, const struct uroce_pkt *p)
{
	uint8_t *h;

	if (op->mask & UROCE_OPF_RDETH) {
		h = b + op->offset[UROCE_HDR_RDETH];
		h[0] = p->rdeth.resv;
		uroce_put_be24(h + 1, p->rdeth.een);
	}
	if (op->mask & UROCE_OPF_DETH) {
		h = b + op->offset[UROCE_HDR_DETH];
		uroce_put_be32(h, p->deth.qkey);
		h[4] = p->deth.resv;
		uroce_put_be24(h + 5, p->deth.srcqp);
	}
	if (op->mask & UROCE_OPF_XRCETH) {
		h = b + op->offset[UROCE_HDR_XRCETH];
		h[0] = p->xrceth.resv;
		uroce_put_be24(h + 1, p->xrceth.xrcsrq);
	}
	if (op->mask & UROCE_OPF_FETH)
		uroce_put_be32(b + op->offset[UROCE_HDR_FETH], p->feth);
	if (op->mask & UROCE_OPF_RETH) {
		h = b + op->offset[UROCE_HDR_RETH];
		uroce_put_be64(h, p->reth.va);
		uroce_put_be32(h + 8, p->reth.rkey);
		uroce_put_be32(h + 12, p->reth.len);
	}
	if (op->mask & UROCE_OPF_AETH) {
		h = b + op->offset[UROCE_HDR_AETH];
		h[0] = p->aeth.syndrome;
		uroce_put_be24(h + 1, p->aeth.msn);
	}
	if (op->mask & UROCE_OPF_ATMETH) {
		h = b + op->offset[UROCE_HDR_ATMETH];
		uroce_put_be64(h, p->atmeth.va);
		uroce_put_be32(h + 8, p->atmeth.rkey);
		uroce_put_be64(h + 12, p->atmeth.swap_add);
		uroce_put_be64(h + 20, p->atmeth.compare);
	}
	if (op->mask & UROCE_OPF_ATMACK)
		uroce_put_be64(b + op->offset[UROCE_HDR_ATMACK], p->atmack);
	if (op->mask & UROCE_OPF_IMMDT)
		uroce_put_be32(b + op->offset[UROCE_HDR_IMMDT], p->imm);
	if (op->mask & UROCE_OPF_IETH)
		uroce_put_be32(b + op->offset[UROCE_HDR_IETH], p->ieth);
}

void uroce_pkt_decode(const uint8_t *buf, size_t len, struct uroce_pkt *p)
{
	const struct uroce_opcode_info *op;
	size_t rest;

	memset(p, 0, sizeof(*p));
	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return;
	decode_bth(buf, &p->bth);
	op = p->op = uroce_opcode(p->bth.opcode);
	p->len = (uint32_t)len;
	if (!op->name || len < (size_t)op->length + UROCE_ICRC_LEN)
		return; /* contract violation: the caller did not validate; decode nothing more */
	decode_eths(buf, op, p);
	rest = len - op->length - UROCE_ICRC_LEN; /* payload + pad */
	p->payload = buf + op->length;
	p->payload_len = (uint32_t)(rest >= p->bth.padcnt ? rest - p->bth.padcnt : 0);
	for (unsigned i = 0; i < p->bth.padcnt && p->payload_len + i < rest; i++)
		p->pad[i] = p->payload[p->payload_len + i];
	p->icrc = uroce_get_le32(buf + len - UROCE_ICRC_LEN);
}

long uroce_pkt_build_hdrs(uint8_t *buf, size_t cap, const struct uroce_pkt *p)
{
	const struct uroce_opcode_info *op = uroce_opcode(p->bth.opcode);

	if (!op->name)
		return -EINVAL;
	if (cap < op->length)
		return -ENOSPC;
	uroce_bth_put(buf, &p->bth);
	encode_eths(buf, op, p);
	return op->length;
}

long uroce_pkt_encode(uint8_t *buf, size_t cap, const struct uroce_pkt *p)
{
	const struct uroce_opcode_info *op = uroce_opcode(p->bth.opcode);
	size_t pad = p->bth.padcnt & 3u, total;
	long hl;

	if (!op->name || (p->payload_len && !p->payload))
		return -EINVAL;
	total = (size_t)op->length + p->payload_len + pad + UROCE_ICRC_LEN;
	if (cap < total)
		return -ENOSPC;
	hl = uroce_pkt_build_hdrs(buf, cap, p);
	if (hl < 0)
		return hl;
	if (p->payload_len)
		memmove(buf + hl, p->payload, p->payload_len);
	memcpy(buf + hl + p->payload_len, p->pad, pad);
	uroce_put_le32(buf + total - UROCE_ICRC_LEN, p->icrc);
	return (long)total;
}
