/* log.c — uroced's log: a line on stderr with the time and pid (stderr is
 * the terminal with -f, else $UROCE_DAEMON_LOG or /dev/null).  In the library
 * rather than main.c so that tests linking the daemon's files get it too. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "daemon/uroced.h"

int uroced_verbose;

void uroced_log(const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(stderr, "%s uroced[%d]: ", when, (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
