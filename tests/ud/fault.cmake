# Exact loss accounting under UROCE_FAULT with two processes and plain verbs (issue #5):
# ud_fault.c, run by ud_fault.sh on lo and across two netns joined by veth.  Included from
# tests/ud/CMakeLists.txt.
if(TARGET uroced AND TARGET uroce AND TARGET ibverbs)
  add_executable(ud_fault ud_fault.c)
  target_include_directories(ud_fault PRIVATE ${IBVERBS_INCLUDE})
  target_link_libraries(ud_fault PRIVATE ibverbs)
  # SERVICE-MESSAGES-SEED (drop=0.05): UD 1500 one-packet messages; UC 600 SENDs of up to
  # 5 packets; ucw: UC with every odd message an RDMA WRITE_WITH_IMM.
  set(ud_fault_cases ud-1500-7 uc-600-11 ucw-600-5)
  set(ud_fault_env UROCE_DAEMON=$<TARGET_FILE:uroced> ${UROCE_FOREIGN_ENV})
  foreach(topo lo veth)
    foreach(c ${ud_fault_cases})
      add_test(NAME ud_fault_${topo}_${c}
               COMMAND ${CMAKE_SOURCE_DIR}/tests/daemon/nsrun.sh sh ${CMAKE_CURRENT_SOURCE_DIR}/ud_fault.sh
                       $<TARGET_FILE:uroce> $<TARGET_FILE:ud_fault> ${topo} ${c})
      set_tests_properties(ud_fault_${topo}_${c} PROPERTIES
        TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "ud_apps;ud_fault"
        ENVIRONMENT "${ud_fault_env}")
    endforeach()
  endforeach()
endif()

# The engines' send-queue errors and Q_Key rules are in ud_unit (test_ud.c).
