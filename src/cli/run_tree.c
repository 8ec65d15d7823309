/* run_tree.c — the /sys/class/infiniband tree of `uroce run` (run.h).
 *
 * The files the kernel's ib_core exports per device and what reads them here:
 *   ports/1/gid_attrs/types/<i>  "RoCE v2": UCX's RoCE version of GID i (missing = v1,
 *                                 and then UCX cannot reach RoCE v2 peers such as rxe)
 *   ports/1/gid_attrs/ndevs/<i>  the netdev: UCX's LAG check and ROCE_LOCAL_SUBNET
 *   device/driver                 a link; Open MPI's opal_common_ucx_devices is matched
 *                                 against its basename, "uroce"
 *   node_type, node_guid, sys_image_guid, ports/1/{state,phys_state,link_layer,gids/<i>}
 *                                 what ibstat-like tools and hwloc read
 * `device` is a plain directory, not a link to a PCI function: UCX and hwloc then find no
 * PCI device behind it (UCX: "sysfs path undetected", at debug level only).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/run.h"

/* Write @text to @name in @dirfd: a temporary file, then rename. */
static int put_file(int dirfd, const char *name, const char *text)
{
	char tmp[96];
	size_t len = strlen(text);
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && renameat(dirfd, tmp, dirfd, name))
		ret = -errno;
	if (ret)
		unlinkat(dirfd, tmp, 0);
	return ret;
}

static int put_link(int dirfd, const char *name, const char *target)
{
	char tmp[96];

	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	unlinkat(dirfd, tmp, 0);
	if (symlinkat(target, dirfd, tmp))
		return -errno;
	if (renameat(dirfd, tmp, dirfd, name)) {
		int ret = -errno;

		unlinkat(dirfd, tmp, 0);
		return ret;
	}
	return 0;
}

/* mkdir -p of one component, then open it.  -errno on failure. */
static int sub_dir(int dirfd, const char *name)
{
	int fd;

	if (mkdirat(dirfd, name, 0755) && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

/* Remove @name in @dirfd and everything under it (our own tree only: no links followed). */
static int remove_tree(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return unlinkat(at, name, 0) ? -errno : 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		remove_tree(dirfd(d), e->d_name);
	}
	closedir(d);
	return unlinkat(at, name, AT_REMOVEDIR) ? -errno : 0;
}

static void fmt_gid(char *out, size_t size, const uint8_t *g)
{
	snprintf(out, size, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
		 g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
}

/* ports/1 of one device. */
static int write_port(int portfd, const struct uroce_dev_info *d)
{
	static const uint8_t zero[16];
	int gidsfd, attrfd, typesfd, ndevsfd, ret;
	char name[16], text[64];

	ret = put_file(portfd, "state", d->port_up ? "4: ACTIVE\n" : "1: DOWN\n");
	if (!ret)
		ret = put_file(portfd, "phys_state", d->port_up ? "5: LinkUp\n" : "3: Disabled\n");
	if (!ret)
		ret = put_file(portfd, "link_layer", "Ethernet\n");
	if (ret)
		return ret;
	gidsfd = sub_dir(portfd, "gids");
	if (gidsfd < 0)
		return gidsfd;
	attrfd = sub_dir(portfd, "gid_attrs");
	if (attrfd < 0) {
		close(gidsfd);
		return attrfd;
	}
	typesfd = sub_dir(attrfd, "types");
	ndevsfd = sub_dir(attrfd, "ndevs");
	close(attrfd);
	if (typesfd < 0 || ndevsfd < 0) {
		ret = typesfd < 0 ? typesfd : ndevsfd;
		goto out;
	}
	for (unsigned i = 0; i < UROCE_MAX_GIDS && !ret; i++) {
		bool valid = i < d->num_gids && d->gids[i].valid;

		snprintf(name, sizeof(name), "%u", i);
		/* The kernel lists every index in gids/ (empty ones as zeros); types/ and ndevs/
		 * of an empty index fail to read (EINVAL), which is absence for UCX. */
		fmt_gid(text, sizeof(text), valid ? d->gids[i].gid : zero);
		ret = put_file(gidsfd, name, text);
		if (ret)
			break;
		if (valid) {
			ret = put_file(typesfd, name, "RoCE v2\n");
			if (!ret) {
				snprintf(text, sizeof(text), "%s\n", d->netdev);
				ret = put_file(ndevsfd, name, text);
			}
		} else {
			unlinkat(typesfd, name, 0);
			unlinkat(ndevsfd, name, 0);
		}
	}
out:
	if (typesfd >= 0)
		close(typesfd);
	if (ndevsfd >= 0)
		close(ndevsfd);
	close(gidsfd);
	return ret;
}

static int write_device(int ibfd, const struct uroce_dev_info *d)
{
	const uint8_t *g = (const uint8_t *)&d->node_guid;   /* network byte order */
	int devfd, sub, portsfd, portfd, ret;
	char guid[32];

	devfd = sub_dir(ibfd, d->name);
	if (devfd < 0)
		return devfd;
	snprintf(guid, sizeof(guid), "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
	ret = put_file(devfd, "node_type", "1: CA\n");
	if (!ret)
		ret = put_file(devfd, "node_guid", guid);
	if (!ret)
		ret = put_file(devfd, "sys_image_guid", guid);
	if (ret)
		goto out;
	sub = sub_dir(devfd, "device");
	if (sub < 0) {
		ret = sub;
		goto out;
	}
	/* Where a PCI driver's link would point; nothing is there, only the name counts. */
	ret = put_link(sub, "driver", "../../../../bus/uroce/drivers/uroce");
	close(sub);
	if (ret)
		goto out;
	portsfd = sub_dir(devfd, "ports");
	if (portsfd < 0) {
		ret = portsfd;
		goto out;
	}
	portfd = sub_dir(portsfd, "1");
	close(portsfd);
	if (portfd < 0) {
		ret = portfd;
		goto out;
	}
	ret = write_port(portfd, d);
	close(portfd);
out:
	close(devfd);
	return ret;
}

int uroce_run_tree_write(int ibfd, const struct uroce_dev_info *devs, unsigned n)
{
	int fd = dup(ibfd), ret = 0;
	struct dirent *e;
	DIR *dir;

	for (unsigned i = 0; i < n && !ret; i++) {
		/* The daemon validates names (no '/', not "." or ".."); checked again because a
		 * name becomes a path here. */
		if (!devs[i].name[0] || strchr(devs[i].name, '/') || devs[i].name[0] == '.' ||
		    !memchr(devs[i].name, 0, sizeof(devs[i].name)))
			continue;
		ret = write_device(ibfd, &devs[i]);
	}
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	/* Devices that are gone (a refresh after `uroce link del`). */
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	rewinddir(dir);
	while ((e = readdir(dir))) {
		bool keep = e->d_name[0] == '.';

		for (unsigned i = 0; i < n && !keep; i++)
			keep = !strcmp(e->d_name, devs[i].name);
		if (!keep)
			remove_tree(ibfd, e->d_name);
	}
	closedir(dir);
	return 0;
}
