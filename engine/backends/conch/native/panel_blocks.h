// W (N, K) in a ggml type, repacked once at load (pack) into panels of 16 columns: the layout the products of
// quant_matmul.cpp stream, so a product reads each weight byte once, in order, and forms 16 columns' int32 dots
// in the lanes of one register with no transpose, unpack buffer or lane reduction.
//
// packed (P, K / QK, B) uint8, P = ceil(N / 16): panel p holds W's rows 16p .. 16p + 15 (rows past N: zeros),
// one panel block of B bytes per ggml block of QK values. A panel block is the 16 rows' blocks, regrouped:
//   groups of G values (G = 32; Q6_K's 16), each G / 4 "word vectors" of 64 bytes: word kk of the group in
//   column c (its values 4kk .. 4kk + 3, as unsigned bytes q) at bytes 4c .. 4c + 3 of vector kk. VNNI
//   multiplies a vector by one word of x broadcast: lane c accumulates column c's dot.
//   Stored bit-packed (Bits below), the same bytes a GGUF spends on them; then the block's scales, 16 columns
//   a field (Scales below). Each value is a * q + b with (a, b) its group's, as ggml_blocks.h reads them:
//     Q8_0, Q4_0, Q5_0   d (fp16)                          a = d           b = B0 * d (-128, -8, -16)
//     Q4_1, Q5_1         d, m (fp16)                       a = d           b = m
//     Q4_K, Q5_K         d, dmin (fp16), sc, m (u8 / group) a = d * sc      b = m * -dmin
//     Q6_K               d (fp16), sc (i8 / group)         a = d * sc      b = -32 a
// Q4_K / Q5_K / Q6_K's int8 product scales once per block of 256 (quant_panels.h: per_block): a group's values
// are d * sc * q + e * m with its integer sc (sc_of) and m (min_pair_of, two groups' as int16 pairs; Q6_K's m is
// its sc, e = -32 d), and the block's d and e per column (super_of).
// B is the GGUF block's bytes times 16, but for Q4_K / Q5_K (their 6-bit scales kept as bytes: 148 / 180 a
// column, not 144 / 176).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ggml_blocks.h"

namespace panel_blocks {

constexpr int kPanel = 16;   // columns of W a panel holds: one register's lanes

// ---- the q bytes of one group: kWords word vectors, decoded into registers or encoded from them ----

// 4 bits: packed vector j holds vector j's nibbles low and vector j + kWords / 2's high
template <int kWords>
struct Nibbles {
  static constexpr int bytes = kWords * 32;
  static void decode(const uint8_t* p, __m512i* w) {
    const __m512i low = _mm512_set1_epi8(0xF);
    for (int j = 0; j < kWords / 2; ++j) {
      const __m512i v = _mm512_loadu_si512(p + 64 * j);
      w[j] = _mm512_and_si512(v, low);
      w[j + kWords / 2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
  }
  static void encode(const __m512i* w, uint8_t* p) {
    const __m512i low = _mm512_set1_epi8(0xF);
    for (int j = 0; j < kWords / 2; ++j)
      _mm512_storeu_si512(p + 64 * j, _mm512_or_si512(_mm512_and_si512(w[j], low),
                                                      _mm512_slli_epi16(_mm512_and_si512(w[j + kWords / 2], low), 4)));
  }
};

struct Bits4 : Nibbles<8> {};

// 5 bits: the nibbles, then each vector's fifth bits as a 64-bit mask (bit i: byte i's 16)
struct Bits5 {
  static constexpr int bytes = Nibbles<8>::bytes + 64;
  static void decode(const uint8_t* p, __m512i* w) {
    Nibbles<8>::decode(p, w);
    for (int j = 0; j < 8; ++j) {
      uint64_t high;
      std::memcpy(&high, p + Nibbles<8>::bytes + 8 * j, 8);
      w[j] = _mm512_or_si512(w[j], _mm512_maskz_set1_epi8(_cvtu64_mask64(high), 16));
    }
  }
  static void encode(const __m512i* w, uint8_t* p) {
    Nibbles<8>::encode(w, p);
    for (int j = 0; j < 8; ++j) {
      const uint64_t high = _cvtmask64_u64(_mm512_test_epi8_mask(w[j], _mm512_set1_epi8(16)));
      std::memcpy(p + Nibbles<8>::bytes + 8 * j, &high, 8);
    }
  }
};

// 6 bits (4 vectors: a group of 16): the nibbles, then one vector whose bits 2j, 2j + 1 are vector j's top two
struct Bits6 {
  static constexpr int bytes = Nibbles<4>::bytes + 64;
  static void decode(const uint8_t* p, __m512i* w) {
    Nibbles<4>::decode(p, w);
    const __m512i top = _mm512_loadu_si512(p + Nibbles<4>::bytes), three = _mm512_set1_epi8(3);
    for (int j = 0; j < 4; ++j)
      w[j] = _mm512_or_si512(w[j], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(top, 2 * j), three), 4));
  }
  static void encode(const __m512i* w, uint8_t* p) {
    Nibbles<4>::encode(w, p);
    __m512i top = _mm512_setzero_si512();
    const __m512i three = _mm512_set1_epi8(3);
    for (int j = 0; j < 4; ++j)
      top = _mm512_or_si512(top, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(w[j], 4), three), 2 * j));
    _mm512_storeu_si512(p + Nibbles<4>::bytes, top);
  }
};

