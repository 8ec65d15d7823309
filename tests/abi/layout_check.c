/*
 * The rdma-core 44 structure layouts (x86_64) that the drop-in libraries and their
 * consumers depend on (docs/versioning.md).  Compiled against the installed headers; a
 * header that changes any of these sizes or offsets changes the ABI the drop-ins
 * implement, so this test fails and says which line moved.
 *
 * Expected numbers are the rdma-core 44 / Debian 12 x86_64 layout, i.e. the layout every
 * consumer binary on the system was compiled with.  Relations that must hold whatever the
 * numbers are (ibv_cq_ex repeating ibv_cq, the verbs_context "sz" word directly before
 * the embedded ibv_context, ibv_qp_ex starting with ibv_qp) are checked as relations.
 *
 * Prints every checked value, then "N passed, N failed"; exit status 1 on any mismatch.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int passed, failed;

static void check(const char *what, size_t got, size_t want)
{
	if (got == want) {
		passed++;
		printf("ok   %-52s %4zu\n", what, got);
	} else {
		failed++;
		printf("FAIL %-52s %4zu (rdma-core 44: %zu)\n", what, got, want);
	}
}

#define SIZE(type, want) check("sizeof(" #type ")", sizeof(type), (want))
#define OFF(type, member, want) check("offsetof(" #type ", " #member ")", \
				      offsetof(type, member), (want))
/* The same member at the same offset in two structures that must share a prefix. */
#define SAME(a, b, member) check("offsetof(" #b ", " #member ") == in " #a, \
				 offsetof(b, member), offsetof(a, member))

int main(void)
{
#ifndef __x86_64__
	printf("SKIP: the expected layout is the x86_64 one\n");
	return 77;
#endif
	/* Context: a verbs_context is handed out as &vctx->context (abi-compat section 3.2). */
	SIZE(struct verbs_context, 648);
	OFF(struct verbs_context, sz, 312);
	OFF(struct verbs_context, context, 320);
	check("offsetof(verbs_context, context) == sz + 8 (sz right before)",
	      offsetof(struct verbs_context, context),
	      offsetof(struct verbs_context, sz) + sizeof(((struct verbs_context *)0)->sz));
	check("context is the last member of verbs_context",
	      offsetof(struct verbs_context, context) + sizeof(struct ibv_context),
	      sizeof(struct verbs_context));
	SIZE(struct ibv_context, 328);
	OFF(struct ibv_context, device, 0);
	OFF(struct ibv_context, ops, 8);
	OFF(struct ibv_context, abi_compat, 320);
	SIZE(struct ibv_context_ops, 256);

	/* The eight live slots of ibv_context_ops used by the static-inline verbs. */
	OFF(struct ibv_context_ops, alloc_mw, 56);
	OFF(struct ibv_context_ops, bind_mw, 64);
	OFF(struct ibv_context_ops, dealloc_mw, 72);
	OFF(struct ibv_context_ops, poll_cq, 88);
	OFF(struct ibv_context_ops, req_notify_cq, 96);
	OFF(struct ibv_context_ops, post_srq_recv, 160);
	OFF(struct ibv_context_ops, post_send, 200);
	OFF(struct ibv_context_ops, post_recv, 208);

	/* Device: libmlx5/libefa read the word right after it (+664) in verbs_device. */
	SIZE(struct ibv_device, 664);

	/* CQ: ibv_cq_ex must start with ibv_cq's layout (ibv_cq_ex_to_cq is a cast). */
	SIZE(struct ibv_cq, 128);
	SIZE(struct ibv_cq_ex, 288);
	SAME(struct ibv_cq, struct ibv_cq_ex, context);
	SAME(struct ibv_cq, struct ibv_cq_ex, channel);
	SAME(struct ibv_cq, struct ibv_cq_ex, cq_context);
	SAME(struct ibv_cq, struct ibv_cq_ex, handle);
	SAME(struct ibv_cq, struct ibv_cq_ex, cqe);
	SAME(struct ibv_cq, struct ibv_cq_ex, mutex);
	SAME(struct ibv_cq, struct ibv_cq_ex, cond);
	SAME(struct ibv_cq, struct ibv_cq_ex, comp_events_completed);
	SAME(struct ibv_cq, struct ibv_cq_ex, async_events_completed);

	/* QP: ibv_qp_ex embeds ibv_qp at offset 0. */
	SIZE(struct ibv_qp_ex, 352);
	OFF(struct ibv_qp_ex, qp_base, 0);

	/* Sizes consumers pass into size-aware calls. */
	SIZE(struct ibv_port_attr, 52);
	/* The exported ibv_query_port writes only the 48 bytes before port_cap_flags2. */
	OFF(struct ibv_port_attr, port_cap_flags2, 48);
	SIZE(struct ibv_device_attr, 232);
	SIZE(struct ibv_device_attr_ex, 400);
	SIZE(struct ibv_gid_entry, 32);

	/* librdmacm objects consumers read directly. */
	SIZE(struct rdma_event_channel, 4);
	OFF(struct rdma_event_channel, fd, 0);
	SIZE(struct rdma_cm_id, 416);
	OFF(struct rdma_cm_id, verbs, 0);
	OFF(struct rdma_cm_id, channel, 8);
	OFF(struct rdma_cm_id, context, 16);
	OFF(struct rdma_cm_id, qp, 24);
	OFF(struct rdma_cm_id, route, 32);
	OFF(struct rdma_cm_id, ps, 344);
	OFF(struct rdma_cm_id, port_num, 348);
	OFF(struct rdma_cm_id, event, 352);
	OFF(struct rdma_cm_id, send_cq_channel, 360);
	OFF(struct rdma_cm_id, send_cq, 368);
	OFF(struct rdma_cm_id, recv_cq_channel, 376);
	OFF(struct rdma_cm_id, recv_cq, 384);
	OFF(struct rdma_cm_id, srq, 392);
	OFF(struct rdma_cm_id, pd, 400);
	OFF(struct rdma_cm_id, qp_type, 408);
	SIZE(struct rdma_cm_event, 80);
	SIZE(struct rdma_addrinfo, 96);
	SIZE(struct rdma_conn_param, 24);
	SIZE(struct rdma_ud_param, 56);

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
