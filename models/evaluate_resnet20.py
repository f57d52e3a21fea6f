"""Accuracy of ResNet-20 on CIFAR-10 images: plaintext, simulation and encrypted inference.

    python -m models.evaluate_resnet20 [--checkpoint PATH] [--images PATH] [--count N]
                                       [--encrypted K [--encrypted-from I]] [--preset P] [--device cuda]
                                       [--relu lut --lut-bits B --lut-tfhe T --lut-form product|direct]

Defaults read $FHETORCH_DATA or ../shared/data (the akamaster checkpoint and the first 512
test images). Calibrates on the first `--calibration` images and evaluates on the rest: top-1
accuracy of the plaintext model and of the simulation (the compiled model's polynomial ReLUs
and planned ranges, float64), their top-1 agreement, the largest logit difference, and the
plan. With --encrypted K: the first K evaluation images (from image I with --encrypted-from) also run encrypted (keys made here,
the forward pass replayed from one CUDA graph on a GPU): encrypted accuracy, agreement of the
encrypted top-1 with plaintext, logit errors, seconds per image.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from tqdm import tqdm

import fhetorch as fhe
from fhetorch.nn.lut import LUTReLU
from models.resnet20 import cifar_data, load_checkpoint, load_images


def main(argv=None):
    data = cifar_data() or (None, None)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=data[0])
    ap.add_argument("--images", default=data[1])
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--calibration", type=int, default=128)
    ap.add_argument("--preset", default="n16-bts40")
    ap.add_argument("--encrypted", type=int, default=0, metavar="K", help="also run the first K images encrypted")
    ap.add_argument("--encrypted-from", type=int, default=0, metavar="I",
                    help="with --encrypted K: images I .. I + K - 1 of the evaluation images (runs split over calls)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--show-plan", action="store_true")
    ap.add_argument("--relu", default="composite",
                    help="composite (the polynomial, default), an int degree, or lut (TFHE lookup tables through "
                         "CKKS <-> TFHE switching)")
    ap.add_argument("--lut-bits", type=int, default=None, help="with --relu lut: the grid's bits (default: the most "
                    "the TFHE set holds)")
    ap.add_argument("--lut-tfhe", default=None, help="with --relu lut: the TFHE preset (default: the CKKS preset's)")
    ap.add_argument("--lut-form", default="product", choices=("product", "direct"),
                    help="with --relu lut: x [x > 0] with the step by LUT (product, default) or relu by LUT (direct)")
    args = ap.parse_args(argv)
    if not args.checkpoint or not args.images:
        raise SystemExit("evaluate_resnet20: no data; pass --checkpoint / --images (an akamaster-format checkpoint and "
                         "an .npz with uint8 'images' (n, 3, 32, 32) and 'labels') or set FHETORCH_DATA")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = load_checkpoint(args.checkpoint)
    x, y = load_images(args.images, args.count)
    t0 = time.perf_counter()
    relu = int(args.relu) if args.relu.isdigit() else args.relu
    if relu == "lut":
        relu = LUTReLU(args.lut_bits, args.lut_tfhe)
    cm = fhe.nn.compile(model, x[: args.calibration], preset=args.preset, device=device, relu=relu,
                        lut_form=args.lut_form)
    print(f"compiled in {time.perf_counter() - t0:.1f} s: {cm.plan.bootstraps} bootstraps planned ({args.preset})")
    if args.show_plan:
        print(cm.plan)
    test, labels = x[args.calibration:], y[args.calibration:]
    plain = cm.plaintext(test).to(torch.float64)
    sim = cm.simulate(test)
    p, s = plain.argmax(1), sim.argmax(1)
    n = len(labels)
    out = {"preset": args.preset, "relu": str(relu), "lut_form": args.lut_form, "images": n, "plaintext_accuracy": float((p == labels).float().mean()),
           "simulation_accuracy": float((s == labels).float().mean()), "simulation_agreement": float((p == s).float().mean()),
           "simulation_max_logit_error": float((plain - sim).abs().max())}
    print(f"images {n} (after {args.calibration} for calibration)")
    print(f"plaintext accuracy  {out['plaintext_accuracy']:.2%}")
    print(f"simulation accuracy {out['simulation_accuracy']:.2%}")
    print(f"top-1 agreement     {out['simulation_agreement']:.2%}")
    print(f"max logit error     {out['simulation_max_logit_error']:.3g}")
    print(cm.last_ranges)
    if args.encrypted:
        part = slice(args.encrypted_from, args.encrypted_from + args.encrypted)
        out.update(_encrypted(cm, test[part], labels[part], plain[part], device))
        out["encrypted_from"] = args.encrypted_from
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def _encrypted(cm, x, labels, plain, device) -> dict:
    k = len(labels)
    t0 = time.perf_counter()
    ctx = cm.keygen()
    print(f"keys: {time.perf_counter() - t0:.1f} s, {ctx.key_bytes() / 2**30:.2f} GiB; {k} images encrypted")
    got, secs = [], []
    for i in tqdm(range(k), desc="encrypted inference", unit="image"):
        ex = cm.encrypt(x[i : i + 1])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        ey = cm(ex)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        secs.append(time.perf_counter() - t)
        got.append(cm.decrypt(ey))
    got = torch.cat(got)
    e, p = got.argmax(1), plain.argmax(1)
    err = (got - plain).abs().amax(1)
    timed = sorted(secs[1:] or secs)  # the first call captures the CUDA graph
    out = {"encrypted_images": k, "encrypted_accuracy": float((e == labels).float().mean()),
           "plaintext_accuracy_same_images": float((p == labels).float().mean()),
           "encrypted_agreement": float((e == p).float().mean()), "disagreements": int((e != p).sum()),
           "encrypted_max_logit_error": float(err.max()), "encrypted_median_logit_error": float(err.median()),
           "seconds_per_image_median": timed[len(timed) // 2],
           # per image, so that runs over several calls combine
           "encrypted_top1": e.tolist(), "plaintext_top1": p.tolist(), "labels": labels.tolist()}
    print(f"encrypted accuracy  {out['encrypted_accuracy']:.2%} (plaintext on the same {k}: "
          f"{out['plaintext_accuracy_same_images']:.2%})")
    print(f"encrypted top-1 = plaintext on {out['encrypted_agreement']:.2%} ({out['disagreements']} differ)")
    print(f"logit error: max {out['encrypted_max_logit_error']:.3g}, median {out['encrypted_median_logit_error']:.3g}")
    print(f"seconds per image: median {out['seconds_per_image_median']:.3f} (first call, with the graph capture: "
          f"{secs[0]:.2f})")
    return out


if __name__ == "__main__":
    main()
