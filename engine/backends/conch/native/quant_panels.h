// The int8 product of quant_matmul.cpp: y = x @ W^T, x's rows rounded to int8, W in ggml blocks, 16 columns
// of W at a time (a panel) in the int32 / float32 lanes of one register. Here: x's int8 rows, the float steps
// every int8 path shares (scale_row, super_step), and the products over a Panel decoded into memory (AMX tiles
// for whole tiles of 16 rows, and the float32 product); quant_stream.h streams a panel through registers for
// VNNI (every row where the CPU has no AMX, the rows past the last tile where it has).
//
// Int8Rows: each row of x rounded per block of A values (scale = the block's largest |x| / 127, to nearest
//   even; A = 256 for a K-quant's rows, 32 otherwise: llama.cpp's Q8_K and Q8_0), and per group of G values
//   (the weight type's: 16 for Q6_K, 32 for the others) the row's scale and scale * sum(q) (the factor of the
//   group's b term); where A = 256 also each pair of groups' sum(q) as int16 pairs (Q4_K / Q5_K's m term).
// Panel: 16 rows of W decoded from their panel (panel_blocks.h: value = a * q + b): word kk of column c (its
//   bytes 4kk..4kk+3) at words[kk * 16 + c] (what AMX tiles load), and a and b per group as 16-column vectors
//   (what the float32 product reads; AMX rows read their scales from the packed block).
// The product, per row of x, for the panel's 16 columns at once, from the exact int32 dots of each group
//   dot_g = sum over group g of q * xq (VNNI's 4 products a lane, or an AMX tile):
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, group by group:
//     acc = fma(float(dot_g), a_g * scale_g, acc)   then   acc = fma(b_g, scale_g * sum_g, acc)
//   Q4_K / Q5_K / Q6_K (one scale of x per block of 256; panel_blocks.h's d * sc * q + e * m, Q6_K's m = sc
//   and e = -32 d), block by block:
//     S = sum_g sc_g * dot_g,  Mn = sum_g m_g * sum_g        (int32, exact)
//     acc = fma(float(S), d * scale, acc)   then   acc = fma(float(Mn), e * scale, acc)
// A row's result is these operations on that row alone: batch-invariant, and the same bits whichever
// instructions form the exact integers.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
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

// 16 values of x as float32: float32 as they are, bf16 widened (exact)
inline __m512 load16(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 load16(const c10::BFloat16* x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)x)), 16));
}

// Where a product's rows go: y (M, ld) in float32 (f) or bf16 (b: rounded to nearest even, NaN as 0x7FC0, as
// torch's .to(bfloat16) rounds)
struct Out {
  float* f;
  c10::BFloat16* b;
  int64_t ld;

  Out from(int64_t col) const { return {f ? f + col : nullptr, b ? b + col : nullptr, ld}; }

  // row `row`'s columns where m is set
  void store(int64_t row, __mmask16 m, __m512 v) const {
    if (f != nullptr) return _mm512_mask_storeu_ps(f + row * ld, m, v);
    const __m512i bits = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 16), one), _mm512_set1_epi32(0x7FFF));
    __m512i half = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    half = _mm512_mask_mov_epi32(half, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
    _mm256_mask_storeu_epi16(b + row * ld, m, _mm512_cvtepi32_epi16(half));
  }
};

struct Int8Rows {
  std::vector<int8_t> q;          // (M, K)
  std::vector<float> scale, sums; // (M, K / G)
  std::vector<int32_t> pairs;     // (M, K / G / 2) where A = 256: groups 2j, 2j + 1's sum(q), low and high int16
  int64_t K, G, A;                // A: values sharing one scale (32, or 256 for a K-quant's rows, as llama.cpp)

  template <class T>   // float or c10::BFloat16
  Int8Rows(const T* x, int64_t M, int64_t K, int64_t G, int64_t A)
      : q(M * K), scale(M * K / G), sums(M * K / G), pairs(A == 256 ? M * K / G / 2 : 0), K(K), G(G), A(A) {
    at::parallel_for(0, M, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t m = lo; m < hi; ++m)
        for (int64_t v = 0; v < K; v += A) block(x + m * K + v, m * K + v);
    });
  }

  // The group of row m that holds value v, in the (M, K / G) arrays (kG: G, a constant: no division here)
  template <int kG>
  int64_t group(int64_t m, int64_t v) const { return m * (K / kG) + v / kG; }

  // A values of x from value `at` of the whole (M, K): rounded with one scale; each group's scale and sum
  template <class T>
  void block(const T* x, int64_t at) {
    __m512 amax16 = _mm512_setzero_ps();
    for (int64_t i = 0; i < A; i += 16) amax16 = _mm512_max_ps(amax16, _mm512_abs_ps(load16(x + i)));
    const float amax = _mm512_reduce_max_ps(amax16);
    // IEEE divisions (the intrinsic: -ffast-math may make a '/' a reciprocal estimate), so the rounding is
    // reproducible outside this kernel (the tests' reference rounds the same way)
    const float d = _mm_cvtss_f32(_mm_div_ss(_mm_set_ss(amax), _mm_set_ss(127.f)));
    const float inv = amax > 0.f ? _mm_cvtss_f32(_mm_div_ss(_mm_set_ss(127.f), _mm_set_ss(amax))) : 0.f;
    int16_t group_sums[16];            // A / G <= 16; |sum| <= 127 G fits
    for (int64_t g = 0; g < A / G; ++g) {
      int32_t sum = 0;
      for (int64_t i = g * G; i < (g + 1) * G; i += 16) {
        const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(load16(x + i), _mm512_set1_ps(inv)));
        _mm_storeu_si128((__m128i*)(q.data() + at + i), _mm512_cvtsepi32_epi8(qi));
        sum += _mm512_reduce_add_epi32(qi);
      }
      scale[at / G + g] = d;
      sums[at / G + g] = d * float(sum);
      group_sums[g] = (int16_t)sum;
    }
    if (A == 256) std::memcpy(pairs.data() + at / G / 2, group_sums, sizeof(int16_t) * (A / G));   // little-endian pairs
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

