/* mad.h — InfiniBand management datagrams (MADs) and Communication Manager messages.
 *
 * A MAD is the 256-byte payload of a UD SEND to QP1 (the GSI, Q_Key 0x80010000),
 * following BTH + DETH (IBA 13.4.2, 13.5).  Its first 24 bytes are the common MAD
 * header; the remaining 232 bytes belong to the management class.  For the CM class
 * (0x07, IBA 12.6) the data holds one of the messages REQ, MRA, REJ, REP, RTU, DREQ,
 * DREP, LAP, APR, SIDR_REQ, SIDR_REP (ClassPortInfo and unknown attributes are kept
 * as raw bytes).
 *
 * Pure C, no I/O, no allocation.  All multi-byte fields are big-endian on the wire and
 * host-order in the structs below.  Every decoder checks the buffer length before it
 * reads a byte and never reads past @len.  Reserved bits are decoded into `resv*`
 * fields so that encode(decode(x)) == x for every accepted MAD; callers that build a
 * message from scratch should zero the struct first (reserved = 0, as IBA requires
 * senders to do).
 *
 * Error convention (internal code): 0 / a length on success, -errno on failure:
 *   -EINVAL           NULL argument, or a field value wider than its wire field (encode)
 *   -EMSGSIZE         buffer shorter than the MAD (or header / CMA header) it must hold
 *   -E2BIG            buffer longer than a MAD (decode expects exactly 256 bytes)
 *   -ENOSPC           output buffer too small (encode, describe)
 *   -EPROTONOSUPPORT  BaseVersion != 1, or CM ClassVersion != 2, or CMA header with an
 *                     unknown version / IP version
 *   -ENOMSG           uroce_cm_decode() on a MAD whose class is not CM
 *   -EBADMSG          internally inconsistent message (e.g. REJ RejectInfoLength > 72)
 */
#ifndef UROCE_WIRE_MAD_H
#define UROCE_WIRE_MAD_H

#include <stddef.h>
#include <stdint.h>

/* ---- Sizes and well-known values ------------------------------------------------ */

#define UROCE_MAD_SIZE      256u        /* IBA 13.4.2: every MAD is 256 bytes */
#define UROCE_MAD_HDR_SIZE  24u         /* common MAD header */
#define UROCE_MAD_DATA_SIZE 232u        /* class-specific part */
#define UROCE_GSI_QPN       1u          /* IBA 13.5: the GSI is QP1 */
#define UROCE_GSI_QKEY      0x80010000u /* IBA 13.5: well-known GSI Q_Key */
#define UROCE_MAD_BASE_VERSION 1u       /* IBA 13.4.2 */
#define UROCE_CM_CLASS_VERSION 2u       /* IBA 12.6: CM class version */

/* Management classes (IBA 13.4.4, management class values). */
enum uroce_mgmt_class {
	UROCE_MGMT_CLASS_SUBN_LID    = 0x01, /* Subnet management, LID routed (QP0) */
	UROCE_MGMT_CLASS_SUBN_ADM    = 0x03, /* Subnet administration (SA) */
	UROCE_MGMT_CLASS_PERF        = 0x04, /* Performance management */
	UROCE_MGMT_CLASS_BM          = 0x05, /* Baseboard management */
	UROCE_MGMT_CLASS_DEV_MGT     = 0x06, /* Device management */
	UROCE_MGMT_CLASS_CM          = 0x07, /* Communication management (chapter 12) */
	UROCE_MGMT_CLASS_SNMP        = 0x08, /* SNMP tunnelling */
	UROCE_MGMT_CLASS_VENDOR_LO1  = 0x09, /* 0x09..0x0F vendor specific, range 1 */
	UROCE_MGMT_CLASS_VENDOR_HI1  = 0x0F,
	UROCE_MGMT_CLASS_CC          = 0x21, /* Congestion control (Annex A10) */
	UROCE_MGMT_CLASS_VENDOR_LO2  = 0x30, /* 0x30..0x4F vendor specific with OUI, range 2 */
	UROCE_MGMT_CLASS_VENDOR_HI2  = 0x4F,
	UROCE_MGMT_CLASS_SUBN_DR     = 0x81, /* Subnet management, directed route (QP0) */
};

