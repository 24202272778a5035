// The int8 product by VNNI (quant_matmul.cpp: every row where the CPU has no AMX, the rows past the last whole
// tile of 16 where it has): each group of a panel (panel_blocks.h) decoded into registers and multiplied by up
// to kRows rows of x at once, so W's bytes are read once, in order, and nothing is stored between. The exact
// int32 dots, then quant_panels.h's steps in the same order as its AMX rows: the same bits.
//
// Left to the hardware's prefetchers, a panel's lines were not in cache when its first pass began: the first
// pass over a panel brings a later panel into L2 (one prefetch a line, spread over the pass; quant_matmul.cpp
// picks which: the next at 2+ rows, the one after at 1 row, whose pass is too short to cover memory's latency).
// Timing only: no value changes.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "panel_blocks.h"
#include "prefetch.h"
#include "quant_panels.h"

namespace quant_stream {

constexpr int kRows = 8;   // rows of x sharing each decoded group

// acc += the dot of each lane's 4 bytes of w (u8) with x's word at xq (s8), the word broadcast by the
// instruction's own m32bcst operand: GCC keeps _mm512_set1_epi32 of a load as a separate VPBROADCASTD
inline __m512i dpbusd_word(__m512i acc, __m512i w, const int8_t* xq) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(xq)));
  return acc;
}

// A group's exact int32 dot with one row's xq: one dependency chain (the rows beside it, and the next group,
// are the independent work that hides its latency)
template <int kWords>
inline __m512i dot(const __m512i* w, const int8_t* xq) {
  __m512i sum = _mm512_setzero_si512();
  for (int kk = 0; kk < kWords; ++kk) sum = dpbusd_word(sum, w[kk], xq + 4 * kk);
  return sum;
}

// One block of a type scaled per block (Q4_K, Q5_K, Q6_K: 256 values, from value v) of a panel against R rows
// of x (from r0): acc += its steps
template <class F, int R>
inline void kquant_block(const uint8_t* blk, const quant_panels::Int8Rows& x, int64_t r0, int64_t v, __m512* acc) {
  __m512i S[R];
  for (int r = 0; r < R; ++r) S[r] = _mm512_setzero_si512();
  for (int h = 0; h < F::groups; ++h) {
    __m512i w[F::words];
    F::words_of(blk, h, w);
    const __m512i sc = F::sc_of(blk, h);
    for (int r = 0; r < R; ++r) {
      const int8_t* xq = x.q.data() + (r0 + r) * x.K + v + h * F::G;
      S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(dot<F::words>(w, xq), sc));
    }
  }
  __m512i pair[F::groups / 2];
  for (int j = 0; j < F::groups / 2; ++j) pair[j] = F::min_pair_of(blk, j);
  __m512 d, e;
  F::super_of(blk, d, e);
  for (int r = 0; r < R; ++r) {
    const int64_t g0 = x.group<F::G>(r0 + r, v);
    acc[r] = quant_panels::super_step(d, e, S[r], quant_panels::block_mins<F>(pair, x, g0), x.scale[g0], acc[r]);
  }
}

// One block (from value v) of a type scaled group by group (the 32-value types) of a panel against R rows
// of x (from r0): acc += its steps
template <class F, int R>
inline void group_block(const uint8_t* blk, const quant_panels::Int8Rows& x, int64_t r0, int64_t v, __m512* acc) {
  for (int h = 0; h < F::groups; ++h) {
    __m512i w[F::words];
    F::words_of(blk, h, w);
    __m512 a, b;
    F::scales_of(blk, h, a, b);
    for (int r = 0; r < R; ++r) {
      const int8_t* xq = x.q.data() + (r0 + r) * x.K + v + h * F::G;
      const int64_t g = x.group<F::G>(r0 + r, v) + h;
      acc[r] = quant_panels::scale_row(a, b, dot<F::words>(w, xq), x.scale[g], x.sums[g], acc[r]);
    }
  }
}

// R rows of x (from r0) against one panel: its `cols` columns of y's rows r0 .. r0 + R - 1
// (next: where given, the panel to bring into L2 meanwhile, block by block)
template <class F, int R>
void rows(F, const uint8_t* panel, const quant_panels::Int8Rows& x, int64_t r0, const quant_panels::Out& y, int cols,
          const uint8_t* next) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < x.K / F::qk; ++i) {
    if (next != nullptr) prefetch::bring(next + i * F::bytes, F::bytes);
    if constexpr (F::per_block) {
      kquant_block<F, R>(panel + i * F::bytes, x, r0, i * F::qk, acc);
    } else {
      group_block<F, R>(panel + i * F::bytes, x, r0, i * F::qk, acc);
    }
  }
  const __mmask16 m = (__mmask16)((1u << cols) - 1);
  for (int r = 0; r < R; ++r) y.store(r0 + r, m, acc[r]);
}

// Rows [r0, M) of x against one panel, kRows at a time (each chunk decodes the panel again, from cache); the
// first chunk brings `next` (a later panel, or null) into L2
template <class F>
void all_rows(F f, const uint8_t* panel, const quant_panels::Int8Rows& x, int64_t r0, int64_t M,
              const quant_panels::Out& y, int cols, const uint8_t* next) {
  for (; r0 + kRows <= M; r0 += kRows, next = nullptr) rows<F, kRows>(f, panel, x, r0, y, cols, next);
  switch (M - r0) {
    case 1: return rows<F, 1>(f, panel, x, r0, y, cols, next);
    case 2: return rows<F, 2>(f, panel, x, r0, y, cols, next);
    case 3: return rows<F, 3>(f, panel, x, r0, y, cols, next);
    case 4: return rows<F, 4>(f, panel, x, r0, y, cols, next);
    case 5: return rows<F, 5>(f, panel, x, r0, y, cols, next);
    case 6: return rows<F, 6>(f, panel, x, r0, y, cols, next);
    case 7: return rows<F, 7>(f, panel, x, r0, y, cols, next);
    default: return;
  }
}
static_assert(kRows == 8, "all_rows dispatches the last 1 .. kRows - 1");

}  // namespace quant_stream