// A row's 16 sums after group g of a 32-value type, given its exact int32 dot
inline __m512 scale_row(__m512 a, __m512 b, __m512i dot, float scale, float sum, __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(a, _mm512_set1_ps(scale)), acc);
  return _mm512_fmadd_ps(b, _mm512_set1_ps(sum), acc);
}

// A row's 16 sums after a K-quant block, given its exact S and Mn
inline __m512 super_step(__m512 d, __m512 e, __m512i S, __m512i Mn, float scale, __m512 acc) {
  const __m512 s = _mm512_set1_ps(scale);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, s), acc);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(Mn), _mm512_mul_ps(e, s), acc);
}

// A Q4_K / Q5_K block's Mn for one row: sum_g m_g * sum_g by VPDPWSSD over the pairs of groups (pair[j]:
// min_pair_of; g0: the block's first group in x's arrays)
template <class F>
inline __m512i block_mins(const __m512i* pair, const Int8Rows& x, int64_t g0) {
  __m512i mn = _mm512_setzero_si512();
  for (int j = 0; j < F::groups / 2; ++j) mn = _mm512_dpwssd_epi32(mn, pair[j], _mm512_set1_epi32(x.pairs[g0 / 2 + j]));
  return mn;
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

// Group g's dots of 16 rows of x (from r0) against the Panel, into dots (16 x 16 int32)
inline void tile_dots(const Panel& p, const Int8Rows& x, int64_t r0, int64_t g, int32_t* dots) {
  _tile_zero(0);
  _tile_loadd(1, x.q.data() + r0 * x.K + g * x.G, x.K);
  _tile_loadd(2, p.words.data() + g * (x.G / 4) * kPanel, 64);
  _tile_dpbsud(0, 1, 2);
  _tile_stored(0, dots, 64);
}

// 16 rows of x (from r0; a whole tile: the rest stream by VNNI) against the Panel decoded from `panel`: each
// group's dots as one tile product, then the steps above per row
template <class F>
inline void amx_rows(F, const Panel& p, const uint8_t* panel, const Int8Rows& x, int64_t r0, const Out& y, int cols) {
  alignas(64) int32_t dots[kTileRows * kPanel];
  __m512 acc[kTileRows];
  for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t K = x.K, groups = K / x.G;
  for (int64_t i = 0; i < K / F::qk; ++i) {
    const uint8_t* blk = panel + i * F::bytes;
    if constexpr (F::per_block) {
      __m512i S[kTileRows];
      for (int r = 0; r < kTileRows; ++r) S[r] = _mm512_setzero_si512();
      for (int h = 0; h < F::groups; ++h) {
        tile_dots(p, x, r0, i * F::groups + h, dots);
        const __m512i sc = F::sc_of(blk, h);
        for (int r = 0; r < kTileRows; ++r)
          S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(_mm512_load_si512(dots + r * kPanel), sc));
      }
      __m512i pair[F::groups / 2];
      for (int j = 0; j < F::groups / 2; ++j) pair[j] = F::min_pair_of(blk, j);
      __m512 d, e;
      F::super_of(blk, d, e);
      for (int r = 0; r < kTileRows; ++r) {
        const int64_t g0 = x.group<F::G>(r0 + r, i * F::qk);
        acc[r] = super_step(d, e, S[r], block_mins<F>(pair, x, g0), x.scale[g0], acc[r]);
      }
    } else {
      for (int h = 0; h < F::groups; ++h) {
        const int64_t g = i * F::groups + h;
        tile_dots(p, x, r0, g, dots);
        __m512 a, b;
        F::scales_of(blk, h, a, b);
        for (int r = 0; r < kTileRows; ++r)
          acc[r] = scale_row(a, b, _mm512_load_si512(dots + r * kPanel), x.scale[(r0 + r) * groups + g],
                             x.sums[(r0 + r) * groups + g], acc[r]);
      }
    }
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < kTileRows; ++r) y.store(r0 + r, m, acc[r]);
}
#endif

}  // namespace quant_panels
