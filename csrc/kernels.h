// The device API: one function per op of csrc/bind/schema.cpp (where the semantics are
// stated), on raw pointers, torch-free, declared once for both devices. csrc/cpu/kernels.h
// declares it with a cpu::Threads context returning void, csrc/cuda/kernels.h with a
// cuda::Stream context returning the first launch error (cudaSuccess otherwise). Counts may
// be zero; the bindings (csrc/bind/ops.h) have checked every argument.
#pragma once
#include <cstdint>

#include "elementwise.h"
#include "hoisted_mac.h"
#include "keyswitch.h"
#include "table_rows.h"
#include "tfhe.h"
#include "tfhe_fft.h"

#define FHETORCH_DECLARE_KERNELS(R, CTX)                                                                              \
  /* x, y: (rows, N = 2^log_n), row r with limb l = r % L of mod and row table_row(psi_rows, l) of the twiddle    \
     table (L, N), or (R, N) through the map; y may equal x. */                                                    \
  R ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,      \
        const TableRows& psi_rows, const CTX& ctx);                                                                 \
  R intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi_inv, \
         const int32_t* post, const TableRows& psi_rows, const CTX& ctx);                                           \
  /* x: (batch, La, n) standard form -> y: (batch, Lb, n) Montgomery form. La <= 256. */                           \
  R bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,           \
          const int32_t* mod_out, const int32_t* mat, const CTX& ctx);                                             \
  /* out[i] = a[i] (op) b[i % nb] (Axpby: a[i] * ca[l] + b[i % nb] * cb[l]; MulConst: a[i] * ca[l]; Neg: -a[i]),   \
     i < total, limb l = (i / n) % L. */                                                                            \
  R elementwise(EwOp op, const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,  \
                int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod, const CTX& ctx);                  \
  /* One pass of lincomb (csrc/elementwise.h, LincombArgs): g.out[i] = start + sum_(t < g.terms) g.x[t][i] *      \
     g.consts[t * L + l], start = g.acc[i] or lincomb_start; l = (i / n) % L. */                                   \
  R lincomb(const LincombArgs& g, const CTX& ctx);                                                                 \
  /* One pass of tensor_product (csrc/elementwise.h, TensorProductArgs): g.out = g.acc (or 0) + sum over the     \
     pass's pairs of a_t (x) b_t, (batch, 3, L, n). */                                                               \
  R tensor_product(const TensorProductArgs& g, const CTX& ctx);                                                    \
  /* x, out: (rows, 2^log_n) NTT-domain rows; out must not alias x. */                                              \
  R automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois, const CTX& ctx);        \
  R keyswitch_inner(const InnerArgs& g, const CTX& ctx);                                                           \
  R hoisted_mac(const MacArgs& g, const CTX& ctx);                                                                 \
  R keyswitch_inner_sum(const InnerSumArgs& g, const CTX& ctx);                                                    \
  /* The fused key-switching ops: out (B, beta, L + K, n) for mod_up, (B, 2, L + K, n) for                          \
     mod_up_keyswitch_inner, (B, Ld, n) for switch_modulus; 2^10 <= N <= 2^17. */                                  \
  R mod_up(const ModUpArgs& g, int32_t* out, const CTX& ctx);                                                      \
  R mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const CTX& ctx);                  \
  R switch_modulus(const SwitchArgs& g, int32_t* out, const CTX& ctx);                                             \
  /* u = mod_up_keyswitch_inner(g, key) (B, 2, L + K, n), then out = switch_modulus(sw) with sw.x = u. */           \
  R keyswitch(const ModUpArgs& g, const KeyArgs& key, const SwitchArgs& sw, int32_t* u, int32_t* out,              \
              const CTX& ctx);                                                                                      \
  /* x: (rows, n) int64 -> out (rows, L, n) Montgomery form. */                                                     \
  R to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod, const int32_t* r2,  \
           const CTX& ctx);                                                                                         \
  /* x: (rows, L, n) standard form -> centred mixed-radix digits (rows, L, n). L <= 256. */                        \
  R crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,                 \
               const int32_t* garner, const CTX& ctx);                                                              \
  /* key: 8 words. Uniform: out (total = rows * L * n) residues, limb (e / n) % L; ternary, CBD: int64. */         \
  R sample_uniform(const uint32_t* key, uint64_t stream, int32_t* out, int64_t total, int L, int64_t n,            \
                   const int32_t* mod, const CTX& ctx);                                                             \
  R sample_ternary(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const CTX& ctx);             \
  R sample_cbd(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const CTX& ctx);                  \
  /* ---- TFHE (csrc/tfhe.h): int64 values mod q = q0 * q1 ---- */                                                  \
  /* out (total,) uniform in [lo, lo + span), 1 <= span <= 2^62. */                                                \
  R tfhe_sample_int(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo, uint64_t span,   \
                    const CTX& ctx);                                                                                \
  /* out[i] = round(x[i] * 2^bits / q) mod 2^bits, x in [0, q), bits <= 62. */                                     \
  R tfhe_modulus_switch(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int bits,                 \
                        const CTX& ctx);                                                                            \
  /* out (total, level): balanced digits of tfhe_modulus_switch(x, base_log * level). */                          \
  R tfhe_decompose(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int base_log, int level,        \
                   const CTX& ctx);                                                                                 \
  R tfhe_keyswitch(const KeyswitchArgs& g, const CTX& ctx);                                                        \
  /* The tensor-core key switch's two passes (csrc/tfhe.h): digits (rows, tfhe_ks_digit_cols(g)) int8 of g.ct's    \
     B ciphertexts, zero rows below; then g.out (B, n_out + 1) from sums (>= B rows, kKsPlanes (n_out + 1)). */       \
  R tfhe_keyswitch_digits(const KeyswitchArgs& g, int8_t* digits, int64_t rows, const CTX& ctx);                   \
  R tfhe_keyswitch_combine(const KeyswitchArgs& g, const int32_t* sums, const CTX& ctx);                           \
  /* glwe, out: (B, k1, N); ggsw (k1, level, k1, 2, N) shared by the batch. */                                     \
  R tfhe_external_product(const TfheRing& r, const int64_t* glwe, const int32_t* ggsw, int64_t* out, int64_t B,    \
                          const CTX& ctx);                                                                          \
  /* The batch's key switches (csrc/tfhe.h GlweKeyswitchArgs, tfhe_team_glwe_keyswitch_op). */                  \
  R tfhe_glwe_keyswitch(const GlweKeyswitchArgs& g, const CTX& ctx);                                              \
  /* CMux-level batching: one step per key bit advances every ciphertext of the batch. */                          \
  R tfhe_blind_rotate(const BlindRotateArgs& g, const CTX& ctx);                                                   \
  /* ---- TFHE on the 2^64 torus by float64 FFT (csrc/tfhe_fft.h) ---- */                                           \
  /* x (B, N) int64 -> out (B, N/2) complex (interleaved doubles). */                                              \
  R tfhe_fft(const TfheFftRing& f, const int64_t* x, double* out, int64_t B, const CTX& ctx);                       \
  /* x (B, N/2) complex -> out (B, N) int64, rounded mod 2^64. */                                                  \
  R tfhe_ifft(const TfheFftRing& f, const double* x, int64_t* out, int64_t B, const CTX& ctx);                      \
  /* digits (B, rows, N), key (rows, cols, N/2) complex shared by the batch -> out (B, cols, N). */                \
  R tfhe_fft_product(const TfheFftRing& f, const int64_t* digits, const double* key, int64_t* out, int64_t B,       \
                     int rows, int cols, const CTX& ctx);                                                   \
  /* out (B, k1, N) = c0 + GGSW x (c1 - c0) on the torus (c0 null: GGSW x c1); ggsw (k1, level, k1, N/2)        \
     complex shared by the batch. */                                                                               \
  R tfhe_torus_cmux(const TfheTorusGgsw& g, const int64_t* c0, const int64_t* c1, const double* ggsw, int64_t* out, \
                    int64_t B, const CTX& ctx);                                                          \
  /* The blind rotation with a Fourier key (csrc/tfhe_fft.h, FourierRotateArgs): mod q in and out; multi-bit   \
     where a.grouping > 1. */                                                                                      \
  R tfhe_fourier_blind_rotate(const FourierRotateArgs& a, const CTX& ctx);                                         \
  /* out (B, k1, level, k1, N/2) complex: the key bundle of group j of each ciphertext (multi-bit, Fourier). */   \
  R tfhe_fourier_key_bundle(const FourierRotateArgs& a, int j, double* out, const CTX& ctx);
