/* One MPI process per rank: rank 0 makes the unique id and MPI_Bcast hands it to the others, the way
 * NCCL programs launched with mpirun start.
 *
 *   mpirun -np 4 allreduce_mpi [count] */
#include "../common.h"

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const size_t count = argc > 1 ? (size_t)atoll(argv[1]) : 1 << 16;

  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));

  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  if (send == NULL || recv == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < count; ++i) send[i] = exampleValue(rank, i);
  NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
  long wrong = (long)exampleCheckSum(recv, count, nranks, rank), total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  NCCL_CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  if (rank == 0) printf("%d MPI ranks, %zu floats: %s\n", nranks, count, total ? "FAILED" : "OK");
  MPI_Finalize();
  return total ? EXIT_FAILURE : EXIT_SUCCESS;
}
