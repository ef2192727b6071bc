"""Installed Python distributions, TensorFlow's build info and the CUDA tools, without imports.

TensorFlow's build info is read from ``tensorflow/python/platform/build_info.py`` as text:
``import tensorflow`` costs seconds and may crash, so it never happens here.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tfaccel.snapshot import Distribution, TfBuild, ToolPaths

__all__ = [
    "TF_DISTRIBUTIONS",
    "build_info_from_text",
    "collect_distributions",
    "collect_packages",
    "collect_tensorflow",
    "collect_tools",
    "distribution_requires",
    "nvidia_wheel_lib_dirs",
    "tensorflow_release",
]

# Distributions that install the `tensorflow` package itself (two at once conflict).
TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "tensorflow-rocm",
    "tf-nightly",
    "tf-nightly-cpu",
    "tf-nightly-gpu",
    "intel-tensorflow",
)
_RELEVANT_PREFIXES = (
    "tensorflow",
    "tf-nightly",
    "tf-keras",
    "keras",
    "nvidia-",
    "libtpu",
    "jax",
    "torch",
    "intel-extension-for-tensorflow",
    "tensorrt",
    "numba",
    "ml-dtypes",
    "protobuf",
    "tensorboard",
    "tb-nightly",
)


def collect_distributions() -> list[Distribution]:
    """The installed distributions that matter for TensorFlow on accelerators, sorted by name."""
    return _installed()[0]


def collect_packages() -> tuple[list[Distribution], TfBuild]:
    """:func:`collect_distributions` and :func:`collect_tensorflow` in one pass: each
    distribution's METADATA is read once, TensorFlow's ``Requires-Dist`` with its name."""
    distributions, requires = _installed()
    return distributions, collect_tensorflow(distributions, requires=requires)


def _installed() -> tuple[list[Distribution], dict[str, list[str]]]:
    """The distributions that matter, and the ``Requires-Dist`` of those that install
    TensorFlow, from one read of each METADATA (``importlib.metadata``'s ``metadata``,
    ``version`` and ``requires`` each read and parse the file again)."""
    seen: dict[str, Distribution] = {}
    requires: dict[str, list[str]] = {}
    for dist in metadata.distributions():
        meta = dist.metadata
        raw = meta["Name"] if meta else None
        if not raw:
            continue
        name = re.sub(r"[-_.]+", "-", raw).lower()
        if name.startswith(_RELEVANT_PREFIXES) and name not in seen:
            location = str(dist.locate_file("")) if hasattr(dist, "locate_file") else None
            seen[name] = Distribution(name=name, version=meta["Version"] or "", location=location)
            if name in TF_DISTRIBUTIONS:  # an egg-info install keeps them in requires.txt
                requires[name] = list(meta.get_all("Requires-Dist") or dist.requires or [])
    return [seen[k] for k in sorted(seen)], requires


def collect_tensorflow(
    distributions: Iterable[Distribution], *, requires: Mapping[str, list[str]] | None = None
) -> TfBuild:
    """Find the installed TensorFlow and read its build info from the file, not by importing.

    Args:
        distributions: the installed distributions (:func:`collect_distributions`).
        requires: the ``Requires-Dist`` of the TensorFlow distributions, when already read
            (:func:`collect_packages`); else TensorFlow's METADATA is read for them.
    """
    build = _located()
    if not build.installed or build.location is None:
        return build
    location = Path(build.location)
    tf_dists = [d for d in distributions if d.name in TF_DISTRIBUTIONS]
    if tf_dists:
        build.distribution, build.version = tf_dists[0].name, tf_dists[0].version
        build.requires = (
            list(requires.get(build.distribution, []))
            if requires is not None
            else distribution_requires(build.distribution)
        )
    path = location / "python" / "platform" / "build_info.py"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        build.error = f"cannot read {path}: {exc.strerror or exc}"
        return build
    try:
        info = build_info_from_text(text)
    except (SyntaxError, ValueError) as exc:
        build.error = f"cannot parse {path}: {exc}"
        return build
    _apply_build_info(build, info)
    return build


def tensorflow_release() -> TfBuild:
    """Where the ``tensorflow`` package is, and the distribution and version that installed
    it, as :func:`collect_tensorflow` finds them, without reading every distribution's
    METADATA nor the build info: each of :data:`TF_DISTRIBUTIONS` is looked up by its name
    (the folder names on ``sys.path``), and only a match's METADATA is read. The first name
    found in :func:`collect_tensorflow`'s order (sorted) is the one it takes: the same
    distribution, on the same ``sys.path`` entry."""
    build = _located()
    if not build.installed:
        return build
    for name in sorted(TF_DISTRIBUTIONS):
        found = next(iter(metadata.distributions(name=name)), None)
        if found is not None and found.metadata["Name"]:
            build.distribution, build.version = name, found.metadata["Version"] or ""
            break
    return build


def _located() -> TfBuild:
    """The ``tensorflow`` package located, not imported: installed or not, and where."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError) as exc:
        return TfBuild(installed=False, error=f"cannot locate tensorflow: {exc}")
    if spec is None or not spec.submodule_search_locations:
        return TfBuild(installed=False)
    return TfBuild(installed=True, location=str(next(iter(spec.submodule_search_locations))))


