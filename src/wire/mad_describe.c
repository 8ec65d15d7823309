/* mad_describe.c — one-line description of a MAD for `uroce decode` (src/cli). */
#include "wire/mad.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct line {
	char *buf;
	size_t cap, len;
	int overflow;
};

__attribute__((format(printf, 2, 3)))
static void add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= l->cap - l->len) {
		l->overflow = 1;
		l->len = l->cap - 1;
		return;
	}
	l->len += (size_t)n;
}

static void add_gid(struct line *l, const char *key, const uint8_t gid[16])
{
	char s[INET6_ADDRSTRLEN];
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	/* RoCEv2 GIDs of IPv4 interfaces are IPv4-mapped IPv6 addresses (RoCEv2 Annex A17). */
	if (memcmp(gid, v4mapped, 12) == 0)
		inet_ntop(AF_INET, gid + 12, s, sizeof(s));
	else
		inet_ntop(AF_INET6, gid, s, sizeof(s));
	add(l, " %s=%s", key, s);
}

static const char *tst_name(uint8_t t)
{
	static const char *const n[] = { "RC", "UC", "RD", "EXT" };
	return n[t & 3];
}

/* The rdma_cm header at the start of REQ / SIDR_REQ private data, if it is one. */
static void add_cma(struct line *l, uint64_t sid, const uint8_t *priv, size_t len)
{
	struct uroce_cma_hdr h;
	char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];

	if (!uroce_cm_sid_is_ip(sid) || uroce_cma_hdr_decode(priv, len, &h) != 0)
		return;
	if (h.ip_version == 4) {
		inet_ntop(AF_INET, h.src + 12, s, sizeof(s));
		inet_ntop(AF_INET, h.dst + 12, d, sizeof(d));
		add(l, " cma=%s:%u->%s", s, h.port, d);
	} else {
		inet_ntop(AF_INET6, h.src, s, sizeof(s));
		inet_ntop(AF_INET6, h.dst, d, sizeof(d));
		add(l, " cma=[%s]:%u->[%s]", s, h.port, d);
	}
}

static void add_sid(struct line *l, uint64_t sid)
{
	add(l, " sid=0x%016" PRIx64, sid);
	if (uroce_cm_sid_is_ip(sid)) {
		uint8_t p = uroce_cm_sid_proto(sid);
		const char *pn = p == 0x06 ? "tcp" : p == 0x11 ? "udp" : p == 0x13 ? "ib" :
				 p == 0x3f ? "ipoib" : "ps";

		add(l, "(%s:%u)", pn, uroce_cm_sid_port(sid));
	}
}

