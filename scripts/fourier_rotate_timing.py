"""One Fourier blind rotation (op tfhe_fourier_blind_rotate) at tfhe-4bit-p128 shapes (N 2048, k 1,
base 2^23 x 1) on random inputs, timed with CUDA events after two warm-up calls (median of `reps`);
also a target for Nsight Compute and compute-sanitizer (docs/status.md, Notes). Usage:
python3 scripts/fourier_rotate_timing.py B n [reps] (B ciphertexts, n key bits; the PBS/s figure
scales n to 918). FHETORCH_FOURIER_KERNEL=generic and FHETORCH_FOURIER_BLOCKS=2|3 pick the CUDA
kernel (csrc/cuda/tfhe_fft.cu, fourier_rotate.cu). Needs a CUDA GPU."""
import statistics
import sys

import torch

import fhetorch._ops as ops
from fhetorch._tfhe.fft import fft_twiddles
from fhetorch._tfhe.params import tfhe_primes

B, n = int(sys.argv[1]), int(sys.argv[2])
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
g = torch.Generator().manual_seed(1)
tw = fft_twiddles(11).cuda()
bsk = ops.tfhe_fft(torch.randint(-(1 << 63), (1 << 63) - 1, (n, 2, 1, 2, 2048), generator=g).cuda(), tw)
q = tfhe_primes()
Q = q[0] * q[1]
ct = (torch.randint(0, 1 << 62, (B, n + 1), generator=g) % Q).cuda()
luts = (torch.randint(0, 1 << 62, (1, 2048), generator=g) % Q).cuda()
for _ in range(2):
    out = ops.tfhe_fourier_blind_rotate(ct, luts, None, bsk, tw, q, 23, 1)
torch.cuda.synchronize()
times = []
for _ in range(reps):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    out = ops.tfhe_fourier_blind_rotate(ct, luts, None, bsk, tw, q, 23, 1)
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e))
ms = statistics.median(times)
print(f"B {B} n {n}: {ms:.3f} ms (median of {reps}), {B / ms * 1e3 * n / 918:.0f} PBS/s-equivalent")
