/* cm_util.c — the connection manager's small tools: hash tables, the timer heap,
 * addresses and GIDs, and the two IBA formulas the timers and paths use. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_priv.h"

/* ---- hash tables ------------------------------------------------------------------- */

uint64_t cm_hash64(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));

	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 29);
}

int cm_htab_init(struct cm_htab *t)
{
	t->nb = 64;
	t->n = 0;
	t->b = calloc(t->nb, sizeof(*t->b));
	return t->b ? 0 : -ENOMEM;
}

void cm_htab_free(struct cm_htab *t)
{
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

static size_t slot(const struct cm_htab *t, uint64_t key)
{
	return (size_t)(cm_hash64(key, 0) & (t->nb - 1));
}

static void grow(struct cm_htab *t)
{
	size_t nb = t->nb * 2;
	struct cm_hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;  /* keep the old size: longer chains, still correct */
	for (size_t i = 0; i < t->nb; i++) {
		for (struct cm_hnode *n = t->b[i], *next; n; n = next) {
			size_t s = (size_t)(cm_hash64(n->key, 0) & (nb - 1));

			next = n->next;
			n->next = b[s];
			b[s] = n;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

void cm_htab_add(struct cm_htab *t, struct cm_hnode *n, uint64_t key)
{
	size_t s;

	if (n->linked)
		cm_htab_del(t, n);
	if (t->n >= t->nb * 2)
		grow(t);
	s = slot(t, key);
	n->key = key;
	n->next = t->b[s];
	n->linked = true;
	t->b[s] = n;
	t->n++;
}

void cm_htab_del(struct cm_htab *t, struct cm_hnode *n)
{
	struct cm_hnode **p;

	if (!n->linked)
		return;
	for (p = &t->b[slot(t, n->key)]; *p; p = &(*p)->next) {
		if (*p == n) {
			*p = n->next;
			n->next = NULL;
			n->linked = false;
			t->n--;
			return;
		}
	}
}

struct cm_hnode *cm_htab_first(const struct cm_htab *t, uint64_t key)
{
	for (struct cm_hnode *n = t->b[slot(t, key)]; n; n = n->next)
		if (n->key == key)
			return n;
	return NULL;
}

struct cm_hnode *cm_htab_next(const struct cm_hnode *n, uint64_t key)
{
	for (n = n->next; n; n = n->next)
		if (n->key == key)
			return (struct cm_hnode *)n;
	return NULL;
}

/* ---- timers ------------------------------------------------------------------------ */

void cm_timer_init(struct cm_timer *t, uint8_t kind, void *owner)
{
	t->when = 0;
	t->idx = -1;
	t->kind = kind;
	t->owner = owner;
}

static void heap_set(struct cm_heap *h, size_t i, struct cm_timer *t)
{
	h->v[i] = t;
	t->idx = (int)i;
}

static void sift_up(struct cm_heap *h, size_t i)
{
	struct cm_timer *t = h->v[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (h->v[p]->when <= t->when)
			break;
		heap_set(h, i, h->v[p]);
		i = p;
	}
	heap_set(h, i, t);
}

static void sift_down(struct cm_heap *h, size_t i)
{
	struct cm_timer *t = h->v[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1]->when < h->v[c]->when)
			c++;
		if (t->when <= h->v[c]->when)
			break;
		heap_set(h, i, h->v[c]);
		i = c;
	}
	heap_set(h, i, t);
}

int cm_timer_arm(struct cm_heap *h, struct cm_timer *t, uint64_t when)
{
	if (cm_timer_armed(t))
		cm_timer_cancel(h, t);
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct cm_timer **v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	t->when = when;
	heap_set(h, h->n++, t);
	sift_up(h, h->n - 1);
	return 0;
}

void cm_timer_cancel(struct cm_heap *h, struct cm_timer *t)
{
	size_t i;

	if (!cm_timer_armed(t))
		return;
	i = (size_t)t->idx;
	t->idx = -1;
	if (--h->n == i)
		return;
	struct cm_timer *m = h->v[h->n];

	heap_set(h, i, m);
	sift_down(h, i);
	sift_up(h, (size_t)m->idx);
}

struct cm_timer *cm_timer_pop_due(struct cm_heap *h, uint64_t now)
{
	struct cm_timer *t;

	if (!h->n || h->v[0]->when > now)
		return NULL;
	t = h->v[0];
	cm_timer_cancel(h, t);
	return t;
}

/* ---- addresses --------------------------------------------------------------------- */

static const uint8_t v4mapped_prefix[12] = { [10] = 0xff, [11] = 0xff };

bool cm_gid_v4mapped(const uint8_t gid[16])
{
	return !memcmp(gid, v4mapped_prefix, 12);
}

bool cm_gid_linklocal(const uint8_t gid[16])
{
	return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

bool cm_sa_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == 0;
	if (sa->sa_family == AF_INET6) {
		static const uint8_t zero[16];

		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, zero, 16);
	}
	return false;
}

bool cm_sa_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		static const uint8_t one[16] = { [15] = 1 };

		return !memcmp(a, one, 16) || (cm_gid_v4mapped(a) && a[12] == 127);
	}
	return false;
}

uint16_t cm_sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

bool cm_sa_zero_port(const struct sockaddr *sa)
{
	return cm_sa_port(sa) == 0;
}

void cm_sa_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

size_t cm_sa_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET: return sizeof(struct sockaddr_in);
	case AF_INET6: return sizeof(struct sockaddr_in6);
	default: return 0;
	}
}

bool cm_sa_addr_eq(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		/* As the kernel's cma_addr_cmp: a link-local address differs by scope. */
		if (cm_gid_linklocal(x->sin6_addr.s6_addr) && x->sin6_scope_id && y->sin6_scope_id &&
		    x->sin6_scope_id != y->sin6_scope_id)
			return false;
		return !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
	}
	return false;
}

void cm_sa_to_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(gid, v4mapped_prefix, 12);
		memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

void cm_gid_to_sa(const uint8_t gid[16], uint32_t scope, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (cm_gid_v4mapped(gid)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, gid, 16);
		if (cm_gid_linklocal(gid))
			s6->sin6_scope_id = scope;
	}
}

/* ---- IBA formulas ------------------------------------------------------------------- */

uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time)
{
	/* IBA 12.7.34: local ACK timeout = 2 * packet life time + local CA ACK delay, in
	 * the 4.096 us * 2^x scale, i.e. roughly max(2 * plt, delay) with one step of
	 * rounding up when the two are close. */
	int t = packet_life_time + 1;

	if (t >= ca_ack_delay)
		t += (ca_ack_delay >= t - 1);
	else
		t = ca_ack_delay + (t >= ca_ack_delay - 1);
	return (uint8_t)(t < 31 ? t : 31);
}

uint8_t cm_iboe_mtu(uint32_t netdev_mtu)
{
	long m = (long)netdev_mtu - (40 + 8 + 12 + 4 + 28 + 4);

	for (uint8_t code = 5; code >= 1; code--)
		if (m >= (long)uroce_ib_mtu_bytes(code))
			return code;
	return 0;
}

void cm_note(const struct uroce_cm *cm, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!cm->ops.note)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	cm->ops.note(cm->ctx, line);
}
