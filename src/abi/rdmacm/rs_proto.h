/*
 * rs_proto.h — the rsocket wire protocol of rdma-core v44 (librdmacm/rsocket.c and
 * librdmacm/docs/rsocket), as uroce puts it on the wire.  Pure C, no I/O: the encoders
 * and decoders of everything an rsocket peer reads, so that tests can pin the bytes.
 * docs/rsocket.md has the same tables with the reasons.
 *
 * Stream rsockets (RC):
 *
 *   connection data   40 bytes, the user private data of the REQ (after the CMA
 *                     header) and the whole private data of the REP:
 *                     0 version (1) · 1 flags · 2-3 credits (be16) · 4-6 reserved (0) ·
 *                     7 target_iomap_size (scale code) · 8-23 target_sgl · 24-39 data_buf,
 *                     each {addr be64, key be32, length be32}
 *   message           the 32-bit immediate of an RDMA WRITE WITH IMMEDIATE (big-endian on
 *                     the wire, as every immediate): op = bits 31-29, data = bits 28-0
 *   rs_sge            16 bytes {addr u64, key u32, length u32} written by the peer into
 *                     our target SGL, in the byte order of the *reader* (big-endian if
 *                     the reader's connection data had RS_CONN_FLAG_NET, else little)
 *   rs_iomap          24 bytes {offset u64, rs_sge}, same byte-order rule
 *
 * Datagram rsockets (UD + a UDP socket):
 *
 *   ds_udp_header     before a datagram sent over UDP (before the peer's QPN is known)
 *                     and alone in the reply that gives our QPN:
 *                     0-3 tag 0x55555555 · 4 version (4/6) · 5 op (RS_OP_DATA/RS_OP_CTRL) ·
 *                     6 length (16/28) · 7 reserved · 8-11 qpn (be32, 24 bits) · 12.. addr
 *   ds_header         before a datagram on a UD QP: 0 version (4/6) · 1 length (8/24) ·
 *                     2-3 port (network order) · IPv4: 4-7 address · IPv6: 4-7 flow info,
 *                     8-23 address
 */
#ifndef UROCE_ABI_RDMACM_RS_PROTO_H
#define UROCE_ABI_RDMACM_RS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RS_PROTO_VERSION 1
#define RS_CONN_FLAG_NET   0x01   /* the sender of the connection data is big-endian */
#define RS_CONN_FLAG_IOMAP 0x02   /* target_iomap_size is meaningful (v44 always sets it) */
#define RS_CONN_DATA_LEN 40
#define RS_SGE_LEN 16
#define RS_IOMAP_LEN 24
#define RS_SGL_SIZE 2             /* target SGL entries each side offers */

/* The 3-bit message types of the immediate (docs/rsocket "Message Format"). */
enum rs_op {
	RS_OP_DATA = 0,           /* data = bytes written into the current target SGE */
	RS_OP_RSVD_DATA_MORE = 1, /* reserved */
	RS_OP_WRITE = 2,          /* local marker of riowrite's plain WRITEs: never on the wire */
	RS_OP_RSVD_DRA_MORE = 3,  /* reserved */
	RS_OP_SGL = 4,            /* data = new credit limit (the receiver's rseq_no + rq_size) */
	RS_OP_RSVD = 5,           /* reserved */
	RS_OP_IOMAP_SGL = 6,      /* data = index of the iomap entry just written */
	RS_OP_CTRL = 7,           /* data = enum rs_ctrl */
};

enum rs_ctrl {
	RS_CTRL_DISCONNECT = 0,
	RS_CTRL_KEEPALIVE = 1,    /* a 0-byte RDMA WRITE (no immediate) carries it */
	RS_CTRL_SHUTDOWN = 2,
};

#define RS_MSG_DATA_MASK 0x1FFFFFFFu

static inline uint32_t rs_msg(unsigned op, uint32_t data)
{
	return ((uint32_t)op << 29) | (data & RS_MSG_DATA_MASK);
}

