/*
 * The rsocket API (<rdma/rsocket.h>): sockets over RDMA, used only by rstream, rcopy,
 * riostream, udpong and the LD_PRELOAD shim librspreload.so.  uroce does not implement
 * it; the names are exported so that binaries linked -z now load (rping, ucmatose,
 * udaddy, mckey and cmtime import rpoll through rdmacm-utils' shared common.c without
 * calling it).  Every call fails with errno ENOSYS and touches none of its arguments.
 */
#include <errno.h>

#include <rdma/rsocket.h>

#include "rdmacm_priv.h"

static int nosys(void)
{
	errno = ENOSYS;
	return -1;
}

UROCE_EXPORT int rsocket(int domain, int type, int protocol)
{
	return nosys();
}

UROCE_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return nosys();
}

UROCE_EXPORT int rlisten(int socket, int backlog)
{
	return nosys();
}

UROCE_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return nosys();
}

UROCE_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return nosys();
}

UROCE_EXPORT int rshutdown(int socket, int how)
{
	return nosys();
}

UROCE_EXPORT int rclose(int socket)
{
	return nosys();
}

UROCE_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return nosys();
}

UROCE_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			       struct sockaddr *src_addr, socklen_t *addrlen)
{
	return nosys();
}

UROCE_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return nosys();
}

UROCE_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return nosys();
}

UROCE_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			     const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return nosys();
}

UROCE_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return nosys();
}

UROCE_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return nosys();
}

UROCE_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return nosys();
}

UROCE_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return nosys();
}

UROCE_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return nosys();
}

UROCE_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return nosys();
}

UROCE_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
			 fd_set *exceptfds, struct timeval *timeout)
{
	return nosys();
}

UROCE_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return nosys();
}

UROCE_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return nosys();
}

UROCE_EXPORT int rsetsockopt(int socket, int level, int optname,
			     const void *optval, socklen_t optlen)
{
	return nosys();
}

UROCE_EXPORT int rgetsockopt(int socket, int level, int optname,
			     void *optval, socklen_t *optlen)
{
	return nosys();
}

/* The variadic argument is never read, so no va_list is needed. */
UROCE_EXPORT int rfcntl(int socket, int cmd, ...)
{
	return nosys();
}

/* rdma-core's error value for the off_t and size_t returning calls is -1 as well. */
UROCE_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	return nosys();
}

UROCE_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	return nosys();
}

UROCE_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	nosys();
	return (size_t)-1;
}
