"""models/train_resnet20.py on a tiny fake CIFAR-10 folder (the python-pickle format): one
epoch trains, the checkpoint loads with load_checkpoint, and augmentation yields crops of the
padded image, possibly flipped."""
import os
import pickle

import numpy as np
import torch
import torch.nn.functional as F

from models.resnet20 import load_checkpoint
from models.train_resnet20 import augment, main


def _batch(path, n, rng):
    d = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, n).tolist()}
    with open(path, "wb") as f:
        pickle.dump(d, f)


def test_one_epoch_writes_a_loadable_checkpoint(tmp_path):
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    for i in (1, 2):
        _batch(tmp_path / f"data_batch_{i}", 24, rng)
    _batch(tmp_path / "test_batch", 16, rng)
    out = tmp_path / "r20.th"
    acc = main(["--data", str(tmp_path), "--epochs", "1", "--batch-size", "16", "--out", str(out), "--device", "cpu"])
    assert 0.0 <= acc <= 1.0
    model = load_checkpoint(str(out))
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_augment_is_a_padded_crop_or_its_mirror():
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    x = torch.randn(6, 3, 32, 32)
    out = augment(x, g)
    padded = F.pad(x, (4, 4, 4, 4))
    for i in range(6):
        windows = [padded[i, :, dy : dy + 32, dx : dx + 32] for dy in range(9) for dx in range(9)]
        assert any(torch.equal(out[i], w) or torch.equal(out[i], w.flip(-1)) for w in windows)
