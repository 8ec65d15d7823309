/* msg.c — one record over the daemon's SEQPACKET connection, with at most one descriptor
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

ssize_t uroce_ipc_send_rec(int sock, const void *rec, size_t len, int fd, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)rec, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR && !(flags & MSG_DONTWAIT));
	return n;
}

ssize_t uroce_ipc_recv_rec(int sock, void *rec, size_t len, int *fd, int flags)
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
	ssize_t n;
	int keep = -1;

	if (fd)
		*fd = -1;
	n = recvmsg(sock, &mh, flags);
	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;
		int fds[MAX_FDS];

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > MAX_FDS)
			k = MAX_FDS;
		memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (fd && keep < 0)
				keep = fds[i];
			else
				close(fds[i]);
		}
	}
	if (fd)
		*fd = keep;
	return n;
}
