/* wire.h — RoCEv2 transport headers: layouts, the opcode table, decode, encode,
 * validation.  Pure C, no I/O, no allocation.
 *
 * A RoCEv2 packet is the UDP payload (RoCEv2 Annex A17.2, UDP port 4791):
 *
 *     BTH (12) | extension headers (per opcode) | payload | pad (0-3) | ICRC (4)
 *
 * Which extension headers follow the BTH, and in which order, depends only on
 * the opcode (IBA 9.2 BTH, 9.3 ETHs, table 43 "Opcodes").  uroce keeps that
 * knowledge in ONE const table of 256 entries (opcode.c); parsing, building,
 * validation and the decoder all take header offsets and lengths from it.
 *
 * Wire structs below are byte arrays (alignment 1), so they can overlay any
 * buffer; fields are read and written only through the explicit big-endian
 * accessors.  Reserved bits are carried through decode and encode unchanged so
 * that encode(decode(p)) == p byte for byte.
 */
#ifndef UROCE_WIRE_WIRE_H
#define UROCE_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/icrc.h"

/* ---------------------------------------------------------------------------
 * Big-endian accessors (all wire fields are big-endian, IBA 9.2 / 9.3).
 */
static inline uint16_t uroce_get_be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t uroce_get_be24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t uroce_get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t uroce_get_be64(const uint8_t *p)
{
	return ((uint64_t)uroce_get_be32(p) << 32) | uroce_get_be32(p + 4);
}

static inline void uroce_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void uroce_put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void uroce_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void uroce_put_be64(uint8_t *p, uint64_t v)
{
	uroce_put_be32(p, (uint32_t)(v >> 32));
	uroce_put_be32(p + 4, (uint32_t)v);
}

