// Modular arithmetic on 32-bit RNS limbs, shared by the CPU and CUDA kernels.
//
// Conventions (docs/architecture.md, "Kernel conventions"):
//  * every prime q is odd and below 2^31; `qinv` is q^-1 mod 2^32 as a signed int32;
//  * ring elements are stored in Montgomery form (x * 2^32 mod q), canonical in [0, q);
//  * a Montgomery product of two canonical values is one signed Montgomery reduction
//    (Seiler 2018; Cheddar Alg. 2): 3 multiplies, output in (-q, q).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define FT_HD __host__ __device__ __forceinline__
#else
#define FT_HD inline
#endif

namespace fhetorch {

FT_HD int32_t mulhi32(int32_t a, int32_t b) {
#if defined(__CUDA_ARCH__)
  return __mulhi(a, b);
#else
  return static_cast<int32_t>((static_cast<int64_t>(a) * b) >> 32);
#endif
}

// The unsigned high word: hi(a * b) of a 32 x 32-bit product.
FT_HD uint32_t umulhi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// x in [-q*2^31, q*2^31)  ->  x * 2^-32 mod q, in (-q, q).
FT_HD int32_t smr(int64_t x, int32_t q, int32_t qinv) {
  // t = lo(x) * qinv mod 2^32, taken as signed; x - t*q is then divisible by 2^32.
  int32_t t = static_cast<int32_t>(static_cast<uint32_t>(x) * static_cast<uint32_t>(qinv));
  return static_cast<int32_t>(x >> 32) - mulhi32(t, q);
}

// (-q, q) -> [0, q)
FT_HD int32_t canon(int32_t x, int32_t q) { return x + ((x >> 31) & q); }

// Montgomery product a * b * 2^-32 mod q for |a|, |b| < q, canonical result.
FT_HD int32_t mont_mul(int32_t a, int32_t b, int32_t q, int32_t qinv) {
  return canon(smr(static_cast<int64_t>(a) * b, q, qinv), q);
}

// a + b mod q for a, b in [0, q); q < 2^31 so the sum fits in 32 unsigned bits.
FT_HD int32_t add_mod(int32_t a, int32_t b, int32_t q) {
  uint32_t s = static_cast<uint32_t>(a) + static_cast<uint32_t>(b);
  return static_cast<int32_t>(s >= static_cast<uint32_t>(q) ? s - static_cast<uint32_t>(q) : s);
}

// a - b mod q for a, b in [0, q).
FT_HD int32_t sub_mod(int32_t a, int32_t b, int32_t q) { return canon(a - b, q); }

FT_HD int32_t neg_mod(int32_t a, int32_t q) { return a == 0 ? 0 : q - a; }

// [0, q) -> (-q/2, q/2]: the centred representative used by base conversion.
FT_HD int32_t centre(int32_t x, int32_t q) { return x > (q >> 1) ? x - q : x; }

// Lazy accumulation for base conversion (Cheddar 4.2): each product t*c has
// |t| < 2^30 and |c| <= p/2, so |t*c| < 2^29*p. Starting from |acc| <= 2^31*p, four
// products keep |acc| < 2^32*p < 2^63; this folds acc back to [-2^31*p, 2^31*p),
// which is also the input range of smr().
FT_HD int64_t fold_acc(int64_t acc, int32_t p) {
  const int64_t half = static_cast<int64_t>(p) << 31;
  if (acc >= half) acc -= half << 1;
  else if (acc < -half) acc += half << 1;
  return acc;
}

FT_HD uint32_t bit_reverse(uint32_t x, int bits) {
#if defined(__CUDA_ARCH__)
  return __brev(x) >> (32 - bits);
#else
  uint32_t r = 0;
  for (int i = 0; i < bits; ++i) { r = (r << 1) | (x & 1u); x >>= 1; }
  return r;
#endif
}

// Index map of the automorphism X -> X^g on an NTT-domain polynomial stored in
// bit-reversed order: position k holds a(psi^(2*brev(k)+1)), so out[k] = in[src].
FT_HD uint32_t automorphism_source(uint32_t k, uint32_t galois, int log_n) {
  uint32_t two_n_mask = (2u << log_n) - 1u;
  uint32_t e = 2u * bit_reverse(k, log_n) + 1u;
  uint32_t e2 = (e * galois) & two_n_mask;
  return bit_reverse((e2 - 1u) >> 1, log_n);
}

}  // namespace fhetorch
