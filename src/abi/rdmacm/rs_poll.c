/*
 * rs_poll.c — rpoll and rselect over rsockets and ordinary fds together.
 *
 * As rsocket.c's rpoll: check every rsocket (processing its CQ without sleeping) and
 * every ordinary fd; if nothing is ready, keep checking for polling_time us; then arm
 * each rsocket's completion channel (polling once more after arming, so that nothing
 * that completed before the arm is missed) and sleep in poll(2) on the fds that stand
 * for the rsockets:
 *
 *   state                      fd slept on            ready when
 *   LISTENING                  accept queue (pipe)    a new socket was queued
 *   RESOLVING_* / CONNECTING   connect eventfd        the service thread ended the connect
 *   CONNECTED / DISCONNECTED   CQ channel             a completion (data, credits, the
 *   / ERROR                                           flushes of a disconnect)
 *
 * After poll(2) the CQ events that fired are consumed and every rsocket is checked
 * again.  The sleep is cut into slices of wake_up_interval ms (rsocket.c's setting) so
 * that a state change no fd reports (a blocking rconnect on another thread) is seen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

static bool has_cq(const struct rsock *rs)
{
	return rs->cq != NULL && (rs->state == RS_CONNECTED || rs->state == RS_DISCONNECTED ||
				  rs->state == RS_ERROR);
}

static short fd_ready(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };

	if (fd < 0 || poll(&p, 1, 0) <= 0)
		return 0;
	return p.revents;
}

/* The events of one stream rsocket now (arm: leave its CQ armed for the sleep). */
static short rs_revents(struct rsock *rs, short events, bool arm)
{
	int state = rs->state;

	if (state == RS_LISTENING)
		return fd_ready(rs->accept_q[0], POLLIN) & POLLIN ? (events & POLLIN) : 0;
	if (rs_opening(state))
		return 0;
	if (state == RS_CONNECT_ERROR)
		return (events & (POLLIN | POLLOUT)) | POLLERR;
	if (!has_cq(rs))
		return 0;        /* INIT, BOUND: nothing can happen (rsocket.c answers 0 too) */
	rs_process_cq(rs, true, rs_poll_all);
	if (arm)
		rs_process_cq(rs, false, rs_is_cq_armed);
	return rs_poll_revents(rs, events);
}

static int wait_fd(struct rsock *rs)
{
	if (rs->state == RS_LISTENING)
		return rs->accept_q[0];
	if (rs_opening(rs->state))
		return rs->evfd;
	if (has_cq(rs))
		return rs->cq_ch->fd;
	return -1;
}

/* Check every entry; the number ready. */
static int check_all(struct pollfd *fds, nfds_t nfds, struct rsock **rss, bool arm)
{
	int n = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = rss[i];

		if (fds[i].fd < 0) {
			fds[i].revents = 0;
			continue;
		}
		if (!rs)
			fds[i].revents = fd_ready(fds[i].fd, fds[i].events);
		else if (rs->type == SOCK_DGRAM)
			fds[i].revents = ds_poll_revents(rs, fds[i].events, true, arm);
		else
			fds[i].revents = rs_revents(rs, fds[i].events, arm);
		if (fds[i].revents)
			n++;
	}
	return n;
}

static int64_t now_ms(void)
{
	return (int64_t)(rs_now_us() / 1000);
}

UROCE_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rsock *small[16], **rss = small;
	struct pollfd psmall[16], *pfd = psmall;
	int64_t deadline = timeout > 0 ? now_ms() + timeout : 0;
	uint64_t start;
	int n, ret;

	if (nfds && !fds)
		return cm_err(-EFAULT);
	if (nfds > 16) {
		rss = calloc(nfds, sizeof(*rss));
		pfd = calloc(nfds, sizeof(*pfd));
		if (!rss || !pfd) {
			ret = cm_err(-ENOMEM);
			goto out;
		}
	}
	for (nfds_t i = 0; i < nfds; i++)
		rss[i] = fds[i].fd >= 0 ? rs_lookup(fds[i].fd) : NULL;

	start = rs_now_us();
	for (;;) {
		n = check_all(fds, nfds, rss, false);
		if (n || !timeout) {
			ret = n;
			goto out;
		}
		if (rs_now_us() - start > rs_polling_time_us)
			break;
	}
	for (;;) {
		int slice;

		/* Arm, checking once more: what completed before the arm is seen now. */
		n = check_all(fds, nfds, rss, true);
		if (n) {
			ret = n;
			goto out;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			pfd[i].fd = rss[i] ? (rss[i]->type == SOCK_DGRAM ? ds_wait_fd(rss[i]) :
					      wait_fd(rss[i])) : fds[i].fd;
			pfd[i].events = rss[i] ? POLLIN : fds[i].events;
			pfd[i].revents = 0;
		}
		slice = rs_wake_up_interval_ms > 0 ? rs_wake_up_interval_ms : -1;
		if (timeout > 0) {
			int64_t left = deadline - now_ms();

			if (left <= 0) {
				ret = 0;
				goto out;
			}
			if (slice < 0 || left < slice)
				slice = (int)left;
		}
		ret = poll(pfd, nfds, slice);
		if (ret < 0)
			goto out;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsock *rs = rss[i];

			if (!rs || !(pfd[i].revents & POLLIN))
				continue;
			if (rs->type == SOCK_DGRAM)
				ds_take_cq_event(rs);
			else if (pfd[i].fd >= 0 && has_cq(rs) && pfd[i].fd == rs->cq_ch->fd)
				rs_take_cq_event(rs);
		}
		n = check_all(fds, nfds, rss, false);
		if (n) {
			ret = n;
			goto out;
		}
	}
out:
	if (rss != small)
		free(rss);
	if (pfd != psmall)
		free(pfd);
	return ret;
}

UROCE_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
			 struct timeval *timeout)
{
	struct pollfd *fds;
	int n = 0, ret, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return cm_err(-EINVAL);
	fds = calloc(nfds ? (size_t)nfds : 1, sizeof(*fds));
	if (!fds)
		return cm_err(-ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			ev |= POLLPRI;
		if (ev) {
			fds[n].fd = fd;
			fds[n].events = ev;
			n++;
		}
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
	ret = rpoll(fds, (nfds_t)n, to);
	if (ret < 0) {
		free(fds);
		return ret;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (int i = 0; i < n; i++) {
		short rev = fds[i].revents;
		bool hit = false;

		if (readfds && (rev & (POLLIN | POLLHUP | POLLERR)) && (fds[i].events & POLLIN)) {
			FD_SET(fds[i].fd, readfds);
			hit = true;
		}
		if (writefds && (rev & (POLLOUT | POLLERR)) && (fds[i].events & POLLOUT)) {
			FD_SET(fds[i].fd, writefds);
			hit = true;
		}
		if (exceptfds && (rev & POLLPRI) && (fds[i].events & POLLPRI)) {
			FD_SET(fds[i].fd, exceptfds);
			hit = true;
		}
		ret += hit;
	}
	free(fds);
	return ret;
}
