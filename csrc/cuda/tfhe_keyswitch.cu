// The TFHE key switch on CUDA: the tiled integer GEMM of csrc/tfhe.h (oracle: csrc/cpu/tfhe.cpp).
// One block of kKsTeam threads per tile (grid x: ciphertext tiles, y: coefficient tiles, z: parts
// of the K loop), the tile's digits and key rows in shared memory, each thread's 2 x mb x 4
// sums in registers. Small batches split the K loop so that about two blocks per SM run; a
// second launch joins the parts. Scratch (the parts' sums) from the caching allocator.
// Also the two element-wise passes of the key switch on int8 tensor cores (digits, combine; the
// product between them is torch._int_mm, run by the caller): one thread per element.
#include "kernels.h"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kFinishBlock = 128;

struct KsTeam {
  int rank, size;
  __device__ void sync() const { __syncthreads(); }
};

template <int MB>
__global__ void __launch_bounds__(kKsTeam) keyswitch_tile_kernel(KeyswitchArgs g) {
  extern __shared__ int32_t buf[];
  tfhe_team_keyswitch_tile<MB, 1>(KsTeam{static_cast<int>(threadIdx.x), kKsTeam}, g, blockIdx.x, blockIdx.y,
                                  static_cast<int>(blockIdx.z), buf);
}

__global__ void __launch_bounds__(kFinishBlock) keyswitch_finish_kernel(KeyswitchArgs g) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < g.B * (g.n_out + 1)) tfhe_keyswitch_finish_one(g, e);
}

__global__ void __launch_bounds__(kFinishBlock) keyswitch_digits_kernel(KeyswitchArgs g, int8_t* digits, int64_t total) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < total) tfhe_ks_digits_one(g, digits, e);
}

// sums: 16-byte aligned (the binding copies a misaligned tensor), so a coefficient's kKsPlanes = 8
// sums are two 16-byte loads.
__global__ void __launch_bounds__(kFinishBlock) keyswitch_combine_kernel(KeyswitchArgs g, const int32_t* sums) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= g.B * (g.n_out + 1)) return;
  const int4 lo = ldg4(sums + e * kKsPlanes), hi = ldg4(sums + e * kKsPlanes + 4);
  const int32_t s[kKsPlanes] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  tfhe_ks_combine_one(g, s, e);
}

// Batches of at most kKsSmallBatch ciphertexts. The GEMM's tiles would compute 16 rows for each
// ciphertext, and their key loads (4-byte words into shared memory, an index division each) kept the
// batch-1 key switch at ~1 TB/s, where it only has to read the key once. Here block `part` takes a range
// of key rows and every output coefficient: a thread per coefficient, so consecutive threads read
// consecutive words of a key row. The range's digits sit in shared memory. The canonical residues of
// each part's sums go to `partial` as the tiles' do, and the same join finishes them; the sums are exact,
// so the result is the same for any split.
constexpr int kKsSmallBatch = 4;
constexpr int kKsSmallTeam = 1024;
constexpr int kKsSmallRows = 8;  // key rows loaded at once
constexpr int64_t kKsSmallSmemWords = 11264;  // 44 KiB of digits a block, under the 48 KiB default

