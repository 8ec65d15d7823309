/* daemon_unit.c — unit tests of uroced's pure parts: the QPN pool (qpn.c), the
 * GID table merge (devtable.c) and the checks on counters blocks (counters.c).
 * qpn.c is included to reach its statics. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/daemon/qpn.c"
#include "daemon/uroced.h"

/* Numbered edge cases of allocation order: cursor start -> first QPNs. */
static void qpn_start_edges(void **state)
{
	static const struct { uint32_t start, first, second; } rows[] = {
		/* 1 */ { 0, 2, 3 },                       /* 0 and 1 reserved */
		/* 2 */ { 1, 2, 3 },
		/* 3 */ { 2, 2, 3 },
		/* 4 */ { 0xfffffe, 0xfffffe, 0xffffff },  /* top of the 24-bit space */
		/* 5 */ { 0xffffff, 0xffffff, 2 },         /* wraps past 0 and 1 */
		/* 6 */ { 0x1000000, 2, 3 },               /* start is masked to 24 bits */
		/* 7 */ { 63, 63, 64 },                    /* word boundary */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct qpn_pool p;
		uint32_t a, b;

		assert_int_equal(uroce_qpn_pool_init(&p, rows[i].start), 0);
		assert_int_equal(uroce_qpn_alloc(&p, &a), 0);
		assert_int_equal(uroce_qpn_alloc(&p, &b), 0);
		assert_int_equal(a, rows[i].first);
		assert_int_equal(b, rows[i].second);
		uroce_qpn_pool_uninit(&p);
	}
}

static void qpn_free_rules(void **state)
{
	struct qpn_pool p;
	uint32_t q, r;

	(void)state;
	assert_int_equal(uroce_qpn_pool_init(&p, 100), 0);
	assert_int_equal(uroce_qpn_free(&p, 0), -EINVAL);
	assert_int_equal(uroce_qpn_free(&p, 1), -EINVAL);
	/* (volatile: gcc's -Warray-bounds cannot see that p.size guards the index) */
	volatile uint32_t too_big = 1u << 24;
	assert_int_equal(uroce_qpn_free(&p, too_big), -EINVAL);
	assert_int_equal(uroce_qpn_free(&p, 100), -ENOENT);
	assert_true(uroce_qpn_test(&p, 0) && uroce_qpn_test(&p, 1));
	assert_int_equal(uroce_qpn_alloc(&p, &q), 0);
	assert_int_equal(p.used, 1);
	assert_int_equal(uroce_qpn_free(&p, q), 0);
	assert_int_equal(p.used, 0);
	assert_int_equal(uroce_qpn_free(&p, q), -ENOENT);
	/* Not reused at once: the cursor has moved on. */
	assert_int_equal(uroce_qpn_alloc(&p, &r), 0);
	assert_int_not_equal(r, q);
	uroce_qpn_pool_uninit(&p);
}

/* Fill the whole space: every QPN 2..2^24-1 exactly once, then ENOSPC; a freed
 * QPN in the middle is found again by the wrapping scan. */
static void qpn_exhaust(void **state)
{
	struct qpn_pool p;
	uint32_t q, n = 0;

	(void)state;
	assert_int_equal(uroce_qpn_pool_init(&p, 12345), 0);
	while (uroce_qpn_alloc(&p, &q) == 0) {
		assert_true(q >= 2 && q < (1u << 24));
		n++;
	}
	assert_int_equal(n, (1u << 24) - 2);
	assert_int_equal(uroce_qpn_alloc(&p, &q), -ENOSPC);
	for (uint32_t i = 0; i < (1u << 24) / 64; i++)
		assert_true(p.bits[i] == ~0ull);
	assert_int_equal(uroce_qpn_free(&p, 777), 0);
	assert_int_equal(uroce_qpn_alloc(&p, &q), 0);
	assert_int_equal(q, 777);
	uroce_qpn_pool_uninit(&p);
}

/* GID merge is in devtable.c; declared in uroced.h. */
static void gid(uint8_t g[16], uint8_t last)
{
	memset(g, 0, 16);
	g[0] = 0xfd;
	g[15] = last;
}

