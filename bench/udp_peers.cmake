# udp_pingpong, udp_pps: plain-UDP peers that bench/run.sh measures next to perftest in the
# same run (latency of ib_write_lat, message rate of ib_send_bw); udp_roce_pp: the kernel's
# share of ib_write_lat over uroce (the same packets and socket options, no RDMA; -u: and
# uroce's socket design, with its steering program).
find_package(Threads REQUIRED)
foreach(peer udp_pingpong udp_pps udp_roce_pp)
  add_executable(${peer} ${CMAKE_CURRENT_LIST_DIR}/${peer}.c)
  target_link_libraries(${peer} PRIVATE Threads::Threads)
  set_target_properties(${peer} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()
# udp_roce_pp -u attaches uroce's own steering program (src/net/steer.c)
target_link_libraries(udp_roce_pp PRIVATE uroce_net)
