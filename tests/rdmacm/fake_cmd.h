/* fake_cmd.h — a stand-in for uroced's connection manager, in the test process, so
 * that librdmacm.so.1 can be tested before (and independently of) the daemon half.
 *
 * It listens on its own abstract name.  A connection whose first record is a
 * cm_proto.h record is served here: a small model of the kernel's rdma_cm for ids
 * on one host (bind, resolve, listen, connect between ids of the process, accept,
 * reject, disconnect, the QP attributes of a loopback RC/UD connection on uroce0,
 * multicast joins).  Any other connection is libibverbs talking to the daemon: it is
 * relayed, record by record with its descriptors, to a real uroced on another name,
 * so QPs, CQs and data really work.
 *
 * Tests read what the library sent (fake_count, fake_last) and steer the fake with
 * the knobs below.  Everything is protected by one mutex; the calls are thread-safe.
 */
#ifndef UROCE_TESTS_FAKE_CMD_H
#define UROCE_TESTS_FAKE_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#include "ipc/cm_proto.h"

/* Start the fake on abstract name fake_name, relaying verbs to real_name (a uroced
 * already listening there).  0 / -errno. */
int fake_start(const char *real_name, const char *fake_name);

/* What the library sent: how many commands of op (since fake_reset_log), a copy of
 * the last one (false if none). */
int fake_count(uint16_t op);
bool fake_last(uint16_t op, struct uroce_cm_cmd *out);
void fake_reset_log(void);

/* The handle the last CREATE_ID got; the new id of the last CONNECT_REQUEST. */
uint32_t fake_last_handle(void);
uint32_t fake_last_new_handle(void);
/* The channel number an id's events go to, and how many were written for it there. */
uint32_t fake_channel_of(uint32_t handle);
uint32_t fake_events_written(uint32_t handle);
/* Number of live event connections (channels). */
int fake_channels(void);

/* The next `times` commands of op are answered with `status` (no effect). */
void fake_fail(uint16_t op, int status, int times);
/* INIT_QP_ATTR for state gets `status` (0: normal) from now on. */
void fake_qp_attr_status(uint32_t qp_state, int status);
/* What RESOLVE_ADDR / RESOLVE_ROUTE / CONNECT produce next: an event type and status
 * (0: the normal outcome).  For CONNECT: REJECTED / UNREACHABLE to the active side
 * instead of a CONNECT_REQUEST. */
void fake_next_outcome(uint16_t op, uint32_t event, int status);
/* Stop answering commands (a hung daemon), or answer again. */
void fake_hold_replies(bool hold);
/* Write an event for an id (on its current channel); returns 0 / -errno. */
int fake_emit(uint32_t handle, uint32_t event, int status);
/* The daemon dies: every cm_proto.h connection (command and event) is closed and
 * the fake's ids are forgotten.  New connections are served again afterwards. */
void fake_kill(void);

#endif
