// How a perf tool's ranks are placed: threads of one process (-g N), processes forked by the tool itself
// (-P N / TUTTI_PERF_PROCS), or processes started by mpirun (one rank each). The process modes share the
// unique id without any MPI linkage: by inheritance across fork(), or through a file under mpirun.
#pragma once

#include <nccl.h>

#include <string>

namespace tutti::perf {

enum class Mode { Threads, Fork, Mpi };

const char* modeName(Mode m);

// Under mpirun or another PMI launcher: OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/PMI_SIZE. Returns false
// when neither pair is set; sets *error (and returns true) when a pair is set but malformed.
bool detectLauncher(int* rank, int* size, std::string* error);

// Forks n children, then the parent makes the unique id (its bootstrap root thread stays in the parent) and
// hands it to each child through a pipe: no child is forked from a process with library threads running.
// In a child returns true with *rank and *id set: the child runs rank *rank and exits. In the parent
// waits for every child, stops the rest when one fails, and returns false with *exitCode set.
bool forkRanks(int n, ncclUniqueId* id, int* rank, int* exitCode);

// --bind: the CPU rank `rank` of `n` runs on, the (rank mod k)-th of the k CPUs this process may use (as
// mpirun --bind-to core does, round robin when ranks outnumber CPUs); -1 when the mask cannot be read.
int bindCpuFor(int rank);
// Binds the calling thread (a forked rank's only thread) to `cpu`; false with a message on stderr.
bool bindToCpu(int rank, int cpu);

// Launcher mode: rank 0 makes the id and publishes it atomically (write + rename) at idFilePath(); the
// others poll for the file for up to `timeoutSec`. Returns false with a message on stderr on failure.
bool shareIdThroughFile(int rank, int timeoutSec, ncclUniqueId* id);

// Rank 0 calls this once every rank has joined the communicator (so all have read the file).
void removeIdFile();

// TUTTI_PERF_ID_FILE, else /tmp/tutti-perf-id-<job> with <job> from the launcher's job id (Open MPI's
// OMPI_MCA_orte_ess_jobid, PMIx's PMIX_NAMESPACE) or the parent pid, which every rank started by the same
// local launcher daemon shares.
std::string idFilePath();

}  // namespace tutti::perf
