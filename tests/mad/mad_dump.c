/* mad_dump — decode every MAD in captures and print its fields under Wireshark's field
 * names, one "name=value" line each, so golden_tshark.py can compare them with what
 * tshark shows.  Also checks that encode(decode(mad)) reproduces each MAD byte for byte.
 *
 *   mad_dump FILE.pcap                print "frame=N" blocks; exit 1 on any failure
 *   mad_dump --seeds DIR FILE.pcap... also write each MAD to DIR/<file>-<frame>.mad
 *
 * Integers print in decimal, byte arrays as "hex:" + lowercase hex, addresses as tshark
 * shows them; a name may repeat when Wireshark uses it twice.  Lines starting with '#' are comments (the one-line description).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/mad.h"
#include "mad_pcap.h"

struct map {
	const char *ours, *ws;
};

/* Our field name -> Wireshark 4.0 field name (packet-infiniband.c). */
static const struct map req_map[] = {
	{ "local_comm_id", "infiniband.cm.req" },
	{ "service_id", "infiniband.cm.req.serviceid" },
	{ "local_ca_guid", "infiniband.cm.req.localcaguid" },
	{ "local_qkey", "infiniband.cm.req.localqkey" },
	{ "local_qpn", "infiniband.cm.req.localqpn" },
	{ "responder_resources", "infiniband.cm.req.responderres" },
	{ "local_eecn", "infiniband.cm.req.localeecn" },
	{ "initiator_depth", "infiniband.cm.req.initdepth" },
	{ "remote_eecn", "infiniband.cm.req.remoteeecn" },
	{ "remote_cm_response_timeout", "infiniband.cm.req.remoteresptout" },
	{ "transport_service_type", "infiniband.cm.req.transpsvctype" },
	{ "end_to_end_flow_control", "infiniband.cm.req.e2eflowctrl" },
	{ "starting_psn", "infiniband.cm.req.startpsn" },
	{ "local_cm_response_timeout", "infiniband.cm.req.localresptout" },
	{ "retry_count", "infiniband.cm.req.retrcount" },
	{ "pkey", "infiniband.cm.req.pkey" },
	{ "path_mtu", "infiniband.cm.req.pppmtu" },
	{ "rdc_exists", "infiniband.cm.req.rdcexist" },
	{ "rnr_retry_count", "infiniband.cm.req.rnrretrcount" },
	{ "max_cm_retries", "infiniband.cm.req.maxcmretr" },
	{ "srq", "infiniband.cm.req.srq" },
	{ "extended_transport_type", "infiniband.cm.req.ext_transport" },
	{ "primary.local_lid", "infiniband.cm.req.prim_locallid" },
	{ "primary.remote_lid", "infiniband.cm.req.prim_remotelid" },
	{ "primary.local_gid", "infiniband.cm.req.prim_localgid" },
	{ "primary.remote_gid", "infiniband.cm.req.prim_remotegid" },
	{ "primary.flow_label", "infiniband.cm.req.prim_flowlabel" },
	{ "primary.resv_fl", "infiniband.cm.req.prim_reserved0" },
	{ "primary.packet_rate", "infiniband.cm.req.prim_pktrate" },
	{ "primary.traffic_class", "infiniband.cm.req.prim_tfcclass" },
	{ "primary.hop_limit", "infiniband.cm.req.prim_hoplim" },
	{ "primary.sl", "infiniband.cm.req.prim_sl" },
	{ "primary.subnet_local", "infiniband.cm.req.prim_subnetlocal" },
	{ "primary.resv_sl", "infiniband.cm.req.prim_reserved1" },
	{ "primary.local_ack_timeout", "infiniband.cm.req.prim_localacktout" },
	{ "primary.resv_ack", "infiniband.cm.req.prim_reserved2" },
	{ "alternate.local_lid", "infiniband.cm.req.alt_locallid" },
	{ "alternate.remote_lid", "infiniband.cm.req.alt_remotelid" },
	{ "alternate.local_gid", "infiniband.cm.req.alt_localgid" },
	{ "alternate.remote_gid", "infiniband.cm.req.alt_remotegid" },
	{ "alternate.flow_label", "infiniband.cm.req.alt_flowlabel" },
	{ "alternate.resv_fl", "infiniband.cm.req.alt_reserved0" },
	{ "alternate.packet_rate", "infiniband.cm.req.alt_pktrate" },
	{ "alternate.traffic_class", "infiniband.cm.req.alt_tfcclass" },
	{ "alternate.hop_limit", "infiniband.cm.req.alt_hoplim" },
	{ "alternate.sl", "infiniband.cm.req.alt_sl" },
	{ "alternate.subnet_local", "infiniband.cm.req.alt_subnetlocal" },
	{ "alternate.resv_sl", "infiniband.cm.req.alt_reserved1" },
	{ "alternate.local_ack_timeout", "infiniband.cm.req.alt_localacktout" },
	/* Wireshark names byte 139's low 3 bits alt_reserved1 too (SAP bit + 2 reserved);
	 * printed from main() after the table walk. */
	{ "private_data", "infiniband.cm.req.private" },
	{ NULL, NULL },
};

