/* ipc_test.c — integration tests of uroce_ipc against a real uroced.
 *
 *   ipc_test autostart   no daemon -> open(AUTOSTART) starts one; 6 racing clients
 *                        start exactly one
 *   ipc_test qpn         distinct QPNs across processes and connections, never 0/1,
 *                        no immediate reuse, owner-only free, QPNs of a SIGKILLed
 *                        client reclaimed
 *   ipc_test death       SIGKILL the daemon: the next call and a call blocked on a
 *                        stopped daemon fail with -ECONNRESET, the fd turns readable
 *   ipc_test steer       receive steering: datagrams to UDP 4791 reach the socket of
 *                        the connection owning the destination QPN; QP1, unknown
 *                        QPNs and runts reach the daemon; a closed connection's
 *                        socket becomes a drained tombstone reused by the next
 *   ipc_test counters    shared-memory counters: a registered block's context and QP
 *                        records are listed live by another connection, and vanish
 *                        with the connection; a device's totals (CNT_TOTAL) sum the
 *                        departed and the live by name
 *   ipc_test proto       bad records: another version gets -EPROTONOSUPPORT and the
 *                        daemon's version; unterminated names -EINVAL; an unknown op
 *                        -EOPNOTSUPP; a record of the wrong size is hung up on; the
 *                        daemon serves on
 *   ipc_test events      a subscribed connection gets PORT_ACTIVE/PORT_ERR, GID_CHANGE,
 *                        MTU_CHANGE and DEVICE_REMOVED for a veth's device, also
 *                        when they arrive during a call; an unsubscribed one none;
 *                        -ECONNRESET after the daemon dies
 *   ipc_test shm         same-host shared-memory links (SHM_ATTACH/LINK/ACCEPT, LINK_SET):
 *                        only a non-blocking eventfd attaches, once; a link only between
 *                        two attached connections, to a QPN someone owns at a GID of this
 *                        daemon; one link per pair (the same id both ways), sealed at its
 *                        size, the other side woken with UROCE_SHM_WAKE_LINKS and taking it
 *                        by SHM_ACCEPT; a closed connection's side marked gone and the
 *                        survivor woken; LINK_SET checks its value and shows in the
 *                        device's description
 *   ipc_test holder DEV  (helper) connect, allocate a QPN, print it, wait for stdin EOF
 *
 * Each runs inside its own user + network + pid namespace (see CMakeLists.txt), so
 * the daemon it talks to is its own and dies with it.  It finds uroced through
 * $UROCE_DAEMON.  Waits are on observable conditions with a deadline.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"
#include "ipc/shm_proto.h"

#include "check.h"

static void stop_daemon(void);

/* CHECK (tests/check.h) counts and goes on; REQUIRE also stops the test (and its
 * daemon) when what follows cannot run.  cond is evaluated once: conditions often
 * make a request. */
#define REQUIRE(cond, ...)                                                          \
	do {                                                                         \
		int required_ = !!(cond);                                            \
		CHECK(required_, __VA_ARGS__);                                       \
		if (!required_) {                                                    \
			fprintf(stderr, "  required: %s\n", #cond);                  \
			stop_daemon();                                               \
			exit(check_summary());                                       \
		}                                                                    \
	} while (0)

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Ask this namespace's daemon to exit and wait for its EOF (bounded). */
static void stop_daemon(void)
{
	struct uroce_ipc *ipc;
	struct pollfd p;

	if (uroce_ipc_open(&ipc, 0))
		return;
	if (!uroce_ipc_shutdown(ipc)) {
		p.fd = uroce_ipc_fd(ipc);
		p.events = POLLIN;
		poll(&p, 1, 5000);
	}
	uroce_ipc_close(ipc);
}

static uint64_t my_netns(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
}

/* Live (not zombie) uroced processes in our network namespace. */
static int count_daemons(void)
{
	const char *want = getenv("UROCE_DAEMON");
	char real_want[PATH_MAX];
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!dir || !want || !realpath(want, real_want)) {
		if (dir)
			closedir(dir);
		return -1;
	}
	while ((e = readdir(dir))) {
		char path[300], exe[PATH_MAX], stat_line[512];
		struct stat st;
		ssize_t len;
		FILE *f;
		char *rp;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/exe", e->d_name);
		len = readlink(path, exe, sizeof(exe) - 1);
		if (len <= 0)
			continue;
		exe[len] = 0;
		if (strcmp(exe, real_want))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/net", e->d_name);
		if (stat(path, &st) || (uint64_t)st.st_ino != my_netns())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		rp = fgets(stat_line, sizeof(stat_line), f);
		fclose(f);
		rp = rp ? strrchr(stat_line, ')') : NULL;
		if (rp && rp[1] == ' ' && rp[2] != 'Z')
			n++;
	}
	closedir(dir);
	return n;
}

static int daemon_pid(struct uroce_ipc *ipc)
{
	struct uroce_daemon_status st;

	return uroce_ipc_status(ipc, &st) ? -1 : st.pid;
}

/* ---- autostart ------------------------------------------------------------ */

static int test_autostart(void)
{
	enum { RACERS = 6 };
	struct uroce_ipc *ipc;
	int go[2], res[2], pid0, err;
	pid_t kids[RACERS];

	err = uroce_ipc_open(&ipc, 0);
	REQUIRE(err == -ECONNREFUSED, "no daemon yet, open without autostart: %d", err);
	REQUIRE(count_daemons() == 0, "no uroced before the test");

	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	REQUIRE(!err, "autostart open: %s", strerror(-err));
	pid0 = daemon_pid(ipc);
	CHECK(pid0 > 1, "daemon pid %d", pid0);
	/* Detached: not our child (its parent is the pid namespace's init = us
	 * only after the double fork, never the process we forked). */
	CHECK(kill(pid0, 0) == 0, "daemon %d alive", pid0);
	CHECK(count_daemons() == 1, "one daemon, found %d", count_daemons());
	uroce_ipc_close(ipc);
	stop_daemon();
	CHECK(uroce_ipc_open(&ipc, 0) == -ECONNREFUSED, "daemon stopped");

	/* The race: RACERS processes released at once by closing a pipe; each
	 * autostarts and reports the pid of the daemon it reached. */
	REQUIRE(!pipe(go) && !pipe(res), "pipes");
	for (int i = 0; i < RACERS; i++) {
		kids[i] = fork();
		REQUIRE(kids[i] >= 0, "fork");
		if (kids[i] == 0) {
			char c;
			int pid = -1;

			close(go[1]);
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			if (!uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART)) {
				pid = daemon_pid(ipc);
				uroce_ipc_close(ipc);
			}
			if (write(res[1], &pid, sizeof(pid)) != sizeof(pid))
				_exit(2);
			_exit(0);
		}
	}
	close(go[0]);
	close(res[1]);
	close(go[1]);  /* release them all */
	{
		int first = -1, got = 0, pid;

		while (read(res[0], &pid, sizeof(pid)) == sizeof(pid)) {
			CHECK(pid > 1, "racer reached a daemon (pid %d)", pid);
			if (first < 0)
				first = pid;
			CHECK(pid == first, "all racers reach the same daemon: %d vs %d", pid, first);
			got++;
		}
		CHECK(got == RACERS, "all racers answered (%d)", got);
	}
	for (int i = 0; i < RACERS; i++) {
		int status;

		waitpid(kids[i], &status, 0);
		CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "racer %d exit", i);
	}
	/* Losers exit before their starter returns (the library reaps it), so the
	 * count is final now. */
	CHECK(count_daemons() == 1, "exactly one daemon after the race, found %d", count_daemons());
	stop_daemon();
	return check_summary();
}

