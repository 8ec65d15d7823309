/* cmd_decode.c — `uroce decode FILE.pcap...`: one line per RoCEv2 packet.
 *
 *   idx time src:port > dst:port OPCODE qp 0xQPN psn 0xPSN [SE] [AckReq] <ETHs> len N icrc ok|BAD
 *
 * Every UDP/4791 datagram is run through the same validator as the data path
 * (wire/validate.c, with RD/XRC/CNP allowed so they can be shown); a packet it
 * rejects is printed with the reason.  The ICRC is checked against the frame's
 * own IP header (wire/icrc.c).  QP1 MADs get the MAD helper's one-line
 * description.  Other frames are counted in a summary line per file.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cli/cli.h"
#include "net/frame.h"
#include "net/pcap_io.h"
#include "wire/icrc.h"
#include "wire/mad.h"
#include "wire/wire.h"

struct decode_state {
	const char *path;
	struct timeval t0;
	unsigned frames, roce, icrc_ok, icrc_bad, malformed, other;
};

static void fmt_addr(const struct uroce_frame *f, int dst, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (f->family == AF_INET)
		inet_ntop(AF_INET, dst ? (const void *)&f->dst.v4 : (const void *)&f->src.v4, a, sizeof(a));
	else
		inet_ntop(AF_INET6, dst ? (const void *)&f->dst.v6 : (const void *)&f->src.v6, a, sizeof(a));
	snprintf(buf, cap, f->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 (unsigned)(dst ? f->dport : f->sport));
}

/* Append printf-style text at *off of a fixed line buffer (truncates quietly). */
__attribute__((format(printf, 4, 5))) static void app(char *buf, size_t cap, size_t *off,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, cap - *off, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n < cap - *off ? (size_t)n : cap - *off - 1;
}

static void describe_aeth(char *b, size_t cap, size_t *o, const struct uroce_aeth *ae)
{
	unsigned v = uroce_aeth_value(ae->syndrome);

	switch (uroce_aeth_kind(ae->syndrome)) {
	case UROCE_AETH_ACK:
		app(b, cap, o, " AETH ACK credits %u", v);
		break;
	case UROCE_AETH_RNR_NAK:
		app(b, cap, o, " AETH RNR_NAK timer %u (%" PRIu32 " us)", v, uroce_rnr_timer_usec(v));
		break;
	case UROCE_AETH_NAK:
		app(b, cap, o, " AETH NAK %s", uroce_nak_code_name(v));
		break;
	default:
		app(b, cap, o, " AETH syndrome 0x%02x(reserved)", ae->syndrome);
		break;
	}
	app(b, cap, o, " msn %u", ae->msn);
}

