/* cmd_link.c — `uroce link`: uroce devices, one per netdev, in the manner of
 * iproute2's `rdma link`:
 *
 *   uroce link show [DEV[/PORT]] [-d]
 *   uroce link add NAME [type uroce] netdev NETDEV
 *   uroce link delete NAME
 *   uroce link set NAME loopback shm|udp
 *
 * `loopback` is uroce's own option: how the device's QPs reach QPs of other uroce
 * processes of the same host (network namespace) -- through shared memory (shm, the
 * default) or over UDP like any peer (udp: what tshark on lo can watch).  UROCE_LINK=shm|udp
 * overrides it per process (docs/transport.md "The shared-memory link").
 *
 * The device table lives in uroced (started on demand); this is a thin client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ipc/ipc.h"

/* iproute2 accepts any prefix of a keyword ("sh", "del"). */
static int matches(const char *arg, const char *keyword)
{
	size_t n = strlen(arg);

	return n && n <= strlen(keyword) && !strncmp(arg, keyword, n);
}

static int link_help(FILE *f)
{
	fprintf(f, "Usage: uroce link show [DEV/PORT_INDEX] [-d]\n"
		   "       uroce link add NAME [type uroce] netdev NETDEV\n"
		   "       uroce link delete NAME\n"
		   "       uroce link set NAME loopback { shm | udp }\n"
		   "       uroce link help\n");
	return f == stdout ? 0 : 1;
}

static int connect_daemon(struct uroce_ipc **ipc)
{
	int err = uroce_ipc_open(ipc, UROCE_IPC_AUTOSTART);

	if (err)
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
	return err;
}

static const char *gid_str(const uint8_t gid[16], char *buf, size_t size)
{
	return inet_ntop(AF_INET6, gid, buf, (socklen_t)size) ? buf : "?";
}

/* One line per port, as `rdma link show` prints it.  uroce devices have one
 * port, numbered 1: channel adapter ports count from 1 (0 means a switch's
 * management port in IBA). */
static void print_link(const struct uroce_dev_info *d, int details)
{
	const uint8_t *g = (const uint8_t *)&d->node_guid;

	printf("link %s/1 state %s physical_state %s netdev %s\n", d->name,
	       d->port_up ? "ACTIVE" : "DOWN", d->port_up ? "LINK_UP" : "DISABLED", d->netdev);
	if (!details)
		return;
	printf("    netdev_index %u mtu %u node_guid %02x%02x:%02x%02x:%02x%02x:%02x%02x "
	       "mac %02x:%02x:%02x:%02x:%02x:%02x\n",
	       d->ifindex, d->netdev_mtu, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
	       d->mac[0], d->mac[1], d->mac[2], d->mac[3], d->mac[4], d->mac[5]);
	printf("    loopback %s\n", d->loopback == UROCE_LOOPBACK_UDP ? "udp" : "shm");
	for (unsigned i = 0; i < d->num_gids && i < UROCE_MAX_GIDS; i++) {
		char buf[64];

		if (d->gids[i].valid)
			printf("    gid %u %s RoCE v2\n", i, gid_str(d->gids[i].gid, buf, sizeof(buf)));
	}
}

static int link_show(int argc, char **argv)
{
	struct uroce_dev_info *devs;
	struct uroce_ipc *ipc;
	const char *want = NULL;
	char name[UROCE_DEV_NAME_MAX + 8];
	unsigned n, shown = 0;
	int details = 0, port = 0;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-d") || matches(argv[i], "-details")) {
			details = 1;
		} else if (!want) {
			want = argv[i];
		} else {
			fprintf(stderr, "Unknown parameter '%s'.\n", argv[i]);
			return 1;
		}
	}
	if (want) {
		char *slash;

		snprintf(name, sizeof(name), "%s", want);
		slash = strchr(name, '/');
		if (slash) {
			char *end;

			*slash = 0;
			port = (int)strtol(slash + 1, &end, 10);
			if (*end || port != 1) {
				fprintf(stderr, "Wrong port index %s\n", slash + 1);
				return 1;
			}
		}
	}
	if (connect_daemon(&ipc))
		return 1;
	if ((errno = -uroce_ipc_devices(ipc, &devs, &n))) {
		fprintf(stderr, "error: %s\n", strerror(errno));
		uroce_ipc_close(ipc);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (want && strcmp(devs[i].name, name))
			continue;
		print_link(&devs[i], details);
		shown++;
	}
	free(devs);
	uroce_ipc_close(ipc);
	if (want && !shown) {
		fprintf(stderr, "Wrong device name\n");
		return 1;
	}
	return 0;
}

