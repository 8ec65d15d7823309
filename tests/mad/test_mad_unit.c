/* test_mad_unit — unit tests for src/wire/mad*.c (MAD header, CM messages, describer).
 *
 * The byte positions asserted here are written out independently from IBA 12.6's
 * message tables (not read from the library's field tables), so a wrong table entry
 * fails here even though encode and decode would agree with each other.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/mad.h"
#include "wire/mad_cm_fields.h"
#include "mad_pcap.h"

#define D(buf, i) ((buf)[UROCE_MAD_HDR_SIZE + (i)]) /* MAD data byte i */

/* Encode with the generic encoder, decode again, and require both the struct and the
 * bytes to survive. */
static void roundtrip(const struct uroce_cm_msg *m, uint8_t out[UROCE_MAD_SIZE])
{
	struct uroce_cm_msg back;
	uint8_t again[UROCE_MAD_SIZE];

	assert_int_equal(uroce_cm_encode(m, out, UROCE_MAD_SIZE), UROCE_MAD_SIZE);
	assert_int_equal(uroce_cm_decode(out, UROCE_MAD_SIZE, &back), 0);
	assert_memory_equal(&back, m, sizeof(back));
	assert_int_equal(uroce_cm_encode(&back, again, sizeof(again)), UROCE_MAD_SIZE);
	assert_memory_equal(again, out, UROCE_MAD_SIZE);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* ---- tables ----------------------------------------------------------------- */

/* Every bit of the 232 data bytes belongs to exactly one field of each message, and
 * every field fits its container and its struct member. */
static void test_tables_cover_every_bit_once(void **state)
{
	(void)state;
	for (size_t k = 0; k < uroce_cm_msg_ndescs; k++) {
		const struct cm_msg_desc *d = &uroce_cm_msg_descs[k];
		uint8_t owner[UROCE_MAD_DATA_SIZE * 8];

		memset(owner, 0, sizeof(owner));
		for (size_t i = 0; i < d->nfields; i++) {
			const struct cm_field *f = &d->fields[i];
			unsigned first, nbits;

			if (f->kind == CM_FK_BYTES) {
				assert_true(f->off + f->msize <= UROCE_MAD_DATA_SIZE);
				first = f->off * 8u;
				nbits = f->msize * 8u;
			} else {
				assert_true(f->nbytes >= 1 && f->nbytes <= 8);
				assert_true(f->off + f->nbytes <= UROCE_MAD_DATA_SIZE);
				assert_true(f->shift + f->width <= f->nbytes * 8u);
				assert_true(f->vshift + f->width <= f->msize * 8u);
				assert_true(f->msize == 1 || f->msize == 2 || f->msize == 4 || f->msize == 8);
				/* bit index counted from the MSB of the container's first byte */
				first = f->off * 8u + (f->nbytes * 8u - f->shift - f->width);
				nbits = f->width;
			}
			assert_true(f->moff + f->msize <= d->size);
			for (unsigned b = first; b < first + nbits; b++) {
				if (owner[b])
					fail_msg("attr 0x%x: bit %u claimed twice (%s)", d->attr_id, b, f->name);
				owner[b] = 1;
			}
		}
		for (unsigned b = 0; b < sizeof(owner); b++)
			if (!owner[b])
				fail_msg("attr 0x%x: data bit %u (byte %u) belongs to no field", d->attr_id,
					 b, b / 8);
	}
}

/* Every integer field at its maximum and every byte 0xFF encodes to 232 bytes of 0xFF
 * (except length fields that are bounded below their width), and one more than the
 * maximum is refused. */
static void test_all_ones_and_overflow(void **state)
{
	(void)state;
	for (size_t k = 0; k < uroce_cm_msg_ndescs; k++) {
		const struct cm_msg_desc *d = &uroce_cm_msg_descs[k];
		struct uroce_cm_msg m;
		uint8_t out[UROCE_MAD_SIZE];

		memset(&m, 0, sizeof(m));
		uroce_cm_hdr_init(&m.hdr, d->attr_id, 0xFFFFFFFFFFFFFFFFull);
		for (size_t i = 0; i < d->nfields; i++) {
			const struct cm_field *f = &d->fields[i];
			uint8_t *p = (uint8_t *)&m.u + f->moff;

			if (f->kind == CM_FK_BYTES) {
				memset(p, 0xff, f->msize);
			} else {
				/* set the member's bits [vshift, vshift + width) */
				uint64_t v = 0, add = (f->width >= 64 ? ~0ull : ((1ull << f->width) - 1))
						      << f->vshift;
				memcpy(&v, p, f->msize);
				v |= add;
				memcpy(p, &v, f->msize);
			}
		}
		if (d->attr_id == UROCE_CM_ATTR_REJ)
			m.u.rej.reject_info_length = 72;
		if (d->attr_id == UROCE_CM_ATTR_SIDR_REP)
			m.u.sidr_rep.add_info_length = 72;
		if (d->attr_id == UROCE_CM_ATTR_APR)
			m.u.apr.add_info_length = 72;
		assert_int_equal(uroce_cm_encode(&m, out, sizeof(out)), UROCE_MAD_SIZE);
		for (unsigned i = 0; i < UROCE_MAD_DATA_SIZE; i++) {
			if (d->attr_id == UROCE_CM_ATTR_REJ && i == 9)
				assert_int_equal(D(out, i), 72 << 1 | 1);
			else if (d->attr_id == UROCE_CM_ATTR_SIDR_REP && i == 5)
				assert_int_equal(D(out, i), 72);
			else if (d->attr_id == UROCE_CM_ATTR_APR && i == 8)
				assert_int_equal(D(out, i), 72);
			else if (D(out, i) != 0xff)
				fail_msg("attr 0x%x: data byte %u = 0x%02x, want 0xff", d->attr_id, i,
					 D(out, i));
		}
		roundtrip(&m, out);

		/* one above the max of each top-level integer field -> -EINVAL */
		for (size_t i = 0; i < d->nfields; i++) {
			const struct cm_field *f = &d->fields[i];
			struct uroce_cm_msg bad = m;
			uint8_t *p = (uint8_t *)&bad.u + f->moff;
			uint8_t before[UROCE_MAD_SIZE];
			uint64_t v = 0;

			if (f->kind != CM_FK_INT || !f->top || f->vshift + f->width >= f->msize * 8u)
				continue; /* field fills its member: no value is too wide */
			memcpy(&v, p, f->msize);
			v = (uint64_t)1 << (f->vshift + f->width);
			memcpy(p, &v, f->msize);
			memset(out, 0xa5, sizeof(out));
			memcpy(before, out, sizeof(out));
			if (uroce_cm_encode(&bad, out, sizeof(out)) != -EINVAL)
				fail_msg("attr 0x%x field %s: value 2^%u accepted", d->attr_id, f->name,
					 f->vshift + f->width);
			assert_memory_equal(out, before, sizeof(out)); /* untouched on failure */
		}
	}
}

/* ---- each message: distinct values, independent byte checks --------------------- */

static void test_req(void **state)
{
	struct uroce_cm_msg m;
	struct uroce_cm_req *r = &m.u.req;
	uint8_t out[UROCE_MAD_SIZE];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REQ, 0x0102030405060708ull);
	m.hdr.attr_mod = 0xA1B2C3D4;
	r->local_comm_id = 0x11223344;
	r->resv4 = 0x5A;
	r->vendor_id = 0xFFFFFF;
	r->service_id = 0x0000000001061C06ull;
	r->local_ca_guid = 0x505400FFFEC0020Bull;
	r->resv24 = 0xDEADBEEF;
	r->local_qkey = 0x80010000;
	r->local_qpn = 0xFFFFFF;
	r->responder_resources = 0xFE;
	r->local_eecn = 0xABCDEF;
	r->initiator_depth = 0x7F;
	r->remote_eecn = 0x123456;
	r->remote_cm_response_timeout = 31;
	r->transport_service_type = 2;
	r->end_to_end_flow_control = 1;
	r->starting_psn = 0x654321;
	r->local_cm_response_timeout = 17;
	r->retry_count = 7;
	r->pkey = 0x8001;
	r->path_mtu = 15;
	r->rdc_exists = 1;
	r->rnr_retry_count = 5;
	r->max_cm_retries = 9;
	r->srq = 1;
	r->extended_transport_type = 6;
	r->primary.local_lid = 0xFFFF;
	r->primary.remote_lid = 0x1234;
	fill(r->primary.local_gid, 16, 0x10);
	fill(r->primary.remote_gid, 16, 0x20);
	r->primary.flow_label = 0xFFFFF;
	r->primary.resv_fl = 0x2A;
	r->primary.packet_rate = 0x3F;
	r->primary.traffic_class = 0xB8;
	r->primary.hop_limit = 0x40;
	r->primary.sl = 15;
	r->primary.subnet_local = 1;
	r->primary.resv_sl = 5;
	r->primary.local_ack_timeout = 19;
	r->primary.resv_ack = 7;
	r->alternate.local_lid = 0x0102;
	r->alternate.remote_lid = 0x0304;
	fill(r->alternate.local_gid, 16, 0x30);
	fill(r->alternate.remote_gid, 16, 0x40);
	r->alternate.flow_label = 0x12345;
	r->alternate.resv_fl = 1;
	r->alternate.packet_rate = 7;
	r->alternate.traffic_class = 3;
	r->alternate.hop_limit = 255;
	r->alternate.sl = 3;
	r->alternate.subnet_local = 0;
	r->alternate.resv_sl = 2;
	r->alternate.local_ack_timeout = 31;
	r->alternate.resv_ack = 3;
	r->sap_supported = 1;
	fill(r->private_data, sizeof(r->private_data), 0x77);

	assert_int_equal(uroce_cm_encode_req(&m.hdr, r, out, sizeof(out)), UROCE_MAD_SIZE);
	/* MAD header, IBA 13.4.2 */
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 0x07);
	assert_int_equal(out[2], 2);
	assert_int_equal(out[3], 0x03);
	assert_int_equal(out[8], 0x01);
	assert_int_equal(out[15], 0x08);
	assert_int_equal(out[16], 0x00);
	assert_int_equal(out[17], 0x10);
	assert_int_equal(out[20], 0xA1);
	assert_int_equal(out[23], 0xD4);
	/* REQ, IBA 12.6 Table 106 */
	assert_int_equal(D(out, 0), 0x11);
	assert_int_equal(D(out, 3), 0x44);
	assert_int_equal(D(out, 4), 0x5A);
	assert_int_equal(D(out, 5), 0xFF);
	assert_int_equal(D(out, 15), 0x06);   /* service ID low byte */
	assert_int_equal(D(out, 16), 0x50);   /* CA GUID */
	assert_int_equal(D(out, 24), 0xDE);
	assert_int_equal(D(out, 28), 0x80);   /* Q_Key */
	assert_int_equal(D(out, 32), 0xFF);
	assert_int_equal(D(out, 34), 0xFF);
	assert_int_equal(D(out, 35), 0xFE);   /* responder resources */
	assert_int_equal(D(out, 36), 0xAB);
	assert_int_equal(D(out, 39), 0x7F);   /* initiator depth */
	assert_int_equal(D(out, 40), 0x12);
	assert_int_equal(D(out, 43), 31 << 3 | 2 << 1 | 1);
	assert_int_equal(D(out, 44), 0x65);
	assert_int_equal(D(out, 46), 0x21);
	assert_int_equal(D(out, 47), 17 << 3 | 7);
	assert_int_equal(D(out, 48), 0x80);
	assert_int_equal(D(out, 49), 0x01);
	assert_int_equal(D(out, 50), 15 << 4 | 1 << 3 | 5);
	assert_int_equal(D(out, 51), 9 << 4 | 1 << 3 | 6);
	assert_int_equal(D(out, 52), 0xFF);
	assert_int_equal(D(out, 54), 0x12);
	assert_int_equal(D(out, 56), 0x10);   /* primary local GID */
	assert_int_equal(D(out, 72), 0x20);   /* primary remote GID */
	assert_int_equal(D(out, 88), 0xFF);   /* flow label 20 | resv 6 | rate 6 */
	assert_int_equal(D(out, 89), 0xFF);
	assert_int_equal(D(out, 90), 0xF0 | 0x2A >> 2);
	assert_int_equal(D(out, 91), (0x2A & 3) << 6 | 0x3F);
	assert_int_equal(D(out, 92), 0xB8);
	assert_int_equal(D(out, 93), 0x40);
	assert_int_equal(D(out, 94), 15 << 4 | 1 << 3 | 5);
	assert_int_equal(D(out, 95), 19 << 3 | 7);
	assert_int_equal(D(out, 96), 0x01);
	assert_int_equal(D(out, 99), 0x04);
	assert_int_equal(D(out, 100), 0x30);
	assert_int_equal(D(out, 116), 0x40);
	assert_int_equal(D(out, 132), 0x12);
	assert_int_equal(D(out, 133), 0x34);
	assert_int_equal(D(out, 134), 0x50);
	assert_int_equal(D(out, 135), 1 << 6 | 7);
	assert_int_equal(D(out, 136), 3);
	assert_int_equal(D(out, 137), 255);
	assert_int_equal(D(out, 138), 3 << 4 | 2);
	assert_int_equal(D(out, 139), 31 << 3 | 1 << 2 | 3);
	assert_int_equal(D(out, 140), 0x77);  /* private data */
	assert_int_equal(D(out, 231), (uint8_t)(0x77 + 91 * 7));
	roundtrip(&m, out);
}

