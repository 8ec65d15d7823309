/*
 * The drop-in librdmacm.so.1 on a machine with no uroce device and no daemon: every
 * call fails the way rdma-core 44 fails without an RDMA device (ENODEV, which
 * programs report as "No RDMA devices were detected"), NULL arguments give EINVAL
 * instead of a crash, nothing is written through the caller's pointers, void calls
 * accept NULL, nothing blocks, and the rsocket calls fail as a socket call would (ENODEV, EBADF).
 *
 * "No daemon" is made explicit: main() points the library at an abstract socket
 * name nobody listens on and at a daemon binary that does not exist, so no uroced
 * is found or autostarted whatever runs on this host.  The behaviour with a daemon
 * is tested in tests/rdmacm (a fake daemon) and tests/cm_apps (the real one).
 *
 * Linked against the built library (not the .c files) so the exported, versioned
 * entry points are what is tested.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

/* Every enumerator of enum rdma_cm_event_type in the rdma-core 44 header. */
#define FIRST_EVENT RDMA_CM_EVENT_ADDR_RESOLVED
#define LAST_EVENT RDMA_CM_EVENT_TIMEWAIT_EXIT

#define assert_fails(call, err)                  \
	do {                                     \
		errno = 0;                       \
		assert_int_equal((call), -1);    \
		assert_int_equal(errno, (err));  \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_event_str(void **state)
{
	const char *unknown = rdma_event_str((enum rdma_cm_event_type)-1);
	int e, f;

	assert_non_null(unknown);
	for (e = FIRST_EVENT; e <= LAST_EVENT; e++) {
		const char *s = rdma_event_str((enum rdma_cm_event_type)e);

		assert_non_null(s);
		assert_string_not_equal(s, unknown);
		assert_int_equal(strncmp(s, "RDMA_CM_EVENT_", 14), 0);
		for (f = FIRST_EVENT; f < e; f++)
			assert_string_not_equal(s, rdma_event_str((enum rdma_cm_event_type)f));
	}
	assert_string_equal(rdma_event_str((enum rdma_cm_event_type)(LAST_EVENT + 1)), unknown);
	assert_string_equal(rdma_event_str((enum rdma_cm_event_type)INT_MAX), unknown);
	assert_string_equal(rdma_event_str((enum rdma_cm_event_type)INT_MIN), unknown);
}

/* librdmacm opens the rdma_cm device only once a device exists: ENODEV, quickly. */
static void test_channel_no_device(void **state)
{
	double t0 = now_s();

	errno = 0;
	assert_null(rdma_create_event_channel());
	assert_int_equal(errno, ENODEV);
	assert_true(now_s() - t0 < 3.0);     /* no autostart wait, no hang */
	rdma_destroy_event_channel(NULL);    /* ignored */
}

static void test_create_id_no_device(void **state)
{
	struct rdma_cm_id *sentinel = (struct rdma_cm_id *)&sentinel;
	struct rdma_cm_id *id = sentinel;

	assert_fails(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), ENODEV); /* sync mode */
	assert_ptr_equal(id, sentinel);                 /* not written */
	assert_fails(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), ENODEV);
	assert_ptr_equal(id, sentinel);
	assert_fails(rdma_create_id(NULL, NULL, NULL, RDMA_PS_TCP), EINVAL);
}

static void test_addrinfo_and_devices(void **state)
{
	struct rdma_addrinfo *sentinel = (struct rdma_addrinfo *)&sentinel;
	struct rdma_addrinfo *res = sentinel;
	struct rdma_addrinfo hints;
	int n = 42;

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	/* librdmacm looks for a device before it resolves anything. */
	assert_fails(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), ENODEV);
	assert_ptr_equal(res, sentinel);
	assert_fails(rdma_getaddrinfo(NULL, NULL, NULL, &res), EINVAL);
	assert_fails(rdma_getaddrinfo("127.0.0.1", NULL, NULL, NULL), EINVAL);
	rdma_freeaddrinfo(NULL);

	errno = 0;
	assert_null(rdma_get_devices(&n));
	assert_int_equal(errno, ENODEV);
	assert_int_equal(n, 0);
	assert_null(rdma_get_devices(NULL));
	rdma_free_devices(NULL);
}

