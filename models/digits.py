"""ResNet-20 for scikit-learn's 8x8 digits: the data, and about 20 s of training on 2 CPU cores.

The CIFAR ResNet-20 (models/resnet20.py) with one input channel, trained on the 8x8 digits
that ship with scikit-learn (1797 images, 10 classes; a seeded 80/20 split). On the 8x8 grid
its three stages are 16 x 8 x 8, 32 x 4 x 4 and 64 x 2 x 2, so every feature map fits one
ciphertext: this is the model the encrypted demo runs where CIFAR-10's would need more slots.
`trained_model()` trains once and caches the weights under ~/.cache/fhetorch.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from models.resnet20 import ResNet20, load_weights

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "fhetorch", "resnet20_digits.pt")
EPOCHS = 12
CPU_PRESET = "toy-n13-bts"  # the CPU configuration (insecure: a test preset), with cpu_relu()


def load_digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test): (n, 1, 8, 8) float32 in about [-1, 2.5], labels int64."""
    from sklearn.datasets import load_digits as _load

    d = _load()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = (x - 0.3) / 0.4
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(y))
    return x[perm[:cut]], y[perm[:cut]], x[perm[cut:]], y[perm[cut:]]


def train(epochs: int = EPOCHS, seed: int = 0, progress=None) -> ResNet20:
    """ResNet-20 trained on load_digits()'s training split; seed: the initialisation and batch order."""
    torch.manual_seed(seed)
    xtr, ytr, _, _ = load_digits()
    return fit(ResNet20(num_classes=10, in_channels=1), xtr, ytr, epochs, cosine=True, progress=progress)


def fit(model, xtr, ytr, epochs: int, *, cosine: bool = False, progress=None):
    """Adam (lr 3e-3, weight decay 1e-4) on batches of 64 in a fresh random order each epoch, the
    learning rate on a cosine schedule where asked; progress(epoch, epochs, loss) after each
    epoch. Returns the model in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs) if cosine else None
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(ytr))
        for i in range(0, len(ytr), 64):
            idx = perm[i : i + 64]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if sched is not None:
            sched.step()
        if progress is not None:
            progress(epoch + 1, epochs, float(loss.detach()))
    return model.eval()


def is_cached() -> bool:
    return os.path.exists(CACHE)


def trained_model(progress=None) -> ResNet20:
    """The cached trained model, training it first if needed (about 20 s on 2 CPU cores)."""
    if is_cached():
        model = ResNet20(num_classes=10, in_channels=1)
        model.load_state_dict(load_weights(CACHE))
        return model.eval()
    model = train(progress=progress)
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    torch.save(model.state_dict(), CACHE)
    return model


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def cpu_relu(degree: int = 31, width: float = 0.05):
    """The CPU configuration's ReLU on [-1, 1] (5 levels at degree 31): the least-squares fit
    weighted by exp(-|x| / width) + 0.02. Most pre-activations lie near 0 relative to their
    range's bound, and the Chebyshev interpolant's error is largest there (0.016 at 0, always
    above ReLU): that bias adds up through the 19 ReLUs to a quarter of the logits' range; this
    fit's (0.007 at 0, 0.008 at most) stays near 2 %. docs/benchmarks.md has the comparison."""
    import fhetorch as fhe

    poly = fhe.ckks.polynomial
    series = poly.fit_least_squares(torch.relu, (-1.0, 1.0), degree, points=2048,
                                    weight=lambda x: torch.exp(-x.abs() / width) + 0.02)
    return poly.from_coefficients(series.coeffs)
