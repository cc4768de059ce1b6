/* The Open MPI side of benchmarks/side_by_side.sh: the same sweep and the same columns as Tutti's perf
 * tools (tests/perf), out-of-place only, float / sum, root 0. size is the largest buffer of the call
 * (nccl-tests' convention: the gathered / scattered buffer for AllGather and ReduceScatter) and busbw
 * uses nccl-tests' factors, so the two tables can be compared row by row. time = the slowest rank's
 * average over -n iterations after -w warmups, each rank timing its own loop after a barrier.
 *
 * usage: mpi_coll_perf -C allreduce|allgather|reducescatter|broadcast|alltoall [-b min] [-e max] [-f factor]
 *                      [-n iters] [-w warmup] [-c check 0/1]                                          */
#include <mpi.h>

#include <ctype.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, ALLTOALL };
static const char* const kCollNames[] = {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"};

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  switch (end && *end ? toupper((unsigned char)*end) : 0) {
    case 'K': v *= 1024; break;
    case 'M': v *= 1024.0 * 1024; break;
    case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return v > 0 ? (size_t)v : 0;
}

static double bus_factor(enum coll c, int n) {
  switch (c) {
    case ALLREDUCE: return 2.0 * (n - 1) / n;
    case ALLGATHER: case REDUCESCATTER: case ALLTOALL: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

/* Elements per call argument: per-rank block for AllGather / ReduceScatter / AlltoAll, the whole buffer
 * otherwise. */
static size_t count_of(enum coll c, size_t bytes, int n) {
  size_t elems = bytes / sizeof(float);
  return (c == ALLGATHER || c == REDUCESCATTER || c == ALLTOALL) ? elems / n : elems;
}

static void run_once(enum coll c, const float* send, float* recv, size_t count) {
  switch (c) {
    case ALLREDUCE: MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCESCATTER:
      MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case BROADCAST: MPI_Bcast(recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
  }
}

/* Input element i of rank r: small integers, so float sums are exact. */
static float input_value(int r, size_t i) { return (float)((r * 7 + i) % 11); }

/* Fills inputs, runs one call and counts wrong output elements on this rank. */
static long long check_once(enum coll c, float* send, float* recv, size_t count, int rank, int n) {
  size_t in = (c == REDUCESCATTER || c == ALLTOALL) ? count * n : count;
  for (size_t i = 0; i < in; ++i) send[i] = input_value(rank, i);
  if (c == BROADCAST)
    for (size_t i = 0; i < count; ++i) recv[i] = rank == 0 ? input_value(0, i) : -1.0f;
  run_once(c, send, recv, count);
  long long wrong = 0;
  for (size_t i = 0; i < count * (c == ALLGATHER || c == ALLTOALL ? n : 1); ++i) {
    float want = 0;
    if (c == ALLREDUCE || c == REDUCESCATTER) {
      size_t at = c == REDUCESCATTER ? rank * count + i : i;
      for (int p = 0; p < n; ++p) want += input_value(p, at);
    } else if (c == ALLGATHER) {
      want = input_value((int)(i / count), i % count);
    } else if (c == ALLTOALL) {
      want = input_value((int)(i / count), rank * count + i % count);  /* block `rank` of rank i / count */
    } else {
      want = input_value(0, i);
    }
    wrong += recv[i] != want;
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  int coll = -1, iters = 20, warmup = 5, check = 0, opt;
  size_t minBytes = 8, maxBytes = 32u << 20;
  double factor = 2;
  while ((opt = getopt(argc, argv, "C:b:e:f:n:w:c:")) != -1) {
    switch (opt) {
      case 'C':
        for (int i = 0; i < (int)(sizeof kCollNames / sizeof kCollNames[0]); ++i)
          if (strcmp(optarg, kCollNames[i]) == 0) coll = i;
        break;
      case 'b': minBytes = parse_size(optarg); break;
      case 'e': maxBytes = parse_size(optarg); break;
      case 'f': factor = atof(optarg); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'c': check = atoi(optarg); break;
      default: coll = -2; break;
    }
  }
  if (coll < 0 || iters < 1 || warmup < 0 || factor <= 1 || minBytes < 1 || minBytes > maxBytes ||
      maxBytes / sizeof(float) > (size_t)INT32_MAX) {
    if (rank == 0)
      fprintf(stderr, "usage: %s -C allreduce|allgather|reducescatter|broadcast|alltoall [-b min] [-e max] [-f factor] "
              "[-n iters] [-w warmup] [-c check]\n  (sizes up to 8 GiB; MPI counts are int)\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const enum coll c = (enum coll)coll;
  /* ReduceScatter's input and AllGather's output are the full buffer: allocate maxBytes for both sides. */
  float* send = malloc(maxBytes + 64);
  float* recv = malloc(maxBytes + 64);
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, maxBytes + 64);
  memset(recv, 0, maxBytes + 64);

  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    char* nl = strchr(version, '\n');
    if (nl) *nl = '\0';
    printf("# mpi_coll_perf %s: nranks %d, iters %d, warmup %d, check %d, %s\n", kCollNames[c], n, iters, warmup,
           check, version);
    printf("#\n# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw",
           "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
           "");
  }
  /* The same warm-up before the sweep as Tutti's perf tools (tests/perf) and nccl-tests: -w calls at the largest
     size, then at the smallest, then a few barriers. */
  for (int i = 0; i < warmup; ++i) run_once(c, send, recv, count_of(c, maxBytes, n));
  for (int i = 0; i < warmup; ++i) run_once(c, send, recv, count_of(c, minBytes, n));
  for (int i = 0; i < 5; ++i) MPI_Barrier(MPI_COMM_WORLD);
  long long totalWrong = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes;) {
    const size_t count = count_of(c, bytes, n);
    for (int i = 0; i < warmup; ++i) run_once(c, send, recv, count);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) run_once(c, send, recv, count);
    double us = (MPI_Wtime() - start) * 1e6 / iters, maxUs = 0;
    MPI_Reduce(&us, &maxUs, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long long wrong = check ? check_once(c, send, recv, count, rank, n) : 0, sumWrong = 0;
    MPI_Reduce(&wrong, &sumWrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double algbw = maxUs > 0 ? (double)bytes / maxUs / 1e3 : 0;
      char wr[32];
      snprintf(wr, sizeof wr, check ? "%lld" : "N/A", sumWrong);
      printf("  %10zu %12zu %8s %6s %6d %9.2f %7.2f %7.2f %6s\n", bytes, count, "float",
             (c == ALLREDUCE || c == REDUCESCATTER) ? "sum" : "none", c == BROADCAST ? 0 : -1, maxUs, algbw,
             algbw * bus_factor(c, n), wr);
      fflush(stdout);
      totalWrong += sumWrong;
    }
    size_t next = (size_t)(bytes * factor);
    bytes = next > bytes ? next : bytes + 1;
  }
  if (rank == 0) printf("# Out of bounds values : %lld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
  free(send);
  free(recv);
  MPI_Finalize();
  return totalWrong ? 1 : 0;
}
