"""Load the CUDA libraries the way TensorFlow does, and the NVIDIA driver, and say what failed.

TensorFlow dlopens each versioned library by its soname; its wheels also look in the
``site-packages/nvidia/*/lib`` folders that ``tensorflow[and-cuda]`` installs. This module
tries the same two places and keeps the loader's error text for each library that fails.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from tfaccel.snapshot import DriverInfo, LibraryLoad

__all__ = [
    "WHEEL_DIRS",
    "collect_driver",
    "cuda_runtimes",
    "load_library",
    "parse_kernel_module_version",
    "required_libraries",
]

# component -> the folder under site-packages/nvidia/ that its wheel installs.
WHEEL_DIRS = {
    "cudart": "cuda_runtime",
    "cublas": "cublas",
    "cublasLt": "cublas",
    "cufft": "cufft",
    "cusolver": "cusolver",
    "cusparse": "cusparse",
    "cudnn": "cudnn",
}

# CUDA major -> (component, soname) that TensorFlow's GPU build dlopens at start-up.
_SONAMES = {
    11: [
        ("cudart", "libcudart.so.11.0"),
        ("cublas", "libcublas.so.11"),
        ("cublasLt", "libcublasLt.so.11"),
        ("cufft", "libcufft.so.10"),
        ("cusolver", "libcusolver.so.11"),
        ("cusparse", "libcusparse.so.11"),
    ],
    12: [
        ("cudart", "libcudart.so.12"),
        ("cublas", "libcublas.so.12"),
        ("cublasLt", "libcublasLt.so.12"),
        ("cufft", "libcufft.so.11"),
        ("cusolver", "libcusolver.so.11"),
        ("cusparse", "libcusparse.so.12"),
    ],
}

Loader = Callable[[str], ctypes.CDLL]


def required_libraries(
    cuda_version: str | None, cudnn_version: str | None
) -> list[tuple[str, str]]:
    """(component, soname) pairs a TensorFlow build for these CUDA/cuDNN versions needs."""
    major = _major(cuda_version)
    if major is None:
        return []
    libs = list(_SONAMES.get(major, _SONAMES[12] if major > 12 else []))
    cudnn_major = _major(cudnn_version)
    if cudnn_major is not None:
        libs.append(("cudnn", f"libcudnn.so.{cudnn_major}"))
    return libs


def load_library(
    component: str,
    soname: str,
    wheel_lib_dirs: list[str],
    loader: Loader = ctypes.CDLL,
) -> LibraryLoad:
    """dlopen ``soname`` from the loader's search path, then from the nvidia wheel folders."""
    result = LibraryLoad(soname=soname, component=component)
    try:
        handle = loader(soname)
        result.loaded, result.found_via = True, "system"
    except OSError as exc:
        result.error = str(exc)
        handle = None
        wheel = WHEEL_DIRS.get(component)
        for directory in wheel_lib_dirs:
            candidate = Path(directory) / soname
            if (wheel and Path(directory).parent.name != wheel) or not candidate.exists():
                continue
            try:
                handle = loader(str(candidate))
            except OSError as wheel_exc:
                result.error = f"{candidate}: {wheel_exc}"
                continue
            result.loaded, result.found_via, result.error = True, "wheel", None
            break
    if handle is not None:
        result.path = _mapped_path(soname)
        result.version = _library_version(component, handle)
    return result


# The CUDA runtime's soname of each major (CUDA 11 kept the minor in it).
RUNTIME_SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


