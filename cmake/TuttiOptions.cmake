# TUTTI_WITH_CUDA / TUTTI_WITH_IB: AUTO (on when found), ON (required), OFF.
set(TUTTI_WITH_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO|ON|OFF")
set(TUTTI_WITH_IB AUTO CACHE STRING "Build the net-ib plugin against rdma-core: AUTO|ON|OFF")
set_property(CACHE TUTTI_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE TUTTI_WITH_IB PROPERTY STRINGS AUTO ON OFF)

set(TUTTI_HAVE_CUDA OFF)
if(NOT TUTTI_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(TUTTI_HAVE_CUDA ON)
    endif()
  endif()
  if(TUTTI_WITH_CUDA STREQUAL "ON" AND NOT TUTTI_HAVE_CUDA)
    message(FATAL_ERROR "TUTTI_WITH_CUDA=ON but no CUDA toolkit was found (looked for nvcc, also in /usr/local/cuda/bin)")
  endif()
endif()
# The kernels' targets: sm_80 and sm_90 code, plus compute_90 PTX for later GPUs ("90" = sm_90 + PTX).
# nvcc's own default (CMAKE_CUDA_ARCHITECTURES from the compiler) is not ours; set TUTTI_CUDA_ARCHITECTURES
# to change the list. The C++ dialect is passed as -std=c++20 (CMake 3.25 does not know nvcc 13's CUDA20).
set(TUTTI_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures of the kernels")
# nvcc's fast-compile level for the kernels (-Ofc): 0 (the default: full optimisation, what a release and
# every measurement uses), min, mid or max. The test command of the README builds with `max`: its tests check
# the kernels' results, never their speed, and nvcc then takes about a twelfth of its time on the kernel matrix
# (int8 for sm_80 + sm_90 on a 2-core AMD EPYC VM: 136 s at 0, 26 s at min, 11 s at max; the kernel's
# __launch_bounds__ keep its registers within a 640-thread block at every level). scripts/gpu-check.sh always
# builds with 0.
set(TUTTI_CUDA_FAST_COMPILE "0" CACHE STRING "nvcc fast-compile level of the kernels (-Ofc): 0 (off), min, mid or max")
set_property(CACHE TUTTI_CUDA_FAST_COMPILE PROPERTY STRINGS 0 min mid max)
set(TUTTI_CUDA_OPT_FLAGS -O3)
set(TUTTI_CUDA_FAST_COMPILE_APPLIED "0")  # the level the kernels are built at (tutti-info prints it)
if(NOT TUTTI_CUDA_FAST_COMPILE MATCHES "^(0|min|mid|max)$")
  message(FATAL_ERROR "TUTTI_CUDA_FAST_COMPILE='${TUTTI_CUDA_FAST_COMPILE}': expected 0, min, mid or max")
endif()
if(TUTTI_HAVE_CUDA AND NOT TUTTI_CUDA_FAST_COMPILE STREQUAL "0")
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --help OUTPUT_VARIABLE tutti_nvcc_help ERROR_QUIET)
  if(tutti_nvcc_help MATCHES "--Ofast-compile")
    list(APPEND TUTTI_CUDA_OPT_FLAGS -Ofc ${TUTTI_CUDA_FAST_COMPILE})
    set(TUTTI_CUDA_FAST_COMPILE_APPLIED "${TUTTI_CUDA_FAST_COMPILE}")
    message(STATUS "Tutti: CUDA kernels at nvcc fast-compile level '${TUTTI_CUDA_FAST_COMPILE}' (for tests, not for speed)")
  else()
    message(STATUS "Tutti: this nvcc has no -Ofast-compile; TUTTI_CUDA_FAST_COMPILE ignored")
  endif()
endif()
message(STATUS "Tutti: CUDA backend ${TUTTI_HAVE_CUDA}")

# The sim backend: the device kernels compiled by the host compiler and run on the CPU SIMT emulator
# (Boost.Context fibers). Sanitizer builds turn it off: fibers switching stacks need annotations the
# sanitizers' runtimes would have to be told about, and the kernels are tested by the ordinary build.
option(TUTTI_WITH_SIM "Build the sim backend (the device kernels on the CPU SIMT emulator)" ON)

set(TUTTI_HAVE_IB OFF)
if(NOT TUTTI_WITH_IB STREQUAL "OFF")
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  if(IBVERBS_INCLUDE_DIR)
    set(TUTTI_HAVE_IB ON)
  elseif(TUTTI_WITH_IB STREQUAL "ON")
    message(FATAL_ERROR "TUTTI_WITH_IB=ON but infiniband/verbs.h was not found (apt-get install libibverbs-dev)")
  endif()
endif()
message(STATUS "Tutti: net-ib plugin ${TUTTI_HAVE_IB}")