/* Methods (IBA 13.4.5; the table methods are SubnAdm-only, IBA chapter 15).  Bit 7 is the
 * R (response) bit; the value kept in struct uroce_mad_hdr.method includes it. */
enum uroce_mad_method {
	UROCE_MAD_METHOD_GET             = 0x01,
	UROCE_MAD_METHOD_SET             = 0x02,
	UROCE_MAD_METHOD_SEND            = 0x03,
	UROCE_MAD_METHOD_TRAP            = 0x05,
	UROCE_MAD_METHOD_REPORT          = 0x06,
	UROCE_MAD_METHOD_TRAP_REPRESS    = 0x07,
	UROCE_MAD_METHOD_GET_TABLE       = 0x12,
	UROCE_MAD_METHOD_GET_TRACE_TABLE = 0x13,
	UROCE_MAD_METHOD_GET_MULTI       = 0x14,
	UROCE_MAD_METHOD_DELETE          = 0x15,
	UROCE_MAD_METHOD_RESP            = 0x80, /* the R bit */
	UROCE_MAD_METHOD_GET_RESP        = 0x81,
	UROCE_MAD_METHOD_REPORT_RESP     = 0x86,
	UROCE_MAD_METHOD_GET_TABLE_RESP  = 0x92,
	UROCE_MAD_METHOD_GET_MULTI_RESP  = 0x94,
	UROCE_MAD_METHOD_DELETE_RESP     = 0x95,
};

/* CM attribute IDs (IBA 12.6, "CM attributes"). */
enum uroce_cm_attr {
	UROCE_CM_ATTR_CLASS_PORT_INFO = 0x0001,
	UROCE_CM_ATTR_REQ      = 0x0010,
	UROCE_CM_ATTR_MRA      = 0x0011,
	UROCE_CM_ATTR_REJ      = 0x0012,
	UROCE_CM_ATTR_REP      = 0x0013,
	UROCE_CM_ATTR_RTU      = 0x0014,
	UROCE_CM_ATTR_DREQ     = 0x0015,
	UROCE_CM_ATTR_DREP     = 0x0016,
	UROCE_CM_ATTR_SIDR_REQ = 0x0017,
	UROCE_CM_ATTR_SIDR_REP = 0x0018,
	UROCE_CM_ATTR_LAP      = 0x0019,
	UROCE_CM_ATTR_APR      = 0x001A,
};

/* Private data sizes (the "PrivateData" row of each message table, IBA 12.6). */
#define UROCE_CM_REQ_PRIV      92u
#define UROCE_CM_MRA_PRIV      222u
#define UROCE_CM_REJ_PRIV      148u
#define UROCE_CM_REP_PRIV      196u
#define UROCE_CM_RTU_PRIV      224u
#define UROCE_CM_DREQ_PRIV     220u
#define UROCE_CM_DREP_PRIV     224u
#define UROCE_CM_SIDR_REQ_PRIV 216u
#define UROCE_CM_SIDR_REP_PRIV 136u
#define UROCE_CM_LAP_PRIV      168u
#define UROCE_CM_APR_PRIV      148u
#define UROCE_CM_APR_INFO_MAX  72u  /* APR Additional Information, IBA 12.6 Table 116 */
#define UROCE_CM_ARI_MAX       72u  /* REJ Additional Rejection Information, IBA 12.6 Table 108 */
#define UROCE_CM_SIDR_INFO_MAX 72u  /* SIDR_REP Additional Information (ClassPortInfo) */

/* REJ "Message REJected" (IBA 12.6, Table 108). */
enum uroce_cm_rej_msg { UROCE_CM_REJ_MSG_REQ = 0, UROCE_CM_REJ_MSG_REP = 1, UROCE_CM_REJ_MSG_OTHER = 2 };
/* MRA "Message MRAed" (IBA 12.6, Table 107). */
enum uroce_cm_mra_msg { UROCE_CM_MRA_MSG_REQ = 0, UROCE_CM_MRA_MSG_REP = 1, UROCE_CM_MRA_MSG_LAP = 2 };

/* REJ reason codes (IBA 12.6, the rejection-reason table following Table 108, which
 * also says what the ARI holds for each reason). */
