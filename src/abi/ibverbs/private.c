/* private.c — the IBVERBS_PRIVATE_34 interface, which only rdma-core's provider
 * libraries use.
 *
 * Debian's libmlx5.so.1 and libefa.so.1 are in the DT_NEEDED list of perftest, UCX
 * and libfabric, are linked -z now, and need these names (abi-compat §2.3).  They
 * never drive our devices: a provider recognises its own devices by the ops word at
 * +664 of struct verbs_device, which for ours points at uroce's marker.  So:
 *   verbs_register_driver_34  called from the providers' constructors: accepts and
 *                             ignores the registration (we do not load providers).
 *   __verbs_log               a no-op logger.
 *   verbs_allow_disassociate_destroy  the 1-byte data object libmlx5 reads.
 *   everything else           fails with EOPNOTSUPP (int: the errno value; pointer:
 *                             NULL + errno; void: nothing).
 * Parameter lists are irrelevant to the x86-64 calling convention for these stubs:
 * callers' arguments are ignored, so they are declared without them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/ibverbs/exports.h"

UROCE_EXPORT extern bool verbs_allow_disassociate_destroy;
UROCE_EXPORT bool verbs_allow_disassociate_destroy;

#define STUB_INT(name) \
	UROCE_EXPORT int name(void); \
	UROCE_EXPORT int name(void) { return EOPNOTSUPP; }
#define STUB_PTR(name) \
	UROCE_EXPORT void *name(void); \
	UROCE_EXPORT void *name(void) { errno = EOPNOTSUPP; return NULL; }
#define STUB_VOID(name) \
	UROCE_EXPORT void name(void); \
	UROCE_EXPORT void name(void) { }

struct verbs_device_ops;
UROCE_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops);
UROCE_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
	(void)ops;
}

struct verbs_context;
UROCE_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...);
UROCE_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
{
	(void)ctx;
	(void)level;
	(void)fmt;
}

/* No sysfs for uroce devices. */
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...);
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt, ...)
{
	(void)buf; (void)size; (void)sysfs_dev; (void)fnfmt;
	errno = ENOENT;
	return -1;
}

UROCE_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
UROCE_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	(void)link;
	return num_attrs;
}

STUB_INT(execute_ioctl)
STUB_PTR(_verbs_init_and_alloc_context)
STUB_PTR(verbs_open_device)
STUB_VOID(verbs_init_cq)
STUB_VOID(verbs_set_ops)
STUB_VOID(verbs_uninit_context)
STUB_INT(ibv_cmd_advise_mr)
STUB_INT(ibv_cmd_alloc_dm)
STUB_INT(ibv_cmd_alloc_mw)
STUB_INT(ibv_cmd_alloc_pd)
STUB_INT(ibv_cmd_attach_mcast)
STUB_INT(ibv_cmd_close_xrcd)
STUB_INT(ibv_cmd_create_ah)
STUB_INT(ibv_cmd_create_counters)
STUB_INT(ibv_cmd_create_cq)
STUB_INT(ibv_cmd_create_cq_ex)
STUB_INT(ibv_cmd_create_flow)
STUB_INT(ibv_cmd_create_flow_action_esp)
STUB_INT(ibv_cmd_create_qp)
STUB_INT(ibv_cmd_create_qp_ex)
STUB_INT(ibv_cmd_create_qp_ex2)
STUB_INT(ibv_cmd_create_rwq_ind_table)
STUB_INT(ibv_cmd_create_srq)
STUB_INT(ibv_cmd_create_srq_ex)
STUB_INT(ibv_cmd_create_wq)
STUB_INT(ibv_cmd_dealloc_mw)
STUB_INT(ibv_cmd_dealloc_pd)
STUB_INT(ibv_cmd_dereg_mr)
STUB_INT(ibv_cmd_destroy_ah)
STUB_INT(ibv_cmd_destroy_counters)
STUB_INT(ibv_cmd_destroy_cq)
STUB_INT(ibv_cmd_destroy_flow)
STUB_INT(ibv_cmd_destroy_flow_action)
STUB_INT(ibv_cmd_destroy_qp)
STUB_INT(ibv_cmd_destroy_rwq_ind_table)
STUB_INT(ibv_cmd_destroy_srq)
STUB_INT(ibv_cmd_destroy_wq)
STUB_INT(ibv_cmd_detach_mcast)
STUB_INT(ibv_cmd_free_dm)
STUB_INT(ibv_cmd_get_context)
STUB_INT(ibv_cmd_modify_cq)
STUB_INT(ibv_cmd_modify_flow_action_esp)
STUB_INT(ibv_cmd_modify_qp)
STUB_INT(ibv_cmd_modify_qp_ex)
STUB_INT(ibv_cmd_modify_srq)
STUB_INT(ibv_cmd_modify_wq)
STUB_INT(ibv_cmd_open_qp)
STUB_INT(ibv_cmd_open_xrcd)
STUB_INT(ibv_cmd_poll_cq)
STUB_INT(ibv_cmd_post_recv)
STUB_INT(ibv_cmd_post_send)
STUB_INT(ibv_cmd_post_srq_recv)
STUB_INT(ibv_cmd_query_context)
STUB_INT(ibv_cmd_query_device_any)
STUB_INT(ibv_cmd_query_mr)
STUB_INT(ibv_cmd_query_port)
STUB_INT(ibv_cmd_query_qp)
STUB_INT(ibv_cmd_query_srq)
STUB_INT(ibv_cmd_read_counters)
STUB_INT(ibv_cmd_reg_dm_mr)
STUB_INT(ibv_cmd_reg_dmabuf_mr)
STUB_INT(ibv_cmd_reg_mr)
STUB_INT(ibv_cmd_req_notify_cq)
STUB_INT(ibv_cmd_rereg_mr)
STUB_INT(ibv_cmd_resize_cq)
