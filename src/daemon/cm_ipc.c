/* cm_ipc.c — the connection manager's records on uroced's connections (ipc/cm_proto.h).
 *
 * A connection becomes a CM command connection with its first struct uroce_cm_cmd
 * (other than CHANNEL_OPEN): request, reply, and every id it creates is destroyed
 * when it closes (uroce_cm_client_gone), as the kernel destroys a process's rdma_cm
 * ids when its file closes.  A connection whose first record is CHANNEL_OPEN is an
 * event channel: the daemon answers with the channel number and from then on only
 * writes events; anything the library sends on it later is a protocol error.
 *
 * Events are never written blocking: the core keeps each channel's queue in order
 * (up to UROCE_CM_EVQ_MAX); they are written while the socket takes them and, when it
 * is full, again when epoll reports it writable (EPOLLOUT is asked for only then).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "daemon/cm.h"
#include "daemon/uroced.h"

/* CAP_NET_BIND_SERVICE (bit 10 of CapEff) of the peer, for ports below 1024. */
static int net_bind_service(pid_t pid)
{
	char path[64], line[256];
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long caps;

		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			ok = !!(caps & (1ull << 10));
			break;
		}
	}
	fclose(f);
	return ok;
}

static void want_out(struct uroced *d, struct uroce_client *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = c };

	if (c->cm_out == on)
		return;
	if (epoll_ctl(d->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->cm_out = on;
}

static struct uroce_client *channel_client(struct uroced *d, uint32_t ch)
{
	for (size_t i = 0; i < d->nclients; i++)
		if (d->clients[i]->cm_kind == UROCED_CM_EVENT && d->clients[i]->cm_chan == ch)
			return d->clients[i];
	return NULL;
}

/* Write what channel ch has queued; 1 if the socket is full. */
static int flush_channel(struct uroced *d, struct uroce_client *c)
{
	struct uroce_cm *core = d->cm->core;
	const struct uroce_cm_event *ev;

	while ((ev = uroce_cm_ev_peek(core, c->cm_chan))) {
		if (send(c->fd, ev, sizeof(*ev), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
				return 1;
			return 0;  /* gone: its EOF closes the channel */
		}
		uroce_cm_ev_pop(core, c->cm_chan);
	}
	return 0;
}

void uroced_cm_flush_events(struct uroced *d)
{
	uint32_t chs[64];
	unsigned n;
	bool again = true;

	if (!d->cm)
		return;
	/* Channels whose socket is full stay queued; the others are written empty, so
	 * the walk ends when only full ones remain. */
	while (again) {
		again = false;
		n = uroce_cm_ev_channels(d->cm->core, chs, 64);
		for (unsigned i = 0; i < n; i++) {
			struct uroce_client *c = channel_client(d, chs[i]);

			if (!c || c->cm_out)
				continue;
			if (flush_channel(d, c))
				want_out(d, c, true);
			else
				again = n == 64;
		}
	}
}

void uroced_cm_writable(struct uroced *d, struct uroce_client *c)
{
	if (!d->cm || c->cm_kind != UROCED_CM_EVENT)
		return;
	if (!flush_channel(d, c))
		want_out(d, c, false);
}

static int reply(struct uroce_client *c, const struct uroce_cm_reply *r)
{
	/* A client that does not read its replies loses the connection, as for the
	 * verbs records (server.c). */
	return send(c->fd, r, sizeof(*r), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*r) ? 0 : -1;
}

int uroced_cm_record(struct uroced *d, struct uroce_client *c, const struct uroce_cm_cmd *cmd)
{
	struct uroce_cm_reply *r;
	int ret;

	if (!d->cm || cmd->version != UROCE_CM_VERSION || c->cm_kind == UROCED_CM_EVENT)
		return -1;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	if (cmd->op == UROCE_CM_OP_CHANNEL_OPEN) {
		if (c->cm_kind == UROCED_CM_COMMAND) {
			free(r);
			return -1;
		}
		r->magic = UROCE_CM_MAGIC;
		r->version = UROCE_CM_VERSION;
		r->op = cmd->op;
		r->seq = cmd->seq;
		r->status = uroce_cm_channel_open(d->cm->core, c->uid, &r->u.channel);
		if (!r->status) {
			c->cm_kind = UROCED_CM_EVENT;
			c->cm_chan = r->u.channel;
		}
		ret = reply(c, r);
		free(r);
		return ret;
	}
	if (c->cm_kind != UROCED_CM_COMMAND) {
		c->cm_kind = UROCED_CM_COMMAND;
		c->cm_net_bind = net_bind_service(c->pid);
	}
	struct uroce_cm_caller who = {
		.owner = c->serial, .uid = c->uid, .net_bind_service = c->cm_net_bind || c->uid == 0,
	};
	uroce_cm_command(d->cm->core, (uint64_t)uroced_now_ms(), &who, cmd, r);
	ret = reply(c, r);
	free(r);
	uroced_cm_after(d);
	return ret;
}

void uroced_cm_client_gone(struct uroced *d, struct uroce_client *c)
{
	if (!d->cm)
		return;
	if (c->cm_kind == UROCED_CM_EVENT)
		uroce_cm_channel_close(d->cm->core, c->cm_chan);
	else if (c->cm_kind == UROCED_CM_COMMAND)
		uroce_cm_client_gone(d->cm->core, (uint64_t)uroced_now_ms(), c->serial);
	c->cm_kind = UROCED_CM_NONE;
	uroced_cm_after(d);
}