static const struct map rep_map[] = {
	{ "local_comm_id", "infiniband.cm.rep" },
	{ "remote_comm_id", "infiniband.cm.rep.remotecommid" },
	{ "local_qkey", "infiniband.cm.rep.localqkey" },
	{ "local_qpn", "infiniband.cm.rep.localqpn" },
	{ "local_eecn", "infiniband.cm.rep.localeecn" },
	{ "starting_psn", "infiniband.cm.rep.startpsn" },
	{ "responder_resources", "infiniband.cm.rep.respres" },
	{ "initiator_depth", "infiniband.cm.rep.initdepth" },
	{ "target_ack_delay", "infiniband.cm.rep.tgtackdelay" },
	{ "failover_accepted", "infiniband.cm.rep.failoveracc" },
	{ "end_to_end_flow_control", "infiniband.cm.rep.e2eflowctrl" },
	{ "rnr_retry_count", "infiniband.cm.rep.rnrretrcount" },
	{ "srq", "infiniband.cm.rep.srq" },
	{ "resv27", "infiniband.cm.rep.reserved" },
	{ "local_ca_guid", "infiniband.cm.rep.localcaguid" },
	{ "private_data", "infiniband.cm.rep.private" },
	{ NULL, NULL },
};

static const struct map rtu_map[] = {
	{ "local_comm_id", "infiniband.cm.rtu.localcommid" },
	{ "remote_comm_id", "infiniband.cm.rtu.remotecommid" },
	{ "private_data", "infiniband.cm.rtu.private" },
	{ NULL, NULL },
};

static const struct map rej_map[] = {
	{ "local_comm_id", "infiniband.cm.rej.localcommid" },
	{ "remote_comm_id", "infiniband.cm.rej.remotecommid" },
	{ "message_rejected", "infiniband.cm.rej.msgrej" },
	{ "reject_info_length", "infiniband.cm.rej.rejinfolen" },
	{ "resv9", "infiniband.cm.rej.reserved1" },
	{ "reason", "infiniband.cm.rej.reason" },
	{ "ari", "infiniband.cm.rej.ari" },
	{ "private_data", "infiniband.cm.rej.private" },
	{ NULL, NULL },
};

static const struct map dreq_map[] = {
	{ "local_comm_id", "infiniband.cm.dreq.localcommid" },
	{ "remote_comm_id", "infiniband.cm.dreq.remotecommid" },
	{ "remote_qpn_eecn", "infiniband.cm.req.remoteqpneecn" }, /* sic, Wireshark's name */
	{ "private_data", "infiniband.cm.dreq.private" },
	{ NULL, NULL },
};

static const struct map drep_map[] = {
	{ "local_comm_id", "infiniband.cm.drsp.localcommid" },
	{ "remote_comm_id", "infiniband.cm.drsp.remotecommid" },
	{ "private_data", "infiniband.cm.drsp.private" },
	{ NULL, NULL },
};

