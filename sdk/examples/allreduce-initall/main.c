/* All-reduce over 4 ranks in one process: ncclCommInitAll creates the communicators and one thread
 * drives every rank inside ncclGroupStart / ncclGroupEnd, as a single-process multi-device NCCL program
 * does. On Tutti's host backend buffers are ordinary host memory and a NULL stream means each call has
 * completed when ncclGroupEnd returns. */
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>

#define NRANKS 4
#define COUNT 1024

#define CHECK(call)                                                                  \
  do {                                                                               \
    ncclResult_t res_ = (call);                                                      \
    if (res_ != ncclSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,      \
              ncclGetErrorString(res_), ncclGetLastError(NULL));                     \
      exit(EXIT_FAILURE);                                                            \
    }                                                                                \
  } while (0)

int main(void) {
  ncclComm_t comms[NRANKS];
  float* send[NRANKS];
  float* recv[NRANKS];
  int version = 0;

  CHECK(ncclGetVersion(&version));
  printf("NCCL API version %d, %d ranks, %d floats each\n", version, NRANKS, COUNT);

  for (int r = 0; r < NRANKS; ++r) {
    send[r] = malloc(COUNT * sizeof(float));
    recv[r] = malloc(COUNT * sizeof(float));
    if (send[r] == NULL || recv[r] == NULL) {
      fprintf(stderr, "out of memory\n");
      return EXIT_FAILURE;
    }
    for (int i = 0; i < COUNT; ++i) send[r][i] = (float)(r + 1) * (float)(i % 10);
  }

  CHECK(ncclCommInitAll(comms, NRANKS, NULL)); /* NULL devlist: ranks 0..NRANKS-1 */

  CHECK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) {
    CHECK(ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, comms[r], NULL));
  }
  CHECK(ncclGroupEnd());

  /* Every rank holds sum over r of (r+1) * (i % 10) = 10 * (i % 10) for 4 ranks. */
  int wrong = 0;
  for (int r = 0; r < NRANKS; ++r) {
    for (int i = 0; i < COUNT; ++i) {
      const float want = (float)(NRANKS * (NRANKS + 1) / 2) * (float)(i % 10);
      if (recv[r][i] != want) {
        if (wrong < 5) fprintf(stderr, "rank %d element %d: got %g, want %g\n", r, i, recv[r][i], want);
        ++wrong;
      }
    }
  }
  printf("rank 0 result: %g %g %g ... %g\n", recv[0][0], recv[0][1], recv[0][2], recv[0][COUNT - 1]);

  for (int r = 0; r < NRANKS; ++r) {
    CHECK(ncclCommDestroy(comms[r]));
    free(send[r]);
    free(recv[r]);
  }
  printf(wrong ? "FAILED: %d wrong elements\n" : "OK\n", wrong);
  return wrong ? EXIT_FAILURE : EXIT_SUCCESS;
}