/* ---- qpn ------------------------------------------------------------------ */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Allocate n QPNs on uroce0 over a fresh connection of a child process and
 * write them to fd.  The child keeps them until stdin (keep) closes. */
static int keep_w = -1;  /* write end of the keep pipe: children must not hold it */

static pid_t child_alloc(int n, int out, int keep)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct uroce_ipc *ipc;
		char c;

		if (keep_w >= 0)
			close(keep_w);

		if (uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART))
			_exit(2);
		for (int i = 0; i < n; i++) {
			uint32_t q;

			if (uroce_ipc_qpn_alloc(ipc, "uroce0", &q))
				_exit(3);
			if (write(out, &q, sizeof(q)) != sizeof(q))
				_exit(4);
		}
		close(out);
		while (read(keep, &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	return pid;
}

static int test_qpn(void)
{
	enum { PER = 300 };
	struct uroce_ipc *a, *b;
	uint32_t all[4 * PER], q, q2;
	int pipe_q[2], keep[2], n = 0, err;
	int32_t owner;
	pid_t kid, kid2_pid = -1;

	REQUIRE(!uroce_ipc_open(&a, UROCE_IPC_AUTOSTART), "open a");
	REQUIRE(!uroce_ipc_open(&b, UROCE_IPC_AUTOSTART), "open b (same process)");
	REQUIRE(!pipe(pipe_q) && !pipe(keep), "pipes");
	keep_w = keep[1];

	/* Two connections here, two child processes, interleaved. */
	kid = child_alloc(PER, pipe_q[1], keep[0]);
	REQUIRE(kid > 0, "fork");
	{
		pid_t kid2 = child_alloc(PER, pipe_q[1], keep[0]);

		REQUIRE(kid2 > 0, "fork");
		for (int i = 0; i < PER; i++) {
			REQUIRE(!uroce_ipc_qpn_alloc(a, "uroce0", &all[n]), "alloc a");
			n++;
			REQUIRE(!uroce_ipc_qpn_alloc(b, "uroce0", &all[n]), "alloc b");
			n++;
		}
		close(pipe_q[1]);
		while (n < 4 * PER && read(pipe_q[0], &all[n], sizeof(all[n])) == sizeof(all[n]))
			n++;
		CHECK(n == 4 * PER, "got %d QPNs", n);
		kid2_pid = kid2;
	}
	qsort(all, (size_t)n, sizeof(all[0]), cmp_u32);
	for (int i = 0; i < n; i++) {
		CHECK(all[i] > 1 && all[i] < (1u << 24), "QPN %u in range, not QP0/QP1", all[i]);
		CHECK(i == 0 || all[i] != all[i - 1], "QPN %u handed out twice", all[i]);
	}

	/* Ownership. */
	REQUIRE(!uroce_ipc_qpn_alloc(a, "uroce0", &q), "alloc");
	CHECK(!uroce_ipc_qpn_owner(b, "uroce0", q, &owner) && owner == getpid(), "owner is us");
	err = uroce_ipc_qpn_free(b, "uroce0", q);
	CHECK(err == -EPERM, "other connection cannot free: %d", err);
	CHECK(!uroce_ipc_qpn_free(a, "uroce0", q), "owner frees");
	err = uroce_ipc_qpn_free(a, "uroce0", q);
	CHECK(err == -ENOENT, "double free: %d", err);
	CHECK(uroce_ipc_qpn_free(a, "uroce0", 1) < 0, "QP1 is not freeable");
	CHECK(uroce_ipc_qpn_owner(a, "uroce0", q, &owner) == -ENOENT, "freed QPN has no owner");
	/* No immediate reuse: the next allocation is not the QPN just freed. */
	REQUIRE(!uroce_ipc_qpn_alloc(a, "uroce0", &q2), "alloc");
	CHECK(q2 != q, "freed QPN %u not reused at once", q);
	CHECK(uroce_ipc_qpn_alloc(a, "nosuchdev", &q2) == -ENODEV, "unknown device");

	/* A killed client's QPNs return to the pool.  The kill is observable at
	 * once (waitpid); the daemon sees the EOF asynchronously, so wait (bounded)
	 * for the ownership to clear. */
	{
		uint32_t victim_q;
		int pq[2], status;
		pid_t victim;
		int64_t deadline;

		REQUIRE(!pipe(pq), "pipe");
		victim = child_alloc(5, pq[1], keep[0]);
		close(pq[1]);
		REQUIRE(read(pq[0], &victim_q, sizeof(victim_q)) == sizeof(victim_q), "victim QPN");
		close(pq[0]);
		CHECK(!uroce_ipc_qpn_owner(a, "uroce0", victim_q, &owner) && owner == victim,
		      "victim owns %u (owner %d, victim %d)", victim_q, owner, victim);
		/* Wait until the victim holds all 5 (it reports the first QPN early). */
		deadline = now_ms() + 5000;
		for (;;) {
			struct uroce_client_info *cl;
			unsigned ncl, held = 0;

			REQUIRE(!uroce_ipc_clients(a, &cl, &ncl), "clients");
			for (unsigned i = 0; i < ncl; i++)
				if (cl[i].pid == victim)
					held = cl[i].qpns;
			free(cl);
			if (held == 5 || now_ms() > deadline)
				break;
			pause_ms(2);
		}
		kill(victim, SIGKILL);
		waitpid(victim, &status, 0);
		CHECK(WIFSIGNALED(status), "victim killed");
		deadline = now_ms() + 5000;
		while ((err = uroce_ipc_qpn_owner(a, "uroce0", victim_q, &owner)) == 0 &&
		       now_ms() < deadline)
			pause_ms(2);
		CHECK(err == -ENOENT, "killed client's QPN %u back in the pool: %d", victim_q, err);
	}

	/* Release the children; everything they held comes back. */
	close(keep[1]);
	/* Not wait(NULL): as the pid namespace's init we are the daemon's parent too. */
	waitpid(kid, NULL, 0);
	waitpid(kid2_pid, NULL, 0);
	{
		struct uroce_daemon_status st;
		int64_t deadline = now_ms() + 5000;
		int ok = 0;

		/* Ours: 2 * PER + q2. */
		while (!uroce_ipc_status(a, &st) && now_ms() < deadline) {
			if (st.qpns_allocated == 2 * PER + 1) {
				ok = 1;
				break;
			}
			pause_ms(2);
		}
		CHECK(ok, "only our QPNs remain: %u", st.qpns_allocated);
		if (!ok) {
			struct uroce_client_info *cl;
			unsigned ncl;

			if (!uroce_ipc_clients(a, &cl, &ncl))
				for (unsigned i = 0; i < ncl; i++)
					fprintf(stderr, "  client pid %d qpns %u\n", cl[i].pid, cl[i].qpns);
		}
	}
	uroce_ipc_close(b);
	{
		struct uroce_daemon_status st;
		int64_t deadline = now_ms() + 5000;

		while (!uroce_ipc_status(a, &st) && st.qpns_allocated != PER + 1 && now_ms() < deadline)
			pause_ms(2);
		CHECK(st.qpns_allocated == PER + 1, "closed connection's QPNs reclaimed: %u",
		      st.qpns_allocated);
	}
	uroce_ipc_close(a);
	stop_daemon();
	return check_summary();
}

/* ---- death ---------------------------------------------------------------- */

struct blocked_call {
	struct uroce_ipc *ipc;
	int err;
	int64_t took_ms;
};

static void *status_thread(void *arg)
{
	struct blocked_call *bc = arg;
	struct uroce_daemon_status st;
	int64_t t0 = now_ms();

	bc->err = uroce_ipc_status(bc->ipc, &st);
	bc->took_ms = now_ms() - t0;
	return NULL;
}

static int test_death(void)
{
	struct uroce_ipc *ipc, *ipc2;
	struct blocked_call bc;
	struct pollfd p;
	pthread_t th;
	uint32_t q;
	int pid, err;

	/* 1. The next call after the daemon died. */
	REQUIRE(!uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART), "open");
	pid = daemon_pid(ipc);
	REQUIRE(pid > 1, "daemon pid");
	CHECK(uroce_ipc_check(ipc) == 0, "alive");
	REQUIRE(!kill(pid, SIGKILL), "kill daemon");
	p.fd = uroce_ipc_fd(ipc);
	p.events = POLLIN;
	CHECK(poll(&p, 1, 5000) == 1, "fd readable after the daemon died");
	CHECK(uroce_ipc_check(ipc) == -ECONNRESET, "check reports the death");
	err = uroce_ipc_qpn_alloc(ipc, "uroce0", &q);
	CHECK(err == -ECONNRESET, "call after death: %d", err);
	err = uroce_ipc_qpn_alloc(ipc, "uroce0", &q);
	CHECK(err == -ECONNRESET, "and stays dead: %d", err);
	uroce_ipc_close(ipc);

	/* 2. A call blocked on a stopped daemon returns when it is killed, with
	 * -ECONNRESET, not the timeout.  (The library autostarts a new daemon: the
	 * killed one released the name.) */
	err = uroce_ipc_open(&ipc2, UROCE_IPC_AUTOSTART);
	REQUIRE(!err, "reopen, new daemon: %s", strerror(-err));
	pid = daemon_pid(ipc2);
	REQUIRE(pid > 1, "new daemon pid");
	REQUIRE(!kill(pid, SIGSTOP), "stop daemon");
	bc.ipc = ipc2;
	bc.err = 1;
	REQUIRE(!pthread_create(&th, NULL, status_thread, &bc), "thread");
	/* Give the request time to be sent; not needed for correctness: if the kill
	 * comes first, the send or the recv sees the death all the same. */
	pause_ms(50);
	REQUIRE(!kill(pid, SIGKILL), "kill stopped daemon");
	pthread_join(th, NULL);
	CHECK(bc.err == -ECONNRESET, "blocked call fails with ECONNRESET: %d", bc.err);
	CHECK(bc.err != -ETIMEDOUT, "blocked call did not wait for the timeout");
	p.fd = uroce_ipc_fd(ipc2);
	CHECK(poll(&p, 1, 5000) == 1, "fd readable");
	uroce_ipc_close(ipc2);
	/* Reap the zombie (we are the pid namespace's init). */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return check_summary();
}