static void test_mra(void **state)
{
	struct uroce_cm_msg m;
	uint8_t out[UROCE_MAD_SIZE];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_MRA, 42);
	m.u.mra.local_comm_id = 0xCAFEBABE;
	m.u.mra.remote_comm_id = 0x01020304;
	m.u.mra.message_mraed = UROCE_CM_MRA_MSG_LAP;
	m.u.mra.resv8 = 0x3F;
	m.u.mra.service_timeout = 31;
	m.u.mra.resv9 = 2;
	fill(m.u.mra.private_data, sizeof(m.u.mra.private_data), 1);
	assert_int_equal(uroce_cm_encode_mra(&m.hdr, &m.u.mra, out, sizeof(out)), UROCE_MAD_SIZE);
	/* IBA 12.6 Table 107 */
	assert_int_equal(D(out, 0), 0xCA);
	assert_int_equal(D(out, 7), 0x04);
	assert_int_equal(D(out, 8), 2 << 6 | 0x3F);
	assert_int_equal(D(out, 9), 31 << 3 | 2);
	assert_int_equal(D(out, 10), 1);
	assert_int_equal(D(out, 231), (uint8_t)(1 + 221 * 7));
	roundtrip(&m, out);
}

static void test_rej(void **state)
{
	struct uroce_cm_msg m;
	uint8_t out[UROCE_MAD_SIZE];
	char line[512];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REJ, 43);
	m.u.rej.local_comm_id = 7;
	m.u.rej.remote_comm_id = 0xFFFFFFFF;
	m.u.rej.message_rejected = UROCE_CM_REJ_MSG_OTHER;
	m.u.rej.resv8 = 0x15;
	m.u.rej.reject_info_length = 8;
	m.u.rej.resv9 = 1;
	m.u.rej.reason = UROCE_CM_REJ_TIMEOUT;
	fill(m.u.rej.ari, sizeof(m.u.rej.ari), 0x90);
	fill(m.u.rej.private_data, sizeof(m.u.rej.private_data), 0x33);
	assert_int_equal(uroce_cm_encode_rej(&m.hdr, &m.u.rej, out, sizeof(out)), UROCE_MAD_SIZE);
	/* IBA 12.6 Table 108 */
	assert_int_equal(D(out, 3), 7);
	assert_int_equal(D(out, 4), 0xFF);
	assert_int_equal(D(out, 8), 2 << 6 | 0x15);
	assert_int_equal(D(out, 9), 8 << 1 | 1);
	assert_int_equal(D(out, 10), 0);
	assert_int_equal(D(out, 11), 4);
	assert_int_equal(D(out, 12), 0x90);
	assert_int_equal(D(out, 83), (uint8_t)(0x90 + 71 * 7));
	assert_int_equal(D(out, 84), 0x33);
	roundtrip(&m, out);
	assert_true(uroce_mad_describe(out, sizeof(out), line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "CM REJ"));
	assert_non_null(strstr(line, "reason=4 (timeout)"));
	assert_non_null(strstr(line, "ari_len=8 ari=90979ea5acb3bac1"));

	/* RejectInfoLength above 72 is inconsistent: refused both ways */
	D(out, 9) = 73 << 1;
	assert_int_equal(uroce_cm_decode(out, sizeof(out), &m), -EBADMSG);
	assert_true(uroce_mad_describe(out, sizeof(out), line, sizeof(line)) == -EBADMSG);
	m.u.rej.reject_info_length = 73;
	assert_int_equal(uroce_cm_encode(&m, out, sizeof(out)), -EINVAL);
	assert_string_equal(uroce_cm_rej_reason_name(UROCE_CM_REJ_CONSUMER_DEFINED), "consumer reject");
	assert_string_equal(uroce_cm_rej_reason_name(34), "unknown reason");
	assert_string_equal(uroce_cm_rej_reason_name(0xFFFF), "unknown reason");
}

