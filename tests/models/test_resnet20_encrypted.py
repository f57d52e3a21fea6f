"""The pretrained CIFAR-10 ResNet-20 encrypted on the GPU (n16-bts35): the encrypted logits
against the plaintext model's on test images not used for calibration. Needs a CUDA GPU and
the data ($FHETORCH_DATA or ../shared/data). Bound: the logit error over 300 images was at
most 0.0235 (the composite ReLU's own error; the simulation's max is 0.023): 0.06 here."""
import pytest
import torch

import fhetorch as fhe
from models.resnet20 import cifar_data, load_checkpoint, load_images


@pytest.mark.cuda
@pytest.mark.slow
def test_resnet20_cifar_encrypted_matches_plaintext():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    data = cifar_data()
    if data is None:
        pytest.skip("needs the CIFAR-10 checkpoint and images ($FHETORCH_DATA or ../shared/data)")
    model = load_checkpoint(data[0])
    x, _ = load_images(data[1], 160)
    cm = fhe.nn.compile(model, x[:128], preset="n16-bts35", device="cuda")
    cm.keygen()
    pick = torch.randint(128, 160, (2,)).tolist()  # two random held-out images
    for i in pick:
        got = cm.decrypt(cm(cm.encrypt(x[i : i + 1])))
        want = cm.plaintext(x[i : i + 1]).to(torch.float64)
        assert cm.program().bootstraps == cm.plan.bootstraps
        assert int(got.argmax()) == int(want.argmax()), f"image {i}"
        assert float((got - want).abs().max()) <= 0.06, f"image {i}"
