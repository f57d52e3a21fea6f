// The Fourier blind rotation (csrc/tfhe_fft.h) scheduled in registers for the shapes of the 4-bit
// presets: N = 2^10 or 2^11, k = 1, level 1. Every value goes through the same float64 operations,
// in the same order, as in the shared step functions (tfhe_fft_stages, tfhe_cmac, the digit and
// rounding functions), so the results equal the CPU's bit for bit; only the schedule differs.
//
// One block of M/8 threads per ciphertext (128 at N = 2^11). Each thread holds 16 complex values
// in registers (one row's in rounds A and B, both rows' in round C); per key bit:
//   decompose (X^a - 1) acc into round A's values   (the accumulator stays in shared memory)
//   forward  A: bits [6, log M)   exchange   B: bits [3, 6)   exchange   C: bits [0, 3), both rows
//   product with the key bit's GGSW, both rows (the key read once per value, in tfhe_fft_order)
//   inverse  C   exchange   B   exchange   A, round to the torus, add to the accumulator
// Four exchanges through one shared buffer beside the accumulator, eight barriers per key bit, five
// of them over one row's threads only; round C holds both rows (8 values each) so the product needs
// no exchange of its own. The generic fused kernel (csrc/cuda/tfhe_fft.cu) moves every round's
// values through shared memory and keeps the digits there; docs/tfhe.md ("Where the time goes").
#include <algorithm>
#include <cstdlib>

#include <cooperative_groups.h>

#include "kernels.h"
#include "program.cuh"
#include "util.cuh"
#include "../tfhe_fft.h"

namespace fhetorch::cuda {
namespace {

template <int LOG_M>
struct RegisterRotation {
  static constexpr int M = 1 << LOG_M;
  static constexpr int T = M / 16;        // threads per row in rounds A and B
  static constexpr int THREADS = 2 * T;   // two rows (k + 1 = 2); round C: one thread per 8 values
  static constexpr int RA = LOG_M - 6;    // round A's bits: [6, LOG_M)
  static constexpr int EA = 1 << RA;      // values per item of round A
  static constexpr int GA = 16 / EA;      // items per thread in round A
  static constexpr int BUF = 4 * M;       // doubles per buffer: 2 rows of M complex = 2 N int64
  static constexpr uint32_t E = BUF / 2;  // the exchange buffer, after the accumulator (complex units)
  // Registers: capped for two blocks per SM (255 per thread at 128 threads; at 168, for three blocks,
  // the compiler spilled ~570 bytes per thread and the rotation ran 7 % slower, H100).
  static constexpr int BLOCKS = 256 / THREADS;
  static_assert(RA == 3 || RA == 4, "N = 2^10 or 2^11");

