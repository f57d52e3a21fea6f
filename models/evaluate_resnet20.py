"""Accuracy of ResNet-20 on CIFAR-10 images: plaintext and simulation (encrypted: next step).

    python -m models.evaluate_resnet20 [--checkpoint PATH] [--images PATH] [--count N]

Defaults read ../shared/data (the akamaster checkpoint and the first 512 test images).
Calibrates on the first `--calibration` images and evaluates on the rest: top-1 accuracy of
the plaintext model and of the simulation (the compiled model's polynomial ReLUs and planned
ranges, float64), their top-1 agreement, the largest logit difference, and the plan.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

import fhetorch as fhe
from models.resnet20 import load_checkpoint, load_images

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=os.path.join(SHARED, "resnet20_cifar10_akamaster.th"))
    ap.add_argument("--images", default=os.path.join(SHARED, "cifar10_test_first512.npz"))
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--calibration", type=int, default=128)
    ap.add_argument("--preset", default="n16-bts40")
    ap.add_argument("--show-plan", action="store_true")
    args = ap.parse_args(argv)
    for path in (args.checkpoint, args.images):
        if not os.path.exists(path):
            raise SystemExit(f"evaluate_resnet20: {path} not found; pass --checkpoint / --images (an akamaster-format "
                             "checkpoint and an .npz with uint8 'images' (n, 3, 32, 32) and 'labels')")
    model = load_checkpoint(args.checkpoint)
    x, y = load_images(args.images, args.count)
    t0 = time.perf_counter()
    cm = fhe.nn.compile(model, x[: args.calibration], preset=args.preset)
    print(f"compiled in {time.perf_counter() - t0:.1f} s: {cm.plan.bootstraps} bootstraps planned")
    if args.show_plan:
        print(cm.plan)
    test, labels = x[args.calibration:], y[args.calibration:]
    plain = cm.plaintext(test).to(torch.float64)
    sim = cm.simulate(test)
    p, s = plain.argmax(1), sim.argmax(1)
    n = len(labels)
    print(f"images {n} (after {args.calibration} for calibration)")
    print(f"plaintext accuracy  {float((p == labels).float().mean()):.2%}")
    print(f"simulation accuracy {float((s == labels).float().mean()):.2%}")
    print(f"top-1 agreement     {float((p == s).float().mean()):.2%}")
    print(f"max logit error     {float((plain - sim).abs().max()):.3g}")
    print(cm.last_ranges)


if __name__ == "__main__":
    main()
