#!/usr/bin/env bash
# Installs Tutti's build and test dependencies from Debian's packages (run as root).
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      libyaml-cpp-dev libfmt-dev libboost-dev libboost-filesystem-dev libboost-context-dev
      libgtest-dev libgmock-dev
      libibverbs-dev rdma-core
      iproute2 python3
      libopenmpi-dev openmpi-bin  # examples/mpi (mpirun -np 4)
      gnuplot-nox  # benchmarks/plot.sh
      clang libclang-rt-14-dev)  # scripts/fuzz.sh (libFuzzer)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
