/*
 * rdma_event_str: the one call of librdmacm that needs neither a device nor the
 * daemon.  (The event channels themselves are in cm_event.c.)
 */
#include <stddef.h>

#include "rdmacm_priv.h"

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
