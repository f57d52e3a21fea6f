"""Encrypted ResNet-20 inference, end to end: `bash scripts/demo.sh` (README's main command).

On a CUDA GPU with the CIFAR-10 data ($FHETORCH_DATA or ../shared/data: the akamaster
checkpoint and test images): the pretrained CIFAR-10 ResNet-20, calibrated on 128 images,
compiled for the 128-bit secure preset n16-bts35 with the composite minimax ReLU, and a few
test images run encrypted (one CUDA graph per forward pass, about a second per image on an
H100).

Otherwise: ResNet-20 trained on scikit-learn's 8x8 digits (models/digits.py; trained at the
first run, then cached), the CIFAR architecture with one input channel. On a GPU: n16-bts40
and the composite ReLU. Without one: the INSECURE toy preset toy-n13-bts (N = 2^13) and a
degree-31 polynomial ReLU (digits.cpu_relu), so it finishes in minutes on a CPU; the first line
says which.

Phases, each announced before it starts: the model; `fhe.nn.compile` (batch norm folded,
ranges calibrated, ReLU replaced by a polynomial, levels and bootstraps planned) and the
simulation on the test set (the approximation's agreement with plaintext); keys; then each
image encrypted, run through the network encrypted (bootstrapping where the plan says) and
decrypted. Logit errors are given relative to the plaintext logits' range (max - min), split
into the approximation (simulation vs plaintext) and the encryption's noise (encrypted vs
simulation).

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
from models.cpus import limit_threads
from models.resnet20 import cifar_data, load_checkpoint, load_images

CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def relative_errors(plain: torch.Tensor, sim: torch.Tensor, enc: torch.Tensor | None = None) -> dict:
    """Max logit errors of each row, relative to that row's plaintext logit range (max - min):
    "approximation" (simulation vs plaintext: the polynomial ReLU), and with the encrypted
    logits "noise" (encrypted vs simulation: CKKS) and "total" (encrypted vs plaintext).
    Values are (rows,) float64 tensors."""
    plain, sim = plain.to(torch.float64), sim.to(torch.float64)
    span = (plain.max(1).values - plain.min(1).values).clamp_min(torch.finfo(torch.float64).tiny)
    out = {"range": span, "approximation": (sim - plain).abs().max(1).values / span}
    if enc is not None:
        enc = enc.to(torch.float64)
        out["noise"] = (enc - sim).abs().max(1).values / span
        out["total"] = (enc - plain).abs().max(1).values / span
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=None, help="encrypted images (default: 4 on a GPU, 1 on a CPU)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--digits", action="store_true", help="the digits network even where CIFAR-10 can run")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = device.type == "cuda"
    data = cifar_data()
    cifar = bool(gpu and data and not args.digits)
    preset, relu = ("n16-bts35" if cifar else "n16-bts40", "composite") if gpu else (digits.CPU_PRESET, digits.cpu_relu())
    if gpu:
        print(f"fhetorch demo on {torch.cuda.get_device_name(device)}: preset {preset} (128-bit secure), "
              f"composite minimax ReLU")
    else:
        print(f"fhetorch demo: no CUDA GPU, so a REDUCED, INSECURE CONFIGURATION: preset {preset} (N = 2^13, a "
              f"test preset that is NOT secure) and a degree-{relu.degree} polynomial ReLU, to finish in minutes on a "
              f"CPU ({limit_threads()} threads); on a GPU it runs the 128-bit secure presets")
        if data:
            print("(CIFAR-10 data found, but its encrypted run needs N = 2^16, a GPU: the digits network instead)")
    images = args.images if args.images is not None else (4 if gpu else 1)

    phases = 3 + images
    model, calib, xte, yte, names = _cifar(data, phases) if cifar else _digits(phases)

    print(f"[2/{phases}] compiling for {preset} (batch norm folded, ranges calibrated, ReLU -> polynomial, "
          f"bootstraps planned), then simulating the {len(yte)} test images ...", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, calib, preset=preset, device=device, relu=relu)
    sim, plain = cm.simulate(xte), cm.plaintext(xte).to(torch.float64)
    rel = relative_errors(plain, sim)["approximation"]
    print(f"    {len(cm.layers)} layers, {cm.plan.bootstraps} bootstraps per image; simulation vs plaintext on "
          f"{len(yte)} images: top-1 agreement {_share(sim.argmax(1) == plain.argmax(1))}, accuracy "
          f"{_share(sim.argmax(1) == yte)} (plaintext {_share(plain.argmax(1) == yte)}); logit error relative to the "
          f"logits' range: median {float(rel.median()):.2%}, max {float(rel.max()):.2%}; {cm.last_ranges}")

    print(f"[3/{phases}] keys: secret, the plan's rotations, bootstrapping ...", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = cm.keygen()
    print(f"    {time.perf_counter() - t0:.1f} s, {ctx.key_bytes() / 2**30:.2f} GiB")

    agree = 0
    for i in range(images):
        first = " (the first captures the CUDA graph)" if gpu and i == 0 else ""
        print(f"[{4 + i}/{phases}] image {i}: encrypt, {len(cm.layers) - 1} layers encrypted with "
              f"{cm.plan.bootstraps} bootstraps, decrypt{first} ...", flush=True)
        x = xte[i : i + 1]
        t0 = time.perf_counter()
        ey = cm(cm.encrypt(x), progress=not gpu)  # on a GPU: one CUDA graph (captured at the first image)
        got = cm.decrypt(ey)
        if gpu:
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        err = relative_errors(plain[i : i + 1], sim[i : i + 1], got)
        same = int(got.argmax()) == int(plain[i].argmax())
        agree += same
        print(f"    label {names[int(yte[i])]}, plaintext {names[int(plain[i].argmax())]}, encrypted "
              f"{names[int(got.argmax())]} ({'agree' if same else 'DIFFER'}); {dt:.1f} s, "
              f"{cm.program().bootstraps} bootstraps")
        print(f"    logit error relative to the logits' range ({float(err['range']):.3g}): encrypted vs plaintext "
              f"{float(err['total']):.2%}, of which the approximation (simulation vs plaintext) "
              f"{float(err['approximation']):.2%} and the encryption noise (encrypted vs simulation) "
              f"{float(err['noise']):.1e}")
    if images:
        print(f"encrypted top-1 equal to plaintext on {agree}/{images} images")
    print(f"done in {time.perf_counter() - t_start:.0f} s")


def _share(mask: torch.Tensor) -> str:
    return f"{float(mask.to(torch.float64).mean()):.2%}"


def _cifar(data, phases):
    print(f"[1/{phases}] model: the pretrained CIFAR-10 ResNet-20, 128 test images for calibration", flush=True)
    x, y = load_images(data[1])
    return load_checkpoint(data[0]), x[:128], x[128:], y[128:], CLASSES


def _digits(phases):
    if digits.is_cached():
        print(f"[1/{phases}] model: ResNet-20 on 8x8 digits (trained at the first run; {digits.CACHE})", flush=True)
        model = digits.trained_model()
    else:
        print(f"[1/{phases}] model: training ResNet-20 on scikit-learn's 8x8 digits (first run only; cached in "
              f"{digits.CACHE}) ...", flush=True)
        bar = tqdm(total=digits.EPOCHS, desc="training", unit="epoch", leave=False)
        model = digits.trained_model(progress=lambda e, n, loss: bar.update(1))
        bar.close()
    xtr, ytr, xte, yte = digits.load_digits()
    print(f"    plaintext test accuracy {digits.accuracy(model, xte, yte):.2%} ({len(yte)} images)")
    return model, xtr[:256], xte, yte, tuple(str(d) for d in range(10))


if __name__ == "__main__":
    main()