enum uroce_cm_rej_reason {
	UROCE_CM_REJ_NO_QP = 1,
	UROCE_CM_REJ_NO_EEC = 2,
	UROCE_CM_REJ_NO_RESOURCES = 3,
	UROCE_CM_REJ_TIMEOUT = 4,                 /* ARI: CA GUID of the rejecting side */
	UROCE_CM_REJ_UNSUPPORTED = 5,
	UROCE_CM_REJ_INVALID_COMM_ID = 6,
	UROCE_CM_REJ_INVALID_COMM_INSTANCE = 7,
	UROCE_CM_REJ_INVALID_SERVICE_ID = 8,
	UROCE_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	UROCE_CM_REJ_STALE_CONN = 10,
	UROCE_CM_REJ_RDC_NOT_EXIST = 11,
	UROCE_CM_REJ_INVALID_GID = 12,            /* ARI: acceptable GID */
	UROCE_CM_REJ_INVALID_LID = 13,            /* ARI: acceptable LID */
	UROCE_CM_REJ_INVALID_SL = 14,
	UROCE_CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	UROCE_CM_REJ_INVALID_HOP_LIMIT = 16,
	UROCE_CM_REJ_INVALID_PACKET_RATE = 17,
	UROCE_CM_REJ_INVALID_ALT_GID = 18,
	UROCE_CM_REJ_INVALID_ALT_LID = 19,
	UROCE_CM_REJ_INVALID_ALT_SL = 20,
	UROCE_CM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	UROCE_CM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	UROCE_CM_REJ_INVALID_ALT_PACKET_RATE = 23,
	UROCE_CM_REJ_PORT_CM_REDIRECT = 24,       /* ARI: ClassPortInfo */
	UROCE_CM_REJ_PORT_REDIRECT = 25,
	UROCE_CM_REJ_INVALID_MTU = 26,            /* ARI: acceptable MTU */
	UROCE_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	UROCE_CM_REJ_CONSUMER_DEFINED = 28,       /* ARI: consumer defined */
	UROCE_CM_REJ_INVALID_RNR_RETRY = 29,
	UROCE_CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	UROCE_CM_REJ_INVALID_CLASS_VERSION = 31,  /* ARI: highest supported class version */
	UROCE_CM_REJ_INVALID_FLOW_LABEL = 32,
	UROCE_CM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	UROCE_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35, /* ECE, IBA comment 9434 */
};

/* SIDR_REP status (IBA 12.6, Table 120). */
enum uroce_cm_sidr_status {
	UROCE_CM_SIDR_SUCCESS = 0,
	UROCE_CM_SIDR_UNSUPPORTED = 1,     /* service ID not supported */
	UROCE_CM_SIDR_REJECT = 2,          /* rejected by the service provider */
	UROCE_CM_SIDR_NO_QP = 3,
	UROCE_CM_SIDR_REDIRECT = 4,        /* Additional Information holds a ClassPortInfo */
	UROCE_CM_SIDR_UNSUPPORTED_VERSION = 5,
};

/* APR "AP status" (IBA 12.6, Table 116). */
enum uroce_cm_apr_status {
	UROCE_CM_APR_SUCCESS = 0,
	UROCE_CM_APR_INVALID_COMM_ID = 1,
	UROCE_CM_APR_UNSUPPORTED = 2,
	UROCE_CM_APR_REJECT = 3,
	UROCE_CM_APR_REDIRECT = 4,
	UROCE_CM_APR_IS_CURRENT = 5,
	UROCE_CM_APR_INVALID_QPN_EECN = 6,
	UROCE_CM_APR_INVALID_LID = 7,
	UROCE_CM_APR_INVALID_GID = 8,
	UROCE_CM_APR_INVALID_FLOW_LABEL = 9,
	UROCE_CM_APR_INVALID_TCLASS = 10,
	UROCE_CM_APR_INVALID_HOP_LIMIT = 11,
	UROCE_CM_APR_INVALID_PACKET_RATE = 12,
	UROCE_CM_APR_INVALID_SL = 13,
};

/* ---- Common MAD header (IBA 13.4.2) --------------------- */

struct uroce_mad_hdr {
	uint8_t  base_version;   /* 1 */
	uint8_t  mgmt_class;     /* enum uroce_mgmt_class */
	uint8_t  class_version;
	uint8_t  method;         /* R bit (0x80) | method (7 bits) */
	uint16_t status;         /* IBA 13.4.7 */
	uint16_t class_specific;
	uint64_t tid;            /* TransactionID */
	uint16_t attr_id;
	uint16_t resv;           /* reserved, kept for bit-exact re-encoding */
	uint32_t attr_mod;
};

