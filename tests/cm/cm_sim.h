/* cm_sim.h — hosts running src/cm on a simulated network with a virtual clock.
 *
 * Each host is one struct uroce_cm (one uroced) with its devices.  MADs it sends are
 * built into whole QP1 packets (uroce_cm_build_packet) and delivered, on sim_run(), to
 * the host owning the destination GID through uroce_cm_recv_packet(), so the packet
 * checks run too.  Routes: a destination GID on another host is reached through the
 * first device of the source host (hop limit 64); one of the host's own addresses or a
 * loopback address through its loopback device.  Time moves only in sim_advance().
 */
#ifndef UROCE_TESTS_CM_SIM_H
#define UROCE_TESTS_CM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "cm/cm.h"
#include "cm/cm_priv.h"

#define SIM_HOSTS 4
#define SIM_DEVS 3
#define SIM_LOG 512
#define SIM_QUEUE 1024

struct sim_pkt {
	int from, to;                    /* host indices */
	uint32_t dev_id;                 /* at the receiver */
	uint8_t src[16], dst[16];
	uint16_t sport;
	uint8_t data[UROCE_CM_QP1_PKT_LEN];
	size_t len;
};

/* One MAD a host sent: when, what, to where. */
struct sim_sent {
	uint64_t t;
	uint16_t attr;
	uint8_t dgid[16];
	uint8_t mad[UROCE_MAD_SIZE];
};

struct sim_net;

struct sim_host {
	struct sim_net *net;
	int index;
	struct uroce_cm *cm;
	struct uroce_cm_dev devs[SIM_DEVS];
	unsigned ndevs;
	uint32_t psn_next, port_rand, psn_rand[8];
	unsigned npsn_rand;
	struct sim_sent sent[SIM_LOG];
	unsigned nsent;
	uint32_t bth_psn;
	/* Drop filter: while drop_out_attr != 0, MADs of that attribute (0xFFFF: all)
	 * leaving this host are lost; drop_out_n > 0 limits how many. */
	uint16_t drop_out_attr;
	int drop_out_n;
	uint16_t drop_in_attr;           /* the same for MADs arriving */
	int drop_in_n;
	uint64_t caller;                 /* the default command connection */
	int net_bind_service;
	unsigned reboots;
};

struct sim_net {
	uint64_t now;
	struct sim_host h[SIM_HOSTS];
	unsigned nhosts;
	struct sim_pkt q[SIM_QUEUE];
	unsigned qhead, qtail;
	unsigned delivered, lost;
};

/* A network of n hosts, no devices yet, clock at 1000 ms. */
void sim_init(struct sim_net *n, unsigned hosts, const struct uroce_cm_config *cfg);
void sim_fini(struct sim_net *n);
/* Re-create host i's core (a reboot: same devices, new comm IDs). */
void sim_reboot(struct sim_net *n, unsigned i, const struct uroce_cm_config *cfg);

/* Add a device; gids are "192.0.2.10" or "2001:db8::1" strings (NULL-terminated list),
 * node_guid in host order. */
uint32_t sim_dev(struct sim_host *h, const char *name, int loopback, uint32_t ifindex,
		 uint32_t mtu, uint64_t guid, const char *const *addrs);

/* Deliver queued packets until the network is quiet. */
void sim_run(struct sim_net *n);
/* Move the clock forward by ms, running timers (and delivering) on the way. */
void sim_advance(struct sim_net *n, uint64_t ms);

/* Commands.  r is filled; returns r->status. */
int sim_cmd(struct sim_host *h, struct uroce_cm_cmd *c, struct uroce_cm_reply *r);
uint32_t sim_channel(struct sim_host *h);
uint32_t sim_create(struct sim_host *h, uint32_t ch, uint32_t ps, uint32_t qp_type);
int sim_bind(struct sim_host *h, uint32_t id, const char *addr, uint16_t port);
int sim_resolve_addr(struct sim_host *h, uint32_t id, const char *src, const char *dst,
		     uint16_t port);
int sim_resolve_route(struct sim_host *h, uint32_t id);
int sim_listen(struct sim_host *h, uint32_t id, int backlog);
int sim_connect(struct sim_host *h, uint32_t id, uint32_t qpn, const void *priv, uint8_t len);
int sim_accept(struct sim_host *h, uint32_t id, uint32_t qpn, const void *priv, uint8_t len);
int sim_reject(struct sim_host *h, uint32_t id, const void *priv, uint8_t len);
int sim_disconnect(struct sim_host *h, uint32_t id);
int sim_destroy(struct sim_host *h, uint32_t id, uint32_t *events);
int sim_query(struct sim_host *h, uint32_t id, struct uroce_cm_query *q);
int sim_qp_attr(struct sim_host *h, uint32_t id, int state, struct ibv_qp_attr *a, int *mask);
int sim_option(struct sim_host *h, uint32_t id, int level, int name, const void *val, uint32_t len);

/* The next event on channel ch (popped), or false. */
bool sim_event(struct sim_host *h, uint32_t ch, struct uroce_cm_event *ev);
/* Pop events until one of type `event` comes (others are discarded); false if none. */
bool sim_expect(struct sim_host *h, uint32_t ch, uint32_t event, struct uroce_cm_event *ev);
unsigned sim_pending(struct sim_host *h, uint32_t ch);

/* Sockaddr from "a.b.c.d" / "v6" and port; GID from an address string. */
void sim_sa(const char *addr, uint16_t port, struct sockaddr_storage *ss);
void sim_gid(const char *addr, uint8_t gid[16]);
/* The n-th (0-based) MAD of attribute attr host h sent, or NULL. */
const struct sim_sent *sim_sent_nth(const struct sim_host *h, uint16_t attr, unsigned n);
unsigned sim_sent_count(const struct sim_host *h, uint16_t attr);
struct uroce_cm_stats sim_stats(struct sim_host *h);

#endif
