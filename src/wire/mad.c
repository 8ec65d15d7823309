/* mad.c — common MAD header and management class / method names (IBA 13.4).
 * CM message packing lives in mad_cm.c, the one-line describer in mad_describe.c. */
#include "wire/mad.h"

#include <errno.h>
#include <string.h>

#include "wire/mad_bytes.h"

int uroce_mad_hdr_decode(const uint8_t *buf, size_t len, struct uroce_mad_hdr *h)
{
	if (!buf || !h)
		return -EINVAL;
	if (len < UROCE_MAD_HDR_SIZE)
		return -EMSGSIZE;
	/* IBA 13.4.2: BaseVersion, MgmtClass, ClassVersion, R|Method, Status, ClassSpecific,
	 * TransactionID, AttributeID, Reserved, AttributeModifier. */
	h->base_version = buf[0];
	h->mgmt_class = buf[1];
	h->class_version = buf[2];
	h->method = buf[3];
	h->status = mad_get16(buf + 4);
	h->class_specific = mad_get16(buf + 6);
	h->tid = mad_get64(buf + 8);
	h->attr_id = mad_get16(buf + 16);
	h->resv = mad_get16(buf + 18);
	h->attr_mod = mad_get32(buf + 20);
	return 0;
}

int uroce_mad_hdr_encode(const struct uroce_mad_hdr *h, uint8_t *buf, size_t cap)
{
	if (!buf || !h)
		return -EINVAL;
	if (cap < UROCE_MAD_HDR_SIZE)
		return -ENOSPC;
	buf[0] = h->base_version;
	buf[1] = h->mgmt_class;
	buf[2] = h->class_version;
	buf[3] = h->method;
	mad_put16(buf + 4, h->status);
	mad_put16(buf + 6, h->class_specific);
	mad_put64(buf + 8, h->tid);
	mad_put16(buf + 16, h->attr_id);
	mad_put16(buf + 18, h->resv);
	mad_put32(buf + 20, h->attr_mod);
	return (int)UROCE_MAD_HDR_SIZE;
}