/* A MAD of any class: header + the 232 class bytes, uninterpreted. */
struct uroce_mad {
	struct uroce_mad_hdr hdr;
	uint8_t data[UROCE_MAD_DATA_SIZE];
};

/* Decode / encode the 24-byte header.  decode: 0, -EINVAL, -EMSGSIZE (len < 24).
 * It does not judge the version (callers do).  encode: 24 or -EINVAL / -ENOSPC. */
int uroce_mad_hdr_decode(const uint8_t *buf, size_t len, struct uroce_mad_hdr *h);
int uroce_mad_hdr_encode(const struct uroce_mad_hdr *h, uint8_t *buf, size_t cap);

/* Decode a whole MAD (exactly 256 bytes).  0, or -EINVAL, -EMSGSIZE (< 256),
 * -E2BIG (> 256), -EPROTONOSUPPORT (BaseVersion != 1; @out is still filled). */
int uroce_mad_decode(const uint8_t *buf, size_t len, struct uroce_mad *out);
/* Encode: 256, or -EINVAL / -ENOSPC (cap < 256). */
int uroce_mad_encode(const struct uroce_mad *m, uint8_t *buf, size_t cap);

/* Fill a header for a CM message: BaseVersion 1, class CM, ClassVersion 2,
 * method Send (CM uses only Send, IBA 12.6), the given attribute and TID. */
void uroce_cm_hdr_init(struct uroce_mad_hdr *h, uint16_t attr_id, uint64_t tid);

/* Names (static strings, never NULL; "?" style fallbacks for unknown values). */
const char *uroce_mad_class_name(uint8_t mgmt_class);
const char *uroce_mad_method_name(uint8_t method);
const char *uroce_cm_attr_name(uint16_t attr_id);          /* "REQ", "REP", ... */
const char *uroce_cm_rej_reason_name(uint16_t reason);
const char *uroce_cm_sidr_status_name(uint8_t status);
const char *uroce_cm_apr_status_name(uint8_t status);
/* IB MTU code (as in PathRecord, IBA 15.2.5.16) to bytes: 1..5 -> 256..4096, else 0. */
unsigned uroce_ib_mtu_bytes(uint8_t code);

/* ---- CM messages (IBA 12.6) ---------------------------------------------------- */

/* A path as carried in REQ (primary: data bytes 52..95, alternate: 96..139) and in LAP
 * (bytes 20..63, in a different order, where resv_fl has 4 bits and the 2 bits before
 * the packet rate live in uroce_cm_lap.resv_rate). */
struct uroce_cm_path {
	uint16_t local_lid, remote_lid;     /* Local/Remote Port LID (RoCE: 0xFFFF = permissive) */
	uint8_t  local_gid[16], remote_gid[16];
	uint32_t flow_label;                /* 20 bits */
	uint8_t  resv_fl;                   /* reserved bits after the flow label (REQ 6, LAP 4) */
	uint8_t  packet_rate;               /* 6 bits, IBA 15.2.5.16 rate code */
	uint8_t  traffic_class;
	uint8_t  hop_limit;
	uint8_t  sl;                        /* 4 bits */
	uint8_t  subnet_local;              /* 1 bit */
	uint8_t  resv_sl;                   /* 3 reserved bits */
	uint8_t  local_ack_timeout;         /* 5 bits, 4.096 us * 2^x */
	uint8_t  resv_ack;                  /* 3 bits (REQ alternate: 2, see sap_supported) */
};

