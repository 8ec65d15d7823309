/* opcode.c — the one opcode table (IBA 9.2.1 table 42/43, RoCEv2 Annex A17).
 *
 * Each entry lists which headers the opcode carries and what it means; the
 * offsets and total header length are computed at compile time from that mask,
 * using the canonical header order of enum uroce_hdr (wire.h).  Decode, encode,
 * validation and the CLI all read this table; nothing else knows which opcode
 * carries which header.
 *
 * uroce implements RC, UC and UD (as Linux rxe does).  RD (IBA 9.7/9.8 RD
 * chapters) and XRC (annex A14) opcodes are listed with their real layouts but
 * flagged UROCE_OPF_UNSUPPORTED, so a validator rejects them with a precise
 * reason and the decoder can still print them.  Opcodes absent from the table
 * (name == NULL) are reserved.
 */
#include <stdio.h>

#include "wire/wire.h"

const uint8_t uroce_hdr_len[UROCE_HDR_NUM] = {
	[UROCE_HDR_BTH] = sizeof(struct uroce_wire_bth),
	[UROCE_HDR_RDETH] = sizeof(struct uroce_wire_rdeth),
	[UROCE_HDR_DETH] = sizeof(struct uroce_wire_deth),
	[UROCE_HDR_XRCETH] = sizeof(struct uroce_wire_xrceth),
	[UROCE_HDR_FETH] = sizeof(struct uroce_wire_feth),
	[UROCE_HDR_RETH] = sizeof(struct uroce_wire_reth),
	[UROCE_HDR_AETH] = sizeof(struct uroce_wire_aeth),
	[UROCE_HDR_ATMETH] = sizeof(struct uroce_wire_atmeth),
	[UROCE_HDR_ATMACK] = sizeof(struct uroce_wire_atmack),
	[UROCE_HDR_IMMDT] = sizeof(struct uroce_wire_immdt),
	[UROCE_HDR_IETH] = sizeof(struct uroce_wire_ieth),
};

const char *const uroce_hdr_name[UROCE_HDR_NUM] = {
	[UROCE_HDR_BTH] = "BTH",       [UROCE_HDR_RDETH] = "RDETH",   [UROCE_HDR_DETH] = "DETH",
	[UROCE_HDR_XRCETH] = "XRCETH", [UROCE_HDR_FETH] = "FETH",     [UROCE_HDR_RETH] = "RETH",
	[UROCE_HDR_AETH] = "AETH",     [UROCE_HDR_ATMETH] = "AtomicETH",
	[UROCE_HDR_ATMACK] = "AtomicAckETH", [UROCE_HDR_IMMDT] = "ImmDt", [UROCE_HDR_IETH] = "IETH",
};

/* Compile-time layout: literal header sizes (checked against wire.h below), the
 * size of header h if present in mask m, and the offset
 * of header h = BTH + sizes of the present headers before it. */
#define L_RDETH  4
#define L_DETH   8
#define L_XRCETH 4
#define L_FETH   4
#define L_RETH   16
#define L_AETH   4
#define L_ATMETH 28
#define L_ATMACK 8
#define L_IMMDT  4
#define L_IETH   4
#define HS(m, h) (((m) & UROCE_OPF_##h) ? L_##h : 0)
#define O_RDETH(m)  UROCE_BTH_LEN
#define O_DETH(m)   (O_RDETH(m) + HS(m, RDETH))
#define O_XRCETH(m) (O_DETH(m) + HS(m, DETH))
#define O_FETH(m)   (O_XRCETH(m) + HS(m, XRCETH))
#define O_RETH(m)   (O_FETH(m) + HS(m, FETH))
#define O_AETH(m)   (O_RETH(m) + HS(m, RETH))
#define O_ATMETH(m) (O_AETH(m) + HS(m, AETH))
#define O_ATMACK(m) (O_ATMETH(m) + HS(m, ATMETH))
#define O_IMMDT(m)  (O_ATMACK(m) + HS(m, ATMACK))
#define O_IETH(m)   (O_IMMDT(m) + HS(m, IMMDT))
#define O_END(m)    (O_IETH(m) + HS(m, IETH))
#define OFF(m, h)   (((m) & UROCE_OPF_##h) ? O_##h(m) : 0)