/* ---- steer ---------------------------------------------------------------- */

static int sender = -1;

/* Send a minimal RoCEv2-looking datagram: a BTH (12 bytes) with DestQP = qpn,
 * then a 4-byte tag, to addr:4791.  len < 12 makes a runt. */
static void send_bth(const char *addr, uint32_t qpn, uint32_t tag, size_t len)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(4791) };
	uint8_t pkt[16] = { 0x04 /* RC SEND Only */, 0, 0xff, 0xff, 0,
			    (uint8_t)(qpn >> 16), (uint8_t)(qpn >> 8), (uint8_t)qpn };
	char mapped[64];

	memcpy(&pkt[12], &tag, 4);
	if (strchr(addr, ':'))
		snprintf(mapped, sizeof(mapped), "%s", addr);
	else
		snprintf(mapped, sizeof(mapped), "::ffff:%s", addr);
	REQUIRE(inet_pton(AF_INET6, mapped, &sa.sin6_addr) == 1, "address %s", addr);
	REQUIRE(sendto(sender, pkt, len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)len,
		"sendto %s: %s", addr, strerror(errno));
}

/* The next datagram on fd within 5 s: its tag, or 0 if none came. */
static uint32_t recv_tag(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t buf[64];
	uint32_t tag = 0;
	ssize_t n;

	if (poll(&p, 1, 5000) != 1)
		return 0;
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n >= 16)
		memcpy(&tag, &buf[12], 4);
	return tag;
}

