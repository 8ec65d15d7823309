/* exports.h — what the drop-in libibverbs exports beyond <infiniband/verbs.h>.
 *
 * rdma-core declares these in headers Debian does not install (driver.h,
 * marshall.h); consumers bind to them by name and version (libibverbs.map), so we
 * declare them here with the rdma-core 44 signatures.  UROCE_EXPORT marks a
 * definition as visible: the library is built with -fvisibility=hidden and the
 * version script decides the version node.
 */
#ifndef UROCE_ABI_IBVERBS_EXPORTS_H
#define UROCE_ABI_IBVERBS_EXPORTS_H

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdbool.h>

#define UROCE_EXPORT __attribute__((visibility("default")))

const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum ibv_gid_type *type);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
/* rdma-core 44 exports these but no installed header declares them. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

#endif
