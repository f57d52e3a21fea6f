"""Accuracy of ResNet-20 on CIFAR-10 images: plaintext, simulation and encrypted inference.

    python -m models.evaluate_resnet20 [--checkpoint PATH] [--images PATH] [--count N]
                                       [--encrypted K [--encrypted-from I]] [--preset P] [--device cuda]
                                       [--relu lut --lut-bits B --lut-tfhe T --lut-form product|direct]
                                       [--relu 7,15,27 --relu-eps 0.00390625]   # another composite ReLU
    torchrun --nproc-per-node N -m models.evaluate_resnet20 --encrypted K --distributed
    python -m models.evaluate_resnet20 --merge RUN.json [RUN.json ...]

Defaults read $FHETORCH_DATA or ../shared/data (the akamaster checkpoint and the first 512
test images). Calibrates on the first `--calibration` images and evaluates on the rest: top-1
accuracy of the plaintext model and of the simulation (the compiled model's polynomial ReLUs
and planned ranges, float64), their top-1 agreement, the largest logit difference, and the
plan. With --encrypted K: the first K evaluation images (from image I with --encrypted-from) also run encrypted (keys made here,
the forward pass replayed from one CUDA graph on a GPU): encrypted accuracy, agreement of the
encrypted top-1 with plaintext, logit errors, seconds per image. With --json the file is rewritten
after every encrypted image (a run cut short keeps what it did); --merge adds up the per-image
classes of runs over disjoint image ranges (several calls or GPUs).

With --distributed under torchrun (one process per GPU; fhetorch.distributed): rank 0 makes the
keys and saves the public context once, every other rank loads it (no keys made there); rank 0
encrypts the K images, runs them alone on its GPU first (the one-GPU baseline; --no-baseline
skips it), then shares them out over the ranks and gathers the outputs: images per second on 1
and N GPUs, and the sharded outputs compared with the one-GPU ones bit for bit.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import torch
import torch.distributed as dist
from tqdm import tqdm

import fhetorch as fhe
from fhetorch._distributed import check_same
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
                    help="composite (the polynomial, default), odd degrees of another composite (e.g. 7,15,27), an "
                         "int degree, or lut (TFHE lookup tables through CKKS <-> TFHE switching)")
    ap.add_argument("--relu-eps", type=float, default=None, metavar="E",
                    help="with --relu d1,d2,...: the composite sign's eps, e.g. 0.00390625 for 2^-8 (default Lee "
                         "et al.'s 2^-9)")
    ap.add_argument("--lut-bits", type=int, default=None, help="with --relu lut: the grid's bits (default: the most "
                    "the TFHE set holds)")
    ap.add_argument("--lut-tfhe", default=None, help="with --relu lut: the TFHE preset (default: the CKKS preset's)")
    ap.add_argument("--lut-form", default="product", choices=("product", "direct"),
                    help="with --relu lut: x [x > 0] with the step by LUT (product, default) or relu by LUT (direct)")
    ap.add_argument("--distributed", action="store_true",
                    help="under torchrun: the encrypted images shared out over the ranks (one GPU each), keys made "
                         "once on rank 0 and loaded by the others from one saved public context")
    ap.add_argument("--no-baseline", action="store_true",
                    help="with --distributed: skip the one-GPU run of the same images on rank 0")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="add up the encrypted images of these --json files (disjoint ranges) and stop")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge)
    if not args.checkpoint or not args.images:
        raise SystemExit("evaluate_resnet20: no data; pass --checkpoint / --images (an akamaster-format checkpoint and "
                         "an .npz with uint8 'images' (n, 3, 32, 32) and 'labels') or set FHETORCH_DATA")
    if args.distributed:
        device = fhe.distributed.init_process_group()
        rank = dist.get_rank()
    else:
        device, rank = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu")), 0
    model = load_checkpoint(args.checkpoint)
    x, y = load_images(args.images, args.count)
    t0 = time.perf_counter()
    relu = _relu_option(args)
    cm = fhe.nn.compile(model, x[: args.calibration], preset=args.preset, device=device, relu=relu,
                        lut_form=args.lut_form)
    if rank == 0:
        print(f"compiled in {time.perf_counter() - t0:.1f} s: {cm.plan.bootstraps} bootstraps planned ({args.preset})")
        if args.show_plan:
            print(cm.plan)
    test, labels = x[args.calibration:], y[args.calibration:]
    plain = cm.plaintext(test).to(torch.float64)
    relu_name = f"{relu.name} eps {relu.eps:g}" if hasattr(relu, "eps") else str(relu)
    out = {"preset": args.preset, "relu": relu_name, "lut_form": args.lut_form, "images": len(labels)}
    if cm.uses_lut:
        out["lut_sharpen"] = cm.lut_sharpen  # a LUT ReLU step's sharpening stages (fhetorch/nn/lut.py)
        out["lut_switch_values"] = sum(cm.switch_values.values())  # PBS an image (each switch converts one period)
    if rank == 0:  # the simulation runs once, on rank 0
        out.update(_simulated(cm, plain, test, labels, args))
    if args.encrypted:
        part = slice(args.encrypted_from, args.encrypted_from + args.encrypted)
        out["encrypted_from"] = args.encrypted_from
        if args.distributed:
            out.update(_encrypted_sharded(cm, test[part], labels[part], plain[part], device, args))
        else:
            def partial(scores):  # after every image: the figures so far (replaced whole: a kill leaves no half file)
                if args.json:
                    with open(args.json + ".part", "w") as f:
                        json.dump({**out, **scores}, f, indent=1)
                    os.replace(args.json + ".part", args.json)
            out.update(_encrypted(cm, test[part], labels[part], plain[part], device, partial))
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def _relu_option(args):
    """compile's relu= from --relu (and --lut-*, --relu-eps)."""
    if args.relu == "lut":
        return LUTReLU(args.lut_bits, args.lut_tfhe)
    if args.relu.isdigit():
        return int(args.relu)
    if "," in args.relu:  # another composite: odd degrees, and eps
        degrees = tuple(int(d) for d in args.relu.split(","))
        return fhe.ckks.polynomial.relu(degrees, args.relu_eps) if args.relu_eps else degrees
    return args.relu