static void gid_merge_keeps_indices(void **state)
{
	struct uroce_dev_info info;
	uint8_t set[3][16];

	(void)state;
	memset(&info, 0, sizeof(info));
	gid(set[0], 1);
	gid(set[1], 2);
	gid(set[2], 3);
	assert_int_equal(uroce_gid_merge(&info, (const uint8_t (*)[16])set, 3), 1);
	assert_int_equal(info.num_gids, 3);
	assert_int_equal(info.gids[1].gid[15], 2);
	assert_int_equal(info.gids[1].type, UROCE_GID_TYPE_ROCE_V2);
	/* Same set: no change. */
	assert_int_equal(uroce_gid_merge(&info, (const uint8_t (*)[16])set, 3), 0);
	/* Address 1 goes: index 0 becomes a hole, 2 and 3 stay at 1 and 2. */
	assert_int_equal(uroce_gid_merge(&info, (const uint8_t (*)[16])&set[1], 2), 1);
	assert_false(info.gids[0].valid);
	assert_int_equal(info.gids[1].gid[15], 2);
	assert_int_equal(info.gids[2].gid[15], 3);
	assert_int_equal(info.num_gids, 3);
	/* A new address fills the first hole. */
	gid(set[0], 9);
	assert_int_equal(uroce_gid_merge(&info, (const uint8_t (*)[16])set, 3), 1);
	assert_true(info.gids[0].valid);
	assert_int_equal(info.gids[0].gid[15], 9);
	/* The last one goes: num_gids shrinks. */
	assert_int_equal(uroce_gid_merge(&info, (const uint8_t (*)[16])set, 2), 1);
	assert_int_equal(info.num_gids, 2);
	/* Everything goes. */
	assert_int_equal(uroce_gid_merge(&info, NULL, 0), 1);
	assert_int_equal(info.num_gids, 0);
}

static void gid_merge_table_full(void **state)
{
	struct uroce_dev_info info;
	uint8_t set[UROCE_MAX_GIDS + 4][16];

	(void)state;
	memset(&info, 0, sizeof(info));
	for (unsigned i = 0; i < UROCE_MAX_GIDS + 4; i++)
		gid(set[i], (uint8_t)i);
	uroce_gid_merge(&info, (const uint8_t (*)[16])set, UROCE_MAX_GIDS + 4);
	assert_int_equal(info.num_gids, UROCE_MAX_GIDS);
	assert_int_equal(info.gids[UROCE_MAX_GIDS - 1].gid[15], UROCE_MAX_GIDS - 1);
}

/* Counters blocks come from untrusted processes: numbered cases of what
 * uroced_cnt_register (counters.c) must refuse or accept. */
static int cnt_memfd(uint32_t magic, uint32_t n_ctx, uint32_t n_qp, uint32_t n_slots, size_t size,
		     int seals)
{
	struct uroce_cnt_hdr h = { .magic = magic, .version = UROCE_CNT_VERSION,
				   .n_ctx = n_ctx, .n_qp = n_qp, .n_slots = n_slots, .size = size };
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	if (seals)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static void cnt_register_rules(void **state)
{
	uint64_t ok = uroce_cnt_size(2, 3, 8);
	static const struct {
		uint32_t magic, n_ctx, n_qp, n_slots;
		int size_delta, seals, want;
	} rows[] = {
		/* 1 */ { UROCE_CNT_MAGIC, 2, 3, 8, 0, F_SEAL_SHRINK, 0 },
		/* 2 */ { UROCE_CNT_MAGIC, 2, 3, 8, 0, 0, -EINVAL },              /* not sealed */
		/* 3 */ { UROCE_CNT_MAGIC, 2, 3, 8, 0, F_SEAL_GROW, -EINVAL },    /* can shrink */
		/* 4 */ { 0x12345678, 2, 3, 8, 0, F_SEAL_SHRINK, -EINVAL },       /* magic */
		/* 5 */ { UROCE_CNT_MAGIC, 2, 3, 9, 0, F_SEAL_SHRINK, -EINVAL },  /* slots beyond size */
		/* 6 */ { UROCE_CNT_MAGIC, UROCE_CNT_MAX + 1, 3, 8, 4096, F_SEAL_SHRINK, -EINVAL }, /* > CNT_MAX */
		/* 7 */ { UROCE_CNT_MAGIC, 2, 3, 8, 4096, F_SEAL_SHRINK, 0 },     /* larger file is fine */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct uroce_cnt_map cd;
		int fd = cnt_memfd(rows[i].magic, rows[i].n_ctx, rows[i].n_qp, rows[i].n_slots,
				   (size_t)ok + (size_t)rows[i].size_delta, rows[i].seals);

		memset(&cd, 0, sizeof(cd));
		assert_int_equal(uroced_cnt_register(&cd, fd), rows[i].want);
		assert_true(fcntl(fd, F_GETFD) < 0);  /* consumed either way */
		assert_int_equal(cd.map != NULL, rows[i].want == 0);
		if (cd.map) {
			assert_int_equal(cd.n_slots, rows[i].n_slots);
			uroced_cnt_unmap(&cd);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(qpn_start_edges),
		cmocka_unit_test(qpn_free_rules),
		cmocka_unit_test(qpn_exhaust),
		cmocka_unit_test(gid_merge_keeps_indices),
		cmocka_unit_test(gid_merge_table_full),
		cmocka_unit_test(cnt_register_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
