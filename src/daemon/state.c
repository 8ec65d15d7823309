/* state.c — the saved device table, so `uroce link add` survives a daemon restart
 * (the kernel keeps rxe links until reboot; our daemon comes and goes on demand).
 *
 * One file per network namespace: netns-name-NAME.links for a namespace that
 * `ip netns` named (/run/netns/NAME is our namespace; the name survives a reboot,
 * the inode does not), else netns-INODE.links by the inode of /proc/self/ns/net;
 * in $UROCE_STATE_DIR, else /var/lib/uroce for root, else
 * ${XDG_STATE_HOME:-~/.local/state}/uroce.  The format is the command that made
 * each link, one per line:   link NAME netdev IF [loopback udp]
 * (the same-host link, `uroce link set NAME loopback udp`; shm, the default, is not
 * written, so the files of older versions read the same).
 * A missing file means "never configured" (the daemon adds uroce0 on lo); an empty
 * file means "all links deleted" and stays empty.
 *
 * Caveat: the kernel may reuse a namespace inode after the namespace is gone, so a
 * new namespace can inherit the links of a dead one.  Tests point $UROCE_STATE_DIR
 * at a directory of their own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/uroced.h"

/* mkdir -p for the last component and its parent (state dirs are two deep at
 * most below an existing directory). */
static int mkdirs(const char *dir, mode_t mode)
{
	char tmp[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, dir, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return access(tmp, W_OK) ? -errno : 0;
}

/* The `ip netns` name of the namespace with this inode, if any: a file in
 * /run/netns (a bind mount of the namespace) with the same inode. */
static int netns_name(uint64_t netns_inode, char *name, size_t size)
{
	DIR *dir = opendir("/run/netns");
	struct dirent *e;
	int found = 0;

	if (!dir)
		return 0;
	while (!found && (e = readdir(dir))) {
		char path[300];
		struct stat st;

		if (e->d_name[0] == '.' || strlen(e->d_name) >= size)
			continue;
		snprintf(path, sizeof(path), "/run/netns/%s", e->d_name);
		if (!stat(path, &st) && (uint64_t)st.st_ino == netns_inode) {
			strcpy(name, e->d_name);
			found = 1;
		}
	}
	closedir(dir);
	return found;
}

int uroce_state_path(char *buf, size_t size, uint64_t netns_inode)
{
	char name[128];
	const char *env = getenv("UROCE_STATE_DIR");
	char dir[4096];
	int n;

	if (env && *env) {
		n = snprintf(dir, sizeof(dir), "%s", env);
	} else if (geteuid() == 0 && !mkdirs("/var/lib/uroce", 0755)) {
		/* Real root.  (Root in a user namespace usually cannot write /var/lib
		 * and falls through to the per-user directory.) */
		n = snprintf(dir, sizeof(dir), "/var/lib/uroce");
	} else if ((env = getenv("XDG_STATE_HOME")) && *env) {
		n = snprintf(dir, sizeof(dir), "%s/uroce", env);
	} else if ((env = getenv("HOME")) && *env) {
		n = snprintf(dir, sizeof(dir), "%s/.local/state/uroce", env);
	} else {
		return -ENOENT;
	}
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -ENAMETOOLONG;
	n = mkdirs(dir, 0755);
	if (n)
		return n;
	if (netns_name(netns_inode, name, sizeof(name)))
		n = snprintf(buf, size, "%s/netns-name-%s.links", dir, name);
	else
		n = snprintf(buf, size, "%s/netns-%llu.links", dir, (unsigned long long)netns_inode);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int uroce_state_load(struct uroce_devtable *t, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int lineno = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[UROCE_DEV_NAME_MAX], netdev[UROCE_NETDEV_MAX], lb[8] = "shm";
		struct uroce_dev *dev = NULL;
		int err, nf;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		/* Field widths keep sscanf inside the buffers. */
		nf = sscanf(line, "link %63s netdev %15s loopback %7s", name, netdev, lb);
		if (nf < 2 || (strcmp(lb, "shm") && strcmp(lb, "udp"))) {
			uroced_log("%s:%d: not understood, skipped\n", path, lineno);
			continue;
		}
		err = uroce_dev_add(t, name, netdev, &dev);
		if (err)
			uroced_log("%s:%d: link %s: %s\n", path, lineno, name, strerror(-err));
		else if (dev)
			dev->info.loopback = strcmp(lb, "udp") ? UROCE_LOOPBACK_SHM : UROCE_LOOPBACK_UDP;
	}
	fclose(f);
	return 0;
}

int uroce_state_save(const struct uroce_devtable *t, const char *path)
{
	char tmp[4200];
	FILE *f;
	int err = 0;

	/* Write a temporary file and rename it: a crash mid-save leaves the old
	 * table, never half of one. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "# uroce links of one network namespace, written by uroced\n");
	for (unsigned i = 0; i < t->n; i++)
		fprintf(f, "link %s netdev %s%s\n", t->dev[i]->info.name, t->dev[i]->info.netdev,
			t->dev[i]->info.loopback == UROCE_LOOPBACK_UDP ? " loopback udp" : "");
	if (fflush(f) || fsync(fileno(f)))
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}
