/* proto.h — the records exchanged between uroce_ipc clients and uroced.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET connection to the abstract address
 * "\0" UROCE_IPC_ADDR (or "\0" $UROCE_IPC_NAME).  SEQPACKET keeps record boundaries
 * and reports a peer's death as EOF, so the daemon learns that a client exited or
 * crashed (and reclaims its QPNs) without any heartbeat, and clients learn the same
 * about the daemon.
 *
 * Every message is one fixed-size record: a request is exactly sizeof(struct
 * uroce_ipc_req), a reply exactly sizeof(struct uroce_ipc_resp).  Anything else is a
 * protocol error.  Both carry magic and version first, so a future version can
 * be recognised (and refused with -EPROTONOSUPPORT) before anything else is read.
 *
 * Descriptors: a reply to RX_SOCKET carries one descriptor as SCM_RIGHTS ancillary
 * data (SEQPACKET keeps it with its record), a reply to SHM_LINK or SHM_ACCEPT two (the
 * link's memfd, then the peer's wake eventfd), a reply to CAP_NEXT one (a capture ring);
 * CNT_REGISTER, SHM_ATTACH and CAP_REGISTER requests carry one.  The client takes descriptors only from the reply it waits for and closes any
 * other it receives.
 *
 * Flow: strictly request/reply, one outstanding request per connection.  The reply
 * echoes op and seq; a client discards replies whose seq is not the one it waits
 * for (a late reply to a request that timed out).  The daemon sends nothing
 * unsolicited unless the connection subscribed (SUBSCRIBE): then EVENT records
 * (seq 0) may arrive at any time, also between a request and its reply, and the
 * client queues them.  On an unsubscribed connection a readable fd means EOF.
 *
 * Lists (devices, clients, stats) are read one element per request by index; each
 * reply carries the list length and the daemon's table generation, which changes
 * whenever the device table changes, so a client restarts a walk that straddled a
 * change instead of mixing two tables.
 *
 * Integers are host byte order (both ends are on the same host); node_guid and GIDs
 * are network byte order as in the verbs API.
 */
#ifndef UROCE_IPC_PROTO_H
#define UROCE_IPC_PROTO_H

#include <stdint.h>
#include <sys/types.h>

#include "ipc/ipc.h"

#define UROCE_IPC_MAGIC 0x55524f43u     /* "UROC" */
#define UROCE_IPC_VERSION 2              /* 2: counters records of 48 entries, two blocks */
#define UROCE_IPC_NAME_ENV "UROCE_IPC_NAME"  /* override the abstract name (tests) */
#define UROCE_NETDEV_MAX 16              /* IFNAMSIZ */

