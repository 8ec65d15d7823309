/* unit.c — internals of src/verbs that the public API cannot reach yet (the
 * transport will): the memory-key table, the memory-window bind rules, MR
 * deregistration with bound windows, and the CQ ring's overrun and solicited
 * arming.  No daemon: the context is assembled by hand. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "verbs/verbs.h"
#include "vt.h"

static struct uroce_device fake_dev;

static struct uroce_context *fake_context(void)
{
	struct uroce_context *ctx = calloc(1, sizeof(*ctx));
	int fds[2];

	CHECK(ctx);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	uroce_list_init(&ctx->async_queue);
	uroce_list_init(&ctx->qps);
	ctx->dev = &fake_dev;   /* the objects' counts (verbs/limits.c) */
	CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
	ctx->vctx.context.async_fd = fds[0];
	ctx->async_wfd = fds[1];
	ctx->vctx.context.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	return ctx;
}

static void test_keys(void)
{
	static uint32_t keys[5000];
	int dummy[2];
	uint32_t k;

	for (int i = 0; i < 5000; i++) {
		CHECK(uroce_key_alloc(UROCE_KEY_MR, &dummy[0], &keys[i]) == 0);
		CHECK(keys[i] >> 8 != 0);
	}
	for (int i = 0; i < 5000; i += 7)
		for (int j = i + 1; j < 5000; j += 13)
			CHECK(keys[i] != keys[j]);
	CHECK(uroce_key_lookup(keys[10], UROCE_KEY_MR) == &dummy[0]);
	CHECK(uroce_key_lookup(keys[10], UROCE_KEY_MW) == NULL);     /* wrong kind */
	CHECK(uroce_key_lookup(keys[10] ^ 1, UROCE_KEY_MR) == NULL); /* wrong variant */
	CHECK(uroce_key_lookup(0, UROCE_KEY_MR) == NULL);
	CHECK(uroce_key_lookup(0xFFFFFF00u, UROCE_KEY_MR) == NULL);  /* index never used */
	uroce_key_free(keys[10]);
	CHECK(uroce_key_lookup(keys[10], UROCE_KEY_MR) == NULL);     /* stale */
	for (int i = 0; i < 5000; i++)
		if (i != 10)
			uroce_key_free(keys[i]);
	/* A reused slot never gives back the same key. */
	CHECK(uroce_key_alloc(UROCE_KEY_MW, &dummy[1], &k) == 0);
	for (int i = 0; i < 5000; i++)
		CHECK(k != keys[i] || (k >> 8) != (keys[i] >> 8));
	CHECK(uroce_key_lookup(k, UROCE_KEY_MW) == &dummy[1]);
	uroce_key_free(k);
}

