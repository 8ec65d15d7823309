/*
 * rs_dgram.c — SOCK_DGRAM rsockets (UD plus a UDP socket in rsocket.c).  NOT IMPLEMENTED
 * in uroce yet: rsocket(…, SOCK_DGRAM, …) fails with ENOTSUP, the answer rsocket.c gives
 * for a type it does not carry, so that librspreload falls back to a real UDP socket
 * (name lookups, iperf3's UDP tests) instead of failing.  The other entry points are
 * unreachable (no datagram rsocket can exist) and fail the same way.  rs_proto.c already
 * has the datagram headers (ds_header, ds_udp_header) and their tests.
 */
#include <errno.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

int ds_init(struct rsock *rs, int domain)
{
	(void)rs;
	(void)domain;
	return -ENOTSUP;
}

int ds_init_ep(struct rsock *rs)
{
	(void)rs;
	return -ENOTSUP;
}

int ds_connect(struct rsock *rs, const struct sockaddr *addr, socklen_t len)
{
	(void)rs;
	(void)addr;
	(void)len;
	return cm_err(-ENOTSUP);
}

ssize_t ds_recvfrom(struct rsock *rs, void *buf, size_t len, int flags,
		    struct sockaddr *src, socklen_t *srclen)
{
	(void)rs;
	(void)buf;
	(void)len;
	(void)flags;
	(void)src;
	(void)srclen;
	return cm_err(-ENOTSUP);
}

ssize_t ds_sendto(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags,
		  const struct sockaddr *dst, socklen_t dstlen)
{
	(void)rs;
	(void)iov;
	(void)iovcnt;
	(void)flags;
	(void)dst;
	(void)dstlen;
	return cm_err(-ENOTSUP);
}

void ds_free(struct rsock *rs)
{
	(void)rs;
}

void ds_shutdown(struct rsock *rs)
{
	(void)rs;
}

short ds_poll_revents(struct rsock *rs, short events, bool nonblock, bool arm)
{
	(void)rs;
	(void)events;
	(void)nonblock;
	(void)arm;
	return POLLNVAL;
}

int ds_wait_fd(struct rsock *rs)
{
	(void)rs;
	return -1;
}

void ds_take_cq_event(struct rsock *rs)
{
	(void)rs;
}

void ds_udp_svc_process(struct rsock *rs)
{
	(void)rs;
}
