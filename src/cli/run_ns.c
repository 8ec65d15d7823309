/* run_ns.c — the private mount namespace of `uroce run` and the shim's tree (run.h).
 *
 * The overlay is built beside the real file system and put in place at the end, so a
 * failure at any step leaves the program's view unchanged:
 *   1. unshare(CLONE_NEWNS), plus CLONE_NEWUSER with uid and gid mapped to themselves
 *      when not root (the program keeps its identity: files, SO_PEERCRED, Open MPI's "not
 *      as root"; the user namespace's capabilities last until execve, so every mount
 *      happens before it).  As root no user namespace: the kernel refuses one to a
 *      chrooted process, and real root must stay real for `ip netns exec` in its children.
 *   2. Every mount private (MS_REC|MS_PRIVATE on /), so nothing propagates to the host.
 *   3. A staging tmpfs (a fresh directory under $TMPDIR or /tmp): dev/ gets one entry per
 *      entry of /dev (links copied, directories bind-mounted recursively, nodes and files
 *      bind-mounted onto empty files) and infiniband/uverbs0..15, each with /dev/null bound
 *      onto it (UCX only stat()s and access()es them; uroce's library never opens them);
 *      class/ gets a recursive bind of every /sys/class entry (UCX's tcp transport and
 *      hwloc read /sys/class/net) and infiniband/, the tree of run_tree.c.
 *   4. dev/ over /dev, class/ over /sys/class (recursive binds), then the staging mount
 *      is detached and its directory removed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cli/run.h"

static int why_set(char *why, size_t whylen, int err, const char *fmt, ...)
{
	va_list ap;
	size_t k;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	k = strlen(why);
	if (err && k < whylen)
		snprintf(why + k, whylen - k, ": %s", strerror(err));
	return -(err ? err : EINVAL);
}

/* snprintf into a path buffer; -ENAMETOOLONG rather than a truncated path. */
__attribute__((format(printf, 3, 4)))
static int path_fmt(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(out, size, fmt, ap);
	va_end(ap);
	return k < 0 || (size_t)k >= size ? -ENAMETOOLONG : 0;
}

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = (ssize_t)strlen(text), w;
	int err;

	if (fd < 0)
		return -errno;
	w = write(fd, text, (size_t)len);
	err = w == len ? 0 : (w < 0 ? -errno : -EIO);
	close(fd);
	return err;
}

/* Step 1 and 2.  0, or -errno with why set (always a refusal). */
static int enter_namespaces(char *why, size_t whylen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	int err;

	if (uid == 0) {
		if (unshare(CLONE_NEWNS))
			return why_set(why, whylen, errno, "unshare(CLONE_NEWNS)");
	} else {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
			return why_set(why, whylen, errno, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
		/* An unprivileged gid_map needs setgroups denied first (user_namespaces(7)). */
		err = write_proc("/proc/self/setgroups", "deny");
		if (err && err != -ENOENT)
			return why_set(why, whylen, -err, "/proc/self/setgroups");
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		err = write_proc("/proc/self/uid_map", map);
		if (err)
			return why_set(why, whylen, -err, "/proc/self/uid_map");
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		err = write_proc("/proc/self/gid_map", map);
		if (err)
			return why_set(why, whylen, -err, "/proc/self/gid_map");
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return why_set(why, whylen, errno, "making / private in the new mount namespace");
	return 0;
}

static int bind_mount(const char *src, const char *dst, bool rec)
{
	return mount(src, dst, NULL, MS_BIND | (rec ? MS_REC : 0), NULL) ? -errno : 0;
}

/* Step 3, dev/: a copy of /dev in @stage/dev plus infiniband/. */
static int build_dev(const char *stage, char *why, size_t whylen)
{
	char src[PATH_MAX], dst[PATH_MAX], target[PATH_MAX];
	struct dirent *e;
	int ret = 0;
	DIR *d;

	if (path_fmt(dst, sizeof(dst), "%s/dev", stage))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", stage);
	if (mkdir(dst, 0755))
		return why_set(why, whylen, errno, "mkdir %s", dst);
	d = opendir("/dev");
	if (!d)
		return why_set(why, whylen, errno, "opendir /dev");
	while (!ret && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, "infiniband"))
			continue;
		if (path_fmt(src, sizeof(src), "/dev/%s", e->d_name) ||
		    path_fmt(dst, sizeof(dst), "%s/dev/%s", stage, e->d_name)) {
			ret = why_set(why, whylen, ENAMETOOLONG, "/dev/%s", e->d_name);
			break;
		}
		if (lstat(src, &st)) {
			if (errno == ENOENT)
				continue;       /* gone meanwhile */
			ret = why_set(why, whylen, errno, "lstat %s", src);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t k = readlink(src, target, sizeof(target) - 1);

			if (k < 0) {
				ret = why_set(why, whylen, errno, "readlink %s", src);
				break;
			}
			target[k] = 0;
			if (symlink(target, dst))
				ret = why_set(why, whylen, errno, "symlink %s", dst);
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(dst, st.st_mode & 07777))
				ret = why_set(why, whylen, errno, "mkdir %s", dst);
			else if ((ret = bind_mount(src, dst, true)))
				ret = why_set(why, whylen, -ret, "bind-mounting %s", src);
		} else {
			int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

			if (fd < 0) {
				ret = why_set(why, whylen, errno, "creating %s", dst);
				break;
			}
			close(fd);
			if ((ret = bind_mount(src, dst, false)))
				ret = why_set(why, whylen, -ret, "bind-mounting %s", src);
		}
	}
	closedir(d);
	if (ret)
		return ret;
	if (path_fmt(dst, sizeof(dst), "%s/dev/infiniband", stage))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", stage);
	if (mkdir(dst, 0755))
		return why_set(why, whylen, errno, "mkdir %s", dst);
	for (unsigned i = 0; i < UROCE_RUN_UVERBS; i++) {
		int fd;

		if (path_fmt(dst, sizeof(dst), "%s/dev/infiniband/uverbs%u", stage, i))
			return why_set(why, whylen, ENAMETOOLONG, "a path under %s", stage);
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return why_set(why, whylen, errno, "creating %s", dst);
		close(fd);
		if ((ret = bind_mount("/dev/null", dst, false)))
			return why_set(why, whylen, -ret, "bind-mounting /dev/null on %s", dst);
	}
	return 0;
}

