/* qpn.c — QPN allocation for one device (see struct qpn_pool in uroced.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/uroced.h"

#define QPN_FIRST 2u  /* 0 = QP0 (SMI), 1 = QP1 (GSI): IBA 3.5.3; RoCE has no QP0 but keeps it reserved */

static int bit(const uint64_t *bits, uint32_t n)
{
	return (bits[n / 64] >> (n % 64)) & 1;
}

int uroce_qpn_pool_init(struct qpn_pool *p, uint32_t start)
{
	memset(p, 0, sizeof(*p));
	/* calloc of 2 MiB is an mmap of zero pages: only touched pages cost memory. */
	p->bits = calloc(UROCE_QPN_COUNT / 64, sizeof(uint64_t));
	if (!p->bits)
		return -ENOMEM;
	p->bits[0] |= 3;  /* QPN 0 and 1 never free */
	start &= UROCE_QPN_COUNT - 1;
	p->cursor = start < QPN_FIRST ? QPN_FIRST : start;
	return 0;
}

void uroce_qpn_pool_uninit(struct qpn_pool *p)
{
	free(p->bits);
	p->bits = NULL;
}

int uroce_qpn_test(const struct qpn_pool *p, uint32_t qpn)
{
	return qpn < UROCE_QPN_COUNT && bit(p->bits, qpn);
}

int uroce_qpn_alloc(struct qpn_pool *p, uint32_t *qpn)
{
	uint32_t n = p->cursor;

	if (p->used >= UROCE_QPN_COUNT - QPN_FIRST)
		return -ENOSPC;
	/* Scan from the cursor, a word at a time when the word is full.  The pool is
	 * not full, so this ends; its cost is bounded by the 2^18 words. */
	for (;;) {
		uint64_t w;

		if (n >= UROCE_QPN_COUNT)
			n = QPN_FIRST;
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
	p->cursor = n + 1 >= UROCE_QPN_COUNT ? QPN_FIRST : n + 1;
	*qpn = n;
	return 0;
}

int uroce_qpn_free(struct qpn_pool *p, uint32_t qpn)
{
	if (qpn < QPN_FIRST || qpn >= UROCE_QPN_COUNT)
		return -EINVAL;
	if (!bit(p->bits, qpn))
		return -ENOENT;
	p->bits[qpn / 64] &= ~(1ull << (qpn % 64));
	p->used--;
	return 0;
}