static uint64_t rx_default(struct uroce_ipc *ipc)
{
	struct uroce_dev_stats *st;
	unsigned n;
	uint64_t v = 0;

	if (uroce_ipc_dev_stats(ipc, &st, &n))
		return UINT64_MAX;
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(st[i].name, "uroce0"))
			v = st[i].rx_default;
	free(st);
	return v;
}

/* Wait (bounded) until the daemon has counted `want` default datagrams. */
static int wait_default(struct uroce_ipc *ipc, uint64_t want)
{
	int64_t deadline = now_ms() + 5000;
	uint64_t v;

	while ((v = rx_default(ipc)) < want && now_ms() < deadline)
		pause_ms(2);
	return v == want;
}

static int test_steer(void)
{
	struct uroce_ipc *ca, *cb, *cc;
	int fa, fb, fc, err;
	uint32_t qa, qb, qc, many[200];
	uint64_t def;

	sender = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(sender >= 0, "sender socket");
	REQUIRE(!uroce_ipc_open(&ca, UROCE_IPC_AUTOSTART), "open a");
	REQUIRE(!uroce_ipc_open(&cb, 0), "open b");
	/* A QPN allocated before the socket is steered too. */
	REQUIRE(!uroce_ipc_qpn_alloc(ca, "uroce0", &qa), "alloc a");
	err = uroce_ipc_rx_socket(ca, "uroce0", &fa);
	REQUIRE(!err, "rx socket a: %s", strerror(-err));
	err = uroce_ipc_rx_socket(ca, "uroce0", &fc);
	CHECK(err == -EEXIST, "second socket on one connection: %d", err);
	CHECK(uroce_ipc_rx_socket(ca, "nosuch", &fc) == -ENODEV, "unknown device");
	REQUIRE(!uroce_ipc_rx_socket(cb, "uroce0", &fb), "rx socket b");
	REQUIRE(!uroce_ipc_qpn_alloc(cb, "uroce0", &qb), "alloc b");
	CHECK(qa / 64 != qb / 64, "connections get different QPN blocks (%u, %u)", qa, qb);

	/* Steered by destination QPN, IPv4 and IPv6 alike. */
	send_bth("127.0.0.1", qa, 101, 16);
	CHECK(recv_tag(fa) == 101, "IPv4 datagram for QPN %u reaches a", qa);
	send_bth("127.0.0.1", qb, 102, 16);
	CHECK(recv_tag(fb) == 102, "IPv4 datagram for QPN %u reaches b", qb);
	send_bth("::1", qb, 103, 16);
	CHECK(recv_tag(fb) == 103, "IPv6 datagram for QPN %u reaches b", qb);
	send_bth("::1", qa, 104, 16);
	CHECK(recv_tag(fa) == 104, "IPv6 datagram for QPN %u reaches a", qa);

	/* A datagram goes to exactly one socket: arriving at the daemon means it
	 * reached neither client. */
	def = rx_default(ca);
	send_bth("127.0.0.1", 1, 201, 16);                  /* QP1 */
	send_bth("127.0.0.1", (qa ^ 0x800000), 202, 16);    /* a QPN nobody holds */
	send_bth("127.0.0.1", qa, 203, 8);                  /* runt: no room for a BTH */
	CHECK(wait_default(ca, def + 3), "QP1, unknown QPN and runt reach the daemon");
	def += 3;

	/* Many QPNs: several blocks, all steered (merged rules). */
	for (int i = 0; i < 200; i++)
		REQUIRE(!uroce_ipc_qpn_alloc(ca, "uroce0", &many[i]), "alloc many");
	send_bth("127.0.0.1", many[199], 301, 16);
	CHECK(recv_tag(fa) == 301, "last of 200 QPNs (%u) reaches a", many[199]);
	send_bth("127.0.0.1", many[70], 302, 16);
	CHECK(recv_tag(fa) == 302, "QPN %u reaches a", many[70]);

	/* b goes away with a datagram still queued on its socket.  Its QPNs
	 * then go to the daemon; the next client gets b's socket back (no
	 * index moves: the group does not grow) with nothing left in it. */
	send_bth("127.0.0.1", qb, 401, 16);
	{
		struct pollfd p = { .fd = fb, .events = POLLIN };

		CHECK(poll(&p, 1, 5000) == 1, "datagram queued on b");
	}
	close(fb);
	uroce_ipc_close(cb);
	{
		struct uroce_daemon_status st;
		int64_t deadline = now_ms() + 5000;

		while (!uroce_ipc_status(ca, &st) && st.num_clients != 1 && now_ms() < deadline)
			pause_ms(2);
		CHECK(st.num_clients == 1, "daemon saw b leave");
	}
	send_bth("127.0.0.1", qb, 402, 16);
	CHECK(wait_default(ca, def + 1), "b's QPN now reaches the daemon");
	def += 1;
	REQUIRE(!uroce_ipc_open(&cc, 0), "open c");
	REQUIRE(!uroce_ipc_rx_socket(cc, "uroce0", &fc), "rx socket c");
	{
		struct uroce_dev_stats *st;
		unsigned n;
		uint8_t buf[64];

		REQUIRE(!uroce_ipc_dev_stats(ca, &st, &n) && n >= 1, "stats");
		CHECK(st[0].rx_group == 3, "tombstone reused: group of 3, got %u", st[0].rx_group);
		CHECK(st[0].rx_sockets == 2, "two sockets in use, got %u", st[0].rx_sockets);
		free(st);
		CHECK(recv(fc, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
		      "reused socket was drained");
	}
	REQUIRE(!uroce_ipc_qpn_alloc(cc, "uroce0", &qc), "alloc c");
	send_bth("127.0.0.1", qc, 501, 16);
	CHECK(recv_tag(fc) == 501, "c's QPN %u reaches c", qc);
	send_bth("127.0.0.1", qa, 502, 16);
	CHECK(recv_tag(fa) == 502, "a unaffected");

	close(fa);
	close(fc);
	uroce_ipc_close(cc);
	uroce_ipc_close(ca);
	close(sender);
	stop_daemon();
	return check_summary();
}

/* ---- counters ------------------------------------------------------------- */

static const struct uroce_cnt_record *find_rec(const struct uroce_cnt_record *r, unsigned n,
					       uint32_t qpn)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].qpn == qpn && r[i].pid == getpid())
			return &r[i];
	return NULL;
}

/* A counter's value in a record, -1 if it has no such name. */
static long long rec_value(const struct uroce_cnt_record *r, const char *name)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (!strcmp(r->c[i].name, name))
			return (long long)r->c[i].value;
	return -1;
}

