/* fake_main.c — fake_cmd.c as a stand-alone daemon, for Debian's rdmacm-utils:
 *
 *   fake_uroced_cm REAL_NAME FAKE_NAME
 *
 * serves the connection manager's records on the abstract name FAKE_NAME and relays
 * everything else to the uroced on REAL_NAME (autostarted from $UROCE_DAEMON), until
 * killed.  Programs run with UROCE_IPC_NAME=FAKE_NAME then connect through
 * librdmacm.so.1 with this model of the kernel's rdma_cm in place of uroced's: what
 * they test is the library (fake_apps.sh).  One host, loopback addresses only.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_cmd.h"

int main(int argc, char **argv)
{
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: fake_uroced_cm REAL_NAME FAKE_NAME\n");
		return 2;
	}
	err = fake_start(argv[1], argv[2]);
	if (err) {
		fprintf(stderr, "fake_uroced_cm: %s\n", strerror(-err));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