static void test_rep(void **state)
{
	struct uroce_cm_msg m;
	struct uroce_cm_rep *r = &m.u.rep;
	uint8_t out[UROCE_MAD_SIZE];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REP, 44);
	r->local_comm_id = 0x0A0B0C0D;
	r->remote_comm_id = 0x01010101;
	r->local_qkey = 0x11111111;
	r->local_qpn = 0xFFFFFF;
	r->local_eecn = 0x00EE01;
	r->vendor_id = 0xA1B2C3;
	r->starting_psn = 0xDD6472;
	r->responder_resources = 0xFF;
	r->initiator_depth = 0x10;
	r->target_ack_delay = 31;
	r->failover_accepted = 2;
	r->end_to_end_flow_control = 1;
	r->rnr_retry_count = 7;
	r->srq = 1;
	r->resv27 = 0xA;
	r->local_ca_guid = 0xFFFFFFFFFFFFFFFEull;
	fill(r->private_data, sizeof(r->private_data), 0x44);
	assert_int_equal(uroce_cm_encode_rep(&m.hdr, r, out, sizeof(out)), UROCE_MAD_SIZE);
	/* IBA 12.6 Table 110 (+ ECE vendor ID in the reserved bytes 15, 19, 23) */
	assert_int_equal(D(out, 8), 0x11);
	assert_int_equal(D(out, 12), 0xFF);
	assert_int_equal(D(out, 14), 0xFF);
	assert_int_equal(D(out, 15), 0xA1);
	assert_int_equal(D(out, 16), 0x00);
	assert_int_equal(D(out, 17), 0xEE);
	assert_int_equal(D(out, 19), 0xB2);
	assert_int_equal(D(out, 20), 0xDD);
	assert_int_equal(D(out, 22), 0x72);
	assert_int_equal(D(out, 23), 0xC3);
	assert_int_equal(D(out, 24), 0xFF);
	assert_int_equal(D(out, 25), 0x10);
	assert_int_equal(D(out, 26), 31 << 3 | 2 << 1 | 1);
	assert_int_equal(D(out, 27), 7 << 5 | 1 << 4 | 0xA);
	assert_int_equal(D(out, 28), 0xFF);
	assert_int_equal(D(out, 35), 0xFE);
	assert_int_equal(D(out, 36), 0x44);
	roundtrip(&m, out);
	r->vendor_id = 0x1000000;
	assert_int_equal(uroce_cm_encode(&m, out, sizeof(out)), -EINVAL);
}