  // Complex value x of row r in a buffer: 16 bytes, its 8-value groups swizzled by bits 3..5 so
  // that every round's 8 consecutive lanes hit distinct bank groups.
  // (buffers are offsets in complex values into the block's shared memory, so every address is
  // a 32-bit shared one)
  static __device__ __forceinline__ uint32_t at(uint32_t buf, int r, uint32_t x) {
    return buf + static_cast<uint32_t>(r * M) + (x ^ ((x >> 3) & 7u));
  }
  static __device__ __forceinline__ void put(double2* sm, uint32_t buf, int r, uint32_t x, TfheComplex v) {
    sm[at(buf, r, x)] = make_double2(v.re, v.im);
  }
  static __device__ __forceinline__ TfheComplex get(const double2* sm, uint32_t buf, int r, uint32_t x) {
    const double2 v = sm[at(buf, r, x)];
    return TfheComplex{v.x, v.y};
  }
  // Value i of a thread's 16 in round A and round B (o: the thread's item bits).
  static __device__ __forceinline__ uint32_t value_a(int t, int i) {
    return static_cast<uint32_t>(t + T * (i / EA)) | (static_cast<uint32_t>(i % EA) << 6);
  }
  // Round B's x0 of item g: bits [0, 3) and [7, LOG_M) from t, bit 6 g, so that the two items' top-stage
  // nodes (bit 6 above the round's) are siblings: one twiddle, and its parity known (tfhe_fft_stages' TOP).
  static __device__ __forceinline__ uint32_t base_b(int t, int g) {
    const uint32_t u = static_cast<uint32_t>(t);
    return (u & 7u) | (static_cast<uint32_t>(g) << 6) | ((u >> 3) << 7);
  }
  static __device__ __forceinline__ uint32_t value_b(int t, int i) {
    return base_b(t, i / 8) | (static_cast<uint32_t>(i % 8) << 3);
  }
  // A thread's 16 values to and from the exchange buffer in the layout of round L: 'A' or 'B' (row
  // r, thread t of the row) or 'C' (both rows, values 8 tau .. 8 tau + 7).
  template <char L>
  static __device__ __forceinline__ uint32_t value(int t, int tau, int i) {
    return L == 'A' ? value_a(t, i) : L == 'B' ? value_b(t, i) : (static_cast<uint32_t>(tau) << 3) | (i % 8);
  }
  template <char L>
  static __device__ __forceinline__ void store(double2* sm, int r, int t, int tau, const TfheComplex* z) {
#pragma unroll
    for (int i = 0; i < 16; ++i) put(sm, E, L == 'C' ? i / 8 : r, value<L>(t, tau, i), z[i]);
  }
  template <char L>
  static __device__ __forceinline__ void load(const double2* sm, int r, int t, int tau, TfheComplex* z) {
#pragma unroll
    for (int i = 0; i < 16; ++i) z[i] = get(sm, E, L == 'C' ? i / 8 : r, value<L>(t, tau, i));
  }
  // Shared memory of a block: the accumulator, the exchange buffer, the twiddles, the rotations.
  static int64_t smem_bytes(int n) { return 8 * 2 * BUF + 16 * (M / 2) + 4 * (n + 1); }
};

// An int32 as a double, exactly (as static_cast, the CPU's conversion of a digit): the bits of
// 1.5 2^52 + d minus 1.5 2^52, an integer add and a float64 subtraction instead of a conversion
// on the slow 64-bit conversion pipe (16 per clock per SM).
__device__ __forceinline__ double small_int_to_double(int32_t d) {
  constexpr int64_t kMagic = 0x4338000000000000LL;  // 1.5 2^52
  return __dsub_rn(tfhe_double_from_bits(static_cast<uint64_t>(kMagic + d)), 6755399441055744.0);
}

// The one digit of a level-1 decomposition, tfhe_next_digit(tfhe_torus_round(x, b), b): the top b bits
// of y = x + 2^(63 - b) read as a signed b-bit integer, which is y's high word shifted right
// arithmetically (1 <= b <= 32; fourier_rotate_in_registers): three instructions for the dozen of the
// general form.
__device__ __forceinline__ int32_t single_digit(int64_t x, int b) {
  const uint64_t y = static_cast<uint64_t>(x) + (uint64_t(1) << (63 - b));
  return static_cast<int32_t>(static_cast<uint32_t>(y >> 32)) >> (32 - b);
}

// Coefficients c and c + M of a row's digits (c < M), as one complex value: the digits of (X^rot - 1) acc,
// or (MULTI) of acc itself. own: acc's coefficients c and c + M, which the thread holds (row_store).
// N = 2 M.
template <bool MULTI, int N>
__device__ __forceinline__ TfheComplex row_digits(const int64_t* row, const int64_t* own, uint32_t c, int64_t rot,
                                                  int base_log) {
  double d[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t e = c + h * (N / 2);
    int64_t x = own[h];
    if (!MULTI) {
      // coefficient e of X^rot acc: source (e - rot) mod 2N, negated in [N, 2N) (tfhe_rotation_source)
      const uint32_t src = (e - static_cast<uint32_t>(rot)) & (2 * N - 1);
      const int64_t sv = row[src & (N - 1)], rotated = src >= N ? tfhe_torus_sub(0, sv) : sv;
      x = tfhe_torus_sub(rotated, x);
    }
    d[h] = small_int_to_double(single_digit(x, base_log));
  }
  return TfheComplex{d[0], d[1]};
}

// A product's value z at c (c < M) back to the row's coefficients c and c + M, rounded to the torus:
// added to them, or (MULTI) replacing them; the thread keeps the new coefficients in own for the next
// step's digits (one shared-memory read a coefficient fewer).
template <bool MULTI, int LOG_M>
__device__ __forceinline__ void row_store(int64_t* row, int64_t* own, uint32_t c, TfheComplex z) {
  const int64_t lo = tfhe_torus_from_double(z.re, LOG_M), hi = tfhe_torus_from_double(z.im, LOG_M);
  own[0] = MULTI ? lo : tfhe_torus_add(row[c], lo);
  own[1] = MULTI ? hi : tfhe_torus_add(row[c + (1u << LOG_M)], hi);
  row[c] = own[0];
  row[c + (1u << LOG_M)] = own[1];
}

// The barrier of one row's threads (rounds A and B and the accumulator touch only their own row):
// named barrier 1 + r over T threads; the block barrier only around round C, which reads both.
template <class P>
__device__ __forceinline__ void row_barrier(int r) {
  if (r == 0) asm volatile("bar.sync 1, %0;" ::"n"(P::T) : "memory");  // immediate ids: a register id
  else asm volatile("bar.sync 2, %0;" ::"n"(P::T) : "memory");          // reserves all 16 barriers
}

// The twiddles from the block's copy in shared memory (tfhe_fft_stages' TW): loaded once per
// rotation, they stay out of L1, which the key's lines need (twiddle loads from L1 or L2 were the
// largest stall, Nsight Compute). tfhe_fft_stages reads only the even nodes' and the root's (odd nodes
// are their siblings times i), so the copy holds M / 2 slots: node 2c's at c, the root's at 0.
struct SharedTwiddles {
  __device__ static TfheTwiddle at(const double* tw, uint32_t c) {  // (s, t): tfhe_fft_butterfly
    const double2 v = reinterpret_cast<const double2*>(tw)[c];
    return TfheTwiddle{v.x, v.y};
  }
  // The block's copy of the table's slots that tfhe_fft_stages reads.
  __device__ static void copy(double2* dst, const double* table, int m, int rank, int size) {
    for (int c = rank; c < m / 2; c += size) {
      const TfheTwiddle w = TfheGlobalTwiddles::at(table, static_cast<uint32_t>(c));
      dst[c] = make_double2(w.s, w.t);
    }
  }
};

// Round A's and B's stages over a thread's 16 values (one row).
template <bool INV, class P>
__device__ __forceinline__ void rounds_a(TfheComplex* z, int t, const double* tw) {
#pragma unroll
  for (int g = 0; g < P::GA; ++g)
    tfhe_fft_stages<INV, P::RA, 1, SharedTwiddles>(z + g * P::EA, P::M, static_cast<uint32_t>(t + P::T * g), 6, tw);
}
template <bool INV, class P>
__device__ __forceinline__ void rounds_b(TfheComplex* z, int t, const double* tw) {  // items 0, 1: top nodes even, odd
  tfhe_fft_stages<INV, 3, 1, SharedTwiddles, 0>(z, P::M, P::base_b(t, 0), 3, tw);
  tfhe_fft_stages<INV, 3, 1, SharedTwiddles, 1>(z + 8, P::M, P::base_b(t, 1), 3, tw);
}

// MULTI: the multi-bit rotation's groups [j0, j1) (a.grouping > 1): the key of group j is its bundle,
// made ahead at a.bundles row b C + j - j0 (tfhe_fourier_key_bundles); the digits are acc's own and
// the product replaces acc (tfhe_team_fourier_multi_bit_step). Between chunks of groups the
// accumulator waits in a.torus.
template <int LOG_M, bool MULTI>
__global__ void __launch_bounds__(RegisterRotation<LOG_M>::THREADS, RegisterRotation<LOG_M>::BLOCKS)
    fourier_rotate_registers_kernel(const __grid_constant__ FourierRotateArgs a, int j0, int j1, int C) {
  using P = RegisterRotation<LOG_M>;
  constexpr int M = P::M, N = 2 * M;
  extern __shared__ __align__(16) double2 rsmem[];
  int64_t* acc = reinterpret_cast<int64_t*>(rsmem);  // (2, N) torus: the accumulator
  double2* tw_sm = rsmem + P::BUF;                              // the twiddles (M / 2 slots of (s, t))
  int32_t* rots = reinterpret_cast<int32_t*>(rsmem + P::BUF + M / 2);  // a_i's rotations, then the body's
  const int64_t b = blockIdx.x;
  const int tau_all = threadIdx.x, r = tau_all / P::T, t_all = tau_all % P::T;  // round C: tau; A, B: row r, t
  const double* tw = reinterpret_cast<const double*>(tw_sm);
  const auto row_sync = [](int row) { row_barrier<P>(row); };
  const int base_log = a.g.base_log;  // level 1: one digit

  SharedTwiddles::copy(tw_sm, a.g.f.twiddles, M, tau_all, P::THREADS);
  const int64_t k1n = 2 * int64_t(N);
  const int steps = MULTI ? a.n / a.grouping : a.n;
  if (!MULTI) {
    for (int i = tau_all; i <= a.n; i += P::THREADS) rots[i] = static_cast<int32_t>(tfhe_fourier_rotation(a, b, i));
  }
  if (!MULTI || j0 == 0) {
    tfhe_team_fourier_rotate_init(BlockTeam{tau_all, P::THREADS}, a, b, acc);  // syncs
  } else {
    for (int64_t e = tau_all; e < k1n; e += P::THREADS) acc[e] = a.torus[b * k1n + e];
    __syncthreads();
  }

  int64_t own[32];  // this thread's coefficients of its row: own[2 i + h] at value_a(t, i) + h M
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    own[2 * i] = acc[r * N + P::value_a(t_all, i)];
    own[2 * i + 1] = acc[r * N + P::value_a(t_all, i) + M];
  }
  const int64_t per_bit = 4 * int64_t(M);  // complex values of one key bit: (2, 1, 2, M)
  for (int bit = MULTI ? j0 : 0; bit < (MULTI ? j1 : a.n); ++bit) {
    const int64_t rot = MULTI ? 0 : rots[bit];
    if (!MULTI && rot == 0) continue;  // the same for the whole block
    const double* key = MULTI ? a.bundles + 2 * per_bit * (b * C + bit - j0) : a.bsk + 2 * per_bit * bit;
    // Opaque copies: without them the compiler hoists addresses out of the loop (invariants), and
    // the registers they take spill the values themselves.
    int t = t_all, tau = tau_all;
    asm volatile("" : "+r"(t), "+r"(tau));
    {  // the key bit's 128 lines this warp reads in the product, into L1 now (lane: one (row, column,
       // value) slice of 32 threads, 4 lines): the product then waits on L1, not on L2 (+20 %)
      const int lane = tau & 31, w0 = tau & ~31;
      const double* p = key + 2 * ((lane >> 3) * int64_t(M) + ((lane & 7) << (LOG_M - 3)) + w0);
#pragma unroll
      for (int l = 0; l < 4; ++l) asm volatile("prefetch.global.L1 [%0];" ::"l"(p + 16 * l));
    }
    int64_t* row = acc + r * N;
    TfheComplex z[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)  // the digits of row r at round A's values
      z[i] = row_digits<MULTI, N>(row, own + 2 * i, P::value_a(t, i), rot, base_log);
    rounds_a<false, P>(z, t, tw);
    P::template store<'A'>(rsmem, r, t, tau, z);
    row_sync(r);
    P::template load<'B'>(rsmem, r, t, tau, z);
    rounds_b<false, P>(z, t, tw);
    row_sync(r);
    P::template store<'B'>(rsmem, r, t, tau, z);
    __syncthreads();
    // round C: values 8 tau .. 8 tau + 7 of both rows; the product; the inverse round C
    const uint32_t xc = static_cast<uint32_t>(tau) << 3;
    P::template load<'C'>(rsmem, r, t, tau, z);
    tfhe_fft_stages<false, 3, 2, SharedTwiddles>(z, M, xc, 0, tw);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t k = (static_cast<int64_t>(u) << (LOG_M - 3)) | tau;  // tfhe_fft_order(xc | u)
      TfheComplex out[2];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        out[c] = TfheComplex{0.0, 0.0};
#pragma unroll
        for (int rr = 0; rr < 2; ++rr)
          out[c] = tfhe_cmac(out[c], z[8 * rr + u], tfhe_load_complex(key + 2 * ((rr * 2 + c) * int64_t(M) + k)));
      }
      z[u] = out[0];
      z[8 + u] = out[1];
    }
    tfhe_fft_stages<true, 3, 2, SharedTwiddles>(z, M, xc, 0, tw);
    __syncthreads();
    P::template store<'C'>(rsmem, r, t, tau, z);
    __syncthreads();
    P::template load<'B'>(rsmem, r, t, tau, z);
    rounds_b<true, P>(z, t, tw);
    row_sync(r);
    P::template store<'B'>(rsmem, r, t, tau, z);
    row_sync(r);
    P::template load<'A'>(rsmem, r, t, tau, z);
    rounds_a<true, P>(z, t, tw);
#pragma unroll
    for (int i = 0; i < 16; ++i) row_store<MULTI, LOG_M>(row, own + 2 * i, P::value_a(t, i), z[i]);  // its coefficients
    row_sync(r);  // before the next decomposition reads the accumulator (its own row)
  }
  __syncthreads();  // the finish reads both rows
  if (!MULTI || j1 == steps) {
    tfhe_team_fourier_rotate_finish(BlockTeam{tau_all, P::THREADS}, a, b, acc);
  } else {
    for (int64_t e = tau_all; e < k1n; e += P::THREADS) a.torus[b * k1n + e] = acc[e];
  }
}

