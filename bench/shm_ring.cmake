# shm_ring: the shared-memory ceiling bench/run.sh prints uroce's shm figures against (two
# processes, a memfd ring, no RDMA).
add_executable(shm_ring ${CMAKE_CURRENT_LIST_DIR}/shm_ring.c)
set_target_properties(shm_ring PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