struct Bits8 {
  static constexpr int bytes = 8 * 64;
  static void decode(const uint8_t* p, __m512i* w) {
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(p + 64 * j);
  }
  static void encode(const __m512i* w, uint8_t* p) {
    for (int j = 0; j < 8; ++j) _mm512_storeu_si512(p + 64 * j, w[j]);
  }
};

// ---- the scales of one panel block: a and b of group h as 16-column vectors ----

inline __m512 halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
inline __m512i load_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p)); }
inline __m512 bytes_u8(const uint8_t* p) { return _mm512_cvtepi32_ps(load_u8(p)); }

// Two rows of 16 bytes (p[c], p[16 + c]) -> 16 lanes of int16 pairs (low: p[c], high: p[16 + c]), as VPDPWSSD
// multiplies them
inline __m512i byte_pairs(const uint8_t* p) {
  const __m128i lo = _mm_loadu_si128((const __m128i*)p), hi = _mm_loadu_si128((const __m128i*)(p + 16));
  return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi)));
}

inline void put_half(uint8_t* field, int c, const uint8_t* blk, int at) { std::memcpy(field + 2 * c, blk + at, 2); }

// A scales area: kHalves fp16 fields (32 bytes: one a column), then kByteRows rows of 16 bytes (one a column)
template <int kHalves, int kByteRows>
struct Fields {
  static constexpr int bytes = 32 * kHalves + kPanel * kByteRows;
  static constexpr bool per_block = false;   // scaled once per block (ScaleK), else group by group
  // column `from` of area s -> column `to` of area d
  static void copy_column(const uint8_t* s, int from, uint8_t* d, int to) {
    for (int f = 0; f < kHalves; ++f) std::memcpy(d + 32 * f + 2 * to, s + 32 * f + 2 * from, 2);
    for (int r = 0; r < kByteRows; ++r) d[32 * kHalves + kPanel * r + to] = s[32 * kHalves + kPanel * r + from];
  }
};

// a = d, b = kB0 * d (Q8_0, Q4_0, Q5_0)
template <int kB0>
struct ScaleD : Fields<1, 0> {
  static void decode(const uint8_t* s, int, __m512& a, __m512& b) {
    a = halves(s);
    b = _mm512_mul_ps(_mm512_set1_ps((float)kB0), a);
  }
  static void encode(const uint8_t* blk, int c, uint8_t* s) { put_half(s, c, blk, 0); }
};

// a = d, b = m (Q4_1, Q5_1)
struct ScaleDM : Fields<2, 0> {
  static void decode(const uint8_t* s, int, __m512& a, __m512& b) {
    a = halves(s);
    b = halves(s + 32);
  }
  static void encode(const uint8_t* blk, int c, uint8_t* s) {
    put_half(s, c, blk, 0);
    put_half(s + 32, c, blk, 2);
  }
};