// ---- batches of a few ciphertexts: one ciphertext on a cluster of two blocks ----------------------
//
// At batch 1 the register kernel's block is latency-bound on one SM (four warps, 16 values each, one
// warp per scheduler). Here block r of a 2-block cluster owns row r: it transforms only its row's
// digits, with 8 values per thread (M/8 threads), pushes the transform into the other block's shared
// memory (distributed shared memory), and after one cluster barrier computes its own output row
// (sum over both input rows, the key read once per value) and inverts it. Per SM: half the FP64 work,
// half the shared-memory traffic and half the key; per warp: half the dependent work per stage.
// Rounds, forward order: bits [7,10), [5,7), [3,5), [0,3) at M = 2^10; [6,9), [3,6), [0,3) at 2^9.
// The last forward round holds values 8 t .. 8 t + 7 (the register kernel's round C, one row), so the
// key reads are the same. Every value sees the same operations in the same order as on the CPU.
template <int LOG_M>
struct ClusterRotation {
  static constexpr int M = 1 << LOG_M;
  static constexpr int THREADS = M / 8;
  static constexpr int ROUNDS = LOG_M == 10 ? 4 : 3;
  static_assert(LOG_M == 9 || LOG_M == 10, "N = 2^10 or 2^11");
  __host__ __device__ static constexpr int round_lo(int k) {
    return LOG_M == 10 ? (k == 0 ? 7 : k == 1 ? 5 : k == 2 ? 3 : 0) : (k == 0 ? 6 : k == 1 ? 3 : 0);
  }
  __host__ __device__ static constexpr int round_bits(int k) { return LOG_M == 10 && (k == 1 || k == 2) ? 2 : 3; }
  // Value i (of 8) of thread t in round K: item g = i >> R of the thread (items t + THREADS g), value
  // u = i mod 2^R of the item, whose index has bits [lo, lo + R) equal to u. Its bits split into the
  // thread's (value0<K>(t)) and the value's (offset<K>(i)), disjoint: x = value0<K>(t) | offset<K>(i).
  template <int K>
  __host__ __device__ static constexpr uint32_t value0(uint32_t t) {
    return (t & ((1u << round_lo(K)) - 1u)) | ((t >> round_lo(K)) << (round_lo(K) + round_bits(K)));
  }
  template <int K>
  __host__ __device__ static constexpr uint32_t offset(int i) {
    return (static_cast<uint32_t>(THREADS * (i >> round_bits(K))) << round_bits(K)) |
           (static_cast<uint32_t>(i & ((1 << round_bits(K)) - 1)) << round_lo(K));
  }
  // Shared memory (complex units): acc (2 rows of N int64 = 2 M complex), two exchange buffers and
  // two buffers the other block pushes its transform into (M each), the twiddles (M / 2, SharedTwiddles),
  // two mbarriers (one unit), the rotations.
  static constexpr uint32_t XCH = 2 * M, PEER = 4 * M, TW = 6 * M, MBAR = 6 * M + M / 2;
  static int64_t smem_bytes(int n) { return 16 * (MBAR + int64_t(1)) + 4 * (n + 1); }
  // Slot of value x in a one-row buffer: 8-value groups swizzled by bits 3..5 (every round's
  // quarter-warps hit distinct 16-byte bank groups). The swizzle is linear over XOR, so a value's slot
  // is its thread's slot (once per thread) XOR a constant: slot(x0 | o) = slot(x0) ^ slot(o).
  __host__ __device__ static constexpr uint32_t swz(uint32_t x) { return x ^ ((x >> 3) & 7u); }
  template <int K>
  static __device__ __forceinline__ uint32_t slot(uint32_t base, int i) {  // base: swz(value0<K>(t))
    return base ^ swz(offset<K>(i));
  }
  template <int K>
  static __device__ __forceinline__ void store(double2* buf, uint32_t base, const TfheComplex* z) {
#pragma unroll
    for (int i = 0; i < 8; ++i) buf[slot<K>(base, i)] = make_double2(z[i].re, z[i].im);
  }
  template <int K>
  static __device__ __forceinline__ void load(const double2* buf, uint32_t base, TfheComplex* z) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const double2 v = buf[slot<K>(base, i)];
      z[i] = TfheComplex{v.x, v.y};
    }
  }
};