def _simulated(cm, plain, test, labels, args) -> dict:
    sim = cm.simulate(test)
    p, s = plain.argmax(1), sim.argmax(1)
    n = len(labels)
    out = {"plaintext_accuracy": float((p == labels).float().mean()),
           "simulation_accuracy": float((s == labels).float().mean()), "simulation_agreement": float((p == s).float().mean()),
           "simulation_max_logit_error": float((plain - sim).abs().max())}
    print(f"images {n} (after {args.calibration} for calibration)")
    print(f"plaintext accuracy  {out['plaintext_accuracy']:.2%}")
    print(f"simulation accuracy {out['simulation_accuracy']:.2%}")
    print(f"top-1 agreement     {out['simulation_agreement']:.2%}")
    print(f"max logit error     {out['simulation_max_logit_error']:.3g}")
    print(cm.last_ranges)
    return out


def _encrypted(cm, x, labels, plain, device, partial=None) -> dict:
    """Keys, then the images one by one; partial(scores of the images so far) after each."""
    k = len(labels)
    t0 = time.perf_counter()
    ctx = cm.keygen()
    print(f"keys: {time.perf_counter() - t0:.1f} s, {ctx.key_bytes() / 2**30:.2f} GiB; {k} images encrypted")
    got, secs = [], []
    for i in tqdm(range(k), desc="encrypted inference", unit="image"):
        ex = cm.encrypt(x[i : i + 1])
        _sync(device)
        t = time.perf_counter()
        ey = cm(ex)
        _sync(device)
        secs.append(time.perf_counter() - t)
        got.append(cm.decrypt(ey))
        if partial is not None and len(got) < k:
            partial(_scores(torch.cat(got), plain[: len(got)], labels[: len(got)], quiet=True))
    timed = sorted(secs[1:] or secs)  # the first call captures the CUDA graph
    out = _scores(torch.cat(got), plain, labels)
    out["seconds_per_image_median"] = timed[len(timed) // 2]
    out["breakdown_s"] = _breakdown(cm, x[:1])
    print(f"logit error: max {out['encrypted_max_logit_error']:.3g}, median {out['encrypted_median_logit_error']:.3g}")
    print(f"seconds per image: median {out['seconds_per_image_median']:.3f} (first call, with the graph capture: "
          f"{secs[0]:.2f})")
    return out


def _breakdown(cm, x) -> dict:
    """Seconds of one more image by layer kind and, with lookup tables, by switch phase (every layer
    synchronised, so their sum exceeds an unsynchronised image's); printed."""
    cm(cm.encrypt(x), timing=True)
    prog = cm.program()
    b = {k: v for k, v in prog.times.items() if v > 0}
    b.update({f"switch {k}": v for k, v in prog.switch_times.items()})
    print("breakdown (one image, synchronised): " + ", ".join(f"{k} {v:.2f} s" for k, v in b.items())
          + f"; {prog.bootstraps} bootstraps")
    return b


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _scores(got, plain, labels, quiet: bool = False) -> dict:
    """Encrypted logits `got` against the plaintext model's: accuracy, top-1 agreement, logit errors,
    and the per-image classes (so that runs over several calls combine); printed unless quiet."""
    e, p = got.argmax(1), plain.argmax(1)
    err = (got - plain).abs().amax(1)
    k = len(labels)
    out = {"encrypted_images": k, "encrypted_accuracy": float((e == labels).float().mean()),
           "plaintext_accuracy_same_images": float((p == labels).float().mean()),
           "encrypted_agreement": float((e == p).float().mean()), "disagreements": int((e != p).sum()),
           "encrypted_max_logit_error": float(err.max()), "encrypted_median_logit_error": float(err.median()),
           "encrypted_top1": e.tolist(), "plaintext_top1": p.tolist(), "labels": labels.tolist()}
    if quiet:
        return out
    print(f"encrypted accuracy  {out['encrypted_accuracy']:.2%} (plaintext on the same {k}: "
          f"{out['plaintext_accuracy_same_images']:.2%})")
    print(f"encrypted top-1 = plaintext on {out['encrypted_agreement']:.2%} ({out['disagreements']} differ)")
    return out


def _encrypted_sharded(cm, x, labels, plain, device, args) -> dict:
    """--distributed: keys once on rank 0, the public context shared, the one-GPU baseline on rank
    0, then the images shared out over the ranks (fhetorch.distributed.run_sharded)."""
    rank, size = dist.get_rank(), dist.get_world_size()
    k = len(labels)
    # every rank compiled the model itself: the plans must agree, or the keys would not fit
    plan = hashlib.sha256((str(cm.plan) + repr(sorted(cm.bounds.items()))).encode()).digest()
    check_same([int.from_bytes(plan[:8], "little", signed=True)], None, "evaluate_resnet20", "the compiled plan")
    client = None
    if rank == 0:
        print(f"{size} ranks, one GPU each; making keys on rank 0 ...", flush=True)
        t0 = time.perf_counter()
        client = cm.keygen()
        print(f"keys: {time.perf_counter() - t0:.1f} s, {client.key_bytes() / 2**30:.2f} GiB; saving the public "
              "context for the other ranks ...", flush=True)
    t0 = time.perf_counter()
    server = fhe.distributed.share_context(client)
    shared_s = time.perf_counter() - t0
    if rank == 0:
        print(f"public context saved and loaded by every rank: {shared_s:.1f} s", flush=True)
    else:
        cm.use_context(server)  # the loaded keys, checked against the plan; none made here
    inputs = [cm.encrypt(x[i : i + 1]) for i in range(k)] if rank == 0 else None
    # warm-up: one image on every rank (the first call captures the forward pass's CUDA graph)
    fhe.distributed.run_sharded(cm, inputs[:1] * size if rank == 0 else None, server)

    single = None
    if rank == 0 and not args.no_baseline:
        _sync(device)
        t0 = time.perf_counter()
        single = [cm(ex) for ex in tqdm(inputs, desc="encrypted inference, 1 GPU", unit="image")]
        _sync(device)
        single_s = time.perf_counter() - t0
    _sync(device)
    dist.barrier()  # the other ranks wait out the baseline here
    t0 = time.perf_counter()
    outs = fhe.distributed.run_sharded(cm, inputs, server, progress=True)
    _sync(device)
    sharded_s = time.perf_counter() - t0
    if rank != 0:
        return {}
    out = _scores(torch.cat([cm.decrypt(ey) for ey in outs]), plain, labels)
    out.update(ranks=size, share_context_s=shared_s, images_per_s=k / sharded_s, seconds=sharded_s)
    print(f"{size} GPUs: {k} images in {sharded_s:.2f} s, {out['images_per_s']:.2f} images/s (scatter, run, gather)")
    if single is not None:
        same = all(torch.equal(a.ciphertext.data, b.ciphertext.data) for a, b in zip(single, outs))
        out.update(images_per_s_1gpu=k / single_s, seconds_1gpu=single_s, speedup=single_s / sharded_s,
                   sharded_equals_1gpu=same)
        print(f"1 GPU:  {k} images in {single_s:.2f} s, {k / single_s:.2f} images/s; speedup {single_s / sharded_s:.2f}x; "
              f"sharded outputs = 1-GPU outputs bit for bit: {same}")
    return out



def merge(paths: list) -> dict:
    """The encrypted images of several --json runs (disjoint ranges of the evaluation images, the same
    preset and ReLU): top-1 agreement with plaintext, accuracies, the largest logit error; printed
    and returned. SystemExit for overlapping ranges, other settings or a run without images."""
    runs = [json.load(open(p)) for p in paths]
    setting = [(r.get("preset"), r.get("relu"), r.get("lut_form"), r.get("lut_sharpen")) for r in runs]
    if len(set(setting)) != 1:
        raise SystemExit(f"--merge: the runs differ in preset, ReLU, LUT form or sharpening: "
                         f"{sorted(set(map(str, setting)))}")
    rows = {}
    for path, r in zip(paths, runs):
        if not r.get("encrypted_top1"):
            raise SystemExit(f"--merge: {path} holds no encrypted images")
        start = r.get("encrypted_from", 0)
        for i, (e, p, y) in enumerate(zip(r["encrypted_top1"], r["plaintext_top1"], r["labels"])):
            if start + i in rows:
                raise SystemExit(f"--merge: evaluation image {start + i} is in two runs")
            rows[start + i] = (e, p, y)
    n = len(rows)
    agree = sum(e == p for e, p, _ in rows.values())
    out = {"preset": setting[0][0], "relu": setting[0][1], "lut_form": setting[0][2], "lut_sharpen": setting[0][3],
           "runs": len(runs),
           "encrypted_images": n, "first": min(rows), "last": max(rows), "encrypted_agreement": agree / n,
           "disagreements": n - agree, "encrypted_accuracy": sum(e == y for e, _, y in rows.values()) / n,
           "plaintext_accuracy_same_images": sum(p == y for _, p, y in rows.values()) / n,
           "encrypted_max_logit_error": max(r.get("encrypted_max_logit_error", 0.0) for r in runs),
           "seconds_per_image_medians": [r.get("seconds_per_image_median") for r in runs]}
    print(f"{n} encrypted images (evaluation images {out['first']}..{out['last']}, {len(runs)} runs, "
          f"{out['preset']}, {out['relu']}): top-1 = plaintext {agree}/{n} ({out['encrypted_agreement']:.2%}); "
          f"accuracy encrypted {out['encrypted_accuracy']:.2%}, plaintext {out['plaintext_accuracy_same_images']:.2%}; "
          f"largest logit error {out['encrypted_max_logit_error']:.3g}")
    return out


if __name__ == "__main__":
    main()
