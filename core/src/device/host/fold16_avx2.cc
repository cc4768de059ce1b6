#include "device/host/fold16_avx2.h"

#include "device/common/det_reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TUTTI_FOLD16_AVX2 1
#endif

#include <cstdint>
#include <type_traits>

namespace tutti {

#ifdef TUTTI_FOLD16_AVX2
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load8(const void* row, size_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
}

__attribute__((target("avx2,f16c"), always_inline)) inline void store8(void* row, size_t i, __m128i h) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(row) + i), h);
}

// Eight bf16 elements of `row` from i as floats: each in the high half of a 32-bit lane.
__attribute__((target("avx2"), always_inline)) inline __m256 bf16Load8(const void* row, size_t i) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// f rounded to bf16 as BFloat16::fromFloat does: to nearest even on the low 16 bits (an overflow carries into
// infinity), a NaN quieted (bit 22 set). The bf16 is the high half of each lane; the low half is left over.
__attribute__((target("avx2"), always_inline)) inline __m256i bf16Round(__m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// The float a rounded lane stands for.
__attribute__((target("avx2"), always_inline)) inline __m256 bf16Value(__m256i r) {
  return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

// The high halves of eight rounded lanes stored as bf16 at row + i.
__attribute__((target("avx2"), always_inline)) inline void bf16Store8(void* row, size_t i, __m256i r) {
  const __m256i packed = _mm256_packus_epi32(_mm256_srli_epi32(r, 16), _mm256_srli_epi32(r, 16));
  const __m128i h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));  // lanes 0 and 2: the 8 results
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(row) + i), h);
}

// The 16-bit formats the default fold handles, eight elements at a time: load widens to float, round gives a sum
// in the format (Rounded), value widens it back, store writes it.
struct HalfLanes {
  using Rounded = __m128i;
  __attribute__((target("avx2,f16c"), always_inline)) static __m256 load(const void* row, size_t i) {
    return load8(row, i);
  }
  __attribute__((target("avx2,f16c"), always_inline)) static Rounded round(__m256 f) {
    return _mm256_cvtps_ph(f, kRound);
  }
  __attribute__((target("avx2,f16c"), always_inline)) static __m256 value(Rounded r) { return _mm256_cvtph_ps(r); }
  __attribute__((target("avx2,f16c"), always_inline)) static void store(void* row, size_t i, Rounded r) {
    store8(row, i, r);
  }
};

struct BFloat16Lanes {
  using Rounded = __m256i;
  __attribute__((target("avx2"), always_inline)) static __m256 load(const void* row, size_t i) {
    return bf16Load8(row, i);
  }
  __attribute__((target("avx2"), always_inline)) static Rounded round(__m256 f) { return bf16Round(f); }
  __attribute__((target("avx2"), always_inline)) static __m256 value(Rounded r) { return bf16Value(r); }
  __attribute__((target("avx2"), always_inline)) static void store(void* row, size_t i, Rounded r) {
    bf16Store8(row, i, r);
  }
};

// The default fold: every source added in order, each sum rounded to the format before the next, the result
// written to D outputs.
template <class L, int N, int D>
__attribute__((target("avx2,f16c"))) size_t sumRows(const void* const* srcs, void* const* dsts, size_t count) {
  const void* s[N];
  for (int j = 0; j < N; ++j) s[j] = srcs[j];
  void* d[D];
  for (int k = 0; k < D; ++k) d[k] = dsts[k];
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    typename L::Rounded r = L::round(_mm256_add_ps(L::load(s[0], i), L::load(s[1], i)));
#pragma GCC unroll 8
    for (int j = 2; j < N; ++j) r = L::round(_mm256_add_ps(L::value(r), L::load(s[j], i)));
#pragma GCC unroll 2
    for (int k = 0; k < D; ++k) L::store(d[k], i, r);
  }
  return i;
}

// f(std::integral_constant<int, N>{}) for n rows, 2 <= n <= 8; 0 for any other n.
template <class F>
size_t byRows(int n, F&& f) {
  switch (n) {
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: return 0;
  }
}

template <class L>
size_t sumRowsOf(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count) {
  return byRows(nSrcs, [&](auto rows) {
    constexpr int N = decltype(rows)::value;
    return nDsts == 1 ? sumRows<L, N, 1>(srcs, dsts, count) : sumRows<L, N, 2>(srcs, dsts, count);
  });
}