// A thread's slot bases of the rounds' layouts.
template <class P>
struct ClusterSlots {
  uint32_t s[4];
  __device__ explicit ClusterSlots(int t) {
    const uint32_t u = static_cast<uint32_t>(t);
    s[0] = P::swz(P::template value0<0>(u));
    s[1] = P::swz(P::template value0<1>(u));
    s[2] = P::swz(P::template value0<2>(u));
    s[3] = P::swz(P::template value0<3>(u));  // unused at 3 rounds
  }
};

// The transfer of a transform to the other block: st.async into its shared memory, each store counted
// by its mbarrier (complete_tx), which the receiver waits on. No cluster barrier, no memory fence per
// step: a barrier's release waited for every outstanding store (half the step in 'membar' stalls).
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t peer_address(uint32_t a, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbarrier_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void store_to_peer(uint32_t peer_slot, TfheComplex v, uint32_t peer_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f64 [%0], {%1, %2}, [%3];" ::"r"(peer_slot),
               "d"(v.re), "d"(v.im), "r"(peer_bar)
               : "memory");
}

// Round K's stages over a thread's 8 values (its 8 >> R items).
template <bool INV, int K, class P>
__device__ __forceinline__ void cluster_round(TfheComplex* z, int t, const double* tw) {
  constexpr int lo = P::round_lo(K), R = P::round_bits(K), E = 1 << R;
#pragma unroll
  for (int g = 0; g < 8 / E; ++g) {
    // item t + THREADS g: value0 of its index, the round's bits clear
    tfhe_fft_stages<INV, R, 1, SharedTwiddles>(z + g * E, P::M,
                                               P::template value0<K>(static_cast<uint32_t>(t + P::THREADS * g)), lo, tw);
  }
}

