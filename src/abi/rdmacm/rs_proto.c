/*
 * rs_proto.c — encoders and decoders of the rsocket wire formats (rs_proto.h).
 * Every field is written byte by byte in the order the format names, so the result
 * does not depend on this host's byte order or on struct layout.
 */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>

#include "rs_proto.h"

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_sge_be(uint8_t *p, const struct rs_sge_h *s)
{
	put_be(p, s->addr, 8);
	put_be(p + 8, s->key, 4);
	put_be(p + 12, s->length, 4);
}

static void get_sge_be(const uint8_t *p, struct rs_sge_h *s)
{
	s->addr = get_be(p, 8);
	s->key = (uint32_t)get_be(p + 8, 4);
	s->length = (uint32_t)get_be(p + 12, 4);
}

void rs_conn_put(uint8_t out[RS_CONN_DATA_LEN], const struct rs_conn_h *c)
{
	out[0] = c->version;
	out[1] = c->flags;
	put_be(out + 2, c->credits, 2);
	out[4] = out[5] = out[6] = 0;
	out[7] = c->iomap_scale;
	put_sge_be(out + 8, &c->target_sgl);
	put_sge_be(out + 24, &c->data_buf);
}

void rs_conn_get(const uint8_t in[RS_CONN_DATA_LEN], struct rs_conn_h *c)
{
	c->version = in[0];
	c->flags = in[1];
	c->credits = (uint16_t)get_be(in + 2, 2);
	c->iomap_scale = in[7];
	get_sge_be(in + 8, &c->target_sgl);
	get_sge_be(in + 24, &c->data_buf);
}

int rs_conn_check(const uint8_t *in, size_t len, struct rs_conn_h *c)
{
	if (!in || len < RS_CONN_DATA_LEN)
		return -EPROTO;
	rs_conn_get(in, c);
	if (c->version != RS_PROTO_VERSION)
		return -ENOTSUP;
	/* Our first credit update writes entry 1 (entry 0 is data_buf); the iomap follows
	 * the entries in the same region, so a bound keeps its address computable. */
	if (c->target_sgl.length < RS_SGL_SIZE || c->target_sgl.length > 0xFFFF)
		return -EPROTO;
	return 0;
}

uint8_t rs_value_to_scale(uint32_t value)
{
	if (value <= 0x80)
		return (uint8_t)value;
	if (value > 0x7F00)
		value = 0x7F00;   /* the largest value the code can say */
	return (uint8_t)(0x80 | (value >> 8));
}

uint32_t rs_scale_to_value(uint8_t scale)
{
	if (scale <= 0x80)
		return scale;
	return (uint32_t)(scale & 0x7F) << 8;
}

void rs_sge_put(uint8_t out[RS_SGE_LEN], const struct rs_sge_h *s, bool be)
{
	if (be) {
		put_sge_be(out, s);
		return;
	}
	put_le(out, s->addr, 8);
	put_le(out + 8, s->key, 4);
	put_le(out + 12, s->length, 4);
}

void rs_sge_get(const uint8_t in[RS_SGE_LEN], struct rs_sge_h *s, bool be)
{
	if (be) {
		get_sge_be(in, s);
		return;
	}
	s->addr = get_le(in, 8);
	s->key = (uint32_t)get_le(in + 8, 4);
	s->length = (uint32_t)get_le(in + 12, 4);
}

void rs_iomap_put(uint8_t out[RS_IOMAP_LEN], uint64_t offset, const struct rs_sge_h *s, bool be)
{
	if (be)
		put_be(out, offset, 8);
	else
		put_le(out, offset, 8);
	rs_sge_put(out + 8, s, be);
}

void rs_iomap_get(const uint8_t in[RS_IOMAP_LEN], uint64_t *offset, struct rs_sge_h *s, bool be)
{
	*offset = be ? get_be(in, 8) : get_le(in, 8);
	rs_sge_get(in + 8, s, be);
}

/* ---- datagrams ---- */

size_t ds_hdr_put(uint8_t *out, const struct sockaddr *src)
{
	if (src->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)src;

		out[0] = 4;
		out[1] = DS_IPV4_HDR_LEN;
		memcpy(out + 2, &sin->sin_port, 2);           /* network order, as is */
		memcpy(out + 4, &sin->sin_addr.s_addr, 4);
		return DS_IPV4_HDR_LEN;
	}
	if (src->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)src;

		out[0] = 6;
		out[1] = DS_IPV6_HDR_LEN;
		memcpy(out + 2, &sin6->sin6_port, 2);
		memcpy(out + 4, &sin6->sin6_flowinfo, 4);     /* network order, as is */
		memcpy(out + 8, &sin6->sin6_addr, 16);
		return DS_IPV6_HDR_LEN;
	}
	return 0;
}

size_t ds_hdr_get(const uint8_t *in, size_t len, struct sockaddr_storage *sa, socklen_t *salen)
{
	memset(sa, 0, sizeof(*sa));
	if (len >= DS_IPV4_HDR_LEN && in[0] == 4 && in[1] == DS_IPV4_HDR_LEN) {
		struct sockaddr_in *sin = (struct sockaddr_in *)sa;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_port, in + 2, 2);
		memcpy(&sin->sin_addr.s_addr, in + 4, 4);
		*salen = sizeof(*sin);
		return DS_IPV4_HDR_LEN;
	}
	if (len >= DS_IPV6_HDR_LEN && in[0] == 6 && in[1] == DS_IPV6_HDR_LEN) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_port, in + 2, 2);
		memcpy(&sin6->sin6_flowinfo, in + 4, 4);
		memcpy(&sin6->sin6_addr, in + 8, 16);
		*salen = sizeof(*sin6);
		return DS_IPV6_HDR_LEN;
	}
	return 0;
}

size_t ds_udp_put(uint8_t *out, uint8_t op, uint32_t qpn, const uint8_t *ds_hdr)
{
	bool v6 = ds_hdr[0] == 6;
	size_t len = v6 ? DS_UDP_IPV6_HDR_LEN : DS_UDP_IPV4_HDR_LEN;

	put_be(out, DS_UDP_TAG, 4);
	out[4] = v6 ? 6 : 4;
	out[5] = op;
	out[6] = (uint8_t)len;
	out[7] = 0;
	put_be(out + 8, qpn & 0xFFFFFF, 4);
	/* The address field starts at the ds_header's address union, 4 or 16 bytes. */
	memcpy(out + 12, ds_hdr + 4, v6 ? 16 : 4);
	return len;
}

size_t ds_udp_get(const uint8_t *in, size_t len, int family, struct ds_udp_h *h)
{
	if (len < DS_UDP_IPV4_HDR_LEN || get_be(in, 4) != DS_UDP_TAG)
		return 0;
	h->version = in[4];
	h->op = in[5];
	h->length = in[6];
	h->qpn = (uint32_t)get_be(in + 8, 4) & 0xFFFFFF;
	if (h->version == 4 && family == AF_INET && h->length == DS_UDP_IPV4_HDR_LEN)
		return DS_UDP_IPV4_HDR_LEN;
	if (h->version == 6 && family == AF_INET6 && h->length == DS_UDP_IPV6_HDR_LEN &&
	    len >= DS_UDP_IPV6_HDR_LEN)
		return DS_UDP_IPV6_HDR_LEN;
	return 0;
}
