# udp_gso: the kernel's share of write_bw without RoCE (a sender shaped like netio's GSO
# sends of 64 KiB WRITEs, a UDP_GRO receiver); compared by hand with iperf3 (bench/README.md).
add_executable(udp_gso ${CMAKE_CURRENT_LIST_DIR}/udp_gso.c)
# -c: the ICRC's share, with uroce's own CRC
target_link_libraries(udp_gso PRIVATE uroce_wire)
set_target_properties(udp_gso PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
