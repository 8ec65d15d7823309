/* cm_fuzz_seeds DIR [CAPTURE...] — seed corpus for fuzz_cm: every MAD two simulated
 * hosts send while they connect, reject, time out, disconnect and resolve a SIDR
 * request, and every MAD of the given captures, each with the flag bytes fuzz_cm.c
 * understands (plain, bent towards a live connection, as a whole QP1 packet). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "cm_sim.h"
#include "mad_pcap.h"

static const char *dir;
static unsigned count;

static void put(uint8_t flags, const uint8_t *b, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%04u", dir, count++);
	f = fopen(path, "wb");
	if (!f)
		return;
	fputc(flags, f);
	fwrite(b, 1, len, f);
	fclose(f);
}

static void seed_mad(const uint8_t *mad)
{
	static const uint8_t flags[] = { 0x00, 0x04, 0x05, 0x0c, 0x14, 0x1c, 0x44, 0x85 };
	struct uroce_cm_tx tx;
	uint8_t pkt[UROCE_CM_QP1_PKT_LEN];

	for (unsigned i = 0; i < sizeof(flags); i++)
		put(flags[i], mad, UROCE_MAD_SIZE);
	memset(&tx, 0, sizeof(tx));
	sim_gid("192.0.2.11", tx.sgid);
	sim_gid("192.0.2.10", tx.dgid);
	memcpy(tx.mad, mad, UROCE_MAD_SIZE);
	if (uroce_cm_build_packet(&tx, 0xD872, 1, pkt, sizeof(pkt)) > 0)
		put(0x02, pkt, sizeof(pkt));
}

static int on_capture(void *arg, unsigned frame, const uint8_t *mad, size_t len)
{
	(void)arg;
	(void)frame;
	if (len == UROCE_MAD_SIZE)
		seed_mad(mad);
	return 0;
}

static void flows(void)
{
	static const char *const aa[] = { "192.0.2.11", NULL };
	static const char *const ba[] = { "192.0.2.10", NULL };
	struct sim_net n;
	struct sim_host *a = &n.h[0], *b = &n.h[1];
	struct uroce_cm_event ev;
	uint32_t cha, chb, l, lu, x;

	sim_init(&n, 2, NULL);
	sim_dev(a, "uroce1", 0, 2, 1500, 0x505400fffec0020bull, aa);
	sim_dev(b, "uroce1", 0, 2, 1500, 0x505400fffec0020aull, ba);
	cha = sim_channel(a);
	chb = sim_channel(b);
	l = sim_create(b, chb, RDMA_PS_TCP, IBV_QPT_RC);
	sim_bind(b, l, "0.0.0.0", 7174);
	sim_listen(b, l, 8);
	lu = sim_create(b, chb, RDMA_PS_UDP, IBV_QPT_UD);
	sim_bind(b, lu, "0.0.0.0", 7174);
	sim_listen(b, lu, 8);
	for (int i = 0; i < 4; i++) {
		x = sim_create(a, cha, i == 3 ? RDMA_PS_UDP : RDMA_PS_TCP, i == 3 ? IBV_QPT_UD : IBV_QPT_RC);
		sim_resolve_addr(a, x, NULL, "192.0.2.10", i == 2 ? 9 : 7174);
		sim_resolve_route(a, x);
		sim_connect(a, x, 0x100 + (uint32_t)i, "seed", 4);
		if (!sim_expect(b, chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev))
			continue;
		if (i == 1) {
			sim_advance(&n, 6144);             /* a duplicate REQ: MRA */
			sim_reject(b, ev.new_handle, "no", 2);
			continue;
		}
		sim_accept(b, ev.new_handle, 0x200 + (uint32_t)i, "ok", 2);
		if (i == 0 && sim_expect(a, cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev)) {
			sim_accept(a, x, 0, NULL, 0);
			sim_disconnect(a, x);
			while (sim_event(b, chb, &ev))
				if (ev.event == RDMA_CM_EVENT_DISCONNECTED)
					sim_disconnect(b, ev.handle);
		}
	}
	for (unsigned h = 0; h < 2; h++)
		for (unsigned i = 0; i < n.h[h].nsent; i++)
			seed_mad(n.h[h].sent[i].mad);
	sim_fini(&n);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cm_fuzz_seeds DIR [CAPTURE...]\n");
		return 2;
	}
	dir = argv[1];
	flows();
	for (int i = 2; i < argc; i++)
		if (mad_pcap_foreach(argv[i], on_capture, NULL) < 0)
			return 1;
	printf("%u seeds\n", count);
	return 0;
}