static void describe(char *b, size_t cap, size_t *o, const struct uroce_pkt *p)
{
	uint32_t m = p->op->mask;

	if (m & UROCE_OPF_RDETH)
		app(b, cap, o, " RDETH eecn 0x%06x", p->rdeth.een);
	if (m & UROCE_OPF_DETH)
		app(b, cap, o, " DETH qkey 0x%08x srcqp 0x%06x", p->deth.qkey, p->deth.srcqp);
	if (m & UROCE_OPF_XRCETH)
		app(b, cap, o, " XRCETH srq 0x%06x", p->xrceth.xrcsrq);
	if (m & UROCE_OPF_FETH)
		app(b, cap, o, " FETH sel %u plt %u", (p->feth & UROCE_FETH_SEL_MASK) >> UROCE_FETH_SEL_SHIFT,
		    p->feth & UROCE_FETH_PLT_MASK);
	if (m & UROCE_OPF_RETH)
		app(b, cap, o, " RETH va 0x%" PRIx64 " rkey 0x%08x dlen %u", p->reth.va, p->reth.rkey,
		    p->reth.len);
	if (m & UROCE_OPF_AETH)
		describe_aeth(b, cap, o, &p->aeth);
	if (m & UROCE_OPF_ATMETH)
		app(b, cap, o, " AtomicETH va 0x%" PRIx64 " rkey 0x%08x swap_add 0x%" PRIx64 " cmp 0x%" PRIx64,
		    p->atmeth.va, p->atmeth.rkey, p->atmeth.swap_add, p->atmeth.compare);
	if (m & UROCE_OPF_ATMACK)
		app(b, cap, o, " AtomicAckETH orig 0x%" PRIx64, p->atmack);
	if (m & UROCE_OPF_IMMDT)
		app(b, cap, o, " imm 0x%08x", p->imm);
	if (m & UROCE_OPF_IETH)
		app(b, cap, o, " IETH rkey 0x%08x", p->ieth);
}

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame, size_t len,
		    int linktype)
{
	struct decode_state *st = arg;
	struct uroce_frame f;
	struct uroce_pkt p;
	struct uroce_rx_ctx ctx = { .allow_unsupported = true };
	char src[64], dst[64], line[1024];
	size_t o = 0;
	enum uroce_rx_err e;
	double t;
	bool icrc_ok;

	if (st->frames++ == 0)
		st->t0 = *ts;
	if (uroce_pcap_frame(frame, len, linktype, &f) != 0 || f.dport != UROCE_UDP_PORT) {
		st->other++;
		return 0;
	}
	st->roce++;
	t = (double)(ts->tv_sec - st->t0.tv_sec) + (double)(ts->tv_usec - st->t0.tv_usec) / 1e6;
	fmt_addr(&f, 0, src, sizeof(src));
	fmt_addr(&f, 1, dst, sizeof(dst));
	app(line, sizeof(line), &o, "%5u %11.6f %s > %s", idx, t, src, dst);

	e = uroce_pkt_validate(f.payload, f.payload_len, &ctx, &p);
	if (e == UROCE_RX_TOO_SHORT) {
		st->malformed++;
		printf("%s MALFORMED %s (%zu bytes)\n", line, uroce_rx_err_name(e), f.payload_len);
		return 0;
	}
	app(line, sizeof(line), &o, " %s qp 0x%06x psn 0x%06x%s%s", uroce_opcode_name(p.bth.opcode),
	    p.bth.dqpn, p.bth.psn, p.bth.se ? " SE" : "", p.bth.ackreq ? " AckReq" : "");
	if (p.bth.fecn || p.bth.becn)
		app(line, sizeof(line), &o, "%s%s", p.bth.fecn ? " FECN" : "", p.bth.becn ? " BECN" : "");
	if (p.bth.pkey != 0xFFFF)
		app(line, sizeof(line), &o, " pkey 0x%04x", p.bth.pkey);
	/* decode() filled the extension headers iff the table knows the opcode
	 * and the buffer holds its headers + ICRC; otherwise print the BTH only. */
	if (p.op->name && f.payload_len >= (size_t)p.op->length + UROCE_ICRC_LEN) {
		describe(line, sizeof(line), &o, &p);
		app(line, sizeof(line), &o, " payload %u", p.payload_len);
	}
	icrc_ok = uroce_icrc_frame_ok(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len);
	app(line, sizeof(line), &o, " icrc %s", icrc_ok ? "ok" : "BAD");
	if (icrc_ok)
		st->icrc_ok++;
	else
		st->icrc_bad++;
	if (e != UROCE_RX_OK) {
		st->malformed++;
		app(line, sizeof(line), &o, " MALFORMED %s", uroce_rx_err_name(e));
	} else if (p.bth.dqpn == 1 && uroce_opcode_transport(p.bth.opcode) == UROCE_TRANSPORT_UD) {
		/* QP1 (GSI) carries MADs: IBA 13.5. */
		char mad[512];

		if (uroce_mad_describe(p.payload, p.payload_len, mad, sizeof(mad)) >= 0 || mad[0])
			app(line, sizeof(line), &o, " | %s", mad);
	}
	printf("%s\n", line);
	return 0;
}

void uroce_decode_live(unsigned idx, uint64_t ts_ns, const uint8_t *frame, size_t len)
{
	static struct decode_state st = { .path = "-" };
	struct timeval tv = { (time_t)(ts_ns / 1000000000ull),
			      (suseconds_t)(ts_ns % 1000000000ull / 1000) };

	on_frame(&st, idx, &tv, frame, len, 1);
}

int uroce_cmd_decode(int argc, char **argv)
{
	int status = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout,
			"Usage: uroce decode FILE.pcap...\n"
			"  One line per RoCEv2 (UDP 4791) packet: frame index, time, addresses, opcode,\n"
			"  destination QP, PSN, flags, extension headers, payload length, ICRC check.\n");
		return argc < 2 ? 1 : 0;
	}
	for (int i = 1; i < argc; i++) {
		struct decode_state st = { .path = argv[i] };
		char err[256] = "";
		int rc;

		if (argc > 2)
			printf("== %s\n", argv[i]);
		rc = uroce_pcap_foreach(argv[i], on_frame, &st, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "uroce decode: %s: %s\n", argv[i], err[0] ? err : strerror(-rc));
			status = 1;
			continue;
		}
		printf("# %s: %u frames, %u RoCEv2 packets (ICRC ok %u, bad %u; malformed %u), %u other frames skipped\n",
		       argv[i], st.frames, st.roce, st.icrc_ok, st.icrc_bad, st.malformed, st.other);
	}
	fflush(stdout);
	return status;
}
