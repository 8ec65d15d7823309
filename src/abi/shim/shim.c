/* shim.c — liburoce_shim.so, the LD_PRELOAD fallback of `uroce run` (src/cli/run.h) where
 * the kernel refuses namespaces (a chroot, a container's seccomp profile,
 * user.max_user_namespaces=0).
 *
 * UCX 1.13 skips a verbs device unless stat("/dev/infiniband/<dev_name>") is a character
 * device that access() allows to read and write, and reads /sys/class/infiniband/<dev>/...
 * with open(); Open MPI readlink()s .../device/driver; hwloc uses openat/fstatat/readlinkat.
 * These calls resolve through the PLT, so a preloaded definition comes first: each one
 * here rewrites the path and calls the next definition (libc's):
 *
 *   /dev/infiniband/uverbs<N>        -> /dev/null
 *   /dev/infiniband[/...]            -> $UROCE_SHIM_DIR/dev[/...]
 *   /sys/class/infiniband[/...]      -> $UROCE_SHIM_DIR/infiniband[/...]
 *
 * and leaves every other path alone.  `uroce run` writes that tree (run_tree.c).  Limits,
 * documented in docs/ucx-mpi.md: only absolute paths (a relative one after chdir into the
 * tree is not rewritten), not static or Go binaries, not raw syscalls, not glibc's own
 * internal opens (opendir and fopen are covered here because of that).
 *
 * The library depends on nothing of uroce's and is built without sanitizers: it runs in
 * every process of the tree, from the first libc call on.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static const char dev_prefix[] = "/dev/infiniband";
static const char sys_prefix[] = "/sys/class/infiniband";

/* @path starts with @prefix followed by the end or a '/'; the rest, or NULL. */
static const char *after(const char *path, const char *prefix, size_t len)
{
	if (strncmp(path, prefix, len) || (path[len] && path[len] != '/'))
		return NULL;
	return path + len;
}

static int is_uverbs(const char *rest)
{
	if (strncmp(rest, "/uverbs", 7) || !rest[7])
		return 0;
	for (rest += 7; *rest; rest++)
		if (*rest < '0' || *rest > '9')
			return 0;
	return 1;
}

/* The path to use instead of @path: @path itself, or the rewrite in @buf. */
static const char *map(const char *path, char *buf, size_t size)
{
	const char *dir, *rest, *sub;

	if (!path || path[0] != '/')
		return path;
	if ((rest = after(path, dev_prefix, sizeof(dev_prefix) - 1))) {
		if (is_uverbs(rest))
			return "/dev/null";
		sub = "/dev";
	} else if ((rest = after(path, sys_prefix, sizeof(sys_prefix) - 1))) {
		sub = "/infiniband";
	} else {
		return path;
	}
	dir = getenv("UROCE_SHIM_DIR");
	if (!dir || dir[0] != '/')
		return path;
	if ((size_t)snprintf(buf, size, "%s%s%s", dir, sub, rest) >= size)
		return path;
	return buf;
}

#define NEXT(type, name, ...)                                                      \
	static type (*next)(__VA_ARGS__);                                          \
	if (!next)                                                                 \
		next = (type (*)(__VA_ARGS__))dlsym(RTLD_NEXT, name);              \
	if (!next) {                                                               \
		errno = ENOSYS;                                                    \
		return (type)-1;                                                   \
	}

/* The pre-2.33 stat entry points of binaries built against an older glibc exist only as
 * compat versions, which dlsym does not see. */
#define NEXT_V(type, name, ver, ...)                                               \
	static type (*next)(__VA_ARGS__);                                          \
	if (!next)                                                                 \
		next = (type (*)(__VA_ARGS__))dlvsym(RTLD_NEXT, name, ver);        \
	if (!next) {                                                               \
		errno = ENOSYS;                                                    \
		return (type)-1;                                                   \
	}

/* open's mode argument is there only with O_CREAT or O_TMPFILE. */
#define OPEN_MODE(flags, mode)                                                     \
	do {                                                                       \
		if ((flags) & (O_CREAT | __O_TMPFILE)) {                           \
			va_list ap;                                                \
			va_start(ap, flags);                                       \
			mode = (mode_t)va_arg(ap, int);                            \
			va_end(ap);                                                \
		}                                                                  \
	} while (0)

/* ------------------------------------------------------------------ stat */

EXPORT int stat(const char *path, struct stat *st)
{
	char buf[PATH_MAX];
	NEXT(int, "stat", const char *, struct stat *);
	return next(map(path, buf, sizeof(buf)), st);
}

EXPORT int lstat(const char *path, struct stat *st)
{
	char buf[PATH_MAX];
	NEXT(int, "lstat", const char *, struct stat *);
	return next(map(path, buf, sizeof(buf)), st);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "fstatat", int, const char *, struct stat *, int);
	return next(dirfd, map(path, buf, sizeof(buf)), st, flags);
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	char buf[PATH_MAX];
	NEXT(int, "stat64", const char *, struct stat64 *);
	return next(map(path, buf, sizeof(buf)), st);
}

