#include "device/host/det_sum_simd.h"

#include "device/common/det_reduce.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TUTTI_DET_SUM_X86 1
#endif

namespace tutti {

#ifdef TUTTI_DET_SUM_X86
namespace {

// det_reduce.h's tree over N vectors of four doubles: perfectSum4<Lo, Size> the perfect subtree over rows
// [Lo, Lo + Size), blockSum4<Lo, Rem> the blocks of Rem's binary digits from row Lo, largest first, combined from the
// last backwards (B0 + (B1 + B2)). With kFma the first level adds each pair as a * 1.0 + b in one vfmadd213pd, written
// in assembly so that the functions keep target("avx2") and the compiler itself emits no FMA (the CPU must have it):
// a * 1.0 is exact, so the one rounding is the add's (the same bits, a NaN made detNan after), and the pairs go to
// the multiply-add units while the converts and the other adds take the add units (Zen 4, `fold_perf -l 4 -F 0|1`,
// three interleaved rounds, us: 4 rows of 4K floats 1.47-1.48 -> 1.17-1.22, of 16K 5.65-5.84 -> 4.65-4.72; 8 rows of
// 4K 2.61-2.64 -> 2.14-2.18, of 16K 10.4-10.7 -> 8.56-8.60; benchmarks/results/fold.md).
template <bool kFma>
__attribute__((target("avx2"), always_inline)) inline __m256d pairSum4(__m256d a, __m256d b) {
  if constexpr (kFma) {
    const __m256d one = _mm256_set1_pd(1.0);
    asm("vfmadd213pd {%2, %1, %0|%0, %1, %2}" : "+x"(a) : "x"(one), "x"(b));  // a = one * a + b (AT&T|Intel)
    return a;
  } else {
    return _mm256_add_pd(a, b);
  }
}
template <int Lo, int Size, bool kFma>
__attribute__((target("avx2"), always_inline)) inline __m256d perfectSum4(const __m256d* x) {
  if constexpr (Size == 1) return x[Lo];
  else if constexpr (Size == 2) return pairSum4<kFma>(x[Lo], x[Lo + 1]);
  else return _mm256_add_pd(perfectSum4<Lo, Size / 2, kFma>(x), perfectSum4<Lo + Size / 2, Size / 2, kFma>(x));
}
template <int Lo, int Rem, bool kFma>
__attribute__((target("avx2"), always_inline)) inline __m256d blockSum4(const __m256d* x) {
  constexpr int kBlock = 1 << (31 - __builtin_clz(unsigned(Rem)));
  if constexpr (kBlock == Rem) return perfectSum4<Lo, kBlock, kFma>(x);
  else return _mm256_add_pd(perfectSum4<Lo, kBlock, kFma>(x), blockSum4<Lo + kBlock, Rem - kBlock, kFma>(x));
}

// Each row widened by one vcvtps2pd (the compiler's vectorisation of detSumFixed splits the widening loads and
// reassembles them: 4 rows of 16K floats in cache took 15.9 us, this 6.9; 8 rows 26.7 and 13.3). IEEE double adds,
// multiplies and divides in the tree's order (the fused first level above rounds as they do), and vcvtpd2ps rounds
// to nearest even as a cast does: the bits of the scalar form.
template <int N, bool kScaled, bool kAverage, bool kFma>
__attribute__((target("avx2"))) size_t sumRows4(const void* const* in, void* out, size_t count, const double* scalars) {
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
    __m256d sum = blockSum4<0, N, kFma>(x);
    if constexpr (kAverage) sum = _mm256_div_pd(sum, _mm256_set1_pd(double(N)));
    const __m128 f = _mm256_cvtpd_ps(sum);
    _mm_storeu_ps(dst + i, _mm_blendv_ps(f, nan, _mm_cmpunord_ps(f, f)));
  }
  return i;
}

// The same eight doubles a step (AVX-512F; VL for the eight-float mask move). Zen 4, 4 rows of 64K floats in L2:
// 20.9 us with AVX2's four lanes, 13.1 with eight (the widening converts bound both; the fp32 sum takes 12.3).
// The tree's first level adds each pair as a * 1.0 + b in one fused multiply-add: a * 1.0 is exact, so the one
// rounding is the add's (the same bits, a NaN made detNan after), and the pairs go to the multiply-add units while
// the widening converts and the other levels' adds take the add units (Zen 4, fold_perf, three interleaved rounds,
// us: 8 rows of 4K floats 1.54-1.57 -> 1.28-1.45, of 16K 5.95-6.36 -> 5.05-5.60; 4 rows of 4K 0.76-0.78 -> 0.65-0.71,
// of 16K 2.91-3.05 -> 2.47-2.77; from 64K floats a row, in L3 or memory, a few percent; benchmarks/results/fold.md).
// The other levels are fused multiply-adds too (x * 1.0 + y, one rounding as the add's), which leaves the add units
// to the converts alone: 8 rows of 16K floats, four interleaved rounds, 4.98-5.19 -> 4.82-4.97 us.
template <int Lo, int Size>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline __m512d perfectSum8(const __m512d* x) {
  if constexpr (Size == 1) return x[Lo];
  else if constexpr (Size == 2) return _mm512_fmadd_pd(x[Lo], _mm512_set1_pd(1.0), x[Lo + 1]);
  else return _mm512_fmadd_pd(perfectSum8<Lo, Size / 2>(x), _mm512_set1_pd(1.0), perfectSum8<Lo + Size / 2, Size / 2>(x));
}
template <int Lo, int Rem>
__attribute__((target("avx512f,avx512vl"), always_inline)) inline __m512d blockSum8(const __m512d* x) {
  constexpr int kBlock = 1 << (31 - __builtin_clz(unsigned(Rem)));
  if constexpr (kBlock == Rem) return perfectSum8<Lo, kBlock>(x);
  else return _mm512_fmadd_pd(perfectSum8<Lo, kBlock>(x), _mm512_set1_pd(1.0), blockSum8<Lo + kBlock, Rem - kBlock>(x));
}

// Software prefetch of cold rows (detSumFloatSimd's `prefetch`), each row's line this many bytes ahead, where there
// are more than 4 rows.
constexpr int kPrefetchAhead = 1024;
constexpr int kPrefetchMinRows = 5;

template <int N, bool kScaled, bool kAverage>
__attribute__((target("avx512f,avx512vl"))) size_t sumRows8(const void* const* in, void* out, size_t count,
                                                             const double* scalars, bool prefetch) {
  const float* src[N];
  for (int k = 0; k < N; ++k) src[k] = static_cast<const float*>(in[k]);
  float* dst = static_cast<float*>(out);
  __m512d scale[N];
  for (int k = 0; k < N; ++k) scale[k] = _mm512_set1_pd(kScaled ? scalars[k] : 1.0);
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(floatBits(detNan<float>()))));
  constexpr bool kPrefetchRows = N >= kPrefetchMinRows;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    if (kPrefetchRows && prefetch && (i & 15) == 0) {  // each row's line 1 KiB ahead, once a line
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r) _mm_prefetch(reinterpret_cast<const char*>(src[r] + i) + kPrefetchAhead, _MM_HINT_T0);
    }
    __m512d x[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
      x[r] = _mm512_cvtps_pd(_mm256_loadu_ps(src[r] + i));
      if constexpr (kScaled) x[r] = _mm512_mul_pd(x[r], scale[r]);
    }
    __m512d sum = blockSum8<0, N>(x);
    if constexpr (kAverage) sum = _mm512_div_pd(sum, _mm512_set1_pd(double(N)));
    const __m256 f = _mm512_cvtpd_ps(sum);
    _mm256_storeu_ps(dst + i, _mm256_mask_mov_ps(f, _mm256_cmp_ps_mask(f, f, _CMP_UNORD_Q), nan));
  }
  return i;
}

