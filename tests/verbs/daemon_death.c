/* daemon_death.c — uroced going away is a device catastrophe for every open
 * context: IBV_EVENT_DEVICE_FATAL arrives on async_fd (IBA 11.6.3.1), verbs that
 * need the device then fail with an errno, and nothing hangs.
 *
 * Runs inside its own pid+network namespace (nsrun.sh), where the only uroced is
 * the one this process autostarted; it is found through /proc and killed by pid. */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vt.h"

static pid_t find_uroced(void)
{
	struct stat self;
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	CHECK(d && stat("/proc/self/ns/net", &self) == 0);
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		struct stat ns;
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%s/ns/net", e->d_name);
		if (!strcmp(comm, "uroced\n") && !stat(path, &ns) && ns.st_ino == self.st_ino)
			found = (pid_t)atoi(e->d_name);
	}
	closedir(d);
	return found;
}

int main(void)
{
	struct ibv_context *ctx = vt_open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	struct ibv_port_attr pa;
	pid_t pid;

	CHECK(pd && cq);
	CHECK(poll(&pfd, 1, 0) == 0);
	pid = find_uroced();
	CHECK(pid > 0);
	CHECK(kill(pid, SIGKILL) == 0);

	CHECK(poll(&pfd, 1, 10000) == 1);
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL);
	ibv_ack_async_event(&ev);

	/* The device is gone: creating objects or querying it fails with EIO. */
	CHECK_NULL_ERRNO(ibv_alloc_pd(ctx), EIO);
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &(struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
		.max_recv_sge = 1 } }), EIO);
	CHECK_RET(ibv_query_port(ctx, 1, &pa), EIO);
	/* Cleaning up still works. */
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);

	/* A new device list autostarts a new daemon; the device object is the same
	 * and opens again. */
	{
		struct ibv_device **l = ibv_get_device_list(NULL);
		struct ibv_context *c2;
		struct ibv_pd *pd2;

		CHECK(l && l[0]);
		c2 = ibv_open_device(l[0]);
		CHECK(c2);
		CHECK(find_uroced() > 0 && find_uroced() != pid);
		pd2 = ibv_alloc_pd(c2);
		CHECK(pd2);
		CHECK_RET(ibv_dealloc_pd(pd2), 0);
		CHECK_RET(ibv_close_device(c2), 0);
		ibv_free_device_list(l);
	}
	return vt_done("verbs_daemon_death");
}
