/*
 * Event channels and event names: the part of librdmacm that needs no device, so it
 * works for real already.
 */
#define _GNU_SOURCE	/* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "rdmacm_priv.h"

/*
 * Creates a channel whose fd is a real, pollable pipe read end (O_CLOEXEC, as the
 * rdma_cm character device is opened by rdma-core).  Returns NULL with errno set
 * (ENOMEM, EMFILE, ENFILE) on failure.  The caller owns the channel and releases it
 * with rdma_destroy_event_channel().
 */
UROCE_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct uroce_cm_channel *ch;
	int fds[2];

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return NULL;	/* errno = ENOMEM from calloc */
	if (pipe2(fds, O_CLOEXEC) < 0) {
		int err = errno;

		free(ch);
		errno = err;
		return NULL;
	}
	ch->pub.fd = fds[0];
	ch->wake_fd = fds[1];
	return &ch->pub;
}

/* Closes both pipe ends and frees the channel.  NULL is ignored. */
UROCE_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct uroce_cm_channel *ch;

	if (!channel)
		return;
	ch = (struct uroce_cm_channel *)((char *)channel -
					 offsetof(struct uroce_cm_channel, pub));
	close(ch->pub.fd);
	close(ch->wake_fd);
	free(ch);
}

/*
 * The names are the enumerator spellings of <rdma/rdma_cma.h>, which is what librdmacm
 * prints and what scripts grep for in rping/ucmatose output.
 */
#define EVENT_NAME(e) [e] = #e
static const char *const event_names[] = {
	EVENT_NAME(RDMA_CM_EVENT_ADDR_RESOLVED),
	EVENT_NAME(RDMA_CM_EVENT_ADDR_ERROR),
	EVENT_NAME(RDMA_CM_EVENT_ROUTE_RESOLVED),
	EVENT_NAME(RDMA_CM_EVENT_ROUTE_ERROR),
	EVENT_NAME(RDMA_CM_EVENT_CONNECT_REQUEST),
	EVENT_NAME(RDMA_CM_EVENT_CONNECT_RESPONSE),
	EVENT_NAME(RDMA_CM_EVENT_CONNECT_ERROR),
	EVENT_NAME(RDMA_CM_EVENT_UNREACHABLE),
	EVENT_NAME(RDMA_CM_EVENT_REJECTED),
	EVENT_NAME(RDMA_CM_EVENT_ESTABLISHED),
	EVENT_NAME(RDMA_CM_EVENT_DISCONNECTED),
	EVENT_NAME(RDMA_CM_EVENT_DEVICE_REMOVAL),
	EVENT_NAME(RDMA_CM_EVENT_MULTICAST_JOIN),
	EVENT_NAME(RDMA_CM_EVENT_MULTICAST_ERROR),
	EVENT_NAME(RDMA_CM_EVENT_ADDR_CHANGE),
	EVENT_NAME(RDMA_CM_EVENT_TIMEWAIT_EXIT),
};
#undef EVENT_NAME

/* Never fails: out-of-range values (including negative ones) get "UNKNOWN EVENT". */
UROCE_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	/* Compare as unsigned so a negative value cast into the enum is out of range too. */
	if ((unsigned int)event >= sizeof(event_names) / sizeof(event_names[0]) ||
	    !event_names[event])
		return "UNKNOWN EVENT";
	return event_names[event];
}
