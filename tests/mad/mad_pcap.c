/* mad_pcap.c — locate GSI MADs in RoCEv2 captures.
 *
 * A MAD is the payload of a UD SEND to QP1 (IBA 13.5; RoCEv2 Annex A17 puts BTH +
 * DETH in UDP 4791).  The packet is checked and taken apart by the wire module's
 * validator (src/wire/wire.h), ICRC included, so the MAD is exactly the bytes between
 * DETH [+ ImmDt] and pad + ICRC. */
#include "mad_pcap.h"

#include <errno.h>
#include <stdio.h>

#include "net/frame.h"
#include "net/pcap_io.h"
#include "wire/icrc.h"
#include "wire/wire.h"

struct walk {
	mad_pcap_cb cb;
	void *arg;
	int count;
};

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame,
		    size_t len, int linktype)
{
	struct walk *w = arg;
	struct uroce_rx_ctx ctx = { 0 };
	struct uroce_frame f;
	struct uroce_pkt p;

	(void)ts;
	if (uroce_pcap_frame(frame, len, linktype, &f) != 0 || f.dport != UROCE_UDP_PORT)
		return 0;
	if (uroce_pkt_validate(f.payload, f.payload_len, &ctx, &p) != UROCE_RX_OK)
		return 0;
	if (uroce_opcode_transport(p.bth.opcode) != UROCE_TRANSPORT_UD || p.bth.dqpn != 1u)
		return 0;
	if (!uroce_icrc_frame_ok(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len)) {
		fprintf(stderr, "frame %u: MAD with a bad ICRC, skipped\n", idx);
		return 0;
	}
	w->count++;
	return w->cb(w->arg, idx, p.payload, p.payload_len);
}

int mad_pcap_foreach(const char *path, mad_pcap_cb cb, void *arg)
{
	struct walk w = { cb, arg, 0 };
	char err[256] = "";
	int rc = uroce_pcap_foreach(path, on_frame, &w, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", path, err[0] ? err : "cannot read");
		return rc;
	}
	return rc ? rc : w.count;
}