// Two fp32 rows summed in fp32 (det_reduce_copy.cc's detSumFixed: the same bits as the fixed order's widened sum),
// NaNs made detNan by a mask move, into one or two outputs: up to 15 elements first so that the output is 64-byte
// aligned, then 32 floats a step in two AVX-512 vectors, the last 0-31 elements in masked steps. Its rows mostly
// come from another core's cache (a peer's slot); the compiler's eight-lane loop, a compare and a blend more than
// the default path's add, took 6-10% longer there than the add alone (2 processes over shm, AllReduce of 32 KiB and
// 256 KiB). Without the aligned output, 2 threads (rows and outputs 16 bytes past a 64-byte line, as malloc gives
// them) ran 10% longer than the compiler's loop: every 64-byte access then spans two lines.
template <bool kTwoOut>
__attribute__((target("avx512f"), always_inline)) inline void pairStep16(const float* a, const float* b, float* dst,
                                                                        float* dst2, __mmask16 m, __m512 nan) {
  __m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a), _mm512_maskz_loadu_ps(m, b));
  s = _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q), nan);
  _mm512_mask_storeu_ps(dst, m, s);
  if constexpr (kTwoOut) _mm512_mask_storeu_ps(dst2, m, s);
}

template <bool kTwoOut>
__attribute__((target("avx512f"))) size_t sumPair16(const void* const* in, void* const* out, size_t count) {
  const float* a = static_cast<const float*>(in[0]);
  const float* b = static_cast<const float*>(in[1]);
  float* dst = static_cast<float*>(out[0]);
  float* dst2 = kTwoOut ? static_cast<float*>(out[1]) : nullptr;
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(floatBits(detNan<float>()))));
  auto mask = [](size_t k) { return static_cast<__mmask16>((1u << k) - 1); };
  size_t i = 0;
  const uintptr_t off = reinterpret_cast<uintptr_t>(dst) % 64;
  if (off % sizeof(float) == 0 && off != 0) {
    i = std::min(count, (64 - off) / sizeof(float));
    pairStep16<kTwoOut>(a, b, dst, dst2, mask(i), nan);
  }
  for (; i + 32 <= count; i += 32) {
    __m512 s0 = _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    __m512 s1 = _mm512_add_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
    s0 = _mm512_mask_mov_ps(s0, _mm512_cmp_ps_mask(s0, s0, _CMP_UNORD_Q), nan);
    s1 = _mm512_mask_mov_ps(s1, _mm512_cmp_ps_mask(s1, s1, _CMP_UNORD_Q), nan);
    _mm512_storeu_ps(dst + i, s0);
    _mm512_storeu_ps(dst + i + 16, s1);
    if constexpr (kTwoOut) {
      _mm512_storeu_ps(dst2 + i, s0);
      _mm512_storeu_ps(dst2 + i + 16, s1);
    }
  }
  for (; i < count; i += 16) {
    const size_t k = std::min<size_t>(16, count - i);
    pairStep16<kTwoOut>(a + i, b + i, dst + i, kTwoOut ? dst2 + i : nullptr, k == 16 ? __mmask16(0xffff) : mask(k),
                        nan);
  }
  return count;
}