/* The ICRC is the one little-endian field (RoCEv2 Annex A17.3.3; rxe_icrc.c). */
static inline uint32_t uroce_get_le32(const uint8_t *p)
{
	return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

static inline void uroce_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* RFC 1071 checksum of a 20-byte IPv4 header (the RoCEv2-over-IPv4 header a UD receive's
 * GRH area holds, Annex A17.4.5.1): the value to store in bytes 10-11 when they are 0, and
 * 0 over a header whose checksum verifies. */
static inline uint16_t uroce_ipv4_csum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

/* ---------------------------------------------------------------------------
 * Wire layouts.  Sizes are fixed by IBA 9.2 and 9.3; asserted below.
 */

/* IBA 9.2 Base Transport Header. */
struct uroce_wire_bth {
	uint8_t opcode;
	uint8_t se_m_pad_tver;  /* SE:1 MigReq:1 PadCnt:2 TVer:4 */
	uint8_t pkey[2];
	uint8_t fecn_becn_resv; /* FECN:1 BECN:1 Resv:6  (RoCEv2 A17.3.3: masked in ICRC) */
	uint8_t dqpn[3];
	uint8_t ackreq_resv;    /* AckReq:1 Resv:7 */
	uint8_t psn[3];
};

#define UROCE_BTH_SE     0x80
#define UROCE_BTH_MIG    0x40
#define UROCE_BTH_PAD_SHIFT 4
#define UROCE_BTH_PAD_MASK  0x30
#define UROCE_BTH_TVER_MASK 0x0F
#define UROCE_BTH_FECN   0x80
#define UROCE_BTH_BECN   0x40
#define UROCE_BTH_RESV6  0x3F
#define UROCE_BTH_ACKREQ 0x80
#define UROCE_BTH_RESV7  0x7F
#define UROCE_TVER       0 /* IBA 9.2.5: only transport version 0 is defined */

/* IBA 9.3.1 RDETH (RD only). */
struct uroce_wire_rdeth {
	uint8_t resv;
	uint8_t een[3];
};

/* IBA 9.3.2 DETH. */
struct uroce_wire_deth {
	uint8_t qkey[4];
	uint8_t resv;
	uint8_t srcqp[3];
};

/* XRCETH (XRC, IBA annex A14): the XRC SRQ number. */
struct uroce_wire_xrceth {
	uint8_t resv;
	uint8_t xrcsrq[3];
};

/* FETH (IBA 1.5 memory placement extensions, FLUSH): selectivity level and
 * placement type in the low bits of a 32-bit word. */
struct uroce_wire_feth {
	uint8_t bits[4];
};

#define UROCE_FETH_PLT_MASK 0x0000000Fu /* placement type */
#define UROCE_FETH_SEL_MASK 0x00000030u /* selectivity level */
#define UROCE_FETH_SEL_SHIFT 4

/* IBA 9.3.3 RETH. */
struct uroce_wire_reth {
	uint8_t va[8];
	uint8_t rkey[4];
	uint8_t len[4];
};

/* IBA 9.3.5 AETH. */
struct uroce_wire_aeth {
	uint8_t syndrome;
	uint8_t msn[3];
};

/* IBA 9.3.4 AtomicETH. */
struct uroce_wire_atmeth {
	uint8_t va[8];
	uint8_t rkey[4];
	uint8_t swap_add[8];
	uint8_t compare[8];
};

/* IBA 9.3.6 AtomicAckETH. */
struct uroce_wire_atmack {
	uint8_t orig[8];
};

/* IBA 9.3.7 ImmDt, 9.3.8 IETH. */
struct uroce_wire_immdt {
	uint8_t imm[4];
};

struct uroce_wire_ieth {
	uint8_t rkey[4];
};

_Static_assert(sizeof(struct uroce_wire_bth) == 12, "BTH is 12 bytes (IBA 9.2)");
_Static_assert(sizeof(struct uroce_wire_rdeth) == 4, "RDETH is 4 bytes (IBA 9.3.1)");
_Static_assert(sizeof(struct uroce_wire_deth) == 8, "DETH is 8 bytes (IBA 9.3.2)");
_Static_assert(sizeof(struct uroce_wire_xrceth) == 4, "XRCETH is 4 bytes");
_Static_assert(sizeof(struct uroce_wire_feth) == 4, "FETH is 4 bytes");
_Static_assert(sizeof(struct uroce_wire_reth) == 16, "RETH is 16 bytes (IBA 9.3.3)");
_Static_assert(sizeof(struct uroce_wire_aeth) == 4, "AETH is 4 bytes (IBA 9.3.5)");
_Static_assert(sizeof(struct uroce_wire_atmeth) == 28, "AtomicETH is 28 bytes (IBA 9.3.4)");
_Static_assert(sizeof(struct uroce_wire_atmack) == 8, "AtomicAckETH is 8 bytes (IBA 9.3.6)");
_Static_assert(sizeof(struct uroce_wire_immdt) == 4, "ImmDt is 4 bytes (IBA 9.3.7)");
_Static_assert(sizeof(struct uroce_wire_ieth) == 4, "IETH is 4 bytes (IBA 9.3.8)");

#define UROCE_ICRC_LEN 4
#define UROCE_ATOMIC_WRITE_LEN 8 /* ATOMIC WRITE carries exactly 8 bytes of payload */
#define UROCE_GSI_QKEY 0x80010000u /* IBA 13.5 (GSI): well-known Q_Key of QP1 */

/* P_Keys (IBA 10.9): the low 15 bits name the partition, bit 15 is the membership, full (1)
 * or limited (0).  0xFFFF is the default partition with full membership, and every GSI
 * (QP1) packet carries it (rxe, the golden captures). */
#define UROCE_PKEY_FULL 0x8000u
#define UROCE_PKEY_PART 0x7FFFu

/* IBA 10.9 (P_Key matching) and 9.6.1.1: two P_Keys match when their low 15 bits are equal
 * and not 0 (partition 0 is the invalid P_Key, which matches nothing, itself included), and
 * at least one of the two is a full member (two limited members must not talk).  Pure. */
static inline bool uroce_pkey_match(uint16_t a, uint16_t b)
{
	return (a & UROCE_PKEY_PART) && (a & UROCE_PKEY_PART) == (b & UROCE_PKEY_PART) &&
	       ((a | b) & UROCE_PKEY_FULL);
}

/* The index of the first of the @n entries of a P_Key table @tbl that @pkey matches, or -1.
 * IBA 9.6.1.1: a packet for QP1 may match any entry of the port's table (other QPs compare
 * with the entry at their own P_Key index).  Pure. */
static inline int uroce_pkey_find(const uint16_t *tbl, unsigned n, uint16_t pkey)
{
	for (unsigned i = 0; i < n; i++)
		if (uroce_pkey_match(pkey, tbl[i]))
			return (int)i;
	return -1;
}

/* AETH syndrome (IBA 9.3.5, table 44): bits 7..5 select the kind. */
enum uroce_aeth_kind {
	UROCE_AETH_ACK = 0,     /* low 5 bits: credit count (31 = invalid/unlimited) */
	UROCE_AETH_RNR_NAK = 1, /* low 5 bits: RNR timer code (IBA table 45) */
	UROCE_AETH_RESV = 2,
	UROCE_AETH_NAK = 3,     /* low 5 bits: enum uroce_nak_code */
};

enum uroce_nak_code {
	UROCE_NAK_PSN_SEQ = 0,
	UROCE_NAK_INVALID_REQ = 1,
	UROCE_NAK_REMOTE_ACCESS = 2,
	UROCE_NAK_REMOTE_OP = 3,
	UROCE_NAK_INVALID_RD_REQ = 4,
};

/* RNR NAK timer code -> microseconds (IBA 9.7.5.2.8, table 45); code 0 is the
 * longest (655.36 ms).  Only the low 5 bits of @code are used. */
uint32_t uroce_rnr_timer_usec(unsigned code);

/* "PSN_SEQ_ERR", "INVALID_REQ", ... for a NAK code; "NAK_RESERVED" otherwise. */
const char *uroce_nak_code_name(unsigned code);

static inline unsigned uroce_aeth_kind(uint8_t syndrome)
{
	return syndrome >> 5;
}

static inline unsigned uroce_aeth_value(uint8_t syndrome)
{
	return syndrome & 0x1F;
}

static inline uint8_t uroce_aeth_syndrome(unsigned kind, unsigned value)
{
	return (uint8_t)(((kind & 7u) << 5) | (value & 0x1Fu));
}

/* ---------------------------------------------------------------------------
 * The opcode table.
 */

/* Header kinds, in the order they appear on the wire after the BTH.  One
 * canonical order fits every opcode of IBA table 43: RD's RDETH precedes the
 * DETH, XRC's XRCETH comes first, FLUSH has FETH before RETH, WRITE-with-Imm
 * has RETH before ImmDt, ATOMIC ACK has AETH before AtomicAckETH. */
enum uroce_hdr {
	UROCE_HDR_BTH,
	UROCE_HDR_RDETH,
	UROCE_HDR_DETH,
	UROCE_HDR_XRCETH,
	UROCE_HDR_FETH,
	UROCE_HDR_RETH,
	UROCE_HDR_AETH,
	UROCE_HDR_ATMETH,
	UROCE_HDR_ATMACK,
	UROCE_HDR_IMMDT,
	UROCE_HDR_IETH,
	UROCE_HDR_NUM
};

/* Bits of uroce_opcode_info.mask: bit h (h < UROCE_HDR_NUM) says header h is
 * present; the rest describe the opcode. */
#define UROCE_OPF_HDR(h)      (1u << (h))
#define UROCE_OPF_RDETH       UROCE_OPF_HDR(UROCE_HDR_RDETH)
#define UROCE_OPF_DETH        UROCE_OPF_HDR(UROCE_HDR_DETH)
#define UROCE_OPF_XRCETH      UROCE_OPF_HDR(UROCE_HDR_XRCETH)
#define UROCE_OPF_FETH        UROCE_OPF_HDR(UROCE_HDR_FETH)
#define UROCE_OPF_RETH        UROCE_OPF_HDR(UROCE_HDR_RETH)
#define UROCE_OPF_AETH        UROCE_OPF_HDR(UROCE_HDR_AETH)
#define UROCE_OPF_ATMETH      UROCE_OPF_HDR(UROCE_HDR_ATMETH)
#define UROCE_OPF_ATMACK      UROCE_OPF_HDR(UROCE_HDR_ATMACK)
#define UROCE_OPF_IMMDT       UROCE_OPF_HDR(UROCE_HDR_IMMDT)
#define UROCE_OPF_IETH        UROCE_OPF_HDR(UROCE_HDR_IETH)
#define UROCE_OPF_HDRS        ((1u << UROCE_HDR_NUM) - 1)
#define UROCE_OPF_PAYLOAD     (1u << 11) /* may carry payload */
#define UROCE_OPF_REQ         (1u << 12) /* requester -> responder */
#define UROCE_OPF_RESP        (1u << 13) /* responder -> requester */
#define UROCE_OPF_ACK         (1u << 14) /* ACKNOWLEDGE / ATOMIC ACKNOWLEDGE */
#define UROCE_OPF_SEND        (1u << 15)
#define UROCE_OPF_WRITE       (1u << 16)
#define UROCE_OPF_READ        (1u << 17) /* read request or read response */
#define UROCE_OPF_ATOMIC      (1u << 18) /* CmpSwap / FetchAdd request or ATOMIC ACK */
#define UROCE_OPF_ATOMIC_WRITE (1u << 19)
#define UROCE_OPF_FLUSH       (1u << 20)
#define UROCE_OPF_IMM         (1u << 21)
#define UROCE_OPF_INV         (1u << 22)
#define UROCE_OPF_FIRST       (1u << 23) /* starts a message */
#define UROCE_OPF_MIDDLE      (1u << 24)
#define UROCE_OPF_LAST        (1u << 25) /* ends a message; ONLY = FIRST|LAST */
#define UROCE_OPF_ONLY        (UROCE_OPF_FIRST | UROCE_OPF_LAST)
#define UROCE_OPF_UNSUPPORTED (1u << 26) /* defined by IBA, not implemented by uroce (RD, XRC, CNP) */
#define UROCE_OPF_CNP         (1u << 27) /* RoCEv2 congestion notification (A17.9) */

/* Transport: the top 3 bits of the opcode (IBA 9.2.1, table 42). */
enum uroce_transport {
	UROCE_TRANSPORT_RC = 0,
	UROCE_TRANSPORT_UC = 1,
	UROCE_TRANSPORT_RD = 2,
	UROCE_TRANSPORT_UD = 3,
	UROCE_TRANSPORT_CNP = 4,
	UROCE_TRANSPORT_XRC = 5,
	UROCE_TRANSPORT_RESV6 = 6,
	UROCE_TRANSPORT_RESV7 = 7,
};

static inline enum uroce_transport uroce_opcode_transport(uint8_t opcode)
{
	return (enum uroce_transport)(opcode >> 5);
}

/* Well-known opcodes (IBA table 43).  Low 5 bits = operation, top 3 = transport. */
enum uroce_opcode {
	UROCE_OP_SEND_FIRST = 0x00,
	UROCE_OP_SEND_MIDDLE = 0x01,
	UROCE_OP_SEND_LAST = 0x02,
	UROCE_OP_SEND_LAST_IMM = 0x03,
	UROCE_OP_SEND_ONLY = 0x04,
	UROCE_OP_SEND_ONLY_IMM = 0x05,
	UROCE_OP_WRITE_FIRST = 0x06,
	UROCE_OP_WRITE_MIDDLE = 0x07,
	UROCE_OP_WRITE_LAST = 0x08,
	UROCE_OP_WRITE_LAST_IMM = 0x09,
	UROCE_OP_WRITE_ONLY = 0x0A,
	UROCE_OP_WRITE_ONLY_IMM = 0x0B,
	UROCE_OP_READ_REQ = 0x0C,
	UROCE_OP_READ_RESP_FIRST = 0x0D,
	UROCE_OP_READ_RESP_MIDDLE = 0x0E,
	UROCE_OP_READ_RESP_LAST = 0x0F,
	UROCE_OP_READ_RESP_ONLY = 0x10,
	UROCE_OP_ACK = 0x11,
	UROCE_OP_ATOMIC_ACK = 0x12,
	UROCE_OP_CMP_SWAP = 0x13,
	UROCE_OP_FETCH_ADD = 0x14,
	UROCE_OP_RESYNC = 0x15, /* RD only */
	UROCE_OP_SEND_LAST_INV = 0x16,
	UROCE_OP_SEND_ONLY_INV = 0x17,
	UROCE_OP_FLUSH = 0x1C,
	UROCE_OP_ATOMIC_WRITE = 0x1D,

	UROCE_OP_RC = 0x00, /* add to an operation for the transport */
	UROCE_OP_UC = 0x20,
	UROCE_OP_RD = 0x40,
	UROCE_OP_UD = 0x60,
	UROCE_OP_XRC = 0xA0,
	UROCE_OP_CNP = 0x81, /* RoCEv2 CNP (Annex A17.9.2) */
};

#define UROCE_BTH_LEN 12
#define UROCE_CNP_RESV_LEN 16 /* a CNP's 16 reserved bytes, carried as payload */

struct uroce_opcode_info {
	const char *name;           /* "RC_SEND_ONLY"; NULL for a reserved opcode */
	uint32_t mask;              /* UROCE_OPF_* */
	uint8_t length;             /* BTH + all extension headers, bytes */
	uint8_t offset[UROCE_HDR_NUM]; /* offset of each present header from the BTH */
};

/* The table, indexed by opcode.  Entries with name == NULL are reserved. */
extern const struct uroce_opcode_info uroce_opcode_table[256];

/* Sizes of each header kind, indexed by enum uroce_hdr. */
extern const uint8_t uroce_hdr_len[UROCE_HDR_NUM];
/* Short names of the header kinds ("BTH", "RETH", ...). */
extern const char *const uroce_hdr_name[UROCE_HDR_NUM];

static inline const struct uroce_opcode_info *uroce_opcode(uint8_t opcode)
{
	return &uroce_opcode_table[opcode];
}

/* Name of an opcode, or "RESERVED_0xNN" style text in a static buffer for
 * reserved ones.  Never NULL.  Not thread-safe for reserved opcodes. */
const char *uroce_opcode_name(uint8_t opcode);

/* ---------------------------------------------------------------------------
 * A decoded packet: every field of every header, reserved bits included, and
 * pointers into the buffer it was decoded from (which it does not own).
 */
struct uroce_bth {
	uint8_t opcode;
	bool se, mig;
	uint8_t padcnt;  /* 0..3 */
	uint8_t tver;    /* 0..15 */
	uint16_t pkey;
	bool fecn, becn;
	uint8_t resv6;   /* byte 4, low 6 bits */
	uint32_t dqpn;   /* 24 bits */
	bool ackreq;
	uint8_t resv7;   /* byte 8, low 7 bits */
	uint32_t psn;    /* 24 bits */
};

struct uroce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
};

