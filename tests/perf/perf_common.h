// nccl-tests compatible benchmark driver: same flags (-b -e -f -i -g -t -n -w -c -d -o -r -z) and the same
// output columns (size, count, type, redop, root, time, algbw, busbw, #wrong for out-of-place and in-place)
// with nccl-tests' bus-bandwidth factors. Ranks are threads of this process (-g N), forked processes (-P N) or
// processes started by mpirun (see launch.h).
#pragma once

#include <nccl.h>

namespace tutti::perf {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, SendRecv };

// Runs the benchmark for `coll` with the command line; returns the process exit code (non-zero when any
// result was wrong or a call failed).
int perfMain(Coll coll, int argc, char** argv);

}  // namespace tutti::perf
