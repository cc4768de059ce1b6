#!/usr/bin/env bash
# Starts N copies of a program on this machine the way torchrun does: RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR and MASTER_PORT in each one's environment. Exits non-zero if any rank fails.
#   launch.sh <nranks> <program> [args...]
set -uo pipefail
n=${1:?usage: launch.sh <nranks> <program> [args...]}
shift
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
if [[ -z ${MASTER_PORT:-} ]]; then  # a port free now (the kernel picks it)
  MASTER_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
export MASTER_PORT WORLD_SIZE=$n
pids=()
for ((r = 0; r < n; ++r)); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
