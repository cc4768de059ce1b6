#include "device/host/det_sum_avx2.h"

#include "device/common/det_reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TUTTI_DET_SUM_AVX2 1
#endif

namespace tutti {

#ifdef TUTTI_DET_SUM_AVX2
namespace {

// det_reduce.h's tree over N vectors of four doubles: perfectSum4<Lo, Size> the perfect subtree over rows
// [Lo, Lo + Size), blockSum4<Lo, Rem> the blocks of Rem's binary digits from row Lo, largest first, combined from the
// last backwards (B0 + (B1 + B2)).
template <int Lo, int Size>
__attribute__((target("avx2"), always_inline)) inline __m256d perfectSum4(const __m256d* x) {
  if constexpr (Size == 1) return x[Lo];
  else return _mm256_add_pd(perfectSum4<Lo, Size / 2>(x), perfectSum4<Lo + Size / 2, Size / 2>(x));
}
template <int Lo, int Rem>
__attribute__((target("avx2"), always_inline)) inline __m256d blockSum4(const __m256d* x) {
  constexpr int kBlock = 1 << (31 - __builtin_clz(unsigned(Rem)));
  if constexpr (kBlock == Rem) return perfectSum4<Lo, kBlock>(x);
  else return _mm256_add_pd(perfectSum4<Lo, kBlock>(x), blockSum4<Lo + kBlock, Rem - kBlock>(x));
}

// Each row widened by one vcvtps2pd (the compiler's vectorisation of detSumFixed splits the widening loads and
// reassembles them: 4 rows of 16K floats in cache took 15.9 us, this 6.9; 8 rows 26.7 and 13.3). IEEE double adds,
// multiplies and divides in the tree's order, no fused multiply-add, and vcvtpd2ps rounds to nearest even as a cast
// does: the bits of the scalar form.
template <int N, bool kScaled, bool kAverage>
__attribute__((target("avx2"))) size_t sumRows(const void* const* in, void* out, size_t count, const double* scalars) {
  const float* src[N];
  for (int k = 0; k < N; ++k) src[k] = static_cast<const float*>(in[k]);
  float* dst = static_cast<float*>(out);
  __m256d scale[N];
  for (int k = 0; k < N; ++k) scale[k] = _mm256_set1_pd(kScaled ? scalars[k] : 1.0);
  const __m128 nan = _mm_castsi128_ps(_mm_set1_epi32(static_cast<int>(floatBits(detNan<float>()))));
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    __m256d x[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
      x[r] = _mm256_cvtps_pd(_mm_loadu_ps(src[r] + i));
      if constexpr (kScaled) x[r] = _mm256_mul_pd(x[r], scale[r]);
    }
    __m256d sum = blockSum4<0, N>(x);
    if constexpr (kAverage) sum = _mm256_div_pd(sum, _mm256_set1_pd(double(N)));
    const __m128 f = _mm256_cvtpd_ps(sum);
    _mm_storeu_ps(dst + i, _mm_blendv_ps(f, nan, _mm_cmpunord_ps(f, f)));
  }
  return i;
}

template <int N>
size_t sumRowsOf(bool scaled, bool average, const void* const* in, void* out, size_t count, const double* scalars) {
  if (scaled) return sumRows<N, true, false>(in, out, count, scalars);
  if (average) return sumRows<N, false, true>(in, out, count, scalars);
  return sumRows<N, false, false>(in, out, count, scalars);
}

}  // namespace

size_t detSumFloatAvx2(int n, bool scaled, bool average, const void* const* in, void* out, size_t count,
                       const double* scalars) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (!avx2 || count < 4) return 0;
  switch (n) {
    case 3: return sumRowsOf<3>(scaled, average, in, out, count, scalars);
    case 4: return sumRowsOf<4>(scaled, average, in, out, count, scalars);
    case 5: return sumRowsOf<5>(scaled, average, in, out, count, scalars);
    case 6: return sumRowsOf<6>(scaled, average, in, out, count, scalars);
    case 7: return sumRowsOf<7>(scaled, average, in, out, count, scalars);
    case 8: return sumRowsOf<8>(scaled, average, in, out, count, scalars);
    default: return 0;
  }
}

#else

size_t detSumFloatAvx2(int, bool, bool, const void* const*, void*, size_t, const double*) { return 0; }

#endif

}  // namespace tutti
