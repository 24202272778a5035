// The int8 product for a few rows of x (quant_matmul.cpp: M <= kFewRows): the same result, bit for bit, as
// quant_panels.h's panels, without their transposed copy of W (which costs more than a few rows' products).
//
// For 16 columns of W, a span of 256 of their values is unpacked into a small buffer (its a and b then laid
// out group by group, 16 columns a vector); then for each row of x and each 64 values of the span, VNNI
// multiplies each column's 64 q by the row's 64 xq into 16 int32 lanes of 4 products (G / 4 lanes a group); a
// lane tree adds, across the 16 columns at once, each group's lanes into one int32 per column: the group's
// exact dot, as a panel's product forms it. quant_panels' scale_row then takes it, group by group.
//
// The tree: 16 vectors of lane sums; at a level of bit b, vectors 2i and 2i + 1 become one whose lane k (bit b
// clear: vector 2i's lanes k and k + b added; set: 2i + 1's lanes k - b and k) keeps half the columns. Over
// b = G/8 .. 1, lane k of final vector t holds the whole group (k / (G/4)) of column
// t * (G/4) + (k's low bits reversed); `pick` lays each group's 16 columns out in order.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ggml_blocks.h"
#include "quant_panels.h"

namespace quant_lanes {

using quant_panels::kPanel;

constexpr int kFewRows = 2;   // up to this many rows of x take this path; more take panels

inline int reversed(int bits, int n) {
  int r = 0;
  for (int i = 0; i < n; ++i) r |= ((bits >> i) & 1) << (n - 1 - i);
  return r;
}

// The index vectors of one group size G (16 or 32)
struct Tree {
  int levels;                                  // log2(G / 4)
  alignas(64) int32_t lo[3][16], hi[3][16];    // level l (b = G/8 >> l): the two picks added
  alignas(64) int32_t pick[4][16];             // group h's 16 columns from final vectors (2t, 2t + 1)
  explicit Tree(int G) : levels(G == 32 ? 3 : 2) {
    for (int l = 0; l < levels; ++l)
      for (int k = 0, b = (G / 8) >> l; k < 16; ++k) {
        lo[l][k] = (k & b) ? 16 + (k - b) : k;
        hi[l][k] = (k & b) ? 16 + k : k + b;
      }
    const int lanes = G / 4;
    for (int h = 0; h < 16 / lanes; ++h)
      for (int c = 0; c < 16; ++c) {
        const int t = c / lanes;   // its final vector; pick reads the pair (t & ~1, t | 1)
        pick[h][c] = (t & 1) * 16 + h * lanes + reversed(c % lanes, levels);
      }
  }
};

inline const Tree& tree(int G) {
  static const Tree t32(32), t16(16);
  return G == 32 ? t32 : t16;
}

// v[0..15] -> v[0 .. 16 / 2^levels): the group sums, laid out as the header says
inline int reduce(__m512i* v, const Tree& t) {
  int n = 16;
  for (int l = 0; l < t.levels; ++l, n /= 2) {
    const __m512i il = _mm512_load_si512(t.lo[l]), ih = _mm512_load_si512(t.hi[l]);
    for (int i = 0; i < n / 2; ++i)
      v[i] = _mm512_add_epi32(_mm512_permutex2var_epi32(v[2 * i], il, v[2 * i + 1]),
                              _mm512_permutex2var_epi32(v[2 * i], ih, v[2 * i + 1]));
  }
  return n;
}

// group h's dots of the 16 columns, in column order
inline __m512i group_dots(const __m512i* v, int finals, const Tree& t, int h) {
  const __m512i idx = _mm512_load_si512(t.pick[h]);
  if (finals == 2) return _mm512_permutex2var_epi32(v[0], idx, v[1]);
  const __m512i low = _mm512_permutex2var_epi32(v[0], idx, v[1]), high = _mm512_permutex2var_epi32(v[2], idx, v[3]);
  return _mm512_mask_blend_epi32(0xFF00, low, high);
}

// A thread's buffers: the 16 columns' current span unpacked (ggml_blocks.h)
struct Span {
  static constexpr int64_t values = 256;   // a K-quant block, or 8 of 32 values (a row read a few lines at a time)
  std::vector<uint8_t> q = std::vector<uint8_t>(kPanel * values);           // (16, values)
  std::vector<float> a = std::vector<float>(kPanel * values / 16), b = a;   // (16, values / 16)