/* Every call that takes an object, given NULL: EINVAL, never a crash. */
static void test_null_arguments(void **state)
{
	struct rdma_cm_id *out = NULL;

	assert_fails(rdma_destroy_id(NULL), EINVAL);
	assert_fails(rdma_bind_addr(NULL, NULL), EINVAL);
	assert_fails(rdma_resolve_addr(NULL, NULL, NULL, 100), EINVAL);
	assert_fails(rdma_resolve_route(NULL, 100), EINVAL);
	assert_fails(rdma_create_qp(NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_create_qp_ex(NULL, NULL), EINVAL);
	assert_fails(rdma_create_srq(NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_create_srq_ex(NULL, NULL), EINVAL);
	assert_fails(rdma_init_qp_attr(NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_connect(NULL, NULL), EINVAL);
	assert_fails(rdma_establish(NULL), EINVAL);
	assert_fails(rdma_listen(NULL, 1), EINVAL);
	assert_fails(rdma_get_request(NULL, NULL), EINVAL);
	assert_fails(rdma_get_request(NULL, &out), EINVAL);
	assert_null(out);
	assert_fails(rdma_accept(NULL, NULL), EINVAL);
	assert_fails(rdma_reject(NULL, NULL, 0), EINVAL);
	assert_fails(rdma_reject_ece(NULL, NULL, 0), EINVAL);
	assert_fails(rdma_set_local_ece(NULL, NULL), EINVAL);
	assert_fails(rdma_get_remote_ece(NULL, NULL), EINVAL);
	assert_fails(rdma_notify(NULL, IBV_EVENT_COMM_EST), EINVAL);
	assert_fails(rdma_disconnect(NULL), EINVAL);
	assert_fails(rdma_join_multicast(NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_join_multicast_ex(NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_leave_multicast(NULL, NULL), EINVAL);
	assert_fails(rdma_set_option(NULL, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 0), EINVAL);
	assert_fails(rdma_migrate_id(NULL, NULL), EINVAL);
	assert_fails(rdma_create_ep(NULL, NULL, NULL, NULL), EINVAL);
	assert_fails(rdma_create_ep(&out, NULL, NULL, NULL), EINVAL);
	assert_null(out);
	assert_fails(rdma_get_cm_event(NULL, NULL), EINVAL);
	assert_fails(rdma_ack_cm_event(NULL), EINVAL);
	assert_int_equal(rdma_get_src_port(NULL), 0);
	assert_int_equal(rdma_get_dst_port(NULL), 0);
	rdma_destroy_qp(NULL);
	rdma_destroy_srq(NULL);
	rdma_destroy_ep(NULL);
}

/* rdma_create_ep on an addrinfo it could never have got: the id cannot be created. */
static void test_create_ep_no_device(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct rdma_addrinfo ai;
	struct rdma_cm_id *out = NULL;

	memset(&ai, 0, sizeof(ai));
	ai.ai_port_space = RDMA_PS_TCP;
	ai.ai_qp_type = IBV_QPT_RC;
	ai.ai_dst_addr = (struct sockaddr *)&sin;
	ai.ai_dst_len = sizeof(sin);
	assert_fails(rdma_create_ep(&out, &ai, NULL, NULL), ENODEV);
	assert_null(out);
}

/* With no device an rsocket cannot be made (ENODEV, as rdma_create_id); a number that
 * is not an rsocket is EBADF for every call; rpoll/rselect still serve ordinary fds. */
static void test_rsocket_no_device(void **state)
{
	char buf[8];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	struct timeval tv = { 0, 0 };
	struct pollfd pfd;
	int opt = 0, p[2];
	fd_set rd;

	assert_fails(rsocket(AF_INET, SOCK_STREAM, 0), ENODEV);
	assert_fails(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);
	assert_fails(rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), ENOTSUP);
	/* A datagram rsocket is a UDP socket until its first QP (as rdma-core): it is made,
	 * and the first send, which needs a device, fails. */
	{
		struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(9),
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int d = rsocket(AF_INET, SOCK_DGRAM, 0);

		assert_true(d >= 0);
		assert_fails(rsendto(d, buf, sizeof(buf), 0, (struct sockaddr *)&dst, sizeof(dst)),
			     ENODEV);
		assert_int_equal(rclose(d), 0);
	}
	assert_fails(rbind(3, (struct sockaddr *)&sin, len), EBADF);
	assert_fails(rlisten(3, 1), EBADF);
	assert_fails(raccept(3, NULL, NULL), EBADF);
	assert_fails(rconnect(3, (struct sockaddr *)&sin, len), EBADF);
	assert_fails(rshutdown(3, SHUT_RDWR), EBADF);
	assert_fails(rclose(3), EBADF);
	assert_fails(rrecv(3, buf, sizeof(buf), 0), EBADF);
	assert_fails(rrecvfrom(3, buf, sizeof(buf), 0, NULL, NULL), EBADF);
	assert_fails(rrecvmsg(3, &msg, 0), EBADF);
	assert_fails(rsend(3, buf, sizeof(buf), 0), EBADF);
	assert_fails(rsendto(3, buf, sizeof(buf), 0, NULL, 0), EBADF);
	assert_fails(rsendmsg(3, &msg, 0), EBADF);
	assert_fails(rread(3, buf, sizeof(buf)), EBADF);
	assert_fails(rreadv(3, &iov, 1), EBADF);
	assert_fails(rwrite(3, buf, sizeof(buf)), EBADF);
	assert_fails(rwritev(3, &iov, 1), EBADF);
	assert_fails(rgetpeername(3, NULL, NULL), EBADF);
	assert_fails(rgetsockname(3, NULL, NULL), EBADF);
	assert_fails(rsetsockopt(3, SOL_SOCKET, SO_REUSEADDR, &opt, sizeof(opt)), EBADF);
	assert_fails(rgetsockopt(3, SOL_SOCKET, SO_REUSEADDR, NULL, NULL), EBADF);
	assert_fails(rfcntl(3, F_SETFL, O_NONBLOCK), EBADF);
	assert_fails(riomap(3, buf, sizeof(buf), PROT_WRITE, 0, -1), EBADF);
	assert_fails(riounmap(3, buf, sizeof(buf)), EBADF);
	errno = 0;
	assert_true(riowrite(3, buf, sizeof(buf), 0, 0) == (size_t)-1);
	assert_int_equal(errno, EBADF);

	/* rpoll and rselect on ordinary fds: nothing blocks. */
	assert_int_equal(rpoll(NULL, 0, 0), 0);
	assert_int_equal(rselect(0, NULL, NULL, NULL, &tv), 0);
	assert_int_equal(pipe(p), 0);
	pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
	assert_int_equal(rpoll(&pfd, 1, 10), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(rpoll(&pfd, 1, -1), 1);
	assert_true(pfd.revents & POLLIN);
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	assert_int_equal(rselect(p[0] + 1, &rd, NULL, NULL, NULL), 1);
	assert_true(FD_ISSET(p[0], &rd));
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_str),
		cmocka_unit_test(test_channel_no_device),
		cmocka_unit_test(test_create_id_no_device),
		cmocka_unit_test(test_addrinfo_and_devices),
		cmocka_unit_test(test_null_arguments),
		cmocka_unit_test(test_create_ep_no_device),
		cmocka_unit_test(test_rsocket_no_device),
	};
	char name[64];

	/* No daemon and none to start: a name nobody listens on, a binary that is not
	 * there (the library would otherwise find build/bin/uroced and start it). */
	snprintf(name, sizeof(name), "uroce-test-nodev-%d", (int)getpid());
	setenv("UROCE_IPC_NAME", name, 1);
	setenv("UROCE_DAEMON", "/nonexistent/uroced", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
