/* validate.c — ingress checks of a received RoCEv2 UDP payload.
 *
 * One function, uroce_pkt_validate(), runs the packet-local checks of IBA
 * 9.6 ("packet header validation", C9-xx in the order of figure 64 where they
 * apply to RoCEv2) and returns the first failure as an enum with a name table,
 * so callers count each drop reason (style: every drop counted).  QP-level
 * checks (P_Key table, QPN, PSN, opcode sequence) belong to the transports.
 *
 * Every length is checked before a field is read; nothing outside buf[0..len)
 * is touched (tests/wire/fuzz_validate.c checks this under ASan).
 */
#include "wire/wire.h"

static const char *const rx_err_names[UROCE_RX_NUM] = {
#define X(n, d) [UROCE_RX_##n] = #n,
	UROCE_RX_ERRORS(X)
#undef X
};

static const char *const rx_err_descs[UROCE_RX_NUM] = {
#define X(n, d) [UROCE_RX_##n] = d,
	UROCE_RX_ERRORS(X)
#undef X
};

const char *uroce_rx_err_name(enum uroce_rx_err e)
{
	return (unsigned)e < UROCE_RX_NUM ? rx_err_names[e] : "UNKNOWN";
}

const char *uroce_rx_err_desc(enum uroce_rx_err e)
{
	return (unsigned)e < UROCE_RX_NUM ? rx_err_descs[e] : "unknown reason";
}

enum uroce_rx_err uroce_pkt_validate(const uint8_t *buf, size_t len, const struct uroce_rx_ctx *ctx,
				     struct uroce_pkt *p)
{
	const struct uroce_opcode_info *op;
	size_t rest;
	unsigned pad;

	/* decode() fills only what the length allows; start from a clean struct. */
	uroce_pkt_decode(buf, len, p);
	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return UROCE_RX_TOO_SHORT;
	op = p->op;
	/* IBA 9.2 / 9.6 header checks: TVer must be 0. */
	if (p->bth.tver != UROCE_TVER)
		return UROCE_RX_BAD_TVER;
	if (!op->name)
		return UROCE_RX_OPCODE_RESERVED;
	if ((op->mask & UROCE_OPF_UNSUPPORTED) && !(ctx && ctx->allow_unsupported))
		return UROCE_RX_OPCODE_UNSUPPORTED;
	if (len < (size_t)op->length + UROCE_ICRC_LEN)
		return UROCE_RX_HDR_TRUNCATED;
	/* Headers are multiples of 4 and payload + pad is padded to 4 (IBA 9.2.3),
	 * so a well-formed packet's length is a multiple of 4. */
	if (len & 3u)
		return UROCE_RX_LEN_UNALIGNED;

	rest = len - op->length - UROCE_ICRC_LEN; /* payload + pad */
	pad = p->bth.padcnt;
	if (!(op->mask & UROCE_OPF_PAYLOAD)) {
		/* Opcodes without payload (IBA table 43) carry none, so no pad either. */
		if (rest)
			return UROCE_RX_PAYLOAD_NOT_ALLOWED;
		if (pad)
			return UROCE_RX_PAD_INCONSISTENT;
		goto icrc;
	}
	if (pad > rest)
		return UROCE_RX_PAD_EXCEEDS_PAYLOAD;
	/* First and middle packets carry a whole PMTU, a multiple of 4: no pad
	 * (IBA 9.2: only a LAST/ONLY packet can need pad bytes). */
	if (pad && !(op->mask & UROCE_OPF_LAST))
		return UROCE_RX_PAD_INCONSISTENT;
	if ((op->mask & UROCE_OPF_ATOMIC_WRITE) && p->payload_len != UROCE_ATOMIC_WRITE_LEN)
		return UROCE_RX_PAYLOAD_LENGTH;
	if ((op->mask & UROCE_OPF_CNP) && p->payload_len != UROCE_CNP_RESV_LEN)
		return UROCE_RX_PAYLOAD_LENGTH;
	if (ctx && ctx->mtu) {
		/* IBA 9.7 (packet length checks): payload never exceeds the PMTU; FIRST and MIDDLE
		 * packets of a multi-packet message carry exactly the PMTU. */
		if (p->payload_len > ctx->mtu)
			return UROCE_RX_PAYLOAD_EXCEEDS_MTU;
		if ((op->mask & (UROCE_OPF_FIRST | UROCE_OPF_MIDDLE)) &&
		    !(op->mask & UROCE_OPF_LAST) && p->payload_len != ctx->mtu)
			return UROCE_RX_PAYLOAD_NOT_PMTU;
	}
icrc:
	if (ctx && ctx->addr) {
		/* RoCEv2 Annex A17.3.3: a bad ICRC is a silent drop. */
		p->icrc_status = uroce_icrc_verify(ctx->addr, buf, len, ctx->icrc_flags, &p->ip_id);
		if (p->icrc_status == UROCE_ICRC_BAD)
			return UROCE_RX_BAD_ICRC;
	}
	return UROCE_RX_OK;
}
