"""The errors and the warning of ``tfaccel.kernels`` (no numba import here)."""

from __future__ import annotations

from tfaccel.core.errors import TfaccelError

__all__ = [
    "COMPILER_FIX",
    "SIMULATOR_HINT",
    "KernelBackendError",
    "KernelCompilerError",
    "SimulatorWarning",
    "incompatible_numba",
    "missing_numba",
    "no_gpu",
]

SIMULATOR_HINT = (
    "to check kernels without a GPU, run them on numba-cuda's CUDA simulator: set "
    "NUMBA_ENABLE_CUDASIM=1 in the environment before numba is imported, e.g. "
    "`NUMBA_ENABLE_CUDASIM=1 python script.py`"
)


class KernelBackendError(TfaccelError):
    """The kernels cannot run here: numba-cuda is missing, or there is no usable CUDA GPU."""


class KernelCompilerError(TfaccelError):
    """The kernels cannot be compiled for a GPU here: numba-cuda, NVVM or ptxas is missing,
    the CUDA simulator is on, or the compiler does not know the target."""


COMPILER_FIX = (
    "pip install 'tfaccel[kernels]' (numba-cuda and the CUDA 12 compiler wheels "
    "nvidia-cuda-nvcc-cu12 and nvidia-cuda-nvrtc-cu12, which bring NVVM and ptxas; no GPU "
    "needed)"
)


class SimulatorWarning(UserWarning):
    """Kernels run on numba-cuda's CUDA simulator: results are right, timings mean nothing."""


def missing_numba(exc: ImportError) -> KernelBackendError:
    """The error raised when numba or numba-cuda cannot be imported."""
    return KernelBackendError(
        "tfaccel.kernels needs numba and numba-cuda, which are not installed",
        expected="importable numba and numba-cuda",
        received=f"ImportError: {exc}",
        fix="pip install 'tfaccel[kernels]'; or pass fallback=\"numpy\" to compute with the "
        "NumPy references",
    )


def no_gpu(reason: str) -> KernelBackendError:
    """The error raised when no CUDA GPU can run a kernel and the simulator is off."""
    return KernelBackendError(
        "there is no usable CUDA GPU to run the kernel, and the CUDA simulator is off",
        expected="an NVIDIA GPU with a working driver and CUDA libraries, or the simulator",
        received=reason,
        fix=f"on a GPU machine, run `tfaccel doctor` to see what is missing; {SIMULATOR_HINT}; "
        'or pass fallback="numpy" to compute with the NumPy references',
    )


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def incompatible_numba(exc: BaseException) -> KernelBackendError:
    """The error raised when numba-cuda's own code fails while it compiles a kernel with an
    AttributeError or ImportError: a numba-cuda that does not know this NumPy. (numba-cuda
    0.30.4 with NumPy 2.5 failed so, ``module 'numpy' has no attribute 'row_stack'``, until
    :mod:`tfaccel.kernels._compat` put that alias back.)"""
    import numpy

    numba_cuda = _version("numba-cuda")
    return KernelBackendError(
        f"numba-cuda {numba_cuda} fails inside its compiler with NumPy {numpy.__version__}, "
        "so no kernel can be compiled",
        expected="a numba-cuda release that supports the installed NumPy",
        received=f"{type(exc).__name__}: {' '.join(str(exc).split())} "
        f"(numba-cuda {numba_cuda}, numba {_version('numba')}, numpy {numpy.__version__})",
        fix='pip install "numpy<2.5" in this environment, or a numba-cuda release that '
        f"supports NumPy {numpy.__version__} (pip install -U numba-cuda)",
    )
