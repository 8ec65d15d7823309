/* cli.h — subcommands of the uroce tool.  Each is `int fn(int argc, char **argv)`
 * with argv[0] the subcommand name; it returns the process exit status. */
#ifndef UROCE_CLI_H
#define UROCE_CLI_H

struct uroce_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

/* X(name, function, one-line help).  A subcommand appears here once its cmd_*.c exists. */
#define UROCE_COMMANDS(X)                                                         \
	X("capture", uroce_cmd_capture, "record uroce's packets on a device (both links) as pcap") \
	X("decode", uroce_cmd_decode, "print the RoCEv2 packets of capture files") \
	X("link", uroce_cmd_link, "uroce devices: show, add, delete (one per netdev)") \
	X("stat", uroce_cmd_stat, "counters kept by uroced")                        \
	X("daemon", uroce_cmd_daemon, "uroced of this network namespace: start, stop, status") \
	X("run", uroce_cmd_run, "run a program on uroce's libibverbs/librdmacm")

int uroce_cmd_capture(int argc, char **argv);
int uroce_cmd_decode(int argc, char **argv);
/* cmd_decode.c, for `uroce capture` without -w: a captured frame's line, as decode prints
 * it (@ts_ns: CLOCK_REALTIME; times are printed from the first frame's). */
#include <stddef.h>
#include <stdint.h>
void uroce_decode_live(unsigned idx, uint64_t ts_ns, const uint8_t *frame, size_t len);
int uroce_cmd_link(int argc, char **argv);
int uroce_cmd_stat(int argc, char **argv);
int uroce_cmd_daemon(int argc, char **argv);
int uroce_cmd_run(int argc, char **argv);

#endif
