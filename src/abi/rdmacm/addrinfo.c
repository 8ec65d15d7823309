/*
 * addrinfo.c — rdma_getaddrinfo / rdma_freeaddrinfo, as rdma-core 44 behaves on
 * RoCE (its addrinfo.c without ibacm, which has nothing to say on RoCE).
 *
 * getaddrinfo(3) resolves the name; only its first result is used.  The hints map
 * onto getaddrinfo's: RAI_PASSIVE -> AI_PASSIVE (the address goes to ai_src_addr,
 * else ai_dst_addr), RAI_NUMERICHOST -> AI_NUMERICHOST, ai_qp_type -> the socket type
 * (RC/UC/XRC stream, UD datagram), ai_port_space -> the protocol (TCP; UDP for UDP and
 * IPoIB; IB by socket type).  Unset ones in the result come from what getaddrinfo
 * found: stream -> RC, datagram -> UD, TCP -> RDMA_PS_TCP, UDP -> RDMA_PS_UDP.
 * RAI_FAMILY with AF_IB and RAI_NUMERICHOST converts an IPv6 address to a
 * sockaddr_ib (uroce's ids refuse AF_IB addresses later, as the kernel without
 * AF_IB support would).  ai_route and ai_connect stay empty (only ibacm fills them).
 *
 * Errors: getaddrinfo's EAI_* code is returned as is (callers print gai_strerror);
 * -1 with errno EINVAL for node, service and hints all NULL, ENODEV without any RDMA
 * device (librdmacm's ucma_init runs first), ENOMEM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <infiniband/ib.h>

#include "rdmacm_priv.h"

socklen_t cm_addrlen(const struct sockaddr *addr)
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;       /* AF_IB included: uroce is RoCE only */
	}
}

static void to_ai_hints(struct addrinfo *ai, const struct rdma_addrinfo *rai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (rai->ai_family != AF_IB)
		ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const void *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* An IPv6 address as AF_IB: the GID is the address, the service ID is the port
 * space and port (rdma_get_service_id's formula), P_Key the default. */
static int to_sib(int ps, struct sockaddr **dst, socklen_t *dst_len,
		  const struct sockaddr_in6 *sin6)
{
	struct sockaddr_ib *sib = calloc(1, sizeof(*sib));
	uint16_t port = be16toh(sin6->sin6_port);

	if (!sib)
		return -ENOMEM;
	sib->sib_family = AF_IB;
	sib->sib_pkey = htobe16(0xFFFF);
	sib->sib_flowinfo = sin6->sin6_flowinfo;
	memcpy(&sib->sib_addr, &sin6->sin6_addr, sizeof(sib->sib_addr));
	sib->sib_sid = htobe64(((uint64_t)ps << 16) + port);
	if (ps)
		sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
	if (port)
		sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
	sib->sib_scope_id = sin6->sin6_scope_id;
	*dst = (struct sockaddr *)sib;
	*dst_len = sizeof(*sib);
	return 0;
}

static int from_ai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints,
		   const struct addrinfo *ai)
{
	bool want_ib = (hints->ai_flags & RAI_FAMILY) && hints->ai_family == AF_IB &&
		       (hints->ai_flags & RAI_NUMERICHOST) && ai->ai_family == AF_INET6;
	struct sockaddr **addr;
	socklen_t *len;
	char **canon;

	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		rai->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		rai->ai_qp_type = IBV_QPT_UD;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		rai->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		rai->ai_port_space = RDMA_PS_UDP;

	if (ai->ai_flags & AI_PASSIVE) {
		rai->ai_flags = RAI_PASSIVE;
		addr = &rai->ai_src_addr;
		len = &rai->ai_src_len;
		canon = &rai->ai_src_canonname;
	} else {
		addr = &rai->ai_dst_addr;
		len = &rai->ai_dst_len;
		canon = &rai->ai_dst_canonname;
	}
	if (ai->ai_canonname) {
		*canon = strdup(ai->ai_canonname);
		if (!*canon)
			return -ENOMEM;
	}
	if (want_ib) {
		rai->ai_family = AF_IB;
		return to_sib(rai->ai_port_space, addr, len,
			      (const struct sockaddr_in6 *)ai->ai_addr);
	}
	rai->ai_family = ai->ai_family;
	return copy_addr(addr, len, ai->ai_addr, ai->ai_addrlen);
}

UROCE_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	struct rdma_addrinfo *rai;
	int ret;

	if (!service && !node && !hints)
		return cm_err(-EINVAL);
	if (!res)
		return cm_err(-EINVAL);
	ret = cm_init();
	if (ret)
		return cm_err(ret);
	rai = calloc(1, sizeof(*rai));
	if (!rai)
		return cm_err(-ENOMEM);
	if (!hints)
		hints = &nohints;
	if (node || service) {
		struct addrinfo ai_hints, *ai;

		to_ai_hints(&ai_hints, hints);
		ret = getaddrinfo(node, service, hints == &nohints ? NULL : &ai_hints, &ai);
		if (ret) {
			rdma_freeaddrinfo(rai);
			return ret;      /* EAI_*, for gai_strerror */
		}
		ret = from_ai(rai, hints, ai);
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return cm_err(ret);
	}
	*res = rai;
	return 0;
}

UROCE_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *rai = res;

		res = res->ai_next;
		free(rai->ai_connect);
		free(rai->ai_route);
		free(rai->ai_src_canonname);
		free(rai->ai_dst_canonname);
		free(rai->ai_src_addr);
		free(rai->ai_dst_addr);
		free(rai);
	}
}
