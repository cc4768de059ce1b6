/* Shared by the launch examples: error checks and the data every example reduces and verifies. */
#ifndef TUTTI_EXAMPLES_COMMON_H_
#define TUTTI_EXAMPLES_COMMON_H_

#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>

#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t res_ = (call);                                                                    \
    if (res_ != ncclSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,                    \
              ncclGetErrorString(res_), ncclGetLastError(NULL));                                   \
      exit(EXIT_FAILURE);                                                                          \
    }                                                                                              \
  } while (0)

/* Element i of rank r's send buffer; the sum over ranks is nranks*(nranks+1)/2 * (i % 7 + 1). */
static inline float exampleValue(int rank, size_t i) { return (float)(rank + 1) * (float)(i % 7 + 1); }

/* Number of elements of recv that differ from the expected sum (prints the first few). */
static inline size_t exampleCheckSum(const float* recv, size_t count, int nranks, int rank) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = (float)(nranks * (nranks + 1) / 2) * (float)(i % 7 + 1);
    if (recv[i] != want) {
      if (wrong < 5) fprintf(stderr, "rank %d element %zu: got %g, want %g\n", rank, i, recv[i], want);
      ++wrong;
    }
  }
  return wrong;
}

#endif