// Exchange j of a step: round K's values out, round K2's in, through exchange buffer j mod 2 (two
// buffers: a buffer is rewritten two exchanges later, after a barrier every thread passed once its
// last read of it was done, so one barrier per exchange).
template <int K, int K2, class P>
__device__ __forceinline__ void cluster_exchange(double2* sm, int j, const ClusterSlots<P>& sl, TfheComplex* z) {
  double2* buf = sm + P::XCH + static_cast<uint32_t>(j & 1) * P::M;
  P::template store<K>(buf, sl.s[K], z);
  __syncthreads();
  P::template load<K2>(buf, sl.s[K2], z);
}

template <bool INV, class P>
__device__ __forceinline__ void cluster_transform(double2* sm, int t, const ClusterSlots<P>& sl, TfheComplex* z,
                                                  const double* tw) {
  if constexpr (!INV) {
    cluster_round<false, 0, P>(z, t, tw);
    cluster_exchange<0, 1, P>(sm, 0, sl, z);
    cluster_round<false, 1, P>(z, t, tw);
    cluster_exchange<1, 2, P>(sm, 1, sl, z);
    cluster_round<false, 2, P>(z, t, tw);
    if constexpr (P::ROUNDS == 4) {
      cluster_exchange<2, 3, P>(sm, 2, sl, z);
      cluster_round<false, 3, P>(z, t, tw);
    }
  } else {
    constexpr int L = P::ROUNDS - 1, J = P::ROUNDS - 1;  // exchanges J .. 2 J - 1
    cluster_round<true, L, P>(z, t, tw);
    cluster_exchange<L, L - 1, P>(sm, J, sl, z);
    cluster_round<true, L - 1, P>(z, t, tw);
    cluster_exchange<L - 1, L - 2, P>(sm, J + 1, sl, z);
    cluster_round<true, L - 2, P>(z, t, tw);
    if constexpr (P::ROUNDS == 4) {
      cluster_exchange<1, 0, P>(sm, J + 2, sl, z);
      cluster_round<true, 0, P>(z, t, tw);
    }
  }
}

