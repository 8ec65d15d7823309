# Issue #4: the RC recovery in `uroce stat` (stat_faults.sh), and SQD (stat_faults sqd,
# sqd-ud).
# Included from tests/transport/CMakeLists.txt.
if(TARGET uroced AND TARGET uroce AND TARGET ibverbs)
  set(stat_nsrun ${CMAKE_SOURCE_DIR}/tests/daemon/nsrun.sh)
  add_executable(stat_faults ${CMAKE_CURRENT_SOURCE_DIR}/stat_faults.c)
  target_include_directories(stat_faults PRIVATE ${IBVERBS_INCLUDE})
  target_link_libraries(stat_faults PRIVATE ibverbs)
  add_test(NAME transport_stat_faults
           COMMAND ${stat_nsrun} sh ${CMAKE_CURRENT_SOURCE_DIR}/stat_faults.sh
                   $<TARGET_FILE:uroce> $<TARGET_FILE:stat_faults>)
  add_test(NAME transport_stat_sqd
           COMMAND ${stat_nsrun} $<TARGET_FILE:uroce> run $<TARGET_FILE:stat_faults> sqd)
  add_test(NAME transport_stat_sqd_ud
           COMMAND ${stat_nsrun} $<TARGET_FILE:uroce> run $<TARGET_FILE:stat_faults> sqd-ud)
  # The engine's periodic publish (no state change after the traffic).
  add_test(NAME transport_stat_periodic
           COMMAND ${stat_nsrun} sh ${CMAKE_CURRENT_SOURCE_DIR}/stat_faults.sh
                   $<TARGET_FILE:uroce> $<TARGET_FILE:stat_faults> 3000 nosqd)
  set_tests_properties(transport_stat_faults transport_stat_sqd transport_stat_sqd_ud
                       transport_stat_periodic PROPERTIES
    TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "UROCE_DAEMON=$<TARGET_FILE:uroced>;${UROCE_FOREIGN_ENV}")
endif()
