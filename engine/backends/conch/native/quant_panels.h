// The int8 product of quant_matmul.cpp: y = x @ W^T, x's rows rounded to int8, W in ggml blocks, 16 columns
// of W at a time (a panel) in the int32 / float32 lanes of one register. Here: x's int8 rows, the float steps
// every int8 path shares (scale_row), and the products over a Panel decoded into memory (AMX tiles, the VNNI
// rows beside them, the float32 product); quant_stream.h streams a panel through registers for VNNI alone.
//
// Int8Rows: each row of x rounded per block of A values (scale = the block's largest |x| / 127, to nearest
//   even; A = 256 for a K-quant's rows, 32 otherwise: llama.cpp's Q8_K and Q8_0), and per group of G values
//   (the weight type's: 16 for Q6_K, 32 for the others) the row's scale and scale * sum(q) (the factor of the
//   group's b term).
// Panel: 16 rows of W decoded from their panel (panel_blocks.h: value = a * q + b) as VNNI and AMX read them:
//   word kk of column c (its bytes 4kk..4kk+3) at words[kk * 16 + c]; a and b per group as 16-column vectors.
// The product, per row of x and group g, for the panel's 16 columns at once:
//   dot = sum over the group of q * xq            (int32, exact: VNNI's 4 products a lane, or an AMX tile)
//   acc = fma(float(dot), a_g * scale_g, acc)     then   acc = fma(b_g, sum_g, acc)
// in group order. A row's result is these operations on that row alone: batch-invariant, and the same bits
// whichever instructions form the exact int32 dot.
#pragma once

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "amx_tiles.h"
#include "panel_blocks.h"

namespace quant_panels {

using panel_blocks::kPanel;

constexpr int kTileRows = 16;   // rows of x an AMX tile holds

struct Int8Rows {
  std::vector<int8_t> q;          // (M, K)
  std::vector<float> scale, sums; // (M, K / G)
  int64_t K, G, A;                // A: values sharing one scale (32, or 256 for a K-quant's rows, as llama.cpp)

  Int8Rows(const float* x, int64_t M, int64_t K, int64_t G, int64_t A)
      : q(M * K), scale(M * K / G), sums(M * K / G), K(K), G(G), A(A) {
    at::parallel_for(0, M, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t m = lo; m < hi; ++m)
        for (int64_t v = 0; v < K; v += A) block(x + m * K + v, m * K + v);
    });
  }

  // A values of x from value `at` of the whole (M, K): rounded with one scale; each group's scale and sum
  void block(const float* x, int64_t at) {
    __m512 amax16 = _mm512_setzero_ps();
    for (int64_t i = 0; i < A; i += 16) amax16 = _mm512_max_ps(amax16, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float amax = _mm512_reduce_max_ps(amax16);
    // IEEE divisions (the intrinsic: -ffast-math may make a '/' a reciprocal estimate), so the rounding is
    // reproducible outside this kernel (the tests' reference rounds the same way)
    const float d = _mm_cvtss_f32(_mm_div_ss(_mm_set_ss(amax), _mm_set_ss(127.f)));
    const float inv = amax > 0.f ? _mm_cvtss_f32(_mm_div_ss(_mm_set_ss(127.f), _mm_set_ss(amax))) : 0.f;
    for (int64_t g = 0; g < A / G; ++g) {
      int32_t sum = 0;
      for (int64_t i = g * G; i < (g + 1) * G; i += 16) {
        const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(inv)));
        _mm_storeu_si128((__m128i*)(q.data() + at + i), _mm512_cvtsepi32_epi8(qi));
        sum += _mm512_reduce_add_epi32(qi);
      }
      scale[at / G + g] = d;
      sums[at / G + g] = d * float(sum);
    }
  }
};

// W's 16 columns of one panel (panel_blocks.h) decoded for the rows of x to share: the word vectors of every
// group in order (words[kk * 16 + c] = column c's word kk) and each group's a and b
struct Panel {
  std::vector<int32_t> words;     // (K / 4, 16)
  std::vector<float> a, b;        // (K / G, 16)
  int64_t K, G;

  Panel(int64_t K, int64_t G) : words(K / 4 * kPanel), a(K / G * kPanel), b(K / G * kPanel), K(K), G(G) {}

  // from `panel`: its K / QK panel blocks
  template <class F>
  void fill(F, const uint8_t* panel) {
    for (int64_t i = 0; i < K / F::qk; ++i)
      for (int h = 0; h < F::groups; ++h) {
        const uint8_t* blk = panel + i * F::bytes;
        const int64_t g = i * F::groups + h;
        __m512i w[F::words];
        F::words_of(blk, h, w);
        for (int kk = 0; kk < F::words; ++kk) _mm512_storeu_si512(words.data() + (g * F::words + kk) * kPanel, w[kk]);
        __m512 av, bv;
        F::scales_of(blk, h, av, bv);
        _mm512_storeu_ps(a.data() + g * kPanel, av);
        _mm512_storeu_ps(b.data() + g * kPanel, bv);
      }
  }
};

