// Torch-free CPU implementations on raw pointers, one function per op of
// csrc/bind/schema.cpp (where the semantics are stated), each running its whole op: the
// CPU counterpart of csrc/cuda/kernels.h, with a Threads context in place of a stream. The
// element-wise arithmetic comes from the shared headers (csrc/elementwise.h, hoisted_mac.h,
// chacha.h), so the CUDA kernels compute the same; NTT and base conversion are the plain
// algorithms the CUDA kernels are checked against bit for bit.
#pragma once
#include <cstdint>
#include <functional>

#include "../elementwise.h"
#include "../hoisted_mac.h"
#include "../keyswitch.h"

namespace fhetorch::cpu {

using Range = std::function<void(int64_t, int64_t)>;

// What an op may use from its caller (the binding): `par` runs f on subranges covering
// [0, total), in parallel, each at least `grain` items long where possible; `scratch` lends a
// buffer of that many int32 words, valid until the op returns.
struct Threads {
  std::function<void(int64_t total, int64_t grain, const Range& f)> par;
  std::function<int32_t*(int64_t words)> scratch;
};

// x, y: (rows, N = 2^log_n), row r with limb r % L of mod / psi (L, N); y may equal x.
void ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,
         const Threads& th);
void intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi_inv,
          const int32_t* post, const Threads& th);
// The transforms of rows [r0, r1) of x in place (the building blocks of the fused ops).
void ntt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi);
void intt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi_inv,
               const int32_t* post);

// x: (batch, La, n) standard form -> y: (batch, Lb, n) Montgomery form. La <= 256.
void bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
           const int32_t* mod_out, const int32_t* mat, const Threads& th);
// One coefficient of bconv: inputs x[j * n], j < La -> outputs y[i * n], i < Lb, with
// matrix row i at mat + i * mat_stride.
void bconv_coefficient(const int32_t* x, int32_t* y, int La, int Lb, int64_t n, const int32_t* mod_in,
                       const int32_t* mod_out, const int32_t* mat, int64_t mat_stride);

// out[i] = a[i] (op) b[i % nb] (Axpby: a[i] * ca[l] + b[i % nb] * cb[l]; MulConst: a[i] * ca[l];
// Neg: -a[i]) for i < total, limb l = (i / n) % L.
void elementwise(EwOp op, const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
                 int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod, const Threads& th);
// a: (batch, 2, L, n), b: (batch, or 1 if b_broadcast, 2, L, n) -> out (batch, 3, L, n).
void tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t batch, bool b_broadcast, int64_t n,
                    int L, const int32_t* mod, const Threads& th);
// x, out: (rows, 2^log_n) NTT-domain rows; out must not alias x.
void automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois, const Threads& th);

void keyswitch_inner(const InnerArgs& g, const Threads& th);
void hoisted_mac(const MacArgs& g, const Threads& th);

// The fused key-switching ops (csrc/cpu/keyswitch.cpp): out (B, beta, L + K, n) for mod_up,
// (B, 2, L + K, n) for mod_up_keyswitch_inner, (B, Ld, n) for switch_modulus.
void mod_up(const ModUpArgs& g, int32_t* out, const Threads& th);
void mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const Threads& th);
void switch_modulus(const SwitchArgs& g, int32_t* out, const Threads& th);

// x: (rows, n) int64 -> out (rows, L, n) Montgomery form.
void to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod, const int32_t* r2,
            const Threads& th);
// x: (rows, L, n) standard form -> centred mixed-radix digits (rows, L, n). L <= 256.
void crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                const int32_t* garner, const Threads& th);

// key: 8 words. Uniform: out (total = rows * L * n) residues, limb (e / n) % L.
void sample_uniform(const uint32_t* key, uint64_t stream, int32_t* out, int64_t total, int L, int64_t n,
                    const int32_t* mod, const Threads& th);
void sample_ternary(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const Threads& th);
void sample_cbd(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const Threads& th);

}  // namespace fhetorch::cpu