struct uroce_aeth {
	uint8_t syndrome;
	uint32_t msn;    /* 24 bits */
};

struct uroce_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};

struct uroce_deth {
	uint32_t qkey;
	uint8_t resv;
	uint32_t srcqp;  /* 24 bits */
};

struct uroce_rdeth {
	uint8_t resv;
	uint32_t een;    /* 24 bits */
};

struct uroce_xrceth {
	uint8_t resv;
	uint32_t xrcsrq; /* 24 bits */
};

struct uroce_pkt {
	const struct uroce_opcode_info *op; /* table entry of bth.opcode */
	struct uroce_bth bth;
	struct uroce_rdeth rdeth;
	struct uroce_deth deth;
	struct uroce_xrceth xrceth;
	uint32_t feth;          /* raw FETH word */
	struct uroce_reth reth;
	struct uroce_aeth aeth;
	struct uroce_atmeth atmeth;
	uint64_t atmack;        /* AtomicAckETH original remote data */
	uint32_t imm;           /* ImmDt as the numeric value of its 4 big-endian bytes */
	uint32_t ieth;          /* R_Key to invalidate */

	const uint8_t *payload; /* first payload byte (after the headers) */
	uint32_t payload_len;   /* payload bytes, pad excluded */
	uint8_t pad[3];         /* the pad bytes as received (normally zero) */
	uint32_t len;           /* whole UDP payload: headers + payload + pad + ICRC */
	uint32_t icrc;          /* the ICRC field (little-endian on the wire) */

