/* steer.h — receive steering of UDP 4791 by destination QPN.
 *
 * All processes of a device receive on the device's address and UDP port 4791 through
 * one SO_REUSEPORT group.  A classic-BPF program attached to the group with
 * SO_ATTACH_REUSEPORT_CBPF picks the socket for each datagram.  For UDP the kernel runs it
 * with the UDP payload at offset 0, so it reads the destination QP straight out of the BTH
 * (bytes 5..7, IBA 9.2) and returns the index of the owning socket in the group.
 *
 * The program is a list of QPN ranges, each mapped to a socket index, plus a default index
 * for everything else: QP1 (the CM), unknown QPNs, datagrams too short to hold a BTH, and
 * the multicast QPN 0xFFFFFF whatever the rules say (Linux copies multicast to every
 * joined socket and consults the program only when one socket matches; docs/ud-uc.md).
 * The daemon owns the group's sockets (it creates them and hands them to clients), so it
 * knows every socket's index; it rebuilds and re-attaches the program whenever the mapping
 * changes.  A datagram that lands on the wrong socket during a change is dropped and
 * counted by its receiver, and the transports recover.
 */
#ifndef UROCE_NET_STEER_H
#define UROCE_NET_STEER_H

#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>

struct uroce_steer_rule {
	uint32_t qpn_lo, qpn_hi;   /* inclusive range of 24-bit QPNs */
	uint16_t index;            /* socket index in the reuseport group */
};

/* Classic BPF programs are at most BPF_MAXINSNS (4096) instructions; each rule takes
 * four, plus a prologue of seven and the default return. */
#define UROCE_STEER_MAX_RULES 1022

/*
 * Build the program into @prog (capacity @cap instructions).  Rules must not overlap; their
 * order does not matter.  Returns the number of instructions, or -EINVAL (bad range,
 * overlapping rules) / -E2BIG (does not fit in @cap or in BPF_MAXINSNS).
 */
int uroce_steer_build(const struct uroce_steer_rule *rules, size_t n, uint16_t default_index,
		      struct sock_filter *prog, size_t cap);

/* Build and attach to @fd's reuseport group.  Returns 0 or -errno. */
int uroce_steer_attach(int fd, const struct uroce_steer_rule *rules, size_t n,
		       uint16_t default_index);

/* Evaluate @prog over @payload (as the kernel would, for tests and debugging): returns the
 * index the program selects. */
uint32_t uroce_steer_eval(const struct sock_filter *prog, size_t len, const uint8_t *payload,
			  size_t payload_len);

#endif