static void test_rtu_dreq_drep(void **state)
{
	struct uroce_cm_msg m;
	uint8_t out[UROCE_MAD_SIZE];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_RTU, 45);
	m.u.rtu.local_comm_id = 0x12345678;
	m.u.rtu.remote_comm_id = 0x9ABCDEF0;
	fill(m.u.rtu.private_data, sizeof(m.u.rtu.private_data), 0x55);
	assert_int_equal(uroce_cm_encode_rtu(&m.hdr, &m.u.rtu, out, sizeof(out)), UROCE_MAD_SIZE);
	assert_int_equal(D(out, 4), 0x9A);   /* IBA 12.6 Table 111 */
	assert_int_equal(D(out, 8), 0x55);
	roundtrip(&m, out);

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREQ, 46);
	m.u.dreq.local_comm_id = 1;
	m.u.dreq.remote_comm_id = 2;
	m.u.dreq.remote_qpn_eecn = 0xFFFFFF;
	m.u.dreq.resv11 = 0x81;
	fill(m.u.dreq.private_data, sizeof(m.u.dreq.private_data), 0x66);
	assert_int_equal(uroce_cm_encode_dreq(&m.hdr, &m.u.dreq, out, sizeof(out)), UROCE_MAD_SIZE);
	assert_int_equal(D(out, 8), 0xFF);   /* IBA 12.6 Table 112 */
	assert_int_equal(D(out, 10), 0xFF);
	assert_int_equal(D(out, 11), 0x81);
	assert_int_equal(D(out, 12), 0x66);
	roundtrip(&m, out);

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREP, 47);
	m.u.drep.local_comm_id = 3;
	m.u.drep.remote_comm_id = 4;
	fill(m.u.drep.private_data, sizeof(m.u.drep.private_data), 0x88);
	assert_int_equal(uroce_cm_encode_drep(&m.hdr, &m.u.drep, out, sizeof(out)), UROCE_MAD_SIZE);
	assert_int_equal(D(out, 7), 4);      /* IBA 12.6 Table 113 */
	assert_int_equal(D(out, 8), 0x88);
	roundtrip(&m, out);
}

