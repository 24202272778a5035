// A GGUF's quantized blocks read into one form for every ggml type the kernels take: each value is
// a[g] * q + b[g], with q an unsigned byte and (a, b) its group's pair, a group being 16 consecutive values.
//
//   Q8_0  (32 values, 34 bytes)  q = int8 + 128      a = d        b = -128 d
//   Q4_0  (32, 18)               q = nibble          a = d        b = -8 d
//   Q4_1  (32, 20)               q = nibble          a = d        b = m
//   Q5_0  (32, 22)               q = nibble + 16 h   a = d        b = -16 d
//   Q5_1  (32, 24)               q = nibble + 16 h   a = d        b = m
//   Q4_K  (256, 144)             q = nibble          a = d sc_j   b = -dmin m_j    (j: 32 values)
//   Q5_K  (256, 176)             q = nibble + 16 h   a = d sc_j   b = -dmin m_j
//   Q6_K  (256, 210)             q = 6 bits          a = d sc_g   b = -32 d sc_g   (g: 16 values)
//
// unpack(block, q, a, b): q receives the block's QK bytes in value order, a and b its QK / 16 pairs. The
// int8 product (quant_matmul.cpp) multiplies q as VNNI's unsigned operand; the float product and the
// reference dequantizer compute a * q + b.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ggml_blocks {

inline float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// the two groups of a 32-value block share one pair
inline void pair32(float a, float b, float* as, float* bs) {
  as[0] = as[1] = a;
  bs[0] = bs[1] = b;
}

inline void q8_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  _mm256_storeu_si256((__m256i*)q, _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(blk + 2)),
                                                    _mm256_set1_epi8((char)0x80)));
  pair32(d, -128.f * d, a, b);
}

// 16 bytes: value j's nibble is byte j's low 4 bits, value j + 16's its high 4
inline __m256i nibbles32(const uint8_t* bytes) {
  const __m128i v = _mm_loadu_si128((const __m128i*)bytes), low = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
}

inline void q4_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  _mm256_storeu_si256((__m256i*)q, nibbles32(blk + 2));
  pair32(d, -8.f * d, a, b);
}

inline void q4_1(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  _mm256_storeu_si256((__m256i*)q, nibbles32(blk + 4));
  pair32(half(blk), half(blk + 2), a, b);
}

// Q5_0 / Q5_1: value j's fifth bit is bit j of the 32-bit qh (little-endian), before the nibbles: 16 added
inline __m256i fifth_bits(const uint8_t* qh_bytes, __m256i nibbles) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  return _mm256_or_si256(nibbles, _mm256_maskz_set1_epi8((__mmask32)qh, 16));
}

inline void q5_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  _mm256_storeu_si256((__m256i*)q, fifth_bits(blk + 2, nibbles32(blk + 6)));
  pair32(d, -16.f * d, a, b);
}

inline void q5_1(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  _mm256_storeu_si256((__m256i*)q, fifth_bits(blk + 4, nibbles32(blk + 8)));
  pair32(half(blk), half(blk + 2), a, b);
}

// 32 bytes' low and high nibbles (each byte's value & 15, >> 4), and a bit of each byte (0 or 1)
inline __m256i low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0xF)); }
inline __m256i high4(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0xF)); }
inline __m256i bit(__m256i v, int k) { return _mm256_and_si256(_mm256_srli_epi16(v, k), _mm256_set1_epi8(1)); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256((__m256i*)p, v); }

// 8 bytes as floats times `by`, each twice: the 16 groups of 8 sub-blocks of 32 values
inline void pairs16(const uint8_t* bytes8, float by, float* out) {
  const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)bytes8))),
                                 _mm256_set1_ps(by));
  const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(v)));
}

// a K-quant's 12 packed bytes as 8 6-bit scales (sc) then 8 6-bit mins (m); sub-block j < 4: sc = s[j] & 63,
// m = s[j + 4] & 63; j >= 4: sc = s[j + 4] & 15 | (s[j - 4] >> 6) << 4, m = s[j + 4] >> 4 | (s[j] >> 6) << 4
inline void scales_mins(const uint8_t* s, uint8_t* sc_m) {
  uint32_t w[3], out[4];
  std::memcpy(w, s, 12);
  out[0] = w[0] & 0x3F3F3F3F;
  out[1] = (w[2] & 0x0F0F0F0F) | (((w[0] >> 6) & 0x03030303) << 4);
  out[2] = w[1] & 0x3F3F3F3F;
  out[3] = ((w[2] >> 4) & 0x0F0F0F0F) | (((w[1] >> 6) & 0x03030303) << 4);
  std::memcpy(sc_m, out, 16);
}