/* Step 3, class/: binds of /sys/class's entries plus infiniband/. */
static int build_class(const char *stage, const struct uroce_dev_info *devs, unsigned n,
		       char *why, size_t whylen)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct dirent *e;
	int ret = 0, fd;
	DIR *d;

	if (path_fmt(dst, sizeof(dst), "%s/class", stage))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", stage);
	if (mkdir(dst, 0755))
		return why_set(why, whylen, errno, "mkdir %s", dst);
	d = opendir("/sys/class");
	if (!d)
		return why_set(why, whylen, errno, "opendir /sys/class");
	while (!ret && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, "infiniband"))
			continue;
		if (path_fmt(src, sizeof(src), "/sys/class/%s", e->d_name) ||
		    path_fmt(dst, sizeof(dst), "%s/class/%s", stage, e->d_name)) {
			ret = why_set(why, whylen, ENAMETOOLONG, "/sys/class/%s", e->d_name);
			break;
		}
		if (mkdir(dst, 0755))
			ret = why_set(why, whylen, errno, "mkdir %s", dst);
		else if ((ret = bind_mount(src, dst, true)))
			ret = why_set(why, whylen, -ret, "bind-mounting %s", src);
	}
	closedir(d);
	if (ret)
		return ret;
	if (path_fmt(dst, sizeof(dst), "%s/class/infiniband", stage))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", stage);
	if (mkdir(dst, 0755))
		return why_set(why, whylen, errno, "mkdir %s", dst);
	fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return why_set(why, whylen, errno, "open %s", dst);
	ret = uroce_run_tree_write(fd, devs, n);
	close(fd);
	return ret ? why_set(why, whylen, -ret, "writing %s", dst) : 0;
}

/* A fresh directory for the staging tmpfs: $TMPDIR, /tmp, then /dev/shm.  Its path is
 * short, so that every path under it fits PATH_MAX. */
#define STAGE_MAX 256
static int stage_dir(char *out, size_t size)
{
	const char *bases[] = { getenv("TMPDIR"), "/tmp", "/dev/shm" };
	int err = ENOENT;

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || bases[i][0] != '/')
			continue;
		if (path_fmt(out, size, "%s/uroce-run.XXXXXX", bases[i]))
			continue;
		if (mkdtemp(out))
			return 0;
		err = errno;
	}
	return -err;
}

