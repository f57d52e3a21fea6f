"""What test_gloo.py's single process and worker.py's ranks both compute (the same code on both
sides, so that the comparison is of the distribution alone)."""
import torch
import torch.nn as nn

import fhetorch as fhe

INPUTS = 5  # inference inputs: 3 on rank 0, 2 on rank 1
HELR_SAMPLES, HELR_FEATURES, HELR_ITERATIONS = 128, 32, 4  # 2 ciphertexts at toy-n13-bts; one bootstrap
TFHE_SHAPE = (37,)  # odd: the ranks' shares differ by one


def tfhe_params():
    return fhe.tfhe.preset("toy-tfhe-4bit").with_message_bits(2, max_noise_level=4)


def tfhe_luts():
    return [fhe.tfhe.LUT(lambda m: (3 * m + 1) % 4, bits=4), fhe.tfhe.LUT(lambda m: (m + 2) % 4, bits=4),
            fhe.tfhe.LUT(lambda m: min(m, 3), bits=4)]


@fhe.tfhe.circuit
def tfhe_circuit(x, y):
    """Two waves: two LUTs in the first (x's and y's ciphertexts in one launch), one in the second."""
    f, g, h = tfhe_luts()
    a, b = f(x), g(y)
    return h(a + b), a


def vector_model(saved: dict, device="cpu"):
    """Linear -> ReLU -> Linear on (10,) inputs at toy-n10 (degree-7 ReLU, no bootstrapping),
    compiled from saved weights and calibration inputs: the same plan on every rank."""
    model = nn.Sequential(nn.Linear(10, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    model.load_state_dict(saved["state"])
    return fhe.nn.compile(model, saved["calibration"], preset="toy-n10", relu=7, device=device)
