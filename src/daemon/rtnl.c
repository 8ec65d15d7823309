/* rtnl.c — watch rtnetlink for link and address changes.
 *
 * We do not track changes incrementally: any RTM_NEWLINK/DELLINK/NEWADDR/DELADDR
 * (or a lost-message overrun, ENOBUFS) just tells the loop to re-read every
 * device's netdev, which is cheap at these rates and cannot drift from the truth.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/uroced.h"

int uroce_rtnl_open(void)
{
	struct sockaddr_nl sa = {
		.nl_family = AF_NETLINK,
		.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
	};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int uroce_rtnl_drain(int fd)
{
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	int relevant = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		unsigned int len;  /* unsigned: NLMSG_OK compares it with the u32 nlmsg_len */

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				/* Overrun: we lost events, so assume everything changed. */
				relevant = 1;
				continue;
			}
			return relevant;  /* EAGAIN: drained */
		}
		if (n == 0)
			return relevant;
		len = (unsigned int)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			switch (h->nlmsg_type) {
			case RTM_NEWLINK:
			case RTM_DELLINK:
			case RTM_NEWADDR:
			case RTM_DELADDR:
				relevant = 1;
				break;
			default:
				break;
			}
		}
	}
}
