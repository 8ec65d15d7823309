# poll_empty: an empty ibv_poll_cq over the UDP path against a bare empty recvmmsg in the
# same process (bench/README.md).
if(TARGET ibverbs)
  add_executable(poll_empty ${CMAKE_CURRENT_LIST_DIR}/poll_empty.c)
  target_include_directories(poll_empty PRIVATE ${IBVERBS_INCLUDE})
  target_link_libraries(poll_empty PRIVATE ibverbs)
  set_target_properties(poll_empty PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
