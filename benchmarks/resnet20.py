"""resnet20 suite: encrypted ResNet-20 inference (fhetorch.nn) per image.

--model cifar (the default on CUDA when the data is found: $FHETORCH_DATA or ../shared/data):
the akamaster CIFAR-10 checkpoint, calibrated on the first 128 shared images and run on the
next ones, n16-bts35 (17 levels per bootstrap: 17 bootstraps instead of n16-bts40's 27; its
~15.5-bit bootstrapping keeps top-1 equal to plaintext) with the composite ReLU. --model digits: ResNet-20 on scikit-learn's 8x8
digits (models/digits.py), n16-bts40 on CUDA, toy-n13-bts with the degree-31 ReLU of
digits.cpu_relu() on CPU (--quick: 1 image). Per image: wall-clock latency (synchronised), bootstraps, top-1 against
plaintext and the label, max logit error; one extra run with per-layer synchronisation gives
the time per layer kind (linear transforms, ReLU polynomials, additions, bootstrapping). Peak
GPU memory with all keys loaded. On CUDA the whole forward pass is one CUDA graph (captured
at the first image), the breakdown run is eager.
"""
from __future__ import annotations

import time
import warnings

import torch

from . import common

ANCHORS = {"cheddar_h100pcie_s": 1.05, "theodosian_s": 0.74, "target_s": 1.0, "target_memory_gb": 40}
CALIBRATION = 128


def _model(args, gpu):
    """(name, model, calibration inputs, test inputs, test labels, preset, relu)."""
    from models import digits
    from models.resnet20 import cifar_data, load_checkpoint, load_images

    data = cifar_data()
    name = args.model or ("cifar" if gpu and data else "digits")
    if name == "cifar":
        if data is None or not gpu:
            raise SystemExit("resnet20 --model cifar: needs a CUDA GPU and the data ($FHETORCH_DATA or ../shared/data)")
        x, y = load_images(data[1])
        return ("ResNet-20 on CIFAR-10 (akamaster checkpoint)", load_checkpoint(data[0]), x[:CALIBRATION],
                x[CALIBRATION:], y[CALIBRATION:], args.preset or "n16-bts35", "composite")
    xtr, _, xte, yte = digits.load_digits()
    preset, relu = (args.preset or "n16-bts40", "composite") if gpu else (args.preset or digits.CPU_PRESET, digits.cpu_relu())
    return "ResNet-20 on 8x8 digits (models/digits.py)", digits.trained_model(), xtr[:256], xte, yte, preset, relu


def run(args, device: torch.device) -> dict:
    import fhetorch as fhe

    gpu = device.type == "cuda"
    name, model, calib, xte, yte, preset, relu = _model(args, gpu)
    images = 1 if args.quick or not gpu else (args.repeat or 5)
    doc = {"suite": "resnet20", **common.environment(device), "anchors": ANCHORS, "preset": preset,
           "relu": str(relu), "model": name}
    print(f"suite resnet20 | device {doc['device']} | commit {doc['commit']} | {doc['date']} | {preset} | {name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        t0 = time.perf_counter()
        cm = fhe.nn.compile(model, calib, preset=preset, device=device, relu=relu)
        doc["compile_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ctx = cm.keygen()  # builds the programme (layouts, slot maps, transforms) for this context
        prog = cm.program()
    common.sync(device)
    doc.update(keygen_s=time.perf_counter() - t0, key_bytes=ctx.key_bytes(), bootstraps_planned=cm.plan.bootstraps,
               slots=prog.slots, rotation_keys=len(prog.rotations()))
    print(f"compiled {doc['compile_s']:.1f} s; {doc['slots']} slots; keys {doc['key_bytes'] / 2**30:.2f} GiB "
          f"({doc['rotation_keys']} rotations; keygen {doc['keygen_s']:.1f} s); {cm.plan.bootstraps} bootstraps planned")
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    rows = []
    # on CUDA the first image builds the transforms and captures the CUDA graph: untimed
    for i in range(images + (1 if gpu else 0)):
        x = xte[i : i + 1]
        ex = cm.encrypt(x)
        common.sync(device)
        t = time.perf_counter()
        ey = cm(ex)
        common.sync(device)
        dt = time.perf_counter() - t
        got, want = cm.decrypt(ey), cm.plaintext(x).to(torch.float64)
        row = {"image": i, "s": dt, "bootstraps": prog.bootstraps, "agree": int(got.argmax()) == int(want.argmax()),
               "label_ok": int(got.argmax()) == int(yte[i]), "max_logit_err": float((got - want).abs().max()),
               "warmup": gpu and i == 0}
        rows.append(row)
        print(f"  image {i}: {dt:7.2f} s, {row['bootstraps']} bootstraps, top-1 {'=' if row['agree'] else '!='} "
              f"plaintext, label {'ok' if row['label_ok'] else 'wrong'}, max logit error {row['max_logit_err']:.3g}"
              f"{' (warm-up)' if row['warmup'] else ''}", flush=True)
    timed = [r["s"] for r in rows if not r["warmup"]]
    doc["results"] = rows
    doc["median_s"] = sorted(timed)[len(timed) // 2]
    doc["agreement"] = sum(r["agree"] for r in rows) / len(rows)
    if gpu:
        doc["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
        doc["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    cm(cm.encrypt(xte[:1]), timing=True)
    doc["breakdown_s"] = dict(prog.times)
    b = doc["breakdown_s"]
    print(f"\nper image: median {doc['median_s']:.2f} s; top-1 = plaintext on {doc['agreement']:.0%}; breakdown "
          f"(synchronised run): linear transforms {b['linear']:.2f} s, ReLU polynomials {b['relu']:.2f} s, "
          f"bootstrapping {b['bootstrap']:.2f} s ({prog.bootstraps}), additions {b['add']:.3f} s"
          + (f"; peak GPU memory {doc['peak_mem_bytes'] / 2**30:.1f} GiB allocated, "
             f"{doc['peak_reserved_bytes'] / 2**30:.1f} GiB reserved" if gpu else ""))
    doc["encode_s"] = _encoding_time(cm, device)
    print(f"encoding every diagonal once (inside the linear transforms' time): {doc['encode_s']:.2f} s")
    print("anchors: Cheddar 1.05 s (H100 PCIe, CIFAR), Theodosian 0.74 s; target <= 1.0 s, <= 40 GB")
    return doc


def _encoding_time(cm, device) -> float:
    """Seconds to encode every diagonal of the programme once, at the levels the plan runs them
    (the part of the linear transforms' time that caching encodings would save)."""
    from fhetorch.circuits.linear import MAC_GIANTS

    prog = cm.program()
    plan = {s.name: s for s in cm.plan.steps}
    total = 0.0
    for name, (_, first, _) in prog.chains.items():
        lt = prog.transform(name)[0]
        if lt is None:
            continue
        level = plan[first].level_in
        giants = sorted(lt._by_giant)
        common.sync(device)
        t = time.perf_counter()
        for lo in range(0, len(giants), MAC_GIANTS):
            lt._encode(level, cm.ctx.nominal_scale(level), giants[lo : lo + MAC_GIANTS], extended=True)
        common.sync(device)
        total += time.perf_counter() - t
    return total
