/* qpn.c — QPN allocation for one device (see struct qpn_pool in uroced.h).  The same
 * pool, with another size, hands out the QPN blocks that receive steering maps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/uroced.h"

#define QPN_FIRST 2u  /* 0 = QP0 (SMI), 1 = QP1 (GSI); RoCE has no QP0 but keeps it reserved */

static int bit(const uint64_t *bits, uint32_t n)
{
	return (bits[n / 64] >> (n % 64)) & 1;
}

int uroce_id_pool_init(struct qpn_pool *p, uint32_t size, uint32_t first, uint32_t start)
{
	if (!size || size % 64 || (size & (size - 1)) || first >= size)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	/* calloc of 2 MiB is an mmap of zero pages: only touched pages cost memory. */
	p->bits = calloc(size / 64, sizeof(uint64_t));
	if (!p->bits)
		return -ENOMEM;
	p->size = size;
	p->first = first;
	for (uint32_t i = 0; i < first; i++)
		p->bits[i / 64] |= 1ull << (i % 64);  /* reserved, never free */
	start &= size - 1;
	p->cursor = start < first ? first : start;
	return 0;
}

int uroce_qpn_pool_init(struct qpn_pool *p, uint32_t start)
{
	return uroce_id_pool_init(p, UROCE_QPN_COUNT, QPN_FIRST, start);
}

void uroce_qpn_pool_uninit(struct qpn_pool *p)
{
	free(p->bits);
	p->bits = NULL;
}

int uroce_qpn_test(const struct qpn_pool *p, uint32_t qpn)
{
	return qpn < p->size && bit(p->bits, qpn);
}

int uroce_qpn_alloc(struct qpn_pool *p, uint32_t *qpn)
{
	uint32_t n = p->cursor;

	if (p->used >= p->size - p->first)
		return -ENOSPC;
	/* Scan from the cursor, a word at a time when the word is full.  The pool is
	 * not full, so this ends; its cost is bounded by size / 64 words. */
	for (;;) {
		uint64_t w;

		if (n >= p->size)
			n = p->first;
		w = p->bits[n / 64];
		if (w == ~0ull) {
			n = (n | 63) + 1;
			continue;
		}
		if (!bit(p->bits, n))
			break;
		n++;
	}
	p->bits[n / 64] |= 1ull << (n % 64);
	p->used++;
	p->cursor = n + 1 >= p->size ? p->first : n + 1;
	*qpn = n;
	return 0;
}

int uroce_qpn_free(struct qpn_pool *p, uint32_t qpn)
{
	if (qpn < p->first || qpn >= p->size)
		return -EINVAL;
	if (!bit(p->bits, qpn))
		return -ENOENT;
	p->bits[qpn / 64] &= ~(1ull << (qpn % 64));
	p->used--;
	return 0;
}
