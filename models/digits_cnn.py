"""A CNN with MaxPool2d and GELU on scikit-learn's 8x8 digits, run encrypted end to end.

conv 3x3 (8) -> GELU -> max pool 2 -> conv 3x3 (16) -> GELU -> max pool 2 -> linear (10): neither
GELU nor max pooling has a polynomial form, so every one of them runs through CKKS <-> TFHE
switching (fhetorch/nn/lut.py, fhetorch/nn/maxpool.py). Trained here in a few seconds on the
digits' seeded 80/20 split (models/digits.load_digits); the weights are cached under
~/.cache/fhetorch.

    python -m models.digits_cnn                        # plaintext, simulated and 2 encrypted test images
    python -m models.digits_cnn --encrypted 20 --preset n16-bts40 --device cuda [--argmax] [--lut-tfhe tfhe-6bit]
    python -m models.digits_cnn --encrypted 0 --preset n16-bts40 --lut-tfhe tfhe-8bit --lut-bits 6 --lut-form direct
    python -m models.digits_cnn --encrypted all --shard 0/4 --json shard0.json ...   # one GPU's quarter of the split

--shard K/N takes the images K, K + N, K + 2N, ... of the first --encrypted ones (each process with
its own keys: one per GPU, CUDA_VISIBLE_DEVICES=K); --json writes each image's index, label and
classes; `python -m models.digits_cnn --merge shard*.json` adds the shards up.

On a CPU the default preset is toy-n13-bts: insecure (a test preset), for a run of minutes. The
report: test accuracy of the float model and of simulate() (the lookup tables' grid), their
top-1 agreement, then for the encrypted images the top-1 agreement with the float model and with
the simulation, the largest |encrypted - simulated| logit relative to the logits' range, and
seconds per image.
"""
from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import torch
import torch.nn as nn

