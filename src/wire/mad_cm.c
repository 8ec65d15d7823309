/* mad_cm.c — Communication Manager messages (IBA 12.6), table driven.
 *
 * Each message is described by one table of fields: where the bits sit in the 232-byte
 * MAD data (byte offset, container size, shift, width) and which struct member holds
 * them.  Decoding and encoding are the same walk over the table in two directions, so
 * a layout is written down exactly once.  Every bit of the 232 bytes — reserved ones
 * included — belongs to exactly one field (tests/mad checks this), which is what makes
 * encode(decode(x)) == x hold for every accepted MAD.
 *
 * Byte offsets below are relative to the start of the MAD data (MAD byte 24), and are
 * those of the message tables in IBA 12.6 (Tables 106-120).  Multi-bit fields occupy
 * the most significant bits of their bytes first (IBA byte and bit ordering:
 * big-endian, the most significant bit of a byte is drawn on the left).
 */
#include "wire/mad.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "wire/mad_bytes.h"
#include "wire/mad_cm_fields.h"

/* Field table entries.  F_INT(struct, member, name, byte offset, container bytes, shift,
 * width): member = (container >> shift) & mask(width).  F_PART is one piece of a member
 * spread over several places (ECE vendor ID); @vs is its bit position in the member and
 * @top marks the most significant piece (the one that bounds the member's width). */
#define MSZ(st, mem) sizeof(((st *)0)->mem)
#define F_INT(st, mem, nm, o, nb, sh, w) \
	{ nm, o, nb, sh, w, 0, 1, CM_FK_INT, MSZ(st, mem), offsetof(st, mem) }
#define F_PART(st, mem, nm, o, nb, sh, w, vs, top) \
	{ nm, o, nb, sh, w, vs, top, CM_FK_INT, MSZ(st, mem), offsetof(st, mem) }
#define F_BYTES(st, mem, nm, o) \
	{ nm, o, 0, 0, 0, 0, 0, CM_FK_BYTES, MSZ(st, mem), offsetof(st, mem) }

