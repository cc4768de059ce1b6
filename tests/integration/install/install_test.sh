#!/usr/bin/env bash
# The install layout, relocated: install into a temporary prefix (and once more through DESTDIR), move the
# tree, then build and run a client against the moved tree with -lnccl, with pkg-config (nccl.pc and
# tutti.pc) and with CMake (find_package(Tutti), find_package(NCCL)), and check that the library finds its
# plugins and its configuration inside the moved tree.
#   install_test.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/tutti-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export HOME=$work TUTTI_DEVICE=host  # no user config; the client uses host memory
unset TUTTI_CONFIG TUTTI_PLUGIN_PATH XDG_CONFIG_HOME LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH || true
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }

step "install into a prefix chosen at install time"
cmake --install "$build" --prefix "$work/first" >/dev/null
libdir=$(cd "$work/first" && ls -d lib*/libnccl.so.2 | xargs dirname)
for f in "$libdir/libnccl.so.2" "$libdir/libnccl.so" "$libdir/libtutti.so" include/nccl.h include/tutti/net.h \
         "$libdir/tutti/libtutti-transport-p2p.so" "$libdir/tutti/libtutti-net-socket.so" \
         "$libdir/pkgconfig/nccl.pc" "$libdir/pkgconfig/tutti.pc" "$libdir/cmake/Tutti/TuttiConfig.cmake" \
         "$libdir/cmake/NCCL/NCCLConfig.cmake" bin/tutti-info share/tutti/configs/default.yaml; do
  [[ -e $work/first/$f ]] || fail "$f not installed"