static void test_mw_rules(struct uroce_context *ctx)
{
	static char buf[4096];
	struct uroce_pd *pd, *pd2;
	struct uroce_mr *mr, *mr_nobind, *mr_ro, *mr_pd2;
	struct uroce_mw *mw1, *mw2, *mw1_pd2, *mw2_pd2;
	struct ibv_mw_bind_info bi;
	const uintptr_t b = (uintptr_t)buf;
	const unsigned full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;

	CHECK(uroce_pd_alloc(ctx, &pd) == 0 && uroce_pd_alloc(ctx, &pd2) == 0);
	CHECK(uroce_mr_reg(pd, buf, sizeof(buf), b, full, &mr) == 0);
	CHECK(uroce_mr_reg(pd, buf, sizeof(buf), b, IBV_ACCESS_LOCAL_WRITE, &mr_nobind) == 0);
	CHECK(uroce_mr_reg(pd, buf, sizeof(buf), b, IBV_ACCESS_MW_BIND, &mr_ro) == 0);
	CHECK(uroce_mr_reg(pd2, buf, sizeof(buf), b, full, &mr_pd2) == 0);
	CHECK(uroce_mw_alloc(pd, IBV_MW_TYPE_1, &mw1) == 0 && uroce_mw_alloc(pd, IBV_MW_TYPE_2, &mw2) == 0);
	CHECK(uroce_mw_alloc(pd2, IBV_MW_TYPE_1, &mw1_pd2) == 0 && uroce_mw_alloc(pd2, IBV_MW_TYPE_2, &mw2_pd2) == 0);

	/* The rule table of pd_mr.c, one row each; the QP is of pd unless said. */
	{
		static const unsigned RW = IBV_ACCESS_REMOTE_WRITE, RR = IBV_ACCESS_REMOTE_READ,
				      LW = IBV_ACCESS_LOCAL_WRITE, ZB = IBV_ACCESS_ZERO_BASED;
		const struct {
			struct uroce_mw *mw;
			struct uroce_pd *qp_pd;
			struct uroce_mr *mr;
			uint64_t addr, len;
			unsigned acc;
			int want;
		} rows[] = {
			{ mw1, pd, mr, b + 16, 64, RW, 0 },
			{ mw1, pd, mr, b + 16, 64, LW | RW, 0 },                 /* local rights ignored */
			{ mw2, pd, mr, b + 16, 64, LW | RW | IBV_ACCESS_MW_BIND, 0 },
			{ mw2, pd, mr, b + 16, 64, RW | IBV_ACCESS_OPTIONAL_FIRST, 0 },
			{ mw2, pd, mr, b + 16, 64, RW | IBV_ACCESS_ON_DEMAND, -EINVAL },
			{ mw1_pd2, pd, mr_pd2, b, 64, RW, -EINVAL },           /* window of another PD than the QP */
			{ mw2_pd2, pd, mr_pd2, b, 64, RW, -EINVAL },           /* C10-72 */
			{ mw2_pd2, pd2, mr_pd2, b, 64, RW, 0 },
			{ mw1, pd, mr, b, 64, RW | ZB, -EINVAL },              /* o10-36.2.2 */
			{ mw2, pd, mr, b, 64, RW | ZB, 0 },
			{ mw2, pd, mr, b, 0, RW, -EINVAL },                    /* o10-37.2.40 */
			{ mw2, pd, NULL, 0, 0, 0, -EINVAL },
			{ mw1, pd, NULL, 0, 0, 0, 0 },                         /* type 1 unbind */
			{ mw1, pd, mr_nobind, 0, 0, 0, 0 },                    /* ... checks no MR */
			{ mw1, pd, NULL, b, 64, RW, -EINVAL },
			{ mw1, pd, mr_pd2, b, 64, RW, -EPERM },                /* MR of another PD */
			{ mw2, pd, mr_pd2, b, 64, RW, -EPERM },
			{ mw1, pd, mr_nobind, b, 64, RR, -EINVAL },            /* C10-73 */
			{ mw2, pd, mr_ro, b, 64, RW, -EINVAL },                /* C10-74 */
			{ mw2, pd, mr_ro, b, 64, IBV_ACCESS_REMOTE_ATOMIC, -EINVAL },
			{ mw2, pd, mr_ro, b, 64, RR, 0 },
			{ mw1, pd, mr, b, 4096, RW, 0 },                       /* C10-75 */
			{ mw1, pd, mr, b + 4090, 7, RW, -EINVAL },
			{ mw1, pd, mr, b - 1, 1, RW, -EINVAL },
			{ mw2, pd, mr, b, UINT64_MAX, RW, -EINVAL },
			{ mw2, pd, mr, b + 4096, 1, RW | ZB, -EINVAL },        /* zero based: still inside */
		};

		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
			bi = (struct ibv_mw_bind_info){ .mr = rows[i].mr ? &rows[i].mr->mr : NULL,
							.addr = rows[i].addr, .length = rows[i].len,
							.mw_access_flags = rows[i].acc };
			if (uroce_mw_bind_check(rows[i].mw, &rows[i].qp_pd->pd, &bi) != rows[i].want) {
				fprintf(stderr, "bind rule row %zu: %d, want %d\n", i,
					uroce_mw_bind_check(rows[i].mw, &rows[i].qp_pd->pd, &bi), rows[i].want);
				CHECK(0);
			}
		}
	}

	/* Executing: the window takes the key tag and the remote rights only; a bound type 2
	 * window is not bound again until it is unbound (o10-37.2.30); a type 1 window is. */
	bi = (struct ibv_mw_bind_info){ .mr = &mr->mr, .addr = b + 16, .length = 64,
					.mw_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	{
		uint32_t k2 = mw2->key, k1 = mw1->key;

		CHECK(uroce_mw_bind_exec(mw2, &pd->pd, 7, &bi, k2 + 1) == 0);
		CHECK(mw2->bound_mr == mr && mw2->access == IBV_ACCESS_REMOTE_WRITE && mw2->qpn == 7);
		CHECK(mw2->key == ((k2 & ~0xFFu) | ((k2 + 1) & 0xFFu)) && mw2->mw.rkey == mw2->key);
		CHECK(uroce_key_lookup(mw2->key, UROCE_KEY_MW) == mw2 && uroce_key_lookup(k2, UROCE_KEY_MW) == NULL);
		CHECK(uroce_mw_bind_exec(mw2, &pd->pd, 7, &bi, k2 + 2) == -EINVAL);
		CHECK(mw2->bound_mr == mr && (mw2->key & 0xFF) == ((k2 + 1) & 0xFF));   /* unchanged */
		CHECK(atomic_load(&mr->num_mw) == 1);
		uroce_mw_unbind(mw2);
		CHECK(atomic_load(&mr->num_mw) == 0 && !mw2->bound_mr);
		CHECK(uroce_mw_bind_exec(mw2, &pd->pd, 7, &bi, k2 + 2) == 0);
		CHECK(uroce_mw_bind_exec(mw1, &pd->pd, 0, &bi, k1 + 1) == 0);
		CHECK(uroce_mw_bind_exec(mw1, &pd->pd, 0, &bi, k1 + 2) == 0);
		CHECK(mw1->qpn == 0 && atomic_load(&mr->num_mw) == 2);
	}

	/* A window bound to an MR keeps the MR registered as it is. */
	CHECK(uroce_mr_dereg(mr) == -EBUSY);
	CHECK(uroce_mr_rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) == -EBUSY);
	CHECK(uroce_mw_dealloc(mw1) == 0 && uroce_mw_dealloc(mw2) == 0);
	CHECK(atomic_load(&mr->num_mw) == 0);
	CHECK(uroce_mr_dereg(mr) == 0);
	CHECK(uroce_mw_dealloc(mw1_pd2) == 0 && uroce_mw_dealloc(mw2_pd2) == 0);
	CHECK(uroce_mr_dereg(mr_nobind) == 0 && uroce_mr_dereg(mr_ro) == 0 && uroce_mr_dereg(mr_pd2) == 0);
	CHECK(uroce_pd_dealloc(pd) == 0 && uroce_pd_dealloc(pd2) == 0);
}