enum uroce_ipc_op {
	UROCE_OP_HELLO = 1,      /* -> status.pid, status.proto_version */
	UROCE_OP_DEV_GET,        /* arg = index -> dev */
	UROCE_OP_QPN_ALLOC,      /* dev -> qpn */
	UROCE_OP_QPN_FREE,       /* dev, arg = qpn */
	UROCE_OP_QPN_OWNER,      /* dev, arg = qpn -> owner.pid */
	UROCE_OP_LINK_ADD,       /* dev = name, netdev */
	UROCE_OP_LINK_DEL,       /* dev = name */
	UROCE_OP_STATUS,         /* -> status */
	UROCE_OP_CLIENT_GET,     /* arg = index -> client */
	UROCE_OP_STATS_GET,      /* arg = index -> stats */
	UROCE_OP_SHUTDOWN,
	UROCE_OP_RX_SOCKET,      /* dev -> one descriptor in SCM_RIGHTS */
	UROCE_OP_CNT_REGISTER,   /* dev, arg = block (UROCE_CNT_BLOCK_*), a sealed memfd in
				  * SCM_RIGHTS with the request */
	UROCE_OP_CNT_GET,        /* arg = index -> cnt */
	UROCE_OP_SUBSCRIBE,      /* from now on, events on this connection */
	UROCE_OP_EVENT,          /* daemon -> client only, unsolicited: seq 0, event */
	UROCE_OP_PERSIST,        /* an autostarted daemon stays when idle */
	UROCE_OP_CNT_TOTAL,      /* dev, arg = block -> cnt: the device's totals of that block */
	/* Same-host shared-memory links (ipc/shm_proto.h, docs/transport.md). */
	UROCE_OP_LINK_SET,       /* dev, arg = enum uroce_loopback: the device's same-host link */
	UROCE_OP_SHM_ATTACH,     /* dev, the connection's wake eventfd in SCM_RIGHTS: it takes
				  * part in shared-memory links from now on */
	UROCE_OP_SHM_LINK,       /* dev, arg = destination QPN, x.shm.dgid, x.shm.ring_bytes ->
				  * shm, the link's memfd and the peer's eventfd */
	UROCE_OP_SHM_ACCEPT,     /* dev -> shm and the two descriptors of the next link a peer
				  * opened to this connection; -ENOENT when there is none */
	/* Capturing (ipc/cap_proto.h, docs/daemon.md "Capturing"). */
	UROCE_OP_CAP_REGISTER,   /* dev, the context's capture ring (a memfd sealed against
				  * shrinking) in SCM_RIGHTS with the request */
	UROCE_OP_CAP_START,      /* dev -> cap.session: this connection captures on dev;
				  * -EBUSY while another capture of dev runs */
	UROCE_OP_CAP_NEXT,       /* dev -> cap and the next ring this capture may read (of its
				  * uid's processes; all for root), activated; -ENOENT: none */
	UROCE_OP_MAX
};

struct uroce_ipc_req {
	uint32_t magic;
	uint16_t version;
	uint16_t op;                     /* enum uroce_ipc_op */
	uint32_t seq;
	uint32_t arg;                    /* index or QPN, per op */
	char dev[UROCE_DEV_NAME_MAX];    /* NUL-terminated device name, "" if unused */
	char netdev[UROCE_NETDEV_MAX];   /* NUL-terminated netdev name, "" if unused */
	union {
		uint8_t reserved[48];    /* zero; room for later ops without a new size */
		struct {
			uint8_t dgid[16];        /* SHM_LINK: the destination QP's GID */
			uint32_t ring_bytes;     /* ...ring size a new link gets (0: default) */
		} shm;
	} x;
};

struct uroce_ipc_resp {
	uint32_t magic;
	uint16_t version;                /* the daemon's version, also in an error reply */
	uint16_t op;
	uint32_t seq;
	int32_t status;                  /* 0 or -errno */
	uint32_t count;                  /* list ops: number of elements */
	uint32_t ev_lost;                /* subscribed: events dropped since the last
					  * report (the client adds them to the next
					  * event's lost) */
	uint64_t generation;             /* list ops: device table generation */
	union {
		uint32_t qpn;
		int32_t owner_pid;
		struct uroce_dev_info dev;
		struct uroce_daemon_status status;
		struct uroce_client_info client;
		struct uroce_dev_stats stats;
		struct uroce_cnt_record cnt;
		struct uroce_ipc_event event;
		struct uroce_shm_link_info shm;
		struct uroce_cap_info cap;
		uint8_t raw[2048];           /* fixes the record size */
	} u;
};

_Static_assert(sizeof(struct uroce_ipc_req) == 144, "request record size is ABI");
_Static_assert(sizeof(struct uroce_ipc_resp) == 2080, "reply record size is ABI");
_Static_assert(sizeof(struct uroce_dev_info) <= 2048, "dev_info must fit the reply");
_Static_assert(sizeof(struct uroce_cnt_record) <= 2048, "cnt_record must fit the reply");
_Static_assert(sizeof(struct uroce_ipc_event) <= 2048, "event must fit the reply");