static void describe_cm(struct line *l, const struct uroce_cm_msg *m)
{
	const char *an = uroce_cm_attr_name(m->hdr.attr_id);

	add(l, "CM %s tid=0x%" PRIx64, an, m->hdr.tid);
	switch (m->hdr.attr_id) {
	case UROCE_CM_ATTR_REQ: {
		const struct uroce_cm_req *r = &m->u.req;

		add(l, " lcid=0x%08x", r->local_comm_id);
		add_sid(l, r->service_id);
		add(l, " qpn=0x%x psn=0x%x tst=%s mtu=%u pkey=0x%04x rr=%u id=%u retry=%u rnr=%u"
		       " srq=%u rcmt=%u lcmt=%u maxcm=%u guid=0x%016" PRIx64,
		    r->local_qpn, r->starting_psn, tst_name(r->transport_service_type),
		    uroce_ib_mtu_bytes(r->path_mtu), r->pkey, r->responder_resources,
		    r->initiator_depth, r->retry_count, r->rnr_retry_count, r->srq,
		    r->remote_cm_response_timeout, r->local_cm_response_timeout,
		    r->max_cm_retries, r->local_ca_guid);
		add_gid(l, "sgid", r->primary.local_gid);
		add_gid(l, "dgid", r->primary.remote_gid);
		add(l, " fl=0x%x tc=%u hl=%u sl=%u ackto=%u", r->primary.flow_label,
		    r->primary.traffic_class, r->primary.hop_limit, r->primary.sl,
		    r->primary.local_ack_timeout);
		add_cma(l, r->service_id, r->private_data, sizeof(r->private_data));
		break;
	}
	case UROCE_CM_ATTR_MRA: {
		const struct uroce_cm_mra *r = &m->u.mra;
		static const char *const what[] = { "REQ", "REP", "LAP", "?" };

		add(l, " lcid=0x%08x rcid=0x%08x mraed=%s timeout=%u", r->local_comm_id,
		    r->remote_comm_id, what[r->message_mraed & 3], r->service_timeout);
		break;
	}
	case UROCE_CM_ATTR_REJ: {
		const struct uroce_cm_rej *r = &m->u.rej;
		static const char *const what[] = { "REQ", "REP", "other", "?" };

		add(l, " lcid=0x%08x rcid=0x%08x rejected=%s reason=%u (%s) ari_len=%u",
		    r->local_comm_id, r->remote_comm_id, what[r->message_rejected & 3], r->reason,
		    uroce_cm_rej_reason_name(r->reason), r->reject_info_length);
		if (r->reject_info_length) {
			add(l, " ari=");
			for (unsigned i = 0; i < r->reject_info_length && i < sizeof(r->ari); i++)
				add(l, "%02x", r->ari[i]);
		}
		break;
	}
	case UROCE_CM_ATTR_REP: {
		const struct uroce_cm_rep *r = &m->u.rep;

		add(l, " lcid=0x%08x rcid=0x%08x qpn=0x%x psn=0x%x rr=%u id=%u tad=%u failover=%u"
		       " rnr=%u srq=%u guid=0x%016" PRIx64,
		    r->local_comm_id, r->remote_comm_id, r->local_qpn, r->starting_psn,
		    r->responder_resources, r->initiator_depth, r->target_ack_delay,
		    r->failover_accepted, r->rnr_retry_count, r->srq, r->local_ca_guid);
		break;
	}
	case UROCE_CM_ATTR_RTU:
		add(l, " lcid=0x%08x rcid=0x%08x", m->u.rtu.local_comm_id, m->u.rtu.remote_comm_id);
		break;
	case UROCE_CM_ATTR_DREQ:
		add(l, " lcid=0x%08x rcid=0x%08x rqpn=0x%x", m->u.dreq.local_comm_id,
		    m->u.dreq.remote_comm_id, m->u.dreq.remote_qpn_eecn);
		break;
	case UROCE_CM_ATTR_DREP:
		add(l, " lcid=0x%08x rcid=0x%08x", m->u.drep.local_comm_id, m->u.drep.remote_comm_id);
		break;
	case UROCE_CM_ATTR_LAP: {
		const struct uroce_cm_lap *r = &m->u.lap;

		add(l, " lcid=0x%08x rcid=0x%08x rqpn=0x%x rcmt=%u", r->local_comm_id,
		    r->remote_comm_id, r->remote_qpn_eecn, r->remote_cm_response_timeout);
		add_gid(l, "alt_sgid", r->alternate.local_gid);
		add_gid(l, "alt_dgid", r->alternate.remote_gid);
		add(l, " fl=0x%x tc=%u hl=%u sl=%u ackto=%u", r->alternate.flow_label,
		    r->alternate.traffic_class, r->alternate.hop_limit, r->alternate.sl,
		    r->alternate.local_ack_timeout);
		break;
	}
	case UROCE_CM_ATTR_APR:
		add(l, " lcid=0x%08x rcid=0x%08x status=%u (%s) info_len=%u", m->u.apr.local_comm_id,
		    m->u.apr.remote_comm_id, m->u.apr.ap_status,
		    uroce_cm_apr_status_name(m->u.apr.ap_status), m->u.apr.add_info_length);
		break;
	case UROCE_CM_ATTR_SIDR_REQ: {
		const struct uroce_cm_sidr_req *r = &m->u.sidr_req;

		add(l, " rid=0x%08x pkey=0x%04x", r->request_id, r->pkey);
		add_sid(l, r->service_id);
		add_cma(l, r->service_id, r->private_data, sizeof(r->private_data));
		break;
	}
	case UROCE_CM_ATTR_SIDR_REP: {
		const struct uroce_cm_sidr_rep *r = &m->u.sidr_rep;

		add(l, " rid=0x%08x status=%u (%s) qpn=0x%x qkey=0x%08x", r->request_id, r->status,
		    uroce_cm_sidr_status_name(r->status), r->qpn, r->qkey);
		add_sid(l, r->service_id);
		break;
	}
	default:
		add(l, " attr=0x%04x mod=0x%x", m->hdr.attr_id, m->hdr.attr_mod);
		break;
	}
}

int uroce_mad_describe(const uint8_t *mad, size_t len, char *buf, size_t cap)
{
	struct line l = { buf, cap, 0, 0 };
	struct uroce_mad_hdr h;
	struct uroce_cm_msg m;
	int rc;

	if (!mad || !buf || cap == 0)
		return -EINVAL;
	buf[0] = '\0';
	rc = uroce_mad_hdr_decode(mad, len, &h);
	if (rc == 0 && len != UROCE_MAD_SIZE)
		rc = len < UROCE_MAD_SIZE ? -EMSGSIZE : -E2BIG;
	if (rc == 0 && h.base_version != UROCE_MAD_BASE_VERSION)
		rc = -EPROTONOSUPPORT;
	if (rc) {
		add(&l, "MAD: malformed (%s, %zu bytes)", strerror(-rc), len);
		return rc;
	}
	if (h.mgmt_class == UROCE_MGMT_CLASS_CM) {
		rc = uroce_cm_decode(mad, len, &m);
		if (rc) {
			add(&l, "CM: malformed %s (%s)", uroce_cm_attr_name(h.attr_id), strerror(-rc));
			return rc;
		}
		describe_cm(&l, &m);
	} else {
		add(&l, "MAD %s(0x%02x) v%u %s(0x%02x) attr=0x%04x mod=0x%x tid=0x%" PRIx64
			" status=0x%04x", uroce_mad_class_name(h.mgmt_class), h.mgmt_class,
		    h.class_version, uroce_mad_method_name(h.method), h.method, h.attr_id,
		    h.attr_mod, h.tid, h.status);
	}
	return l.overflow ? -ENOSPC : (int)l.len;
}