	/* Filled by uroce_pkt_validate() when it checks the ICRC. */
	enum uroce_icrc_status icrc_status;
	uint16_t ip_id;         /* recovered IPv4 Identification (UROCE_ICRC_OK_ID) */
};

/* Pad needed after @payload_len bytes so that payload + pad is a multiple of 4. */
static inline unsigned uroce_pad_for(size_t payload_len)
{
	return (unsigned)(-payload_len & 3u);
}

/* Whole UDP payload size of an opcode carrying @payload_len bytes (headers +
 * payload + pad + ICRC).  0 for a reserved opcode. */
size_t uroce_pkt_size(uint8_t opcode, size_t payload_len);

/*
 * Decode the headers of @buf (len bytes) into @p.  Does NOT validate: call it
 * only on a buffer that uroce_pkt_validate() accepted, or after checking
 * len >= table length + 4 yourself (the fuzzer checks this contract).
 * padcnt/payload are derived from the BTH pad count clamped to what is there.
 */
void uroce_pkt_decode(const uint8_t *buf, size_t len, struct uroce_pkt *p);

/*
 * Write BTH + extension headers for p->bth.opcode from the fields of @p into
 * @buf.  Sizes and offsets come from the opcode table.  Returns the header
 * length, -EINVAL for a reserved opcode, -ENOSPC if @cap is too small.
 */
