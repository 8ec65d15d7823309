# cpu_rtt: how far apart the two pinned CPUs are (a cache line's round trip); bench/run.sh
# probes it around every run and reports the placement with the figures (bench/README.md).
find_package(Threads REQUIRED)
add_executable(cpu_rtt ${CMAKE_CURRENT_LIST_DIR}/cpu_rtt.c)
target_link_libraries(cpu_rtt PRIVATE Threads::Threads)
set_target_properties(cpu_rtt PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