/* REQ, ConnectRequest (IBA 12.6, Table 106). */
struct uroce_cm_req {
	uint32_t local_comm_id;
	uint8_t  resv4;                     /* data byte 4 */
	uint32_t vendor_id;                 /* 24 bits, bytes 5..7 (ECE, IBA comment 9434) */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t resv24;                    /* bytes 24..27 */
	uint32_t local_qkey;
	uint32_t local_qpn;                 /* 24 bits */
	uint8_t  responder_resources;
	uint32_t local_eecn;                /* 24 bits */
	uint8_t  initiator_depth;
	uint32_t remote_eecn;               /* 24 bits */
	uint8_t  remote_cm_response_timeout;/* 5 bits */
	uint8_t  transport_service_type;    /* 2 bits: 0 RC, 1 UC, 2 RD, 3 extended (XRC) */
	uint8_t  end_to_end_flow_control;   /* 1 bit */
	uint32_t starting_psn;              /* 24 bits */
	uint8_t  local_cm_response_timeout; /* 5 bits */
	uint8_t  retry_count;               /* 3 bits */
	uint16_t pkey;
	uint8_t  path_mtu;                  /* 4 bits, IB MTU code */
	uint8_t  rdc_exists;                /* 1 bit */
	uint8_t  rnr_retry_count;           /* 3 bits */
	uint8_t  max_cm_retries;            /* 4 bits */
	uint8_t  srq;                       /* 1 bit */
	uint8_t  extended_transport_type;   /* 3 bits (1 = XRC) */
	struct uroce_cm_path primary, alternate;
	uint8_t  sap_supported;             /* 1 bit in byte 139 (alternate.resv_ack keeps 2) */
	uint8_t  private_data[UROCE_CM_REQ_PRIV];
};

/* MRA, Message Receipt Acknowledgement (IBA 12.6, Table 107). */
struct uroce_cm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t  message_mraed;             /* 2 bits, enum uroce_cm_mra_msg */
	uint8_t  resv8;                     /* 6 bits */
	uint8_t  service_timeout;           /* 5 bits */
	uint8_t  resv9;                     /* 3 bits */
	uint8_t  private_data[UROCE_CM_MRA_PRIV];
};

/* REJ, Reject (IBA 12.6, Table 108). */
struct uroce_cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t  message_rejected;          /* 2 bits, enum uroce_cm_rej_msg */
	uint8_t  resv8;                     /* 6 bits */
	uint8_t  reject_info_length;        /* 7 bits, <= 72 */
	uint8_t  resv9;                     /* 1 bit */
	uint16_t reason;                    /* enum uroce_cm_rej_reason */
	uint8_t  ari[UROCE_CM_ARI_MAX];     /* all 72 bytes kept; the first reject_info_length count */
	uint8_t  private_data[UROCE_CM_REJ_PRIV];
};

/* REP, Reply to request for communication (IBA 12.6, Table 110). */
struct uroce_cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;                 /* 24 bits */
	uint32_t local_eecn;                /* 24 bits */
	uint32_t vendor_id;                 /* 24 bits from bytes 15, 19, 23 (ECE) */
	uint32_t starting_psn;              /* 24 bits */
	uint8_t  responder_resources;
	uint8_t  initiator_depth;
	uint8_t  target_ack_delay;          /* 5 bits */
	uint8_t  failover_accepted;         /* 2 bits */
	uint8_t  end_to_end_flow_control;   /* 1 bit */
	uint8_t  rnr_retry_count;           /* 3 bits */
	uint8_t  srq;                       /* 1 bit */
	uint8_t  resv27;                    /* 4 bits */
	uint64_t local_ca_guid;
	uint8_t  private_data[UROCE_CM_REP_PRIV];
};

/* RTU, Ready To Use (IBA 12.6, Table 111). */
struct uroce_cm_rtu {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t  private_data[UROCE_CM_RTU_PRIV];
};

/* DREQ, Disconnect Request (IBA 12.6, Table 112). */
struct uroce_cm_dreq {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn_eecn;           /* 24 bits */
	uint8_t  resv11;
	uint8_t  private_data[UROCE_CM_DREQ_PRIV];
};

/* DREP, Disconnect Reply (IBA 12.6, Table 113). */
struct uroce_cm_drep {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t  private_data[UROCE_CM_DREP_PRIV];
};

/* LAP, Load Alternate Path (IBA 12.6, Table 115). */
struct uroce_cm_lap {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t resv8;                     /* bytes 8..11 */
	uint32_t remote_qpn_eecn;           /* 24 bits */
	uint8_t  remote_cm_response_timeout;/* 5 bits */
	uint8_t  resv15;                    /* 3 bits */
	uint32_t resv16;                    /* bytes 16..19 */
	struct uroce_cm_path alternate;     /* bytes 20..63 */
	uint8_t  resv_rate;                 /* 2 bits before the packet rate (byte 61) */
	uint8_t  private_data[UROCE_CM_LAP_PRIV];
};