long uroce_pkt_build_hdrs(uint8_t *buf, size_t cap, const struct uroce_pkt *p);

/* Write the 12-byte BTH @h at @buf (IBA 9.2), as uroce_pkt_build_hdrs writes it: for a
 * sender that builds a run of packets whose only header is the BTH (the MIDDLE packets
 * of a message) from one template. */
void uroce_bth_put(uint8_t *buf, const struct uroce_bth *h);

/* The headers of an Acknowledge packet (IBA 9.7.5.1; opcode @h->opcode, an RC or XRC
 * ACKNOWLEDGE): the BTH @h and an AETH of @syndrome and @msn, UROCE_ACK_HDR_LEN bytes at
 * @buf, as uroce_pkt_build_hdrs writes them.  A responder sends one for nearly every
 * request it takes, so this skips the table-driven encoder. */
#define UROCE_ACK_HDR_LEN (UROCE_BTH_LEN + 4)
void uroce_ack_put(uint8_t *buf, const struct uroce_bth *h, uint8_t syndrome, uint32_t msn);

/*
 * Write a whole packet: headers (as uroce_pkt_build_hdrs), p->payload_len bytes
 * from p->payload, p->bth.padcnt pad bytes from p->pad, and p->icrc little-endian.
 * This is the exact inverse of decode: encode(decode(x)) == x.  Returns the
 * length, -EINVAL (reserved opcode, NULL payload with a length), -ENOSPC.
 * To send, follow with uroce_icrc_set_*() to fill in the real ICRC.
 */