// det_reduce.h's tree over N vectors of eight floats (as det_sum_simd.cc's over doubles).
template <int Lo, int Size>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 perfectSum8(const __m256* x) {
  if constexpr (Size == 1) return x[Lo];
  else return _mm256_add_ps(perfectSum8<Lo, Size / 2>(x), perfectSum8<Lo + Size / 2, Size / 2>(x));
}
template <int Lo, int Rem>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 blockSum8(const __m256* x) {
  constexpr int kBlock = 1 << (31 - __builtin_clz(unsigned(Rem)));
  if constexpr (kBlock == Rem) return perfectSum8<Lo, kBlock>(x);
  else return _mm256_add_ps(perfectSum8<Lo, kBlock>(x), blockSum8<Lo + kBlock, Rem - kBlock>(x));
}

// The fixed order: IEEE float multiplies, adds and divides in the tree's order (no fused multiply-add), one rounding
// to fp16, NaN as detNan.
template <int N, bool kScaled, bool kAverage>
__attribute__((target("avx2,f16c"))) size_t detRows(const void* const* in, void* out, size_t count,
                                                    const float* scalars) {
  const void* src[N];
  for (int k = 0; k < N; ++k) src[k] = in[k];
  __m256 scale[N];
  for (int k = 0; k < N; ++k) scale[k] = _mm256_set1_ps(kScaled ? scalars[k] : 1.0f);
  const __m128i nan = _mm_set1_epi16(static_cast<short>(detNan<Half>().bits));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 x[N];
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r) {
      x[r] = load8(src[r], i);
      if constexpr (kScaled) x[r] = _mm256_mul_ps(x[r], scale[r]);
    }
    __m256 sum = blockSum8<0, N>(x);
    if constexpr (kAverage) sum = _mm256_div_ps(sum, _mm256_set1_ps(float(N)));
    const __m128i h = _mm256_cvtps_ph(sum, kRound);
    // A NaN sum as detNan: the unordered compare's 32-bit lanes packed to 16 (all ones or all zeros each).
    const __m256 isNan = _mm256_cmp_ps(sum, sum, _CMP_UNORD_Q);
    const __m128i mask = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(isNan)),
                                         _mm256_extractf128_si256(_mm256_castps_si256(isNan), 1));
    store8(out, i, _mm_blendv_epi8(h, nan, mask));
  }
  return i;
}

template <int N>
size_t detRowsOf(bool scaled, bool average, const void* const* in, void* out, size_t count, const float* scalars) {
  if (scaled) return detRows<N, true, false>(in, out, count, scalars);
  if (average) return detRows<N, false, true>(in, out, count, scalars);
  return detRows<N, false, false>(in, out, count, scalars);
}

bool haveF16c() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return ok;
}

}  // namespace

// Every CPU with AVX2 has F16C too; the bf16 fold, which shares the fp16 one's code, asks for both.
size_t halfSumF16c(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count) {
  if (count < 8 || nDsts < 1 || nDsts > 2 || !haveF16c()) return 0;
  return sumRowsOf<HalfLanes>(nSrcs, srcs, nDsts, dsts, count);
}

size_t bf16SumAvx2(int nSrcs, const void* const* srcs, int nDsts, void* const* dsts, size_t count) {
  if (count < 8 || nDsts < 1 || nDsts > 2 || !haveF16c()) return 0;
  return sumRowsOf<BFloat16Lanes>(nSrcs, srcs, nDsts, dsts, count);
}

size_t detSumHalfF16c(int n, bool scaled, bool average, const void* const* in, void* out, size_t count,
                      const float* scalars) {
  if (count < 8 || !haveF16c()) return 0;
  return byRows(n, [&](auto rows) {
    return detRowsOf<decltype(rows)::value>(scaled, average, in, out, count, scalars);
  });
}

#else

size_t halfSumF16c(int, const void* const*, int, void* const*, size_t) { return 0; }
size_t bf16SumAvx2(int, const void* const*, int, void* const*, size_t) { return 0; }
size_t detSumHalfF16c(int, bool, bool, const void* const*, void*, size_t, const float*) { return 0; }

#endif

}  // namespace tutti
