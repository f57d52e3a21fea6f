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
#include <cstdlib>

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
  static __device__ __forceinline__ uint32_t base_b(int t, int g) {  // round B's x0 of item g
    const uint32_t o = static_cast<uint32_t>(t + T * g);
    return (o & 7u) | ((o >> 3) << 6);
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
  static int64_t smem_bytes(int n) { return 8 * 2 * BUF + 16 * M + 4 * (n + 1); }
};

// An int32 as a double, exactly (as static_cast, the CPU's conversion of a digit): the bits of
// 1.5 2^52 + d minus 1.5 2^52, an integer add and a float64 subtraction instead of a conversion
// on the slow 64-bit conversion pipe (16 per clock per SM).
__device__ __forceinline__ double small_int_to_double(int32_t d) {
  constexpr int64_t kMagic = 0x4338000000000000LL;  // 1.5 2^52
  return __dsub_rn(tfhe_double_from_bits(static_cast<uint64_t>(kMagic + d)), 6755399441055744.0);
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
// largest stall, Nsight Compute).
struct SharedTwiddles {
  __device__ static TfheTwiddle at(const double* tw, uint32_t h) {  // (s, t): tfhe_fft_butterfly
    const double2 v = reinterpret_cast<const double2*>(tw)[h];
    return TfheTwiddle{v.x, v.y};
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
__device__ __forceinline__ void rounds_b(TfheComplex* z, int t, const double* tw) {
#pragma unroll
  for (int g = 0; g < 2; ++g) tfhe_fft_stages<INV, 3, 1, SharedTwiddles>(z + 8 * g, P::M, P::base_b(t, g), 3, tw);
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
  double2* tw_sm = rsmem + P::BUF;                              // the twiddles (M slots of (s, t))
  int32_t* rots = reinterpret_cast<int32_t*>(rsmem + P::BUF + M);  // a_i's rotations, then the body's
  const int64_t b = blockIdx.x;
  const int tau_all = threadIdx.x, r = tau_all / P::T, t_all = tau_all % P::T;  // round C: tau; A, B: row r, t
  const double* tw = reinterpret_cast<const double*>(tw_sm);
  const auto row_sync = [](int row) { row_barrier<P>(row); };
  const int base_log = a.g.base_log;  // level 1: one digit

  for (int h = tau_all; h < M; h += P::THREADS) {
    const TfheComplex w = tfhe_load_complex(a.g.f.twiddles + 2 * h);
    tw_sm[h] = make_double2(w.re, w.im);
  }
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
    for (int i = 0; i < 16; ++i) {  // the digits of (X^rot - 1) acc (MULTI: of acc), row r, at round A's values
      double d[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t c = P::value_a(t, i) + h * M;
        int64_t x = row[c];
        if (!MULTI) {
          // coefficient c of X^rot acc: source (c - rot) mod 2N, negated in [N, 2N) (tfhe_rotation_source)
          const uint32_t src = (c - static_cast<uint32_t>(rot)) & (2 * N - 1);
          const int64_t sv = row[src & (N - 1)], rotated = src >= N ? tfhe_torus_sub(0, sv) : sv;
          x = tfhe_torus_sub(rotated, x);
        }
        uint64_t v = tfhe_torus_round(x, base_log);
        d[h] = small_int_to_double(tfhe_next_digit(v, base_log));
      }
      z[i] = TfheComplex{d[0], d[1]};
    }
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
    for (int i = 0; i < 16; ++i) {  // round to the torus and add: this thread's coefficients
      const uint32_t c = P::value_a(t, i);
      const int64_t lo = tfhe_torus_from_double(z[i].re, LOG_M), hi = tfhe_torus_from_double(z[i].im, LOG_M);
      row[c] = MULTI ? lo : tfhe_torus_add(row[c], lo);
      row[c + M] = MULTI ? hi : tfhe_torus_add(row[c + M], hi);
    }
    row_sync(r);  // before the next decomposition reads the accumulator (its own row)
  }
  __syncthreads();  // the finish reads both rows
  if (!MULTI || j1 == steps) {
    tfhe_team_fourier_rotate_finish(BlockTeam{tau_all, P::THREADS}, a, b, acc);
  } else {
    for (int64_t e = tau_all; e < k1n; e += P::THREADS) a.torus[b * k1n + e] = acc[e];
  }
}

template <int LOG_M, bool MULTI>
cudaError_t launch_registers_as(const FourierRotateArgs& a, int j0, int j1, int C, int dev, const Stream& s) {
  using P = RegisterRotation<LOG_M>;
  const int64_t smem = P::smem_bytes(a.n);
  FT_TRY((allow_dynamic_smem<fourier_rotate_registers_kernel<LOG_M, MULTI>>(smem, dev)));
  fourier_rotate_registers_kernel<LOG_M, MULTI><<<static_cast<unsigned>(a.B), P::THREADS, smem, s.stream>>>(a, j0, j1,
                                                                                                           C);
  return cudaGetLastError();
}

// Multi-bit: the bundles of a chunk of groups for the whole batch (at most bundle_bytes(), at least one
// group), then the rotation over that chunk; at batch 1 one chunk holds every group, so the bundles
// of all groups are made by the whole GPU in one launch before the rotation's serial chain.
// FHETORCH_FOURIER_BUNDLE_BYTES overrides the 256 MiB (the tests force several chunks).
int64_t bundle_bytes() {
  const char* e = std::getenv("FHETORCH_FOURIER_BUNDLE_BYTES");
  const long long v = e ? std::atoll(e) : 0;
  return v > 0 ? v : int64_t(256) << 20;
}

template <int LOG_M>
cudaError_t launch_registers(const FourierRotateArgs& a_in, int dev, const Stream& s) {
  if (a_in.grouping <= 1) return launch_registers_as<LOG_M, false>(a_in, 0, a_in.n, 0, dev, s);
  FourierRotateArgs a = a_in;
  const int steps = a.n / a.grouping;
  const int64_t values = tfhe_fourier_ggsw_values(a.g), k1n = int64_t(2) << (LOG_M + 1);
  const int64_t fit = bundle_bytes() / (16 * values * a.B);
  const int C = static_cast<int>(fit < 1 ? 1 : (fit > steps ? steps : fit));
  // bundles (B C values complex), then the torus accumulators (B k1 N int64) where chunks follow
  int32_t* buf = s.scratch(4 * a.B * C * values + (C < steps ? 2 * a.B * k1n : 0));
  double* bundles = reinterpret_cast<double*>(buf);
  a.bundles = bundles;
  a.torus = C < steps ? reinterpret_cast<int64_t*>(buf + 4 * a.B * C * values) : nullptr;
  for (int j0 = 0; j0 < steps; j0 += C) {
    const int c = C < steps - j0 ? C : steps - j0;
    FT_TRY(tfhe_fourier_key_bundles(a, j0, c, bundles, s));
    FT_TRY((launch_registers_as<LOG_M, true>(a, j0, j0 + c, c, dev, s)));
  }
  return cudaSuccess;
}

}  // namespace

bool fourier_rotate_in_registers(const FourierRotateArgs& a, int64_t optin) {
  const int log_n = a.g.f.log_n;
  if (a.g.k1 != 2 || a.g.level != 1 || (log_n != 10 && log_n != 11)) return false;
  const int64_t smem = log_n == 11 ? RegisterRotation<10>::smem_bytes(a.n) : RegisterRotation<9>::smem_bytes(a.n);
  return smem <= optin;
}

cudaError_t tfhe_fourier_rotate_registers(const FourierRotateArgs& a, int dev, const Stream& s) {
  return a.g.f.log_n == 11 ? launch_registers<10>(a, dev, s) : launch_registers<9>(a, dev, s);
}

}  // namespace fhetorch::cuda
