/* gen_dissect — write packets built by uroce's encoder for EVERY RC, UC and UD
 * opcode (IPv4, plus a set over IPv6) to a pcap, and print the field values it
 * intended, one tab-separated line per frame, for check_dissect.py to compare
 * with what tshark and scapy make of the file.
 *
 *   gen_dissect OUT.pcap > expected.tsv
 *   gen_dissect --malformed OUT.pcap      frames `uroce decode` must flag (check_decode_cli.sh):
 *        1 good RC_SEND_ONLY, 2 the same with a flipped payload bit (ICRC BAD),
 *        3 RC_RDMA_WRITE_ONLY cut inside its RETH (HDR_TRUNCATED), 4 opcode 0x15
 *        (OPCODE_RESERVED), 5 SEND_ONLY with pad count 3 and 0 bytes (PAD_EXCEEDS_PAYLOAD),
 *        6 an 8-byte UDP/4791 datagram (TOO_SHORT)
 *
 * Columns: frame family opcode dqpn psn se ackreq padcnt pkey mig
 *          reth_va reth_rkey reth_len aeth_syn aeth_msn atm_va atm_rkey atm_swap atm_cmp
 *          atmack deth_qkey deth_srcqp imm ieth payload_len
 * Absent headers print "-".  Numbers are hex with 0x, except frame/family/payload_len.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/frame.h"
#include "net/pcap_io.h"
#include "wire/icrc.h"
#include "wire/psn.h"
#include "wire/wire.h"

#define MTU 256

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void hexcol(uint32_t mask, uint32_t bit, const char *fmt, uint64_t v)
{
	if (mask & bit)
		printf(fmt, v);
	else
		printf("\t-");
}

static int write_frame(struct uroce_pcap_writer *w, const uint8_t *pkt, size_t n, int set_icrc)
{
	static uint8_t eth[2200];
	struct uroce_frame_addr fa;
	struct uroce_icrc_addr ia;
	long fl;

	memset(&fa, 0, sizeof(fa));
	memset(&ia, 0, sizeof(ia));
	fa.family = ia.family = AF_INET;
	inet_pton(AF_INET, "192.0.2.10", &fa.src.v4);
	inet_pton(AF_INET, "192.0.2.11", &fa.dst.v4);
	ia.src.v4 = fa.src.v4;
	ia.dst.v4 = fa.dst.v4;
	fa.sport = ia.sport = 0xC001;
	fa.dport = ia.dport = UROCE_UDP_PORT;
	if (set_icrc)
		uroce_icrc_set(&ia, (uint8_t *)pkt, n);
	fl = uroce_frame_build_eth(eth, sizeof(eth), &fa, pkt, n);
	return fl < 0 ? (int)fl : uroce_pcap_write(w, eth, (size_t)fl);
}

static int malformed(const char *path)
{
	struct uroce_pcap_writer *w;
	struct uroce_pkt p;
	static uint8_t payload[64], pkt[256];
	char err[256];
	long n;
	int rc = 0;

	w = uroce_pcap_create(path, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "gen_dissect: %s\n", err);
		return 1;
	}
	memset(&p, 0, sizeof(p));
	p.bth.opcode = UROCE_OP_SEND_ONLY;
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = 0x11;
	p.bth.psn = 0x123;
	p.bth.ackreq = true;
	p.payload = payload;
	p.payload_len = sizeof(payload);
	n = uroce_pkt_encode(pkt, sizeof(pkt), &p);
	rc |= n < 0 || write_frame(w, pkt, (size_t)n, 1);                /* 1 good */
	pkt[20] ^= 0x10;
	rc |= write_frame(w, pkt, (size_t)n, 0);                          /* 2 ICRC BAD */
	p.bth.opcode = UROCE_OP_WRITE_ONLY;
	p.payload_len = 0;
	n = uroce_pkt_encode(pkt, sizeof(pkt), &p);
	rc |= n < 0 || write_frame(w, pkt, 12 + 8 + 4, 1);                /* 3 cut in RETH */
	pkt[0] = 0x15;
	rc |= write_frame(w, pkt, 16, 1);                                 /* 4 reserved opcode */
	p.bth.opcode = UROCE_OP_SEND_ONLY;
	p.bth.padcnt = 3;
	n = uroce_pkt_encode(pkt, sizeof(pkt), &p);
	rc |= n < 0 || write_frame(w, pkt, 16, 1);                        /* 5 pad > payload */
	rc |= write_frame(w, pkt, 8, 0);                                  /* 6 too short */
	uroce_pcap_close(w);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct uroce_pcap_writer *w;
	char err[256];
	unsigned frame = 0;
	static uint8_t payload[MTU], pkt[2048], eth[2200];

	if (argc == 3 && !strcmp(argv[1], "--malformed"))
		return malformed(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: gen_dissect OUT.pcap > expected.tsv | --malformed OUT.pcap\n");
		return 2;
	}
	w = uroce_pcap_create(argv[1], err, sizeof(err));
	if (!w) {
		fprintf(stderr, "gen_dissect: %s\n", err);
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		int fam = pass ? AF_INET6 : AF_INET;
		uint32_t psn = 0xFFFFFC; /* walk across the 2^24 wrap */

		for (int oc = 0; oc < 256; oc++) {
			const struct uroce_opcode_info *op = uroce_opcode((uint8_t)oc);
			struct uroce_frame_addr fa;
			struct uroce_icrc_addr ia;
			struct uroce_pkt p;
			long n, fl;

			if (!op->name || (op->mask & UROCE_OPF_UNSUPPORTED))
				continue;
			memset(&p, 0, sizeof(p));
			p.bth.opcode = (uint8_t)oc;
			p.bth.se = (op->mask & UROCE_OPF_LAST) && (op->mask & UROCE_OPF_REQ) && (oc & 1);
			p.bth.pkey = oc & 2 ? 0xFFFF : 0x8001;
			p.bth.dqpn = (op->mask & UROCE_OPF_DETH) && oc == 0x64 ? 1 : 0x000011 + (uint32_t)oc;
			p.bth.ackreq = (op->mask & UROCE_OPF_REQ) && (op->mask & UROCE_OPF_LAST);
			p.bth.psn = psn;
			psn = psn_add(psn, 1);
			p.reth.va = 0x00007F0000000000ull | (rnd() & 0xFFFFFFFFF8ull);
			p.reth.rkey = (uint32_t)rnd();
			p.reth.len = (op->mask & UROCE_OPF_ATOMIC_WRITE) ? 8 : (uint32_t)(rnd() % 100000);
			p.aeth.syndrome = (uint8_t)(oc == UROCE_OP_ACK ? uroce_aeth_syndrome(UROCE_AETH_NAK, 2)
					  : uroce_aeth_syndrome(UROCE_AETH_ACK, 31));
			p.aeth.msn = rnd() & 0xFFFFFF;
			p.atmeth.va = 0x00007F0000000000ull | (rnd() & 0xFFFFFFFFF8ull);
			p.atmeth.rkey = (uint32_t)rnd();
			p.atmeth.swap_add = rnd();
			p.atmeth.compare = oc == UROCE_OP_CMP_SWAP ? rnd() : 0;
			p.atmack = rnd();
			p.deth.qkey = p.bth.dqpn == 1 ? UROCE_GSI_QKEY : 0x11111111;
			p.deth.srcqp = rnd() & 0xFFFFFF;
			p.imm = (uint32_t)rnd();
			p.ieth = (uint32_t)rnd();
			p.feth = 1u << UROCE_FETH_SEL_SHIFT | 1;
			if (!(op->mask & UROCE_OPF_PAYLOAD))
				p.payload_len = 0;
			else if (op->mask & UROCE_OPF_ATOMIC_WRITE)
				p.payload_len = 8;
			else if (!(op->mask & UROCE_OPF_LAST))
				p.payload_len = MTU;
			else
				p.payload_len = (uint32_t)(oc % 61); /* exercises every pad count */
			for (size_t i = 0; i < sizeof(payload); i++)
				payload[i] = (uint8_t)rnd();
			p.payload = payload;
			p.bth.padcnt = (uint8_t)uroce_pad_for(p.payload_len);
			n = uroce_pkt_encode(pkt, sizeof(pkt), &p);
			if (n < 0) {
				fprintf(stderr, "gen_dissect: encode 0x%02x: %ld\n", oc, n);
				return 1;
			}
			memset(&fa, 0, sizeof(fa));
			memset(&ia, 0, sizeof(ia));
			fa.family = ia.family = fam;
			if (fam == AF_INET) {
				inet_pton(AF_INET, "192.0.2.10", &fa.src.v4);
				inet_pton(AF_INET, "192.0.2.11", &fa.dst.v4);
				ia.src.v4 = fa.src.v4;
				ia.dst.v4 = fa.dst.v4;
			} else {
				inet_pton(AF_INET6, "2001:db8::10", &fa.src.v6);
				inet_pton(AF_INET6, "2001:db8::11", &fa.dst.v6);
				ia.src.v6 = fa.src.v6;
				ia.dst.v6 = fa.dst.v6;
			}
			fa.sport = ia.sport = (uint16_t)(0xC000 | (oc * 97));
			fa.dport = ia.dport = UROCE_UDP_PORT;
			memcpy(fa.src_mac, "\x52\x54\x00\xc0\x02\x0a", 6);
			memcpy(fa.dst_mac, "\x52\x54\x00\xc0\x02\x0b", 6);
			/* ICRC first: the IPv6 UDP checksum covers it. */
			uroce_icrc_set(&ia, pkt, (size_t)n);
			fl = uroce_frame_build_eth(eth, sizeof(eth), &fa, pkt, (size_t)n);
			if (fl < 0 || uroce_pcap_write(w, eth, (size_t)fl) != 0) {
				fprintf(stderr, "gen_dissect: frame 0x%02x failed\n", oc);
				return 1;
			}
			frame++;
			printf("%u\t%d\t0x%02x\t0x%06x\t0x%06x\t%d\t%d\t%u\t0x%04x\t%d", frame, fam == AF_INET ? 4 : 6, oc,
			       p.bth.dqpn, p.bth.psn, p.bth.se, p.bth.ackreq, p.bth.padcnt, p.bth.pkey, p.bth.mig);
			uint32_t m = op->mask;
			hexcol(m, UROCE_OPF_RETH, "\t0x%" PRIx64, p.reth.va);
			hexcol(m, UROCE_OPF_RETH, "\t0x%" PRIx64, p.reth.rkey);
			hexcol(m, UROCE_OPF_RETH, "\t0x%" PRIx64, p.reth.len);
			hexcol(m, UROCE_OPF_AETH, "\t0x%" PRIx64, p.aeth.syndrome);
			hexcol(m, UROCE_OPF_AETH, "\t0x%" PRIx64, p.aeth.msn);
			hexcol(m, UROCE_OPF_ATMETH, "\t0x%" PRIx64, p.atmeth.va);
			hexcol(m, UROCE_OPF_ATMETH, "\t0x%" PRIx64, p.atmeth.rkey);
			hexcol(m, UROCE_OPF_ATMETH, "\t0x%" PRIx64, p.atmeth.swap_add);
			hexcol(m, UROCE_OPF_ATMETH, "\t0x%" PRIx64, p.atmeth.compare);
			hexcol(m, UROCE_OPF_ATMACK, "\t0x%" PRIx64, p.atmack);
			hexcol(m, UROCE_OPF_DETH, "\t0x%" PRIx64, p.deth.qkey);
			hexcol(m, UROCE_OPF_DETH, "\t0x%" PRIx64, p.deth.srcqp);
			hexcol(m, UROCE_OPF_IMMDT, "\t0x%" PRIx64, p.imm);
			hexcol(m, UROCE_OPF_IETH, "\t0x%" PRIx64, p.ieth);
			printf("\t%u\n", p.payload_len);
		}
	}
	uroce_pcap_close(w);
	fprintf(stderr, "gen_dissect: %u frames\n", frame);
	return 0;
}
