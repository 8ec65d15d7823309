/*
 * cm_dev.c — the devices the connection manager puts ids on.
 *
 * As librdmacm: the process opens one ibv_context per RDMA device (this tree's
 * libibverbs.so.1, the uroce one, through ibv_get_device_list/ibv_open_device) and
 * shares it between every id on that device (id->verbs), with one default PD
 * (id->pd) that exists while ids use the device.  rdma_get_devices() hands out those
 * same contexts.  The daemon names an id's device in its QUERY reply; the library
 * finds it here by name.
 *
 * Differences from librdmacm: a device is matched by name, not GUID + index (names
 * are what uroce's daemon and libibverbs share); a default PD that cannot be freed
 * when the last id goes (the application still has MRs on it) is kept for the next
 * id instead of being leaked; a context whose daemon died is reopened when the next
 * id gets the device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rdmacm_priv.h"

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cm_dev *devs;
static struct ibv_device **dev_list;    /* the last list, kept as librdmacm keeps it */

void cm_dev_forget_after_fork(void)
{
	/* The parent's contexts are the parent's (libibverbs refuses them in the child):
	 * the child opens its own.  The old structures are left as they are. */
	pthread_mutex_init(&dev_lock, NULL);
	devs = NULL;
	dev_list = NULL;
}

/* Bring the list up to date with libibverbs (dev_lock held).  New devices are added
 * at the end; uroce's device objects are never freed, so a device that disappears
 * keeps its entry (its ids fail on their own). */
static int sync_devices_locked(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return -ENODEV;
	if (n <= 0) {
		ibv_free_device_list(list);
		return -ENODEV;
	}
	for (int i = 0; i < n; i++) {
		struct cm_dev **p, *d;

		for (p = &devs; *p; p = &(*p)->next)
			if ((*p)->ibdev == list[i])
				break;
		if (*p)
			continue;
		d = calloc(1, sizeof(*d));
		if (!d)
			continue;    /* this device stays invisible; others still work */
		d->ibdev = list[i];
		snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(list[i]));
		*p = d;
	}
	if (dev_list)
		ibv_free_device_list(dev_list);
	dev_list = list;
	return 0;
}

int cm_init(void)
{
	int ret = 0;

	pthread_mutex_lock(&dev_lock);
	if (!devs)
		ret = sync_devices_locked();
	pthread_mutex_unlock(&dev_lock);
	return ret;
}

/* Open the device's context and read the limits librdmacm keeps (dev_lock held). */
static int init_device_locked(struct cm_dev *d)
{
	struct ibv_device_attr attr;

	if (d->verbs && d->refcnt == 0 && ibv_query_device(d->verbs, &attr)) {
		/* Its daemon went away (uroce's contexts fail from then on): start again. */
		if (d->pd && !ibv_dealloc_pd(d->pd))
			d->pd = NULL;
		if (!d->pd && !ibv_close_device(d->verbs))
			d->verbs = NULL;
	}
	if (d->verbs)
		return 0;
	d->verbs = ibv_open_device(d->ibdev);
	if (!d->verbs)
		return -ENODEV;
	if (ibv_query_device(d->verbs, &attr)) {
		ibv_close_device(d->verbs);
		d->verbs = NULL;
		return -ENODEV;
	}
	d->max_qp_wr = attr.max_qp_wr;
	d->max_init_depth = (uint8_t)attr.max_qp_init_rd_atom;
	d->max_resp_res = (uint8_t)attr.max_qp_rd_atom;
	return 0;
}

static struct cm_dev *find_locked(const char *name)
{
	for (struct cm_dev *d = devs; d; d = d->next)
		if (!strncmp(d->name, name, sizeof(d->name)))
			return d;
	return NULL;
}

int cm_dev_get(const char *name, struct cm_dev **out)
{
	struct cm_dev *d;
	int ret;

	pthread_mutex_lock(&dev_lock);
	d = find_locked(name);
	if (!d && !sync_devices_locked())
		d = find_locked(name);   /* a device added since the last look */
	ret = d ? init_device_locked(d) : -ENODEV;
	if (!ret && !d->pd) {
		d->pd = ibv_alloc_pd(d->verbs);
		if (!d->pd)
			ret = errno ? -errno : -ENOMEM;
	}
	if (!ret) {
		d->refcnt++;
		*out = d;
	}
	pthread_mutex_unlock(&dev_lock);
	return ret;
}

void cm_dev_put(struct cm_dev *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&dev_lock);
	if (d->refcnt > 0 && --d->refcnt == 0 && d->pd && !ibv_dealloc_pd(d->pd))
		d->pd = NULL;
	pthread_mutex_unlock(&dev_lock);
}

/* ---- rdma_get_devices / rdma_free_devices -------------------------------------- */

/* The contexts of every device, opened; NULL-terminated.  As librdmacm, each listed
 * device is referenced until rdma_free_devices(). */
UROCE_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = NULL;
	int cnt = 0, i = 0, ret;

	ret = cm_init();
	if (ret)
		goto out;
	pthread_mutex_lock(&dev_lock);
	sync_devices_locked();
	for (struct cm_dev *d = devs; d; d = d->next)
		if (!init_device_locked(d))
			cnt++;
	list = malloc(sizeof(*list) * (cnt + 1));
	if (!list) {
		ret = -ENOMEM;
	} else {
		for (struct cm_dev *d = devs; d && i < cnt; d = d->next) {
			if (!d->verbs)
				continue;
			list[i++] = d->verbs;
			d->refcnt++;
		}
		list[i] = NULL;
		cnt = i;
	}
	pthread_mutex_unlock(&dev_lock);
out:
	if (num_devices)
		*num_devices = list ? cnt : 0;
	if (!list)
		errno = -ret;
	return list;
}

UROCE_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	if (!list)
		return;
	pthread_mutex_lock(&dev_lock);
	for (int i = 0; list[i]; i++)
		for (struct cm_dev *d = devs; d; d = d->next)
			if (d->verbs == list[i] && d->refcnt > 0)
				d->refcnt--;
	pthread_mutex_unlock(&dev_lock);
	free(list);
}
