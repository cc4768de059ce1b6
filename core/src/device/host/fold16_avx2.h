// Folds of 16-bit floats written out for AVX2, eight elements a step.
//
// fp16 with the F16C conversions (vcvtph2ps / vcvtps2ph, x86-64 CPUs since 2012).
// The portable loops convert each element in software (Half::toFloat / fromFloat): 4 rows of 16K fp16 elements took
// about 160 us on the default path and 80 us on the fixed order. Half::fromFloat rounds to nearest even exactly as
// vcvtps2ph does (checked on all 2^32 floats), and every result below goes through at least one float addition, which
// quiets a signalling NaN either way: the same bits as the portable loops. Their own file, as det_sum_simd.cc: a
// translation unit that includes <immintrin.h> gets its target_clones loops left unvectorised by GCC 12.
#pragma once

#include <cstddef>

namespace tutti {

// The default fold's Sum (reduce_copy.cc): dst[d][i] = ((s0 + s1) + s2) + ..., rounded to fp16 after each addition,
// for nSrcs = 2 to 8 and nDsts = 1 or 2 (a destination may equal a source exactly). Returns the elements done (count
// rounded down to a multiple of 8), or 0 where it does not apply (other counts of rows, no F16C, another
// architecture): the caller does the rest.
size_t halfSumF16c(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count);

// bf16 (the default fold's Sum as halfSumF16c, with the same code: AVX2, and F16C, which every AVX2 CPU has): widened by a shift, added in float, rounded to nearest even on
// the 16 bits dropped after each addition, a NaN quieted, as BFloat16::fromFloat does element by element (4 rows of
// 16 KiB: 8.7 us that way).
size_t bf16SumAvx2(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count);

// The fixed-order Sum, Avg and PreMulSum of n = 2 to 8 fp16 rows (det_reduce.h): widened to float, each row times
// scalars[r] when `scaled`, the tree in float, divided by n when `average`, rounded once, a NaN as detNan. Returns the
// elements done as above.
size_t detSumHalfF16c(int n, bool scaled, bool average, const void* const* in, void* out, size_t count,
                      const float* scalars);

}  // namespace tutti