static int test_counters(void)
{
	static const char *const ctx_names[] = { "tx_packets", "rx_packets" };
	static const char *const qp_names[] = { "sent", "acked", "retries" };
	const char *too_many[UROCE_CNT_MAX + 1];
	struct uroce_counters *cnt, *bad;
	struct uroce_cnt_record *r;
	const struct uroce_cnt_record *x;
	struct uroce_ipc *owner, *reader;
	uint32_t q;
	unsigned n;
	int err;

	for (unsigned i = 0; i <= UROCE_CNT_MAX; i++)
		too_many[i] = "c";
	CHECK(uroce_counters_create(too_many, UROCE_CNT_MAX + 1, qp_names, 3, 4, &bad) == -E2BIG,
	      "too many names");
	{
		const char *long_name[] = { "a_counter_name_that_is_far_too_long_for_the_block" };

		CHECK(uroce_counters_create(long_name, 1, NULL, 0, 4, &bad) == -EINVAL, "long name");
	}
	err = uroce_counters_create(ctx_names, 2, qp_names, 3, 8, &cnt);
	REQUIRE(!err, "create: %s", strerror(-err));
	CHECK(uroce_counters_qp(cnt, 8) == NULL, "slot out of range");

	REQUIRE(!uroce_ipc_open(&owner, UROCE_IPC_AUTOSTART), "open owner");
	REQUIRE(!uroce_ipc_open(&reader, 0), "open reader");
	CHECK(uroce_ipc_counters_register(owner, "nosuch", cnt) == -ENODEV, "unknown device");
	err = uroce_ipc_counters_register(owner, "uroce0", cnt);
	REQUIRE(!err, "register: %s", strerror(-err));
	REQUIRE(!uroce_ipc_qpn_alloc(owner, "uroce0", &q), "alloc");

	uroce_counters_ctx(cnt)[0] = 5;
	uroce_counters_ctx(cnt)[1] = 7;
	uroce_counters_slot(cnt, 2, q, 2 /* IBV_QPT_RC */);
	uroce_counters_qp(cnt, 2)[0] = 1;
	uroce_counters_qp(cnt, 2)[1] = 2;
	uroce_counters_qp(cnt, 2)[2] = 3;

	REQUIRE(!uroce_ipc_counters(reader, &r, &n), "list");
	CHECK(n == 2, "one context and one QP record, got %u", n);
	x = find_rec(r, n, 0);
	CHECK(x && x->n == 2 && !strcmp(x->dev, "uroce0") && !strcmp(x->c[0].name, "tx_packets") &&
	      x->c[0].value == 5 && !strcmp(x->c[1].name, "rx_packets") && x->c[1].value == 7,
	      "context record");
	x = find_rec(r, n, q);
	CHECK(x && x->n == 3 && x->qp_type == 2 && !strcmp(x->c[2].name, "retries") &&
	      x->c[0].value == 1 && x->c[1].value == 2 && x->c[2].value == 3, "QP record");
	free(r);

	/* Live: the daemon reads the shared memory when asked. */
	__atomic_store_n(&uroce_counters_qp(cnt, 2)[2], 42, __ATOMIC_RELAXED);
	REQUIRE(!uroce_ipc_counters(reader, &r, &n), "list");
	x = find_rec(r, n, q);
	CHECK(x && x->c[2].value == 42, "updated value seen");
	free(r);

	/* A freed slot disappears. */
	uroce_counters_slot(cnt, 2, 0, 0);
	REQUIRE(!uroce_ipc_counters(reader, &r, &n), "list");
	CHECK(n == 1 && r[0].qpn == 0, "only the context record left (%u)", n);
	free(r);

	/* The block goes with its connection; its context counters stay in the device's
	 * totals of departed clients (a record with pid 0). */
	uroce_ipc_close(owner);
	{
		int64_t deadline = now_ms() + 5000;
		unsigned live;

		for (;;) {
			REQUIRE(!uroce_ipc_counters(reader, &r, &n), "list");
			live = 0;
			for (unsigned i = 0; i < n; i++)
				live += r[i].pid != 0;
			if (live == 0 || now_ms() > deadline)
				break;
			free(r);
			pause_ms(2);
		}
		CHECK(live == 0, "records gone with the connection (%u left)", live);
		CHECK(n == 1 && r[0].pid == 0 && r[0].qpn == 0 && r[0].block == 0 && r[0].n == 2 &&
		      !strcmp(r[0].dev, "uroce0") && !strcmp(r[0].c[0].name, "tx_packets") &&
		      r[0].c[0].value == 5 && r[0].c[1].value == 7,
		      "departed clients' totals (%u records)", n);
		free(r);
	}
	/* CNT_TOTAL: a device's totals of one block role in one request, the departed
	 * clients' and a live client's summed by name. */
	{
		static const char *const names2[] = { "rx_packets", "extra" };
		struct uroce_counters *c2;
		struct uroce_ipc *second;
		struct uroce_cnt_record t;

		REQUIRE(!uroce_counters_create(names2, 2, NULL, 0, 1, &c2), "create second block");
		uroce_counters_ctx(c2)[0] = 100;
		uroce_counters_ctx(c2)[1] = 1;
		REQUIRE(!uroce_ipc_open(&second, 0), "open second");
		REQUIRE(!uroce_ipc_counters_register(second, "uroce0", c2), "register second");
		err = uroce_ipc_counters_total(reader, "uroce0", 0, &t);
		CHECK(!err && t.n == 3 && t.pid == 0 && t.qpn == 0 && t.block == 0 &&
		      !strcmp(t.dev, "uroce0") && rec_value(&t, "tx_packets") == 5 &&
		      rec_value(&t, "rx_packets") == 107 && rec_value(&t, "extra") == 1,
		      "totals: err %d n %u tx %lld rx %lld extra %lld", err, t.n,
		      rec_value(&t, "tx_packets"), rec_value(&t, "rx_packets"), rec_value(&t, "extra"));
		err = uroce_ipc_counters_total(reader, "uroce0", 1, &t);
		CHECK(!err && t.n == 0 && t.block == 1, "no transport block: err %d n %u", err, t.n);
		CHECK(uroce_ipc_counters_total(reader, "uroce0", UROCE_CNT_BLOCKS, &t) == -EINVAL,
		      "totals of a block role that does not exist");
		CHECK(uroce_ipc_counters_total(reader, "nosuch", 0, &t) == -ENODEV,
		      "totals of an unknown device");
		uroce_ipc_close(second);
		uroce_counters_destroy(c2);
	}
	uroce_counters_destroy(cnt);
	uroce_ipc_close(reader);
	stop_daemon();
	return check_summary();
}

