"""Fixtures shared by the TFHE kernel tests."""
import os

import pytest
import torch


@pytest.fixture
def gen():
    """A generator on a fresh random seed (printed, so a failure can be replayed)."""
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return torch.Generator().manual_seed(seed)
