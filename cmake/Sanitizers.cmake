# TUTTI_SANITIZE: instrument every C/C++ target (core, plugins, tests, tools) with GCC/Clang sanitizers.
#   ""                  no instrumentation (default)
#   "address,undefined" AddressSanitizer (+ LeakSanitizer) and UBSan; any UB report aborts the process
#   "thread"            ThreadSanitizer
# Included before any target is defined, so directory-wide options reach every target. -O1 comes after
# the build type's -O2 on the command line and wins: fast enough for the suite, stacks still readable.
# The test programs (tests/CMakeLists.txt) take -Og instead: half the compile time, about the same speed.
# -g1 (functions and line tables, no variables) gives reports their file:line stacks and compiles in about
# 60% of -g's time under ASan + UBSan; debug a report in a -g build.
# scripts/sanitize.sh configures, builds and runs the chosen ctest subsets with the matching *_OPTIONS.
set(TUTTI_SANITIZE "" CACHE STRING "Sanitizers for every target: empty, address,undefined or thread")
set_property(CACHE TUTTI_SANITIZE PROPERTY STRINGS "" "address,undefined" "address" "undefined" "thread")

if(TUTTI_SANITIZE)
  string(REPLACE "," ";" tutti_san_list "${TUTTI_SANITIZE}")
  foreach(s IN LISTS tutti_san_list)
    if(NOT s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "TUTTI_SANITIZE='${TUTTI_SANITIZE}': unknown sanitizer '${s}' "
                          "(use address,undefined or thread)")
    endif()
  endforeach()
  if("thread" IN_LIST tutti_san_list AND ("address" IN_LIST tutti_san_list OR "leak" IN_LIST tutti_san_list))
    message(FATAL_ERROR "TUTTI_SANITIZE='${TUTTI_SANITIZE}': thread cannot be combined with address or leak; "
                        "build them in separate build directories")
  endif()

  set(tutti_san_compile -fsanitize=${TUTTI_SANITIZE} -fno-omit-frame-pointer -O1 -g1)
  if("undefined" IN_LIST tutti_san_list)
    # A UB report must fail the test that triggered it, not scroll by in its log.
    list(APPEND tutti_san_compile -fno-sanitize-recover=undefined)
    # Not "enum": nccl.h's enums travel as plain ints from C callers, and rejecting any int (a negative op
    # or datatype included) with ncclInvalidArgument is the API's contract, which the bad-argument tests
    # check. C++ calls loading such a value UB (outside the enum's range), but GCC and Clang only rely on
    # the range with -fstrict-enums, which Tutti never uses.
    list(APPEND tutti_san_compile -fno-sanitize=enum)
  endif()
  set(tutti_san_link -fsanitize=${TUTTI_SANITIZE})

  include(CheckCXXSourceCompiles)
  string(MAKE_C_IDENTIFIER "TUTTI_SANITIZE_OK_${TUTTI_SANITIZE}" tutti_san_check)
  set(CMAKE_REQUIRED_FLAGS "${tutti_san_compile}")
  list(JOIN CMAKE_REQUIRED_FLAGS " " CMAKE_REQUIRED_FLAGS)
  set(CMAKE_REQUIRED_LINK_OPTIONS ${tutti_san_link})
  check_cxx_source_compiles("#include <atomic>
    #include <thread>
    int main() { std::atomic<int> a{0}; std::thread t([&] { a.fetch_add(1); }); t.join(); return a - 1; }"
    ${tutti_san_check})
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ${tutti_san_check})
    message(FATAL_ERROR "TUTTI_SANITIZE='${TUTTI_SANITIZE}': ${CMAKE_CXX_COMPILER} cannot build and link "
                        "with -fsanitize=${TUTTI_SANITIZE} (is libasan/libubsan/libtsan installed?)")
  endif()

  # C and C++ only: nvcc does not take these flags (a sanitizer build is meant with TUTTI_WITH_CUDA=OFF).
  foreach(opt IN LISTS tutti_san_compile)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${opt}>)
  endforeach()
  add_link_options(${tutti_san_link})
  if(TUTTI_HAVE_CUDA)
    message(WARNING "TUTTI_SANITIZE with the CUDA backend: device code is not instrumented and ASan needs "
                    "ASAN_OPTIONS=protect_shadow_gap=0 next to the CUDA driver; prefer -DTUTTI_WITH_CUDA=OFF")
  endif()
  message(STATUS "Tutti: sanitizers ${TUTTI_SANITIZE}")
endif()
