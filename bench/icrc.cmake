# icrc_bench: ICRC GB/s on 4 KiB packets vs zlib crc32 over the same buffers (same run).
add_executable(icrc_bench ${CMAKE_CURRENT_LIST_DIR}/icrc_bench.c)
target_link_libraries(icrc_bench PRIVATE uroce_wire PkgConfig::ZLIB)
set_target_properties(icrc_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