/* APR, Alternate Path Response (IBA 12.6, Table 116). */
struct uroce_cm_apr {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t  add_info_length;           /* <= 72 */
	uint8_t  ap_status;                 /* enum uroce_cm_apr_status */
	uint16_t resv10;
	uint8_t  add_info[UROCE_CM_APR_INFO_MAX];
	uint8_t  private_data[UROCE_CM_APR_PRIV];
};

/* SIDR_REQ, Service ID Resolution Request (IBA 12.6, Table 119). */
struct uroce_cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint16_t resv6;
	uint64_t service_id;
	uint8_t  private_data[UROCE_CM_SIDR_REQ_PRIV];
};

/* SIDR_REP, Service ID Resolution Response (IBA 12.6, Table 120). */
struct uroce_cm_sidr_rep {
	uint32_t request_id;
	uint8_t  status;                    /* enum uroce_cm_sidr_status */
	uint8_t  add_info_length;           /* <= 72 */
	uint32_t vendor_id;                 /* 24 bits: bytes 6..7 and 11 (ECE) */
	uint32_t qpn;                       /* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t  add_info[UROCE_CM_SIDR_INFO_MAX]; /* ClassPortInfo when status = REDIRECT */
	uint8_t  private_data[UROCE_CM_SIDR_REP_PRIV];
};

/* A decoded CM MAD.  `hdr.attr_id` selects the union member; any attribute not in the
 * list above (ClassPortInfo, unknown IDs) decodes into `raw`. */
struct uroce_cm_msg {
	struct uroce_mad_hdr hdr;
	union {
		struct uroce_cm_req req;
		struct uroce_cm_mra mra;
		struct uroce_cm_rej rej;
		struct uroce_cm_rep rep;
		struct uroce_cm_rtu rtu;
		struct uroce_cm_dreq dreq;
		struct uroce_cm_drep drep;
		struct uroce_cm_lap lap;
		struct uroce_cm_apr apr;
		struct uroce_cm_sidr_req sidr_req;
		struct uroce_cm_sidr_rep sidr_rep;
		uint8_t raw[UROCE_MAD_DATA_SIZE];
	} u;
};

/* One decoded field, as handed to a uroce_cm_foreach_field() callback: an integer
 * (@bytes NULL) or a byte array (@bytes, @len).  @name is the field's name in this
 * library ("local_qpn", "primary.flow_label", "resv4", ...), static. */
struct uroce_cm_field_value {
	const char *name;
	uint64_t value;
	const uint8_t *bytes;
	size_t len;
};
typedef int (*uroce_cm_field_cb)(void *arg, const struct uroce_cm_field_value *f);
/* Call @cb for every field of @m in wire order (reserved ones included).  Returns 0,
 * the first non-zero callback value, -EINVAL, or -ENOENT for an attribute that
 * decodes as raw bytes. */
int uroce_cm_foreach_field(const struct uroce_cm_msg *m, uroce_cm_field_cb cb, void *arg);

/* 1 if uroce_cm_decode() interprets @attr_id field by field, 0 if it keeps raw bytes. */
int uroce_cm_attr_known(uint16_t attr_id);

/*
 * Decode a 256-byte CM MAD.  Returns 0 and fills @out, or a negative error:
 * -EINVAL, -EMSGSIZE, -E2BIG, -EPROTONOSUPPORT (BaseVersion/ClassVersion), -ENOMSG
 * (class is not CM), -EBADMSG (REJ RejectInfoLength, APR or SIDR_REP
 * AdditionalInformationLength above 72).  Unknown attribute IDs are not an error: they decode into u.raw.
 */
int uroce_cm_decode(const uint8_t *buf, size_t len, struct uroce_cm_msg *out);

/*
 * Encode @m (dispatching on m->hdr.attr_id) into @buf.  Returns 256, -ENOSPC when
 * cap < 256, -EINVAL when a field exceeds its wire width or a length field exceeds 72.
 * The header is written exactly as given (class/version are not forced).
 */
int uroce_cm_encode(const struct uroce_cm_msg *m, uint8_t *buf, size_t cap);

/* Typed encoders: header @h (its attr_id must match the message: -EINVAL otherwise)
 * plus the message.  Same returns as uroce_cm_encode(). */