__global__ void __launch_bounds__(kKsSmallTeam) keyswitch_small_kernel(KeyswitchArgs g, int rows_per) {
  extern __shared__ int32_t sd[];  // (rows of the range's masks, B) digits, from row i0 level
  const int64_t K = static_cast<int64_t>(g.n_in) * g.level, w = g.n_out + 1;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per, r1 = r0 + rows_per < K ? r0 + rows_per : K;
  const int B = static_cast<int>(g.B);
  const int64_t i0 = r0 / g.level, i1 = (r1 + g.level - 1) / g.level, base = i0 * g.level;  // masks of the range
  for (int64_t e = threadIdx.x; e < (i1 - i0) * B; e += blockDim.x) {
    const int64_t i = i0 + e / B;
    const int b = static_cast<int>(e % B);
    tfhe_digits(tfhe_round_pow2(g.ct[b * (g.n_in + 1) + i], g.m.q_full, g.base_log * g.level), g.base_log, g.level,
                sd + (i * g.level - base) * B + b, B);
  }
  __syncthreads();
  const int64_t reduce = int64_t(1) << (32 - g.base_log);  // products between reductions (tfhe.h)
  for (int64_t c = threadIdx.x; c < w; c += blockDim.x) {
    int64_t acc[kKsSmallBatch][2] = {};
    const auto mac = [&](int64_t row, int32_t k0, int32_t k1) {
#pragma unroll
      for (int b = 0; b < kKsSmallBatch; ++b) {
        if (b >= B) break;
        const int64_t d = sd[(row - base) * B + b];
        acc[b][0] += d * k0;
        acc[b][1] += d * k1;
      }
    };
    const auto reduce_acc = [&]() {
#pragma unroll
      for (int b = 0; b < kKsSmallBatch; ++b)
#pragma unroll
        for (int l = 0; l < 2; ++l) acc[b][l] %= g.m.q[l];
    };
    int64_t row = r0;
    if (reduce >= kKsSmallRows) {
      // kKsSmallRows rows' key words loaded before their products, so that many loads are in flight (a
      // row at a time, with a branch between rows, kept the batch-1 key switch at ~1 TB/s); a reduction
      // every `reduce` rows (a power of two, >= 2^9 for the binding's base_log <= 23)
      for (; row + kKsSmallRows <= r1; row += kKsSmallRows) {
        int32_t k[kKsSmallRows][2];
#pragma unroll
        for (int u = 0; u < kKsSmallRows; ++u) {
          k[u][0] = ldg(g.keyswitch_key + ((row + u) * 2) * w + c);
          k[u][1] = ldg(g.keyswitch_key + ((row + u) * 2 + 1) * w + c);
        }
#pragma unroll
        for (int u = 0; u < kKsSmallRows; ++u) mac(row + u, k[u][0], k[u][1]);
        if (((row - r0 + kKsSmallRows) & (reduce - 1)) == 0) reduce_acc();
      }
    }
    for (; row < r1; ++row) {  // the rest, or every row where reductions come more often
      mac(row, ldg(g.keyswitch_key + (row * 2) * w + c), ldg(g.keyswitch_key + (row * 2 + 1) * w + c));
      if (((row - r0 + 1) & (reduce - 1)) == 0) reduce_acc();
    }
#pragma unroll
    for (int b = 0; b < kKsSmallBatch; ++b) {
      if (b >= B) break;
      int32_t* p = g.partial + ((static_cast<int64_t>(blockIdx.x) * g.B + b) * w + c) * 2;
#pragma unroll
      for (int l = 0; l < 2; ++l) p[l] = tfhe_residue(acc[b][l] % g.m.q[l], g.m.q[l]);
    }
  }
}

// The small key switch's parts joined: block of kJoinWarps warps per 32 output elements, warp w summing
// the parts w, w + kJoinWarps, ... of its lane's element (both residues in one 8-byte load), then the
// warps' sums added in shared memory. The finish kernel's thread per element ran its loads (2 x 264 parts
// then) one after another (~40 us at batch 1); the sums are exact, so the result is the same.
constexpr int kJoinWarps = 16;

__global__ void __launch_bounds__(32 * kJoinWarps) keyswitch_join_kernel(KeyswitchArgs g) {
  __shared__ int64_t part[kJoinWarps][32][2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t bw = g.B * (g.n_out + 1), e = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  int64_t sum[2] = {0, 0};  // at most 2 sms parts of residues < 2^31
  if (e < bw) {
#pragma unroll 4
    for (int sp = warp; sp < g.splits; sp += kJoinWarps) {
      const int2 v = __ldg(reinterpret_cast<const int2*>(g.partial + (sp * bw + e) * 2));
      sum[0] += v.x;
      sum[1] += v.y;
    }
  }
  part[warp][lane][0] = sum[0];
  part[warp][lane][1] = sum[1];
  __syncthreads();
  if (warp == 0 && e < bw) {
    for (int w = 1; w < kJoinWarps; ++w) {
      sum[0] += part[w][lane][0];
      sum[1] += part[w][lane][1];
    }
    const int32_t r[2] = {static_cast<int32_t>(sum[0] % g.m.q[0]), static_cast<int32_t>(sum[1] % g.m.q[1])};
    const int64_t b = e / (g.n_out + 1);
    tfhe_ks_write(g, b, e - b * (g.n_out + 1), r);
  }
}

template <int MB>
cudaError_t launch_tiles(const KeyswitchArgs& g, const Stream& s) {
  const int64_t rows = tfhe_ks_row_tiles(g, MB), cols = tfhe_ks_col_tiles(g);
  if (rows > 0x7FFFFFFFLL || cols > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(cols), static_cast<unsigned>(g.splits));
  const size_t smem = static_cast<size_t>(tfhe_ks_tile_words(g.level, MB)) * sizeof(int32_t);  // <= 46 KiB
  keyswitch_tile_kernel<MB><<<grid, kKsTeam, smem, s.stream>>>(g);
  return cudaGetLastError();
}

}  // namespace