static const struct map *map_for(uint16_t attr)
{
	switch (attr) {
	case UROCE_CM_ATTR_REQ: return req_map;
	case UROCE_CM_ATTR_REP: return rep_map;
	case UROCE_CM_ATTR_RTU: return rtu_map;
	case UROCE_CM_ATTR_REJ: return rej_map;
	case UROCE_CM_ATTR_DREQ: return dreq_map;
	case UROCE_CM_ATTR_DREP: return drep_map;
	default: return NULL; /* Wireshark 4.0 does not dissect MRA / SIDR / LAP / APR */
	}
}

static void print_hex(const char *name, const uint8_t *b, size_t n)
{
	printf("%s=hex:", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	putchar('\n');
}

static int is_v4mapped(const uint8_t *g)
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };
	return memcmp(g, pfx, 12) == 0;
}

static void print_ip(const char *name, int af, const uint8_t *a)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(af, a, s, sizeof(s));
	printf("%s=%s\n", name, s);
}

struct ctx {
	const struct uroce_cm_msg *m;
	const struct map *map;
};

static int print_field(void *arg, const struct uroce_cm_field_value *f)
{
	struct ctx *c = arg;
	const char *ws = NULL;
	char name[96];

	for (const struct map *e = c->map; e->ours; e++)
		if (strcmp(e->ours, f->name) == 0)
			ws = e->ws;
	if (!ws)
		return 0;
	if (c->m->hdr.attr_id == UROCE_CM_ATTR_REQ && f->bytes && f->len == 16 &&
	    strncmp(f->name, "primary.", 8) == 0) {
		/* Wireshark shows an IPv4-mapped primary GID in a separate _ipv4 field. */
		if (is_v4mapped(f->bytes)) {
			snprintf(name, sizeof(name), "%s_ipv4", ws);
			print_ip(name, AF_INET, f->bytes + 12);
		} else {
			print_ip(ws, AF_INET6, f->bytes);
		}
		return 0;
	}
	if (c->m->hdr.attr_id == UROCE_CM_ATTR_REQ && strcmp(f->name, "private_data") == 0 &&
	    uroce_cm_sid_is_ip(c->m->u.req.service_id)) {
		struct uroce_cma_hdr h;

		/* Annex A11 "IP CM" private data: Wireshark dissects it when the service ID
		 * has the IP CM prefix. */
		uroce_cma_hdr_decode(f->bytes, f->len, &h);
		printf("infiniband.cm.req.ip_cm.majv=%u\n", h.version >> 4);
		printf("infiniband.cm.req.ip_cm.minv=%u\n", h.version & 0xf);
		printf("infiniband.cm.req.ip_cm.ipv=%u\n", h.ip_version);
		printf("infiniband.cm.req.ip_cm.reserved=%u\n", h.resv);
		printf("infiniband.cm.req.ip_cm.sport=%u\n", h.port);
		if (h.ip_version == 4) {
			print_ip("infiniband.cm.req.ip_cm.sip4", AF_INET, h.src + 12);
			print_ip("infiniband.cm.req.ip_cm.dip4", AF_INET, h.dst + 12);
		} else {
			print_ip("infiniband.cm.req.ip_cm.sip6", AF_INET6, h.src);
			print_ip("infiniband.cm.req.ip_cm.dip6", AF_INET6, h.dst);
		}
		print_hex("infiniband.cm.req.ip_cm.private", f->bytes + UROCE_CMA_HDR_SIZE,
			  f->len - UROCE_CMA_HDR_SIZE);
		return 0;
	}
	if (f->bytes)
		print_hex(ws, f->bytes, f->len);
	else
		printf("%s=%" PRIu64 "\n", ws, f->value);
	return 0;
}

struct run {
	const char *seeds, *base;
	int failures;
};

