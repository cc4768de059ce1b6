# Tests of the public API: they include <nccl.h> and link the core library (libnccl.so.2) exactly as an application does
# (never tutti_internal). Included from every folder that defines such tests; tests/CMakeLists.txt adds
# folders alphabetically, so the harness is defined by whichever folder comes first.
include_guard(GLOBAL)

add_library(tutti_api_harness STATIC
  ${CMAKE_CURRENT_LIST_DIR}/dtypes.cc
  ${CMAKE_CURRENT_LIST_DIR}/harness.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference.cc)
target_include_directories(tutti_api_harness PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(tutti_api_harness PUBLIC tutti GTest::gtest Threads::Threads)
# Transports are plugins loaded at run time; building a test builds the ones it will load.
foreach(plugin tutti_transport_p2p tutti_transport_shm)
  if(TARGET ${plugin})
    add_dependencies(tutti_api_harness ${plugin})
  endif()
endforeach()

# tutti_add_api_test(<name> SOURCES ... [LABELS ...] [TIMEOUT seconds]): a GoogleTest binary against the
# public API; every TEST / TEST_P instance becomes its own ctest test (and process, so per-test setenv of
# NCCL_* variables is safe).
function(tutti_add_api_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 180)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE tutti_api_harness GTest::gtest_main)
  tutti_test_reuse_pch(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${TUTTI_TEST_HOST_ENV}")
endfunction()

# tutti_add_forced_variant(<target> SUFFIX <s> FILTER <gtest filter> ALGO <NCCL_ALGO> PROTO <NCCL_PROTO>
#                          [TIMEOUT seconds] [ENV VAR=value ...]): the target's tests matching FILTER once
# more, named <test><s>, under a forced algorithm and protocol (a forced pair the engine cannot run fails the
# call, so these tests cannot pass by silently running another pair), with ENV added to their environment.
function(tutti_add_forced_variant target)
  cmake_parse_arguments(V "" "SUFFIX;FILTER;ALGO;PROTO;TIMEOUT" "ENV" ${ARGN})
  if(NOT V_TIMEOUT)
    set(V_TIMEOUT 180)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "${V_FILTER}" TEST_SUFFIX "${V_SUFFIX}"
                       TEST_LIST ${target}${V_SUFFIX}_TESTS PROPERTIES LABELS integration TIMEOUT ${V_TIMEOUT})
  tutti_discovered_env(${target}${V_SUFFIX}_TESTS NCCL_ALGO=${V_ALGO} NCCL_PROTO=${V_PROTO} ${TUTTI_TEST_HOST_ENV}
                       ${V_ENV})
endfunction()

# tutti_add_sim_variant(<target> SUFFIX <s> FILTER <gtest filter> SEED <n> [ALGO <a> PROTO <p>] [TIMEOUT s]
#                       [LABELS ...] [ENV VAR=value ...]): the target's tests matching FILTER once more on the
# sim backend (TUTTI_DEVICE=sim: the device kernels on the CPU SIMT emulator), named <test><s>, label `sim`,
# with the emulator's switch points drawn from TUTTI_SIM_SEED=<n> (each variant its own seed, so a run covers
# several; a failing test prints its seed) and ENV added to their environment. Defined only when the build has
# the sim backend.
function(tutti_add_sim_variant target)
  if(NOT TUTTI_WITH_SIM)
    return()
  endif()
  cmake_parse_arguments(V "" "SUFFIX;FILTER;SEED;ALGO;PROTO;TIMEOUT" "LABELS;ENV" ${ARGN})
  if(NOT V_TIMEOUT)
    set(V_TIMEOUT 300)
  endif()
  set(env "TUTTI_DEVICE=sim" "TUTTI_SIM_SEED=${V_SEED}" ${V_ENV})
  if(V_ALGO)
    list(APPEND env "NCCL_ALGO=${V_ALGO}" "NCCL_PROTO=${V_PROTO}")
  endif()
  # One label only: gtest_discover_tests splits a list given as LABELS (see ../multiproc).
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_FILTER "${V_FILTER}" TEST_SUFFIX "${V_SUFFIX}"
                       TEST_LIST ${target}${V_SUFFIX}_TESTS PROPERTIES LABELS sim TIMEOUT ${V_TIMEOUT})
  tutti_discovered_env(${target}${V_SUFFIX}_TESTS ${env})
endfunction()