int uroce_mad_decode(const uint8_t *buf, size_t len, struct uroce_mad *out)
{
	int rc;

	if (!buf || !out)
		return -EINVAL;
	if (len < UROCE_MAD_SIZE)
		return -EMSGSIZE;
	if (len > UROCE_MAD_SIZE)
		return -E2BIG;
	rc = uroce_mad_hdr_decode(buf, len, &out->hdr);
	if (rc)
		return rc;
	memcpy(out->data, buf + UROCE_MAD_HDR_SIZE, UROCE_MAD_DATA_SIZE);
	/* IBA 13.4.2: BaseVersion 1 for 256-byte MADs (2 is OPA's jumbo MAD format). */
	if (out->hdr.base_version != UROCE_MAD_BASE_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

int uroce_mad_encode(const struct uroce_mad *m, uint8_t *buf, size_t cap)
{
	if (!m || !buf)
		return -EINVAL;
	if (cap < UROCE_MAD_SIZE)
		return -ENOSPC;
	uroce_mad_hdr_encode(&m->hdr, buf, cap);
	memcpy(buf + UROCE_MAD_HDR_SIZE, m->data, UROCE_MAD_DATA_SIZE);
	return (int)UROCE_MAD_SIZE;
}

void uroce_cm_hdr_init(struct uroce_mad_hdr *h, uint16_t attr_id, uint64_t tid)
{
	memset(h, 0, sizeof(*h));
	h->base_version = UROCE_MAD_BASE_VERSION;
	h->mgmt_class = UROCE_MGMT_CLASS_CM;
	h->class_version = UROCE_CM_CLASS_VERSION;
	h->method = UROCE_MAD_METHOD_SEND; /* IBA 12.6: every CM message is a Send() */
	h->attr_id = attr_id;
	h->tid = tid;
}

const char *uroce_mad_class_name(uint8_t c)
{
	switch (c) {
	case UROCE_MGMT_CLASS_SUBN_LID: return "SubnMgmt";
	case UROCE_MGMT_CLASS_SUBN_DR:  return "SubnMgmtDR";
	case UROCE_MGMT_CLASS_SUBN_ADM: return "SA";
	case UROCE_MGMT_CLASS_PERF:     return "PerfMgmt";
	case UROCE_MGMT_CLASS_BM:       return "BM";
	case UROCE_MGMT_CLASS_DEV_MGT:  return "DevMgmt";
	case UROCE_MGMT_CLASS_CM:       return "CM";
	case UROCE_MGMT_CLASS_SNMP:     return "SNMP";
	case UROCE_MGMT_CLASS_CC:       return "CongCtl";
	default: break;
	}
	if (c >= UROCE_MGMT_CLASS_VENDOR_LO1 && c <= UROCE_MGMT_CLASS_VENDOR_HI1)
		return "Vendor";
	if (c >= UROCE_MGMT_CLASS_VENDOR_LO2 && c <= UROCE_MGMT_CLASS_VENDOR_HI2)
		return "VendorOUI";
	return "UnknownClass";
}

const char *uroce_mad_method_name(uint8_t m)
{
	switch (m) {
	case UROCE_MAD_METHOD_GET:             return "Get";
	case UROCE_MAD_METHOD_SET:             return "Set";
	case UROCE_MAD_METHOD_SEND:            return "Send";
	case UROCE_MAD_METHOD_TRAP:            return "Trap";
	case UROCE_MAD_METHOD_REPORT:          return "Report";
	case UROCE_MAD_METHOD_TRAP_REPRESS:    return "TrapRepress";
	case UROCE_MAD_METHOD_GET_TABLE:       return "GetTable";
	case UROCE_MAD_METHOD_GET_TRACE_TABLE: return "GetTraceTable";
	case UROCE_MAD_METHOD_GET_MULTI:       return "GetMulti";
	case UROCE_MAD_METHOD_DELETE:          return "Delete";
	case UROCE_MAD_METHOD_GET_RESP:        return "GetResp";
	case UROCE_MAD_METHOD_REPORT_RESP:     return "ReportResp";
	case UROCE_MAD_METHOD_GET_TABLE_RESP:  return "GetTableResp";
	case UROCE_MAD_METHOD_GET_MULTI_RESP:  return "GetMultiResp";
	case UROCE_MAD_METHOD_DELETE_RESP:     return "DeleteResp";
	default:                               return "UnknownMethod";
	}
}

const char *uroce_cm_attr_name(uint16_t a)
{
	switch (a) {
	case UROCE_CM_ATTR_CLASS_PORT_INFO: return "ClassPortInfo";
	case UROCE_CM_ATTR_REQ:      return "REQ";
	case UROCE_CM_ATTR_MRA:      return "MRA";
	case UROCE_CM_ATTR_REJ:      return "REJ";
	case UROCE_CM_ATTR_REP:      return "REP";
	case UROCE_CM_ATTR_RTU:      return "RTU";
	case UROCE_CM_ATTR_DREQ:     return "DREQ";
	case UROCE_CM_ATTR_DREP:     return "DREP";
	case UROCE_CM_ATTR_SIDR_REQ: return "SIDR_REQ";
	case UROCE_CM_ATTR_SIDR_REP: return "SIDR_REP";
	case UROCE_CM_ATTR_LAP:      return "LAP";
	case UROCE_CM_ATTR_APR:      return "APR";
	default:                     return "UnknownAttr";
	}
}

/* Indexed by reason code; NULL holes are reserved values. */
static const char *const rej_reason_names[] = {
	[UROCE_CM_REJ_NO_QP] = "no QP available",
	[UROCE_CM_REJ_NO_EEC] = "no EEC available",
	[UROCE_CM_REJ_NO_RESOURCES] = "no resources available",
	[UROCE_CM_REJ_TIMEOUT] = "timeout",
	[UROCE_CM_REJ_UNSUPPORTED] = "unsupported request",
	[UROCE_CM_REJ_INVALID_COMM_ID] = "invalid communication ID",
	[UROCE_CM_REJ_INVALID_COMM_INSTANCE] = "invalid communication instance",
	[UROCE_CM_REJ_INVALID_SERVICE_ID] = "invalid service ID",
	[UROCE_CM_REJ_INVALID_TRANSPORT_TYPE] = "invalid transport service type",
	[UROCE_CM_REJ_STALE_CONN] = "stale connection",
	[UROCE_CM_REJ_RDC_NOT_EXIST] = "RDC does not exist",
	[UROCE_CM_REJ_INVALID_GID] = "primary remote port GID rejected",
	[UROCE_CM_REJ_INVALID_LID] = "primary remote port LID rejected",
	[UROCE_CM_REJ_INVALID_SL] = "invalid primary SL",
	[UROCE_CM_REJ_INVALID_TRAFFIC_CLASS] = "invalid primary traffic class",
	[UROCE_CM_REJ_INVALID_HOP_LIMIT] = "invalid primary hop limit",
	[UROCE_CM_REJ_INVALID_PACKET_RATE] = "invalid primary packet rate",
	[UROCE_CM_REJ_INVALID_ALT_GID] = "alternate remote port GID rejected",
	[UROCE_CM_REJ_INVALID_ALT_LID] = "alternate remote port LID rejected",
	[UROCE_CM_REJ_INVALID_ALT_SL] = "invalid alternate SL",
	[UROCE_CM_REJ_INVALID_ALT_TRAFFIC_CLASS] = "invalid alternate traffic class",
	[UROCE_CM_REJ_INVALID_ALT_HOP_LIMIT] = "invalid alternate hop limit",
	[UROCE_CM_REJ_INVALID_ALT_PACKET_RATE] = "invalid alternate packet rate",
	[UROCE_CM_REJ_PORT_CM_REDIRECT] = "port and CM redirection",
	[UROCE_CM_REJ_PORT_REDIRECT] = "port redirection",
	[UROCE_CM_REJ_INVALID_MTU] = "invalid path MTU",
	[UROCE_CM_REJ_INSUFFICIENT_RESP_RESOURCES] = "insufficient responder resources",
	[UROCE_CM_REJ_CONSUMER_DEFINED] = "consumer reject",
	[UROCE_CM_REJ_INVALID_RNR_RETRY] = "RNR retry count reject",
	[UROCE_CM_REJ_DUPLICATE_LOCAL_COMM_ID] = "duplicate local communication ID",
	[UROCE_CM_REJ_INVALID_CLASS_VERSION] = "unsupported class version",
	[UROCE_CM_REJ_INVALID_FLOW_LABEL] = "invalid primary flow label",
	[UROCE_CM_REJ_INVALID_ALT_FLOW_LABEL] = "invalid alternate flow label",
	[UROCE_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED] = "vendor option not supported",
};

const char *uroce_cm_rej_reason_name(uint16_t reason)
{
	if (reason < sizeof(rej_reason_names) / sizeof(rej_reason_names[0]) && rej_reason_names[reason])
		return rej_reason_names[reason];
	return "unknown reason";
}

const char *uroce_cm_sidr_status_name(uint8_t s)
{
	switch (s) {
	case UROCE_CM_SIDR_SUCCESS:             return "success";
	case UROCE_CM_SIDR_UNSUPPORTED:         return "service ID not supported";
	case UROCE_CM_SIDR_REJECT:              return "rejected";
	case UROCE_CM_SIDR_NO_QP:               return "no QP";
	case UROCE_CM_SIDR_REDIRECT:            return "redirect";
	case UROCE_CM_SIDR_UNSUPPORTED_VERSION: return "unsupported class version";
	default:                                return "unknown status";
	}
}

const char *uroce_cm_apr_status_name(uint8_t s)
{
	static const char *const n[] = {
		[UROCE_CM_APR_SUCCESS] = "success",
		[UROCE_CM_APR_INVALID_COMM_ID] = "invalid communication ID",
		[UROCE_CM_APR_UNSUPPORTED] = "unsupported request",
		[UROCE_CM_APR_REJECT] = "rejected",
		[UROCE_CM_APR_REDIRECT] = "redirect",
		[UROCE_CM_APR_IS_CURRENT] = "path is the current primary",
		[UROCE_CM_APR_INVALID_QPN_EECN] = "invalid QPN/EECN",
		[UROCE_CM_APR_INVALID_LID] = "invalid LID",
		[UROCE_CM_APR_INVALID_GID] = "invalid GID",
		[UROCE_CM_APR_INVALID_FLOW_LABEL] = "invalid flow label",
		[UROCE_CM_APR_INVALID_TCLASS] = "invalid traffic class",
		[UROCE_CM_APR_INVALID_HOP_LIMIT] = "invalid hop limit",
		[UROCE_CM_APR_INVALID_PACKET_RATE] = "invalid packet rate",
		[UROCE_CM_APR_INVALID_SL] = "invalid SL",
	};

	return s < sizeof(n) / sizeof(n[0]) ? n[s] : "unknown status";
}

unsigned uroce_ib_mtu_bytes(uint8_t code)
{
	/* 1 = 256 ... 5 = 4096; 0 and 6..15 are reserved. */
	return (code >= 1 && code <= 5) ? 128u << code : 0;
}
