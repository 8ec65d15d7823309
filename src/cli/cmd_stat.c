/* cmd_stat.c — `uroce stat`: counters kept by uroced, in the manner of
 * `rdma statistic show`:
 *
 *   uroce stat [show] [link DEV[/PORT]]
 *   uroce stat show qp [link DEV[/PORT]] [lqpn QPN] [pid PID]
 *   uroce stat show cm
 *
 * `show`: one line per device port with the daemon's control-path counters, then
 * one line per registered context with its data-path counters: the context's block
 * (netio: packets, bytes, ICRC and misrouted drops, fault injection) followed by the
 * transport's totals over every QP the context has had, destroyed ones included
 * (retransmissions, NAKs by kind, RNR, duplicates, drops by reason), and per device a
 * `total` line: those counters summed over its contexts, live and gone (the daemon
 * keeps what exited processes counted).  `show qp`: one line per QP with its data-path
 * counters.  Data-path counters live in shared
 * memory the contexts register with the daemon (docs/daemon.md); the names and
 * values are the context's own.  `show cm`: the connection manager's counters (QP1
 * MADs sent and received by kind, retransmissions, timeouts, REJs by reason, drops by
 * reason, lost events) and gauges (ids, listeners, connections, timewait), as the
 * daemon's CM_STATS record (ipc/cm_proto.h) carries them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cm/cm.h"
#include "ipc/cm_proto.h"
#include "ipc/ipc.h"
#include "ipc/proto.h"

static int matches(const char *arg, const char *keyword)
{
	size_t n = strlen(arg);

	return n && n <= strlen(keyword) && !strncmp(arg, keyword, n);
}

static int stat_help(FILE *f)
{
	fprintf(f, "Usage: uroce stat show\n"
		   "       uroce stat show link [DEV/PORT_INDEX]\n"
		   "       uroce stat show qp [link DEV/PORT_INDEX] [lqpn QPN] [pid PID]\n"
		   "       uroce stat show cm\n"
		   "       uroce stat help\n");
	return f == stdout ? 0 : 1;
}

/* What to list: a device ("" = all), and for QPs a QPN and a pid (-1 = any). */
struct stat_filter {
	char dev[UROCE_DEV_NAME_MAX + 8];
	long long qpn, pid;
};

static const char *qp_type_name(uint32_t t)
{
	/* enum ibv_qp_type */
	switch (t) {
	case 2: return "RC";
	case 3: return "UC";
	case 4: return "UD";
	case 8: return "RAW_PACKET";
	case 9: return "XRC_SEND";
	case 10: return "XRC_RECV";
	default: return "?";
	}
}

static void print_values(const struct uroce_cnt_record *r)
{
	for (unsigned j = 0; j < r->n && j < UROCE_CNT_MAX; j++)
		printf(" %s %llu", r->c[j].name, (unsigned long long)r->c[j].value);
}

/* A device's data-path totals: every context record (pid 0: departed clients) summed
 * by block and name, in the order the names first appear (block 0's first). */
static void print_totals(const struct uroce_cnt_record *r, unsigned n, const char *dev)
{
	struct { uint32_t block; const char *name; uint64_t v; } *t;
	unsigned nt = 0, any = 0;

	t = calloc((size_t)n * UROCE_CNT_MAX + 1, sizeof(*t));
	if (!t)
		return;
	for (uint32_t b = 0; b < 2; b++) {
		for (unsigned i = 0; i < n; i++) {
			if (r[i].qpn || strcmp(r[i].dev, dev) || (b == 0) != (r[i].block == 0))
				continue;
			any = 1;
			for (unsigned j = 0; j < r[i].n && j < UROCE_CNT_MAX; j++) {
				unsigned k;

				for (k = 0; k < nt; k++)
					if (t[k].block == r[i].block && !strcmp(t[k].name, r[i].c[j].name))
						break;
				if (k == nt)
					t[nt++] = (typeof(*t)){ r[i].block, r[i].c[j].name, 0 };
				t[k].v += r[i].c[j].value;
			}
		}
	}
	if (any) {
		printf("link %s/1 total", dev);
		for (unsigned k = 0; k < nt; k++)
			printf(" %s %llu", t[k].name, (unsigned long long)t[k].v);
		printf("\n");
	}
	free(t);
}

/* Data-path counters: the contexts' records (qp = 0) or the QPs' (qp = 1).  A
 * connection's blocks of one device come one after the other (ipc.h), so the
 * context records of one context are adjacent and share one line.  Context lines
 * are followed by each device's totals line. */
