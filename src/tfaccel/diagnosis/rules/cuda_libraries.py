"""The CUDA libraries and tools TensorFlow loads: do they load, and do they match its build.

Finding ids: ``missing_cuda_libs`` (a CUDA or cuDNN library TensorFlow dlopens does not load),
``cudnn_mismatch`` (the cuDNN that loads is older than, or of another major version than, the
one TensorFlow was built with) and ``xla_libdevice_ptxas`` (XLA on the GPU cannot find ptxas or
libdevice).
"""

from __future__ import annotations

import posixpath

from tfaccel.core.findings import Finding
from tfaccel.diagnosis.rules._common import (
    INSTALL_GPU,
    VLOG_DEBUG,
    gpu_skip_reason,
    major_minor,
    make_finding,
    parse_version,
    skip,
)
from tfaccel.snapshot import LibraryLoad, Snapshot


def missing_cuda_libs(s: Snapshot) -> Finding:
    """CUDA/cuDNN libraries TensorFlow dlopens do not load."""
    reason = gpu_skip_reason(s)
    if reason:
        return skip("missing_cuda_libs", reason)
    libs = [lib for lib in s.cuda_libs if lib.component != "cuda"]
    if not libs:
        return skip("missing_cuda_libs", "no CUDA library load was tried")
    failed = [lib for lib in libs if not lib.loaded]
    if not failed:
        evidence = [f"{lib.soname}: {lib.path or 'loaded'}{_via(lib)}" for lib in libs]
        return make_finding(
            "missing_cuda_libs", "ok", f"all {len(libs)} CUDA libraries load", evidence
        )
    evidence = [_load_error(lib) for lib in failed]
    dirs = s.tools.nvidia_wheel_lib_dirs
    without_wheel = [lib for lib in failed if not _wheel_dir(lib, dirs)]
    if dirs:
        evidence.append(f"nvidia wheel library dirs: {', '.join(dirs)}")
    else:
        evidence.append("no nvidia-* wheel library dirs (site-packages/nvidia/*/lib) found")
    if without_wheel:
        fix = INSTALL_GPU
    else:
        fix = f"export LD_LIBRARY_PATH={':'.join(dirs)}:$LD_LIBRARY_PATH"
    names = ", ".join(lib.soname or lib.component for lib in failed)
    return make_finding(
        "missing_cuda_libs",
        "fail",
        f"CUDA libraries do not load: {names}",
        evidence,
        f"{fix}; to see each load attempt: {VLOG_DEBUG}",
    )


# component -> the nvidia-* wheel directory (site-packages/nvidia/<dir>/lib) that ships it
_WHEEL_DIRS = {"cudart": "cuda_runtime", "cublasLt": "cublas", "nvrtc": "cuda_nvrtc"}


def _wheel_dir(lib: LibraryLoad, dirs: list[str]) -> bool:
    name = _WHEEL_DIRS.get(lib.component, lib.component)
    return any(f"/nvidia/{name}/lib" in d.replace("\\", "/") for d in dirs)


def _via(lib: LibraryLoad) -> str:
    """`` (wheel)``: how the library was found, when known."""
    return f" ({lib.found_via})" if lib.found_via else ""


def _load_error(lib: LibraryLoad) -> str:
    name = lib.soname or lib.component or "?"
    error = lib.error or "did not load"
    return error if error.startswith(name) else f"{name}: {error}"


def cudnn_mismatch(s: Snapshot) -> Finding:
    """The loaded cuDNN is older than, or of another major version than, TensorFlow's."""
    reason = gpu_skip_reason(s)
    if reason:
        return skip("cudnn_mismatch", reason)
    loaded = next((lib for lib in s.cuda_libs if lib.component == "cudnn" and lib.loaded), None)
    if loaded is None:
        return skip("cudnn_mismatch", "cuDNN did not load (see missing_cuda_libs)")
    have = parse_version(loaded.version)
    want = parse_version(s.tensorflow.cudnn_version)
    if have is None or want is None:
        return skip("cudnn_mismatch", "the cuDNN versions are not both known")
    evidence = [
        f"loaded cuDNN {loaded.version} from {loaded.path or '?'}{_via(loaded)}",
        f"TensorFlow built with cuDNN {s.tensorflow.cudnn_version}",
    ]
    problem = _cudnn_problem(have, want, parse_version(s.tensorflow.version))
    if problem is None:
        return make_finding(
            "cudnn_mismatch", "ok", f"cuDNN {loaded.version} fits TensorFlow's", evidence
        )
    evidence.append(problem)
    return make_finding(
        "cudnn_mismatch",
        "fail",
        "The cuDNN that loads does not match TensorFlow's",
        evidence,
        _cudnn_fix(s, loaded.found_via),
    )


def _cudnn_problem(
    have: tuple[int, ...], want: tuple[int, ...], tf_version: tuple[int, ...] | None
) -> str | None:
    """TensorFlow needs the same major and a minor >= its own (before TF 1.7: the same minor)."""
    if have[0] != want[0]:
        return f"major version {have[0]} != {want[0]}: cuDNN majors are not compatible"
    if len(want) < 2:
        return None
    have_minor = have[1] if len(have) > 1 else 0
    if have_minor < want[1]:
        return f"minor version {have_minor} < {want[1]}: cuDNN must be the same or newer"
    if have_minor != want[1] and tf_version is not None and tf_version < (1, 7):
        return "TensorFlow before 1.7 needs exactly the cuDNN major.minor it was built with"
    return None


def _cudnn_fix(s: Snapshot, found_via: str | None) -> str:
    if found_via == "wheel":
        wanted = s.tensorflow.cudnn_version or "9"
        return f"pip install -U 'nvidia-cudnn-cu12>={wanted}'"
    return (
        f"{INSTALL_GPU}, then take the older cuDNN's directory off LD_LIBRARY_PATH so "
        "TensorFlow's own (site-packages/nvidia/cudnn/lib) loads first"
    )


def xla_libdevice_ptxas(s: Snapshot) -> Finding:
    """XLA on the GPU needs ptxas and libdevice (the nvidia-cuda-nvcc wheel has both)."""
    reason = gpu_skip_reason(s)
    if reason:
        return skip("xla_libdevice_ptxas", reason)
    tools = s.tools
    missing = [
        name
        for name, path in (("ptxas", tools.ptxas), ("libdevice", tools.libdevice))
        if path is None
    ]
    evidence = [
        f"ptxas: {tools.ptxas or 'not found'}",
        f"libdevice: {tools.libdevice or 'not found'}",
    ]
    if not missing:
        return make_finding("xla_libdevice_ptxas", "ok", "XLA finds ptxas and libdevice", evidence)
    evidence.append("XLA / jit_compile=True will fail on the GPU; other ops work")
    return make_finding(
        "xla_libdevice_ptxas",
        "warn",
        f"XLA cannot find {' and '.join(missing)}",
        evidence,
        _nvcc_fix(s),
    )


def _nvcc_fix(s: Snapshot) -> str:
    cuda = major_minor(s.tensorflow.cuda_version)
    wheel = (
        f"pip install 'nvidia-cuda-nvcc-cu{cuda[0]}=={cuda[0]}.{cuda[1]}.*'"
        if cuda
        else "pip install nvidia-cuda-nvcc-cu12"
    )
    nvcc = s.tools.nvcc
    cuda_dir = posixpath.dirname(posixpath.dirname(nvcc)) if nvcc else "/usr/local/cuda"
    return f"{wheel}; or export XLA_FLAGS=--xla_gpu_cuda_data_dir={cuda_dir}"
