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

#include <cstdint>
#include <cstring>

namespace ggml_blocks {

inline float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// ggml's get_scale_min_k4: sub-block j's 6-bit scale and min from a K-quant's 12 packed bytes
inline void scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// the two groups of a 32-value block share one pair
inline void pair32(float a, float b, float* as, float* bs) {
  as[0] = as[1] = a;
  bs[0] = bs[1] = b;
}

inline void q8_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  for (int i = 0; i < 32; ++i) q[i] = blk[2 + i] ^ 0x80;
  pair32(d, -128.f * d, a, b);
}

inline void nibbles32(const uint8_t* bytes, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = bytes[j] & 0xF;
    q[j + 16] = bytes[j] >> 4;
  }
}

inline void q4_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  nibbles32(blk + 2, q);
  pair32(d, -8.f * d, a, b);
}

inline void q4_1(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  nibbles32(blk + 4, q);
  pair32(half(blk), half(blk + 2), a, b);
}

// Q5_0 / Q5_1: value j's fifth bit is bit j of the 32-bit qh (little-endian), before the nibbles
inline void fifth_bits(const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 32; ++j) q[j] |= ((qh >> j) & 1) << 4;
}

inline void q5_0(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const float d = half(blk);
  nibbles32(blk + 6, q);
  fifth_bits(blk + 2, q);
  pair32(d, -16.f * d, a, b);
}

inline void q5_1(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  nibbles32(blk + 8, q);
  fifth_bits(blk + 4, q);
  pair32(half(blk), half(blk + 2), a, b);
}

// Q4_K / Q5_K: 4 spans of 64 values, each 32 bytes of nibbles (low: the first 32 values, high: the next 32)
// with sub-blocks 2s and 2s + 1; Q5_K adds bit s*2 (low) and s*2 + 1 (high) of qh[l] as 16
inline void k_quant(const uint8_t* blk, const uint8_t* qs, const uint8_t* qh, uint8_t* q, float* a, float* b) {
  const float d = half(blk), dmin = half(blk + 2);
  for (int s = 0; s < 4; ++s, qs += 32, q += 64) {
    for (int l = 0; l < 32; ++l) {
      q[l] = qs[l] & 0xF;
      q[l + 32] = qs[l] >> 4;
    }
    if (qh != nullptr)
      for (int l = 0; l < 32; ++l) {
        q[l] |= ((qh[l] >> (2 * s)) & 1) << 4;
        q[l + 32] |= ((qh[l] >> (2 * s + 1)) & 1) << 4;
      }
    for (int h = 0; h < 2; ++h) {
      int sc, m;
      scale_min(2 * s + h, blk + 4, &sc, &m);
      pair32(d * sc, -dmin * m, a + 4 * s + 2 * h, b + 4 * s + 2 * h);
    }
  }
}

inline void q4_k(const uint8_t* blk, uint8_t* q, float* a, float* b) { k_quant(blk, blk + 16, nullptr, q, a, b); }
inline void q5_k(const uint8_t* blk, uint8_t* q, float* a, float* b) { k_quant(blk, blk + 48, blk + 16, q, a, b); }

// Q6_K: two halves of 128 values; in a half, ql's 64 bytes give the low 4 bits (values 0-63: low nibbles,
// 64-127: high nibbles) and qh's 32 bytes the top 2 bits (2 bits per 32-value quarter); 16 int8 scales
inline void q6_k(const uint8_t* blk, uint8_t* q, float* a, float* b) {
  const uint8_t* ql = blk;
  const uint8_t* qh = blk + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
  const float d = half(blk + 208);
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      q[n + l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
      q[n + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      q[n + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      q[n + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    }
  }
  for (int g = 0; g < 16; ++g) {
    a[g] = d * sc[g];
    b[g] = -32.f * a[g];
  }
}

struct Type {
  int qk;      // values a block holds (a multiple of 16)
  int bytes;   // its size in the file
  void (*unpack)(const uint8_t*, uint8_t*, float*, float*);
};

// ggml's type numbers
inline bool lookup(int64_t qtype, Type* t) {
  switch (qtype) {
    case 2: *t = {32, 18, q4_0}; return true;
    case 3: *t = {32, 20, q4_1}; return true;
    case 6: *t = {32, 22, q5_0}; return true;
    case 7: *t = {32, 24, q5_1}; return true;
    case 8: *t = {32, 34, q8_0}; return true;
    case 12: *t = {256, 144, q4_k}; return true;
    case 13: *t = {256, 176, q5_k}; return true;
    case 14: *t = {256, 210, q6_k}; return true;
    default: return false;
  }
}

// A whole matrix row of K values: q (K bytes), a and b (K / 16 each)
inline void unpack_row(const Type& t, const uint8_t* row, int64_t K, uint8_t* q, float* a, float* b) {
  for (int64_t v = 0; v < K; v += t.qk, row += t.bytes) t.unpack(row, q + v, a + v / 16, b + v / 16);
}

}  // namespace ggml_blocks