  // W's columns (rows of `w`) c < cols, values v .. v + n (n: values, or the 32 a K % 64 == 32 row ends with);
  // the same span of the next 16 columns' first `ahead` is fetched meanwhile
  void fill(const ggml_blocks::Type& t, const uint8_t* w, int64_t row_bytes, int cols, int ahead, int64_t v,
            int64_t n) {
    for (int c = 0; c < kPanel; ++c) {
      if (c < ahead) quant_panels::prefetch(w + (kPanel + c) * row_bytes + v / t.qk * t.bytes, n / t.qk * t.bytes);
      ggml_blocks::unpack_values(t, c < cols ? w + c * row_bytes : nullptr, v, n, q.data() + c * values,
                                 a.data() + c * values / 16, b.data() + c * values / 16);
    }
  }

  // a and b, (16 columns, 16 groups) as filled, into (16 groups, 16 columns): one load a group, not a gather
  void columns_last(float* at, float* bt) const {
    static_assert(values == 16 * 16);
    for (auto [from, to] : {std::pair{a.data(), at}, std::pair{b.data(), bt}}) {
      __m512i r[16];
      for (int c = 0; c < 16; ++c) r[c] = _mm512_castps_si512(_mm512_loadu_ps(from + c * 16));
      quant_panels::transpose16(r);
      for (int g = 0; g < 16; ++g) _mm512_store_ps(to + g * 16, _mm512_castsi512_ps(r[g]));
    }
  }
};

// Rows r < rows of x against W's columns n0 .. n0 + cols: y[r][n0 ..] (row stride N)
inline void few_rows(const ggml_blocks::Type& t, const uint8_t* w, int64_t row_bytes, int cols, int ahead,
                     const quant_panels::Int8Rows& x, int rows, Span& s, float* y, int64_t N) {
  const int64_t K = x.K, G = x.G, groups = K / G;
  const Tree& tr = tree((int)G);
  __m512 acc[kFewRows];
  for (int r = 0; r < rows; ++r) acc[r] = _mm512_setzero_ps();
  alignas(64) float at[16 * 16], bt[16 * 16];   // the span's a and b as (its 16 groups of 16, 16 columns)
  for (int64_t v = 0; v < K; v += s.values) {
    const int64_t n = std::min<int64_t>(s.values, K - v);
    s.fill(t, w, row_bytes, cols, ahead, v, n);
    s.columns_last(at, bt);
    for (int64_t u = 0; u < n; u += 64) {
      const __mmask64 bytes = n - u >= 64 ? ~0ull : 0xFFFFFFFFull;
      for (int r = 0; r < rows; ++r) {
        const __m512i xq = _mm512_maskz_loadu_epi8(bytes, x.q.data() + r * K + v + u);
        __m512i lanes[kPanel];
        for (int c = 0; c < kPanel; ++c)
          lanes[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_maskz_loadu_epi8(bytes, s.q.data() + c * s.values + u), xq);
        const int finals = reduce(lanes, tr);
        for (int64_t h = 0; h < std::min<int64_t>(64, n - u) / G; ++h) {
          const int64_t g = (v + u) / G + h, g16 = (u + h * G) / 16;   // the group; its first 16 in the span
          const __m512 a = _mm512_load_ps(at + g16 * 16), b = _mm512_load_ps(bt + g16 * 16);
          acc[r] = quant_panels::scale_row(a, b, group_dots(lanes, finals, tr, (int)h), x.scale[r * groups + g],
                                           x.sums[r * groups + g], acc[r]);
        }
      }
    }
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + r * N, m, acc[r]);
}

}  // namespace quant_lanes