/* ---- proto ---------------------------------------------------------------- */

static int raw_connect(void)
{
	struct sockaddr_un sa;
	unsigned len = uroce_ipc_addr(&sa);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) == 0, "raw connect");
	return fd;
}

/* Send a request as is; 1 and the reply, 0 on EOF, -1 on timeout. */
static int raw_call(int fd, const void *req, size_t len, struct uroce_ipc_resp *resp)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	REQUIRE(send(fd, req, len, MSG_NOSIGNAL) == (ssize_t)len, "raw send");
	if (poll(&p, 1, 5000) != 1)
		return -1;
	n = recv(fd, resp, sizeof(*resp), 0);
	return n == (ssize_t)sizeof(*resp) ? 1 : n == 0 ? 0 : -1;
}

static int test_proto(void)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	struct uroce_ipc *ipc;
	int fd;

	REQUIRE(!uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART), "start the daemon");
	fd = raw_connect();
	memset(&req, 0, sizeof(req));
	req.magic = UROCE_IPC_MAGIC;
	req.version = UROCE_IPC_VERSION + 1;
	req.op = UROCE_OP_HELLO;
	req.seq = 7;
	CHECK(raw_call(fd, &req, sizeof(req), &resp) == 1 && resp.status == -EPROTONOSUPPORT &&
	      resp.version == UROCE_IPC_VERSION && resp.seq == 7,
	      "other version refused with ours: status %d version %u", resp.status, resp.version);
	req.version = UROCE_IPC_VERSION;
	req.op = UROCE_OP_QPN_ALLOC;
	memset(req.dev, 'x', sizeof(req.dev));  /* no terminator */
	CHECK(raw_call(fd, &req, sizeof(req), &resp) == 1 && resp.status == -EINVAL,
	      "unterminated name: %d", resp.status);
	memset(req.dev, 0, sizeof(req.dev));
	req.op = 999;
	CHECK(raw_call(fd, &req, sizeof(req), &resp) == 1 && resp.status == -EOPNOTSUPP,
	      "unknown op: %d", resp.status);
	req.op = UROCE_OP_HELLO;
	CHECK(raw_call(fd, &req, sizeof(req) - 1, &resp) == 0, "short record: hung up");
	close(fd);
	fd = raw_connect();
	req.magic = 0;
	CHECK(raw_call(fd, &req, sizeof(req), &resp) == 0, "bad magic: hung up");
	close(fd);
	/* And it still serves. */
	{
		uint32_t q;

		CHECK(!uroce_ipc_qpn_alloc(ipc, "uroce0", &q), "daemon still serves");
	}
	uroce_ipc_close(ipc);
	stop_daemon();
	return check_summary();
}

/* ---- events --------------------------------------------------------------- */

static void sh(const char *cmd)
{
	int rc = system(cmd);

	REQUIRE(rc == 0, "%s: status %d", cmd, rc);
}

/* Wait (bounded) for an event of `type` on dev; earlier events are skipped.
 * Returns 1 and the event, or 0. */
static int wait_event(struct uroce_ipc *ipc, uint32_t type, const char *dev, struct uroce_ipc_event *ev)
{
	int64_t deadline = now_ms() + 10000;

	for (;;) {
		struct pollfd p = { .fd = uroce_ipc_fd(ipc), .events = POLLIN };
		int64_t left;
		int err;

		while ((err = uroce_ipc_event(ipc, ev)) == 0)
			if (ev->type == type && !strcmp(ev->info.name, dev))
				return 1;
		if (err != -EAGAIN)
			return 0;
		left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
	}
}

static int has_gid(const struct uroce_dev_info *info, const char *text)
{
	uint8_t g[16];

	if (inet_pton(AF_INET6, text, g) != 1)
		return 0;
	for (unsigned i = 0; i < info->num_gids && i < UROCE_MAX_GIDS; i++)
		if (info->gids[i].valid && !memcmp(info->gids[i].gid, g, 16))
			return 1;
	return 0;
}

static int test_events(void)
{
	struct uroce_ipc *a, *b;
	struct uroce_ipc_event ev;
	struct uroce_dev_info *devs;
	unsigned n;
	int pid;

	REQUIRE(!uroce_ipc_open(&a, UROCE_IPC_AUTOSTART), "open a");
	REQUIRE(!uroce_ipc_open(&b, 0), "open b");
	REQUIRE(!uroce_ipc_subscribe(a), "subscribe");
	sh("ip link add va type veth peer name vb && ip addr add 192.0.2.1/24 dev va");
	REQUIRE(!uroce_ipc_link_add(a, "uroce1", "va"), "link add");

	sh("ip link set va up && ip link set vb up");
	CHECK(wait_event(a, UROCE_EV_PORT_ACTIVE, "uroce1", &ev) && ev.info.port_up,
	      "PORT_ACTIVE when va gets carrier");
	sh("ip link set va mtu 2000");
	CHECK(wait_event(a, UROCE_EV_MTU_CHANGE, "uroce1", &ev) && ev.info.netdev_mtu == 2000,
	      "MTU_CHANGE with the new MTU (%u)", ev.info.netdev_mtu);
	/* An event that arrives while a call waits for its reply is kept. */
	sh("ip addr add 192.0.2.9/24 dev va");
	CHECK(!uroce_ipc_devices(a, &devs, &n), "a call with an event in flight");
	free(devs);
	CHECK(wait_event(a, UROCE_EV_GID_CHANGE, "uroce1", &ev) && has_gid(&ev.info, "::ffff:192.0.2.9"),
	      "GID_CHANGE carries the new GID table");
	sh("ip link set vb down");
	CHECK(wait_event(a, UROCE_EV_PORT_ERR, "uroce1", &ev) && !ev.info.port_up,
	      "PORT_ERR when va loses carrier");
	REQUIRE(!uroce_ipc_link_del(b, "uroce1"), "link del");
	CHECK(wait_event(a, UROCE_EV_DEVICE_REMOVED, "uroce1", &ev), "DEVICE_REMOVED");

	CHECK(uroce_ipc_event(b, &ev) == -EAGAIN, "no events without subscribing");
	CHECK(uroce_ipc_check(b) == 0 && uroce_ipc_check(a) == 0, "both alive");

	/* A subscriber that does not read: 400 MTU changes on lo, each made visible
	 * by a query on b (the daemon applies netdev changes before answering).  a's
	 * next call must still get its reply, and the events it then reads report
	 * the ones it lost. */
	{
		struct ifreq ifr;
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		unsigned got = 0, lost = 0;
		uint32_t q;

		REQUIRE(s >= 0, "socket");
		memset(&ifr, 0, sizeof(ifr));
		strcpy(ifr.ifr_name, "lo");
		for (int i = 0; i < 400; i++) {
			ifr.ifr_mtu = 60000 + (i & 1);
			REQUIRE(!ioctl(s, SIOCSIFMTU, &ifr), "set lo mtu");
			REQUIRE(!uroce_ipc_devices(b, &devs, &n), "sync");
			free(devs);
		}
		close(s);
		CHECK(!uroce_ipc_qpn_alloc(a, "uroce0", &q), "a call despite 400 unread events");
		while (uroce_ipc_event(a, &ev) == 0) {
			got += ev.type == UROCE_EV_MTU_CHANGE;
			lost += ev.lost;
		}
		CHECK(got > 0 && lost > 0 && got + lost >= 400, "events read %u + lost %u", got, lost);
	}

	/* Daemon gone: after the queued events, -ECONNRESET. */
	pid = daemon_pid(b);
	REQUIRE(pid > 1 && !kill(pid, SIGKILL), "kill daemon");
	{
		int64_t deadline = now_ms() + 5000;
		int err;

		while ((err = uroce_ipc_event(a, &ev)) == 0 || (err == -EAGAIN && now_ms() < deadline)) {
			struct pollfd p = { .fd = uroce_ipc_fd(a), .events = POLLIN };

			if (err == -EAGAIN)
				poll(&p, 1, 100);
		}
		CHECK(err == -ECONNRESET, "events end with ECONNRESET: %d", err);
	}
	uroce_ipc_close(a);
	uroce_ipc_close(b);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return check_summary();
}