/* The counters block in a memfd (uroce_counters_create, ipc.h):
 *   struct uroce_cnt_hdr
 *   char names[n_ctx + n_qp][UROCE_CNT_NAME_MAX]     context names, then QP names
 *   uint64_t ctx[n_ctx]
 *   n_slots x { struct uroce_cnt_slot; uint64_t v[n_qp]; }
 * The daemon accepts it only with F_SEAL_SHRINK (a shrinking file would fault its
 * reads) and takes the layout from the header once, at registration.
 *
 * A connection registers up to UROCE_CNT_BLOCKS blocks per device, one per role:
 * block 0 is the context's (netio: packets, ICRC and misrouted drops), block 1 the
 * transport's (a slot per QP; its context part holds the totals of every QP the
 * context has had, destroyed ones included).  Registering a role again replaces
 * that role's block. */
#define UROCE_CNT_MAGIC 0x544e4355u      /* "UCNT" */
#define UROCE_CNT_VERSION 1
#define UROCE_CNT_MAX_SLOTS 65536
#define UROCE_CNT_BLOCKS 2

struct uroce_cnt_hdr {
	uint32_t magic, version;
	uint32_t n_ctx, n_qp, n_slots;
	uint32_t pad;
	uint64_t size;                   /* bytes of the whole block */
};

struct uroce_cnt_slot {
	uint32_t qpn;                    /* 0: free */
	uint32_t qp_type;
};

/* Byte offsets of the parts of a block; 0 if the layout is invalid. */
static inline uint64_t uroce_cnt_size(uint32_t n_ctx, uint32_t n_qp, uint32_t n_slots)
{
	if (n_ctx > UROCE_CNT_MAX || n_qp > UROCE_CNT_MAX || n_slots > UROCE_CNT_MAX_SLOTS)
		return 0;
	return sizeof(struct uroce_cnt_hdr) + (uint64_t)(n_ctx + n_qp) * UROCE_CNT_NAME_MAX +
	       8ull * n_ctx + (uint64_t)n_slots * (sizeof(struct uroce_cnt_slot) + 8ull * n_qp);
}
static inline uint64_t uroce_cnt_ctx_off(uint32_t n_ctx, uint32_t n_qp)
{
	return sizeof(struct uroce_cnt_hdr) + (uint64_t)(n_ctx + n_qp) * UROCE_CNT_NAME_MAX;
}
static inline uint64_t uroce_cnt_slot_off(uint32_t n_ctx, uint32_t n_qp, uint32_t slot)
{
	return uroce_cnt_ctx_off(n_ctx, n_qp) + 8ull * n_ctx +
	       (uint64_t)slot * (sizeof(struct uroce_cnt_slot) + 8ull * n_qp);
}

/* msg.c: one record (a request or a reply) over the connection, both sides.
 * send: @len bytes of @rec, with @fd as SCM_RIGHTS if fd >= 0 (the kernel duplicates it;
 * the caller keeps its own); MSG_NOSIGNAL is added to @flags; EINTR is retried unless
 * MSG_DONTWAIT.  Returns sendmsg's result (-1 and errno on failure).
 * recv: one record into @rec (@len bytes; with MSG_TRUNC in @flags a longer record
 * reports its real length).  The first descriptor that came with it goes to *fd (else
 * -1; fd may be NULL), every other one is closed, so none leaks whatever the peer sent.
 * Returns recvmsg's result. */
ssize_t uroce_ipc_send_rec(int sock, const void *rec, size_t len, int fd, int flags);
ssize_t uroce_ipc_recv_rec(int sock, void *rec, size_t len, int *fd, int flags);
/* The same with up to 4 descriptors: send @nfds of @fds; receive the first @maxfds into
 * fds[] (the others -1), closing any beyond. */
ssize_t uroce_ipc_send_recn(int sock, const void *rec, size_t len, const int *fds, unsigned nfds,
			   int flags);
ssize_t uroce_ipc_recv_recn(int sock, void *rec, size_t len, int *fds, unsigned maxfds, int flags);

/* Fill sa (a struct sockaddr_un) with the daemon's abstract address; returns the
 * address length to pass to bind()/connect().  Reads $UROCE_IPC_NAME. */
struct sockaddr_un;
unsigned uroce_ipc_addr(struct sockaddr_un *sa);

#endif
