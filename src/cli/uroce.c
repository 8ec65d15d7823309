/* uroce — the command-line tool.  Subcommands in the style of iproute2's rdma(8):
 *   uroce capture [-d DEV] ...     record the packets uroce's processes send and receive
 *   uroce decode FILE.pcap...      one line per RoCEv2 packet of a capture
 *   uroce link show|add|del|set    devices (one per netdev), their options
 *   uroce stat                     per-device and per-QP counters
 *   uroce daemon start|stop|status
 *   uroce run CMD [ARGS...]        run a program on uroce's libraries
 * Each subcommand lives in its own cmd_*.c and is listed in commands[] below.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct uroce_cmd commands[] = {
#define X(name, fn, help) { name, fn, help },
	UROCE_COMMANDS(X)
#undef X
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: uroce OBJECT { COMMAND | help }\n"
		   "       uroce -V\n"
		   "where  OBJECT := {");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "%s %s", i ? " |" : "", commands[i].name);
	fprintf(f, " }\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 1 : 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("uroce %s\n", UROCE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "Object \"%s\" is unknown, try \"uroce help\".\n", argv[1]);
	return 1;
}
