/* capture.c — the data path's capture tap (capture.h, ipc/cap_proto.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_proto.h"
#include "transport/capture.h"
#include "verbs/verbs.h"

#define ROCE_PORT 4791

static uint32_t ring_bytes_env(void)
{
	const char *v = getenv("UROCE_CAPTURE_RING_KB");
	unsigned long kb;
	uint32_t r = UROCE_CAP_RING_MIN;
	char *end;

	if (!v || !*v)
		return UROCE_CAP_RING_DEFAULT;
	kb = strtoul(v, &end, 10);
	if (*end || kb == 0 || kb > UROCE_CAP_RING_MAX / 1024)
		return UROCE_CAP_RING_DEFAULT;
	while (r < UROCE_CAP_RING_MAX && r < kb * 1024)
		r <<= 1;     /* the next power of two */
	return r;
}

int uroce_cap_open(struct uroce_context *ctx, uint64_t *missed, struct uroce_cap **out)
{
	struct uroce_cap *c;
	uint32_t r = ring_bytes_env();
	int err;

	if (!ctx || !ctx->ipc || !ctx->dev || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c) + sizeof(pthread_mutex_t));
	if (!c)
		return -ENOMEM;
	c->lock = c + 1;
	c->fd = -1;
	c->missed_ctr = missed;
	pthread_mutex_init(c->lock, NULL);
	c->ring_bytes = r;
	c->size = UROCE_CAP_HDR_BYTES + (size_t)r;
	/* The pages are the kernel's until written: a ring costs memory only once a capture
	 * has run through it. */
	c->fd = memfd_create("uroce-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->fd < 0) {
		err = -errno;
		goto fail;
	}
	if (ftruncate(c->fd, (off_t)c->size) < 0 ||
	    fcntl(c->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail;
	}
	c->hdr = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->hdr == MAP_FAILED) {
		c->hdr = NULL;
		err = -errno;
		goto fail;
	}
	c->data = (uint8_t *)c->hdr + UROCE_CAP_HDR_BYTES;
	c->hdr->magic = UROCE_CAP_MAGIC;
	c->hdr->version = UROCE_CAP_VERSION;
	c->hdr->size = c->size;
	c->hdr->ring_bytes = r;
	c->hdr->pid = (int32_t)getpid();
	err = uroce_ipc_cap_register(ctx->ipc, ctx->dev->ibdev.name, c->fd);
	if (err)
		goto fail;
	*out = c;
	return 0;
fail:
	uroce_cap_close(c);
	return err;
}

void uroce_cap_close(struct uroce_cap *c)
{
	if (!c)
		return;
	if (c->hdr)
		munmap(c->hdr, c->size);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(c->lock);
	free(c);
}

/* One record, under c->lock: @h (len set) and len bytes of the @iov stream from byte
 * @off.  Returns the record's offset in the ring, or -1 (missed). */
static int64_t record_locked(struct uroce_cap *c, struct uroce_cap_rec *h,
			     const struct iovec *iov, unsigned iovcnt, size_t off)
{
	struct uroce_cap_hdr *hdr = c->hdr;
	uint32_t need = uroce_cap_rec_size(h->len), r = c->ring_bytes, at, skip;
	uint64_t head, tail;
	uint8_t *p;
	size_t left = h->len;

	if (h->len > UROCE_CAP_PKT_MAX)
		return -1;
	/* head is the capture's: read once, and a value that makes no sense (more than the
	 * ring behind us, or ahead of us) counts as a full ring. */
	head = __atomic_load_n(&hdr->head, __ATOMIC_ACQUIRE);
	tail = c->tail;
	at = (uint32_t)(tail & (r - 1));
	skip = r - at < need ? r - at : 0;
	if (head > tail || tail - head > r || tail - head + skip + need > r) {
		__atomic_store_n(&hdr->missed, ++c->missed, __ATOMIC_RELAXED);
		if (c->missed_ctr)
			__atomic_fetch_add(c->missed_ctr, 1, __ATOMIC_RELAXED);
		return -1;
	}
	if (skip) {
		/* Records are 8-aligned, so at least 8 bytes remain: room for the marker. */
		uint32_t wrap = UROCE_CAP_REC_WRAP;

		memcpy(c->data + at, &wrap, sizeof(wrap));
		tail += skip;
		at = 0;
	}
	if (!h->ts_ns)
		h->ts_ns = uroce_cap_now();
	p = c->data + at;
	memcpy(p, h, sizeof(*h));
	p += sizeof(*h);
	for (unsigned i = 0; i < iovcnt && left; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > left)
			l = left;
		memcpy(p, (const uint8_t *)iov[i].iov_base + off, l);
		p += l;
		left -= l;
		off = 0;
	}
	tail += need;
	c->tail = tail;
	__atomic_store_n(&hdr->recorded, ++c->recorded, __ATOMIC_RELAXED);
	__atomic_store_n(&hdr->tail, tail, __ATOMIC_RELEASE);
	return at;
}

static void record(struct uroce_cap *c, struct uroce_cap_rec *h, const struct iovec *iov,
		   unsigned iovcnt, size_t off)
{
	pthread_mutex_lock(c->lock);
	(void)record_locked(c, h, iov, iovcnt, off);
	pthread_mutex_unlock(c->lock);
}

