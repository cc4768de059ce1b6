// The CPU SIMT emulator behind simt.h: runs a kernel launch (grid x block threads) on the CPU.
//
//   - Every GPU thread is a fiber (Boost.Context); the fibers of one block share one OS thread and switch
//     only at the emulator's calls (barriers, warp operations, flag loads/stores, spin pauses).
//   - Every block has its own OS thread: blocks of a launch (channels) and the ranks' launches spin on each
//     other's flags, and each must progress as co-resident blocks on a GPU do.
//   - Warps are 32 consecutive threads; warp operations (shuffle, ballot, sync, 128-bit line accesses) are
//     warp barriers with the lanes' values exchanged.
//   - A seed randomizes switch points: with seed != 0 every flag access may hand the OS thread to another
//     fiber of the block (a pseudo-random choice per block, reproducible from the seed), so orderings that
//     rely on luck show up. The seed is part of every error the emulator reports.
//   - A block whose fibers all wait on barriers that can never complete (a barrier count that does not
//     match the threads reaching it, threads that exited) fails the launch with a message, never hangs.
// Nothing here is thread-safe across blocks except what the device code itself synchronizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti::simt::emu {

struct Block;

// One emulated GPU thread.
struct Thread {
  int tid = 0;
  Block* block = nullptr;
};

struct Block {
  int bid = 0, nblocks = 0, nthreads = 0;
  char* shared = nullptr;  // dynamic shared memory of the block (16-byte aligned)
};

// The thread (fiber) running now on this OS thread. Only valid inside a launch.
Thread& current();

// Switch points and waiting.
void switchPoint();       // may switch fibers (seeded), no-op with seed 0
void spinYield();         // a poll found nothing: run the block's other fibers, back off if none progresses
void sleepNs(unsigned ns);
uint64_t clockNs();

// bar.sync id, n: waits until n threads of the block reached barrier `id` (n a multiple of 32, id < 16).
void barrier(int id, int n);
// Warp collectives among the lanes of `mask` (every lane of the mask must call the same operation).
void warpSync(unsigned mask);
uint64_t warpShfl(unsigned mask, uint64_t v, int srcLane);
unsigned warpBallot(unsigned mask, bool p);
// One 16-byte access per lane, performed for the whole warp at once (see simt.h): store = true writes
// words[0..1] to p, else reads p into words[0..1].
void warpAccess128(unsigned mask, void* p, uint64_t* words, bool store);

struct LaunchParams {
  int grid = 1;                 // blocks
  int block = 32;               // threads per block (a multiple of 32)
  size_t sharedBytes = 0;       // dynamic shared memory per block
  uint64_t seed = 0;            // 0: switch only where the device code waits
  size_t stackBytes = 64 << 10; // per fiber
};

// Runs `entry(arg)` on every thread of the launch and returns when every thread has returned. On an
// emulator failure (barrier deadlock, bad launch shape) returns false with *error set (naming the seed).
// Device code reports its own errors through its memory, as on a GPU.
bool launch(const LaunchParams& params, void (*entry)(const void* arg), const void* arg, std::string* error);

}  // namespace tutti::simt::emu
