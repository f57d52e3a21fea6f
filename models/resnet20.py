"""CIFAR-10 ResNet-20 (He et al. 2016, section 4.2) with option-A shortcuts.

Three stages of three BasicBlocks (16, 32, 64 channels at 32x32, 16x16, 8x8); the first block
of stages 2 and 3 has stride 2, and its shortcut (option A, no weights) subsamples by 2 and
zero-pads the new channels. Global average pooling and a 64 -> 10 linear layer end it.

`load_checkpoint(path)` reads checkpoints in the format of akamaster/pytorch_resnet_cifar10
(a dict with `state_dict`, keys prefixed `module.`), e.g. ../shared/data's
resnet20_cifar10_akamaster.th. `load_images(path)` reads an .npz with uint8 `images`
(n, 3, 32, 32) and `labels`, normalised as in that training.

Every layer is one torch.fx can trace (no lambdas), so `fhetorch.nn.compile` takes the model.
`cifar_data()` finds the checkpoint and images: $FHETORCH_DATA, else ../shared/data.
"""
from __future__ import annotations

import os
import pickle

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CHECKPOINT, IMAGES = "resnet20_cifar10_akamaster.th", "cifar10_test_first512.npz"
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class ShortcutA(nn.Module):
    """Option-A shortcut: x[:, :, ::2, ::2] with planes // 4 zero channels on each side."""

    def __init__(self, pad: int):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = ShortcutA(planes // 4) if stride != 1 or in_planes != planes else nn.Identity()

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, blocks=(3, 3, 3), widths=(16, 32, 64)):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers, in_planes = [], widths[0]
        for i, (n, w) in enumerate(zip(blocks, widths)):
            stage = []
            for j in range(n):
                stage.append(BasicBlock(in_planes, w, 2 if i > 0 and j == 0 else 1))
                in_planes = w
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3 = layers
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(torch.flatten(self.pool(out), 1))


def cifar_data():
    """(checkpoint path, images path) in $FHETORCH_DATA or ../shared/data, or None if absent."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.environ.get("FHETORCH_DATA") or os.path.join(here, "..", "shared", "data")
    paths = os.path.join(root, CHECKPOINT), os.path.join(root, IMAGES)
    return paths if all(os.path.exists(p) for p in paths) else None


def load_weights(path: str):
    """torch.load(path) restricted to tensors and plain containers (weights_only=True): a
    file whose unpickling would run code or build other objects raises SerializationError,
    and nothing in it runs."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        from fhetorch.errors import SerializationError

        reason = str(e).splitlines()[-1] if str(e).strip() else type(e).__name__
        raise SerializationError(f"load_weights: {path} is not a plain weights file, refused without running it "
                                 f"({reason}); use a checkpoint of tensors, e.g. torch.save(model.state_dict(), "
                                 "path), from a source you trust") from None


def load_checkpoint(path: str) -> ResNet20:
    """A ResNet20 in eval mode with the weights of an akamaster-format checkpoint (loaded
    safely: `load_weights`)."""
    ckpt = load_weights(path)
    state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else ckpt
    state = {k.removeprefix("module."): v for k, v in state.items()}
    model = ResNet20()
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"load_checkpoint: {path} does not fit ResNet20 (missing {missing[:4]}, "
                         f"unexpected {unexpected[:4]})")
    return model.eval()


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 (n, 3, H, W) -> float32 normalised as in training."""
    x = images.to(torch.float32) / 255.0
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (x - mean) / std


def load_images(path: str, count: int | None = None):
    """(normalised images (n, 3, 32, 32) float32, labels (n,) int64) from an .npz."""
    with np.load(path) as f:
        images, labels = torch.from_numpy(f["images"]), torch.from_numpy(f["labels"]).to(torch.int64)
    if count is not None:
        images, labels = images[:count], labels[:count]
    return normalize(images), labels


def simulated_agreement(model, x: torch.Tensor, calibration: int, preset: str = "n16-bts40"):
    """(compiled model, top-1 agreement of its simulation with the plaintext model) for a model
    compiled on x[:calibration] and evaluated on the rest of x."""
    import fhetorch as fhe

    cm = fhe.nn.compile(model, x[:calibration], preset=preset)
    rest = x[calibration:]
    sim, plain = cm.simulate(rest).argmax(1), cm.plaintext(rest).argmax(1)
    return cm, float((sim == plain).float().mean())
