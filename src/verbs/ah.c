/* ah.c — address handles, and building one from a received completion.
 *
 * On RoCE every packet carries an L3 header, so an AH must be global (GRH) and
 * name a valid source GID (IBA Annex A16/A17).  For a UD receive, the 40 bytes
 * in front of the payload hold the GRH; for RoCEv2 over IPv4 the last 20 of
 * them hold the IPv4 header instead (the layout Linux RoCE devices use and UCX
 * reads, abi-compat §5.15).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs.h"
#include "wire/wire.h"

static bool gid_is_v4mapped(const uint8_t *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

	return !memcmp(g, prefix, sizeof(prefix));
}

int uroce_ah_create(struct uroce_pd *pd, struct ibv_ah_attr *attr, struct uroce_ah **out)
{
	struct uroce_context *ctx = uroce_ctx_from_ib(pd->pd.context);
	union ibv_gid sgid;
	struct uroce_ah *ah;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	if (attr->port_num != 1)
		return -EINVAL;
	if (!attr->is_global)
		return -EINVAL;
	ret = uroce_query_gid(ctx, 1, attr->grh.sgid_index, &sgid, NULL, NULL);
	if (ret)
		return -EINVAL;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_AH);
	if (ret)
		return ret;
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		uroce_obj_put(ctx->dev, UROCE_OBJ_AH);
		return -ENOMEM;
	}
	ah->ah.context = pd->pd.context;
	ah->ah.pd = &pd->pd;
	ah->attr = *attr;
	memcpy(ah->sgid, sgid.raw, 16);
	ah->ipv4 = gid_is_v4mapped(attr->grh.dgid.raw);
	atomic_fetch_add(&pd->usecnt, 1);
	*out = ah;
	return 0;
}

int uroce_ah_destroy(struct uroce_ah *ah)
{
	atomic_fetch_sub(&uroce_pd_from_ib(ah->ah.pd)->usecnt, 1);
	uroce_obj_put(uroce_ctx_from_ib(ah->ah.context)->dev, UROCE_OBJ_AH);
	free(ah);
	return 0;
}

/* Which header the 40-byte area holds: 4 (IPv4 in bytes 20..39), 6 (a GRH /
 * IPv6 header) or -1.  An IPv6 header whose bytes 20.. happen to look like an
 * IPv4 header is told apart by the IPv4 header checksum. */
static int grh_version(const uint8_t *g)
{
	const uint8_t *ip4 = g + 20;
	bool v4 = (ip4[0] >> 4) == 4 && (ip4[0] & 0xF) == 5;

	if ((g[0] >> 4) != 6)
		return v4 ? 4 : -1;
	return v4 && uroce_ipv4_csum(ip4) == 0 ? 4 : 6;
}

int uroce_ah_attr_from_wc(struct uroce_context *ctx, uint8_t port, const struct ibv_wc *wc,
			  const struct ibv_grh *grh, struct ibv_ah_attr *attr)
{
	const uint8_t *g = (const uint8_t *)grh;
	union ibv_gid sgid;
	int idx;

	memset(attr, 0, sizeof(*attr));
	attr->dlid = wc->slid;
	attr->sl = wc->sl;
	attr->src_path_bits = wc->dlid_path_bits;
	attr->port_num = port;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;    /* no L3 information: the caller's create_ah will refuse it */
	attr->is_global = 1;

	switch (grh_version(g)) {
	case 4: {
		const uint8_t *ip4 = g + 20;

		/* Our GID is the packet's destination address; the peer's is its source. */
		if ((ip4[16] & 0xF0) == 0xE0)
			return -EINVAL;      /* multicast destinations are not in the GID table */
		memset(sgid.raw, 0, 10);
		sgid.raw[10] = sgid.raw[11] = 0xFF;
		memcpy(&sgid.raw[12], ip4 + 16, 4);
		memset(attr->grh.dgid.raw, 0, 10);
		attr->grh.dgid.raw[10] = attr->grh.dgid.raw[11] = 0xFF;
		memcpy(&attr->grh.dgid.raw[12], ip4 + 12, 4);
		attr->grh.hop_limit = ip4[8];
		attr->grh.traffic_class = ip4[1];
		break;
	}
	case 6: {
		uint32_t vtf = be32toh(grh->version_tclass_flow);

		if (grh->dgid.raw[0] == 0xFF)
			return -EINVAL;
		/* RoCEv2's IPv6 header has next header UDP (17); RoCEv1's is an IB GRH. */
		if (grh->next_hdr != 17)
			return -EPROTONOSUPPORT;
		sgid = grh->dgid;
		attr->grh.dgid = grh->sgid;
		attr->grh.flow_label = vtf & 0xFFFFF;
		attr->grh.traffic_class = (vtf >> 20) & 0xFF;
		attr->grh.hop_limit = grh->hop_limit;
		break;
	}
	default:
		return -EPROTONOSUPPORT;
	}
	idx = uroce_find_gid(ctx, port, &sgid, UROCE_GID_TYPE_ROCE_V2);
	if (idx < 0)
		return idx;
	attr->grh.sgid_index = (uint8_t)idx;
	return 0;
}
