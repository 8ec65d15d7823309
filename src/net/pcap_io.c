/* pcap_io.c — capture files through libpcap (see pcap_io.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pcap/pcap.h>

#include "net/frame.h"
#include "net/pcap_io.h"

int uroce_pcap_foreach(const char *path, uroce_pcap_cb cb, void *arg, char *err, size_t errlen)
{
	char ebuf[PCAP_ERRBUF_SIZE] = "";
	pcap_t *p = pcap_open_offline(path, ebuf);
	if (!p) {
		snprintf(err, errlen, "%s", ebuf);
		return -EIO;
	}
	int linktype = pcap_datalink(p);
	struct pcap_pkthdr *h;
	const u_char *data;
	unsigned idx = 0;
	int rc = 0, r;
	while ((r = pcap_next_ex(p, &h, &data)) == 1) {
		idx++;
		rc = cb(arg, idx, &h->ts, data, h->caplen, linktype);
		if (rc)
			break;
	}
	if (r == PCAP_ERROR) {
		snprintf(err, errlen, "%s: %s", path, pcap_geterr(p));
		rc = -EIO;
	}
	pcap_close(p);
	return rc;
}

int uroce_pcap_frame(const uint8_t *frame, size_t len, int linktype, struct uroce_frame *out)
{
	switch (linktype) {
	case DLT_EN10MB:
		return uroce_frame_parse_eth(frame, len, out);
	case DLT_RAW:
	case 101: /* LINKTYPE_RAW as stored in files */
		return uroce_frame_parse_ip(frame, len, out);
	case DLT_NULL:
		/* BSD loopback: 4-byte host-order family, then IP. */
		if (len < 4)
			return -EINVAL;
		return uroce_frame_parse_ip(frame + 4, len - 4, out);
	case DLT_LINUX_SLL:
		/* Linux cooked v1 (tshark -i any, or lo on some versions): 16-byte header. */
		if (len < 16)
			return -EINVAL;
		return uroce_frame_parse_ip(frame + 16, len - 16, out);
	case 276: /* DLT_LINUX_SLL2: 20-byte header */
		if (len < 20)
			return -EINVAL;
		return uroce_frame_parse_ip(frame + 20, len - 20, out);
	default:
		return -EPROTONOSUPPORT;
	}
}

struct uroce_pcap_writer {
	pcap_t *p;
	pcap_dumper_t *d;
};

struct uroce_pcap_writer *uroce_pcap_create(const char *path, char *err, size_t errlen)
{
	struct uroce_pcap_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->p = pcap_open_dead(DLT_EN10MB, 262144);
	if (!w->p) {
		snprintf(err, errlen, "pcap_open_dead failed");
		goto err_free;
	}
	w->d = pcap_dump_open(w->p, path);
	if (!w->d) {
		snprintf(err, errlen, "%s: %s", path, pcap_geterr(w->p));
		goto err_close;
	}
	return w;

err_close:
	pcap_close(w->p);
err_free:
	free(w);
	return NULL;
}

int uroce_pcap_write(struct uroce_pcap_writer *w, const uint8_t *frame, size_t len)
{
	struct pcap_pkthdr h;
	memset(&h, 0, sizeof(h));
	gettimeofday(&h.ts, NULL);
	h.caplen = h.len = (bpf_u_int32)len;
	pcap_dump((u_char *)w->d, &h, frame);
	return 0;
}

void uroce_pcap_close(struct uroce_pcap_writer *w)
{
	if (!w)
		return;
	pcap_dump_close(w->d);
	pcap_close(w->p);
	free(w);
}