static int pending_events(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0);
}

static void test_cq_ring(struct uroce_context *ctx)
{
	struct uroce_comp_channel *ch;
	struct uroce_cq *cq;
	struct ibv_cq_init_attr_ex a = { .cqe = 4 };
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV }, out[8];
	struct ibv_async_event ev;
	struct ibv_cq *got;

	CHECK(uroce_comp_channel_create(ctx, &ch) == 0);
	CHECK(fcntl(ch->ch.fd, F_SETFL, O_NONBLOCK) == 0);
	a.channel = &ch->ch;
	CHECK(uroce_cq_create(ctx, &a, &cq) == 0);
	CHECK(cq->cqx.cqe == 4);

	/* Solicited-only arm: an unsolicited success does not fire, a solicited one does. */
	CHECK(uroce_cq_arm(cq, 1) == 0);
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	CHECK(pending_events(ch->ch.fd) == 0);
	CHECK(uroce_cq_push(cq, &wc, true) == 0);
	CHECK(pending_events(ch->ch.fd) == 1);
	CHECK(uroce_comp_channel_get(ch, &got) == 0 && got == (struct ibv_cq *)&cq->cqx);
	CHECK(uroce_comp_channel_get(ch, &got) == -EAGAIN);
	/* An error completion fires a solicited arm too (IBA 11.4.2.2). */
	CHECK(uroce_cq_arm(cq, 1) == 0);
	wc.status = IBV_WC_LOC_LEN_ERR;
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	CHECK(uroce_comp_channel_get(ch, &got) == 0);
	/* A NEXT arm is not weakened by a later solicited arm. */
	CHECK(uroce_cq_arm(cq, 0) == 0 && uroce_cq_arm(cq, 1) == 0);
	wc.status = IBV_WC_SUCCESS;
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	CHECK(uroce_comp_channel_get(ch, &got) == 0);
	pthread_mutex_lock(&cq->cqx.mutex);
	cq->cqx.comp_events_completed += 3;     /* what ibv_ack_cq_events does */
	pthread_mutex_unlock(&cq->cqx.mutex);

	/* Four entries in a 4-entry CQ; the fifth overruns: CQ error event. */
	CHECK(uroce_cq_push(cq, &wc, false) == -ENOSPC);
	CHECK(uroce_async_event_get(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == (struct ibv_cq *)&cq->cqx);
	uroce_async_event_ack(&ev);
	CHECK(uroce_cq_poll(cq, 8, out) == 4);
	CHECK(out[2].status == IBV_WC_LOC_LEN_ERR);
	/* Resize keeps the order of what is queued. */
	wc.wr_id = 1;
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	wc.wr_id = 2;
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	CHECK(uroce_cq_resize(cq, 1) == -EINVAL);   /* fewer than queued */
	CHECK(uroce_cq_resize(cq, 50) == 0 && cq->cqx.cqe >= 50);
	CHECK(uroce_cq_poll(cq, 8, out) == 2 && out[0].wr_id == 1 && out[1].wr_id == 2);

	/* An undelivered event of a destroyed CQ is withdrawn from the channel. */
	CHECK(uroce_cq_arm(cq, 0) == 0);
	CHECK(uroce_cq_push(cq, &wc, false) == 0);
	CHECK(pending_events(ch->ch.fd) == 1);
	CHECK(uroce_comp_channel_destroy(ch) == -EBUSY);
	CHECK(uroce_cq_destroy(cq) == 0);
	CHECK(uroce_comp_channel_get(ch, &got) == -EAGAIN);
	CHECK(uroce_comp_channel_destroy(ch) == 0);
}

