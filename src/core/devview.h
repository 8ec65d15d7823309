/* devview.h — the device's GID view (below the verbs layer and the transports).
 *
 * What a process knows of a uroce device: the description uroced last sent (name, netdev,
 * ifindex, MTU, port state, GID table) and the port's P_Key table.  The verbs layer keeps
 * it current (ibv_get_device_list, ibv_query_port refresh it from the daemon) and answers
 * ibv_query_gid / ibv_query_pkey / ibv_query_port from it; the transports read the source
 * GID of a QP, the interface and the port MTU from it without a round trip to the daemon.
 */
#ifndef UROCE_CORE_DEVVIEW_H
#define UROCE_CORE_DEVVIEW_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "ipc/ipc.h"

/* Bytes of netdev MTU not available to the IB MTU (rxe's rule). */
#define UROCE_IB_MTU_OVERHEAD 80
/* The port's P_Key table (IBA 10.9): rxe's, one entry, the default partition with full
 * membership (no subnet manager assigns partitions on Ethernet), for every device. */
#define UROCE_PKEY_TBL_LEN 1
#define UROCE_PKEY_DEFAULT 0xFFFF

struct uroce_devview {
	pthread_mutex_t lock;
	struct uroce_dev_info info;           /* last description received from uroced */
};

void uroce_devview_init(struct uroce_devview *v, const struct uroce_dev_info *info);
/* Copy the whole description / replace it (same device). */
void uroce_devview_get(struct uroce_devview *v, struct uroce_dev_info *out);
void uroce_devview_set(struct uroce_devview *v, const struct uroce_dev_info *info);
/* GID slot @index: 0, -EINVAL (index out of range), -ENODATA (empty slot).  Any of the
 * outputs may be NULL. */
int uroce_devview_gid(struct uroce_devview *v, unsigned index, uint8_t gid[16], uint8_t *type,
		      uint32_t *ifindex);
/* The index of a valid slot holding @gid of @type (UROCE_GID_TYPE_*), or -ENOENT. */
int uroce_devview_find_gid(struct uroce_devview *v, const uint8_t gid[16], uint8_t type);
uint32_t uroce_devview_ifindex(struct uroce_devview *v);
/* The port's active MTU, as enum ibv_mtu (derived from the netdev's MTU). */
enum ibv_mtu uroce_devview_active_mtu(struct uroce_devview *v);
/* Entry @index of the P_Key table (host order): 0 or -EINVAL. */
int uroce_devview_pkey(unsigned index, uint16_t *pkey);
/* Largest IB MTU that fits in a netdev MTU (rxe's rule). */
enum ibv_mtu uroce_mtu_from_netdev(uint32_t netdev_mtu);

#endif
