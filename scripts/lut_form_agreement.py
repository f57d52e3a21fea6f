"""Simulated top-1 agreement with the float model, the lookup tables' direct vs product forms
(docs/nn.md, "Lookup tables"), at 4, 6 and 8 grid bits: exact simulate(), and simulate() with a
stand-in for the switch's input noise (Gaussian, sigma = half a grid step / 7.1: the 2^-40
failure bound of a grid at its TFHE set's limit) added to every LUT input before quantising,
where the encrypted run may take either neighbour of a midpoint. CPU, simulation only.

    python scripts/lut_form_agreement.py --model digits      # models/digits_cnn.py, 360 test images
    python scripts/lut_form_agreement.py --model resnet20    # relu="lut"; $FHETORCH_DATA or ../shared/data
"""
import argparse
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # models/ beside fhetorch/

import fhetorch as fhe  # noqa: E402
from fhetorch.nn.lut import LUTReLU, grid_interval  # noqa: E402
from models.digits import load_digits  # noqa: E402
from models.digits_cnn import trained_model  # noqa: E402
from models.resnet20 import cifar_data, load_checkpoint, load_images  # noqa: E402

_quantise = LUTReLU.quantise
NOISE = [False]


def _noisy(y, bits, interval=None):
    if NOISE[0]:
        lo, hi = interval if interval is not None else grid_interval(bits)
        y = y + torch.randn_like(y) * ((hi - lo) / ((1 << bits) - 1) / 2 / 7.1)
    return _quantise(y, bits, interval)


def _data(which):
    if which == "digits":
        xtr, _, xte, yte = load_digits()
        return trained_model(), xtr[:256], xte, yte
    checkpoint, images = cifar_data()
    x, y = load_images(images, 512)
    return load_checkpoint(checkpoint), x[:256], x[256:], y[256:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("digits", "resnet20"), default="digits")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
    LUTReLU.quantise = staticmethod(_noisy)  # this script's stand-in only
    model, calib, test, labels = _data(args.model)
    with torch.no_grad():
        plain = model(test).argmax(1)
    print(f"{args.model}: float accuracy {float((plain == labels).double().mean()):.2%} on {len(labels)} images")
    for form in ("direct", "product"):
        for bits in (4, 6, 8):
            cm = fhe.nn.compile(model, calib, preset="n16-bts40", relu=LUTReLU(bits, "tfhe-8bit"), lut_form=form)
            row = []
            for noise in (False, True):
                NOISE[0] = noise
                torch.manual_seed(0)
                s = cm.simulate(test).argmax(1)
                row.append(f"{'with noise' if noise else 'exact'}: agreement {float((s == plain).double().mean()):.2%}, "
                           f"accuracy {float((s == labels).double().mean()):.2%}")
            print(f"{form:7s} {bits} bits, {cm.plan.bootstraps} bootstraps at n16-bts40; " + "; ".join(row), flush=True)


if __name__ == "__main__":
    main()
