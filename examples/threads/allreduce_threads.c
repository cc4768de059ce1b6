/* One thread per rank in one process: the main thread makes the unique id, each thread joins the
 * communicator with ncclCommInitRank and runs AllReduce on its own buffers. The same shape as a program
 * driving one GPU per thread. On Tutti's host backend buffers are host memory and a NULL stream means
 * the call has completed when it returns.
 *
 *   allreduce_threads [nranks] [count] */
#include "../common.h"

#include <pthread.h>

typedef struct {
  ncclUniqueId id;
  int nranks, rank;
  size_t count;
  size_t wrong;
} Rank;

static void* runRank(void* arg) {
  Rank* r = (Rank*)arg;
  float* send = malloc(r->count * sizeof(float));
  float* recv = malloc(r->count * sizeof(float));
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(EXIT_FAILURE);
  }
  for (size_t i = 0; i < r->count; ++i) send[i] = exampleValue(r->rank, i);

  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  NCCL_CHECK(ncclAllReduce(send, recv, r->count, ncclFloat, ncclSum, comm, NULL));
  r->wrong = exampleCheckSum(recv, r->count, r->nranks, r->rank);
  /* In place as well: the result replaces the input. */
  NCCL_CHECK(ncclAllReduce(send, send, r->count, ncclFloat, ncclSum, comm, NULL));
  r->wrong += exampleCheckSum(send, r->count, r->nranks, r->rank);
  NCCL_CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  return NULL;
}

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? atoi(argv[1]) : 4;
  const size_t count = argc > 2 ? (size_t)atoll(argv[2]) : 1 << 16;
  if (nranks < 1 || count < 1) {
    fprintf(stderr, "usage: %s [nranks >= 1] [count >= 1]\n", argv[0]);
    return EXIT_FAILURE;
  }
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));

  Rank* ranks = calloc((size_t)nranks, sizeof(Rank));
  pthread_t* threads = calloc((size_t)nranks, sizeof(pthread_t));
  if (ranks == NULL || threads == NULL) return EXIT_FAILURE;
  for (int r = 0; r < nranks; ++r) {
    ranks[r] = (Rank){.id = id, .nranks = nranks, .rank = r, .count = count};
    if (pthread_create(&threads[r], NULL, runRank, &ranks[r]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return EXIT_FAILURE;
    }
  }
  size_t wrong = 0;
  for (int r = 0; r < nranks; ++r) {
    pthread_join(threads[r], NULL);
    wrong += ranks[r].wrong;
  }
  free(ranks);
  free(threads);
  printf("%d threads, %zu floats: %s\n", nranks, count, wrong ? "FAILED" : "OK");
  return wrong ? EXIT_FAILURE : EXIT_SUCCESS;
}