static int link_add(int argc, char **argv)
{
	const char *name, *netdev = NULL;
	struct uroce_ipc *ipc;
	int err;

	if (argc < 1) {
		fprintf(stderr, "Please provide a link name to add.\n");
		return 1;
	}
	name = argv[0];
	for (int i = 1; i < argc; i++) {
		if (matches(argv[i], "type")) {
			if (++i >= argc) {
				fprintf(stderr, "Please provide a link type.\n");
				return 1;
			}
			if (strcmp(argv[i], "uroce")) {
				fprintf(stderr, "Unknown link type '%s', uroce links are of type uroce.\n",
					argv[i]);
				return 1;
			}
		} else if (matches(argv[i], "netdev")) {
			if (++i >= argc) {
				fprintf(stderr, "Please provide a net device name.\n");
				return 1;
			}
			netdev = argv[i];
		} else {
			fprintf(stderr, "Unknown parameter '%s'.\n", argv[i]);
			return 1;
		}
	}
	if (!netdev) {
		fprintf(stderr, "Please provide a net device name.\n");
		return 1;
	}
	if (connect_daemon(&ipc))
		return 1;
	err = uroce_ipc_link_add(ipc, name, netdev);
	uroce_ipc_close(ipc);
	switch (err) {
	case 0:
		return 0;
	case -EEXIST:
		fprintf(stderr, "error: link %s or a link on netdev %s already exists\n", name, netdev);
		break;
	case -ENODEV:
		fprintf(stderr, "error: netdev %s: No such device\n", netdev);
		break;
	case -EINVAL:
	case -ENAMETOOLONG:
		fprintf(stderr, "error: invalid link name %s or netdev name %s\n", name, netdev);
		break;
	default:
		fprintf(stderr, "error: %s\n", strerror(-err));
		break;
	}
	return 1;
}

static int link_del(int argc, char **argv)
{
	struct uroce_ipc *ipc;
	int err;

	if (argc < 1) {
		fprintf(stderr, "Please provide a link name to delete.\n");
		return 1;
	}
	if (argc > 1) {
		fprintf(stderr, "Unknown parameter '%s'.\n", argv[1]);
		return 1;
	}
	if (connect_daemon(&ipc))
		return 1;
	err = uroce_ipc_link_del(ipc, argv[0]);
	uroce_ipc_close(ipc);
	if (err == -ENODEV)
		fprintf(stderr, "Wrong device name\n");
	else if (err)
		fprintf(stderr, "error: %s\n", strerror(-err));
	return err ? 1 : 0;
}

static int link_set(int argc, char **argv)
{
	struct uroce_ipc *ipc;
	uint32_t mode;
	int err;

	if (argc < 1) {
		fprintf(stderr, "Please provide a link name.\n");
		return 1;
	}
	if (argc != 3 || !matches(argv[1], "loopback")) {
		fprintf(stderr, "Usage: uroce link set NAME loopback { shm | udp }\n");
		return 1;
	}
	if (!strcmp(argv[2], "shm")) {
		mode = UROCE_LOOPBACK_SHM;
	} else if (!strcmp(argv[2], "udp")) {
		mode = UROCE_LOOPBACK_UDP;
	} else {
		fprintf(stderr, "Unknown loopback '%s': shm or udp.\n", argv[2]);
		return 1;
	}
	if (connect_daemon(&ipc))
		return 1;
	err = uroce_ipc_link_set(ipc, argv[0], mode);
	uroce_ipc_close(ipc);
	if (err == -ENODEV)
		fprintf(stderr, "Wrong device name\n");
	else if (err == -EOPNOTSUPP)
		fprintf(stderr, "error: this uroced does not know the loopback option\n");
	else if (err)
		fprintf(stderr, "error: %s\n", strerror(-err));
	return err ? 1 : 0;
}

int uroce_cmd_link(int argc, char **argv)
{
	/* argv[0] is "link"; no command means show, as in rdma. */
	if (argc < 2)
		return link_show(0, NULL);
	if (matches(argv[1], "help"))
		return link_help(stdout);
	if (matches(argv[1], "show") || matches(argv[1], "list"))
		return link_show(argc - 2, argv + 2);
	if (matches(argv[1], "add"))
		return link_add(argc - 2, argv + 2);
	if (matches(argv[1], "delete"))
		return link_del(argc - 2, argv + 2);
	if (matches(argv[1], "set"))
		return link_set(argc - 2, argv + 2);
	fprintf(stderr, "Unknown command '%s'.\n", argv[1]);
	link_help(stderr);
	return 1;
}