static inline unsigned rs_msg_op(uint32_t msg)
{
	return msg >> 29;
}

static inline uint32_t rs_msg_data(uint32_t msg)
{
	return msg & RS_MSG_DATA_MASK;
}

/* An rs_sge in host form. */
struct rs_sge_h {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* struct rs_conn_data in host form. */
struct rs_conn_h {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t iomap_scale;      /* target_iomap_size as sent (rs_value_to_scale) */
	struct rs_sge_h target_sgl;   /* length = number of entries */
	struct rs_sge_h data_buf;     /* the first receive buffer */
};

void rs_conn_put(uint8_t out[RS_CONN_DATA_LEN], const struct rs_conn_h *c);
void rs_conn_get(const uint8_t in[RS_CONN_DATA_LEN], struct rs_conn_h *c);

/* The checks a receiver of connection data makes: 0, -ENOTSUP for a version other
 * than 1 (rdma-core refuses those too), -EPROTO for a target SGL with fewer than
 * RS_SGL_SIZE entries (the first credit update goes to entry 1) or too many. */
int rs_conn_check(const uint8_t *in, size_t len, struct rs_conn_h *c);

/* The 8-bit iomap size code: values up to 128 as they are, larger ones as
 * 0x80 | value >> 8 (rdma-core's rs_value_to_scale / rs_scale_to_value, bits = 8). */
uint8_t rs_value_to_scale(uint32_t value);
uint32_t rs_scale_to_value(uint8_t scale);

/* rs_sge / rs_iomap in the reader's order (be: the reader announced RS_CONN_FLAG_NET). */
void rs_sge_put(uint8_t out[RS_SGE_LEN], const struct rs_sge_h *s, bool be);
void rs_sge_get(const uint8_t in[RS_SGE_LEN], struct rs_sge_h *s, bool be);
void rs_iomap_put(uint8_t out[RS_IOMAP_LEN], uint64_t offset, const struct rs_sge_h *s, bool be);
void rs_iomap_get(const uint8_t in[RS_IOMAP_LEN], uint64_t *offset, struct rs_sge_h *s, bool be);

/* This host's RS_CONN_FLAG_NET. */
static inline bool rs_host_is_be(void)
{
	return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

/* ---- datagrams ---- */
#define DS_UDP_TAG 0x55555555u
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_IPV4_HDR_LEN 8
#define DS_IPV6_HDR_LEN 24
#define DS_HDR_MAX DS_IPV6_HDR_LEN

/* The ds_header of a datagram from `src` (AF_INET / AF_INET6): its length, 0 for
 * another family. */
size_t ds_hdr_put(uint8_t *out, const struct sockaddr *src);
/* A received ds_header (len bytes available): its length and the source address in
 * *sa (*salen set to the address's size), or 0 if it is not a valid header. */
size_t ds_hdr_get(const uint8_t *in, size_t len, struct sockaddr_storage *sa, socklen_t *salen);

struct ds_udp_h {
	uint8_t version;          /* 4 or 6 */
	uint8_t op;               /* RS_OP_DATA or RS_OP_CTRL */
	uint8_t length;           /* header length */
	uint32_t qpn;             /* 24 bits */
};

/* A ds_udp_header for (version, op, qpn) with the local address of the sending QP
 * (the ds_header's address bytes: for IPv6 rdma-core copies 16 bytes starting at the
 * flow info, i.e. flow info and the first 12 address bytes, and so does uroce).
 * Returns the length. */
size_t ds_udp_put(uint8_t *out, uint8_t op, uint32_t qpn, const uint8_t *ds_hdr);
/* A received UDP datagram's header, checked as rdma-core's udp_svc_valid_udp_hdr
 * (tag, version that matches the sender's family, length): its length, 0 if invalid. */
size_t ds_udp_get(const uint8_t *in, size_t len, int family, struct ds_udp_h *h);

#endif
