// Host reduction loops compiled twice: for AVX2 and for the baseline x86-64, the CPU's choice made once when the
// library loads (GCC/Clang function multiversioning, an ifunc). The loops vectorise over elements only, and AVX2
// brings no fused multiply-add, so both versions give every element the same bits (deterministic reductions rely on
// it). On AVX2, four doubles a vector instead of two cut a fixed-order fp32 sum in cache by about a third (4 rows:
// 41 -> 28 us). Left out under ThreadSanitizer, whose runtime is not yet set up when the loader runs an ifunc
// resolver, and where the compiler or target has no clones: the baseline version alone.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TUTTI_SIMD_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TUTTI_SIMD_NO_CLONES 1
#endif

#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(TUTTI_SIMD_NO_CLONES)
#define TUTTI_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TUTTI_SIMD_CLONES
#endif
