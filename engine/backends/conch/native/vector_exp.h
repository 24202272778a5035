// 2^t in AVX512 registers, shared by the kernels that need an exponential in float32 (attention_blocks.h's online
// softmax, the matmuls' SiLU gate).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#define CONCH_AVX512_BF16 1

namespace vector_exp {

// 2^t (to ~1e-7 relative; t below -126 as -126, above 128 inf): 2^n * p(f), n = round(t), f in [-0.5, 0.5],
// Taylor to degree 6. p(0) == 1 exactly, so a softmax correction of 2^0 leaves a row unchanged.
inline __m512 exp2_ps(__m512 t) {
  t = _mm512_max_ps(t, _mm512_set1_ps(-126.f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.540353e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// x rounded to bf16 and back: the value a bf16 tensor would hold.
inline __m512 as_bf16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)), 16));
}

// silu(gate) * up from a GLU product's float32 sums, rounded as fused_ops.cpp's silu_mul rounds the unfused
// product's bf16 output: gate and up to bf16, silu(gate) = gate / (1 + e^-gate) to bf16, the product to bf16
// (the caller's store). tile_matmul.cpp's and narrow_matmul.cpp's matmul_glu.
inline __m256i silu_mul_bf16(__m512 gate, __m512 up) {
  const __m512 g = as_bf16(gate), u = as_bf16(up);
  const __m512 e = exp2_ps(_mm512_mul_ps(g, _mm512_set1_ps(-1.4426950408889634f)));
  const __m512 silu = as_bf16(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.f), e)));
  return (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(silu, u));
}

}  // namespace vector_exp
#endif