def distribution_requires(name: str) -> list[str]:
    """The Requires-Dist lines of an installed distribution's METADATA (no import); [] if unread."""
    try:
        return list(metadata.distribution(name).requires or [])
    except (metadata.PackageNotFoundError, OSError, ValueError):
        return []


def build_info_from_text(text: str) -> dict[str, Any]:
    """Parse build_info.py: ``build_info = collections.OrderedDict([...])`` (TF >= 2.4)
    or plain module-level constants (older releases).

    Raises:
        SyntaxError, ValueError: the text is not Python or holds no literal build info.
    """
    tree = ast.parse(text)
    constants: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        if target.id == "build_info":
            return _literal_mapping(node.value)
        try:
            constants[target.id] = ast.literal_eval(node.value)
        except ValueError:
            continue
    if not constants:
        raise ValueError("no build_info assignment found")
    return constants


def _literal_mapping(node: ast.expr) -> dict[str, Any]:
    if isinstance(node, ast.Call) and node.args:  # collections.OrderedDict([...]) / dict([...])
        value = ast.literal_eval(node.args[0])
        return dict(value)
    value = ast.literal_eval(node)
    if not isinstance(value, dict):
        raise ValueError("build_info is not a mapping")
    return value


def _apply_build_info(build: TfBuild, info: dict[str, Any]) -> None:
    build.build_info_found = True
    build.build_info = {str(k): _as_text(v) for k, v in info.items()}
    cuda_build = info.get("is_cuda_build", info.get("is_cuda_build_", None))
    build.is_cuda_build = bool(cuda_build) if cuda_build is not None else None
    rocm = info.get("is_rocm_build")
    build.is_rocm_build = bool(rocm) if rocm is not None else None
    for key in ("cuda_version", "cuda_version_number"):
        if info.get(key):
            build.cuda_version = str(info[key])
            break
    for key in ("cudnn_version", "cudnn_version_number"):
        if info.get(key):
            build.cudnn_version = str(info[key])
            break
    caps = info.get("cuda_compute_capabilities") or []
    if isinstance(caps, str):
        caps = re.split(r"[,\s]+", caps)
    build.cuda_compute_capabilities = [str(c) for c in caps if str(c)]


def _as_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def nvidia_wheel_lib_dirs(search_paths: Iterable[str] | None = None) -> list[str]:
    """The ``site-packages/nvidia/*/lib`` folders that ``tensorflow[and-cuda]`` installs."""
    dirs: list[str] = []
    for entry in search_paths if search_paths is not None else sys.path:
        base = Path(entry) / "nvidia"
        if not base.is_dir():
            continue
        for lib in sorted(base.glob("*/lib")):
            if lib.is_dir() and str(lib) not in dirs:
                dirs.append(str(lib))
    return dirs


def collect_tools(environ: dict[str, str], search_paths: Iterable[str] | None = None) -> ToolPaths:
    """Locate ptxas, nvcc and libdevice the way XLA looks for them."""
    paths = list(search_paths if search_paths is not None else sys.path)
    tools = ToolPaths(nvidia_wheel_lib_dirs=nvidia_wheel_lib_dirs(paths))
    nvcc_roots = [Path(p) / "nvidia" / "cuda_nvcc" for p in paths]
    nvcc_roots = [r for r in nvcc_roots if r.is_dir()]
    data_dir = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", environ.get("XLA_FLAGS", ""))
    roots = [Path(data_dir.group(1))] if data_dir else []
    roots += nvcc_roots
    roots += [Path(p) for p in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH")) if p]
    roots.append(Path("/usr/local/cuda"))
    tools.ptxas = shutil.which("ptxas") or _first_file(r / "bin" / "ptxas" for r in roots)
    tools.nvcc = shutil.which("nvcc") or _first_file(r / "bin" / "nvcc" for r in roots)
    tools.libdevice = _first_file(r / "nvvm" / "libdevice" / "libdevice.10.bc" for r in roots)
    return tools


def _first_file(paths: Iterable[Path]) -> str | None:
    for p in paths:
        if p.is_file() and os.access(p, os.R_OK):
            return str(p)
    return None