// Q4_K / Q5_K: d, dmin, then sc and m as bytes (8 groups x 16 columns each)
struct ScaleK : Fields<2, 16> {
  static constexpr bool per_block = true;
  static void decode(const uint8_t* s, int h, __m512& a, __m512& b) {
    a = _mm512_mul_ps(bytes_u8(s + 64 + h * kPanel), halves(s));
    b = _mm512_mul_ps(bytes_u8(s + 64 + 8 * kPanel + h * kPanel), _mm512_sub_ps(_mm512_setzero_ps(), halves(s + 32)));
  }
  static __m512i sc(const uint8_t* s, int h) { return load_u8(s + 64 + h * kPanel); }
  static __m512i min_pair(const uint8_t* s, int j) { return byte_pairs(s + 64 + 8 * kPanel + 2 * j * kPanel); }
  static void super(const uint8_t* s, __m512& d, __m512& e) {
    d = halves(s);
    e = _mm512_sub_ps(_mm512_setzero_ps(), halves(s + 32));
  }
  static void encode(const uint8_t* blk, int c, uint8_t* s) {
    put_half(s, c, blk, 0);
    put_half(s + 32, c, blk, 2);
    alignas(16) uint8_t sc_m[16];
    ggml_blocks::scales_mins(blk + 4, sc_m);
    for (int h = 0; h < 8; ++h) {
      s[64 + h * kPanel + c] = sc_m[h];
      s[64 + 8 * kPanel + h * kPanel + c] = sc_m[8 + h];
    }
  }
};

// Q6_K: d, then sc as int8 pairs: row j (32 bytes) holds groups 2j and 2j + 1, column c's at bytes 2c, 2c + 1
// (min_pair: one widening load; sc: shifts of it). A value is d * sc * (q - 32): per block, m = sc and e = -32 d
struct Scale6K : Fields<1, 16> {
  static constexpr bool per_block = true;
  static __m512i pair(const uint8_t* s, int j) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i*)(s + 32 + 32 * j)));
  }
  static __m512i sc(const uint8_t* s, int h) {
    const __m512i p = pair(s, h / 2);
    return h % 2 ? _mm512_srai_epi32(p, 16) : _mm512_srai_epi32(_mm512_slli_epi32(p, 16), 16);
  }
  static __m512i min_pair(const uint8_t* s, int j) { return pair(s, j); }
  static void super(const uint8_t* s, __m512& d, __m512& e) {
    d = halves(s);
    e = _mm512_mul_ps(d, _mm512_set1_ps(-32.f));
  }
  static void decode(const uint8_t* s, int h, __m512& a, __m512& b) {
    a = _mm512_mul_ps(_mm512_cvtepi32_ps(sc(s, h)), halves(s));
    b = _mm512_mul_ps(a, _mm512_set1_ps(-32.f));
  }
  static void encode(const uint8_t* blk, int c, uint8_t* s) {
    put_half(s, c, blk, 208);
    for (int h = 0; h < 16; ++h) s[32 + (h / 2) * 32 + 2 * c + h % 2] = blk[192 + h];
  }
  static void copy_column(const uint8_t* s, int from, uint8_t* d, int to) {
    std::memcpy(d + 2 * to, s + 2 * from, 2);
    for (int j = 0; j < 8; ++j) std::memcpy(d + 32 + 32 * j + 2 * to, s + 32 + 32 * j + 2 * from, 2);
  }
};

// ---- a ggml type's panel block ----

// kFileBytes: a block's size in the file; kUnpack: its q (ggml_blocks.h); activations: the values of x one
// int8 scale covers against this type (llama.cpp's Q8_K's 256 against K-quants, Q8_0's 32 otherwise)
template <int kId, int kQK, int kFileBytes, void (*kUnpack)(const uint8_t*, uint8_t*), int kG, class Q, class S>
struct Format {
  static constexpr int64_t id = kId;
  static constexpr int qk = kQK, file_bytes = kFileBytes, G = kG, words = kG / 4, groups = kQK / kG;
  static constexpr int bytes = groups * Q::bytes + S::bytes;   // a panel block
  static constexpr int activations = kQK == 256 ? 256 : 32;
  static constexpr bool per_block = S::per_block;              // K-quants: scaled per block (sc_of .. super_of)

  // group h of panel block `blk`: its word vectors (w[words]) and its a and b
  static void words_of(const uint8_t* blk, int h, __m512i* w) { Q::decode(blk + h * Q::bytes, w); }
  static void scales_of(const uint8_t* blk, int h, __m512& a, __m512& b) {
    S::decode(blk + groups * Q::bytes, h, a, b);
  }
  // per_block's: group h's sc; groups 2j, 2j + 1's m as int16 pairs; the block's d and e
  static __m512i sc_of(const uint8_t* blk, int h) { return S::sc(blk + groups * Q::bytes, h); }
  static __m512i min_pair_of(const uint8_t* blk, int j) { return S::min_pair(blk + groups * Q::bytes, j); }
  static void super_of(const uint8_t* blk, __m512& d, __m512& e) { S::super(blk + groups * Q::bytes, d, e); }

