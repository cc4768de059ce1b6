// The deterministic fp32 sum written out with x86 vector instructions (det_reduce_copy.cc's fast path). Its own
// file: a translation unit that includes <immintrin.h> gets its target_clones loops left unvectorised by GCC 12
// (det_reduce_copy.cc's fp64 and bf16 sums ran one element at a time once it did).
#pragma once

#include <cstddef>

namespace tutti {

// The widest form detSumFloatSimd runs on this CPU: 8 lanes (AVX-512F with AVX-512VL), 4 (AVX2) or 0 (neither,
// or another architecture).
int detSumFloatLanes();

// out[i] = the fixed-order tree (det_reduce.h) over n = 3 to 8 fp32 rows, for i below the returned count: widened to
// double, each row times scalars[r] when `scaled`, the sum divided by n when `average`, rounded once to fp32, a NaN as
// detNan. The same bits as detSumFixed, `lanes` elements a step: 0 for detSumFloatLanes(), else 4 or 8 (a test's
// choice). With 4 lanes the tree's first level runs on fused multiply-adds where the CPU has FMA and `fma` is set
// (false: plain adds, the form of CPUs without FMA; a test's choice). Returns count rounded down to a multiple of the
// lanes, or 0 where it does not apply (another n, lanes the CPU lacks): the caller does the rest. `prefetch`: the rows
// are cold (read once, from memory): with 8 lanes and more than 4 rows, each row's lines are prefetched 1 KiB ahead.
// 8 threads on two cores, ReduceScatter of 4 MiB (each thread 8 rows of 512 KiB, other threads' inputs): the
// hardware's prefetch alone left the fixed order's loop (converts and the tree, where the default's is loads and
// adds) waiting on memory, at 1.14-1.30 times the default's call (each launch's median round, four launches),
// 1.02-1.20 with it; in three more launches each, 1.18-1.19 without and 0.99-1.12 with. With 4 rows it cost: 4
// threads, 4 MiB (4 rows of 1 MiB), 0.99-1.07 without, 1.05-1.20 with; 1 MiB, 10%.
size_t detSumFloatSimd(int n, bool scaled, bool average, const void* const* in, void* out, size_t count,
                       const double* scalars, int lanes = 0, bool fma = true, bool prefetch = false);

// out[d][i] = in[0][i] + in[1][i] in fp32, a NaN as detNan, for d below nOut (1 or 2) and every i below count, with
// AVX-512F: the fixed order's bits for two fp32 rows (detSumFixed). Returns count, or 0 without AVX-512F (the caller
// does it all). An output may be one of the inputs.
size_t detSumFloatPair(const void* const* in, int nOut, void* const* out, size_t count);

}  // namespace tutti