/* A path in REQ (IBA 12.6 Table 106, bytes 52..95 primary, 96..139 alternate). */
#define PATH(pfx, b)                                                                    \
	F_INT(struct uroce_cm_req, pfx.local_lid, #pfx ".local_lid", b + 0, 2, 0, 16),  \
	F_INT(struct uroce_cm_req, pfx.remote_lid, #pfx ".remote_lid", b + 2, 2, 0, 16), \
	F_BYTES(struct uroce_cm_req, pfx.local_gid, #pfx ".local_gid", b + 4),           \
	F_BYTES(struct uroce_cm_req, pfx.remote_gid, #pfx ".remote_gid", b + 20),        \
	F_INT(struct uroce_cm_req, pfx.flow_label, #pfx ".flow_label", b + 36, 4, 12, 20), \
	F_INT(struct uroce_cm_req, pfx.resv_fl, #pfx ".resv_fl", b + 36, 4, 6, 6),      \
	F_INT(struct uroce_cm_req, pfx.packet_rate, #pfx ".packet_rate", b + 39, 1, 0, 6), \
	F_INT(struct uroce_cm_req, pfx.traffic_class, #pfx ".traffic_class", b + 40, 1, 0, 8), \
	F_INT(struct uroce_cm_req, pfx.hop_limit, #pfx ".hop_limit", b + 41, 1, 0, 8),  \
	F_INT(struct uroce_cm_req, pfx.sl, #pfx ".sl", b + 42, 1, 4, 4),                \
	F_INT(struct uroce_cm_req, pfx.subnet_local, #pfx ".subnet_local", b + 42, 1, 3, 1), \
	F_INT(struct uroce_cm_req, pfx.resv_sl, #pfx ".resv_sl", b + 42, 1, 0, 3),      \
	F_INT(struct uroce_cm_req, pfx.local_ack_timeout, #pfx ".local_ack_timeout", b + 43, 1, 3, 5)

#define R struct uroce_cm_req
static const struct cm_field req_fields[] = {
	F_INT(R, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(R, resv4, "resv4", 4, 1, 0, 8),
	F_INT(R, vendor_id, "vendor_id", 5, 3, 0, 24),
	F_INT(R, service_id, "service_id", 8, 8, 0, 64),
	F_INT(R, local_ca_guid, "local_ca_guid", 16, 8, 0, 64),
	F_INT(R, resv24, "resv24", 24, 4, 0, 32),
	F_INT(R, local_qkey, "local_qkey", 28, 4, 0, 32),
	F_INT(R, local_qpn, "local_qpn", 32, 3, 0, 24),
	F_INT(R, responder_resources, "responder_resources", 35, 1, 0, 8),
	F_INT(R, local_eecn, "local_eecn", 36, 3, 0, 24),
	F_INT(R, initiator_depth, "initiator_depth", 39, 1, 0, 8),
	F_INT(R, remote_eecn, "remote_eecn", 40, 3, 0, 24),
	F_INT(R, remote_cm_response_timeout, "remote_cm_response_timeout", 43, 1, 3, 5),
	F_INT(R, transport_service_type, "transport_service_type", 43, 1, 1, 2),
	F_INT(R, end_to_end_flow_control, "end_to_end_flow_control", 43, 1, 0, 1),
	F_INT(R, starting_psn, "starting_psn", 44, 3, 0, 24),
	F_INT(R, local_cm_response_timeout, "local_cm_response_timeout", 47, 1, 3, 5),
	F_INT(R, retry_count, "retry_count", 47, 1, 0, 3),
	F_INT(R, pkey, "pkey", 48, 2, 0, 16),
	F_INT(R, path_mtu, "path_mtu", 50, 1, 4, 4),
	F_INT(R, rdc_exists, "rdc_exists", 50, 1, 3, 1),
	F_INT(R, rnr_retry_count, "rnr_retry_count", 50, 1, 0, 3),
	F_INT(R, max_cm_retries, "max_cm_retries", 51, 1, 4, 4),
	F_INT(R, srq, "srq", 51, 1, 3, 1),
	F_INT(R, extended_transport_type, "extended_transport_type", 51, 1, 0, 3),
	PATH(primary, 52),
	F_INT(R, primary.resv_ack, "primary.resv_ack", 95, 1, 0, 3),
	PATH(alternate, 96),
	/* Byte 139 bit 2: SAP supported (a later IBA release's "SAP supported"); bits 1..0 reserved. */
	F_INT(R, sap_supported, "sap_supported", 139, 1, 2, 1),
	F_INT(R, alternate.resv_ack, "alternate.resv_ack", 139, 1, 0, 2),
	F_BYTES(R, private_data, "private_data", 140),
};
#undef R

#define M struct uroce_cm_mra
static const struct cm_field mra_fields[] = {
	F_INT(M, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(M, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(M, message_mraed, "message_mraed", 8, 1, 6, 2),
	F_INT(M, resv8, "resv8", 8, 1, 0, 6),
	F_INT(M, service_timeout, "service_timeout", 9, 1, 3, 5),
	F_INT(M, resv9, "resv9", 9, 1, 0, 3),
	F_BYTES(M, private_data, "private_data", 10),
};
#undef M

#define J struct uroce_cm_rej
static const struct cm_field rej_fields[] = {
	F_INT(J, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(J, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(J, message_rejected, "message_rejected", 8, 1, 6, 2),
	F_INT(J, resv8, "resv8", 8, 1, 0, 6),
	F_INT(J, reject_info_length, "reject_info_length", 9, 1, 1, 7),
	F_INT(J, resv9, "resv9", 9, 1, 0, 1),
	F_INT(J, reason, "reason", 10, 2, 0, 16),
	F_BYTES(J, ari, "ari", 12),
	F_BYTES(J, private_data, "private_data", 84),
};
#undef J

#define P struct uroce_cm_rep
static const struct cm_field rep_fields[] = {
	F_INT(P, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(P, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(P, local_qkey, "local_qkey", 8, 4, 0, 32),
	F_INT(P, local_qpn, "local_qpn", 12, 3, 0, 24),
	F_PART(P, vendor_id, "vendor_id", 15, 1, 0, 8, 16, 1),
	F_INT(P, local_eecn, "local_eecn", 16, 3, 0, 24),
	F_PART(P, vendor_id, "vendor_id", 19, 1, 0, 8, 8, 0),
	F_INT(P, starting_psn, "starting_psn", 20, 3, 0, 24),
	F_PART(P, vendor_id, "vendor_id", 23, 1, 0, 8, 0, 0),
	F_INT(P, responder_resources, "responder_resources", 24, 1, 0, 8),
	F_INT(P, initiator_depth, "initiator_depth", 25, 1, 0, 8),
	F_INT(P, target_ack_delay, "target_ack_delay", 26, 1, 3, 5),
	F_INT(P, failover_accepted, "failover_accepted", 26, 1, 1, 2),
	F_INT(P, end_to_end_flow_control, "end_to_end_flow_control", 26, 1, 0, 1),
	F_INT(P, rnr_retry_count, "rnr_retry_count", 27, 1, 5, 3),
	F_INT(P, srq, "srq", 27, 1, 4, 1),
	F_INT(P, resv27, "resv27", 27, 1, 0, 4),
	F_INT(P, local_ca_guid, "local_ca_guid", 28, 8, 0, 64),
	F_BYTES(P, private_data, "private_data", 36),
};
#undef P

#define T struct uroce_cm_rtu
static const struct cm_field rtu_fields[] = {
	F_INT(T, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(T, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_BYTES(T, private_data, "private_data", 8),
};
#undef T

#define D struct uroce_cm_dreq
static const struct cm_field dreq_fields[] = {
	F_INT(D, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(D, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(D, remote_qpn_eecn, "remote_qpn_eecn", 8, 3, 0, 24),
	F_INT(D, resv11, "resv11", 11, 1, 0, 8),
	F_BYTES(D, private_data, "private_data", 12),
};
#undef D

#define E struct uroce_cm_drep
static const struct cm_field drep_fields[] = {
	F_INT(E, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(E, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_BYTES(E, private_data, "private_data", 8),
};
#undef E

#define Q struct uroce_cm_sidr_req
static const struct cm_field sidr_req_fields[] = {
	F_INT(Q, request_id, "request_id", 0, 4, 0, 32),
	F_INT(Q, pkey, "pkey", 4, 2, 0, 16),
	F_INT(Q, resv6, "resv6", 6, 2, 0, 16),
	F_INT(Q, service_id, "service_id", 8, 8, 0, 64),
	F_BYTES(Q, private_data, "private_data", 16),
};
#undef Q

/* LAP's alternate path: same fields as a REQ path, other order (Table 115). */
#define L struct uroce_cm_lap
static const struct cm_field lap_fields[] = {
	F_INT(L, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(L, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(L, resv8, "resv8", 8, 4, 0, 32),
	F_INT(L, remote_qpn_eecn, "remote_qpn_eecn", 12, 3, 0, 24),
	F_INT(L, remote_cm_response_timeout, "remote_cm_response_timeout", 15, 1, 3, 5),
	F_INT(L, resv15, "resv15", 15, 1, 0, 3),
	F_INT(L, resv16, "resv16", 16, 4, 0, 32),
	F_INT(L, alternate.local_lid, "alternate.local_lid", 20, 2, 0, 16),
	F_INT(L, alternate.remote_lid, "alternate.remote_lid", 22, 2, 0, 16),
	F_BYTES(L, alternate.local_gid, "alternate.local_gid", 24),
	F_BYTES(L, alternate.remote_gid, "alternate.remote_gid", 40),
	F_INT(L, alternate.flow_label, "alternate.flow_label", 56, 3, 4, 20),
	F_INT(L, alternate.resv_fl, "alternate.resv_fl", 58, 1, 0, 4),
	F_INT(L, alternate.traffic_class, "alternate.traffic_class", 59, 1, 0, 8),
	F_INT(L, alternate.hop_limit, "alternate.hop_limit", 60, 1, 0, 8),
	F_INT(L, resv_rate, "resv_rate", 61, 1, 6, 2),
	F_INT(L, alternate.packet_rate, "alternate.packet_rate", 61, 1, 0, 6),
	F_INT(L, alternate.sl, "alternate.sl", 62, 1, 4, 4),
	F_INT(L, alternate.subnet_local, "alternate.subnet_local", 62, 1, 3, 1),
	F_INT(L, alternate.resv_sl, "alternate.resv_sl", 62, 1, 0, 3),
	F_INT(L, alternate.local_ack_timeout, "alternate.local_ack_timeout", 63, 1, 3, 5),
	F_INT(L, alternate.resv_ack, "alternate.resv_ack", 63, 1, 0, 3),
	F_BYTES(L, private_data, "private_data", 64),
};
#undef L

#define A struct uroce_cm_apr
static const struct cm_field apr_fields[] = {
	F_INT(A, local_comm_id, "local_comm_id", 0, 4, 0, 32),
	F_INT(A, remote_comm_id, "remote_comm_id", 4, 4, 0, 32),
	F_INT(A, add_info_length, "add_info_length", 8, 1, 0, 8),
	F_INT(A, ap_status, "ap_status", 9, 1, 0, 8),
	F_INT(A, resv10, "resv10", 10, 2, 0, 16),
	F_BYTES(A, add_info, "add_info", 12),
	F_BYTES(A, private_data, "private_data", 84),
};
#undef A

#define S struct uroce_cm_sidr_rep
static const struct cm_field sidr_rep_fields[] = {
	F_INT(S, request_id, "request_id", 0, 4, 0, 32),
	F_INT(S, status, "status", 4, 1, 0, 8),
	F_INT(S, add_info_length, "add_info_length", 5, 1, 0, 8),
	F_PART(S, vendor_id, "vendor_id", 6, 2, 0, 16, 8, 1),
	F_INT(S, qpn, "qpn", 8, 3, 0, 24),
	F_PART(S, vendor_id, "vendor_id", 11, 1, 0, 8, 0, 0),
	F_INT(S, service_id, "service_id", 12, 8, 0, 64),
	F_INT(S, qkey, "qkey", 20, 4, 0, 32),
	F_BYTES(S, add_info, "add_info", 24),
	F_BYTES(S, private_data, "private_data", 96),
};
#undef S

#define MSG(a, t, st) { a, t, sizeof(t) / sizeof(t[0]), sizeof(st) }
const struct cm_msg_desc uroce_cm_msg_descs[] = {
	MSG(UROCE_CM_ATTR_REQ, req_fields, struct uroce_cm_req),
	MSG(UROCE_CM_ATTR_MRA, mra_fields, struct uroce_cm_mra),
	MSG(UROCE_CM_ATTR_REJ, rej_fields, struct uroce_cm_rej),
	MSG(UROCE_CM_ATTR_REP, rep_fields, struct uroce_cm_rep),
	MSG(UROCE_CM_ATTR_RTU, rtu_fields, struct uroce_cm_rtu),
	MSG(UROCE_CM_ATTR_DREQ, dreq_fields, struct uroce_cm_dreq),
	MSG(UROCE_CM_ATTR_DREP, drep_fields, struct uroce_cm_drep),
	MSG(UROCE_CM_ATTR_LAP, lap_fields, struct uroce_cm_lap),
	MSG(UROCE_CM_ATTR_APR, apr_fields, struct uroce_cm_apr),
	MSG(UROCE_CM_ATTR_SIDR_REQ, sidr_req_fields, struct uroce_cm_sidr_req),
	MSG(UROCE_CM_ATTR_SIDR_REP, sidr_rep_fields, struct uroce_cm_sidr_rep),
};
const size_t uroce_cm_msg_ndescs = sizeof(uroce_cm_msg_descs) / sizeof(uroce_cm_msg_descs[0]);

const struct cm_msg_desc *uroce_cm_msg_desc(uint16_t attr_id)
{
	for (size_t i = 0; i < uroce_cm_msg_ndescs; i++)
		if (uroce_cm_msg_descs[i].attr_id == attr_id)
			return &uroce_cm_msg_descs[i];
	return NULL;
}

int uroce_cm_attr_known(uint16_t attr_id)
{
	return uroce_cm_msg_desc(attr_id) != NULL;
}

/* ---- the table walk ------------------------------------------------------------ */

static uint64_t get_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be(uint8_t *p, unsigned n, uint64_t v)
{
	for (unsigned i = n; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t mask_of(unsigned width)
{
	return width >= 64 ? ~0ull : (1ull << width) - 1;
}

static uint64_t member_get(const void *base, const struct cm_field *f)
{
	const uint8_t *p = (const uint8_t *)base + f->moff;

	switch (f->msize) {
	case 1: return *p;
	case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
	case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
	default: { uint64_t v; memcpy(&v, p, 8); return v; }
	}
}

static void member_set(void *base, const struct cm_field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)base + f->moff;

	switch (f->msize) {
	case 1: *p = (uint8_t)v; break;
	case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
	default: memcpy(p, &v, 8); break;
	}
}

uint64_t uroce_cm_field_get(const void *msg, const struct cm_field *f)
{
	return member_get(msg, f);
}

void uroce_cm_fields_decode(const struct cm_msg_desc *d, const uint8_t *data, void *msg)
{
	memset(msg, 0, d->size);
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cm_field *f = &d->fields[i];

		if (f->kind == CM_FK_BYTES) {
			memcpy((uint8_t *)msg + f->moff, data + f->off, f->msize);
			continue;
		}
		uint64_t part = (get_be(data + f->off, f->nbytes) >> f->shift) & mask_of(f->width);
		member_set(msg, f, member_get(msg, f) | part << f->vshift);
	}
}

int uroce_cm_fields_encode(const struct cm_msg_desc *d, const void *msg, uint8_t *data)
{
	/* Check every field first so a failed encode leaves @data untouched. */
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cm_field *f = &d->fields[i];

		if (f->kind == CM_FK_INT && f->top &&
		    (member_get(msg, f) >> f->vshift) > mask_of(f->width))
			return -EINVAL;
	}
	memset(data, 0, UROCE_MAD_DATA_SIZE);
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cm_field *f = &d->fields[i];

		if (f->kind == CM_FK_BYTES) {
			memcpy(data + f->off, (const uint8_t *)msg + f->moff, f->msize);
			continue;
		}
		uint64_t part = (member_get(msg, f) >> f->vshift) & mask_of(f->width);
		uint64_t c = get_be(data + f->off, f->nbytes);

		put_be(data + f->off, f->nbytes, c | part << f->shift);
	}
	return 0;
}

/* Length fields that bound a byte array (IBA 12.6 Table 108: RejectInfoLength <= 72;
 * Tables 116 and 120: AdditionalInformationLength <= 72). */
static int check_lengths(uint16_t attr, const void *msg)
{
	if (attr == UROCE_CM_ATTR_REJ &&
	    ((const struct uroce_cm_rej *)msg)->reject_info_length > UROCE_CM_ARI_MAX)
		return -1;
	if (attr == UROCE_CM_ATTR_APR &&
	    ((const struct uroce_cm_apr *)msg)->add_info_length > UROCE_CM_APR_INFO_MAX)
		return -1;
	if (attr == UROCE_CM_ATTR_SIDR_REP &&
	    ((const struct uroce_cm_sidr_rep *)msg)->add_info_length > UROCE_CM_SIDR_INFO_MAX)
		return -1;
	return 0;
}

int uroce_cm_decode(const uint8_t *buf, size_t len, struct uroce_cm_msg *out)
{
	const struct cm_msg_desc *d;
	int rc;

	if (!buf || !out)
		return -EINVAL;
	if (len < UROCE_MAD_SIZE)
		return -EMSGSIZE;
	if (len > UROCE_MAD_SIZE)
		return -E2BIG;
	memset(out, 0, sizeof(*out));
	rc = uroce_mad_hdr_decode(buf, len, &out->hdr);
	if (rc)
		return rc;
	if (out->hdr.base_version != UROCE_MAD_BASE_VERSION)
		return -EPROTONOSUPPORT;
	if (out->hdr.mgmt_class != UROCE_MGMT_CLASS_CM)
		return -ENOMSG;
	/* A CM answers an unsupported ClassVersion with REJ reason 31 (IBA 12.6); the
	 * layouts here are those of version 2 only. */
	if (out->hdr.class_version != UROCE_CM_CLASS_VERSION)
		return -EPROTONOSUPPORT;

	const uint8_t *data = buf + UROCE_MAD_HDR_SIZE;

	d = uroce_cm_msg_desc(out->hdr.attr_id);
	if (!d) {
		memcpy(out->u.raw, data, UROCE_MAD_DATA_SIZE);
		return 0;
	}
	uroce_cm_fields_decode(d, data, &out->u);
	if (check_lengths(d->attr_id, &out->u))
		return -EBADMSG;
	return 0;
}

static int encode_one(const struct uroce_mad_hdr *h, uint16_t attr, const void *msg,
		      uint8_t *buf, size_t cap)
{
	const struct cm_msg_desc *d;
	int rc;

	if (!h || !msg || !buf)
		return -EINVAL;
	if (h->attr_id != attr)
		return -EINVAL;
	if (cap < UROCE_MAD_SIZE)
		return -ENOSPC;
	d = uroce_cm_msg_desc(attr);
	if (!d)
		return -EINVAL;
	if (check_lengths(attr, msg))
		return -EINVAL;
	rc = uroce_cm_fields_encode(d, msg, buf + UROCE_MAD_HDR_SIZE);
	if (rc)
		return rc;
	uroce_mad_hdr_encode(h, buf, cap);
	return (int)UROCE_MAD_SIZE;
}

int uroce_cm_encode(const struct uroce_cm_msg *m, uint8_t *buf, size_t cap)
{
	if (!m || !buf)
		return -EINVAL;
	if (uroce_cm_attr_known(m->hdr.attr_id))
		return encode_one(&m->hdr, m->hdr.attr_id, &m->u, buf, cap);
	if (cap < UROCE_MAD_SIZE)
		return -ENOSPC;
	uroce_mad_hdr_encode(&m->hdr, buf, cap);
	memcpy(buf + UROCE_MAD_HDR_SIZE, m->u.raw, UROCE_MAD_DATA_SIZE);
	return (int)UROCE_MAD_SIZE;
}

#define TYPED(name, st, attr)                                                            \
	int uroce_cm_encode_##name(const struct uroce_mad_hdr *h, const st *m, uint8_t *buf, \
				   size_t cap)                                           \
	{                                                                                \
		return encode_one(h, attr, m, buf, cap);                                  \
	}
TYPED(req, struct uroce_cm_req, UROCE_CM_ATTR_REQ)
TYPED(mra, struct uroce_cm_mra, UROCE_CM_ATTR_MRA)
TYPED(rej, struct uroce_cm_rej, UROCE_CM_ATTR_REJ)
TYPED(rep, struct uroce_cm_rep, UROCE_CM_ATTR_REP)
TYPED(rtu, struct uroce_cm_rtu, UROCE_CM_ATTR_RTU)
TYPED(dreq, struct uroce_cm_dreq, UROCE_CM_ATTR_DREQ)
TYPED(drep, struct uroce_cm_drep, UROCE_CM_ATTR_DREP)
TYPED(lap, struct uroce_cm_lap, UROCE_CM_ATTR_LAP)
TYPED(apr, struct uroce_cm_apr, UROCE_CM_ATTR_APR)
TYPED(sidr_req, struct uroce_cm_sidr_req, UROCE_CM_ATTR_SIDR_REQ)
TYPED(sidr_rep, struct uroce_cm_sidr_rep, UROCE_CM_ATTR_SIDR_REP)

/* ---- field iteration (CLI verbose output, golden tests) ---------------------------- */

int uroce_cm_foreach_field(const struct uroce_cm_msg *m, uroce_cm_field_cb cb, void *arg)
{
	const struct cm_msg_desc *d;

	if (!m || !cb)
		return -EINVAL;
	d = uroce_cm_msg_desc(m->hdr.attr_id);
	if (!d)
		return -ENOENT;
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cm_field *f = &d->fields[i];
		struct uroce_cm_field_value v = { .name = f->name };
		int rc;

		/* A split member is reported once, at its most significant piece. */
		if (f->kind == CM_FK_INT && !f->top)
			continue;
		if (f->kind == CM_FK_BYTES) {
			v.bytes = (const uint8_t *)&m->u + f->moff;
			v.len = f->msize;
		} else {
			v.value = member_get(&m->u, f);
		}
		rc = cb(arg, &v);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- rdma_cm private-data header (IBA Annex A11.4) --------------------------------- */

int uroce_cma_hdr_decode(const uint8_t *priv, size_t len, struct uroce_cma_hdr *out)
{
	if (!priv || !out)
		return -EINVAL;
	if (len < UROCE_CMA_HDR_SIZE)
		return -EMSGSIZE;
	out->version = priv[0];
	out->ip_version = priv[1] >> 4;
	out->resv = priv[1] & 0x0f;
	out->port = mad_get16(priv + 2);
	memcpy(out->src, priv + 4, 16);
	memcpy(out->dst, priv + 20, 16);
	/* Annex A11.4: major version 0 is the only one defined; IP version is 4 or 6. */
	if ((out->version >> 4) != 0 || (out->ip_version != 4 && out->ip_version != 6))
		return -EPROTONOSUPPORT;
	return 0;
}

int uroce_cma_hdr_encode(const struct uroce_cma_hdr *h, uint8_t *priv, size_t cap)
{
	if (!h || !priv || h->ip_version > 0x0f || h->resv > 0x0f)
		return -EINVAL;
	if (cap < UROCE_CMA_HDR_SIZE)
		return -ENOSPC;
	priv[0] = h->version;
	priv[1] = (uint8_t)(h->ip_version << 4 | h->resv);
	mad_put16(priv + 2, h->port);
	memcpy(priv + 4, h->src, 16);
	memcpy(priv + 20, h->dst, 16);
	return (int)UROCE_CMA_HDR_SIZE;
}
