/* mcast.h — UD multicast attachments (issue #5, docs/ud-uc.md).
 *
 * A RoCEv2 multicast GID is an IP multicast address: ff00::/8 for IPv6, ::ffff:224.0.0.0/4
 * for IPv4 (RoCEv2 Annex A17: the GRH DGID is the IP destination).  The first
 * ibv_attach_mcast of a group in a context joins it on the context's receive socket
 * (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP on the device's interface) and on a companion socket
 * bound to the group address that drops everything (mcast.c says why: it keeps Linux from
 * re-steering a lone member's datagrams to uroced).  The receive path hands a packet
 * addressed to QPN 0xFFFFFF (IBA 9.6.1.1 / 10.5: the multicast QPN) to every attached QP of
 * the context.  The last detach of a group in a context (or ibv_destroy_qp of its last QP)
 * leaves it and closes the companion.  Process-wide table under its own mutex (a leaf lock).
 *
 * Errors: 0 or -errno (-EINVAL: not a multicast GID or not a UD QP; -EBADF: no receive
 * socket; -ENOENT: detach of a group the QP is not attached to; errors of the join itself;
 * attaching twice is accepted, as rxe).  A companion that cannot be opened is not an error:
 * the member alone receives whenever another socket of the host joined the group.
 */
#ifndef UROCE_TRANSPORT_MCAST_H
#define UROCE_TRANSPORT_MCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "verbs/verbs.h"

#define UROCE_MCAST_QPN 0xFFFFFFu

bool uroce_mcast_gid_ok(const uint8_t gid[16]);
/* Attach/detach @qp to @gid; @fd is the context's receive socket, @ifindex the device's. */
int uroce_mcast_attach(struct uroce_qp *qp, const uint8_t gid[16], int fd, int ifindex);
int uroce_mcast_detach(struct uroce_qp *qp, const uint8_t gid[16], int fd, int ifindex);
/* Forget every attachment of @qp (ibv_destroy_qp), leaving groups no longer used. */
void uroce_mcast_qp_gone(struct uroce_qp *qp, int fd, int ifindex);
/* Is @qp attached to @gid? */
bool uroce_mcast_member(const struct uroce_qp *qp, const uint8_t gid[16]);

#endif
