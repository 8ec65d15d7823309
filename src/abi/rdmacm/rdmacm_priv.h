/*
 * Private definitions shared by the files of the drop-in librdmacm.so.1.
 *
 * The library is compiled with -fvisibility=hidden; only functions marked UROCE_EXPORT
 * *and* listed in librdmacm.map are exported (a name must pass both gates, so a helper
 * that forgets `static` still cannot leak into the ABI).
 *
 * Error convention (the librdmacm one, not the internal 0/-errno one): int-returning
 * calls return 0 or -1 with errno set, pointer-returning calls return the object or
 * NULL with errno set.  Until the connection manager is implemented:
 *   - rdma_* calls that need a device fail with ENODEV, which is what rdma-core 44
 *     reports when it finds no RDMA device; NULL where an object is required -> EINVAL;
 *   - rsocket calls fail with ENOSYS;
 *   - void "destroy"/"free" calls are no-ops;
 *   - no call writes through a caller's pointer when it fails.
 */
#ifndef UROCE_ABI_RDMACM_PRIV_H
#define UROCE_ABI_RDMACM_PRIV_H

#include <rdma/rdma_cma.h>

#define UROCE_EXPORT __attribute__((visibility("default")))

/*
 * What rdma_create_event_channel() really allocates.  Consumers only see `pub` (the
 * public struct is just {int fd}; UCX and libfabric set O_NONBLOCK on it and epoll it),
 * so `pub` must stay the first member: rdma_destroy_event_channel() converts back.
 * `pub.fd` is the read end of a pipe and `wake_fd` its write end: the connection
 * manager will queue one fixed-size record per event there (records of at most
 * PIPE_BUF bytes are written atomically, POSIX write(2)).
 */
struct uroce_cm_channel {
	struct rdma_event_channel pub;
	int wake_fd;
};

#endif