// A row's 16 sums after group g, given its exact int32 dots: the float steps every product path shares
inline __m512 scale_row(__m512 a, __m512 b, __m512i dot, float scale, float sum, __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(a, _mm512_set1_ps(scale)), acc);
  return _mm512_fmadd_ps(b, _mm512_set1_ps(sum), acc);
}

template <int R>
inline void scale_group(const Panel& p, const Int8Rows& x, int64_t r0, int64_t g, const __m512i* dot, __m512* acc) {
  const __m512 a = _mm512_loadu_ps(p.a.data() + g * kPanel), b = _mm512_loadu_ps(p.b.data() + g * kPanel);
  const int64_t groups = x.K / x.G;
  for (int r = 0; r < R; ++r)
    acc[r] = scale_row(a, b, dot[r], x.scale[(r0 + r) * groups + g], x.sums[(r0 + r) * groups + g], acc[r]);
}

// R rows of x (from r0) against a panel: y[r][n0 .. n0 + cols) (row stride N)
template <int R>
void vnni_rows(const Panel& p, const Int8Rows& x, int64_t r0, float* y, int64_t N, int cols) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t K = x.K, words = x.G / 4;
  for (int64_t g = 0; g < K / x.G; ++g) {
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    for (int64_t kk = g * words; kk < (g + 1) * words; ++kk) {
      const __m512i w = _mm512_loadu_si512(p.words.data() + kk * kPanel);
      for (int r = 0; r < R; ++r) {
        int32_t xw;
        std::memcpy(&xw, x.q.data() + (r0 + r) * K + 4 * kk, 4);
        dot[r] = _mm512_dpbusd_epi32(dot[r], w, _mm512_set1_epi32(xw));
      }
    }
    scale_group<R>(p, x, r0, g, dot, acc);
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * N, m, acc[r]);
}

#if defined(CONCH_AMX) && defined(__AMX_INT8__)
#define CONCH_AMX_INT8 1
// AMX: tile 0 the 16 x 16 int32 dots, tile 1 16 rows of xq (G bytes each), tile 2 the panel's G / 4 words x 16
// columns. A thread configures once before its first product and releases after its last.
inline void configure_int8(int64_t G) {
  amx_tiles::TileConfig c;
  c.rows[0] = kTileRows, c.colsb[0] = 64;
  c.rows[1] = kTileRows, c.colsb[1] = (uint16_t)G;
  c.rows[2] = (uint8_t)(G / 4), c.colsb[2] = 64;
  _tile_loadconfig(&c);
}

// 16 rows of x (from r0; a whole tile: rows_panel leaves the rest to VNNI) against a panel: each group's dots
// as one tile product, then scale_row per row
inline void amx_rows(const Panel& p, const Int8Rows& x, int64_t r0, float* y, int64_t N, int cols) {
  alignas(64) int32_t dots[kTileRows * kPanel];
  __m512 acc[kTileRows];
  for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t K = x.K, groups = K / x.G;
  for (int64_t g = 0; g < groups; ++g) {
    _tile_zero(0);
    _tile_loadd(1, x.q.data() + r0 * K + g * x.G, K);
    _tile_loadd(2, p.words.data() + g * (x.G / 4) * kPanel, 64);
    _tile_dpbsud(0, 1, 2);
    _tile_stored(0, dots, 64);
    const __m512 a = _mm512_loadu_ps(p.a.data() + g * kPanel), b = _mm512_loadu_ps(p.b.data() + g * kPanel);
    for (int r = 0; r < kTileRows; ++r)
      acc[r] = scale_row(a, b, _mm512_load_si512(dots + r * kPanel), x.scale[(r0 + r) * groups + g],
                         x.sums[(r0 + r) * groups + g], acc[r]);
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < kTileRows; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * N, m, acc[r]);
}
#endif

constexpr int kRows = 8;   // rows of x sharing each loaded weight word

// M rows of x against a panel: tiles of 16 rows by AMX where `amx`, the rest by VNNI (the same bits either way)
inline void rows_panel(const Panel& p, const Int8Rows& x, int64_t M, float* y, int64_t N, int cols, bool amx) {
  int64_t r0 = 0;
#ifdef CONCH_AMX_INT8
  if (amx)
    for (; r0 + kTileRows <= M; r0 += kTileRows) amx_rows(p, x, r0, y, N, cols);
#endif
  for (; r0 + kRows <= M; r0 += kRows) vnni_rows<kRows>(p, x, r0, y, N, cols);
  switch (M - r0) {
    case 1: return vnni_rows<1>(p, x, r0, y, N, cols);
    case 2: return vnni_rows<2>(p, x, r0, y, N, cols);
    case 3: return vnni_rows<3>(p, x, r0, y, N, cols);
    case 4: return vnni_rows<4>(p, x, r0, y, N, cols);
    case 5: return vnni_rows<5>(p, x, r0, y, N, cols);
    case 6: return vnni_rows<6>(p, x, r0, y, N, cols);
    case 7: return vnni_rows<7>(p, x, r0, y, N, cols);
    default: return;
  }
}

}  // namespace quant_panels
