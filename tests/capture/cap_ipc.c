/* cap_ipc — uroced's capture records (ipc/cap_proto.h, docs/daemon.md "Capturing") on
 * raw connections, without an engine: what the daemon accepts as a ring, who captures,
 * that a ring handed over is switched on (head moved to tail) and switched off when the
 * capture's connection closes, and that a producer's exit says so in the ring.  Run by
 * nsrun.sh (a uroced of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "ipc/cap_proto.h"
#include "ipc/ipc.h"

#define DEV "uroce0"
#define RING (64u << 10)

/* A ring memfd: @seal adds F_SEAL_SHRINK, @magic goes into the header. */
static int make_ring(bool seal, uint32_t magic, struct uroce_cap_hdr **map)
{
	int fd = memfd_create("cap-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t size = UROCE_CAP_HDR_BYTES + RING;
	struct uroce_cap_hdr *h;

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		return -1;
	if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		return -1;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return -1;
	h->magic = magic;
	h->version = UROCE_CAP_VERSION;
	h->size = size;
	h->ring_bytes = RING;
	h->pid = (int32_t)getpid();
	if (map)
		*map = h;
	return fd;
}

/* Wait (at most 2 s) for @word to become @want: the daemon handles other connections'
 * hangups in its own time. */
static bool wait_word(const uint32_t *word, uint32_t want)
{
	for (int i = 0; i < 2000; i++) {
		if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == want)
			return true;
		usleep(1000);
	}
	return false;
}

int main(void)
{
	struct uroce_ipc *prod, *cap, *other;
	struct uroce_cap_hdr *h, *theirs;
	struct uroce_cap_info info;
	uint32_t session = 0, s2;
	int fd, got, err;

	if (uroce_ipc_open(&prod, UROCE_IPC_AUTOSTART) || uroce_ipc_open(&cap, 0) ||
	    uroce_ipc_open(&other, 0)) {
		fprintf(stderr, "cannot reach uroced\n");
		return 1;
	}
	/* What is not a ring is refused. */
	fd = make_ring(false, UROCE_CAP_MAGIC, NULL);
	CHECK(uroce_ipc_cap_register(prod, DEV, fd) == -EINVAL, "an unsealed (shrinkable) ring");
	close(fd);
	fd = make_ring(true, 0x12345678, NULL);
	CHECK(uroce_ipc_cap_register(prod, DEV, fd) == -EINVAL, "a ring with a bad magic");
	close(fd);
	fd = make_ring(true, UROCE_CAP_MAGIC, &h);
	CHECK(uroce_ipc_cap_register(prod, "nodev", fd) == -ENODEV, "an unknown device");
	/* Not captured: off.  Something written before the capture is not handed to it. */
	h->tail = 4096;
	CHECK((err = uroce_ipc_cap_register(prod, DEV, fd)) == 0, "a good ring: %d", err);
	close(fd);
	CHECK(h->active == 0, "switched on without a capture");

	CHECK(uroce_ipc_cap_next(cap, DEV, &info, &got) == -EINVAL, "CAP_NEXT before CAP_START");
	CHECK((err = uroce_ipc_cap_start(cap, DEV, &session)) == 0 && session, "CAP_START: %d", err);
	CHECK(uroce_ipc_cap_start(other, DEV, &s2) == -EBUSY, "a second capture of the device");
	CHECK(uroce_ipc_cap_start(cap, DEV, &s2) == -EBUSY, "CAP_START twice");
	err = uroce_ipc_cap_next(cap, DEV, &info, &got);
	CHECK(err == 0 && got >= 0, "CAP_NEXT hands the ring over: %d", err);
	CHECK(info.pid == getpid() && info.session == session, "pid %d session %u", (int)info.pid,
	      info.session);
	CHECK(h->active == session, "the ring is switched on (%u)", h->active);
	CHECK(h->head == 4096, "the capture starts at the tail (head %llu)", (unsigned long long)h->head);
	if (got >= 0) {
		theirs = mmap(NULL, UROCE_CAP_HDR_BYTES, PROT_READ, MAP_SHARED, got, 0);
		CHECK(theirs != MAP_FAILED && theirs->magic == UROCE_CAP_MAGIC, "the same memory");
		close(got);
	}
	/* Then the daemon's own (its QP1 packets), on too. */
	err = uroce_ipc_cap_next(cap, DEV, &info, &got);
	CHECK(err == 0 && got >= 0 && info.pid != getpid() && info.session == session,
	      "CAP_NEXT hands the daemon's ring over: %d (pid %d)", err, (int)info.pid);
	if (err == 0 && got >= 0) {
		theirs = mmap(NULL, UROCE_CAP_HDR_BYTES, PROT_READ, MAP_SHARED, got, 0);
		CHECK(theirs != MAP_FAILED && theirs->magic == UROCE_CAP_MAGIC &&
		      theirs->pid == info.pid && theirs->active == session,
		      "the daemon's ring is a ring, switched on");
		close(got);
	}
	CHECK(uroce_ipc_cap_next(cap, DEV, &info, &got) == -ENOENT, "each ring once");

	/* The capture ends: the ring is switched off; a new capture may start. */
	uroce_ipc_close(cap);
	CHECK(wait_word(&h->active, 0), "still on after the capture's connection closed");
	CHECK(uroce_ipc_cap_start(other, DEV, &s2) == 0 && s2 != session, "a new capture");
	/* A ring registered during a capture is on at once. */
	fd = make_ring(true, UROCE_CAP_MAGIC, &theirs);
	CHECK(uroce_ipc_cap_register(prod, DEV, fd) == 0, "register during a capture");
	close(fd);
	CHECK(theirs->active == s2, "a ring registered during a capture is on (%u)", theirs->active);
	/* The producer's connection closes: its ring says so. */
	uroce_ipc_close(prod);
	CHECK(wait_word(&theirs->gone, 1), "a gone producer's ring does not say so");
	CHECK(theirs->active == 0, "a gone producer's ring stays on");
	/* ... but the capture that switched it on and has not asked for it yet still gets
	 * it (a program shorter than the capture's poll), once. */
	err = uroce_ipc_cap_next(other, DEV, &info, &got);
	CHECK(err == 0 && got >= 0 && info.pid == getpid() && info.session == s2,
	      "a gone producer's unread ring is handed over: %d", err);
	if (err == 0 && got >= 0) {
		struct uroce_cap_hdr *g = mmap(NULL, UROCE_CAP_HDR_BYTES, PROT_READ, MAP_SHARED, got, 0);

		CHECK(g != MAP_FAILED && g->gone == 1 && g->pid == getpid(), "it is the gone ring");
		close(got);
	}
	err = uroce_ipc_cap_next(other, DEV, &info, &got);
	CHECK(err == 0 && info.pid != getpid(), "then the daemon's: %d", err);
	if (err == 0 && got >= 0)
		close(got);
	CHECK(uroce_ipc_cap_next(other, DEV, &info, &got) == -ENOENT, "the gone ring once");
	uroce_ipc_close(other);
	return check_summary();
}
