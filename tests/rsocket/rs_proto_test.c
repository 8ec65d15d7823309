/*
 * The rsocket wire encoding (src/abi/rdmacm/rs_proto.c) pinned with byte vectors
 * written from the protocol description (rdma-core's librdmacm/docs/rsocket and the
 * structures of rsocket.c v44 as /work/shared/notes/rdma-cm.md §5 lays them out), not
 * captured from a running rdma-core:
 *
 *   connection data   40 bytes, every field big-endian: version, flags, credits,
 *                     3 reserved, iomap size code, target SGL {addr, key, length},
 *                     data buffer {addr, key, length}
 *   immediate         op in bits 31-29, data in bits 28-0; on the wire big-endian
 *   rs_sge / rs_iomap in the byte order of the host that reads them
 *   iomap size code   8-bit: <= 128 as is, else 0x80 | value >> 8
 *   datagram headers  ds_header, ds_udp_header
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rs_proto.h"

static void test_conn_data_bytes(void **state)
{
	(void)state;
	/* A little-endian host that offers 384 credits, 2 target SGEs at
	 * 0x00007f0011223340 (rkey 0x1234), a 64 KiB half receive buffer at
	 * 0x00007f00aabbcc00 (rkey 0xabcd), no iomap. */
	const struct rs_conn_h c = {
		.version = 1,
		.flags = RS_CONN_FLAG_IOMAP,
		.credits = 384,
		.iomap_scale = 0,
		.target_sgl = { 0x00007f0011223340ull, 0x1234, 2 },
		.data_buf = { 0x00007f00aabbcc00ull, 0xabcd, 0x10000 },
	};
	static const uint8_t want[RS_CONN_DATA_LEN] = {
		0x01, 0x02, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x7f, 0x00, 0x11, 0x22, 0x33, 0x40,
		0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x02,
		0x00, 0x00, 0x7f, 0x00, 0xaa, 0xbb, 0xcc, 0x00,
		0x00, 0x00, 0xab, 0xcd, 0x00, 0x01, 0x00, 0x00,
	};
	uint8_t out[RS_CONN_DATA_LEN];
	struct rs_conn_h back;

	memset(out, 0xee, sizeof(out));
	rs_conn_put(out, &c);
	assert_memory_equal(out, want, sizeof(want));
	assert_int_equal(rs_conn_check(want, sizeof(want), &back), 0);
	assert_int_equal(back.version, 1);
	assert_int_equal(back.flags, RS_CONN_FLAG_IOMAP);
	assert_int_equal(back.credits, 384);
	assert_int_equal(back.iomap_scale, 0);
	assert_true(back.target_sgl.addr == 0x00007f0011223340ull);
	assert_int_equal(back.target_sgl.key, 0x1234);
	assert_int_equal(back.target_sgl.length, 2);
	assert_true(back.data_buf.addr == 0x00007f00aabbcc00ull);
	assert_int_equal(back.data_buf.key, 0xabcd);
	assert_int_equal(back.data_buf.length, 0x10000);
}

/* A big-endian peer (flags 0x03) with an iomap of 512 entries (code 0x82). */
static void test_conn_data_be_peer_iomap(void **state)
{
	(void)state;
	uint8_t in[RS_CONN_DATA_LEN] = {
		0x01, 0x03, 0x00, 0x10, 0x00, 0x00, 0x00, 0x82,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x02,
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		0x0a, 0x0b, 0x0c, 0x0d, 0x00, 0x00, 0x08, 0x00,
	};
	struct rs_conn_h c;

	assert_int_equal(rs_conn_check(in, sizeof(in), &c), 0);
	assert_true(c.flags & RS_CONN_FLAG_NET);
	assert_int_equal(c.credits, 16);
	assert_int_equal(rs_scale_to_value(c.iomap_scale), 512);
	assert_true(c.target_sgl.addr == 0x1122334455667788ull);
	assert_int_equal(c.target_sgl.key, 0x01020304);
	assert_true(c.data_buf.addr == 0x8877665544332211ull);
	assert_int_equal(c.data_buf.key, 0x0a0b0c0d);
	assert_int_equal(c.data_buf.length, 2048);
}

