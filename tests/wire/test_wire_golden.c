/* test_wire_golden.c — every RoCEv2 packet of the Linux Soft-RoCE captures in
 * tests/data/ (every .pcap) (argv[1] = that directory):
 *   - passes uroce_pkt_validate() with the capture's path MTU (1024);
 *   - its ICRC verifies against the capture's own IP header (uroce_icrc_frame)
 *     and equals the independent zlib reference (ref_icrc.h);
 *   - it verifies through the receive path that does not see the IP header
 *     (uroce_icrc_verify with UROCE_ICRC_RX_SOLVE_ID), which recovers exactly
 *     the Identification in the capture;
 *   - it passes netio's receive check that knows each sender's Identifications
 *     (uroce_icrc_rx_check, one receiver per capture, at the capture's times);
 *   - re-encoding its decoded fields reproduces the UDP payload byte for byte.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <zlib.h>

#include "net/frame.h"
#include "net/pcap_io.h"
#include "ref_icrc.h"
#include "wire/wire.h"

static const char *data_dir;

struct counts {
	unsigned roce, nonzero_id, df_set, opcodes[256];
	struct uroce_icrc_rx *rx;   /* one receiver per capture, in capture order and time */
	unsigned rx_ok;
};

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame, size_t len,
		    int linktype)
{
	struct counts *c = arg;
	struct uroce_frame f;
	struct uroce_pkt p;
	struct uroce_icrc_addr ia;
	struct uroce_rx_ctx ctx = { .mtu = 1024, .addr = &ia, .icrc_flags = UROCE_ICRC_RX_SOLVE_ID };
	enum uroce_rx_err e;
	uint16_t cap_id;
	uint32_t icrc;
	uint8_t *again;
	int df;

	assert_int_equal(linktype, 1);
	if (uroce_pcap_frame(frame, len, linktype, &f) != 0 || f.dport != UROCE_UDP_PORT)
		return 0;
	c->roce++;
	assert_int_equal(f.family, AF_INET); /* the captures are IPv4 */
	memset(&ia, 0, sizeof(ia));
	ia.family = f.family;
	ia.src.v4 = f.src.v4;
	ia.dst.v4 = f.dst.v4;
	ia.sport = f.sport;
	ia.dport = f.dport;
	cap_id = (uint16_t)(f.ip[4] << 8 | f.ip[5]);
	df = !!(f.ip[6] & 0x40);
	c->nonzero_id += cap_id != 0;
	c->df_set += df;
	if (!df)
		ctx.icrc_flags |= UROCE_ICRC_RX_DF_ANY;

	/* ICRC against the real IP header, and against the reference. */
	assert_int_equal(uroce_icrc_frame(f.family, f.ip, f.ip_len, f.udp, f.payload, f.payload_len, &icrc), 0);
	if (icrc != uroce_get_le32(f.payload + f.payload_len - 4) || icrc != ref_icrc(frame, len))
		fail_msg("frame %u: ICRC 0x%08x, wire 0x%08x", idx, icrc, uroce_get_le32(f.payload + f.payload_len - 4));

	/* Validation + ICRC without the IP header. */
	e = uroce_pkt_validate(f.payload, f.payload_len, &ctx, &p);
	if (e != UROCE_RX_OK)
		fail_msg("frame %u (opcode 0x%02x): %s", idx, f.payload[0], uroce_rx_err_name(e));
	if (cap_id == 0)
		assert_int_equal(p.icrc_status, UROCE_ICRC_OK);
	else if (p.icrc_status != UROCE_ICRC_OK_ID || p.ip_id != cap_id)
		fail_msg("frame %u: ID 0x%04x, solver status %d id 0x%04x", idx, cap_id, p.icrc_status, p.ip_id);
	c->opcodes[p.bth.opcode]++;

	/* The receive check that knows the senders (netio's, uroce_icrc_rx_check): every packet
	 * of Linux's counter accepted, first ones included, at the capture's own times. */
	if (df) {
		uint64_t now = (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_usec * 1000ull;
		uint16_t id = 0xBEEF;
		enum uroce_icrc_status st = uroce_icrc_rx_check(c->rx, &ia, f.payload, f.payload_len, 0, &now, &id);

		if (st != (cap_id ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK) || id != cap_id)
			fail_msg("frame %u: ID 0x%04x, receive check status %d id 0x%04x", idx, cap_id, st, id);
		c->rx_ok++;
	}

	/* Re-encode. */
	again = malloc(f.payload_len);
	assert_non_null(again);
	assert_int_equal(uroce_pkt_encode(again, f.payload_len, &p), (long)f.payload_len);
	if (memcmp(again, f.payload, f.payload_len))
		fail_msg("frame %u: re-encoding differs", idx);
	free(again);
	return 0;
}

static void test_all_captures(void **state)
{
	DIR *d = opendir(data_dir);
	struct dirent *de;
	unsigned files = 0, total = 0, nonzero = 0, df = 0, distinct = 0;
	static struct counts all;

	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char path[4096], err[256];
		struct counts c;

		if (n < 5 || strcmp(de->d_name + n - 5, ".pcap"))
			continue;
		memset(&c, 0, sizeof(c));
		c.rx = calloc(1, sizeof(*c.rx));
		assert_non_null(c.rx);
		snprintf(path, sizeof(path), "%s/%s", data_dir, de->d_name);
		assert_int_equal(uroce_pcap_foreach(path, on_frame, &c, err, sizeof(err)), 0);
		printf("# %-28s %3u RoCEv2 packets, %3u with non-zero IPv4 ID (all recovered), %3u through "
		       "the receive check\n", de->d_name, c.roce, c.nonzero_id, c.rx_ok);
		assert_int_equal(c.rx_ok, c.df_set);
		free(c.rx);
		if (c.roce == 0)
			fail_msg("%s: no RoCEv2 packets", de->d_name);
		files++;
		total += c.roce;
		nonzero += c.nonzero_id;
		df += c.df_set;
		for (int i = 0; i < 256; i++)
			all.opcodes[i] += c.opcodes[i];
	}
	closedir(d);
	for (int i = 0; i < 256; i++)
		distinct += all.opcodes[i] != 0;
	printf("# %u files, %u packets, %u distinct opcodes, %u with non-zero ID, %u with DF\n", files, total,
	       distinct, nonzero, df);
	assert_true(files >= 1);
	/* The point of the solver: Linux rxe sends hashed, non-zero IDs. */
	assert_true(nonzero > 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_captures),
	};
	if (argc != 2) {
		fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
		return 2;
	}
	data_dir = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
