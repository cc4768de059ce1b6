/* Limits of this host that bound the side-by-side rows, measured in the same run (benchmarks/side_by_side.sh):
 *   - TCP over loopback, 8-byte ping-pong between two processes: half the round trip, with both sides polling
 *     (non-blocking recv in a loop) and with both sides blocking in recv (each message wakes a sleeping process);
 *   - a futex wake-up between two processes: half the round trip of two processes that each sleep until the
 *     other wakes them (what a waiting rank pays once it has stopped spinning);
 *   - memcpy bandwidth of one core, 1 MiB blocks, warm (the copy a FIFO step or a single-copy read costs);
 *   - a cache line handed between two processes through shared memory, both spinning: half the round trip (the
 *     latency of one small message between two ranks on their own cores; calls issued back to back overlap theirs);
 *   - cross memory attach: process_vm_readv of 1 MiB and of 16 MiB from another process's warm buffer into a warm
 *     one, one core (the single copy Open MPI's vader uses inside a node, and Tutti where its init log says
 *     single-copy: the kernel pins the peer's pages and copies them);
 *   - TCP over loopback, streaming: as many sender/receiver pairs of processes as the host has cores, each pair
 *     moving 128 MiB over its own connection in 1 MiB writes and reads, all at once; the bytes of all pairs over the
 *     time until the last receiver has its last byte, best of six rounds, three with the kernel's autotuned send
 *     buffers and three with SO_SNDBUF 384 KiB, net-socket's inside a host (what every rank's traffic together can
 *     move through the kernel's TCP path over loopback: the sender's copy into the socket, the receive path on the
 *     sender's core, the receiver's copy out); and one pair alone, the same way (a reference for the rows where one
 *     rank at a time sends).
 *   - a system call on each core (getppid, the process pinned there, best of five rounds): what every socket
 *     operation and every poll of a socket pays on top of its work (about a microsecond under some hypervisors,
 *     where it is most of a small message's cost).
 * Prints one "limit: <name> <value> <unit>" line per measurement. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A TCP socket listening on a free loopback port (`backlog` pending connections); its address in *a. */
static int loopbackListener(int backlog, struct sockaddr_in* a) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *a;
  if (ls < 0 || bind(ls, (struct sockaddr*)a, sizeof *a) || listen(ls, backlog) ||
      getsockname(ls, (struct sockaddr*)a, &len)) {
    perror("host_limits: socket");
    exit(1);
  }
  return ls;
}

/* Half the round trip of an 8-byte TCP ping-pong over loopback, in microseconds. */
static double tcpOneWay(int polling, int iters) {
  struct sockaddr_in a;
  int ls = loopbackListener(1, &a);
  int one = 1, fd;
  pid_t child = fork();
  if (child == 0) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&a, sizeof a)) _exit(1);
  } else {
    fd = accept(ls, NULL, NULL);
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (polling) fcntl(fd, F_SETFL, O_NONBLOCK);
  char b[8] = {0};
  const int warm = iters / 10;
  double t0 = 0;
  for (int i = 0; i < iters + warm; ++i) {
    if (i == warm) t0 = now();
    if (child == 0) {
      while (recv(fd, b, sizeof b, 0) < (ssize_t)sizeof b) {
      }
      if (send(fd, b, sizeof b, 0) != (ssize_t)sizeof b) _exit(1);
    } else {
      if (send(fd, b, sizeof b, 0) != (ssize_t)sizeof b) exit(1);
      while (recv(fd, b, sizeof b, 0) < (ssize_t)sizeof b) {
      }
    }
  }
  if (child == 0) _exit(0);
  const double us = (now() - t0) / iters / 2 * 1e6;
  waitpid(child, NULL, 0);
  close(fd);
  close(ls);
  return us;
}

static void futexWait(uint32_t* w, uint32_t v) { syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0); }
static void futexWake(uint32_t* w) { syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0); }

/* Half the round trip of two processes handing a counter back and forth in shared memory, in microseconds: each
 * waits for its turn (the counter's parity) sleeping on the futex word (`sleeping`) or spinning on it. */