/* ---- holder (helper for shell tests) ---------------------------------------- */

/* Hold a QPN, with a counters block (context tx_packets = 11, the QP's sent = 3)
 * registered for it, until stdin closes. */
static int holder(const char *dev)
{
	static const char *const ctx_names[] = { "tx_packets" };
	static const char *const qp_names[] = { "sent" };
	struct uroce_counters *cnt = NULL;
	struct uroce_ipc *ipc;
	uint32_t q;
	char c;
	int err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);

	if (!err)
		err = uroce_ipc_qpn_alloc(ipc, dev, &q);
	if (!err)
		err = uroce_counters_create(ctx_names, 1, qp_names, 1, 4, &cnt);
	if (!err) {
		uroce_counters_ctx(cnt)[0] = 11;
		uroce_counters_slot(cnt, 0, q, 2 /* IBV_QPT_RC */);
		uroce_counters_qp(cnt, 0)[0] = 3;
		err = uroce_ipc_counters_register(ipc, dev, cnt);
	}
	if (err) {
		fprintf(stderr, "holder: %s\n", strerror(-err));
		return 1;
	}
	printf("%u\n", q);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	uroce_ipc_close(ipc);
	uroce_counters_destroy(cnt);
	return 0;
}

/* uroce0's first IPv4-mapped GID (lo: ::ffff:127.0.0.1). */
static int lo_gid(struct uroce_ipc *ipc, uint8_t gid[16])
{
	struct uroce_dev_info *devs;
	unsigned n;
	int found = 0;

	if (uroce_ipc_devices(ipc, &devs, &n))
		return 0;
	for (unsigned i = 0; i < n && !found; i++)
		for (unsigned g = 0; g < devs[i].num_gids && !strcmp(devs[i].name, "uroce0"); g++)
			if (devs[i].gids[g].valid && devs[i].gids[g].gid[10] == 0xFF) {
				memcpy(gid, devs[i].gids[g].gid, 16);
				found = 1;
				break;
			}
	free(devs);
	return found;
}

static uint32_t dev_loopback(struct uroce_ipc *ipc)
{
	struct uroce_dev_info *devs;
	unsigned n;
	uint32_t v = 99;

	if (uroce_ipc_devices(ipc, &devs, &n))
		return v;
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(devs[i].name, "uroce0"))
			v = devs[i].loopback;
	free(devs);
	return v;
}