// ---- multi-bit bundles made beside the chain -------------------------------------------------------
//
// At small batches the bundles are made by the same launch as the chain: clusters past the batch's are
// producers. Items (group, ciphertext, slice) in group order; producer block p takes items p, p + P, ...
// (P producer blocks), writes its slice of the bundle (kBundleSlices slices of the slots) and counts it
// in ready[b C + jj] (release); the chain waits for a count of kBundleSlices (acquire) before it reads a
// bundle, a warp polling up to 32 groups at once, so it syncs only where it catches up with them.
// Producers wait on nothing, so any order of scheduling finishes.
constexpr int kBundleSlices = 8;

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add_release(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Items of groups [j0, j0 + C) of every ciphertext into `made` (the layout tfhe_fourier_key_bundles
// writes). rot: 2^G words of shared memory.
__device__ void make_bundles(const FourierRotateArgs& a, int j0, int C, double* made, int* ready, int64_t p,
                             int64_t producers, int32_t* rot) {
  const int tid = threadIdx.x, threads = blockDim.x;
  const int64_t values = tfhe_fourier_ggsw_values(a.g), items = int64_t(C) * a.B * kBundleSlices;
  for (int64_t w = p; w < items; w += producers) {
    const int jj = static_cast<int>(w / (a.B * kBundleSlices));
    const int64_t b = (w / kBundleSlices) % a.B;
    const int slice = static_cast<int>(w % kBundleSlices);
    tfhe_team_fourier_subset_rotations(BlockTeam{tid, threads}, a, b, j0 + jj, rot);
    __syncthreads();
    tfhe_fourier_bundle_slots(a, j0 + jj, rot, int64_t(slice) * threads + tid, int64_t(kBundleSlices) * threads,
                              made + 2 * (b * C + jj) * values);
    __syncthreads();  // the slice is written (and rot read) by every thread before the count
    if (tid == 0) add_release(ready + b * C + jj, 1);
  }
}

// A key value: the classical key through the read-only cache; a bundle, which producers may have written
// during this launch, by a plain load (after wait_bundles' acquire).
template <bool BUNDLE>
__device__ __forceinline__ TfheComplex load_key(const double* p) {
  if constexpr (BUNDLE) {
    const double2 v = __ldca(reinterpret_cast<const double2*>(p));
    return TfheComplex{v.x, v.y};
  } else {
    return tfhe_load_complex(p);
  }
}

// The highest group index g such that groups [from, g] of ciphertext b are made, waiting until at
// least `from` is; every thread of the block calls it (one barrier).
__device__ int wait_bundles(const int* ready, int64_t b, int C, int from, int* shared) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int n = 0;
    while (n == 0) {
      const int g = from + lane;
      const bool made = g >= C || load_acquire(ready + b * C + g) == kBundleSlices;
      const unsigned ok = __ballot_sync(0xffffffffu, made);
      n = ok == 0xffffffffu ? 32 : __ffs(~ok) - 1;  // consecutive made groups from `from`
      if (n == 0) __nanosleep(64);
    }
    if (lane == 0) *shared = from + n - 1;
  }
  __syncthreads();
  return *shared;
}

// The launch bounds leave the compiler every register (one block of M/8 threads per SM is the point).
template <int LOG_M, bool MULTI>
__global__ void __launch_bounds__(ClusterRotation<LOG_M>::THREADS)
    fourier_rotate_cluster_kernel(const __grid_constant__ FourierRotateArgs a, int j0, int j1, int C, double* made,
                                  int* ready) {
  namespace cg = cooperative_groups;
  using P = ClusterRotation<LOG_M>;
  constexpr int M = P::M, N = 2 * M, L = P::ROUNDS - 1;
  static_assert(P::round_lo(L) == 0 && P::round_bits(L) == 3, "the last round holds values 8 t .. 8 t + 7");
  extern __shared__ __align__(16) double2 csmem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int r = static_cast<int>(cluster.block_rank());  // this block's row
  const int64_t b = blockIdx.x >> 1;
  int64_t* acc = reinterpret_cast<int64_t*>(csmem);  // (2, N) torus; this block uses row r
  const double* tw = reinterpret_cast<const double*>(csmem + P::TW);
  int32_t* rots = reinterpret_cast<int32_t*>(csmem + P::MBAR + 1);
  if constexpr (MULTI) {
    if (ready != nullptr && b >= a.B) {  // a producer cluster: the bundles, beside the chain
      make_bundles(a, j0, C, made, ready, blockIdx.x - 2 * a.B, gridDim.x - 2 * a.B, rots);
      return;
    }
  }
  // mbarrier j counts the other block's transform into buffer j (steps j, j + 2, ...)
  const uint32_t bar = shared_address(csmem + P::MBAR), peer_smem = peer_address(shared_address(csmem), r ^ 1);
  const uint32_t peer_bar = peer_address(bar, r ^ 1);
  const int tid = threadIdx.x;
  const int base_log = a.g.base_log;  // level 1: one digit

  SharedTwiddles::copy(csmem + P::TW, a.g.f.twiddles, M, tid, P::THREADS);
  const int64_t k1n = 2 * int64_t(N);
  const int steps = MULTI ? a.n / a.grouping : a.n;
  if (!MULTI) {
    for (int i = tid; i <= a.n; i += P::THREADS) rots[i] = static_cast<int32_t>(tfhe_fourier_rotation(a, b, i));
  }
  if (!MULTI || j0 == 0) {
    tfhe_team_fourier_rotate_init(BlockTeam{tid, P::THREADS}, a, b, acc);  // both rows; syncs
  } else {
    for (int64_t e = tid; e < N; e += P::THREADS) acc[r * N + e] = a.torus[b * k1n + r * N + e];
    __syncthreads();
  }
  if (tid == 0) {
    mbarrier_init(bar, 1);
    mbarrier_init(bar + 8, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster.sync();  // both blocks run, their mbarriers ready, before either writes into the other's memory

  const int64_t per_bit = 4 * int64_t(M);  // complex values of one key bit: (2, 1, 2, M)
  int64_t* row = acc + r * N;
  const ClusterSlots<P> sl(tid);
  const uint32_t x0 = P::template value0<0>(static_cast<uint32_t>(tid));  // round 0: the digits, the torus
  int done = 0;  // steps taken: the parity of the buffer the other block pushes into
  __shared__ int through;  // wait_bundles' answer
  int made_through = MULTI && ready != nullptr ? -1 : j1;  // groups [j0, j0 + made_through] are made
  int64_t own[16];  // this thread's coefficients of row r: own[2 i + h] at x0 + offset<0>(i) + h M
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    own[2 * i] = row[x0 + P::template offset<0>(i)];
    own[2 * i + 1] = row[x0 + P::template offset<0>(i) + M];
  }
  for (int bit = MULTI ? j0 : 0; bit < (MULTI ? j1 : a.n); ++bit) {
    if constexpr (MULTI) {
      if (bit - j0 > made_through) made_through = wait_bundles(ready, b, C, bit - j0, &through);
    }
    const int64_t rot = MULTI ? 0 : rots[bit];
    if (!MULTI && rot == 0) continue;  // the same for both blocks
    const double* key = MULTI ? a.bundles + 2 * per_bit * (b * C + bit - j0) : a.bsk + 2 * per_bit * bit;
    const int t = tid;
    // this block's half of the key bit, (rr, r) for both rr: line t of each, into L1
#pragma unroll
    for (int rr = 0; rr < 2; ++rr)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(key + 2 * ((rr * 2 + r) * int64_t(M) + 8 * t)));
    TfheComplex z[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)  // the digits of row r at round 0's values
      z[i] = row_digits<MULTI, N>(row, own + 2 * i, x0 + P::template offset<0>(i), rot, base_log);
    cluster_transform<false, P>(csmem, t, sl, z, tw);
    // this block's key values, then this row's transform into the other block's buffer done mod 2;
    // the other row's arrives in ours. The buffer is rewritten two steps later, after the other block
    // has had this step's values, which it sends only after its reads of the buffer (they feed them).
    TfheComplex kv[2][8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t k = (i << (LOG_M - 3)) | t;  // tfhe_fft_order of value 8 t + i (round L: bits [0, 3))
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) kv[rr][i] = load_key<MULTI>(key + 2 * ((rr * 2 + r) * int64_t(M) + k));
    }
    const uint32_t pin = P::PEER + static_cast<uint32_t>(done & 1) * M, b_own = bar + 8 * (done & 1);
    if (tid == 0) mbarrier_expect_bytes(b_own, 16 * M);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      store_to_peer(peer_smem + 16 * (pin + P::template slot<L>(sl.s[L], i)), z[i], peer_bar + 8 * (done & 1));
    mbarrier_wait(b_own, (done >> 1) & 1);
    TfheComplex zp[8];
    P::template load<L>(csmem + pin, sl.s[L], zp);
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // output row r at value x: sum over rr of row rr's value times key (rr, r)
      const TfheComplex z0 = r == 0 ? z[i] : zp[i], z1 = r == 0 ? zp[i] : z[i];
      TfheComplex out{0.0, 0.0};
      out = tfhe_cmac(out, z0, kv[0][i]);
      out = tfhe_cmac(out, z1, kv[1][i]);
      z[i] = out;
    }
    cluster_transform<true, P>(csmem, t, sl, z, tw);