from models.digits import fit, load_digits

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "fhetorch", "digits_cnn.pt")
EPOCHS = 40


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.act = nn.GELU()
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(self.act(self.conv1(x)))
        x = self.pool(self.act(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def train(epochs: int = EPOCHS, seed: int = 0) -> DigitsCNN:
    torch.manual_seed(seed)
    xtr, ytr, _, _ = load_digits()
    return fit(DigitsCNN(), xtr, ytr, epochs)


def trained_model() -> DigitsCNN:
    """The cached trained model, training it first if needed (a few seconds)."""
    model = DigitsCNN()
    if os.path.exists(CACHE):
        model.load_state_dict(torch.load(CACHE, weights_only=True))
        return model.eval()
    model = train()
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    torch.save(model.state_dict(), CACHE)
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encrypted", default="2", help="test images to run encrypted (a count, or 'all')")
    ap.add_argument("--shard", default="0/1", help="K/N: this process takes images K, K + N, ... of them")
    ap.add_argument("--json", default=None, help="write each encrypted image's result here")
    ap.add_argument("--merge", nargs="+", default=None, help="add up the --json files of a sharded run and stop")
    ap.add_argument("--preset", default=None, help="CKKS preset (default: n16-bts40 on CUDA, toy-n13-bts on CPU)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--lut-tfhe", default=None, help="TFHE set of the switching keys (e.g. tfhe-6bit: a finer grid)")
    ap.add_argument("--lut-bits", type=int, default=None, help="grid bits (default: the most the TFHE set holds)")
    ap.add_argument("--argmax", action="store_true", help="the encrypted output is the class (the argmax head)")
    ap.add_argument("--lut-form", default="product", choices=("product", "direct"),
                    help="GELU as x Phi(x) and max as b + (a - b)[a > b], the factor by LUT (product), or by LUT (direct)")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge)

    import fhetorch as fhe
    from fhetorch.nn.lut import LUTReLU

    preset = args.preset or ("n16-bts40" if args.device == "cuda" else "toy-n13-bts")
    secure = not preset.startswith("toy-")
    print(f"digits CNN (conv, GELU, MaxPool2d x2, linear) encrypted with {preset} on {args.device}"
          + ("" if secure else " — INSECURE test preset, for a quick CPU run"), flush=True)
    _, _, xte, yte = load_digits()
    model = trained_model()
    xtr, _, _, _ = load_digits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, xtr[:256], preset=preset, device=args.device,
                            relu=LUTReLU(bits=args.lut_bits, tfhe=args.lut_tfhe), argmax=args.argmax,
                            lut_form=args.lut_form)
    with torch.no_grad():
        plain = model(xte).argmax(1)
        sim = cm.simulate(xte)
        sim = sim if args.argmax else sim.argmax(1)
    print(f"test accuracy: float {float((plain == yte).float().mean()):.4f}, simulated {cm.lut_bits}-bit grid "
          f"({args.lut_form} form) "
          f"{float((sim == yte).float().mean()):.4f}, top-1 agreement {float((sim == plain).float().mean()):.4f} "
          f"({len(yte)} images); {cm.last_ranges}")
    images = shard_images(args.encrypted, args.shard, len(yte))
    if not images:
        return
    print(f"keys ({cm.lut.lut if cm.lut.tfhe else 'default TFHE set'}) ...", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm.keygen()
    agree_plain = agree_sim = 0
    worst, times, records = 0.0, [], []
    from tqdm import tqdm

    for i in tqdm(images, desc="encrypted images", unit="image"):
        x = xte[i : i + 1]
        t = time.perf_counter()
        ey = cm(cm.encrypt(x))
        if args.device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        got = cm.decrypt(ey)
        s = cm.simulate(x)
        if not args.argmax:  # logits: compare their classes, and how far they are from the simulation
            worst = max(worst, float((got - s).abs().max() / (s.max() - s.min())))
            got, s = got.argmax(1), s.argmax(1)
        agree_plain += int(got == plain[i])
        agree_sim += int(got == s)
        records.append({"index": i, "label": int(yte[i]), "float": int(plain[i]), "simulated": int(s),
                        "encrypted": int(got), "seconds": times[-1]})
        if args.json:  # after every image, replaced whole: a run cut short keeps what it did
            with open(args.json + ".part", "w") as f:
                json.dump({"preset": preset, "lut_tfhe": args.lut_tfhe, "lut_bits": cm.lut_bits, "form": args.lut_form,
                           "argmax": args.argmax, "device": args.device, "images": records}, f)
            os.replace(args.json + ".part", args.json)
    times.sort()
    n = len(images)
    what = "class (argmax head)" if args.argmax else "top-1"
    print(f"encrypted: {what} = float model {agree_plain}/{n}, = simulation {agree_sim}/{n}; "
          + ("" if args.argmax else f"max |encrypted - simulated| logit {worst:.2e} of the logits' range; ") +
          f"median {times[len(times) // 2]:.2f} s per image (fastest {times[0]:.2f} s)")


def shard_images(count: str, shard: str, total: int) -> list:
    """The test images of this process: K, K + N, ... among the first `count` ('all': every one)."""
    n_images = total if count == "all" else min(int(count), total)
    k, n = (int(v) for v in shard.split("/"))
    if not 0 <= k < n:
        raise SystemExit(f"--shard {shard}: K/N with 0 <= K < N")
    return list(range(k, n_images, n))


def merge(paths: list) -> dict:
    """The sharded run's totals: accuracy of the float model, the simulation and the encrypted
    classes over every image, agreements and the median seconds per image; printed and returned."""
    runs = [json.load(open(p)) for p in paths]
    keys = ("preset", "lut_tfhe", "lut_bits", "form", "argmax", "device")
    if len({tuple(run[k] for k in keys) for run in runs}) != 1:
        raise SystemExit("--merge: the shards ran different settings")
    rows = sorted((r for run in runs for r in run["images"]), key=lambda r: r["index"])
    if len({r["index"] for r in rows}) != len(rows):
        raise SystemExit("--merge: an image appears in two shards")
    n = len(rows)
    count = lambda key, other: sum(r[key] == r[other] for r in rows)  # noqa: E731
    secs = sorted(r["seconds"] for r in rows)
    out = {"images": n, "accuracy_float": count("float", "label") / n,
           "accuracy_simulated": count("simulated", "label") / n,
           "accuracy_encrypted": count("encrypted", "label") / n,
           "encrypted_eq_float": count("encrypted", "float"), "encrypted_eq_simulated": count("encrypted", "simulated"),
           "median_seconds": secs[n // 2], "shards": len(runs),
           "setting": {k: runs[0][k] for k in keys}}
    print(f"{n} images in {len(runs)} shards ({out['setting']}): accuracy float {out['accuracy_float']:.4f}, "
          f"simulated {out['accuracy_simulated']:.4f}, encrypted {out['accuracy_encrypted']:.4f}; encrypted class = "
          f"float {out['encrypted_eq_float']}/{n}, = simulation {out['encrypted_eq_simulated']}/{n}; "
          f"median {out['median_seconds']:.2f} s per image")
    return out


if __name__ == "__main__":
    main()