static void test_sidr(void **state)
{
	struct uroce_cm_msg m;
	uint8_t out[UROCE_MAD_SIZE];
	char line[512];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_SIDR_REQ, 48);
	m.u.sidr_req.request_id = 0xF032E741;
	m.u.sidr_req.pkey = 0xFFFF;
	m.u.sidr_req.resv6 = 0x0102;
	m.u.sidr_req.service_id = uroce_cm_ip_sid(0x11, 7174);
	fill(m.u.sidr_req.private_data, sizeof(m.u.sidr_req.private_data), 0x99);
	assert_int_equal(uroce_cm_encode_sidr_req(&m.hdr, &m.u.sidr_req, out, sizeof(out)),
			 UROCE_MAD_SIZE);
	/* IBA 12.6 Table 119 */
	assert_int_equal(D(out, 0), 0xF0);
	assert_int_equal(D(out, 4), 0xFF);
	assert_int_equal(D(out, 6), 0x01);
	assert_int_equal(D(out, 7), 0x02);
	assert_int_equal(D(out, 12), 0x01);  /* service ID 00 00 00 00 01 11 1c 06 */
	assert_int_equal(D(out, 13), 0x11);
	assert_int_equal(D(out, 14), 0x1C);
	assert_int_equal(D(out, 15), 0x06);
	assert_int_equal(D(out, 16), 0x99);
	roundtrip(&m, out);

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_SIDR_REP, 49);
	m.u.sidr_rep.request_id = 0x01020304;
	m.u.sidr_rep.status = UROCE_CM_SIDR_REDIRECT;
	m.u.sidr_rep.add_info_length = 72;
	m.u.sidr_rep.vendor_id = 0xABCDEF;
	m.u.sidr_rep.qpn = 0x00003E;
	m.u.sidr_rep.service_id = 0x8877665544332211ull;
	m.u.sidr_rep.qkey = 0x01234567;
	fill(m.u.sidr_rep.add_info, sizeof(m.u.sidr_rep.add_info), 0xA0);
	fill(m.u.sidr_rep.private_data, sizeof(m.u.sidr_rep.private_data), 0xB0);
	assert_int_equal(uroce_cm_encode_sidr_rep(&m.hdr, &m.u.sidr_rep, out, sizeof(out)),
			 UROCE_MAD_SIZE);
	/* IBA 12.6 Table 120 (+ ECE vendor ID in bytes 6..7 and 11) */
	assert_int_equal(D(out, 4), 4);
	assert_int_equal(D(out, 5), 72);
	assert_int_equal(D(out, 6), 0xAB);
	assert_int_equal(D(out, 7), 0xCD);
	assert_int_equal(D(out, 10), 0x3E);
	assert_int_equal(D(out, 11), 0xEF);
	assert_int_equal(D(out, 12), 0x88);
	assert_int_equal(D(out, 19), 0x11);
	assert_int_equal(D(out, 20), 0x01);
	assert_int_equal(D(out, 23), 0x67);
	assert_int_equal(D(out, 24), 0xA0);
	assert_int_equal(D(out, 96), 0xB0);
	roundtrip(&m, out);
	assert_true(uroce_mad_describe(out, sizeof(out), line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "CM SIDR_REP"));
	assert_non_null(strstr(line, "status=4 (redirect) qpn=0x3e qkey=0x01234567"));

	D(out, 5) = 73;
	assert_int_equal(uroce_cm_decode(out, sizeof(out), &m), -EBADMSG);
}

static void test_lap_apr(void **state)
{
	struct uroce_cm_msg m;
	struct uroce_cm_lap *r = &m.u.lap;
	uint8_t out[UROCE_MAD_SIZE];
	char line[512];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_LAP, 50);
	r->local_comm_id = 0x10203040;
	r->remote_comm_id = 0x50607080;
	r->resv8 = 0x01020304;
	r->remote_qpn_eecn = 0xABCDEF;
	r->remote_cm_response_timeout = 31;
	r->resv15 = 5;
	r->resv16 = 0xFFFFFFFF;
	r->alternate.local_lid = 0x1111;
	r->alternate.remote_lid = 0x2222;
	fill(r->alternate.local_gid, 16, 0xC0);
	fill(r->alternate.remote_gid, 16, 0xD0);
	r->alternate.flow_label = 0xFEDCB;
	r->alternate.resv_fl = 0xA;
	r->alternate.traffic_class = 0x12;
	r->alternate.hop_limit = 0x34;
	r->resv_rate = 3;
	r->alternate.packet_rate = 0x15;
	r->alternate.sl = 0xE;
	r->alternate.subnet_local = 1;
	r->alternate.resv_sl = 6;
	r->alternate.local_ack_timeout = 0x11;
	r->alternate.resv_ack = 4;
	fill(r->private_data, sizeof(r->private_data), 0xE0);
	assert_int_equal(uroce_cm_encode_lap(&m.hdr, r, out, sizeof(out)), UROCE_MAD_SIZE);
	/* IBA 12.6 Table 115 */
	assert_int_equal(D(out, 0), 0x10);
	assert_int_equal(D(out, 4), 0x50);
	assert_int_equal(D(out, 8), 0x01);
	assert_int_equal(D(out, 12), 0xAB);
	assert_int_equal(D(out, 14), 0xEF);
	assert_int_equal(D(out, 15), 31 << 3 | 5);
	assert_int_equal(D(out, 16), 0xFF);
	assert_int_equal(D(out, 20), 0x11);
	assert_int_equal(D(out, 22), 0x22);
	assert_int_equal(D(out, 24), 0xC0);
	assert_int_equal(D(out, 40), 0xD0);
	assert_int_equal(D(out, 56), 0xFE);
	assert_int_equal(D(out, 57), 0xDC);
	assert_int_equal(D(out, 58), 0xBA);
	assert_int_equal(D(out, 59), 0x12);
	assert_int_equal(D(out, 60), 0x34);
	assert_int_equal(D(out, 61), 3 << 6 | 0x15);
	assert_int_equal(D(out, 62), 0xE << 4 | 1 << 3 | 6);
	assert_int_equal(D(out, 63), 0x11 << 3 | 4);
	assert_int_equal(D(out, 64), 0xE0);
	roundtrip(&m, out);
	assert_true(uroce_mad_describe(out, sizeof(out), line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "CM LAP"));
	assert_non_null(strstr(line, "rqpn=0xabcdef"));

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_APR, 51);
	m.u.apr.local_comm_id = 0xAAAAAAAA;
	m.u.apr.remote_comm_id = 0xBBBBBBBB;
	m.u.apr.add_info_length = 16;
	m.u.apr.ap_status = UROCE_CM_APR_INVALID_GID;
	m.u.apr.resv10 = 0x0F0F;
	fill(m.u.apr.add_info, sizeof(m.u.apr.add_info), 0x01);
	fill(m.u.apr.private_data, sizeof(m.u.apr.private_data), 0x02);
	assert_int_equal(uroce_cm_encode_apr(&m.hdr, &m.u.apr, out, sizeof(out)), UROCE_MAD_SIZE);
	/* IBA 12.6 Table 116 */
	assert_int_equal(D(out, 8), 16);
	assert_int_equal(D(out, 9), 8);
	assert_int_equal(D(out, 10), 0x0F);
	assert_int_equal(D(out, 12), 0x01);
	assert_int_equal(D(out, 84), 0x02);
	roundtrip(&m, out);
	assert_true(uroce_mad_describe(out, sizeof(out), line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "status=8 (invalid GID) info_len=16"));
	D(out, 8) = 73;
	assert_int_equal(uroce_cm_decode(out, sizeof(out), &m), -EBADMSG);
	assert_string_equal(uroce_cm_apr_status_name(14), "unknown status");
}