#define ENTRY(nm, m)                                                                  \
	{                                                                             \
		.name = nm, .mask = (m), .length = O_END(m),                          \
		.offset = {                                                           \
			[UROCE_HDR_BTH] = 0,                                          \
			[UROCE_HDR_RDETH] = OFF(m, RDETH),                            \
			[UROCE_HDR_DETH] = OFF(m, DETH),                              \
			[UROCE_HDR_XRCETH] = OFF(m, XRCETH),                          \
			[UROCE_HDR_FETH] = OFF(m, FETH),                              \
			[UROCE_HDR_RETH] = OFF(m, RETH),                              \
			[UROCE_HDR_AETH] = OFF(m, AETH),                              \
			[UROCE_HDR_ATMETH] = OFF(m, ATMETH),                          \
			[UROCE_HDR_ATMACK] = OFF(m, ATMACK),                          \
			[UROCE_HDR_IMMDT] = OFF(m, IMMDT),                            \
			[UROCE_HDR_IETH] = OFF(m, IETH),                              \
		},                                                                    \
	}

/* Operation flags shared by every transport. */
#define F_PAY      UROCE_OPF_PAYLOAD
#define F_REQ      UROCE_OPF_REQ
#define F_RESP     UROCE_OPF_RESP
#define SEND_F     (F_REQ | UROCE_OPF_SEND | F_PAY | UROCE_OPF_FIRST)
#define SEND_M     (F_REQ | UROCE_OPF_SEND | F_PAY | UROCE_OPF_MIDDLE)
#define SEND_L     (F_REQ | UROCE_OPF_SEND | F_PAY | UROCE_OPF_LAST)
#define SEND_O     (F_REQ | UROCE_OPF_SEND | F_PAY | UROCE_OPF_ONLY)
#define WRITE_F    (F_REQ | UROCE_OPF_WRITE | F_PAY | UROCE_OPF_FIRST | UROCE_OPF_RETH)
#define WRITE_M    (F_REQ | UROCE_OPF_WRITE | F_PAY | UROCE_OPF_MIDDLE)
#define WRITE_L    (F_REQ | UROCE_OPF_WRITE | F_PAY | UROCE_OPF_LAST)
#define WRITE_O    (F_REQ | UROCE_OPF_WRITE | F_PAY | UROCE_OPF_ONLY | UROCE_OPF_RETH)
#define IMM        (UROCE_OPF_IMM | UROCE_OPF_IMMDT)
#define INV        (UROCE_OPF_INV | UROCE_OPF_IETH)
#define READ_REQ   (F_REQ | UROCE_OPF_READ | UROCE_OPF_ONLY | UROCE_OPF_RETH)
#define READ_RSP   (F_RESP | UROCE_OPF_READ | F_PAY)
#define ACK        (F_RESP | UROCE_OPF_ACK | UROCE_OPF_ONLY | UROCE_OPF_AETH)
#define ATOMIC_ACK (ACK | UROCE_OPF_ATOMIC | UROCE_OPF_ATMACK)
#define ATOMIC     (F_REQ | UROCE_OPF_ATOMIC | UROCE_OPF_ONLY | UROCE_OPF_ATMETH)
#define FLUSH      (F_REQ | UROCE_OPF_FLUSH | UROCE_OPF_ONLY | UROCE_OPF_FETH | UROCE_OPF_RETH)
#define ATOMIC_WR  (F_REQ | UROCE_OPF_ATOMIC_WRITE | F_PAY | UROCE_OPF_ONLY | UROCE_OPF_RETH)
#define NOSUP      UROCE_OPF_UNSUPPORTED
/* RD requests carry RDETH + DETH, RD responses RDETH (IBA 9.3.1/9.3.2). */
#define RDQ        (NOSUP | UROCE_OPF_RDETH | UROCE_OPF_DETH)
#define RDR        (NOSUP | UROCE_OPF_RDETH)
/* XRC requests carry XRCETH; responses are RC-shaped (annex A14). */
#define XRQ        (NOSUP | UROCE_OPF_XRCETH)
#define XRR        NOSUP