int uroce_run_ns_enter(const struct uroce_dev_info *devs, unsigned n, char *why, size_t whylen)
{
	char stage[STAGE_MAX], path[STAGE_MAX + 16];
	int ret;

	why[0] = 0;
	ret = enter_namespaces(why, whylen);
	if (ret)
		return ret;
	ret = stage_dir(stage, sizeof(stage));
	if (ret)
		return why_set(why, whylen, -ret, "no directory for the staging tmpfs");
	if (mount("uroce-run", stage, "tmpfs", MS_NOSUID, "mode=0755")) {
		ret = why_set(why, whylen, errno, "mounting a tmpfs on %s", stage);
		rmdir(stage);
		return ret;
	}
	ret = build_dev(stage, why, whylen);
	if (!ret)
		ret = build_class(stage, devs, n, why, whylen);
	if (!ret) {
		/* stage is short (stage_dir), the paths fit. */
		snprintf(path, sizeof(path), "%s/dev", stage);
		if ((ret = bind_mount(path, "/dev", true)))
			ret = why_set(why, whylen, -ret, "bind-mounting the new /dev");
	}
	if (!ret) {
		snprintf(path, sizeof(path), "%s/class", stage);
		if ((ret = bind_mount(path, "/sys/class", true))) {
			ret = why_set(why, whylen, -ret, "bind-mounting the new /sys/class");
			umount2("/dev", MNT_DETACH);
		}
	}
	/* The binds keep what they need of the staging tmpfs alive. */
	umount2(stage, MNT_DETACH);
	rmdir(stage);
	return ret;
}

int uroce_run_ns_active(void)
{
	struct statfs sfs;
	struct stat st;

	return !statfs("/sys/class/infiniband", &sfs) && sfs.f_type == TMPFS_MAGIC &&
	       !stat("/dev/infiniband/uverbs0", &st) && S_ISCHR(st.st_mode);
}

int uroce_run_ns_refresh(const struct uroce_dev_info *devs, unsigned n)
{
	int fd = open("/sys/class/infiniband", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = uroce_run_tree_write(fd, devs, n);
	close(fd);
	return ret;
}

/* mkdir that accepts an existing directory. */
static int mkdir_ok(const char *path, mode_t mode)
{
	return mkdir(path, mode) && errno != EEXIST ? -errno : 0;
}

int uroce_run_shim_prepare(const struct uroce_dev_info *devs, unsigned n, char *dir, size_t dirlen,
			   char *why, size_t whylen)
{
	const char *base = getenv("TMPDIR");
	char user[PATH_MAX], path[PATH_MAX + 32];
	struct stat st;
	int fd, ret;

	if (!base || base[0] != '/')
		base = "/tmp";
	if (path_fmt(user, sizeof(user), "%s/uroce-run-%u", base, (unsigned)geteuid()))
		return why_set(why, whylen, ENAMETOOLONG, "$TMPDIR");
	if ((ret = mkdir_ok(user, 0700)))
		return why_set(why, whylen, -ret, "mkdir %s", user);
	/* In a shared /tmp the directory must be ours, not someone's link or open directory. */
	if (lstat(user, &st))
		return why_set(why, whylen, errno, "lstat %s", user);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return why_set(why, whylen, 0, "%s is not a private directory of this user", user);
	if (stat("/proc/self/ns/net", &st))
		return why_set(why, whylen, errno, "stat /proc/self/ns/net");
	/* Devices are per network namespace (one uroced each), so is the tree. */
	if (path_fmt(dir, dirlen, "%s/net-%llu", user, (unsigned long long)st.st_ino))
		return why_set(why, whylen, ENAMETOOLONG, "$TMPDIR");
	if (path_fmt(path, sizeof(path), "%s/dev", dir))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", dir);
	if ((ret = mkdir_ok(dir, 0755)) || (ret = mkdir_ok(path, 0755)))
		return why_set(why, whylen, -ret, "mkdir %s", path);
	if (path_fmt(path, sizeof(path), "%s/infiniband", dir))
		return why_set(why, whylen, ENAMETOOLONG, "a path under %s", dir);
	if ((ret = mkdir_ok(path, 0755)))
		return why_set(why, whylen, -ret, "mkdir %s", path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return why_set(why, whylen, errno, "open %s", path);
	ret = uroce_run_tree_write(fd, devs, n);
	close(fd);
	return ret ? why_set(why, whylen, -ret, "writing %s", path) : 0;
}