/* ---- errors ------------------------------------------------------------------ */

/* Every length short of a MAD is refused with -EMSGSIZE (header decode: below 24),
 * one byte more with -E2BIG.  Each buffer is a malloc of exactly that size so ASan
 * catches any read past it. */
static void test_short_and_long_buffers(void **state)
{
	uint8_t good[UROCE_MAD_SIZE];
	struct uroce_cm_msg m;
	struct uroce_mad mad;
	struct uroce_mad_hdr h;
	char line[256];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REQ, 1);
	assert_int_equal(uroce_cm_encode(&m, good, sizeof(good)), UROCE_MAD_SIZE);
	for (size_t len = 0; len <= UROCE_MAD_SIZE + 1; len++) {
		uint8_t *b = malloc(len ? len : 1);
		int want = len < UROCE_MAD_SIZE ? -EMSGSIZE : len > UROCE_MAD_SIZE ? -E2BIG : 0;

		assert_non_null(b);
		memcpy(b, good, len < sizeof(good) ? len : sizeof(good));
		if (len > sizeof(good))
			b[len - 1] = 0;
		assert_int_equal(uroce_cm_decode(b, len, &m), want);
		assert_int_equal(uroce_mad_decode(b, len, &mad), want);
		assert_int_equal(uroce_mad_hdr_decode(b, len, &h), len < UROCE_MAD_HDR_SIZE ? -EMSGSIZE : 0);
		assert_int_equal(uroce_cma_hdr_decode(b, len, &(struct uroce_cma_hdr){ 0 }) == -EMSGSIZE,
				 len < UROCE_CMA_HDR_SIZE);
		int rc = uroce_mad_describe(b, len, line, sizeof(line));
		if (want)
			assert_int_equal(rc, want);
		else
			assert_true(rc > 0);
		free(b);
	}
	/* output too small */
	for (size_t cap = 0; cap < UROCE_MAD_SIZE; cap += 17) {
		assert_int_equal(uroce_cm_encode(&m, good, cap), -ENOSPC);
		assert_int_equal(uroce_mad_encode(&mad, good, cap), -ENOSPC);
	}
	assert_int_equal(uroce_mad_hdr_encode(&h, good, 23), -ENOSPC);
	/* NULLs */
	assert_int_equal(uroce_cm_decode(NULL, 256, &m), -EINVAL);
	assert_int_equal(uroce_cm_decode(good, 256, NULL), -EINVAL);
	assert_int_equal(uroce_cm_encode(NULL, good, 256), -EINVAL);
	assert_int_equal(uroce_mad_describe(good, 256, NULL, 10), -EINVAL);
	assert_int_equal(uroce_mad_describe(good, 256, line, 0), -EINVAL);
	/* typed encoder with a header for another attribute */
	uroce_cm_hdr_init(&h, UROCE_CM_ATTR_REP, 1);
	assert_int_equal(uroce_cm_encode_req(&h, &m.u.req, good, sizeof(good)), -EINVAL);
}

static void test_versions_and_classes(void **state)
{
	struct uroce_cm_msg m;
	struct uroce_mad mad;
	uint8_t b[UROCE_MAD_SIZE];
	char line[256];

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_RTU, 1);
	assert_int_equal(uroce_cm_encode(&m, b, sizeof(b)), UROCE_MAD_SIZE);

	b[0] = 2; /* BaseVersion 2 (OPA) */
	assert_int_equal(uroce_cm_decode(b, sizeof(b), &m), -EPROTONOSUPPORT);
	assert_int_equal(uroce_mad_decode(b, sizeof(b), &mad), -EPROTONOSUPPORT);
	assert_int_equal(uroce_mad_describe(b, sizeof(b), line, sizeof(line)), -EPROTONOSUPPORT);
	b[0] = 1;
	b[2] = 1; /* CM ClassVersion 1 */
	assert_int_equal(uroce_cm_decode(b, sizeof(b), &m), -EPROTONOSUPPORT);
	b[2] = 2;

	/* an SA GetResp: a MAD, not a CM message */
	b[1] = UROCE_MGMT_CLASS_SUBN_ADM;
	b[3] = UROCE_MAD_METHOD_GET_RESP;
	b[17] = 0x35; /* PathRecord */
	assert_int_equal(uroce_cm_decode(b, sizeof(b), &m), -ENOMSG);
	assert_int_equal(uroce_mad_decode(b, sizeof(b), &mad), 0);
	assert_int_equal(mad.hdr.mgmt_class, UROCE_MGMT_CLASS_SUBN_ADM);
	assert_true(uroce_mad_describe(b, sizeof(b), line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "MAD SA(0x03) v2 GetResp(0x81) attr=0x0035"));
	assert_string_equal(uroce_mad_class_name(0x04), "PerfMgmt");
	assert_string_equal(uroce_mad_class_name(0x0A), "Vendor");
	assert_string_equal(uroce_mad_class_name(0x31), "VendorOUI");
	assert_string_equal(uroce_mad_class_name(0x7F), "UnknownClass");
	assert_string_equal(uroce_mad_method_name(0x12), "GetTable");
	assert_string_equal(uroce_mad_method_name(0x7E), "UnknownMethod");
	assert_int_equal(uroce_ib_mtu_bytes(3), 1024);
	assert_int_equal(uroce_ib_mtu_bytes(5), 4096);
	assert_int_equal(uroce_ib_mtu_bytes(6), 0);

	/* generic MAD round trip */
	uint8_t again[UROCE_MAD_SIZE];
	fill(b + 24, 232, 3);
	assert_int_equal(uroce_mad_decode(b, sizeof(b), &mad), 0);
	assert_int_equal(uroce_mad_encode(&mad, again, sizeof(again)), UROCE_MAD_SIZE);
	assert_memory_equal(again, b, sizeof(b));
}

/* ClassPortInfo and unknown attribute IDs decode as raw bytes and re-encode
 * unchanged. */
