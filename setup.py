"""Builds fhetorch._C against the torch already installed (never a second one).

C++ CPU kernels are always built; the CUDA kernels too when the installed torch has CUDA
and nvcc is found (set FHETORCH_NO_CUDA=1 to skip them). Install with
`pip install --no-build-isolation -e .` so pip does not fetch another torch.
"""
import glob
import os

import torch
from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def want_cuda():
    if os.environ.get("FHETORCH_NO_CUDA") == "1":
        return False
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


# -march=native lets the CPU kernels vectorise (docs/benchmarks.md has the gain).
# The build runs where it is used (editable install); FHETORCH_PORTABLE=1 builds for any x86-64.
# -ffp-contract=off: no multiply-add is fused unless the source says so (std::fma), so the
# float64 FFT of csrc/tfhe_fft.h rounds as its CUDA twin (explicit __d*_rn intrinsics) does.
cxx_flags = ["-O3", "-std=c++17", "-ffp-contract=off"]
cxx_flags += [] if os.environ.get("FHETORCH_PORTABLE") == "1" else ["-march=native"]
# at::parallel_for splits the CPU kernels over torch's threads only when compiled with OpenMP
# (without it the header runs them serially); the link resolves to the libgomp torch has loaded.
openmp = ["-fopenmp"] if torch.backends.openmp.is_available() else []
cxx_flags += openmp
src = (sources("csrc/bind/schema.cpp") + sources("csrc/bind/common.cpp") + sources("csrc/bind/cpu.cpp")
       + sources("csrc/cpu/*.cpp"))
if want_cuda():
    src += sources("csrc/bind/cuda.cpp") + sources("csrc/cuda/*.cu")
    ext = cpp_extension.CUDAExtension(
        "fhetorch._C",
        src,
        extra_compile_args={
            "cxx": cxx_flags + ["-DFHETORCH_CUDA"],
            "nvcc": ["-O3", "-std=c++17", "--use_fast_math", "-lineinfo", "-DFHETORCH_CUDA"],
        },
        extra_link_args=openmp,
    )
else:
    ext = cpp_extension.CppExtension("fhetorch._C", src, extra_compile_args={"cxx": cxx_flags}, extra_link_args=openmp)

setup(
    name="fhetorch",
    version="0.1.0",
    packages=find_packages(include=["fhetorch", "fhetorch.*"]),
    ext_modules=[ext],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