long uroce_pkt_encode(uint8_t *buf, size_t cap, const struct uroce_pkt *p);

/* ---------------------------------------------------------------------------
 * Validation of a received UDP payload.
 */
#define UROCE_RX_ERRORS(X)                                                             \
	X(OK, "ok")                                                                    \
	X(TOO_SHORT, "shorter than BTH + ICRC")                                        \
	X(BAD_TVER, "BTH transport version is not 0")                                  \
	X(OPCODE_RESERVED, "reserved opcode")                                          \
	X(OPCODE_UNSUPPORTED, "opcode of a transport uroce does not implement")        \
	X(HDR_TRUNCATED, "too short for the opcode's headers + ICRC")                  \
	X(LEN_UNALIGNED, "length not a multiple of 4")                                 \
	X(PAYLOAD_NOT_ALLOWED, "payload on an opcode that carries none")               \
	X(PAD_EXCEEDS_PAYLOAD, "pad count larger than the bytes after the headers")    \
	X(PAD_INCONSISTENT, "pad count on an opcode or position that allows none")     \
	X(PAYLOAD_LENGTH, "payload length wrong for the opcode")                       \
	X(PAYLOAD_EXCEEDS_MTU, "payload larger than the path MTU")                     \
	X(PAYLOAD_NOT_PMTU, "first/middle packet payload is not exactly the path MTU") \
	X(BAD_ICRC, "ICRC mismatch")                                                   \
	X(BAD_ICRC_ID, "ICRC matches only for an IPv4 ID this sender does not use")

enum uroce_rx_err {
#define X(n, d) UROCE_RX_##n,
	UROCE_RX_ERRORS(X)
#undef X
	UROCE_RX_NUM
};

/* Short name ("BAD_ICRC") and description of a reason; never NULL. */
const char *uroce_rx_err_name(enum uroce_rx_err e);
const char *uroce_rx_err_desc(enum uroce_rx_err e);

struct uroce_rx_ctx {
	uint32_t mtu;                         /* path MTU (IBA 256..4096); 0 = no MTU checks */
	const struct uroce_icrc_addr *addr;   /* NULL = do not check the ICRC */
	unsigned icrc_flags;                  /* UROCE_ICRC_RX_* */
	bool allow_unsupported;               /* accept RD/XRC/CNP opcodes (decoder tools) */
};

/*
 * Check a received UDP payload and decode it into @p.  Reads only buf[0..len).
 * Checks, in order: length >= BTH+ICRC, TVer, opcode defined, transport
 * supported, length >= headers+ICRC, 4-byte alignment, pad count / payload
 * rules, MTU, then the ICRC (if ctx->addr).  Returns UROCE_RX_OK or the first
 * failed check.  @p is filled whenever the headers were long enough to decode
 * (>= HDR_TRUNCATED passed); otherwise only p->bth (if >= 12 bytes) is set.
 */
enum uroce_rx_err uroce_pkt_validate(const uint8_t *buf, size_t len, const struct uroce_rx_ctx *ctx,
				     struct uroce_pkt *p);

#endif