def cuda_runtimes(
    loader: Loader = ctypes.CDLL, ld_library_path: str | None = None
) -> list[LibraryLoad]:
    """The CUDA runtime (libcudart) of each major that loads from the loader's own search path
    (``LD_LIBRARY_PATH``, the ldconfig cache), before any TensorFlow is installed.

    ``found_via`` is ``LD_LIBRARY_PATH`` when the file lies in one of its folders (symbolic
    links resolved: ``cuda/lib64`` is often a link to ``targets/x86_64-linux/lib``), else
    ``system``.
    """
    value = os.environ.get("LD_LIBRARY_PATH", "") if ld_library_path is None else ld_library_path
    ld_dirs = {os.path.realpath(d) for d in value.split(":") if d}
    found = []
    for soname in RUNTIME_SONAMES:
        lib = load_library("cudart", soname, [], loader)
        if lib.loaded:  # several majors may be mapped: name this one's file
            lib.path = _mapped_path(soname, exact=True) or lib.path
            if lib.path and os.path.dirname(os.path.realpath(lib.path)) in ld_dirs:
                lib.found_via = "LD_LIBRARY_PATH"
        found.append(lib)
    return found


def collect_driver(loader: Loader = ctypes.CDLL, proc_root: str = "/") -> DriverInfo:
    """The kernel module version, libcuda (the user-space driver) and where nvidia-smi is."""
    info = DriverInfo(nvidia_smi_path=shutil.which("nvidia-smi"))
    info.wsl_lib_dir_present = Path("/usr/lib/wsl/lib").is_dir()
    try:
        text = (Path(proc_root) / "proc/driver/nvidia/version").read_text(errors="replace")
    except OSError:
        text = ""
    if text:
        info.proc_version = text.splitlines()[0].strip()
        info.kernel_module_version = parse_kernel_module_version(text)
    lib = LibraryLoad(soname="libcuda.so.1", component="driver")
    try:
        handle = loader("libcuda.so.1")
    except OSError as exc:
        lib.error = str(exc)
        info.libcuda = lib
        return info
    lib.loaded, lib.found_via = True, "system"
    lib.path = _mapped_path("libcuda.so")
    if lib.path:
        m = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", os.path.realpath(lib.path))
        info.libcuda_file_version = m.group(1) if m else None
    version = _call_version(handle, "cuDriverGetVersion")
    if version:
        info.cuda_driver_api_version = f"{version // 1000}.{(version % 1000) // 10}"
        lib.version = info.cuda_driver_api_version
    info.libcuda = lib
    return info


def parse_kernel_module_version(text: str) -> str | None:
    """The version in /proc/driver/nvidia/version ('... Kernel Module  550.54.14  ...')."""
    m = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s", text + " ")
    return m.group(1) if m else None


def _library_version(component: str, handle: ctypes.CDLL) -> str | None:
    if component == "cudnn":
        getter = getattr(handle, "cudnnGetVersion", None)
        if getter is None:
            return None
        getter.restype = ctypes.c_size_t
        cudnn = int(getter())
        if cudnn >= 90000:  # cuDNN 9: major*10000 + minor*100 + patch
            return f"{cudnn // 10000}.{(cudnn % 10000) // 100}.{cudnn % 100}"
        return f"{cudnn // 1000}.{(cudnn % 1000) // 100}.{cudnn % 100}"
    if component == "cudart":
        raw = _call_version(handle, "cudaRuntimeGetVersion")
        return f"{raw // 1000}.{(raw % 1000) // 10}" if raw else None
    return None


def _call_version(handle: ctypes.CDLL, name: str) -> int | None:
    """Call an ``int f(int *version)`` entry point; None when absent or failing."""
    func = getattr(handle, name, None)
    if func is None:
        return None
    value = ctypes.c_int(0)
    if func(ctypes.byref(value)) != 0:
        return None
    return value.value


def _mapped_path(soname: str, exact: bool = False) -> str | None:
    """The file this process mapped for a library, from /proc/self/maps (``exact``: of this
    soname, ``libcudart.so.12*``, rather than of any version, ``libcudart.so*``)."""
    stem = soname if exact else soname.split(".so")[0] + ".so"
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if Path(path).name.startswith(stem):
                    return path
    except OSError:
        return None
    return None


def _major(version: str | None) -> int | None:
    if not version:
        return None
    m = re.match(r"\s*(\d+)", version)
    return int(m.group(1)) if m else None
