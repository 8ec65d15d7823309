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
	X("decode", uroce_cmd_decode, "print the RoCEv2 packets of capture files")

int uroce_cmd_decode(int argc, char **argv);

#endif
