/* One process per rank, started by a launcher that passes rank, size and the root's address in the
 * environment, as torchrun and Slurm do:
 *
 *   RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT      (torchrun, and most launchers)
 *   SLURM_PROCID, SLURM_NTASKS                      (srun; MASTER_ADDR/PORT still name the root)
 *
 * No id is passed between processes: every rank sets NCCL_COMM_ID=<MASTER_ADDR>:<MASTER_PORT> and calls
 * ncclGetUniqueId, which then describes the bootstrap root that rank 0 opens at that address. See
 * launch.sh for a launcher on one machine.
 *
 *   allreduce_env [count] */
#include "../common.h"

#include <string.h>

static int envInt(const char* name, const char* fallback) {
  const char* v = getenv(name);
  if (v == NULL || *v == '\0') v = fallback ? getenv(fallback) : NULL;
  if (v == NULL || *v == '\0') {
    fprintf(stderr, "%s is not set%s%s\n", name, fallback ? " (nor " : "", fallback ? fallback : "");
    if (fallback) fprintf(stderr, ")\n");
    exit(EXIT_FAILURE);
  }
  return atoi(v);
}

int main(int argc, char** argv) {
  const size_t count = argc > 1 ? (size_t)atoll(argv[1]) : 1 << 16;
  const int rank = envInt("RANK", "SLURM_PROCID");
  const int nranks = envInt("WORLD_SIZE", "SLURM_NTASKS");
  const char* addr = getenv("MASTER_ADDR");
  const char* port = getenv("MASTER_PORT");
  if (addr == NULL || port == NULL || rank < 0 || rank >= nranks) {
    fprintf(stderr, "need MASTER_ADDR, MASTER_PORT and 0 <= RANK < WORLD_SIZE\n");
    return EXIT_FAILURE;
  }
  char commId[300];
  snprintf(commId, sizeof commId, strchr(addr, ':') ? "[%s]:%s" : "%s:%s", addr, port);
  setenv("NCCL_COMM_ID", commId, 1);

  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id)); /* the same id in every process: it is derived from NCCL_COMM_ID */
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));

  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  if (send == NULL || recv == NULL) return EXIT_FAILURE;
  for (size_t i = 0; i < count; ++i) send[i] = exampleValue(rank, i);
  NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
  size_t wrong = exampleCheckSum(recv, count, nranks, rank);
  NCCL_CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  printf("rank %d of %d (root %s): %s\n", rank, nranks, commId, wrong ? "FAILED" : "OK");
  return wrong ? EXIT_FAILURE : EXIT_SUCCESS;
}