template <int N, bool kFma>
size_t sumRowsOf4(bool scaled, bool average, const void* const* in, void* out, size_t count, const double* scalars) {
  if (scaled) return sumRows4<N, true, false, kFma>(in, out, count, scalars);
  if (average) return sumRows4<N, false, true, kFma>(in, out, count, scalars);
  return sumRows4<N, false, false, kFma>(in, out, count, scalars);
}

template <int N>
size_t sumRowsOf(int lanes, bool fma, bool prefetch, bool scaled, bool average, const void* const* in, void* out,
                 size_t count, const double* scalars) {
  if (lanes == 8) {
    if (scaled) return sumRows8<N, true, false>(in, out, count, scalars, prefetch);
    if (average) return sumRows8<N, false, true>(in, out, count, scalars, prefetch);
    return sumRows8<N, false, false>(in, out, count, scalars, prefetch);
  }
  static const bool cpuFma = __builtin_cpu_supports("fma");
  return fma && cpuFma ? sumRowsOf4<N, true>(scaled, average, in, out, count, scalars)
                       : sumRowsOf4<N, false>(scaled, average, in, out, count, scalars);
}

}  // namespace

int detSumFloatLanes() {
  static const int lanes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 8
                           : __builtin_cpu_supports("avx2")                                        ? 4
                                                                                                   : 0;
  return lanes;
}

size_t detSumFloatSimd(int n, bool scaled, bool average, const void* const* in, void* out, size_t count,
                       const double* scalars, int lanes, bool fma, bool prefetch) {
  const int best = detSumFloatLanes();
  if (lanes == 0) lanes = best;
  if ((lanes != 4 && lanes != 8) || lanes > best || count < size_t(lanes)) return 0;
  switch (n) {
    case 3: return sumRowsOf<3>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    case 4: return sumRowsOf<4>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    case 5: return sumRowsOf<5>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    case 6: return sumRowsOf<6>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    case 7: return sumRowsOf<7>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    case 8: return sumRowsOf<8>(lanes, fma, prefetch, scaled, average, in, out, count, scalars);
    default: return 0;
  }
}

size_t detSumFloatPair(const void* const* in, int nOut, void* const* out, size_t count) {
  if (detSumFloatLanes() != 8 || (nOut != 1 && nOut != 2)) return 0;
  return nOut == 2 ? sumPair16<true>(in, out, count) : sumPair16<false>(in, out, count);
}

#else

int detSumFloatLanes() { return 0; }

size_t detSumFloatSimd(int, bool, bool, const void* const*, void*, size_t, const double*, int, bool, bool) {
  return 0;
}

size_t detSumFloatPair(const void* const*, int, void* const*, size_t) { return 0; }

#endif

}  // namespace tutti