/* The transport's consumer side of an SRQ: order, and the one-shot limit event. */
static void test_srq_pop(struct uroce_context *ctx)
{
	struct uroce_pd *pd;
	struct uroce_srq *srq;
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = 8, .max_sge = 2, .srq_limit = 3 } };
	struct ibv_sge sge[2] = { { .addr = 0x1000, .length = 64, .lkey = 7 }, { .addr = 0x2000, .length = 8, .lkey = 9 } };
	struct ibv_recv_wr wr = { .sg_list = sge, .num_sge = 2 }, *bad;
	union { struct uroce_wqe w; char room[sizeof(struct uroce_wqe) + 2 * sizeof(struct ibv_sge)]; } out;
	struct ibv_async_event ev;

	CHECK(uroce_pd_alloc(ctx, &pd) == 0);
	CHECK(uroce_srq_create(pd, &ia, &srq) == 0);
	for (int i = 0; i < 5; i++) {
		wr.wr_id = 10 + i;
		CHECK(uroce_srq_post_recv(srq, &wr, &bad) == 0);
	}
	CHECK(uroce_srq_pop(srq, &out.w) == 0);   /* 4 left: above the limit */
	CHECK(out.w.wr_id == 10 && out.w.num_sge == 2 && out.w.sge[1].lkey == 9 && out.w.sge[0].length == 64);
	CHECK(uroce_async_event_get(ctx, &ev) == -EAGAIN);
	CHECK(uroce_srq_pop(srq, &out.w) == 0);   /* 3 left: not below 3 */
	CHECK(uroce_async_event_get(ctx, &ev) == -EAGAIN);
	CHECK(uroce_srq_pop(srq, &out.w) == 0);   /* 2 left: below the limit */
	CHECK(out.w.wr_id == 12);
	CHECK(uroce_async_event_get(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == &srq->srq);
	uroce_async_event_ack(&ev);
	CHECK(srq->srq_limit == 0);                /* disarmed */
	CHECK(uroce_srq_pop(srq, &out.w) == 0 && uroce_srq_pop(srq, &out.w) == 0 && out.w.wr_id == 14);
	CHECK(uroce_async_event_get(ctx, &ev) == -EAGAIN);
	CHECK(uroce_srq_pop(srq, &out.w) == -ENOENT);
	CHECK(uroce_srq_destroy(srq) == 0);
	CHECK(uroce_pd_dealloc(pd) == 0);
}

static void test_mtu(void)
{
	CHECK(uroce_mtu_from_netdev(65536) == IBV_MTU_4096);
	CHECK(uroce_mtu_from_netdev(9000) == IBV_MTU_4096);
	CHECK(uroce_mtu_from_netdev(4096 + 80) == IBV_MTU_4096);
	CHECK(uroce_mtu_from_netdev(4096 + 79) == IBV_MTU_2048);
	CHECK(uroce_mtu_from_netdev(1500) == IBV_MTU_1024);
	CHECK(uroce_mtu_from_netdev(1024 + 80) == IBV_MTU_1024);
	CHECK(uroce_mtu_from_netdev(1103) == IBV_MTU_512);
	CHECK(uroce_mtu_from_netdev(576) == IBV_MTU_256);
	CHECK(uroce_mtu_from_netdev(0) == IBV_MTU_256);
}

int main(void)
{
	struct uroce_context *ctx = fake_context();

	test_keys();
	test_mw_rules(ctx);
	test_cq_ring(ctx);
	test_srq_pop(ctx);
	test_mtu();
	close(ctx->vctx.context.async_fd);
	close(ctx->async_wfd);
	free(ctx);
	return vt_done("verbs_unit");
}
