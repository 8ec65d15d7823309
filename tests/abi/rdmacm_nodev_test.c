/*
 * Behaviour of the drop-in librdmacm.so.1 before the connection manager exists: the
 * device-free calls work (event channels, event names), every other call fails cleanly
 * (rdma_*: -1/NULL + ENODEV, or EINVAL for a missing required argument; rsocket:
 * -1 + ENOSYS), never crashes on NULL, and never writes through the caller's pointers.
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
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

/* Every enumerator of enum rdma_cm_event_type in the rdma-core 44 header. */
#define FIRST_EVENT RDMA_CM_EVENT_ADDR_RESOLVED
#define LAST_EVENT RDMA_CM_EVENT_TIMEWAIT_EXIT

static void test_event_channel_is_a_real_fd(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct pollfd pfd;
	struct epoll_event ev = { .events = EPOLLIN };
	int flags, ep, fd;

	assert_non_null(ch);
	fd = ch->fd;
	assert_true(fd >= 0);

	/* O_CLOEXEC, like the rdma_cm device rdma-core opens. */
	flags = fcntl(fd, F_GETFD);
	assert_true(flags >= 0);
	assert_true(flags & FD_CLOEXEC);

	/* UCX and libfabric make it non-blocking and epoll it. */
	flags = fcntl(fd, F_GETFL);
	assert_true(flags >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	assert_true(ep >= 0);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	close(ep);

	/* No event is pending: poll with a zero timeout reports nothing readable. */
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 0);

	rdma_destroy_event_channel(ch);
	/* The fd is closed again (single-threaded test: nothing can reuse the number). */
	errno = 0;
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
}

static void test_event_channels_are_independent(void **state)
{
	struct rdma_event_channel *ch[8];
	size_t i, j;

	for (i = 0; i < 8; i++) {
		ch[i] = rdma_create_event_channel();
		assert_non_null(ch[i]);
		for (j = 0; j < i; j++)
			assert_int_not_equal(ch[i]->fd, ch[j]->fd);
	}
	for (i = 0; i < 8; i++)
		rdma_destroy_event_channel(ch[i]);
	rdma_destroy_event_channel(NULL);	/* ignored */
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

#define assert_fails(call, err)                  \
	do {                                     \
		errno = 0;                       \
		assert_int_equal((call), -1);    \
		assert_int_equal(errno, (err));  \
	} while (0)

static void test_create_id_no_device(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *sentinel = (struct rdma_cm_id *)&sentinel;
	struct rdma_cm_id *id = sentinel;

	assert_non_null(ch);
	assert_fails(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), ENODEV);
	assert_ptr_equal(id, sentinel);			/* not written */
	assert_fails(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), ENODEV); /* sync mode */
	assert_ptr_equal(id, sentinel);
	assert_fails(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP), EINVAL);
	rdma_destroy_event_channel(ch);
}

