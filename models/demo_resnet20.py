"""Encrypted ResNet-20 inference, end to end: `bash scripts/demo.sh` (README's main command).

On a CUDA GPU with the CIFAR-10 data ($FHETORCH_DATA or ../shared/data: the akamaster
checkpoint and test images): the pretrained CIFAR-10 ResNet-20, calibrated on 128 images,
compiled for the 128-bit secure preset n16-bts35 with the composite minimax ReLU, and a few
test images run encrypted (one CUDA graph per forward pass, about a second per image on an
H100).

Otherwise: ResNet-20 trained on scikit-learn's 8x8 digits (models/digits.py; a minute on a
CPU, then cached), the CIFAR architecture with one input channel. On a GPU: n16-bts40 and the
composite ReLU. Without one: the INSECURE toy preset toy-n13-bts (N = 2^13) and a degree-31
ReLU interpolant, so it finishes in minutes on a CPU; the output says which.

Each run: `fhe.nn.compile` (batch norm folded, ranges calibrated, ReLU replaced by a
polynomial, levels and bootstraps planned), the simulation's agreement with the plaintext
model, keys, then images encrypted, run through the network encrypted (bootstrapping where
the plan says) and decrypted; the encrypted top-1 and logits against plaintext.

    python -m models.demo_resnet20 [--images N] [--device cpu|cuda] [--digits]
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch
from tqdm import tqdm

import fhetorch as fhe
from models import digits
from models.resnet20 import cifar_data, load_checkpoint, load_images

CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=None, help="encrypted images (default: 4 on a GPU, 1 on a CPU)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--digits", action="store_true", help="the digits network even where CIFAR-10 can run")
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = device.type == "cuda"
    images = args.images or (4 if gpu else 1)
    data = cifar_data()
    if gpu and data and not args.digits:
        model, calib, xte, yte, names, preset, relu = _cifar(data)
    else:
        if data and not gpu:
            print("CIFAR-10 data found, but its encrypted run needs N = 2^16 (a GPU): the digits network instead")
        model, calib, xte, yte, names, preset, relu = _digits(gpu)
    if gpu:
        print(f"device {torch.cuda.get_device_name(device)}: preset {preset} (128-bit secure), composite ReLU")
    else:
        print(f"no CUDA GPU: REDUCED INSECURE CONFIGURATION (toy-n13-bts, N = 2^13; a test preset, not "
              f"secure) with a degree-{relu} ReLU, so it finishes in minutes on a CPU")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, calib, preset=preset, device=device, relu=relu)
    sim = cm.simulate(xte).argmax(1)
    plain = cm.plaintext(xte).argmax(1)
    print(f"compiled: {len(cm.layers)} layers, {cm.plan.bootstraps} bootstraps planned; on {len(yte)} test images "
          f"simulation accuracy {float((sim == yte).float().mean()):.2%}, top-1 agreement with plaintext "
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
        ey = cm(cm.encrypt(x), progress=not gpu)  # on a GPU: one CUDA graph (captured at the first image)
        got = cm.decrypt(ey)
        if gpu:
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        want = cm.plaintext(x).to(torch.float64)
        same = int(got.argmax()) == int(want.argmax())
        agree += same
        first = " (first image: CUDA-graph capture)" if gpu and i == 0 else ""
        print(f"image {i}: label {names[int(yte[i])]}, plaintext {names[int(want.argmax())]}, encrypted "
              f"{names[int(got.argmax())]} ({'agree' if same else 'DIFFER'}), max logit error "
              f"{float((got - want).abs().max()):.3g}, {dt:.2f} s{first}, {cm.program().bootstraps} bootstraps")
    print(f"encrypted top-1 equal to plaintext on {agree}/{images} images")


def _cifar(data):
    x, y = load_images(data[1])
    print("CIFAR-10 ResNet-20 (pretrained checkpoint), 128 images for calibration")
    return load_checkpoint(data[0]), x[:128], x[128:], y[128:], CLASSES, "n16-bts35", "composite"


def _digits(gpu):
    bar = tqdm(total=12, desc="training ResNet-20 on digits (cached after)", leave=False)
    model = digits.trained_model(progress=lambda e, n, loss: bar.update(1))
    bar.close()
    xtr, ytr, xte, yte = digits.load_digits()
    print(f"ResNet-20 on 8x8 digits: plaintext test accuracy {digits.accuracy(model, xte, yte):.2%} "
          f"({len(yte)} images)")
    preset, relu = ("n16-bts40", "composite") if gpu else ("toy-n13-bts", 31)
    return model, xtr[:256], xte, yte, tuple(str(d) for d in range(10)), preset, relu


if __name__ == "__main__":
    main()
