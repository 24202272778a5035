// The int8 product by VNNI alone (quant_matmul.cpp; AMX takes quant_panels.h's Panel): each group of a panel
// (panel_blocks.h) decoded into registers and multiplied by kRows rows of x at once, so W's bytes are read once, in order, and nothing
// is stored between: the same result, bit for bit, as quant_panels.h's rows over a decoded Panel (the same
// exact int32 dots, then the same scale_row steps in group order).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "panel_blocks.h"
#include "quant_panels.h"

namespace quant_stream {

constexpr int kRows = 8;   // rows of x sharing each decoded group

inline __m512i word_of(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm512_set1_epi32(v);
}

// R rows of x (from r0) against one panel: y[r][n0 .. n0 + cols) (row stride N)
template <class F, int R>
void rows(F, const uint8_t* panel, const quant_panels::Int8Rows& x, int64_t r0, float* y, int64_t N, int cols) {
  const int64_t K = x.K, groups = K / F::G;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < K / F::qk; ++i) {
    const uint8_t* blk = panel + i * F::bytes;
    for (int h = 0; h < F::groups; ++h) {
      const int64_t g = i * F::groups + h;
      __m512i w[F::words];
      F::words_of(blk, h, w);
      __m512 a, b;
      F::scales_of(blk, h, a, b);
      for (int r = 0; r < R; ++r) {
        const int8_t* xq = x.q.data() + (r0 + r) * K + g * F::G;
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();   // two chains, one exact sum
        for (int kk = 0; kk < F::words; kk += 2) {
          even = _mm512_dpbusd_epi32(even, w[kk], word_of(xq + 4 * kk));
          odd = _mm512_dpbusd_epi32(odd, w[kk + 1], word_of(xq + 4 * kk + 4));
        }
        acc[r] = quant_panels::scale_row(a, b, _mm512_add_epi32(even, odd), x.scale[(r0 + r) * groups + g],
                                         x.sums[(r0 + r) * groups + g], acc[r]);
      }
    }
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * N, m, acc[r]);
}

// M rows of x against one panel, kRows at a time (each chunk decodes the panel again, from cache)
template <class F>
void all_rows(F f, const uint8_t* panel, const quant_panels::Int8Rows& x, int64_t M, float* y, int64_t N, int cols) {
  int64_t r0 = 0;
  for (; r0 + kRows <= M; r0 += kRows) rows<F, kRows>(f, panel, x, r0, y, N, cols);
  switch (M - r0) {
    case 1: return rows<F, 1>(f, panel, x, r0, y, N, cols);
    case 2: return rows<F, 2>(f, panel, x, r0, y, N, cols);
    case 3: return rows<F, 3>(f, panel, x, r0, y, N, cols);
    case 4: return rows<F, 4>(f, panel, x, r0, y, N, cols);
    case 5: return rows<F, 5>(f, panel, x, r0, y, N, cols);
    case 6: return rows<F, 6>(f, panel, x, r0, y, N, cols);
    case 7: return rows<F, 7>(f, panel, x, r0, y, N, cols);
    default: return;
  }
}
static_assert(kRows == 8, "all_rows dispatches the last 1 .. kRows - 1");

}  // namespace quant_stream
