/* providers.c — Debian's provider libraries loaded next to our libibverbs, as
 * perftest, UCX and libfabric do (they list libmlx5/libefa in DT_NEEDED): loading
 * must resolve every IBVERBS_PRIVATE_34 import (their constructors call
 * verbs_register_driver_34), and their entry points must recognise that our
 * devices are not theirs (the +664 ops word) and fail cleanly instead of crashing
 * (efadv logs through verbs_get_ctx(), which needs our abi_compat marker).
 * A missing ibverbs-providers is a failure (scripts/deps.sh test installs it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>

#include "vt.h"

int main(void)
{
	struct ibv_context *ctx = vt_open_first();
	void *mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
	void *efa = dlopen("libefa.so.1", RTLD_NOW | RTLD_LOCAL);
	bool (*is_supported)(struct ibv_device *);
	void *(*open_dv)(struct ibv_device *, void *);
	int (*mlx5_query)(struct ibv_context *, void *);
	int (*efa_query)(struct ibv_context *, void *, uint32_t);
	char attr[1024] = { 0 };

	if (!mlx5 || !efa) {
		printf("FAIL: provider libraries (package ibverbs-providers): %s\n", dlerror());
		return 1;
	}
	is_supported = (bool (*)(struct ibv_device *))dlsym(mlx5, "mlx5dv_is_supported");
	open_dv = (void *(*)(struct ibv_device *, void *))dlsym(mlx5, "mlx5dv_open_device");
	mlx5_query = (int (*)(struct ibv_context *, void *))dlsym(mlx5, "mlx5dv_query_device");
	efa_query = (int (*)(struct ibv_context *, void *, uint32_t))dlsym(efa, "efadv_query_device");
	CHECK(is_supported && open_dv && mlx5_query && efa_query);

	CHECK(!is_supported(ctx->device));
	errno = 0;
	CHECK(open_dv(ctx->device, attr) == NULL);
	CHECK(mlx5_query(ctx, attr) == EOPNOTSUPP);
	CHECK(efa_query(ctx, attr, 32) == EOPNOTSUPP);
	/* Our verbs still work with the providers loaded. */
	{
		struct ibv_pd *pd = ibv_alloc_pd(ctx);

		CHECK(pd);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	dlclose(efa);
	dlclose(mlx5);
	CHECK_RET(ibv_close_device(ctx), 0);
	return vt_done("verbs_providers");
}