/* What a receiver refuses: short, another version, a target SGL too small. */
static void test_conn_data_refused(void **state)
{
	(void)state;
	uint8_t in[RS_CONN_DATA_LEN] = { 0x01, 0x02, 0x00, 0x10 };
	struct rs_conn_h c;

	in[23] = 2;                                   /* target_sgl.length = 2 */
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), 0);
	assert_int_equal(rs_conn_check(in, sizeof(in) - 1, &c), -EPROTO);
	assert_int_equal(rs_conn_check(NULL, 0, &c), -EPROTO);
	in[0] = 2;
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), -ENOTSUP);
	in[0] = 0;
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), -ENOTSUP);
	in[0] = 1;
	in[23] = 1;                                   /* one entry: no room for credits */
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), -EPROTO);
	in[23] = 0;
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), -EPROTO);
	in[21] = 1;                                   /* 0x00010002 entries */
	in[23] = 2;
	assert_int_equal(rs_conn_check(in, sizeof(in), &c), -EPROTO);
	/* longer private data (a REP padded by the CM) is fine: the first 40 bytes count */
	{
		uint8_t longer[56] = { 0 };

		memcpy(longer, in, sizeof(in));
		longer[21] = 0;
		assert_int_equal(rs_conn_check(longer, sizeof(longer), &c), 0);
	}
}

/* The immediate: op << 29 | data, sent big-endian. */
static void test_msg_encoding(void **state)
{
	(void)state;
	static const struct {
		unsigned op;
		uint32_t data;
		uint32_t msg;
		uint8_t wire[4];
	} v[] = {
		{ RS_OP_DATA, 1, 0x00000001, { 0x00, 0x00, 0x00, 0x01 } },
		{ RS_OP_DATA, 65536, 0x00010000, { 0x00, 0x01, 0x00, 0x00 } },
		{ RS_OP_DATA, 0x1FFFFFFF, 0x1FFFFFFF, { 0x1f, 0xff, 0xff, 0xff } },
		{ RS_OP_SGL, 384, 0x80000180, { 0x80, 0x00, 0x01, 0x80 } },   /* credit limit */
		{ RS_OP_SGL, 0xFFFF + 384, 0x8001017F, { 0x80, 0x01, 0x01, 0x7f } },
		{ RS_OP_IOMAP_SGL, 3, 0xC0000003, { 0xc0, 0x00, 0x00, 0x03 } },
		{ RS_OP_CTRL, RS_CTRL_DISCONNECT, 0xE0000000, { 0xe0, 0x00, 0x00, 0x00 } },
		{ RS_OP_CTRL, RS_CTRL_KEEPALIVE, 0xE0000001, { 0xe0, 0x00, 0x00, 0x01 } },
		{ RS_OP_CTRL, RS_CTRL_SHUTDOWN, 0xE0000002, { 0xe0, 0x00, 0x00, 0x02 } },
		{ RS_OP_WRITE, 4096, 0x40001000, { 0x40, 0x00, 0x10, 0x00 } },
	};

	assert_int_equal(RS_OP_DATA, 0);
	assert_int_equal(RS_OP_RSVD_DATA_MORE, 1);
	assert_int_equal(RS_OP_WRITE, 2);
	assert_int_equal(RS_OP_RSVD_DRA_MORE, 3);
	assert_int_equal(RS_OP_SGL, 4);
	assert_int_equal(RS_OP_RSVD, 5);
	assert_int_equal(RS_OP_IOMAP_SGL, 6);
	assert_int_equal(RS_OP_CTRL, 7);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint32_t m = rs_msg(v[i].op, v[i].data), be = htobe32(m), back;

		assert_int_equal(m, v[i].msg);
		assert_memory_equal(&be, v[i].wire, 4);
		memcpy(&back, v[i].wire, 4);
		back = be32toh(back);
		assert_int_equal(rs_msg_op(back), v[i].op);
		assert_int_equal(rs_msg_data(back), v[i].data & RS_MSG_DATA_MASK);
	}
	/* data wider than 29 bits cannot change the op */
	assert_int_equal(rs_msg(RS_OP_DATA, 0xFFFFFFFF), 0x1FFFFFFF);
	assert_int_equal(rs_msg_op(rs_msg(RS_OP_SGL, 0xE0000000)), RS_OP_SGL);
}

