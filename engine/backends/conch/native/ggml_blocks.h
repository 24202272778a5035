// A GGUF's quantized blocks read into one form for every ggml type the kernels take: each value is
// a * q + b, with q an unsigned byte and (a, b) its group's pair (panel_blocks.h keeps the fields they come from).
//
//   Q8_0  (32 values, 34 bytes)  q = int8 + 128
//   Q4_0  (32, 18)               q = nibble
//   Q4_1  (32, 20)               q = nibble
//   Q5_0  (32, 22)               q = nibble + 16 h
//   Q5_1  (32, 24)               q = nibble + 16 h
//   Q4_K  (256, 144)             q = nibble
//   Q5_K  (256, 176)             q = nibble + 16 h
//   Q6_K  (256, 210)             q = 6 bits
//
// q4_0(block, q) ... q6_k(block, q): q receives the block's QK values' q in value order (panel_blocks.h's
// Format names each type's).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ggml_blocks {

inline void q8_0(const uint8_t* blk, uint8_t* q) {
  _mm256_storeu_si256((__m256i*)q, _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(blk + 2)),
                                                    _mm256_set1_epi8((char)0x80)));
}

// 16 bytes: value j's nibble is byte j's low 4 bits, value j + 16's its high 4
inline __m256i nibbles32(const uint8_t* bytes) {
  const __m128i v = _mm_loadu_si128((const __m128i*)bytes), low = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
}

inline void q4_0(const uint8_t* blk, uint8_t* q) { _mm256_storeu_si256((__m256i*)q, nibbles32(blk + 2)); }
inline void q4_1(const uint8_t* blk, uint8_t* q) { _mm256_storeu_si256((__m256i*)q, nibbles32(blk + 4)); }

// Q5_0 / Q5_1: value j's fifth bit is bit j of the 32-bit qh (little-endian), before the nibbles: 16 added
inline __m256i fifth_bits(const uint8_t* qh_bytes, __m256i nibbles) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  return _mm256_or_si256(nibbles, _mm256_maskz_set1_epi8((__mmask32)qh, 16));
}

inline void q5_0(const uint8_t* blk, uint8_t* q) { _mm256_storeu_si256((__m256i*)q, fifth_bits(blk + 2, nibbles32(blk + 6))); }
inline void q5_1(const uint8_t* blk, uint8_t* q) { _mm256_storeu_si256((__m256i*)q, fifth_bits(blk + 4, nibbles32(blk + 8))); }

// 32 bytes' low and high nibbles (each byte's value & 15, >> 4), and a bit of each byte (0 or 1)
inline __m256i low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0xF)); }
inline __m256i high4(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0xF)); }
inline __m256i bit(__m256i v, int k) { return _mm256_and_si256(_mm256_srli_epi16(v, k), _mm256_set1_epi8(1)); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256((__m256i*)p, v); }

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
inline void k_quant(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
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
}

inline void q4_k(const uint8_t* blk, uint8_t* q) { k_quant<false>(blk + 16, nullptr, q); }
inline void q5_k(const uint8_t* blk, uint8_t* q) { k_quant<true>(blk + 48, blk + 16, q); }

// Q6_K: two halves of 128 values; in a half, ql's 64 bytes give the low 4 bits (values 0-63: low nibbles,
// 64-127: high nibbles) and qh's 32 bytes the top 2 bits (bits 2k, 2k + 1 for quarter k)
inline void q6_k(const uint8_t* blk, uint8_t* q) {
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
}

}  // namespace ggml_blocks
