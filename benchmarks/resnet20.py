"""resnet20 suite: encrypted ResNet-20 inference (fhetorch.nn) per image.

The network that runs encrypted today: ResNet-20 on scikit-learn's 8x8 digits
(models/digits.py; its feature maps fit one ciphertext). n16-bts40 with the composite ReLU on
CUDA, toy-n13-bts with a degree-31 ReLU on CPU (--quick: 1 image). Per image: wall-clock
latency (synchronised), bootstraps, top-1 against plaintext, max logit error; one extra run
with per-layer synchronisation gives the time per layer kind (linear transforms, ReLU
polynomials, additions, bootstrapping). Peak GPU memory with all keys loaded. With
../shared/data, the CIFAR-10 checkpoint's plan and simulated agreement (its encrypted run
needs multi-ciphertext layouts).
"""
from __future__ import annotations

import os
import time
import warnings

import torch

from . import common

ANCHORS = {"cheddar_h100pcie_s": 1.05, "theodosian_s": 0.74, "target_s": 1.0, "target_memory_gb": 40}


def run(args, device: torch.device) -> dict:
    import fhetorch as fhe
    from models import digits

    gpu = device.type == "cuda"
    preset, relu = ("n16-bts40", "composite") if gpu else ("toy-n13-bts", 31)
    images = 1 if args.quick or not gpu else 5
    doc = {"suite": "resnet20", **common.environment(device), "anchors": ANCHORS, "preset": preset,
           "relu": str(relu), "model": "ResNet-20 on 8x8 digits (models/digits.py)"}
    print(f"suite resnet20 | device {doc['device']} | commit {doc['commit']} | {doc['date']} | {preset}")
    model = digits.trained_model()
    xtr, ytr, xte, yte = digits.load_digits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, xtr[:256], preset=preset, device=device, relu=relu)
        t0 = time.perf_counter()
        ctx = cm.keygen()
    common.sync(device)
    doc.update(keygen_s=time.perf_counter() - t0, key_bytes=ctx.key_bytes(), bootstraps_planned=cm.plan.bootstraps,
               slots=cm.program().slots)
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    rows = []
    for i in range(images + (1 if gpu else 0)):  # on CUDA the first image builds the transforms: untimed
        x = xte[i : i + 1]
        ex = cm.encrypt(x)
        common.sync(device)
        t = time.perf_counter()
        ey = cm(ex)
        common.sync(device)
        dt = time.perf_counter() - t
        got, want = cm.decrypt(ey), cm.plaintext(x).to(torch.float64)
        row = {"image": i, "s": dt, "bootstraps": cm.program().bootstraps, "agree": int(got.argmax()) == int(want.argmax()),
               "max_logit_err": float((got - want).abs().max()), "warmup": gpu and i == 0}
        rows.append(row)
        print(f"  image {i}: {dt:7.2f} s, {row['bootstraps']} bootstraps, top-1 {'=' if row['agree'] else '!='} "
              f"plaintext, max logit error {row['max_logit_err']:.3g}{' (warm-up)' if row['warmup'] else ''}")
    timed = [r["s"] for r in rows if not r["warmup"]]
    doc["results"] = rows
    doc["median_s"] = sorted(timed)[len(timed) // 2]
    if gpu:
        doc["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    cm(cm.encrypt(xte[:1]), timing=True)
    doc["breakdown_s"] = dict(cm.program().times)
    b = doc["breakdown_s"]
    print(f"\nper image: median {doc['median_s']:.2f} s; breakdown (synchronised run): linear transforms "
          f"{b['linear']:.2f} s, ReLU polynomials {b['relu']:.2f} s, bootstrapping {b['bootstrap']:.2f} s "
          f"({cm.program().bootstraps}), additions {b['add']:.3f} s; keys {doc['key_bytes'] / 2**30:.2f} GiB "
          f"(keygen {doc['keygen_s']:.1f} s)" + (f"; peak GPU memory {doc['peak_mem_bytes'] / 2**30:.1f} GiB" if gpu else ""))
    shared = os.path.join(common.REPO, "..", "shared", "data")
    ckpt = os.path.join(shared, "resnet20_cifar10_akamaster.th")
    if os.path.exists(ckpt):
        from models.resnet20 import load_checkpoint, load_images, simulated_agreement

        x, _ = load_images(os.path.join(shared, "cifar10_test_first512.npz"), 192)
        cc, agree = simulated_agreement(load_checkpoint(ckpt), x, 128)
        doc["cifar"] = {"bootstraps_planned": cc.plan.bootstraps, "simulated_agreement": agree}
        print(f"CIFAR-10 ResNet-20: {cc.plan.bootstraps} bootstraps planned (n16-bts40), simulated top-1 agreement "
              f"{doc['cifar']['simulated_agreement']:.2%} on 64 images")
    print("anchors: Cheddar 1.05 s (H100 PCIe, CIFAR), Theodosian 0.74 s; target <= 1.0 s, <= 40 GB")
    return doc