  // One panel block from 16 columns' GGUF blocks (col[c] null: a column past W, zeros). q: (16, QK) scratch.
  static void pack(const uint8_t* const* col, uint8_t* q, uint8_t* out) {
    std::memset(out + groups * Q::bytes, 0, S::bytes);
    for (int c = 0; c < kPanel; ++c) {
      if (col[c] == nullptr) {
        std::memset(q + c * kQK, 0, kQK);
        continue;
      }
      kUnpack(col[c], q + c * kQK);
      S::encode(col[c], c, out + groups * Q::bytes);
    }
    for (int h = 0; h < groups; ++h) {
      alignas(64) int32_t v[words][kPanel];   // word kk of column c: q[c][h * G + 4kk ..]
      for (int c = 0; c < kPanel; ++c)
        for (int kk = 0; kk < words; ++kk) std::memcpy(&v[kk][c], q + c * kQK + h * kG + 4 * kk, 4);
      __m512i w[words];
      for (int kk = 0; kk < words; ++kk) w[kk] = _mm512_load_si512(v[kk]);
      Q::encode(w, out + h * Q::bytes);
    }
  }

  // One panel block whose column c is column from[c] of panel block src[c] (src[c] null: zeros)
  static void gather(const uint8_t* const* src, const int* from, uint8_t* out) {
    std::memset(out + groups * Q::bytes, 0, S::bytes);
    for (int c = 0; c < kPanel; ++c)
      if (src[c] != nullptr) S::copy_column(src[c] + groups * Q::bytes, from[c], out + groups * Q::bytes, c);
    for (int h = 0; h < groups; ++h) {
      alignas(64) int32_t v[words][kPanel] = {}, lanes[words][kPanel];
      for (int c = 0; c < kPanel; ++c) {
        if (src[c] == nullptr) continue;
        __m512i w[words];
        words_of(src[c], h, w);
        for (int kk = 0; kk < words; ++kk) _mm512_store_si512(lanes[kk], w[kk]);
        for (int kk = 0; kk < words; ++kk) v[kk][c] = lanes[kk][from[c]];
      }
      __m512i w[words];
      for (int kk = 0; kk < words; ++kk) w[kk] = _mm512_load_si512(v[kk]);
      Q::encode(w, out + h * Q::bytes);
    }
  }
};

using Q4_0 = Format<2, 32, 18, ggml_blocks::q4_0, 32, Bits4, ScaleD<-8>>;
using Q4_1 = Format<3, 32, 20, ggml_blocks::q4_1, 32, Bits4, ScaleDM>;
using Q5_0 = Format<6, 32, 22, ggml_blocks::q5_0, 32, Bits5, ScaleD<-16>>;
using Q5_1 = Format<7, 32, 24, ggml_blocks::q5_1, 32, Bits5, ScaleDM>;
using Q8_0 = Format<8, 32, 34, ggml_blocks::q8_0, 32, Bits8, ScaleD<-128>>;
using Q4_K = Format<12, 256, 144, ggml_blocks::q4_k, 32, Bits4, ScaleK>;
using Q5_K = Format<13, 256, 176, ggml_blocks::q5_k, 32, Bits5, ScaleK>;
using Q6_K = Format<14, 256, 210, ggml_blocks::q6_k, 16, Bits6, Scale6K>;

// fn(F{}) with F the type's Format (the one table of the types the kernels take); false for a type without one
template <typename Fn>
inline bool with_format(int64_t id, Fn&& fn) {
  switch (id) {
    case 2: fn(Q4_0{}); return true;
    case 3: fn(Q4_1{}); return true;
    case 6: fn(Q5_0{}); return true;
    case 7: fn(Q5_1{}); return true;
    case 8: fn(Q8_0{}); return true;
    case 12: fn(Q4_K{}); return true;
    case 13: fn(Q5_K{}); return true;
    case 14: fn(Q6_K{}); return true;
    default: return false;
  }
}

}  // namespace panel_blocks