#pragma unroll
    for (int i = 0; i < 8; ++i) row_store<MULTI, LOG_M>(row, own + 2 * i, x0 + P::template offset<0>(i), z[i]);  // its own
    // the classical digits read rotated coefficients other threads wrote; the multi-bit ones only
    // this thread's own
    if (!MULTI) __syncthreads();
    ++done;
  }
  cluster.sync();  // neither block leaves while a transfer into or out of it may be in flight
  if (!MULTI || j1 == steps) {
    int64_t* out = a.acc + b * k1n + r * N;
    for (int e = tid; e < N; e += P::THREADS) out[e] = tfhe_torus_to_q(row[e], a.m.q_full);
  } else {
    for (int e = tid; e < N; e += P::THREADS) a.torus[b * k1n + r * N + e] = row[e];
  }
}

// producers: clusters past the batch's that make the bundles (multi-bit, with `made` and `ready`).
template <int LOG_M, bool MULTI>
cudaError_t launch_cluster_as(const FourierRotateArgs& a, int j0, int j1, int C, int dev, const Stream& s,
                              int64_t producers = 0, double* made = nullptr, int* ready = nullptr) {
  using P = ClusterRotation<LOG_M>;
  // One block an SM (at least half an SM's shared memory): two fit since the block needs ~110 KiB, and
  // then the chain's blocks shared SMs with the producers' (batch 1 of tfhe-4bit-mb4-p128: 0.83 ms
  // instead of 0.75, H200, session 29).
  int per_sm = 0;
  FT_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  const int64_t smem = std::max<int64_t>(P::smem_bytes(a.n), per_sm / 2 + 1);
  FT_TRY((allow_dynamic_smem<fourier_rotate_cluster_kernel<LOG_M, MULTI>>(smem, dev)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(2 * (a.B + producers)), 1, 1);
  cfg.blockDim = dim3(P::THREADS, 1, 1);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = s.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, fourier_rotate_cluster_kernel<LOG_M, MULTI>, a, j0, j1, C, made, ready);
}

// The cluster kernel for batches of at most half the SMs (two SMs per ciphertext), the register kernel
// above that. FHETORCH_FOURIER_CLUSTER=0 or 1 forces one or the other (tests, measurements).
bool use_cluster(int64_t B, int sms) {
  const char* e = std::getenv("FHETORCH_FOURIER_CLUSTER");
  if (e != nullptr && (e[0] == '0' || e[0] == '1')) return e[0] == '1';
  return 2 * B <= sms;
}

