"""Encrypted ResNet-20 inference, end to end: `bash scripts/demo.sh` (README's main command).

1. ResNet-20 trained on scikit-learn's 8x8 digits (models/digits.py; a minute on a CPU, then
   cached): the CIFAR architecture with one input channel, whose feature maps fit one
   ciphertext.
2. `fhe.nn.compile`: batch norm folded, ranges calibrated, ReLU replaced by a polynomial,
   levels and bootstraps planned; the simulation's accuracy against the plaintext model.
3. Keys, then a few test images encrypted, run through the network encrypted (bootstrapping
   where the plan says) and decrypted; the encrypted top-1 and logits against plaintext.

On a CUDA GPU: the 128-bit secure preset n16-bts40 and the composite minimax ReLU. Without
one: the INSECURE toy preset toy-n13-bts (N = 2^13) and a degree-31 ReLU interpolant (the
same simulated accuracy as plaintext on digits, 5 levels), so it finishes in minutes on a CPU;
the output says which. With ../shared/data present it also compiles the
CIFAR-10 ResNet-20 checkpoint and reports its simulated accuracy (its encrypted run needs the
multi-ciphertext layouts that come next, docs/status.md).

    python -m models.demo_resnet20 [--images N] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import torch
from tqdm import tqdm

import fhetorch as fhe
from models import digits

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=None, help="encrypted images (default: 4 on a GPU, 1 on a CPU)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = device.type == "cuda"
    preset, relu = ("n16-bts40", "composite") if gpu else ("toy-n13-bts", 31)
    images = args.images or (4 if gpu else 1)
    if gpu:
        print(f"device {torch.cuda.get_device_name(device)}: preset {preset} (128-bit secure), composite ReLU")
    else:
        print(f"no CUDA GPU: REDUCED INSECURE CONFIGURATION (toy-n13-bts, N = 2^13; a test preset, not "
              f"secure) with a degree-{relu} ReLU, so it finishes in minutes on a CPU")

    bar = tqdm(total=12, desc="training ResNet-20 on digits (cached after)", leave=False)
    model = digits.trained_model(progress=lambda e, n, loss: bar.update(1))
    bar.close()
    xtr, ytr, xte, yte = digits.load_digits()
    print(f"ResNet-20 on 8x8 digits: plaintext test accuracy {digits.accuracy(model, xte, yte):.2%} "
          f"({len(yte)} images)")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, xtr[:256], preset=preset, device=device, relu=relu)
    sim = cm.simulate(xte).argmax(1)
    plain = cm.plaintext(xte).argmax(1)
    print(f"compiled: {len(cm.layers)} layers, {cm.plan.bootstraps} bootstraps planned; simulation accuracy "
          f"{float((sim == yte).float().mean()):.2%}, top-1 agreement with plaintext "
          f"{float((sim == plain).float().mean()):.2%}; {cm.last_ranges}")

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = cm.keygen()
    print(f"keys: {time.perf_counter() - t0:.1f} s, {ctx.key_bytes() / 2**30:.2f} GiB")
    agree = 0
    for i in range(images):
        x = xte[i : i + 1]
        t0 = time.perf_counter()
        ey = cm(cm.encrypt(x), progress=True)
        got = cm.decrypt(ey)
        if gpu:
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        want = cm.plaintext(x).to(torch.float64)
        same = int(got.argmax()) == int(want.argmax())
        agree += same
        print(f"image {i}: label {int(yte[i])}, plaintext {int(want.argmax())}, encrypted {int(got.argmax())} "
              f"({'agree' if same else 'DIFFER'}), max logit error {float((got - want).abs().max()):.3g}, "
              f"{dt:.2f} s, {cm.program().bootstraps} bootstraps")
    print(f"encrypted top-1 equal to plaintext on {agree}/{images} images")

    ckpt = os.path.join(SHARED, "resnet20_cifar10_akamaster.th")
    if os.path.exists(ckpt):
        from models.resnet20 import load_checkpoint, load_images, simulated_agreement

        x, _ = load_images(os.path.join(SHARED, "cifar10_test_first512.npz"), 192)
        cc, agree = simulated_agreement(load_checkpoint(ckpt), x, 128)
        print(f"CIFAR-10 ResNet-20 (shared checkpoint): {cc.plan.bootstraps} bootstraps planned at n16-bts40; "
              f"simulated top-1 agreement {agree:.2%} on 64 images; its encrypted run needs multi-ciphertext "
              "layouts (next)")


if __name__ == "__main__":
    main()