static double handOffOneWay(int iters, int sleeping) {
  uint32_t* turn = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (turn == MAP_FAILED) exit(1);
  *turn = 0;
  const uint32_t warm = (uint32_t)iters / 10, total = 2 * ((uint32_t)iters + warm);
  pid_t child = fork();
  const uint32_t me = child == 0 ? 1 : 0;
  double t0 = 0;
  uint32_t v;
  for (uint32_t mine = me; mine < total; mine += 2) {  /* this process's hand-offs: the counter at `mine` */
    if (me == 0 && mine == 2 * warm) t0 = now();
    while ((v = __atomic_load_n(turn, __ATOMIC_ACQUIRE)) != mine)
      if (sleeping) futexWait(turn, v);
    __atomic_store_n(turn, mine + 1, __ATOMIC_RELEASE);
    if (sleeping) futexWake(turn);
  }
  if (child == 0) _exit(0);
  while ((v = __atomic_load_n(turn, __ATOMIC_ACQUIRE)) != total)  /* the child's last hand-off */
    if (sleeping) futexWait(turn, v);
  const double us = (now() - t0) / iters / 2 * 1e6;
  waitpid(child, NULL, 0);
  munmap(turn, 4096);
  return us;
}

/* memcpy of 1 MiB blocks on one core, GB/s. */
static double copyGBs(void) {
  const size_t n = 1 << 20;
  char* a = malloc(n);
  char* b = malloc(n);
  if (!a || !b) exit(1);
  memset(a, 1, n);
  memset(b, 2, n);
  const int iters = 2000;
  double t0 = 0;
  for (int i = 0; i < iters + 100; ++i) {
    if (i == 100) t0 = now();
    memcpy(i % 2 ? a : b, i % 2 ? b : a, n);
  }
  const double gbs = (double)n * iters / (now() - t0) / 1e9;
  free(a);
  free(b);
  return gbs;
}

/* process_vm_readv of `n` bytes from a child's buffer (allocated and written after the fork, so not shared
 * copy-on-write) into this process's, best of the rounds after a warm-up, GB/s. */
static double cmaReadGBs(size_t n, int iters) {
  int addrPipe[2], donePipe[2];
  if (pipe(addrPipe) || pipe(donePipe)) exit(1);
  pid_t child = fork();
  if (child == 0) {
    char* src = malloc(n);
    if (!src) _exit(1);
    memset(src, 3, n);
    uintptr_t at = (uintptr_t)src;
    if (write(addrPipe[1], &at, sizeof at) != (ssize_t)sizeof at) _exit(1);
    char c;
    if (read(donePipe[0], &c, 1) < 0) _exit(1);
    _exit(0);
  }
  uintptr_t at = 0;
  if (read(addrPipe[0], &at, sizeof at) != (ssize_t)sizeof at) exit(1);
  char* dst = malloc(n);
  if (!dst) exit(1);
  memset(dst, 4, n);
  double best = 1e30;
  for (int i = 0; i < iters + 2; ++i) {
    struct iovec local = {dst, n}, remote = {(void*)at, n};
    const double t0 = now();
    if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t)n) {
      best = -1;  /* refused (ptrace scope, another pid namespace): printed as 0 */
      break;
    }
    const double t = now() - t0;
    if (i >= 2 && t < best) best = t;
  }
  if (write(donePipe[1], "x", 1) != 1) exit(1);
  waitpid(child, NULL, 0);
  free(dst);
  close(addrPipe[0]);
  close(addrPipe[1]);
  close(donePipe[0]);
  close(donePipe[1]);
  return best > 0 ? (double)n / best / 1e9 : 0;
}

/* Reads or writes exactly `n` bytes of a pipe, exiting on failure. */
static void pipeIo(int fd, int writing, size_t n) {
  char b[64] = {0};
  while (n > 0) {
    const size_t k = n < sizeof b ? n : sizeof b;
    const ssize_t r = writing ? write(fd, b, k) : read(fd, b, k);
    if (r <= 0) exit(1);
    n -= (size_t)r;
  }
}

/* One round of `pairs` loopback TCP streams of `perPair` bytes each, all at once: GB/s of all of them together.
 * sndbuf > 0: the senders' SO_SNDBUF (else the kernel's autotuning). */