static void test_addrinfo_and_devices(void **state)
{
	struct rdma_addrinfo *sentinel = (struct rdma_addrinfo *)&sentinel;
	struct rdma_addrinfo *res = sentinel;
	struct rdma_addrinfo hints;
	int n = 42;

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
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

/*
 * Every id-taking call, first with NULL everywhere (EINVAL), then with a zeroed
 * rdma_cm_id that the library never made (ENODEV; it must not be dereferenced into
 * anything that crashes, and must stay unmodified).
 */
static void test_id_calls(void **state)
{
	struct rdma_cm_id fake, copy;
	struct rdma_cm_id *out = NULL;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr *sa = (struct sockaddr *)&sin;
	struct ibv_qp_init_attr qpia;
	struct ibv_qp_init_attr_ex qpiax;
	struct ibv_srq_init_attr srqa;
	struct ibv_srq_init_attr_ex srqax;
	struct ibv_qp_attr qpa;
	struct rdma_cm_join_mc_attr_ex mca;
	struct ibv_ece ece;
	struct rdma_conn_param cp;
	struct rdma_addrinfo ai;
	struct rdma_cm_event *evp = NULL;
	struct rdma_event_channel *ch;
	int mask = 0, opt = 1;

	memset(&fake, 0, sizeof(fake));
	memset(&qpia, 0, sizeof(qpia));
	memset(&qpiax, 0, sizeof(qpiax));
	memset(&srqa, 0, sizeof(srqa));
	memset(&srqax, 0, sizeof(srqax));
	memset(&mca, 0, sizeof(mca));
	memset(&ece, 0, sizeof(ece));
	memset(&cp, 0, sizeof(cp));
	memset(&ai, 0, sizeof(ai));
	copy = fake;

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
	assert_fails(rdma_get_cm_event(NULL, NULL), EINVAL);
	assert_fails(rdma_ack_cm_event(NULL), EINVAL);
	assert_int_equal(rdma_get_src_port(NULL), 0);
	assert_int_equal(rdma_get_dst_port(NULL), 0);
	rdma_destroy_qp(NULL);
	rdma_destroy_srq(NULL);
	rdma_destroy_ep(NULL);

	assert_fails(rdma_destroy_id(&fake), ENODEV);
	assert_fails(rdma_bind_addr(&fake, sa), ENODEV);
	assert_fails(rdma_resolve_addr(&fake, NULL, sa, 100), ENODEV);
	assert_fails(rdma_resolve_route(&fake, 100), ENODEV);
	assert_fails(rdma_create_qp(&fake, NULL, &qpia), ENODEV);
	assert_fails(rdma_create_qp_ex(&fake, &qpiax), ENODEV);
	assert_fails(rdma_create_srq(&fake, NULL, &srqa), ENODEV);
	assert_fails(rdma_create_srq_ex(&fake, &srqax), ENODEV);
	assert_fails(rdma_init_qp_attr(&fake, &qpa, &mask), ENODEV);
	assert_fails(rdma_connect(&fake, &cp), ENODEV);
	assert_fails(rdma_establish(&fake), ENODEV);
	assert_fails(rdma_listen(&fake, 1), ENODEV);
	assert_fails(rdma_get_request(&fake, &out), ENODEV);
	assert_null(out);
	assert_fails(rdma_accept(&fake, &cp), ENODEV);
	assert_fails(rdma_reject(&fake, "x", 1), ENODEV);
	assert_fails(rdma_reject_ece(&fake, "x", 1), ENODEV);
	assert_fails(rdma_set_local_ece(&fake, &ece), ENODEV);
	assert_fails(rdma_get_remote_ece(&fake, &ece), ENODEV);
	assert_fails(rdma_notify(&fake, IBV_EVENT_COMM_EST), ENODEV);
	assert_fails(rdma_disconnect(&fake), ENODEV);
	assert_fails(rdma_join_multicast(&fake, sa, NULL), ENODEV);
	assert_fails(rdma_join_multicast_ex(&fake, &mca, NULL), ENODEV);
	assert_fails(rdma_leave_multicast(&fake, sa), ENODEV);
	assert_fails(rdma_set_option(&fake, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &opt,
				     sizeof(opt)), ENODEV);
	assert_fails(rdma_create_ep(&out, &ai, NULL, &qpia), ENODEV);
	assert_null(out);
	assert_int_equal(rdma_get_src_port(&fake), 0);
	assert_int_equal(rdma_get_dst_port(&fake), 0);
	rdma_destroy_qp(&fake);
	rdma_destroy_srq(&fake);
	assert_memory_equal(&fake, &copy, sizeof(fake));

	/* No event can be queued, so rdma_get_cm_event fails instead of blocking. */
	ch = rdma_create_event_channel();
	assert_non_null(ch);
	assert_fails(rdma_get_cm_event(ch, &evp), ENODEV);
	assert_null(evp);
	assert_fails(rdma_migrate_id(&fake, ch), ENODEV);
	rdma_destroy_event_channel(ch);
}

static void test_rsocket_enosys(void **state)
{
	char buf[8];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	int opt = 0;

	assert_fails(rsocket(AF_INET, SOCK_STREAM, 0), ENOSYS);
	assert_fails(rbind(3, (struct sockaddr *)&sin, len), ENOSYS);
	assert_fails(rlisten(3, 1), ENOSYS);
	assert_fails(raccept(3, NULL, NULL), ENOSYS);
	assert_fails(rconnect(3, (struct sockaddr *)&sin, len), ENOSYS);
	assert_fails(rshutdown(3, SHUT_RDWR), ENOSYS);
	assert_fails(rclose(3), ENOSYS);
	assert_fails(rrecv(3, buf, sizeof(buf), 0), ENOSYS);
	assert_fails(rrecvfrom(3, buf, sizeof(buf), 0, NULL, NULL), ENOSYS);
	assert_fails(rrecvmsg(3, &msg, 0), ENOSYS);
	assert_fails(rsend(3, buf, sizeof(buf), 0), ENOSYS);
	assert_fails(rsendto(3, buf, sizeof(buf), 0, NULL, 0), ENOSYS);
	assert_fails(rsendmsg(3, &msg, 0), ENOSYS);
	assert_fails(rread(3, buf, sizeof(buf)), ENOSYS);
	assert_fails(rreadv(3, &iov, 1), ENOSYS);
	assert_fails(rwrite(3, buf, sizeof(buf)), ENOSYS);
	assert_fails(rwritev(3, &iov, 1), ENOSYS);
	assert_fails(rpoll(&pfd, 1, 0), ENOSYS);
	assert_fails(rpoll(NULL, 0, -1), ENOSYS);	/* must not block */
	assert_fails(rselect(0, NULL, NULL, NULL, NULL), ENOSYS);
	assert_fails(rgetpeername(3, NULL, NULL), ENOSYS);
	assert_fails(rgetsockname(3, NULL, NULL), ENOSYS);
	assert_fails(rsetsockopt(3, SOL_SOCKET, SO_REUSEADDR, &opt, sizeof(opt)), ENOSYS);
	assert_fails(rgetsockopt(3, SOL_SOCKET, SO_REUSEADDR, NULL, NULL), ENOSYS);
	assert_fails(rfcntl(3, F_SETFL, O_NONBLOCK), ENOSYS);
	assert_fails(riomap(3, buf, sizeof(buf), PROT_WRITE, 0, -1), ENOSYS);
	assert_fails(riounmap(3, buf, sizeof(buf)), ENOSYS);
	errno = 0;
	assert_true(riowrite(3, buf, sizeof(buf), 0, 0) == (size_t)-1);
	assert_int_equal(errno, ENOSYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_channel_is_a_real_fd),
		cmocka_unit_test(test_event_channels_are_independent),
		cmocka_unit_test(test_event_str),
		cmocka_unit_test(test_create_id_no_device),
		cmocka_unit_test(test_addrinfo_and_devices),
		cmocka_unit_test(test_id_calls),
		cmocka_unit_test(test_rsocket_enosys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