/* A credit update's rs_sge and an iomap entry, in each reader order. */
static void test_sge_iomap(void **state)
{
	(void)state;
	const struct rs_sge_h s = { 0x00007f00aabb0000ull, 0x00c0ffee, 0x8000 };
	static const uint8_t le[RS_SGE_LEN] = {
		0x00, 0x00, 0xbb, 0xaa, 0x00, 0x7f, 0x00, 0x00,
		0xee, 0xff, 0xc0, 0x00, 0x00, 0x80, 0x00, 0x00,
	};
	static const uint8_t be[RS_SGE_LEN] = {
		0x00, 0x00, 0x7f, 0x00, 0xaa, 0xbb, 0x00, 0x00,
		0x00, 0xc0, 0xff, 0xee, 0x00, 0x00, 0x80, 0x00,
	};
	static const uint8_t iom_le[RS_IOMAP_LEN] = {
		0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0xbb, 0xaa, 0x00, 0x7f, 0x00, 0x00,
		0xee, 0xff, 0xc0, 0x00, 0x00, 0x80, 0x00, 0x00,
	};
	static const uint8_t iom_be[RS_IOMAP_LEN] = {
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
		0x00, 0x00, 0x7f, 0x00, 0xaa, 0xbb, 0x00, 0x00,
		0x00, 0xc0, 0xff, 0xee, 0x00, 0x00, 0x80, 0x00,
	};
	uint8_t out[RS_IOMAP_LEN];
	struct rs_sge_h b;
	uint64_t off;

	rs_sge_put(out, &s, false);
	assert_memory_equal(out, le, RS_SGE_LEN);
	rs_sge_put(out, &s, true);
	assert_memory_equal(out, be, RS_SGE_LEN);
	rs_sge_get(le, &b, false);
	assert_memory_equal(&b, &s, sizeof(b));
	rs_sge_get(be, &b, true);
	assert_memory_equal(&b, &s, sizeof(b));
	rs_iomap_put(out, 0x1000, &s, false);
	assert_memory_equal(out, iom_le, RS_IOMAP_LEN);
	rs_iomap_put(out, 0x1000, &s, true);
	assert_memory_equal(out, iom_be, RS_IOMAP_LEN);
	rs_iomap_get(iom_be, &off, &b, true);
	assert_true(off == 0x1000);
	assert_memory_equal(&b, &s, sizeof(b));
	rs_iomap_get(iom_le, &off, &b, false);
	assert_true(off == 0x1000);
	assert_int_equal(b.key, 0x00c0ffee);
	assert_false(rs_host_is_be());     /* x86-64: a peer sees flags without NET */
}

static void test_iomap_scale(void **state)
{
	(void)state;
	static const struct { uint32_t value; uint8_t code; uint32_t back; } v[] = {
		{ 0, 0x00, 0 }, { 1, 0x01, 1 }, { 127, 0x7f, 127 }, { 128, 0x80, 128 },
		{ 256, 0x81, 256 }, { 512, 0x82, 512 }, { 300, 0x81, 256 },   /* rounds down */
		{ 0x7F00, 0xff, 0x7F00 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_int_equal(rs_value_to_scale(v[i].value), v[i].code);
		assert_int_equal(rs_scale_to_value(v[i].code), v[i].back);
	}
	/* uroce clamps what the code cannot say instead of wrapping to 0x80 (= 128) */
	assert_int_equal(rs_value_to_scale(0x10000), 0xff);
}

static void test_ds_headers(void **state)
{
	(void)state;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(7471),
				     .sin6_flowinfo = htonl(0x12345) };
	static const uint8_t h4[DS_IPV4_HDR_LEN] = { 4, 8, 0x1d, 0x2f, 192, 0, 2, 1 };
	static const uint8_t u4[DS_UDP_IPV4_HDR_LEN] = {
		0x55, 0x55, 0x55, 0x55, 4, RS_OP_CTRL, 16, 0,
		0x00, 0x00, 0x12, 0x34, 192, 0, 2, 1,
	};
	uint8_t out[64];
	struct sockaddr_storage ss;
	socklen_t sl;
	struct ds_udp_h uh;

	inet_pton(AF_INET, "192.0.2.1", &sin.sin_addr);
	inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr);
	assert_int_equal(ds_hdr_put(out, (struct sockaddr *)&sin), DS_IPV4_HDR_LEN);
	assert_memory_equal(out, h4, sizeof(h4));
	assert_int_equal(ds_hdr_get(h4, sizeof(h4), &ss, &sl), DS_IPV4_HDR_LEN);
	assert_int_equal(sl, sizeof(sin));
	assert_memory_equal(&ss, &sin, sizeof(sin));
	assert_int_equal(ds_hdr_get(h4, sizeof(h4) - 1, &ss, &sl), 0);

	assert_int_equal(ds_hdr_put(out, (struct sockaddr *)&sin6), DS_IPV6_HDR_LEN);
	assert_int_equal(out[0], 6);
	assert_int_equal(out[1], 24);
	assert_int_equal(out[2], 0x1d);
	assert_int_equal(out[3], 0x2f);
	assert_int_equal(out[6], 0x23);               /* flow info, network order */
	assert_int_equal(out[7], 0x45);
	assert_int_equal(out[8], 0x20);               /* 2001:db8:: */
	assert_int_equal(out[23], 0x01);
	assert_int_equal(ds_hdr_get(out, DS_IPV6_HDR_LEN, &ss, &sl), DS_IPV6_HDR_LEN);
	assert_memory_equal(&ss, &sin6, sizeof(sin6));

	assert_int_equal(ds_udp_put(out, RS_OP_CTRL, 0xAB001234, h4), DS_UDP_IPV4_HDR_LEN);
	assert_memory_equal(out, u4, sizeof(u4));
	assert_int_equal(ds_udp_get(u4, sizeof(u4), AF_INET, &uh), DS_UDP_IPV4_HDR_LEN);
	assert_int_equal(uh.qpn, 0x1234);
	assert_int_equal(uh.op, RS_OP_CTRL);
	assert_int_equal(ds_udp_get(u4, sizeof(u4), AF_INET6, &uh), 0);   /* family */
	assert_int_equal(ds_udp_get(u4, sizeof(u4) - 1, AF_INET, &uh), 0);
	memcpy(out, u4, sizeof(u4));
	out[0] = 0x54;                                /* tag */
	assert_int_equal(ds_udp_get(out, sizeof(u4), AF_INET, &uh), 0);
	out[0] = 0x55;
	out[6] = 28;                                  /* length of another family */
	assert_int_equal(ds_udp_get(out, sizeof(u4), AF_INET, &uh), 0);
}

