"""Models that run encrypted with fhetorch: CIFAR-10 ResNet-20 (resnet20.py)."""