// The split parts' partial sums joined into the output.
static cudaError_t launch_finish(const KeyswitchArgs& g, const Stream& s) {
  const unsigned grid = grid_for(g.B * (g.n_out + 1), kFinishBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  keyswitch_finish_kernel<<<grid, kFinishBlock, 0, s.stream>>>(g);
  return cudaGetLastError();
}

cudaError_t tfhe_keyswitch(const KeyswitchArgs& g_in, const Stream& s) {
  if (g_in.B <= 0) return cudaSuccess;
  KeyswitchArgs g = g_in;
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const int64_t K = static_cast<int64_t>(g.n_in) * g.level;
  if (g.B <= kKsSmallBatch && g.level <= 64 && K >= 2) {
    // one wave (a block of kKsSmallTeam threads per SM), its loads kKsSmallRows rows deep; more blocks
    // where a block's digits would pass kKsSmallSmemWords (large K: n_in = 2^16 at high levels)
    const int64_t max_rows = kKsSmallSmemWords / g.B - 2 * g.level;
    int64_t parts = K < sms ? K : sms;
    if ((K + parts - 1) / parts > max_rows) parts = (K + max_rows - 1) / max_rows;
    const int64_t rows_per = (K + parts - 1) / parts;
    g.splits = static_cast<int>((K + rows_per - 1) / rows_per);
    g.partial = s.scratch(g.splits * g.B * (g.n_out + 1) * 2);
    const size_t smem = static_cast<size_t>((rows_per + 2 * g.level) * g.B) * sizeof(int32_t);  // whole masks
    keyswitch_small_kernel<<<static_cast<unsigned>(g.splits), kKsSmallTeam, smem, s.stream>>>(g, static_cast<int>(rows_per));
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    keyswitch_join_kernel<<<grid_for(g.B * (g.n_out + 1), 32), 32 * kJoinWarps, 0, s.stream>>>(g);
    return cudaGetLastError();
  }
  const int mb = tfhe_ks_plan(g, 2 * static_cast<int64_t>(sms));
  if (g.splits > 1) g.partial = s.scratch(g.splits * g.B * (g.n_out + 1) * 2);
  err = mb == 4 ? launch_tiles<4>(g, s) : launch_tiles<1>(g, s);
  return err != cudaSuccess || g.splits == 1 ? err : launch_finish(g, s);
}

cudaError_t tfhe_keyswitch_digits(const KeyswitchArgs& g, int8_t* digits, int64_t rows, const Stream& s) {
  const int64_t total = rows * (static_cast<int64_t>(g.n_in) + 1);
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for(total, kFinishBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  keyswitch_digits_kernel<<<grid, kFinishBlock, 0, s.stream>>>(g, digits, total);
  return cudaGetLastError();
}

cudaError_t tfhe_keyswitch_combine(const KeyswitchArgs& g, const int32_t* sums, const Stream& s) {
  const int64_t total = g.B * (static_cast<int64_t>(g.n_out) + 1);
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for(total, kFinishBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  keyswitch_combine_kernel<<<grid, kFinishBlock, 0, s.stream>>>(g, sums);
  return cudaGetLastError();
}

}  // namespace fhetorch::cuda