/* The IPv6 ds_udp_header (28 bytes) and the inputs a receiver must refuse. */
static void test_ds_bad_and_v6(void **state)
{
	(void)state;
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(7174),
				     .sin6_flowinfo = htonl(0x12345) };
	/* rsocket.c copies 16 bytes from the ds_header's IPv6 part: the flow info, then the
	 * first 12 address bytes (2001:db8:0:0:0:0 ...) */
	static const uint8_t u6[DS_UDP_IPV6_HDR_LEN] = {
		0x55, 0x55, 0x55, 0x55, 6, RS_OP_DATA, 28, 0,
		0x00, 0xC0, 0xFF, 0xEE,
		0x00, 0x01, 0x23, 0x45,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	uint8_t h[DS_HDR_MAX], out[64];
	struct sockaddr_storage ss;
	socklen_t sl;
	struct ds_udp_h uh;

	inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr);
	assert_int_equal(ds_hdr_put(h, (struct sockaddr *)&sin6), DS_IPV6_HDR_LEN);
	assert_int_equal(ds_udp_put(out, RS_OP_DATA, 0xC0FFEE, h), DS_UDP_IPV6_HDR_LEN);
	assert_memory_equal(out, u6, sizeof(u6));
	assert_int_equal(ds_udp_get(u6, sizeof(u6), AF_INET6, &uh), DS_UDP_IPV6_HDR_LEN);
	assert_int_equal(uh.qpn, 0xC0FFEE);
	assert_int_equal(uh.op, RS_OP_DATA);
	assert_int_equal(ds_udp_get(u6, sizeof(u6) - 1, AF_INET6, &uh), 0);   /* short */
	assert_int_equal(ds_udp_get(u6, sizeof(u6), AF_INET, &uh), 0);        /* family */

	/* ds_header: a version other than 4/6, a length of the other family, short input */
	static const uint8_t bad_ver[DS_IPV4_HDR_LEN] = { 5, 8, 0x1c, 0x06, 127, 0, 0, 1 };
	static const uint8_t v4_len24[DS_IPV6_HDR_LEN] = { 4, 24 };
	static const uint8_t v6_len8[DS_IPV6_HDR_LEN] = { 6, 8 };

	assert_int_equal(ds_hdr_get(bad_ver, sizeof(bad_ver), &ss, &sl), 0);
	assert_int_equal(ds_hdr_get(v4_len24, sizeof(v4_len24), &ss, &sl), 0);
	assert_int_equal(ds_hdr_get(v6_len8, sizeof(v6_len8), &ss, &sl), 0);
	assert_int_equal(ds_hdr_get(h, DS_IPV6_HDR_LEN - 1, &ss, &sl), 0);
	assert_int_equal(ds_hdr_get(h, 0, &ss, &sl), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_data_bytes),
		cmocka_unit_test(test_conn_data_be_peer_iomap),
		cmocka_unit_test(test_conn_data_refused),
		cmocka_unit_test(test_msg_encoding),
		cmocka_unit_test(test_sge_iomap),
		cmocka_unit_test(test_iomap_scale),
		cmocka_unit_test(test_ds_headers),
		cmocka_unit_test(test_ds_bad_and_v6),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