static int on_mad(void *arg, unsigned frame, const uint8_t *mad, size_t len)
{
	struct run *r = arg;
	struct uroce_cm_msg m;
	uint8_t out[UROCE_MAD_SIZE];
	char line[512];
	int rc;

	printf("frame=%u\n", frame);
	if (r->seeds) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s-%u.mad", r->seeds, r->base, frame);
		f = fopen(path, "wb");
		if (!f || fwrite(mad, 1, len, f) != len) {
			fprintf(stderr, "cannot write %s\n", path);
			r->failures++;
		}
		if (f)
			fclose(f);
	}
	rc = uroce_mad_describe(mad, len, line, sizeof(line));
	printf("# %s\n", rc >= 0 ? line : "(describe failed)");
	if (rc < 0) {
		fprintf(stderr, "frame %u: describe: %s\n", frame, strerror(-rc));
		r->failures++;
	}
	rc = uroce_cm_decode(mad, len, &m);
	if (rc) {
		fprintf(stderr, "frame %u: uroce_cm_decode: %s\n", frame, strerror(-rc));
		r->failures++;
		return 0;
	}
	printf("infiniband.mad.baseversion=%u\n", m.hdr.base_version);
	printf("infiniband.mad.mgmtclass=%u\n", m.hdr.mgmt_class);
	printf("infiniband.mad.classversion=%u\n", m.hdr.class_version);
	printf("infiniband.mad.method=%u\n", m.hdr.method);
	printf("infiniband.mad.status=%u\n", m.hdr.status);
	printf("infiniband.mad.classspecific=%u\n", m.hdr.class_specific);
	printf("infiniband.mad.transactionid=%" PRIu64 "\n", m.hdr.tid);
	printf("infiniband.mad.attributeid=%u\n", m.hdr.attr_id);
	printf("infiniband.mad.attributemodifier=%u\n", m.hdr.attr_mod);
	print_hex("infiniband.mad.data", mad + UROCE_MAD_HDR_SIZE, len - UROCE_MAD_HDR_SIZE);
	if (m.hdr.attr_id == UROCE_CM_ATTR_REQ && uroce_cm_sid_is_ip(m.u.req.service_id)) {
		/* Annex A11.2 service ID: 5-byte prefix, protocol, port. */
		uint8_t sid[8];

		for (int k = 0; k < 8; k++)
			sid[k] = (uint8_t)(m.u.req.service_id >> (56 - 8 * k));
		print_hex("infiniband.cm.req.serviceid.prefix", sid, 5);
		printf("infiniband.cm.req.serviceid.protocol=%u\n", uroce_cm_sid_proto(m.u.req.service_id));
		printf("infiniband.cm.req.serviceid.dport=%u\n", uroce_cm_sid_port(m.u.req.service_id));
	}
	if (map_for(m.hdr.attr_id)) {
		struct ctx c = { &m, map_for(m.hdr.attr_id) };

		uroce_cm_foreach_field(&m, print_field, &c);
		if (m.hdr.attr_id == UROCE_CM_ATTR_REQ)
			printf("infiniband.cm.req.alt_reserved1=%u\n",
			       m.u.req.sap_supported << 2 | m.u.req.alternate.resv_ack);
		if (m.hdr.attr_id == UROCE_CM_ATTR_REJ)
			printf("infiniband.cm.rej.reserved0=%u\n", m.u.rej.resv8 & 3); /* WS shows 2 of 6 */
	}
	rc = uroce_cm_encode(&m, out, sizeof(out));
	if (rc != (int)UROCE_MAD_SIZE || len != UROCE_MAD_SIZE || memcmp(out, mad, len) != 0) {
		fprintf(stderr, "frame %u: encode(decode()) differs from the captured MAD (rc %d)\n",
			frame, rc);
		r->failures++;
	}
	putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	struct run r = { 0 };
	int i = 1, total = 0;

	if (argc > 2 && strcmp(argv[1], "--seeds") == 0) {
		r.seeds = argv[2];
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: mad_dump [--seeds DIR] FILE.pcap...\n");
		return 2;
	}
	for (; i < argc; i++) {
		const char *slash = strrchr(argv[i], '/');
		int n;

		r.base = slash ? slash + 1 : argv[i];
		n = mad_pcap_foreach(argv[i], on_mad, &r);
		if (n < 0)
			return 2;
		total += n;
	}
	fprintf(stderr, "mad_dump: %d MADs, %d failures\n", total, r.failures);
	return r.failures || total == 0 ? 1 : 0;
}