EXPORT int lstat64(const char *path, struct stat64 *st)
{
	char buf[PATH_MAX];
	NEXT(int, "lstat64", const char *, struct stat64 *);
	return next(map(path, buf, sizeof(buf)), st);
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "fstatat64", int, const char *, struct stat64 *, int);
	return next(dirfd, map(path, buf, sizeof(buf)), st, flags);
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	char buf[PATH_MAX];
	NEXT(int, "statx", int, const char *, int, unsigned, struct statx *);
	return next(dirfd, map(path, buf, sizeof(buf)), flags, mask, st);
}

int __xstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__xstat", "GLIBC_2.2.5", int, const char *, struct stat *);
	return next(ver, map(path, buf, sizeof(buf)), st);
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__lxstat", "GLIBC_2.2.5", int, const char *, struct stat *);
	return next(ver, map(path, buf, sizeof(buf)), st);
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__fxstatat", "GLIBC_2.4", int, int, const char *, struct stat *, int);
	return next(ver, dirfd, map(path, buf, sizeof(buf)), st, flags);
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__xstat64", "GLIBC_2.2.5", int, const char *, struct stat64 *);
	return next(ver, map(path, buf, sizeof(buf)), st);
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__lxstat64", "GLIBC_2.2.5", int, const char *, struct stat64 *);
	return next(ver, map(path, buf, sizeof(buf)), st);
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	char buf[PATH_MAX];
	NEXT_V(int, "__fxstatat64", "GLIBC_2.4", int, int, const char *, struct stat64 *, int);
	return next(ver, dirfd, map(path, buf, sizeof(buf)), st, flags);
}

/* ---------------------------------------------------------------- access */

EXPORT int access(const char *path, int mode)
{
	char buf[PATH_MAX];
	NEXT(int, "access", const char *, int);
	return next(map(path, buf, sizeof(buf)), mode);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "faccessat", int, const char *, int, int);
	return next(dirfd, map(path, buf, sizeof(buf)), mode, flags);
}

EXPORT int euidaccess(const char *path, int mode)
{
	char buf[PATH_MAX];
	NEXT(int, "euidaccess", const char *, int);
	return next(map(path, buf, sizeof(buf)), mode);
}

EXPORT int eaccess(const char *path, int mode)
{
	char buf[PATH_MAX];
	NEXT(int, "eaccess", const char *, int);
	return next(map(path, buf, sizeof(buf)), mode);
}

/* ------------------------------------------------------------------ open */

EXPORT int open(const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	NEXT(int, "open", const char *, int, ...);
	return next(map(path, buf, sizeof(buf)), flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	NEXT(int, "open64", const char *, int, ...);
	return next(map(path, buf, sizeof(buf)), flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	NEXT(int, "openat", int, const char *, int, ...);
	return next(dirfd, map(path, buf, sizeof(buf)), flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	mode_t mode = 0;
	OPEN_MODE(flags, mode);
	NEXT(int, "openat64", int, const char *, int, ...);
	return next(dirfd, map(path, buf, sizeof(buf)), flags, mode);
}

/* The _FORTIFY_SOURCE entry points. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "__open_2", const char *, int);
	return next(map(path, buf, sizeof(buf)), flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "__open64_2", const char *, int);
	return next(map(path, buf, sizeof(buf)), flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "__openat_2", int, const char *, int);
	return next(dirfd, map(path, buf, sizeof(buf)), flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	char buf[PATH_MAX];
	NEXT(int, "__openat64_2", int, const char *, int);
	return next(dirfd, map(path, buf, sizeof(buf)), flags);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	static FILE *(*next)(const char *, const char *);
	char buf[PATH_MAX];

	if (!next)
		next = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");
	if (!next) {
		errno = ENOSYS;
		return NULL;
	}
	return next(map(path, buf, sizeof(buf)), mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	static FILE *(*next)(const char *, const char *);
	char buf[PATH_MAX];

	if (!next)
		next = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen64");
	if (!next) {
		errno = ENOSYS;
		return NULL;
	}
	return next(map(path, buf, sizeof(buf)), mode);
}

EXPORT DIR *opendir(const char *path)
{
	static DIR *(*next)(const char *);
	char buf[PATH_MAX];

	if (!next)
		next = (DIR *(*)(const char *))dlsym(RTLD_NEXT, "opendir");
	if (!next) {
		errno = ENOSYS;
		return NULL;
	}
	return next(map(path, buf, sizeof(buf)));
}

/* -------------------------------------------------------------- readlink */

EXPORT ssize_t readlink(const char *path, char *out, size_t size)
{
	char buf[PATH_MAX];
	NEXT(ssize_t, "readlink", const char *, char *, size_t);
	return next(map(path, buf, sizeof(buf)), out, size);
}

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *out, size_t size)
{
	char buf[PATH_MAX];
	NEXT(ssize_t, "readlinkat", int, const char *, char *, size_t);
	return next(dirfd, map(path, buf, sizeof(buf)), out, size);
}
