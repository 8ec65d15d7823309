/* devview.c — the device's GID view (devview.h). */
#include <errno.h>
#include <string.h>

#include "core/devview.h"

static const uint16_t pkey_table[UROCE_PKEY_TBL_LEN] = { UROCE_PKEY_DEFAULT };

void uroce_devview_init(struct uroce_devview *v, const struct uroce_dev_info *info)
{
	pthread_mutex_init(&v->lock, NULL);
	v->info = *info;
}

void uroce_devview_get(struct uroce_devview *v, struct uroce_dev_info *out)
{
	pthread_mutex_lock(&v->lock);
	*out = v->info;
	pthread_mutex_unlock(&v->lock);
}

void uroce_devview_set(struct uroce_devview *v, const struct uroce_dev_info *info)
{
	pthread_mutex_lock(&v->lock);
	v->info = *info;
	pthread_mutex_unlock(&v->lock);
}

int uroce_devview_gid(struct uroce_devview *v, unsigned index, uint8_t gid[16], uint8_t *type,
		      uint32_t *ifindex)
{
	int ret = 0;

	if (index >= UROCE_MAX_GIDS)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	if (index >= v->info.num_gids || !v->info.gids[index].valid) {
		ret = -ENODATA;
	} else {
		if (gid)
			memcpy(gid, v->info.gids[index].gid, 16);
		if (type)
			*type = v->info.gids[index].type;
		if (ifindex)
			*ifindex = v->info.ifindex;
	}
	pthread_mutex_unlock(&v->lock);
	return ret;
}

int uroce_devview_find_gid(struct uroce_devview *v, const uint8_t gid[16], uint8_t type)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&v->lock);
	for (unsigned i = 0; i < v->info.num_gids && i < UROCE_MAX_GIDS; i++) {
		if (v->info.gids[i].valid && v->info.gids[i].type == type &&
		    !memcmp(v->info.gids[i].gid, gid, 16)) {
			ret = (int)i;
			break;
		}
	}
	pthread_mutex_unlock(&v->lock);
	return ret;
}

uint32_t uroce_devview_ifindex(struct uroce_devview *v)
{
	uint32_t i;

	pthread_mutex_lock(&v->lock);
	i = v->info.ifindex;
	pthread_mutex_unlock(&v->lock);
	return i;
}

enum ibv_mtu uroce_devview_active_mtu(struct uroce_devview *v)
{
	uint32_t m;

	pthread_mutex_lock(&v->lock);
	m = v->info.netdev_mtu;
	pthread_mutex_unlock(&v->lock);
	return uroce_mtu_from_netdev(m);
}

int uroce_devview_pkey(unsigned index, uint16_t *pkey)
{
	if (index >= UROCE_PKEY_TBL_LEN)
		return -EINVAL;
	*pkey = pkey_table[index];
	return 0;
}

enum ibv_mtu uroce_mtu_from_netdev(uint32_t netdev_mtu)
{
	uint32_t room = netdev_mtu > UROCE_IB_MTU_OVERHEAD ? netdev_mtu - UROCE_IB_MTU_OVERHEAD : 0;

	if (room >= 4096)
		return IBV_MTU_4096;
	if (room >= 2048)
		return IBV_MTU_2048;
	if (room >= 1024)
		return IBV_MTU_1024;
	if (room >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}
