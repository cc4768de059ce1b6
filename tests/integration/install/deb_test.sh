#!/usr/bin/env bash
# The Debian package: cpack -G DEB builds it, dpkg -i installs it, a client built with plain -lnccl (and
# with pkg-config) against the system paths runs, dpkg -r removes every file it installed.
# Needs root and dpkg; exits 77 (skipped) without them or when a package already owns libnccl.
#   deb_test.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) == 0 ]] || skip "not root"
command -v dpkg >/dev/null && command -v cpack >/dev/null || skip "no dpkg or cpack"
if dpkg-query -W -f='${Status}' tutti 2>/dev/null | grep -q "installed"; then skip "package tutti is already installed"; fi
if dpkg -S libnccl.so.2 >/dev/null 2>&1; then skip "another package already provides libnccl.so.2"; fi
work=$(mktemp -d /tmp/tutti-deb-test.XXXXXX)
installed=0
cleanup() {
  if ((installed)); then dpkg -r tutti >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
export TUTTI_DEVICE=host HOME=$work
unset LD_LIBRARY_PATH PKG_CONFIG_PATH TUTTI_PLUGIN_PATH TUTTI_CONFIG || true

echo "== cpack -G DEB"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg" > cpack.log 2>&1 || { cat cpack.log; fail "cpack"; }
deb=$(ls "$work"/pkg/*.deb)
dpkg-deb -I "$deb"
dpkg-deb -c "$deb" | awk '{print $6}' | grep -q '^\./usr/lib.*/libnccl\.so\.2' || fail "the .deb holds no libnccl.so.2"

echo "== dpkg -i"
dpkg -i "$deb"
installed=1
mapfile -t files < <(dpkg -L tutti | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done)
echo "${#files[@]} files installed"

echo "== a client built with -lnccl against the system paths"
cp "$src/examples/common.h" . && mkdir -p threads && cp "$src/examples/threads/allreduce_threads.c" threads/
# The system's nccl.h and libnccl.so, not the CUDA toolkit's (it may hold NVIDIA's).
cc -o client threads/allreduce_threads.c -lnccl -lpthread
readelf -d client | grep -q 'NEEDED.*\[libnccl.so.2\]' || fail "client does not need libnccl.so.2"
lib=$(ldd client | sed -n 's/.*libnccl.so.2 => \([^ ]*\).*/\1/p')
owner=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null || true)  # the file the link leads to
[[ $owner == tutti:* ]] || { ldd client; fail "the loader picks $lib, not the packaged libnccl.so.2"; }
./client 4 50000 | tee client.log
grep -q OK client.log || fail "client failed"
cc -o client-pc threads/allreduce_threads.c $(pkg-config --cflags --libs nccl) -lpthread
./client-pc 2 1000 | grep -q OK || fail "client built with pkg-config failed"
tutti-info > info.log 2>&1 || { cat info.log; fail "tutti-info from the package"; }

echo "== dpkg -r"
dpkg -r tutti
installed=0
left=()
for f in "${files[@]}"; do [[ -e $f || -L $f ]] && left+=("$f"); done
((${#left[@]} == 0)) || fail "left after dpkg -r: ${left[*]}"
[[ ! -e /usr/lib/libnccl.so.2 ]] || fail "/usr/lib/libnccl.so.2 still there"
echo "PASS"