int uroce_cm_encode_req(const struct uroce_mad_hdr *h, const struct uroce_cm_req *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_mra(const struct uroce_mad_hdr *h, const struct uroce_cm_mra *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_rej(const struct uroce_mad_hdr *h, const struct uroce_cm_rej *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_rep(const struct uroce_mad_hdr *h, const struct uroce_cm_rep *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_rtu(const struct uroce_mad_hdr *h, const struct uroce_cm_rtu *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_dreq(const struct uroce_mad_hdr *h, const struct uroce_cm_dreq *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_drep(const struct uroce_mad_hdr *h, const struct uroce_cm_drep *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_lap(const struct uroce_mad_hdr *h, const struct uroce_cm_lap *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_apr(const struct uroce_mad_hdr *h, const struct uroce_cm_apr *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_sidr_req(const struct uroce_mad_hdr *h, const struct uroce_cm_sidr_req *m, uint8_t *buf, size_t cap);
int uroce_cm_encode_sidr_rep(const struct uroce_mad_hdr *h, const struct uroce_cm_sidr_rep *m, uint8_t *buf, size_t cap);

/* ---- RDMA IP CM service (IBA Annex A11) and the rdma_cm ("CMA") header ------------ */

/* Service ID of an IP-addressed rdma_cm listener (Annex A11.2):
 * 0x0000_0000_01 (40-bit prefix) | IP protocol (8) | port (16).
 * rdma_cm uses protocol 0x06 (RDMA_PS_TCP) and 0x11 (RDMA_PS_UDP), 0x3F (IPoIB), 0x13 (IB). */
#define UROCE_CM_IP_SID_PREFIX 0x0000000001ull
static inline uint64_t uroce_cm_ip_sid(uint8_t proto, uint16_t port)
{
	return (UROCE_CM_IP_SID_PREFIX << 24) | ((uint64_t)proto << 16) | port;
}
static inline int uroce_cm_sid_is_ip(uint64_t sid) { return (sid >> 24) == UROCE_CM_IP_SID_PREFIX; }
static inline uint8_t uroce_cm_sid_proto(uint64_t sid) { return (uint8_t)(sid >> 16); }
static inline uint16_t uroce_cm_sid_port(uint64_t sid) { return (uint16_t)sid; }

/*
 * The 36-byte header rdma_cm puts at the start of REQ and SIDR_REQ private data
 * (Annex A11.4 "IP addressing CM REQ message private data format"): byte 0 =
 * major version (high nibble) / minor version (low nibble) (rdma_cm sends 0x00);
 * byte 1 = IP version (high nibble, 4 or 6) / reserved; bytes 2..3 = source port;
 * bytes 4..19 source IP, 20..35 destination IP — an IPv4 address sits in the last
 * 4 bytes of its 16 with the first 12 zero.  The consumer's own private data follows
 * (56 bytes in REQ, 180 in SIDR_REQ).
 */
#define UROCE_CMA_HDR_SIZE 36u
struct uroce_cma_hdr {
	uint8_t  version;        /* whole byte 0: major << 4 | minor */
	uint8_t  ip_version;     /* high nibble of byte 1: 4 or 6 */
	uint8_t  resv;           /* low nibble of byte 1 */
	uint16_t port;           /* source port, host order */
	uint8_t  src[16], dst[16];
};
/* decode: 0, -EINVAL, -EMSGSIZE (len < 36), -EPROTONOSUPPORT (major version != 0 or
 * IP version not 4/6; @out is still filled). */
int uroce_cma_hdr_decode(const uint8_t *priv, size_t len, struct uroce_cma_hdr *out);
/* encode: 36, -EINVAL (ip_version/resv wider than 4 bits), -ENOSPC. */
int uroce_cma_hdr_encode(const struct uroce_cma_hdr *h, uint8_t *priv, size_t cap);

/* ---- One-line description for the CLI ------------------------------------------ */

/*
 * Describe the MAD in @mad (256 bytes) on one line, e.g.
 *   "CM REQ tid=0x... lcid=0x... sid=0x... qpn=0x2f psn=0x18ffa mtu=1024 ..."
 * Always NUL-terminates when cap > 0.  Returns the number of characters written
 * (excluding the NUL), -ENOSPC if the line did not fit (it is truncated), or a
 * decode error (then @buf holds a short "MAD: <error>" note if it fits).
 */
int uroce_mad_describe(const uint8_t *mad, size_t len, char *buf, size_t cap);

#endif
