// Torch-free CPU kernels on raw pointers. Each takes a half-open range of independent
// work items ([r0, r1): rows or elements) so the binding layer can split it over threads.
// The semantics of every kernel are stated once, in csrc/bind/schema.cpp.
#pragma once
#include <cstdint>

namespace fhetorch::cpu {

// Rows are limbs of N = 2^log_n coefficients; row r uses limb l = r % L of the tables: mod[l],
// post[l] and the twiddle row psi_rows[l] of psi (row l when psi_rows is null).
void ntt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod,
              const int32_t* psi, const int* psi_rows = nullptr);
void intt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod,
               const int32_t* psi_inv, const int32_t* post, const int* psi_rows = nullptr);

// x: (batch, La, n) -> y: (batch, Lb, n); items are (batch, coefficient) pairs.
void bconv(const int32_t* x, int32_t* y, int64_t i0, int64_t i1, int La, int Lb, int64_t n,
           const int32_t* mod_in, const int32_t* mod_out, const int32_t* mat);

enum class Binary { Add, Sub, Mul };
// out[i] = a[i] (op) b[i % nb], limb (i / n) % L.
void binary(Binary op, const int32_t* a, const int32_t* b, int32_t* out, int64_t i0, int64_t i1,
            int64_t nb, int64_t n, int L, const int32_t* mod);
void neg(const int32_t* a, int32_t* out, int64_t i0, int64_t i1, int64_t n, int L, const int32_t* mod);
// out[i] = a[i]*ca[l] + b[i % nb]*cb[l] (Montgomery products); cb == nullptr: out = a*ca.
void axpby(const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
           int64_t i0, int64_t i1, int64_t nb, int64_t n, int L, const int32_t* mod);
// a: (B,2,L,n), b: (B or 1,2,L,n) -> out (B,3,L,n); items are elements of one (L,n) plane.
void tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t i0, int64_t i1,
                    int64_t plane, int64_t batch, bool b_broadcast, int64_t n, int L, const int32_t* mod);

void automorphism(const int32_t* x, int32_t* out, int64_t r0, int64_t r1, int log_n, uint32_t galois);

// d: (beta, L, n); key_q: (digits, 2, Lq_key, n); key_p: (digits, 2, K, n); out (2, L, n).
void keyswitch_inner(const int32_t* d, const int32_t* key_q, const int32_t* key_p, int32_t* out,
                     int64_t i0, int64_t i1, int beta, int L, int Lq, int K, int Lq_key,
                     int q_start, int digit_start, int64_t n, const int32_t* mod);

// ---- fused key switching (csrc/cpu/keyswitch.cpp) ----
// ModUp's base conversion: t (L, n) standard-form INTT outputs; for each digit j (limbs
// [lo[j], lo[j+1])) and coefficient, the converted values of every ext limb outside the
// digit go to out[j][i] (out: (beta, Lext, n)). mats: (beta, Lext, alpha_max). Items are
// (digit, coefficient) pairs.
void mod_up_bconv(const int32_t* t, int32_t* out, int64_t i0, int64_t i1, const int* lo, int Lext, int64_t n,
                  const int32_t* mod_ext, const int32_t* mats, int alpha_max);
// out[i] = x[keep[i]] * c_keep[i] + y[i] * c_sub[i] (+ add[i]) for one polynomial's rows:
// y (Ld, n) NTT outputs, x (Ls, n), keep[i] = -1: no first term; add may be null. Items
// are elements of the (Ld, n) plane.
void switch_combine(const int32_t* x, const int32_t* y, const int32_t* add, int32_t* out, int64_t i0, int64_t i1,
                    const int* keep, int64_t n, const int32_t* mod_dst, const int32_t* c_keep,
                    const int32_t* c_sub);
// out[i] = out[i] + add[i] * c[l] for elements i of a (La, n) plane, limb l = i / n.
void add_scaled(int32_t* out, const int32_t* add, int64_t i0, int64_t i1, int64_t n, const int32_t* mod,
                const int32_t* c);

// x: (rows, n) int64 -> out (rows, L, n) Montgomery form; items are (row, coefficient).
void to_rns(const int64_t* x, int32_t* out, int64_t i0, int64_t i1, int L, int64_t n,
            const int32_t* mod, const int32_t* r2);
// x: (rows, L, n) standard form -> centred mixed-radix digits; items are (row, coefficient).
void crt_digits(const int32_t* x, int32_t* out, int64_t i0, int64_t i1, int L, int64_t n,
                const int32_t* mod, const int32_t* garner);

void sample_uniform(const uint32_t* key, uint64_t stream, int32_t* out, int64_t i0, int64_t i1,
                    int L, int64_t n, const int32_t* mod);
void sample_ternary(const uint32_t* key, uint64_t stream, int64_t* out, int64_t i0, int64_t i1);
void sample_cbd(const uint32_t* key, uint64_t stream, int64_t* out, int64_t i0, int64_t i1);

}  // namespace fhetorch::cpu