static void test_unknown_attributes(void **state)
{
	static const uint16_t ids[] = { UROCE_CM_ATTR_CLASS_PORT_INFO, 0x0000, 0x000F, 0x001B,
					0x8010, 0xFFFF };
	uint8_t b[UROCE_MAD_SIZE], again[UROCE_MAD_SIZE];
	struct uroce_cm_msg m;
	char line[256];

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		struct uroce_mad_hdr h;

		uroce_cm_hdr_init(&h, ids[i], 0x1234);
		h.attr_mod = 0x55;
		uroce_mad_hdr_encode(&h, b, sizeof(b));
		fill(b + 24, 232, (uint8_t)i);
		assert_false(uroce_cm_attr_known(ids[i]));
		assert_int_equal(uroce_cm_decode(b, sizeof(b), &m), 0);
		assert_memory_equal(m.u.raw, b + 24, 232);
		assert_int_equal(uroce_cm_foreach_field(&m, NULL, NULL), -EINVAL);
		assert_int_equal(uroce_cm_encode(&m, again, sizeof(again)), UROCE_MAD_SIZE);
		assert_memory_equal(again, b, sizeof(b));
		assert_true(uroce_mad_describe(b, sizeof(b), line, sizeof(line)) > 0);
		assert_non_null(strstr(line, uroce_cm_attr_name(ids[i])));
		assert_non_null(strstr(line, "mod=0x55"));
	}
	assert_string_equal(uroce_cm_attr_name(UROCE_CM_ATTR_CLASS_PORT_INFO), "ClassPortInfo");
	assert_string_equal(uroce_cm_attr_name(0xFFFF), "UnknownAttr");
}

static int count_cb(void *arg, const struct uroce_cm_field_value *f)
{
	(void)f;
	++*(int *)arg;
	return 0;
}

static void test_foreach(void **state)
{
	struct uroce_cm_msg m;
	int n = 0;

	(void)state;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REP, 1);
	assert_int_equal(uroce_cm_foreach_field(&m, count_cb, &n), 0);
	assert_int_equal(n, 17); /* 19 table rows, the 3-piece vendor ID reported once */
	m.hdr.attr_id = 0x1234;
	assert_int_equal(uroce_cm_foreach_field(&m, count_cb, &n), -ENOENT);
}

static void test_cma_hdr(void **state)
{
	struct uroce_cma_hdr h, back;
	uint8_t b[UROCE_CMA_HDR_SIZE];

	(void)state;
	memset(&h, 0, sizeof(h)); /* padding too: the structs are compared with memcmp */
	memset(&back, 0, sizeof(back));
	h.version = 0x00;
	h.ip_version = 6;
	h.resv = 0xF;
	h.port = 0xE278;
	fill(h.src, 16, 0xFE);
	fill(h.dst, 16, 0x20);
	assert_int_equal(uroce_cma_hdr_encode(&h, b, sizeof(b)), UROCE_CMA_HDR_SIZE);
	/* Annex A11.4 layout */
	assert_int_equal(b[0], 0);
	assert_int_equal(b[1], 0x6F);
	assert_int_equal(b[2], 0xE2);
	assert_int_equal(b[3], 0x78);
	assert_int_equal(b[4], 0xFE);
	assert_int_equal(b[20], 0x20);
	assert_int_equal(uroce_cma_hdr_decode(b, sizeof(b), &back), 0);
	assert_memory_equal(&back, &h, sizeof(h));
	b[1] = 0x50; /* IP version 5 */
	assert_int_equal(uroce_cma_hdr_decode(b, sizeof(b), &back), -EPROTONOSUPPORT);
	b[1] = 0x40;
	b[0] = 0x10; /* major version 1 */
	assert_int_equal(uroce_cma_hdr_decode(b, sizeof(b), &back), -EPROTONOSUPPORT);
	h.ip_version = 16;
	assert_int_equal(uroce_cma_hdr_encode(&h, b, sizeof(b)), -EINVAL);
	h.ip_version = 4;
	assert_int_equal(uroce_cma_hdr_encode(&h, b, 35), -ENOSPC);
	assert_true(uroce_cm_sid_is_ip(0x0000000001061C06ull));
	assert_false(uroce_cm_sid_is_ip(0x0000000002061C06ull));
	assert_int_equal(uroce_cm_ip_sid(0x06, 7174), 0x0000000001061C06ull);
}

/* ---- golden captures: facts known independently of any decoder ------------------ */

struct golden {
	struct uroce_cm_msg msgs[8];
	unsigned frames[8];
	int n;
};

static int collect(void *arg, unsigned frame, const uint8_t *mad, size_t len)
{
	struct golden *g = arg;
	uint8_t again[UROCE_MAD_SIZE];
	char line[512];

	assert_true(g->n < 8);
	assert_int_equal(uroce_cm_decode(mad, len, &g->msgs[g->n]), 0);
	assert_int_equal(uroce_cm_encode(&g->msgs[g->n], again, sizeof(again)), UROCE_MAD_SIZE);
	assert_memory_equal(again, mad, len);
	assert_true(uroce_mad_describe(mad, len, line, sizeof(line)) > 0);
	/* truncated output is reported and still terminated */
	assert_int_equal(uroce_mad_describe(mad, len, line, 12), -ENOSPC);
	assert_int_equal(strlen(line), 11);
	g->frames[g->n++] = frame;
	return 0;
}

