/* mad_pcap.c — locate GSI MADs in RoCEv2 captures.
 *
 * RoCEv2 Annex A17: UDP dport 4791 carries BTH (12 B); a UD SEND_ONLY (0x64) or
 * SEND_ONLY_WITH_IMMEDIATE (0x65) to QP1 carries DETH (8 B) [+ ImmDt (4 B)], then the
 * MAD, then pad (BTH PadCnt) and the 4-byte ICRC (IBA 13.5: MADs travel on QP1). */
#include "mad_pcap.h"

#include <errno.h>
#include <stdio.h>

#include "net/frame.h"
#include "net/pcap_io.h"

struct walk {
	mad_pcap_cb cb;
	void *arg;
	int count;
};

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame,
		    size_t len, int linktype)
{
	struct walk *w = arg;
	struct uroce_frame f;
	const uint8_t *p;
	size_t hdr, pad;

	(void)ts;
	if (uroce_pcap_frame(frame, len, linktype, &f) != 0 || f.dport != UROCE_UDP_PORT)
		return 0;
	p = f.payload;
	if (f.payload_len < 12)
		return 0;
	if (p[0] != 0x64 && p[0] != 0x65)
		return 0;
	if (((uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7]) != 1)
		return 0;
	hdr = 12 + 8 + (p[0] == 0x65 ? 4 : 0);
	pad = (p[1] >> 4) & 3;
	if (f.payload_len < hdr + pad + 4)
		return 0;
	w->count++;
	return w->cb(w->arg, idx, p + hdr, f.payload_len - hdr - pad - 4);
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