const struct uroce_opcode_info uroce_opcode_table[256] = {
	/* RC: IBA table 43, plus FLUSH/ATOMIC WRITE (IBA 1.5 memory placement). */
	[0x00] = ENTRY("RC_SEND_FIRST", SEND_F),
	[0x01] = ENTRY("RC_SEND_MIDDLE", SEND_M),
	[0x02] = ENTRY("RC_SEND_LAST", SEND_L),
	[0x03] = ENTRY("RC_SEND_LAST_WITH_IMMEDIATE", SEND_L | IMM),
	[0x04] = ENTRY("RC_SEND_ONLY", SEND_O),
	[0x05] = ENTRY("RC_SEND_ONLY_WITH_IMMEDIATE", SEND_O | IMM),
	[0x06] = ENTRY("RC_RDMA_WRITE_FIRST", WRITE_F),
	[0x07] = ENTRY("RC_RDMA_WRITE_MIDDLE", WRITE_M),
	[0x08] = ENTRY("RC_RDMA_WRITE_LAST", WRITE_L),
	[0x09] = ENTRY("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", WRITE_L | IMM),
	[0x0A] = ENTRY("RC_RDMA_WRITE_ONLY", WRITE_O),
	[0x0B] = ENTRY("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", WRITE_O | IMM),
	[0x0C] = ENTRY("RC_RDMA_READ_REQUEST", READ_REQ),
	[0x0D] = ENTRY("RC_RDMA_READ_RESPONSE_FIRST", READ_RSP | UROCE_OPF_FIRST | UROCE_OPF_AETH),
	[0x0E] = ENTRY("RC_RDMA_READ_RESPONSE_MIDDLE", READ_RSP | UROCE_OPF_MIDDLE),
	[0x0F] = ENTRY("RC_RDMA_READ_RESPONSE_LAST", READ_RSP | UROCE_OPF_LAST | UROCE_OPF_AETH),
	[0x10] = ENTRY("RC_RDMA_READ_RESPONSE_ONLY", READ_RSP | UROCE_OPF_ONLY | UROCE_OPF_AETH),
	[0x11] = ENTRY("RC_ACKNOWLEDGE", ACK),
	[0x12] = ENTRY("RC_ATOMIC_ACKNOWLEDGE", ATOMIC_ACK),
	[0x13] = ENTRY("RC_COMPARE_SWAP", ATOMIC),
	[0x14] = ENTRY("RC_FETCH_ADD", ATOMIC),
	[0x16] = ENTRY("RC_SEND_LAST_WITH_INVALIDATE", SEND_L | INV),
	[0x17] = ENTRY("RC_SEND_ONLY_WITH_INVALIDATE", SEND_O | INV),
	[0x1C] = ENTRY("RC_FLUSH", FLUSH),
	[0x1D] = ENTRY("RC_ATOMIC_WRITE", ATOMIC_WR),

	/* UC: SEND and RDMA WRITE only (IBA table 43). */
	[0x20] = ENTRY("UC_SEND_FIRST", SEND_F),
	[0x21] = ENTRY("UC_SEND_MIDDLE", SEND_M),
	[0x22] = ENTRY("UC_SEND_LAST", SEND_L),
	[0x23] = ENTRY("UC_SEND_LAST_WITH_IMMEDIATE", SEND_L | IMM),
	[0x24] = ENTRY("UC_SEND_ONLY", SEND_O),
	[0x25] = ENTRY("UC_SEND_ONLY_WITH_IMMEDIATE", SEND_O | IMM),
	[0x26] = ENTRY("UC_RDMA_WRITE_FIRST", WRITE_F),
	[0x27] = ENTRY("UC_RDMA_WRITE_MIDDLE", WRITE_M),
	[0x28] = ENTRY("UC_RDMA_WRITE_LAST", WRITE_L),
	[0x29] = ENTRY("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", WRITE_L | IMM),
	[0x2A] = ENTRY("UC_RDMA_WRITE_ONLY", WRITE_O),
	[0x2B] = ENTRY("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", WRITE_O | IMM),

	/* RD: real layouts, not implemented (no Linux driver implements RD). */
	[0x40] = ENTRY("RD_SEND_FIRST", RDQ | SEND_F),
	[0x41] = ENTRY("RD_SEND_MIDDLE", RDQ | SEND_M),
	[0x42] = ENTRY("RD_SEND_LAST", RDQ | SEND_L),
	[0x43] = ENTRY("RD_SEND_LAST_WITH_IMMEDIATE", RDQ | SEND_L | IMM),
	[0x44] = ENTRY("RD_SEND_ONLY", RDQ | SEND_O),
	[0x45] = ENTRY("RD_SEND_ONLY_WITH_IMMEDIATE", RDQ | SEND_O | IMM),
	[0x46] = ENTRY("RD_RDMA_WRITE_FIRST", RDQ | WRITE_F),
	[0x47] = ENTRY("RD_RDMA_WRITE_MIDDLE", RDQ | WRITE_M),
	[0x48] = ENTRY("RD_RDMA_WRITE_LAST", RDQ | WRITE_L),
	[0x49] = ENTRY("RD_RDMA_WRITE_LAST_WITH_IMMEDIATE", RDQ | WRITE_L | IMM),
	[0x4A] = ENTRY("RD_RDMA_WRITE_ONLY", RDQ | WRITE_O),
	[0x4B] = ENTRY("RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE", RDQ | WRITE_O | IMM),
	[0x4C] = ENTRY("RD_RDMA_READ_REQUEST", RDQ | READ_REQ),
	[0x4D] = ENTRY("RD_RDMA_READ_RESPONSE_FIRST", RDR | READ_RSP | UROCE_OPF_FIRST | UROCE_OPF_AETH),
	[0x4E] = ENTRY("RD_RDMA_READ_RESPONSE_MIDDLE", RDR | READ_RSP | UROCE_OPF_MIDDLE),
	[0x4F] = ENTRY("RD_RDMA_READ_RESPONSE_LAST", RDR | READ_RSP | UROCE_OPF_LAST | UROCE_OPF_AETH),
	[0x50] = ENTRY("RD_RDMA_READ_RESPONSE_ONLY", RDR | READ_RSP | UROCE_OPF_ONLY | UROCE_OPF_AETH),
	[0x51] = ENTRY("RD_ACKNOWLEDGE", RDR | ACK),
	[0x52] = ENTRY("RD_ATOMIC_ACKNOWLEDGE", RDR | ATOMIC_ACK),
	[0x53] = ENTRY("RD_COMPARE_SWAP", RDQ | ATOMIC),
	[0x54] = ENTRY("RD_FETCH_ADD", RDQ | ATOMIC),
	[0x55] = ENTRY("RD_RESYNC", RDQ | F_REQ | UROCE_OPF_ONLY),

	/* UD: SEND Only (+Imm) with DETH (IBA table 43). */
	[0x64] = ENTRY("UD_SEND_ONLY", SEND_O | UROCE_OPF_DETH),
	[0x65] = ENTRY("UD_SEND_ONLY_WITH_IMMEDIATE", SEND_O | UROCE_OPF_DETH | IMM),

	/* RoCEv2 CNP (Annex A17.9.2): BTH + 16 reserved bytes; we do not do DCQCN. */
	[0x81] = ENTRY("CNP", NOSUP | UROCE_OPF_CNP | F_PAY | UROCE_OPF_ONLY),

	/* XRC (annex A14): requests carry XRCETH; not implemented (as in rxe). */
	[0xA0] = ENTRY("XRC_SEND_FIRST", XRQ | SEND_F),
	[0xA1] = ENTRY("XRC_SEND_MIDDLE", XRQ | SEND_M),
	[0xA2] = ENTRY("XRC_SEND_LAST", XRQ | SEND_L),
	[0xA3] = ENTRY("XRC_SEND_LAST_WITH_IMMEDIATE", XRQ | SEND_L | IMM),
	[0xA4] = ENTRY("XRC_SEND_ONLY", XRQ | SEND_O),
	[0xA5] = ENTRY("XRC_SEND_ONLY_WITH_IMMEDIATE", XRQ | SEND_O | IMM),
	[0xA6] = ENTRY("XRC_RDMA_WRITE_FIRST", XRQ | WRITE_F),
	[0xA7] = ENTRY("XRC_RDMA_WRITE_MIDDLE", XRQ | WRITE_M),
	[0xA8] = ENTRY("XRC_RDMA_WRITE_LAST", XRQ | WRITE_L),
	[0xA9] = ENTRY("XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", XRQ | WRITE_L | IMM),
	[0xAA] = ENTRY("XRC_RDMA_WRITE_ONLY", XRQ | WRITE_O),
	[0xAB] = ENTRY("XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", XRQ | WRITE_O | IMM),
	[0xAC] = ENTRY("XRC_RDMA_READ_REQUEST", XRQ | READ_REQ),
	[0xAD] = ENTRY("XRC_RDMA_READ_RESPONSE_FIRST", XRR | READ_RSP | UROCE_OPF_FIRST | UROCE_OPF_AETH),
	[0xAE] = ENTRY("XRC_RDMA_READ_RESPONSE_MIDDLE", XRR | READ_RSP | UROCE_OPF_MIDDLE),
	[0xAF] = ENTRY("XRC_RDMA_READ_RESPONSE_LAST", XRR | READ_RSP | UROCE_OPF_LAST | UROCE_OPF_AETH),
	[0xB0] = ENTRY("XRC_RDMA_READ_RESPONSE_ONLY", XRR | READ_RSP | UROCE_OPF_ONLY | UROCE_OPF_AETH),
	[0xB1] = ENTRY("XRC_ACKNOWLEDGE", XRR | ACK),
	[0xB2] = ENTRY("XRC_ATOMIC_ACKNOWLEDGE", XRR | ATOMIC_ACK),
	[0xB3] = ENTRY("XRC_COMPARE_SWAP", XRQ | ATOMIC),
	[0xB4] = ENTRY("XRC_FETCH_ADD", XRQ | ATOMIC),
	[0xB6] = ENTRY("XRC_SEND_LAST_WITH_INVALIDATE", XRQ | SEND_L | INV),
	[0xB7] = ENTRY("XRC_SEND_ONLY_WITH_INVALIDATE", XRQ | SEND_O | INV),
};

