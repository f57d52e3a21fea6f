"""One Fourier blind rotation (op tfhe_fourier_blind_rotate) at a preset's shapes (default tfhe-4bit-p128:
N 2048, k 1, base 2^23 x 1) on random inputs, timed with CUDA events after two warm-up calls (median of
`reps`); also a target for Nsight Compute and compute-sanitizer (docs/status.md, Notes). Usage:
python3 scripts/fourier_rotate_timing.py B n [reps] [--preset NAME] [--kernels] (B ciphertexts, n key bits;
the PBS/s figure scales n to the preset's). --kernels adds each kernel's share (torch.profiler) and, for the
large-ring programs (N >= 2^12), the bytes they must move per ciphertext and key bit against the time.
FHETORCH_FOURIER_KERNEL=generic|per-bit and FHETORCH_FOURIER_BLOCKS=2|3 pick the CUDA kernel
(csrc/cuda/tfhe_fft.cu, fourier_rotate.cu); FHETORCH_FOURIER_SPLIT_BLOCKS=1000000000 keeps the large-ring
programs' blocks small (fourier_split::geometry). Needs a CUDA GPU."""
import argparse
import os
import statistics
import sys
from collections import defaultdict

import torch

import fhetorch._ops as ops
from fhetorch._tfhe.fft import fft_twiddles
from fhetorch._tfhe.params import tfhe_primes
from fhetorch._tfhe.presets import preset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.tfhe import large_ring_bytes_per_bit  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("B", type=int)
ap.add_argument("n", type=int)
ap.add_argument("reps", type=int, nargs="?", default=5)
ap.add_argument("--preset", default="tfhe-4bit-p128")
ap.add_argument("--kernels", action="store_true")
args = ap.parse_args()
p = preset(args.preset)
B, n, big_n, k1 = args.B, args.n, p.N, p.k + 1
log_n = big_n.bit_length() - 1
g = torch.Generator().manual_seed(1)
tw = fft_twiddles(log_n).cuda()
bsk = ops.tfhe_fft(torch.randint(-(1 << 63), (1 << 63) - 1, (n, k1, p.pbs_level, k1, big_n), generator=g).cuda(), tw)
q = tfhe_primes()
Q = q[0] * q[1]
ct = (torch.randint(0, 1 << 62, (B, n + 1), generator=g) % Q).cuda()
luts = (torch.randint(0, 1 << 62, (1, big_n), generator=g) % Q).cuda()


def rotate():
    return ops.tfhe_fourier_blind_rotate(ct, luts, None, bsk, tw, q, p.pbs_base_log, p.pbs_level)


for _ in range(2):
    rotate()
torch.cuda.synchronize()
times = []
for _ in range(args.reps):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    rotate()
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e))
ms = statistics.median(times)
print(f"{args.preset} (N {big_n}, k {p.k}, 2^{p.pbs_base_log} x {p.pbs_level}) B {B} n {n}: {ms:.3f} ms (median of "
      f"{args.reps}), {B / ms * 1e3 * n / p.n:.1f} PBS/s-equivalent, {ms * 1e3 / (B * n):.2f} us per ciphertext and key bit")
if args.kernels:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        rotate()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name[:90]] += ev.device_time_total
    total = sum(per.values())
    for name, us in sorted(per.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {us / 1e3:9.3f} ms {100 * us / total:5.1f} %  {name}")
    moved = large_ring_bytes_per_bit(p)  # the large-ring programs' traffic per ciphertext and key bit
    if moved:
        print(f"  bytes per ciphertext and key bit: {moved / 2**20:.2f} MiB; at {ms * 1e3 / (B * n):.2f} us: "
              f"{moved / (ms * 1e-3 / (B * n)) / 1e12:.2f} TB/s")