static int print_counters(struct uroce_ipc *ipc, const struct stat_filter *f, int qp)
{
	struct uroce_cnt_record *r;
	const struct uroce_cnt_record *line = NULL;   /* context whose line is open */
	unsigned n;
	int err = uroce_ipc_counters(ipc, &r, &n);

	if (err)
		return err;
	for (unsigned i = 0; i < n; i++) {
		if ((f->dev[0] && strcmp(f->dev, r[i].dev)) || !!r[i].qpn != qp || !r[i].pid)
			continue;
		if (qp && ((f->qpn >= 0 && r[i].qpn != f->qpn) || (f->pid >= 0 && r[i].pid != f->pid)))
			continue;
		if (!qp && line && line->pid == r[i].pid && !strcmp(line->dev, r[i].dev) &&
		    r[i].block > line->block) {
			print_values(&r[i]);
			line = &r[i];
			continue;
		}
		if (line)
			printf("\n");
		printf("link %s/1", r[i].dev);
		if (qp)
			printf(" lqpn %u type %s", r[i].qpn, qp_type_name(r[i].qp_type));
		printf(" pid %d", (int)r[i].pid);
		print_values(&r[i]);
		line = &r[i];
	}
	if (line)
		printf("\n");
	/* Totals per device, in the order devices first appear. */
	for (unsigned i = 0; !qp && i < n; i++) {
		unsigned k;

		if (r[i].qpn || (f->dev[0] && strcmp(f->dev, r[i].dev)))
			continue;
		for (k = 0; k < i; k++)
			if (!r[k].qpn && !strcmp(r[k].dev, r[i].dev))
				break;
		if (k == i)
			print_totals(r, n, r[i].dev);
	}
	free(r);
	return 0;
}

static int parse_num(const char *kw, const char *arg, long long *out)
{
	char *end;

	errno = 0;
	*out = arg ? strtoll(arg, &end, 0) : -1;
	if (!arg || errno || *end || *out < 0 || *out > UINT32_MAX) {
		fprintf(stderr, "Wrong %s value %s\n", kw, arg ? arg : "(none)");
		return -1;
	}
	return 0;
}

/* [link DEV[/PORT]] and, for QPs, [lqpn N] [pid P], in any order. */
static int parse_filter(int argc, char **argv, struct stat_filter *f, int qp)
{
	f->dev[0] = 0;
	f->qpn = f->pid = -1;
	for (int i = 0; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (matches(argv[i], "link")) {
			char *slash;

			if (!val)
				return 0;  /* `link` alone: every device, as before */
			snprintf(f->dev, sizeof(f->dev), "%s", val);
			slash = strchr(f->dev, '/');
			if (slash) {
				if (strcmp(slash + 1, "1")) {
					fprintf(stderr, "Wrong port index %s\n", slash + 1);
					return -1;
				}
				*slash = 0;
			}
		} else if (qp && matches(argv[i], "lqpn")) {
			if (parse_num("lqpn", val, &f->qpn))
				return -1;
		} else if (qp && matches(argv[i], "pid")) {
			if (parse_num("pid", val, &f->pid))
				return -1;
		} else {
			fprintf(stderr, "Unknown parameter '%s'.\n", argv[i]);
			return -1;
		}
	}
	return 0;
}