/* The literal sizes above must agree with the wire structs. */
_Static_assert(L_RDETH == sizeof(struct uroce_wire_rdeth) && L_DETH == sizeof(struct uroce_wire_deth) &&
		       L_XRCETH == sizeof(struct uroce_wire_xrceth) &&
		       L_FETH == sizeof(struct uroce_wire_feth) && L_RETH == sizeof(struct uroce_wire_reth) &&
		       L_AETH == sizeof(struct uroce_wire_aeth) &&
		       L_ATMETH == sizeof(struct uroce_wire_atmeth) &&
		       L_ATMACK == sizeof(struct uroce_wire_atmack) &&
		       L_IMMDT == sizeof(struct uroce_wire_immdt) && L_IETH == sizeof(struct uroce_wire_ieth),
	       "opcode.c header sizes match wire.h");

const char *uroce_opcode_name(uint8_t opcode)
{
	static _Thread_local char buf[24];

	if (uroce_opcode_table[opcode].name)
		return uroce_opcode_table[opcode].name;
	snprintf(buf, sizeof(buf), "RESERVED_0x%02x", opcode);
	return buf;
}

uint32_t uroce_rnr_timer_usec(unsigned code)
{
	/* IBA table 45: RNR NAK timer field encodings, in microseconds. */
	static const uint32_t usec[32] = {
		655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
		480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
		20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};
	return usec[code & 31u];
}

const char *uroce_nak_code_name(unsigned code)
{
	/* IBA 9.3.5 table 44: NAK codes carried in the low 5 bits of the AETH syndrome. */
	static const char *const names[] = {
		[UROCE_NAK_PSN_SEQ] = "PSN_SEQ_ERR",
		[UROCE_NAK_INVALID_REQ] = "INVALID_REQ",
		[UROCE_NAK_REMOTE_ACCESS] = "REMOTE_ACCESS_ERR",
		[UROCE_NAK_REMOTE_OP] = "REMOTE_OP_ERR",
		[UROCE_NAK_INVALID_RD_REQ] = "INVALID_RD_REQ",
	};
	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "NAK_RESERVED";
}
