# qp_scale: many RC QPs between two processes -- create, connect, one WRITE each, destroy;
# time and RSS per QP (issue #16 section 3; bench/README.md "Many QPs").
uroce_verbs_bench(qp_scale)
# qp_lookup: the receive path's QP lookup alone, list walk against the QPN table.
if(TARGET uroce_core)
  add_executable(qp_lookup ${CMAKE_CURRENT_LIST_DIR}/qp_lookup.c)
  target_link_libraries(qp_lookup PRIVATE uroce_core)
  set_target_properties(qp_lookup PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