done
soname=$(readelf -d "$work/first/$libdir/libnccl.so.2" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libnccl.so.2 ]] || fail "SONAME is '$soname', not libnccl.so.2"
for l in libnccl.so libtutti.so; do
  t=$(readlink "$work/first/$libdir/$l")
  [[ $t != /* ]] || fail "$l links to an absolute path ($t)"
done

step "install through DESTDIR"
DESTDIR=$work/stage cmake --install "$build" --prefix /opt/tutti-test >/dev/null
[[ -e $work/stage/opt/tutti-test/$libdir/libnccl.so.2 && -L $work/stage/opt/tutti-test/$libdir/libtutti.so ]] ||
  fail "DESTDIR install is incomplete"
[[ ! -e /opt/tutti-test ]] || fail "DESTDIR install wrote outside DESTDIR"

step "move the tree"
mv "$work/first" "$work/moved"
P=$work/moved
cp "$src/examples/common.h" "$work/"
mkdir -p "$work/threads" && cp "$src/examples/threads/allreduce_threads.c" "$work/threads/"

step "build with -lnccl"
cc -o client threads/allreduce_threads.c -I"$P/include" -L"$P/$libdir" -lnccl -lpthread
readelf -d client | grep -q 'NEEDED.*\[libnccl.so.2\]' || fail "client does not need libnccl.so.2"
LD_LIBRARY_PATH=$P/$libdir NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT ./client 3 50000 > client.log 2>&1 ||
  { cat client.log; fail "client (-lnccl) failed"; }
grep -q "OK" client.log || { cat client.log; fail "client printed no OK"; }
# The transport plugins came from the moved tree, found relative to the library.
grep -q "$P/$libdir/tutti/libtutti-transport-" client.log || { cat client.log; fail "plugins not loaded from $P/$libdir/tutti"; }
if grep -q "$build/lib/libtutti-" client.log; then cat client.log; fail "plugins loaded from the build tree"; fi

step "binary drop-in: a client built against NVIDIA's nccl.h and libnccl.so.2 runs on the moved tree"
nv=${TUTTI_TEST_NVIDIA_NCCL_DIR:-/usr/local/cuda}
if [[ -f $nv/lib64/libnccl.so.2 && -f $nv/include/nccl.h ]]; then
  cc -o client-nv threads/allreduce_threads.c -I"$nv/include" -L"$nv/lib64" -lnccl -lpthread
  readelf -d client-nv | grep -q 'NEEDED.*\[libnccl.so.2\]' || fail "client-nv does not need libnccl.so.2"
  LD_LIBRARY_PATH=$P/$libdir ldd ./client-nv > nv-ldd.log 2>&1 || true
  grep -q "libnccl.so.2 => $P/$libdir/libnccl.so.2" nv-ldd.log || {
    cat nv-ldd.log
    ls -l "$P/$libdir"/libnccl*
    LD_LIBRARY_PATH=$P/$libdir LD_DEBUG=libs ./client-nv 1 1 2>&1 | grep -E "nccl|error" | head -n 20 || true
    fail "client-nv does not load the moved libnccl.so.2"
  }
  LD_LIBRARY_PATH=$P/$libdir NCCL_DEBUG=VERSION ./client-nv 4 50000 > nv.log 2>&1 || { cat nv.log; fail "client-nv failed"; }
  grep -q "Tutti version" nv.log && grep -q OK nv.log || { cat nv.log; fail "client-nv did not run on Tutti"; }
else
  echo "(no NVIDIA NCCL at $nv: skipped)"
fi

step "build with pkg-config"
for pc in nccl tutti; do
  flags=$(PKG_CONFIG_PATH=$P/$libdir/pkgconfig pkg-config --cflags --libs $pc)
  [[ $flags == *"$P"* ]] || fail "$pc.pc does not point into the moved tree: $flags"
  cc -o client-$pc threads/allreduce_threads.c $flags -lpthread
  ./client-$pc 2 10000 | grep -q OK || fail "client built with pkg-config $pc failed"  # rpath from Libs
done
[[ $(PKG_CONFIG_PATH=$P/$libdir/pkgconfig pkg-config --modversion nccl) == "$(sed -n 's/^#define NCCL_MAJOR //p' "$P/include/nccl.h").$(sed -n 's/^#define NCCL_MINOR //p' "$P/include/nccl.h").$(sed -n 's/^#define NCCL_PATCH //p' "$P/include/nccl.h")" ]] ||
  fail "nccl.pc version differs from nccl.h"

step "build with CMake: find_package(Tutti), the examples"
cmake -S "$src/examples" -B ex -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >ex.log 2>&1 || { cat ex.log; fail "examples: configure"; }
cmake --build ex >>ex.log 2>&1 || { cat ex.log; fail "examples: build"; }
./ex/allreduce_threads 4 20000 | grep -q OK || fail "examples built with find_package(Tutti) failed"
"$src/examples/env/launch.sh" 3 ./ex/allreduce_env 20000 > env.log 2>&1 || { cat env.log; fail "env example failed"; }

step "find_package(NCCL): the variables a find module gives"
mkdir -p fp && cat > fp/CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.20)
project(fp LANGUAGES C)
find_package(NCCL 2.20 REQUIRED CONFIG)
foreach(v NCCL_FOUND NCCL_INCLUDE_DIR NCCL_INCLUDE_DIRS NCCL_LIBRARY NCCL_LIBRARIES NCCL_VERSION NCCL_MAJOR_VERSION)
  message(STATUS "${v}=${${v}}")
endforeach()
add_executable(app ${CMAKE_CURRENT_SOURCE_DIR}/../threads/allreduce_threads.c)
target_include_directories(app PRIVATE ${NCCL_INCLUDE_DIRS})
target_link_libraries(app PRIVATE ${NCCL_LIBRARIES} pthread)
add_executable(app2 ${CMAKE_CURRENT_SOURCE_DIR}/../threads/allreduce_threads.c)
target_link_libraries(app2 PRIVATE NCCL::nccl pthread)
CM
cmake -S fp -B fp/build -DCMAKE_PREFIX_PATH="$P" > fp.log 2>&1 || { cat fp.log; fail "find_package(NCCL)"; }
grep -q "NCCL_INCLUDE_DIR=$P/include" fp.log && grep -q "NCCL_LIBRARY=$P/$libdir/libnccl.so" fp.log &&
  grep -Eq "NCCL_VERSION=[0-9]+\.[0-9]+\.[0-9]+$" fp.log || { cat fp.log; fail "find_package(NCCL) variables"; }
cmake --build fp/build >> fp.log 2>&1 || { cat fp.log; fail "find_package(NCCL) build"; }
LD_LIBRARY_PATH=$P/$libdir ./fp/build/app 2 1000 | grep -q OK || fail "app (NCCL_LIBRARIES) failed"
./fp/build/app2 2 1000 | grep -q OK || fail "app2 (NCCL::nccl) failed"

step "the device API's headers (nccl_device.h) from the install: host code, and kernels through nvcc"
cat > devprops.cc <<'CC'
#include <nccl.h>
#include <nccl_device.h>
#include <cstdio>
int main() {
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) return 1;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  if (ncclCommQueryProperties(comms[1], &props) != ncclSuccess || props.rank != 1 || props.nRanks != 2 ||
      props.ginType != NCCL_GIN_TYPE_NONE || ncclTeamLsa(comms[1]).nRanks != 2)
    return 2;
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  std::printf("OK\n");
  return 0;
}
CC
c++ -std=c++17 -o devprops devprops.cc -I"$P/include" -L"$P/$libdir" -lnccl
LD_LIBRARY_PATH=$P/$libdir TUTTI_DEVICE=host ./devprops | grep -q OK || fail "device API host program failed"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ -x $nvcc ]]; then
  cp "$src/tests/integration/devapi/devapi_kernels.h" "$src/tests/integration/devapi/devapi_launch.h" \
     "$src/tests/integration/devapi/devapi_kernels.cu" .
  "$nvcc" -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$P/include" -c devapi_kernels.cu -o devapi_kernels.o ||
    fail "kernels against the installed nccl_device.h do not build with nvcc for sm_90"
else
  echo "  (no nvcc: the kernel build is skipped)"
fi

step "installed tools and the install's own config, after the move"
"$P/bin/tutti-info" > info.log 2>&1 || { cat info.log; fail "tutti-info"; }
grep -q "$P/$libdir/tutti/" info.log || { cat info.log; fail "tutti-info does not find plugins in the moved tree"; }
mkdir -p "$P/etc/tutti" && printf 'params:\n  NCCL_BUFFSIZE: 1048576\n' > "$P/etc/tutti/tutti.yaml"
"$P/bin/tutti-info" > info2.log 2>&1 || { cat info2.log; fail "tutti-info with a prefix config"; }
grep -q "Config: $P/etc/tutti/tutti.yaml (found by: install prefix)" info2.log ||
  { cat info2.log; fail "the prefix's etc/tutti/tutti.yaml was not found"; }
echo "PASS"
