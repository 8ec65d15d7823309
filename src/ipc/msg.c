/* msg.c — one record over the daemon's SEQPACKET connection, with up to four descriptors
 * as SCM_RIGHTS ancillary data (proto.h).  The client (client.c) and uroced (server.c)
 * both send and receive through these two functions, so the control-message handling
 * — and the rule that a descriptor nobody takes is closed — lives in one place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ipc/proto.h"

#define MAX_FDS 4            /* room for a peer that sends more than one: all get closed */

ssize_t uroce_ipc_send_recn(int sock, const void *rec, size_t len, const int *fds, unsigned nfds,
			   int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)rec, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > MAX_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR && !(flags & MSG_DONTWAIT));
	return n;
}

ssize_t uroce_ipc_send_rec(int sock, const void *rec, size_t len, int fd, int flags)
{
	return uroce_ipc_send_recn(sock, rec, len, &fd, fd >= 0 ? 1 : 0, flags);
}

ssize_t uroce_ipc_recv_recn(int sock, void *rec, size_t len, int *fds, unsigned maxfds, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = rec, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	unsigned kept = 0;
	ssize_t n;

	for (unsigned i = 0; i < maxfds; i++)
		fds[i] = -1;
	n = recvmsg(sock, &mh, flags);
	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;
		int got[MAX_FDS];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > MAX_FDS)
			k = MAX_FDS;
		memcpy(got, CMSG_DATA(cm), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (kept < maxfds)
				fds[kept++] = got[i];
			else
				close(got[i]);
		}
	}
	return n;
}

ssize_t uroce_ipc_recv_rec(int sock, void *rec, size_t len, int *fd, int flags)
{
	int dummy;

	return uroce_ipc_recv_recn(sock, rec, len, fd ? fd : &dummy, fd ? 1 : 0, flags);
}
