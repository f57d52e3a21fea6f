// Arguments of the fused key-switching ops (mod_up, mod_up_keyswitch_inner, switch_modulus;
// semantics in csrc/bind/schema.cpp): filled by the argument checks (csrc/bind/common.h),
// taken by the CPU implementation (csrc/cpu/keyswitch.cpp) and the CUDA one
// (csrc/cuda/keyswitch.cu). Torch-free. Small host tables (digit bounds, dropped and kept
// rows, table row maps) are held inline, so the CUDA launches take them by value and need no
// device copy.
#pragma once
#include <cstdint>

#include "arith.h"
#include "table_rows.h"

namespace fhetorch {

// Ring sizes of the fused ops, on every device: N = 2^log_n with log_n in this range.
constexpr int kFusedMinLogN = 10;
constexpr int kFusedMaxLogN = 17;
constexpr int kMaxDigits = 64;        // mod_up: beta <= 64
constexpr int kMaxDigitLimbs = 256;   // mod_up: limbs per digit (alpha_max)
constexpr int kMaxSwitchRows = 256;   // switch_modulus: dropped rows D and destination limbs Ld
constexpr int kMaxSwitchSrc = 32767;  // switch_modulus: source limbs Ls (row indices fit int16)

// ModUp of B polynomials (or, in tensor-product mode, of a1 * b1 for B ciphertext pairs)
// from the level (L limbs) to ext = level + K special primes, digit j = limbs [lo[j], lo[j+1]).
struct ModUpArgs {
  const int32_t* a;            // (B, L, n), a_stride words between polynomials; tensor-product mode: (B, 2, L, n)
  const int32_t* b;            // tensor-product mode: (B, 2, L, n) or, b_stride = 0, (2, L, n); else null
  int64_t b_stride;            // words between b's ciphertexts
  int64_t a_stride;            // words between a's polynomials (not tensor-product mode): L n, or more for a view
                               // of one component of ciphertexts (a rotation's c1 of a batch, a giant's y1)
  const int32_t* pre;          // (L,)
  const int32_t* mod_ext;      // (L + K, 2)
  const int32_t* psi_ext;      // (L + K, n), or any (R, n) read through psi_rows
  const int32_t* psi_inv_ext;  // (L + K, n), or any (R, n) read through psi_rows
  const int32_t* mats;         // (beta, L + K, alpha_max)
  int64_t B;
  int L, K, log_n, beta, alpha_max;
  int lo[kMaxDigits + 1];
  TableRows psi_rows;          // the psi_ext / psi_inv_ext row of each ext limb (count 0: row i)
  // A rotation fused in: a (and mod_up_keyswitch_inner's addend) is read as automorphism(., galois),
  // i.e. at automorphism_source(x) (arith.h); 0: as is. Never with b.
  uint32_t galois;
};

// The key of mod_up_keyswitch_inner, its addend (relinearisation's P * (d0, d1), a rotation's
// P * sigma(c0)) and the running sum it is added to (a linear transform's giant steps).
struct KeyArgs {
  const int32_t* key_q;  // (digits, 2, Lq_key, n)
  const int32_t* key_p;  // (digits, 2, K, n)
  int Lq_key, q_start, digit_start;
  const int32_t* addend;  // (B, Ka, La, n), addend_stride words between its ciphertexts, or null (tensor-product
                          // mode: computed, La = L, Ka = 2)
  const int32_t* c_add;   // (La,), or null when La = 0
  int La;
  int Ka = 2;                   // components of the addend: 2, or 1 (component 0 only)
  const int32_t* acc = nullptr;  // (B, 2, L + K, n) added to the whole result, or null
  int64_t addend_stride = 0;     // Ka La n, or more for a view of some components of ciphertexts
};

// Modulus switch of B polynomials (..., Ls, n) -> (..., Ld, n). The addend is added per
// group of K consecutive polynomials (a ciphertext: K = 2): addend (B / K, Ka, Ld, n) onto the
// first Ka polynomials of each group.
struct SwitchArgs {
  const int32_t* x;             // (B, Ls, n)
  const int32_t* pre;           // (D,)
  const int32_t* mod_drop;      // (D, 2)
  const int32_t* psi_inv_drop;  // (D, n), or any (R, n) read through psi_inv_drop_rows
  const int32_t* mod_dst;       // (Ld, 2)
  const int32_t* psi_dst;       // (Ld, n), or any (R, n) read through psi_dst_rows
  const int32_t* mat;           // (Ld, D)
  const int32_t* c_keep;        // (Ld,)
  const int32_t* c_sub;         // (Ld,)
  const int32_t* addend;        // or null
  int64_t B;
  int Ls, D, Ld, log_n, K, Ka;
  uint32_t galois;              // the addend is read as automorphism(addend, galois); 0: as is
  int16_t drop[kMaxSwitchRows];  // rows of x dropped
  int16_t keep[kMaxSwitchRows];  // per destination limb: its row of x, or -1
  TableRows psi_inv_drop_rows;   // the psi_inv_drop row of each dropped limb (count 0: row k)
  TableRows psi_dst_rows;        // the psi_dst row of each destination limb (count 0: row i)
};

FT_HD int mod_up_size(const ModUpArgs& a, int j) { return a.lo[j + 1] - a.lo[j]; }

}  // namespace fhetorch