// Q4_K / Q5_K: 4 spans of 64 values, each 32 bytes of nibbles (low: the first 32 values, high: the next 32)
// with sub-blocks 2s and 2s + 1; Q5_K adds bit 2s (low) and 2s + 1 (high) of qh[l] as 16
template <bool kFifth>
inline void k_quant(const uint8_t* blk, const uint8_t* qs, const uint8_t* qh, uint8_t* q, float* a, float* b) {
  const __m256i high = kFifth ? load32(qh) : _mm256_setzero_si256();
  for (int s = 0; s < 4; ++s, qs += 32, q += 64) {
    const __m256i v = load32(qs);
    if (kFifth) {
      store32(q, _mm256_or_si256(low4(v), _mm256_slli_epi16(bit(high, 2 * s), 4)));
      store32(q + 32, _mm256_or_si256(high4(v), _mm256_slli_epi16(bit(high, 2 * s + 1), 4)));
    } else {
      store32(q, low4(v));
      store32(q + 32, high4(v));
    }
  }
  alignas(16) uint8_t sc_m[16];
  scales_mins(blk + 4, sc_m);
  pairs16(sc_m, half(blk), a);
  pairs16(sc_m + 8, -half(blk + 2), b);
}

inline void q4_k(const uint8_t* blk, uint8_t* q, float* a, float* b) { k_quant<false>(blk, blk + 16, nullptr, q, a, b); }
inline void q5_k(const uint8_t* blk, uint8_t* q, float* a, float* b) { k_quant<true>(blk, blk + 48, blk + 16, q, a, b); }

// Q6_K: two halves of 128 values; in a half, ql's 64 bytes give the low 4 bits (values 0-63: low nibbles,
// 64-127: high nibbles) and qh's 32 bytes the top 2 bits (bits 2k, 2k + 1 for quarter k); 16 int8 scales
inline void q6_k(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const uint8_t* ql = blk;
  const uint8_t* qh = blk + 128;
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32) {
    const __m256i lo = load32(ql), hi = load32(ql + 32), top = load32(qh);
    const __m256i three = _mm256_set1_epi8(3);
    auto two = [&](int k) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(top, 2 * k), three), 4); };
    store32(q + n, _mm256_or_si256(low4(lo), two(0)));
    store32(q + n + 32, _mm256_or_si256(low4(hi), two(1)));
    store32(q + n + 64, _mm256_or_si256(high4(lo), two(2)));
    store32(q + n + 96, _mm256_or_si256(high4(hi), two(3)));
  }
  const __m512 scales = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 192))));
  const __m512 av = _mm512_mul_ps(scales, _mm512_set1_ps(half(blk + 208)));
  _mm512_storeu_ps(a, av);
  _mm512_storeu_ps(b, _mm512_mul_ps(av, _mm512_set1_ps(-32.f)));
}

struct Type {
  int64_t id;  // ggml's type number
  int qk;      // values a block holds (a multiple of 16)
  int bytes;   // its size in the file
};

// fn(unpack): fn called with the type's unpack as a callable of its own type, so a loop inside fn inlines it
template <typename Fn>
inline void with_unpack(int64_t id, Fn&& fn) {
  switch (id) {
    case 2: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q4_0(k, q, a, b); });
    case 3: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q4_1(k, q, a, b); });
    case 6: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q5_0(k, q, a, b); });
    case 7: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q5_1(k, q, a, b); });
    case 8: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q8_0(k, q, a, b); });
    case 12: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q4_k(k, q, a, b); });
    case 13: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q5_k(k, q, a, b); });
    case 14: return fn([](const uint8_t* k, uint8_t* q, float* a, float* b) { q6_k(k, q, a, b); });
    default: return;
  }
}

inline bool lookup(int64_t id, Type* t) {
  switch (id) {
    case 2: *t = {id, 32, 18}; return true;
    case 3: *t = {id, 32, 20}; return true;
    case 6: *t = {id, 32, 22}; return true;
    case 7: *t = {id, 32, 24}; return true;
    case 8: *t = {id, 32, 34}; return true;
    case 12: *t = {id, 256, 144}; return true;
    case 13: *t = {id, 256, 176}; return true;
    case 14: *t = {id, 256, 210}; return true;
    default: return false;
  }
}

// Values v .. v + n of a matrix row (v, n multiples of the block's): q (n bytes), a and b (n / 16 each). A row
// past the matrix (`row` null: a panel's unused column) reads as zeros.
inline void unpack_values(const Type& t, const uint8_t* row, int64_t v, int64_t n, uint8_t* q, float* a, float* b) {
  if (row == nullptr) {
    std::fill_n(q, n, 0);
    std::fill_n(a, n / 16, 0.f);
    std::fill_n(b, n / 16, 0.f);
    return;
  }
  row += v / t.qk * t.bytes;
  with_unpack(t.id, [&](auto unpack) {
    for (int64_t u = 0; u < n; u += t.qk, row += t.bytes) unpack(row, q + u, a + u / 16, b + u / 16);
  });
}

}  // namespace ggml_blocks