template <int LOG_M, bool MULTI>
cudaError_t launch_registers_as(const FourierRotateArgs& a, int j0, int j1, int C, bool cluster, int dev,
                                const Stream& s) {
  if (cluster) return launch_cluster_as<LOG_M, MULTI>(a, j0, j1, C, dev, s);
  using P = RegisterRotation<LOG_M>;
  const int64_t smem = P::smem_bytes(a.n);
  FT_TRY((allow_dynamic_smem<fourier_rotate_registers_kernel<LOG_M, MULTI>>(smem, dev)));
  fourier_rotate_registers_kernel<LOG_M, MULTI><<<static_cast<unsigned>(a.B), P::THREADS, smem, s.stream>>>(a, j0, j1,
                                                                                                           C);
  return cudaGetLastError();
}

// Multi-bit: the bundles of a chunk of groups for the whole batch (at most bundle_bytes(), at least one
// group), then the rotation over that chunk; at batch 1 one chunk holds every group. On the cluster
// kernel with at least as many idle SMs as the batch has ciphertexts (bundles_beside), the same launch
// makes them beside the chain (make_bundles); otherwise the whole GPU makes a chunk's bundles in one
// launch before the rotation's serial chain. FHETORCH_FOURIER_BUNDLE_BYTES overrides the 256 MiB (the
// tests force several chunks); FHETORCH_FOURIER_BESIDE=0 or 1 forces either way of making them.
int64_t bundle_bytes() {
  const char* e = std::getenv("FHETORCH_FOURIER_BUNDLE_BYTES");
  const long long v = e ? std::atoll(e) : 0;
  return v > 0 ? v : int64_t(256) << 20;
}

int64_t bundle_producers(int64_t B, int sms) {
  const char* e = std::getenv("FHETORCH_FOURIER_BESIDE");
  const int64_t idle = sms / 2 - B;  // clusters of two SMs left by the batch's
  if (e != nullptr && e[0] == '0') return 0;
  if (e != nullptr && e[0] == '1') return idle >= 1 ? idle : 0;  // never more clusters than fit: they would spin
  return B <= idle ? idle : 0;
}

template <int LOG_M>
cudaError_t launch_registers(const FourierRotateArgs& a_in, bool cluster, int dev, int sms, const Stream& s) {
  if (a_in.grouping <= 1) return launch_registers_as<LOG_M, false>(a_in, 0, a_in.n, 0, cluster, dev, s);
  FourierRotateArgs a = a_in;
  const int steps = a.n / a.grouping;
  const int64_t values = tfhe_fourier_ggsw_values(a.g), k1n = int64_t(2) << (LOG_M + 1);
  const int64_t fit = bundle_bytes() / (16 * values * a.B);
  const int C = static_cast<int>(fit < 1 ? 1 : (fit > steps ? steps : fit));
  // bundles (B C values complex), then the torus accumulators (B k1 N int64) where chunks follow
  const int64_t producers = cluster ? bundle_producers(a.B, sms) : 0;
  const int64_t torus = C < steps ? 2 * a.B * k1n : 0;  // int32 words
  int32_t* buf = s.scratch(4 * a.B * C * values + torus + (producers > 0 ? a.B * C : 0));
  double* bundles = reinterpret_cast<double*>(buf);
  a.bundles = bundles;
  a.torus = C < steps ? reinterpret_cast<int64_t*>(buf + 4 * a.B * C * values) : nullptr;
  int* ready = producers > 0 ? reinterpret_cast<int*>(buf + 4 * a.B * C * values + torus) : nullptr;
  for (int j0 = 0; j0 < steps; j0 += C) {
    const int c = C < steps - j0 ? C : steps - j0;
    if (producers > 0) {
      FT_TRY(cudaMemsetAsync(ready, 0, sizeof(int) * a.B * C, s.stream));
      FT_TRY((launch_cluster_as<LOG_M, true>(a, j0, j0 + c, c, dev, s, producers, bundles, ready)));
    } else {
      FT_TRY(tfhe_fourier_key_bundles(a, j0, c, bundles, s));
      FT_TRY((launch_registers_as<LOG_M, true>(a, j0, j0 + c, c, cluster, dev, s)));
    }
  }
  return cudaSuccess;
}

}  // namespace

bool fourier_rotate_in_registers(const FourierRotateArgs& a, int64_t optin) {
  const int log_n = a.g.f.log_n;
  if (a.g.k1 != 2 || a.g.level != 1 || a.g.base_log < 1 || a.g.base_log > 32 || (log_n != 10 && log_n != 11))
    return false;
  const int64_t smem = log_n == 11 ? RegisterRotation<10>::smem_bytes(a.n) : RegisterRotation<9>::smem_bytes(a.n);
  const int64_t cluster = log_n == 11 ? ClusterRotation<10>::smem_bytes(a.n) : ClusterRotation<9>::smem_bytes(a.n);
  return smem <= optin && cluster <= optin;  // either kernel may run, by batch size
}

cudaError_t tfhe_fourier_rotate_registers(const FourierRotateArgs& a, int dev, int sms, const Stream& s) {
  const bool cluster = use_cluster(a.B, sms);
  return a.g.f.log_n == 11 ? launch_registers<10>(a, cluster, dev, sms, s) : launch_registers<9>(a, cluster, dev, sms, s);
}

}  // namespace fhetorch::cuda
