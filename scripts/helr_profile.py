"""Kernel time of one HELR gradient (models/helr.py) at the paper's size, by kernel (CUDA).

    python scripts/helr_profile.py
"""
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.helr import _data  # noqa: E402
from scripts.bts_profile import kernels  # noqa: E402


def main():
    import fhetorch as fhe
    from models.helr import EncryptedHELR, HELRConfig

    dev = torch.device("cuda")
    x, y = _data(1024, 196, torch.Generator().manual_seed(1))
    z = x * y[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = fhe.Context("n16-bts40", dev)
    EncryptedHELR.keygen(ctx, *z.shape)
    h = EncryptedHELR(ctx, z, HELRConfig(iterations=4))
    v = h.v
    from fhetorch._ckks import evaluator as ev
    v = ev.drop_level(ctx, v, v.level - 12)  # an iteration right after a bootstrap
    h._gradient(v)
    table, total = kernels(lambda: h._gradient(v), dev)
    print(f"gradient at level 12: kernels {total / 1e3:.2f} ms, {sum(c for c, _ in table.values())} launches")
    for label, (c, t) in sorted(table.items(), key=lambda kv: -kv[1][1])[:14]:
        print(f"   {t / 1e3:8.2f} ms  {c:5d} x {t / max(c, 1):8.1f} us  {label}")


if __name__ == "__main__":
    main()
