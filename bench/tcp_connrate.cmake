# tcp_connrate: the TCP connect/accept peer of bench/run.sh's cm_connect (cmtime over
# uroce's connection manager against TCP connection setup on 127.0.0.1, same run).
add_executable(tcp_connrate ${CMAKE_CURRENT_LIST_DIR}/tcp_connrate.c)
set_target_properties(tcp_connrate PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