static void load(const char *name, struct golden *g)
{
	char path[4096];
	const char *dir = getenv("UROCE_TEST_DATA");

	if (!dir) {
		skip();
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	memset(g, 0, sizeof(*g));
	int found = mad_pcap_foreach(path, collect, g);

	assert_int_equal(found, g->n);
}

static const uint8_t vm0[4] = { 192, 0, 2, 10 }, vm1[4] = { 192, 0, 2, 11 };

/* udaddy (rdma_cm UD, README.txt of the captures): client vm1 192.0.2.11 resolves
 * port 7174 (udaddy's default) on vm0 192.0.2.10; rdma_cm answers with Q_Key
 * 0x01234567 (librdmacm's RDMA_UDP_QKEY).  Wireshark 4.0 has no SIDR dissector, so
 * these facts are the oracle for SIDR_REQ / SIDR_REP. */
static void test_golden_udaddy_sidr(void **state)
{
	struct golden g;
	struct uroce_cma_hdr h;

	(void)state;
	load("rdma_cm_udaddy.pcap", &g);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.msgs[0].hdr.attr_id, UROCE_CM_ATTR_SIDR_REQ);
	assert_int_equal(g.msgs[1].hdr.attr_id, UROCE_CM_ATTR_SIDR_REP);
	assert_int_equal(g.msgs[0].hdr.tid, g.msgs[1].hdr.tid);
	const struct uroce_cm_sidr_req *q = &g.msgs[0].u.sidr_req;
	const struct uroce_cm_sidr_rep *p = &g.msgs[1].u.sidr_rep;
	assert_int_equal(q->service_id, uroce_cm_ip_sid(0x11, 7174));
	assert_int_equal(q->pkey, 0xFFFF);
	assert_int_equal(p->request_id, q->request_id);
	assert_int_equal(p->status, UROCE_CM_SIDR_SUCCESS);
	assert_int_equal(p->service_id, q->service_id);
	assert_int_equal(p->qkey, 0x01234567);
	assert_true(p->qpn > 1 && p->qpn < 0x1000000);
	assert_int_equal(uroce_cma_hdr_decode(q->private_data, sizeof(q->private_data), &h), 0);
	assert_int_equal(h.ip_version, 4);
	assert_memory_equal(h.src + 12, vm1, 4);
	assert_memory_equal(h.dst + 12, vm0, 4);
}

/* rping: REQ/REP/RTU/DREQ/DREP with matching communication IDs and QPNs. */
static void test_golden_rping_consistency(void **state)
{
	struct golden g;
	struct uroce_cma_hdr h;

	(void)state;
	load("rdma_cm_rping.pcap", &g);
	assert_int_equal(g.n, 5);
	const struct uroce_cm_req *req = &g.msgs[0].u.req;
	const struct uroce_cm_rep *rep = &g.msgs[1].u.rep;
	assert_int_equal(g.msgs[0].hdr.attr_id, UROCE_CM_ATTR_REQ);
	assert_int_equal(g.msgs[1].hdr.attr_id, UROCE_CM_ATTR_REP);
	assert_int_equal(g.msgs[2].hdr.attr_id, UROCE_CM_ATTR_RTU);
	assert_int_equal(g.msgs[3].hdr.attr_id, UROCE_CM_ATTR_DREQ);
	assert_int_equal(g.msgs[4].hdr.attr_id, UROCE_CM_ATTR_DREP);
	assert_int_equal(rep->remote_comm_id, req->local_comm_id);
	assert_int_equal(g.msgs[2].u.rtu.local_comm_id, req->local_comm_id);
	assert_int_equal(g.msgs[2].u.rtu.remote_comm_id, rep->local_comm_id);
	assert_int_equal(g.msgs[3].u.dreq.remote_qpn_eecn, rep->local_qpn);
	assert_int_equal(g.msgs[4].u.drep.remote_comm_id, g.msgs[3].u.dreq.local_comm_id);
	assert_int_equal(req->service_id, uroce_cm_ip_sid(0x06, 7174)); /* rping's port */
	assert_int_equal(uroce_ib_mtu_bytes(req->path_mtu), 1024);     /* Ethernet 1500 */
	assert_int_equal(req->transport_service_type, 0);               /* RC */
	assert_memory_equal(req->primary.local_gid + 12, vm1, 4);
	assert_memory_equal(req->primary.remote_gid + 12, vm0, 4);
	assert_int_equal(uroce_cma_hdr_decode(req->private_data, sizeof(req->private_data), &h), 0);
	assert_memory_equal(h.src + 12, vm1, 4);
	assert_memory_equal(h.dst + 12, vm0, 4);
}

/* to_namespace_no_peer: two identical REQ retries then a REJ with reason 4 (timeout)
 * whose ARI is the rejecting CA's GUID, i.e. the REQ's local CA GUID. */
static void test_golden_reject(void **state)
{
	struct golden g;

	(void)state;
	load("to_namespace_no_peer.pcap", &g);
	assert_int_equal(g.n, 3);
	const struct uroce_cm_req *req = &g.msgs[0].u.req;
	const struct uroce_cm_rej *rej = &g.msgs[2].u.rej;
	assert_memory_equal(&g.msgs[0], &g.msgs[1], sizeof(g.msgs[0]));
	assert_int_equal(g.msgs[2].hdr.attr_id, UROCE_CM_ATTR_REJ);
	assert_int_equal(rej->reason, UROCE_CM_REJ_TIMEOUT);
	assert_int_equal(rej->local_comm_id, req->local_comm_id);
	assert_int_equal(rej->reject_info_length, 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(rej->ari[i], (uint8_t)(req->local_ca_guid >> (56 - 8 * i)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_cover_every_bit_once),
		cmocka_unit_test(test_all_ones_and_overflow),
		cmocka_unit_test(test_req),
		cmocka_unit_test(test_mra),
		cmocka_unit_test(test_rej),
		cmocka_unit_test(test_rep),
		cmocka_unit_test(test_rtu_dreq_drep),
		cmocka_unit_test(test_sidr),
		cmocka_unit_test(test_lap_apr),
		cmocka_unit_test(test_short_and_long_buffers),
		cmocka_unit_test(test_versions_and_classes),
		cmocka_unit_test(test_unknown_attributes),
		cmocka_unit_test(test_foreach),
		cmocka_unit_test(test_cma_hdr),
		cmocka_unit_test(test_golden_udaddy_sidr),
		cmocka_unit_test(test_golden_rping_consistency),
		cmocka_unit_test(test_golden_reject),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
