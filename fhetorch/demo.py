"""The main demo (`python -m fhetorch.demo`): encrypted computation on tensors, checked
against the same computation in plaintext.

On a CUDA GPU it uses the 128-bit secure preset n16-rr40 (N = 2^16, 32 levels); without
one it runs a reduced, INSECURE toy configuration (toy-n12) on the CPU that finishes in
seconds. (Encrypted ResNet-20 replaces this demo once the models issue lands.)
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch
from tqdm import tqdm

import fhetorch as fhe


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default=None, help="default: n16-rr40 on cuda, toy-n12 on cpu")
    args = ap.parse_args(argv)
    preset = args.preset or ("n16-rr40" if args.device.startswith("cuda") else "toy-n12")
    info = fhe.ckks.presets()[preset]
    label = "128-bit secure" if info.security_bits else "INSECURE toy parameters (reduced demo)"
    print(f"fhetorch demo on {args.device}: preset {preset} (N = {info.N}, {info.levels} levels, "
          f"scale 2^{info.scale_bits}, log2 PQ = {info.log_pq}) - {label}")

    steps = tqdm(total=5, desc="demo", unit="step")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context(preset=preset, device=args.device)
    ctx.keygen()
    steps.set_postfix_str(f"keys {ctx.key_bytes() / 2**30:.2f} GiB")
    steps.update()
    t_keys = time.perf_counter() - t0

    n = min(ctx.slots, 4096)
    x = torch.rand(n, dtype=torch.float64) * 2 - 1
    y = torch.rand(n, dtype=torch.float64) * 2 - 1
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    steps.update()

    server = ctx.public()  # what a server holds: no secret key
    ex, ey = ex.to(server.device), ey.to(server.device)
    t1 = time.perf_counter()
    ez = ex * ey + 0.5 * ex - 1.0  # relinearise and rescale happen automatically
    ez = torch.roll(ez, 1) * ex  # torch semantics on the logical tensor
    ez = ez.rotate(3)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t_eval = time.perf_counter() - t1
    steps.update()

    z = ctx.decrypt(ez).cpu()  # decrypted tensors stay on the context's device
    steps.update()
    ref = (torch.roll(x * y + 0.5 * x - 1.0, 1) * x).roll(-3)
    err = (z[: n - 3] - ref[: n - 3]).abs().max().item()
    steps.update()
    steps.close()
    print(f"keygen {t_keys:.2f} s, encrypted evaluation {t_eval * 1e3:.1f} ms, level left {ez.level}, "
          f"max error vs plaintext {err:.2e}")
    if err > 1e-4:
        raise SystemExit(f"demo: error {err:.2e} above 1e-4")


if __name__ == "__main__":
    main()
