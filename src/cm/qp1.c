/* qp1.c — the QP1 packet around a CM MAD (IBA 13.5 GSI, RoCEv2 Annex A17).
 *
 * Receive: the daemon's socket at index 0 of a device's receive group gets QP1, but
 * also every QPN nobody owns and runts (src/daemon/rxgroup.c), so the agent first
 * makes sure it has a GSI datagram, then runs the RoCEv2 checks (uroce_pkt_validate,
 * with the ICRC: a Linux sender's non-zero IPv4 Identification is solved for as the
 * data path does), then the checks rxe makes for QP1 (rxe_recv.c check_keys): the
 * default P_Key, the GSI Q_Key, and exactly one 256-byte MAD (IBA 13.4.2).
 *
 * Send: UD SEND Only, P_Key 0xFFFF, DestQP 1, AckReq set (as rxe sets it on every
 * GSI packet [cap]), DETH Q_Key 0x80010000 and SrcQP 1, the MAD, the ICRC for the
 * IPv4 Identification 0 with DF that the daemon's socket produces (as netio).
 */
#include <errno.h>
#include <string.h>

#include "cm/cm_priv.h"
#include "wire/icrc.h"
#include "wire/wire.h"

#define ROCE_PORT 4791
#define UD_SEND_ONLY (UROCE_OP_UD | UROCE_OP_SEND_ONLY)

static void icrc_addr(const uint8_t src[16], const uint8_t dst[16], uint16_t sport,
		      struct uroce_icrc_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (cm_gid_v4mapped(src)) {
		a->family = AF_INET;
		memcpy(&a->src.v4, src + 12, 4);
		memcpy(&a->dst.v4, dst + 12, 4);
	} else {
		a->family = AF_INET6;
		memcpy(&a->src.v6, src, 16);
		memcpy(&a->dst.v6, dst, 16);
	}
	a->sport = sport;
	a->dport = ROCE_PORT;
}

/* IBA 10.9.3 P_Key matching as rxe does it for QP1: the low 15 bits equal, one of the
 * two a full member (0xFFFF, the default P_Key, is). */
static bool pkey_default(uint16_t pkey)
{
	return (pkey & 0x7fff) == 0x7fff;
}

void uroce_cm_recv_packet(struct uroce_cm *cm, uint64_t now, uint32_t dev_id,
			  const uint8_t *pkt, size_t len, const uint8_t src[16],
			  const uint8_t dst[16], uint16_t sport)
{
	struct uroce_icrc_addr ia;
	struct uroce_rx_ctx rc = { .mtu = 0, .addr = &ia, .icrc_flags = UROCE_ICRC_RX_SOLVE_ID };
	struct uroce_pkt p;
	struct uroce_cm_rx rx;
	enum uroce_rx_err e;

	cm->now = now;
	/* Cheap tests first: most of what the default socket gets that is not ours
	 * (packets for QPNs nobody owns) needs no CRC. */
	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN || pkt[0] != UD_SEND_ONLY ||
	    uroce_get_be24(pkt + 5) != UROCE_GSI_QPN) {
		cm_count_drop(cm, UROCE_CM_DROP_NOT_GSI);
		return;
	}
	if (cm_gid_v4mapped(src) != cm_gid_v4mapped(dst)) {
		cm_count_drop(cm, UROCE_CM_DROP_ADDR);
		return;
	}
	icrc_addr(src, dst, sport, &ia);
	e = uroce_pkt_validate(pkt, len, &rc, &p);
	if (e == UROCE_RX_BAD_ICRC) {
		cm_count_drop(cm, UROCE_CM_DROP_ICRC);
		return;
	}
	if (e != UROCE_RX_OK) {
		cm_count_drop(cm, UROCE_CM_DROP_PKT);
		return;
	}
	if (!pkey_default(p.bth.pkey)) {
		cm_count_drop(cm, UROCE_CM_DROP_PKEY);
		return;
	}
	if (p.deth.qkey != UROCE_GSI_QKEY) {
		cm_count_drop(cm, UROCE_CM_DROP_QKEY);
		return;
	}
	if (p.payload_len != UROCE_MAD_SIZE) {
		cm_count_drop(cm, UROCE_CM_DROP_MAD_LEN);
		return;
	}
	memset(&rx, 0, sizeof(rx));
	rx.dev_id = dev_id;
	memcpy(rx.sgid, src, 16);
	memcpy(rx.dgid, dst, 16);
	rx.mad = p.payload;
	rx.len = p.payload_len;
	uroce_cm_recv(cm, now, &rx);
}

int uroce_cm_build_packet(const struct uroce_cm_tx *tx, uint16_t sport, uint32_t psn,
			  uint8_t *out, size_t cap)
{
	struct uroce_icrc_addr ia;
	struct uroce_pkt p;
	long n;

	if (cap < UROCE_CM_QP1_PKT_LEN)
		return -ENOSPC;
	memset(&p, 0, sizeof(p));
	p.op = uroce_opcode(UD_SEND_ONLY);
	p.bth.opcode = UD_SEND_ONLY;
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = UROCE_GSI_QPN;
	p.bth.ackreq = true;
	p.bth.psn = psn & 0xFFFFFF;
	p.deth.qkey = UROCE_GSI_QKEY;
	p.deth.srcqp = UROCE_GSI_QPN;
	p.payload = tx->mad;
	p.payload_len = UROCE_MAD_SIZE;
	n = uroce_pkt_encode(out, cap, &p);
	if (n != (long)UROCE_CM_QP1_PKT_LEN)
		return n < 0 ? (int)n : -EINVAL;
	icrc_addr(tx->sgid, tx->dgid, sport, &ia);
	uroce_icrc_set(&ia, out, (size_t)n);
	return (int)n;
}
