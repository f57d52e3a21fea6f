"""Train the CIFAR-10 ResNet-20 (models/resnet20.py) for users who have CIFAR-10 locally.

    python -m models.train_resnet20 --data DIR [--epochs 182] [--out resnet20.th] [--device cuda]

DIR is the "cifar-10-batches-py" folder of the CIFAR-10 python version (data_batch_1..5 and
test_batch, pickled dicts with uint8 `data` (n, 3072) and `labels`); torchvision is not
needed. Recipe of He et al. 2016 (section 4.2) as akamaster/pytorch_resnet_cifar10 follows
it: SGD with momentum 0.9, weight decay 1e-4, batch 128, learning rate 0.1 divided by 10 at
epochs 100 and 150, random crops of the 4-pixel zero-padded image and horizontal flips; the
inputs normalised as models.resnet20.normalize does. The checkpoint (`state_dict`, the
format load_checkpoint reads) is written after every epoch with the test accuracy
(akamaster reports 91.73 % with this recipe; not measured here: no CIFAR-10 download on our
machines). Then:

    python -m models.evaluate_resnet20 --checkpoint resnet20.th --encrypted 16
"""
from __future__ import annotations

import argparse
import os
import pickle

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from models.resnet20 import ResNet20, normalize


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles what a CIFAR-10 batch holds and nothing else: dicts, lists, bytes, numbers
    and numpy arrays. Any other global (what a crafted file would call) is refused before it
    is looked up, so nothing in the file runs."""

    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),  # bytes in protocol 2
               ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            from fhetorch.errors import SerializationError

            raise SerializationError(f"load_cifar: the batch file refers to {module}.{name}, which a CIFAR-10 "
                                     "batch never holds; refused without running it (use the original "
                                     "cifar-10-batches-py files)")
        return super().find_class(module, name)


def read_batch(path: str) -> dict:
    """One python-version CIFAR-10 batch (a pickled dict with bytes keys), unpickled safely."""
    with open(path, "rb") as f:
        return _BatchUnpickler(f, encoding="bytes").load()


def load_cifar(folder: str):
    """((train images uint8 (50000, 3, 32, 32), labels), (test images, labels)) from the python batches."""
    def read(names):
        xs, ys = [], []
        for name in names:
            d = read_batch(os.path.join(folder, name))
            xs.append(np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            ys.append(np.asarray(d[b"labels"], dtype=np.int64))
        return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

    train = sorted(n for n in os.listdir(folder) if n.startswith("data_batch_"))
    if not train or not os.path.exists(os.path.join(folder, "test_batch")):
        raise SystemExit(f"train_resnet20: {folder} has no data_batch_* / test_batch; pass the cifar-10-batches-py folder")
    return read(train), read(["test_batch"])


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Random 32 x 32 crops of the 4-pixel zero-padded images and random horizontal flips."""
    n = x.shape[0]
    padded = F.pad(x, (4, 4, 4, 4))
    dy, dx = torch.randint(0, 9, (2, n), generator=g)
    rows = (dy.view(n, 1) + torch.arange(32)).view(n, 1, 32, 1).expand(n, x.shape[1], 32, 32)
    cols = (dx.view(n, 1) + torch.arange(32)).view(n, 1, 1, 32).expand(n, x.shape[1], 32, 32)
    out = padded[torch.arange(n).view(n, 1, 1, 1), torch.arange(x.shape[1]).view(1, -1, 1, 1), rows, cols]
    flip = torch.rand(n, generator=g) < 0.5
    out[flip] = out[flip].flip(-1)
    return out


def evaluate(model, x, y, device, batch=500) -> float:
    model.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            right += int((model(x[i : i + batch].to(device)).argmax(1).cpu() == y[i : i + batch]).sum())
    return right / len(y)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the cifar-10-batches-py folder")
    ap.add_argument("--epochs", type=int, default=182)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--out", default="resnet20.th")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    (xtr, ytr), (xte, yte) = load_cifar(args.data)
    xtr, xte = normalize(xtr), normalize(xte)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    model = ResNet20().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    milestones = [m for m in (100, 150) if m < args.epochs]
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones, 0.1)
    acc = 0.0
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(ytr), generator=g)
        bar = tqdm(range(0, len(order), args.batch_size), desc=f"epoch {epoch + 1}/{args.epochs}", leave=False)
        for i in bar:
            idx = order[i : i + args.batch_size]
            loss = F.cross_entropy(model(augment(xtr[idx], g).to(device)), ytr[idx].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.set_postfix(loss=f"{float(loss):.3f}")
        sched.step()
        acc = evaluate(model, xte, yte, device)
        torch.save({"state_dict": {k: v.cpu() for k, v in model.state_dict().items()}, "epoch": epoch + 1,
                    "test_accuracy": acc}, args.out)
        print(f"epoch {epoch + 1}: test accuracy {acc:.2%} (saved {args.out})")
    return acc


if __name__ == "__main__":
    main()