static int test_shm(void)
{
	struct uroce_ipc *a, *b, *c;
	struct uroce_shm_link_info ia, ib, ic;
	uint8_t gid[16], nowhere[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 99 };
	uint32_t qa, qb, qc;
	int ea = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), eb = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int blocking = eventfd(0, EFD_CLOEXEC), p[2], m1, m2, f1, f2, err;
	uint64_t v;

	REQUIRE(ea >= 0 && eb >= 0 && blocking >= 0 && !pipe2(p, O_NONBLOCK), "eventfds");
	REQUIRE(!uroce_ipc_open(&a, UROCE_IPC_AUTOSTART) && !uroce_ipc_open(&b, 0) &&
		!uroce_ipc_open(&c, 0), "open a, b, c");
	REQUIRE(lo_gid(a, gid), "uroce0 has an IPv4 GID");
	REQUIRE(!uroce_ipc_qpn_alloc(a, "uroce0", &qa) && !uroce_ipc_qpn_alloc(b, "uroce0", &qb) &&
		!uroce_ipc_qpn_alloc(c, "uroce0", &qc), "QPNs");

	/* The device option. */
	CHECK(dev_loopback(a) == UROCE_LOOPBACK_SHM, "loopback shm by default");
	err = uroce_ipc_link_set(a, "uroce0", 7);
	CHECK(err == -EINVAL, "LINK_SET 7: %d", err);
	err = uroce_ipc_link_set(a, "nosuch", UROCE_LOOPBACK_UDP);
	CHECK(err == -ENODEV, "LINK_SET nosuch: %d", err);
	CHECK(!uroce_ipc_link_set(a, "uroce0", UROCE_LOOPBACK_UDP) && dev_loopback(b) == UROCE_LOOPBACK_UDP,
	      "LINK_SET udp shows in the description");
	CHECK(!uroce_ipc_link_set(a, "uroce0", UROCE_LOOPBACK_SHM) && dev_loopback(b) == UROCE_LOOPBACK_SHM,
	      "and back");

	/* Only a non-blocking eventfd attaches, and once. */
	err = uroce_ipc_shm_link(a, "uroce0", gid, qb, 0, &ia, &m1, &f1);
	CHECK(err == -ENOTCONN, "SHM_LINK before attaching: %d", err);
	err = uroce_ipc_shm_attach(a, "uroce0", p[1]);
	CHECK(err == -EINVAL, "a pipe attaches: %d", err);
	err = uroce_ipc_shm_attach(a, "uroce0", blocking);
	CHECK(err == -EINVAL, "a blocking eventfd attaches: %d", err);
	err = uroce_ipc_shm_attach(a, "nosuch", ea);
	CHECK(err == -ENODEV, "attach to nosuch: %d", err);
	CHECK(!uroce_ipc_shm_attach(a, "uroce0", ea), "a attaches");
	err = uroce_ipc_shm_attach(a, "uroce0", ea);
	CHECK(err == -EEXIST, "a attaches twice: %d", err);

	/* Whom a link can reach. */
	err = uroce_ipc_shm_link(a, "uroce0", gid, qb, 0, &ia, &m1, &f1);
	CHECK(err == -ENOTCONN, "to a connection that takes no part: %d", err);
	err = uroce_ipc_shm_link(a, "uroce0", nowhere, qb, 0, &ia, &m1, &f1);
	CHECK(err == -ENOENT, "to a GID of no device of this daemon: %d", err);
	err = uroce_ipc_shm_link(a, "uroce0", gid, qb ^ 0x800000, 0, &ia, &m1, &f1);
	CHECK(err == -ENOENT, "to a QPN nobody owns: %d", err);
	REQUIRE(!uroce_ipc_shm_attach(b, "uroce0", eb), "b attaches");
	err = uroce_ipc_shm_accept(b, "uroce0", &ib, &m2, &f2);
	CHECK(err == -ENOENT, "nothing to accept yet: %d", err);

	/* a -> b: the link, sealed at its size, b woken and accepting the same link. */
	REQUIRE(!uroce_ipc_shm_link(a, "uroce0", gid, qb, 256 << 10, &ia, &m1, &f1), "a links to b's QPN");
	CHECK(ia.ring_bytes == 256u << 10 && ia.size == uroce_shm_size(ia.ring_bytes) && !ia.self &&
	      ia.peer_pid == getpid() && ia.qpn_block == qb / UROCE_IPC_QPN_BLOCK, "link described");
	{
		struct stat st;
		int seals = fcntl(m1, F_GET_SEALS);
		struct uroce_shm_hdr *h;

		CHECK(!fstat(m1, &st) && (uint64_t)st.st_size == ia.size, "memfd size");
		CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW) && (seals & F_SEAL_SEAL),
		      "sealed against resizing (seals %x)", seals);
		CHECK(ftruncate(m1, 4096) < 0, "a peer cannot shrink it");
		h = mmap(NULL, UROCE_SHM_HDR_BYTES, PROT_READ, MAP_SHARED, m1, 0);
		REQUIRE(h != MAP_FAILED, "map header");
		CHECK(h->magic == UROCE_SHM_MAGIC && h->link_id == ia.id && h->ring_bytes == ia.ring_bytes &&
		      !h->side[0].gone && !h->side[1].gone, "header");
		CHECK(read(eb, &v, sizeof(v)) == sizeof(v) && v >= UROCE_SHM_WAKE_LINKS, "b woken for the link");
		REQUIRE(!uroce_ipc_shm_accept(b, "uroce0", &ib, &m2, &f2), "b accepts");
		CHECK(ib.id == ia.id && ib.side != ia.side, "the same link, the other side");
		close(m2);
		close(f2);
		/* b asks for a's QPN: the same link again, nothing more to accept. */
		REQUIRE(!uroce_ipc_shm_link(b, "uroce0", gid, qa, 0, &ib, &m2, &f2), "b links to a's QPN");
		CHECK(ib.id == ia.id, "one link per pair");
		close(m2);
		close(f2);
		err = uroce_ipc_shm_accept(a, "uroce0", &ic, &m2, &f2);
		CHECK(err == -ENOENT, "a took its link by SHM_LINK, nothing to accept: %d", err);
		/* A link of a connection with itself. */
		REQUIRE(!uroce_ipc_shm_link(a, "uroce0", gid, qa, 0, &ic, &m2, &f2), "a links to itself");
		CHECK(ic.self && ic.id != ia.id, "a self link of its own");
		close(m2);
		close(f2);
		/* b goes: its side is marked gone, a woken. */
		while (read(ea, &v, sizeof(v)) == sizeof(v))
			;
		uroce_ipc_close(b);
		{
			int64_t end = now_ms() + 5000;

			while (!__atomic_load_n(&h->side[ib.side].gone, __ATOMIC_SEQ_CST) && now_ms() < end)
				pause_ms(5);
		}
		CHECK(h->side[ib.side].gone && !h->side[ia.side].gone, "b's side gone, a's not");
		CHECK(read(ea, &v, sizeof(v)) == sizeof(v) && v >= UROCE_SHM_WAKE_LINKS, "a woken by the death");
		munmap(h, UROCE_SHM_HDR_BYTES);
	}
	close(m1);
	close(f1);
	uroce_ipc_close(a);
	uroce_ipc_close(c);
	return check_summary();
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 && !strcmp(argv[1], "autostart"))
		return test_autostart();
	if (argc == 2 && !strcmp(argv[1], "qpn"))
		return test_qpn();
	if (argc == 2 && !strcmp(argv[1], "death"))
		return test_death();
	if (argc == 2 && !strcmp(argv[1], "steer"))
		return test_steer();
	if (argc == 2 && !strcmp(argv[1], "counters"))
		return test_counters();
	if (argc == 2 && !strcmp(argv[1], "proto"))
		return test_proto();
	if (argc == 2 && !strcmp(argv[1], "events"))
		return test_events();
	if (argc == 2 && !strcmp(argv[1], "shm"))
		return test_shm();
	if (argc == 3 && !strcmp(argv[1], "holder"))
		return holder(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "owner")) {
		/* owner DEV QPN: print the owner's pid, or "free" (for shell tests). */
		struct uroce_ipc *ipc;
		int32_t pid;
		int err = uroce_ipc_open(&ipc, 0);

		if (!err) {
			err = uroce_ipc_qpn_owner(ipc, argv[2], (uint32_t)strtoul(argv[3], NULL, 0), &pid);
			uroce_ipc_close(ipc);
		}
		if (err == -ENOENT) {
			printf("free\n");
			return 0;
		}
		if (err) {
			fprintf(stderr, "owner: %s\n", strerror(-err));
			return 1;
		}
		printf("%d\n", pid);
		return 0;
	}
	fprintf(stderr, "usage: ipc_test autostart|qpn|death|steer|counters|proto|events|holder DEV|owner DEV QPN\n");
	return 2;
}