uint64_t uroce_cap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void uroce_cap_udp_tx_begin(struct uroce_cap *c, struct uroce_cap_tx *t, uint32_t sqpn,
			    const uint8_t sgid[16], uint16_t sport, const uint8_t dgid[16],
			    uint16_t dport, uint8_t tclass, uint8_t hop_limit,
			    const struct iovec *iov, unsigned iovcnt, unsigned cnt, size_t bytes,
			    uint16_t seg)
{
	struct uroce_cap_rec h;
	size_t off = 0;
	uint64_t t0 = uroce_cap_now();

	memset(&h, 0, sizeof(h));
	h.dir = UROCE_CAP_TX;
	h.link = UROCE_CAP_UDP;
	h.sqpn = sqpn;
	h.ts_ns = t0;
	h.state = UROCE_CAP_ST_PENDING;
	t->n = 0;
	h.flags = UROCE_CAP_F_ICRC;
	h.tclass = tclass;
	h.hop_limit = hop_limit;
	memcpy(h.sgid, sgid, 16);
	memcpy(h.dgid, dgid, 16);
	h.sport = sport;
	h.dport = dport;
	if (cnt <= 1)
		seg = (uint16_t)(bytes > UINT16_MAX ? UINT16_MAX : bytes);
	/* What the kernel does with a UDP_SEGMENT send (__udp_gso_segment): consecutive
	 * pieces of @seg bytes, the last one shorter, IPv4 IDs 0, 1, 2, ...  One lock for
	 * the whole send: its records are consecutive (but for a wrap marker), which is how
	 * uroce_cap_udp_tx_end finds them again. */
	pthread_mutex_lock(c->lock);
	for (uint16_t k = 0; off < bytes && seg; k++) {
		size_t l = bytes - off < seg ? bytes - off : seg;
		int64_t at;

		h.len = (uint32_t)l;
		h.ip_id = k;
		at = record_locked(c, &h, iov, iovcnt, off);
		if (at >= 0 && t->n++ == 0)
			t->first = (uint32_t)at;
		off += l;
	}
	pthread_mutex_unlock(c->lock);
}

void uroce_cap_udp_tx_end(struct uroce_cap *c, const struct uroce_cap_tx *t, bool sent)
{
	uint32_t at = t->first, r = c->ring_bytes;
	uint8_t st = sent ? UROCE_CAP_ST_VALID : UROCE_CAP_ST_CANCELLED;

	/* The capture reads no record past a pending one, so these are still ours to settle
	 * (walked as the consumer walks them: a wrap marker means the ring's start). */
	for (unsigned k = 0; k < t->n; k++) {
		uint32_t len;

		memcpy(&len, c->data + at, sizeof(len));
		if (len == UROCE_CAP_REC_WRAP) {
			at = 0;
			memcpy(&len, c->data + at, sizeof(len));
		}
		__atomic_store_n(c->data + at + offsetof(struct uroce_cap_rec, state), st,
				 __ATOMIC_RELEASE);
		at = (at + uroce_cap_rec_size(len)) & (r - 1);
	}
}

void uroce_cap_udp_rx(struct uroce_cap *c, const uint8_t sgid[16], uint16_t sport,
		      const uint8_t dgid[16], uint8_t tclass, uint8_t hop_limit,
		      uint32_t flow_label, uint16_t ip_id, const uint8_t *pkt, size_t len)
{
	struct uroce_cap_rec h;
	struct iovec v = { (void *)pkt, len };

	memset(&h, 0, sizeof(h));
	h.dir = UROCE_CAP_RX;
	h.link = UROCE_CAP_UDP;
	h.sqpn = UROCE_CAP_NO_QPN;
	h.flags = UROCE_CAP_F_ICRC;
	h.tclass = tclass;
	h.hop_limit = hop_limit;
	h.flow_label = flow_label;
	memcpy(h.sgid, sgid, 16);
	memcpy(h.dgid, dgid, 16);
	h.sport = sport;
	h.dport = ROCE_PORT;
	h.ip_id = ip_id;
	h.len = (uint32_t)len;
	record(c, &h, &v, 1, 0);
}

void uroce_cap_shm(struct uroce_cap *c, bool rx, uint32_t sqpn, const struct uroce_shm_rec *rec,
		   const struct iovec *iov, unsigned iovcnt)
{
	struct uroce_cap_rec h;

	memset(&h, 0, sizeof(h));
	h.dir = rx ? UROCE_CAP_RX : UROCE_CAP_TX;
	h.link = UROCE_CAP_SHM;
	h.sqpn = rx ? UROCE_CAP_NO_QPN : sqpn;
	h.flags = (rec->flags & UROCE_SHM_REC_ICRC) ? UROCE_CAP_F_ICRC : 0;
	h.tclass = rec->tclass;
	h.hop_limit = rec->hop_limit;
	h.flow_label = rec->flow_label;
	memcpy(h.sgid, rec->sgid, 16);
	memcpy(h.dgid, rec->dgid, 16);
	h.sport = rec->sport;
	h.dport = ROCE_PORT;
	h.len = rec->len;
	record(c, &h, iov, iovcnt, 0);
}
