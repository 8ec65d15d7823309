/* daemon/cm.h — the connection manager's state in uroced (cm_agent.c, cm_ipc.c). */
#ifndef UROCED_CM_H
#define UROCED_CM_H

#include <stdint.h>

#include "cm/cm.h"

struct uroced_cm {
	struct uroce_cm *core;           /* src/cm */
	int tfd;                         /* timerfd for the core's deadlines */
	char timer_tag;                  /* its epoll cookie */
	int64_t armed;                   /* deadline it is armed for; -1 none, -2 unknown */
	int tx4, tx6;                    /* QP1 send sockets */
	uint16_t sport4, sport6;         /* their UDP source ports */
	uint32_t psn;                    /* BTH PSN of the next QP1 packet */
	uint64_t tx_errors;              /* sends the kernel refused (logged with -v) */
	struct uroce_cm_dev *snap;       /* the device table last given to the core */
	unsigned nsnap;
};

#endif
