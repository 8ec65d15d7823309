/* cm_wait.c — wait until this namespace's uroced has N listening rdma_cm ids.
 *
 *   cm_wait [-n N] [-t SECONDS] [-s]
 *
 * The acceptance tests start a Debian server (rping -s, ucmatose, ib_send_bw -R ...)
 * and must not start its client before the server listens; these programs listen on
 * an RDMA CM port, not a TCP one, so `ss` cannot see it.  The daemon's STATS record
 * (ipc/cm_proto.h) has the number of listeners: poll it (never autostarting a
 * daemon).  -s prints the CM counters once instead (MADs, rejects, drops) for the
 * test log.
 *
 * Exit: 0 reached, 1 timeout, 2 no daemon (or an error), 3 a daemon without the
 * connection manager (it hangs up on the record).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm.h"
#include "ipc/cm_proto.h"
#include "ipc/ipc.h"

static int match_seq(const void *rec, void *arg)
{
	const struct uroce_cm_reply *rep = rec;

	return rep->magic == UROCE_CM_MAGIC && rep->seq == *(uint32_t *)arg;
}

static int stats(int fd, uint32_t seq, struct uroce_cm_stats *st)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	cmd.magic = UROCE_CM_MAGIC;
	cmd.version = UROCE_CM_VERSION;
	cmd.op = UROCE_CM_OP_STATS;
	cmd.seq = seq;
	ret = uroce_ipc_transact(fd, &cmd, sizeof(cmd), &rep, sizeof(rep), UROCE_IPC_TIMEOUT_MS,
				 match_seq, &seq);
	if (!ret)
		ret = rep.status;
	if (!ret)
		*st = rep.u.stats;
	return ret;
}

static void print_stats(const struct uroce_cm_stats *st)
{
	static const char *const kind[11] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP",
					      "SIDR_REQ", "SIDR_REP", "LAP", "APR" };

	printf("cm: ids %u listeners %u connections %u timewait %u\n", st->ids, st->listeners,
	       st->connections, st->timewait);
	for (int i = 0; i < 11; i++)
		if (st->mad_sent[i] || st->mad_rcvd[i])
			printf("cm: %-8s sent %llu received %llu\n", kind[i],
			       (unsigned long long)st->mad_sent[i],
			       (unsigned long long)st->mad_rcvd[i]);
	for (int i = 0; i < 64; i++)
		if (st->rej_sent[i] || st->rej_rcvd[i])
			printf("cm: REJ reason %d sent %llu received %llu\n", i,
			       (unsigned long long)st->rej_sent[i],
			       (unsigned long long)st->rej_rcvd[i]);
	printf("cm: retransmits %llu timeouts %llu drops %llu events lost %llu\n",
	       (unsigned long long)st->retransmits, (unsigned long long)st->timeouts,
	       (unsigned long long)st->drops, (unsigned long long)st->ev_lost);
	for (unsigned i = 0; i < UROCE_CM_NDROPS; i++)
		if (st->drop[i])
			printf("cm: drop %s %llu (%s)\n", uroce_cm_drop_name(i),
			       (unsigned long long)st->drop[i], uroce_cm_drop_desc(i));
	/* Requests that came before their listener (docs/cm.md). */
	printf("cm: held %llu matched %llu waiting %u\n", (unsigned long long)st->held,
	       (unsigned long long)st->held_matched, st->held_now);
}

int main(int argc, char **argv)
{
	struct uroce_cm_stats st;
	unsigned want = 1;
	double secs = 20;
	bool show = false;
	struct timespec t0, t;
	uint32_t seq = 0;
	int opt, fd, ret;

	while ((opt = getopt(argc, argv, "n:t:s")) != -1) {
		switch (opt) {
		case 'n': want = (unsigned)atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 's': show = true; break;
		default:
			fprintf(stderr, "usage: cm_wait [-n N] [-t SECONDS] [-s]\n");
			return 2;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The server's `uroce run` may still be starting the daemon. */
	while (uroce_ipc_connect(&fd, 0)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs) {
			fprintf(stderr, "cm_wait: no uroced in this namespace\n");
			return 2;
		}
		usleep(20 * 1000);
	}
	for (;;) {
		ret = stats(fd, ++seq, &st);
		if (ret == -ECONNRESET || ret == -EPROTO) {
			/* A uroced without the connection manager hangs up on the record. */
			fprintf(stderr, "cm_wait: this uroced has no connection manager\n");
			return 3;
		}
		if (ret) {
			fprintf(stderr, "cm_wait: STATS: %s\n", strerror(-ret));
			return 2;
		}
		if (show) {
			print_stats(&st);
			return 0;
		}
		if (st.listeners >= want)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs) {
			fprintf(stderr, "cm_wait: %u listener(s) after %.0f s, wanted %u\n",
				st.listeners, secs, want);
			return 1;
		}
		usleep(20 * 1000);
	}
}