static int stat_show_qp(int argc, char **argv)
{
	struct stat_filter f;
	struct uroce_ipc *ipc;
	int err;

	if (parse_filter(argc, argv, &f, 1))
		return 1;
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err) {
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	err = print_counters(ipc, &f, 1);
	uroce_ipc_close(ipc);
	if (err) {
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

/* The daemon's CM counters: one CM_STATS record on a connection of its own. */
static int cm_stats(struct uroce_cm_stats *st)
{
	struct sockaddr_un sa;
	unsigned len = uroce_ipc_addr(&sa);
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply *rep = calloc(1, sizeof(*rep));
	struct timeval tv = { .tv_sec = UROCE_IPC_TIMEOUT_MS / 1000 };
	int fd, err = 0;
	ssize_t n;

	if (!rep)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0) {
		err = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&cmd, 0, sizeof(cmd));
	cmd.magic = UROCE_CM_MAGIC;
	cmd.version = UROCE_CM_VERSION;
	cmd.op = UROCE_CM_OP_STATS;
	cmd.seq = 1;
	if (send(fd, &cmd, sizeof(cmd), MSG_NOSIGNAL) != (ssize_t)sizeof(cmd)) {
		err = -errno;
		goto out;
	}
	n = recv(fd, rep, sizeof(*rep), 0);
	if (n != (ssize_t)sizeof(*rep) || rep->magic != UROCE_CM_MAGIC)
		err = n < 0 ? -errno : -EPROTO;
	else if (rep->status)
		err = rep->status;
	else
		*st = rep->u.stats;
out:
	if (fd >= 0)
		close(fd);
	free(rep);
	return err;
}

static int stat_show_cm(void)
{
	static const char *const kinds[11] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP",
						"SIDR_REQ", "SIDR_REP", "LAP", "APR" };
	struct uroce_cm_stats st;
	struct uroce_ipc *ipc;
	int err, any;

	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);  /* (starts the daemon) */
	if (err) {
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	err = cm_stats(&st);
	uroce_ipc_close(ipc);
	if (err) {
		fprintf(stderr, "error: connection manager: %s\n", strerror(-err));
		return 1;
	}
	for (int dir = 0; dir < 2; dir++) {
		printf("cm %s", dir ? "rcvd" : "sent");
		for (unsigned i = 0; i < 11; i++)
			printf(" %s %llu", kinds[i],
			       (unsigned long long)(dir ? st.mad_rcvd[i] : st.mad_sent[i]));
		printf("\n");
	}
	printf("cm retransmits %llu timeouts %llu ev_lost %llu ids %u listeners %u connections %u timewait %u\n",
	       (unsigned long long)st.retransmits, (unsigned long long)st.timeouts,
	       (unsigned long long)st.ev_lost, st.ids, st.listeners, st.connections, st.timewait);
	printf("cm held %llu matched %llu waiting %u\n", (unsigned long long)st.held,
	       (unsigned long long)st.held_matched, st.held_now);
	for (int dir = 0; dir < 2; dir++) {
		const uint64_t *v = dir ? st.rej_rcvd : st.rej_sent;

		printf("cm rej_%s", dir ? "rcvd" : "sent");
		any = 0;
		for (unsigned r = 0; r < 64; r++)
			if (v[r]) {
				printf(" %u %llu", r, (unsigned long long)v[r]);
				any = 1;
			}
		printf("%s\n", any ? "" : " none");
	}
	printf("cm drops %llu", (unsigned long long)st.drops);
	for (unsigned r = 0; r < UROCE_CM_NDROPS; r++)
		if (st.drop[r])
			printf(" %s %llu", uroce_cm_drop_name(r), (unsigned long long)st.drop[r]);
	printf("\n");
	return 0;
}

static int stat_show(int argc, char **argv)
{
	struct uroce_daemon_status st;
	struct uroce_dev_stats *ds;
	struct uroce_ipc *ipc;
	struct stat_filter f;
	const char *want = f.dev;
	unsigned n, shown = 0;
	int err;

	if (argc >= 1 && matches(argv[0], "qp"))
		return stat_show_qp(argc - 1, argv + 1);
	if (argc >= 1 && matches(argv[0], "cm"))
		return stat_show_cm();
	if (parse_filter(argc, argv, &f, 0))
		return 1;
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err) {
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	err = uroce_ipc_status(ipc, &st);
	if (!err)
		err = uroce_ipc_dev_stats(ipc, &ds, &n);
	if (err) {
		uroce_ipc_close(ipc);
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (want[0] && strcmp(want, ds[i].name))
			continue;
		printf("link %s/1 clients %u qpns_in_use %u qpn_alloc %llu qpn_free %llu "
		       "qpn_reclaimed %llu qpn_alloc_fail %llu requests %llu gid_changes %llu "
		       "rx_sockets %u rx_group %u rx_default %llu steer_updates %llu\n",
		       ds[i].name, ds[i].clients, ds[i].qpns_in_use,
		       (unsigned long long)ds[i].qpn_alloc, (unsigned long long)ds[i].qpn_free,
		       (unsigned long long)ds[i].qpn_reclaimed,
		       (unsigned long long)ds[i].qpn_alloc_fail,
		       (unsigned long long)ds[i].requests, (unsigned long long)ds[i].gid_changes,
		       ds[i].rx_sockets, ds[i].rx_group, (unsigned long long)ds[i].rx_default,
		       (unsigned long long)ds[i].steer_updates);
		shown++;
	}
	free(ds);
	if (want[0] && !shown) {
		uroce_ipc_close(ipc);
		fprintf(stderr, "Wrong device name\n");
		return 1;
	}
	err = print_counters(ipc, &f, 0);
	uroce_ipc_close(ipc);
	if (err) {
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	if (!want[0])
		printf("daemon clients %u qpns_in_use %u\n", st.num_clients, st.qpns_allocated);
	return 0;
}

int uroce_cmd_stat(int argc, char **argv)
{
	if (argc < 2)
		return stat_show(0, NULL);
	if (matches(argv[1], "help"))
		return stat_help(stdout);
	if (matches(argv[1], "show") || matches(argv[1], "list"))
		return stat_show(argc - 2, argv + 2);
	fprintf(stderr, "Unknown command '%s'.\n", argv[1]);
	stat_help(stderr);
	return 1;
}
