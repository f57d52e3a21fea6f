"""Calibrates scripts/lut_form_agreement.py's stand-in for the CKKS <-> TFHE switch's noise on
ResNet-20 with relu="lut" (product form) against the encrypted runs, and predicts their top-1
agreement with plaintext over the 384 evaluation images. CPU, simulation only.

The model is compiled as models/evaluate_resnet20.py does (the first 128 of 512 CIFAR-10 test
images for calibration, preset n16-bts40, relu=LUTReLU(bits, tfhe, sharpen), lut_form="product"). For each
noise level f, Gaussian noise of sigma = f * (half a grid step of a `--reference-bits` grid) is
added to every LUT input (x / bound) before it is quantised (LUTReLU.quantise monkeypatched), and
the 384 evaluation images are simulated under a few seeds. Per f it prints: the median and max over
images 0..K-1 (K = --compare, the encrypted runs' images) of the per-image max |simulated -
plaintext| logit error, to set against the encrypted runs' median ~0.34 / max 0.5-0.9; the top-1
agreement with plaintext over all 384 (mean, min, max over seeds); and the images that flip (in how
many seeds).

    python scripts/lut_noise_calibration.py                                  # 4 bits, default f list, 3 seeds
    python scripts/lut_noise_calibration.py --noise 0.05,0.1 --seeds 5
    python scripts/lut_noise_calibration.py --noise 0.07 --seeds 10 --sharpen 0   # without the sharpening
    python scripts/lut_noise_calibration.py --bits 6 --tfhe tfhe-8bit --reference-bits 4 --noise 0.1
        # 6-bit grid, sigma in the units of the 4-bit grid's half step (the same absolute noise)

Noise levels are given as decimals or fractions (1/7.1). Data: $FHETORCH_DATA or ../shared/data.
"""
import argparse
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # models/ beside fhetorch/

import fhetorch as fhe  # noqa: E402
from fhetorch.nn.lut import FACTOR_INTERVAL, LUTReLU  # noqa: E402
from models.resnet20 import cifar_data, load_checkpoint, load_images  # noqa: E402

_quantise = LUTReLU.quantise
SIGMA = [0.0]  # the noise's sigma in units of x / bound (set per noise level)


def _noisy(y, bits, interval=None):
    """LUTReLU.quantise with Gaussian noise of sigma SIGMA[0] added to its input first."""
    if SIGMA[0] > 0:
        y = y + torch.randn_like(y) * SIGMA[0]
    return _quantise(y, bits, interval)


def half_step(bits):
    """Half a grid step of the product form's factor grid (FACTOR_INTERVAL, 2^bits points)."""
    lo, hi = FACTOR_INTERVAL
    return (hi - lo) / ((1 << bits) - 1) / 2


def _fraction(s):
    num, _, den = s.partition("/")
    return float(num) / float(den) if den else float(num)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", default="0,1/40,1/20,1/14,1/10,1/7.1",
                    help="comma-separated f: sigma = f * half a grid step (of a --reference-bits grid)")
    ap.add_argument("--seeds", type=int, default=3, help="torch.manual_seed(0 .. N-1) per noise level")
    ap.add_argument("--bits", type=int, default=None, help="LUT grid bits (default: LUTReLU()'s, 4 at n16-bts40)")
    ap.add_argument("--tfhe", default=None, help="TFHE preset (e.g. tfhe-8bit for 5 or 6 bits)")
    ap.add_argument("--sharpen", type=int, default=None,
                    help="sharpening stages before the step (default: LUTReLU()'s, 2 at n16-bts40; 0: none)")
    ap.add_argument("--reference-bits", type=int, default=None,
                    help="f in half steps of this grid (default: --bits itself); 4 = the same absolute sigma as 4 bits")
    ap.add_argument("--compare", type=int, default=174, help="logit errors over evaluation images 0 .. K-1")
    ap.add_argument("--calibration", type=int, default=128)
    ap.add_argument("--count", type=int, default=512)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
    LUTReLU.quantise = staticmethod(_noisy)  # this script's stand-in only

    checkpoint, images = cifar_data()
    model = load_checkpoint(checkpoint)
    x, _ = load_images(images, args.count)
    relu = LUTReLU(args.bits, args.tfhe, args.sharpen)
    t0 = time.perf_counter()
    cm = fhe.nn.compile(model, x[: args.calibration], preset="n16-bts40", relu=relu, lut_form="product")
    bits = relu.grid_bits("n16-bts40")
    ref = args.reference_bits or bits
    print(f"compiled in {time.perf_counter() - t0:.1f} s: {bits}-bit grid ({relu}), {cm.plan.bootstraps} bootstraps; "
          f"f in half steps of a {ref}-bit grid ({half_step(ref):.5f} of the bound)")
    test = x[args.calibration:]
    plain = cm.plaintext(test).to(torch.float64)
    p1 = plain.argmax(1)
    k = args.compare
    print(f"{len(test)} evaluation images; logit errors over 0..{k - 1}")
    top2 = plain.topk(2, 1).values
    margin = top2[:, 0] - top2[:, 1]  # plaintext top-1 minus runner-up logit
    print("f       sigma/B  med err  max err (mean/top)  agreement mean [min, max]  P(>=99.5%)  flips<K  "
          "flipped images (seeds)  s/sim")
    all_flips = {}
    for f in (_fraction(s) for s in args.noise.split(",")):
        SIGMA[0] = f * half_step(ref)
        meds, maxs, agree, flips, secs, early = [], [], [], {}, [], []
        for seed in range(args.seeds if f > 0 else 1):  # no noise: one run is enough
            torch.manual_seed(seed)
            t = time.perf_counter()
            sim = cm.simulate(test)
            secs.append(time.perf_counter() - t)
            err = (sim - plain).abs().amax(1)[:k]  # per-image max logit error
            meds.append(float(err.median()))
            maxs.append(float(err.max()))
            differ = (sim.argmax(1) != p1).nonzero().flatten().tolist()
            agree.append(1 - len(differ) / len(test))
            early.append(sum(i < k for i in differ))  # flips among the compared images
            for i in differ:
                flips[i] = flips.get(i, 0) + 1
        n = len(agree)
        flipped = " ".join(f"{i}({c})" for i, c in sorted(flips.items())) or "-"
        good = sum(a >= 0.995 for a in agree) / n  # share of seeds at 99.5 % or better
        print(f"{f:.4f}  {SIGMA[0]:.5f}  {sum(meds) / n:.3f}    {sum(maxs) / n:.3f}/{max(maxs):.3f}         "
              f"{sum(agree) / n:.2%} [{min(agree):.2%}, {max(agree):.2%}] ({n})  {good:.0%}        "
              f"{sum(early) / n:.2f}     {flipped}  {sum(secs) / n:.1f}", flush=True)
        all_flips.update(flips)
    if all_flips:  # how close the flipped images are to a tie in plaintext
        print("plaintext margins (top-1 minus runner-up): " +
              " ".join(f"{i}:{float(margin[i]):.3f}" for i in sorted(all_flips)))


if __name__ == "__main__":
    main()