static double tcpStreamRound(int pairs, size_t perPair, int sndbuf) {
  struct sockaddr_in a;
  int ls = loopbackListener(pairs, &a);
  int ready[2], go[2], done[2];
  if (pipe(ready) || pipe(go) || pipe(done)) exit(1);
  const size_t chunk = (size_t)1 << 20;
  for (int i = 0; i < 2 * pairs; ++i) {
    if (fork() != 0) continue;
    const int sender = i % 2;
    int fd = sender ? socket(AF_INET, SOCK_STREAM, 0) : accept(ls, NULL, NULL);
    if (fd < 0 || (sender && connect(fd, (struct sockaddr*)&a, sizeof a))) _exit(1);
    if (sender && sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf)) _exit(1);
    char* buf = malloc(chunk);
    if (!buf) _exit(1);
    memset(buf, 5, chunk);
    pipeIo(ready[1], 1, 1);
    pipeIo(go[0], 0, 1);
    for (size_t moved = 0; moved < perPair;) {
      const size_t want = perPair - moved < chunk ? perPair - moved : chunk;
      const ssize_t r = sender ? send(fd, buf, want, 0) : recv(fd, buf, want, 0);
      if (r <= 0) _exit(1);
      moved += (size_t)r;
    }
    if (!sender) pipeIo(done[1], 1, 1);
    _exit(0);
  }
  pipeIo(ready[0], 0, (size_t)(2 * pairs));
  const double t0 = now();
  pipeIo(go[1], 1, (size_t)(2 * pairs));
  pipeIo(done[0], 0, (size_t)pairs);
  const double t = now() - t0;
  int status, failed = 0;
  for (int i = 0; i < 2 * pairs; ++i)
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  close(ls);
  close(ready[0]), close(ready[1]), close(go[0]), close(go[1]), close(done[0]), close(done[1]);
  if (failed) {
    fprintf(stderr, "host_limits: a loopback TCP stream failed\n");
    exit(1);
  }
  return (double)pairs * (double)perPair / t / 1e9;
}

/* `pairs` loopback TCP streams at once, GB/s of all of them together: the best of three rounds with the kernel's
 * autotuned send buffers and three with SO_SNDBUF 384 KiB (a sender at most 768 KiB ahead of its receiver, whose copy
 * out then finds the pages in cache: net-socket's setting inside a host). */
static double tcpStreamGBs(int pairs) {
  double best = 0;
  for (int round = 0; round < 6; ++round) {
    const double gbs = tcpStreamRound(pairs, (size_t)128 << 20, round % 2 ? 384 << 10 : 0);
    if (gbs > best) best = gbs;
  }
  return best;
}

/* One system call on `cpu` (this process pinned there, then given back its CPUs), best of five rounds, us. -1 when
 * the process may not run there. */
static double syscallUs(int cpu, int iters) {
  cpu_set_t before, one;
  if (sched_getaffinity(0, sizeof before, &before) != 0) return -1;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return -1;
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double t0 = now();
    for (int i = 0; i < iters; ++i) syscall(SYS_getppid);
    const double t = (now() - t0) / iters;
    if (t < best) best = t;
  }
  sched_setaffinity(0, sizeof before, &before);
  return best * 1e6;
}

int main(void) {
  printf("limit: tcp_loopback_one_way_polling %.2f us\n", tcpOneWay(1, 20000));
  printf("limit: tcp_loopback_one_way_blocking %.2f us\n", tcpOneWay(0, 5000));
  printf("limit: futex_wakeup_one_way %.2f us\n", handOffOneWay(5000, 1));
  printf("limit: memcpy_1MiB_one_core %.2f GB/s\n", copyGBs());
  printf("limit: shm_cacheline_one_way %.3f us\n", handOffOneWay(200000, 0));
  printf("limit: cma_read_1MiB_one_core %.2f GB/s\n", cmaReadGBs((size_t)1 << 20, 200));
  printf("limit: cma_read_16MiB_one_core %.2f GB/s\n", cmaReadGBs((size_t)16 << 20, 20));
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("limit: tcp_loopback_stream_all_cores %.2f GB/s\n", tcpStreamGBs(cores > 0 && cores < 64 ? (int)cores : 1));
  printf("limit: tcp_loopback_stream_one_pair %.2f GB/s\n", tcpStreamGBs(1));
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &mine)) printf("limit: syscall_cpu%d %.3f us\n", cpu, syscallUs(cpu, 200000));
  return 0;
}
