/* frame.c — Ethernet / IPv4 / IPv6 / UDP parsing and building (see frame.h). */
#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "net/frame.h"

#define ETH_HLEN_ 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86DD
#define ETHERTYPE_VLAN 0x8100
#define ETHERTYPE_QINQ 0x88A8
#define IPV6_HLEN 40
#define UDP_HLEN 8

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The UDP header at @udp with @avail bytes behind it; @ip_payload is what the IP
 * header says the L4 part is.  The UDP length must fit inside both. */
static int parse_udp(const uint8_t *udp, size_t avail, size_t ip_payload, struct uroce_frame *out)
{
	if (ip_payload > avail || ip_payload < UDP_HLEN)
		return -EINVAL;
	size_t ulen = get16(udp + 4);
	if (ulen < UDP_HLEN || ulen > ip_payload)
		return -EINVAL;
	out->udp = udp;
	out->sport = get16(udp);
	out->dport = get16(udp + 2);
	out->payload = udp + UDP_HLEN;
	out->payload_len = ulen - UDP_HLEN;
	return 0;
}

int uroce_frame_parse_ip(const uint8_t *pkt, size_t len, struct uroce_frame *out)
{
	memset(out, 0, sizeof(*out));
	if (len < 1)
		return -EINVAL;
	switch (pkt[0] >> 4) {
	case 4: {
		if (len < 20)
			return -EINVAL;
		size_t ihl = (size_t)(pkt[0] & 0xF) * 4;
		size_t tot = get16(pkt + 2);
		if (ihl < 20 || ihl > len || tot < ihl || tot > len)
			return -EINVAL;
		/* Fragments: only a whole datagram is a RoCEv2 packet (MF clear, offset 0). */
		if (get16(pkt + 6) & 0x3FFF)
			return -EPROTONOSUPPORT;
		if (pkt[9] != IPPROTO_UDP)
			return -EPROTONOSUPPORT;
		out->family = AF_INET;
		out->ip = pkt;
		out->ip_len = ihl;
		memcpy(&out->src.v4, pkt + 12, 4);
		memcpy(&out->dst.v4, pkt + 16, 4);
		return parse_udp(pkt + ihl, len - ihl, tot - ihl, out);
	}
	case 6: {
		if (len < IPV6_HLEN)
			return -EINVAL;
		/* Extension headers are not followed: RoCEv2 puts UDP right after the IPv6
		 * header (Annex A17.4), so anything else is not ours. */
		if (pkt[6] != IPPROTO_UDP)
			return -EPROTONOSUPPORT;
		out->family = AF_INET6;
		out->ip = pkt;
		out->ip_len = IPV6_HLEN;
		memcpy(&out->src.v6, pkt + 8, 16);
		memcpy(&out->dst.v6, pkt + 24, 16);
		return parse_udp(pkt + IPV6_HLEN, len - IPV6_HLEN, get16(pkt + 4), out);
	}
	default:
		return -EPROTONOSUPPORT;
	}
}

int uroce_frame_parse_eth(const uint8_t *frame, size_t len, struct uroce_frame *out)
{
	memset(out, 0, sizeof(*out));
	if (len < ETH_HLEN_)
		return -EINVAL;
	size_t off = 12;
	uint16_t type = get16(frame + off);
	/* At most two tags (802.1ad outer + 802.1Q inner); more is not a frame we build. */
	for (int tags = 0; (type == ETHERTYPE_VLAN || type == ETHERTYPE_QINQ) && tags < 2; tags++) {
		off += 4;
		if (off + 2 > len)
			return -EINVAL;
		type = get16(frame + off);
	}
	off += 2;
	if (type != ETHERTYPE_IPV4 && type != ETHERTYPE_IPV6)
		return -EPROTONOSUPPORT;
	int rc = uroce_frame_parse_ip(frame + off, len - off, out);
	if (rc == 0 && (out->family == AF_INET) != (type == ETHERTYPE_IPV4))
		return -EINVAL; /* EtherType and IP version disagree */
	return rc;
}

/* RFC 1071 ones'-complement sum, continued from @sum. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	for (; n > 1; p += 2, n -= 2)
		sum += get16(p);
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

long uroce_frame_build_eth(uint8_t *buf, size_t cap, const struct uroce_frame_addr *a,
			   const uint8_t *payload, size_t payload_len)
{
	size_t iplen = a->family == AF_INET ? 20 : a->family == AF_INET6 ? IPV6_HLEN : 0;
	if (!iplen)
		return -EINVAL;
	size_t ulen = UDP_HLEN + payload_len;
	if (ulen > 0xFFFF || (a->family == AF_INET && ulen + 20 > 0xFFFF))
		return -EINVAL;
	size_t total = ETH_HLEN_ + iplen + ulen;
	if (total > cap)
		return -ENOSPC;

	uint8_t *eth = buf, *ip = buf + ETH_HLEN_, *udp = ip + iplen;
	memcpy(eth, a->dst_mac, 6);
	memcpy(eth + 6, a->src_mac, 6);
	put16(eth + 12, a->family == AF_INET ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6);
	uint8_t ttl = a->ttl ? a->ttl : 64;

	put16(udp, a->sport);
	put16(udp + 2, a->dport);
	put16(udp + 4, (uint16_t)ulen);
	put16(udp + 6, 0);
	memcpy(udp + UDP_HLEN, payload, payload_len);

	if (a->family == AF_INET) {
		memset(ip, 0, 20);
		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)(20 + ulen));
		put16(ip + 4, a->ip_id);
		put16(ip + 6, 0x4000); /* DF: RoCEv2 packets are never fragmented */
		ip[8] = ttl;
		ip[9] = IPPROTO_UDP;
		memcpy(ip + 12, &a->src.v4, 4);
		memcpy(ip + 16, &a->dst.v4, 4);
		put16(ip + 10, csum_fold(csum_add(0, ip, 20)));
	} else {
		memset(ip, 0, IPV6_HLEN);
		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)ulen);
		ip[6] = IPPROTO_UDP;
		ip[7] = ttl;
		memcpy(ip + 8, &a->src.v6, 16);
		memcpy(ip + 24, &a->dst.v6, 16);
		/* IPv6 UDP checksum over the pseudo-header (RFC 8200 8.1). */
		uint32_t sum = csum_add(0, ip + 8, 32);
		sum += (uint32_t)ulen + IPPROTO_UDP;
		sum = csum_add(sum, udp, ulen);
		uint16_t c = csum_fold(sum);
		put16(udp + 6, c ? c : 0xFFFF);
	}
	return (long)total;
}
