"""Environment variables: the TensorFlow/CUDA settings in force, and values TF would not read.

Finding id: ``env_settings``. Its evidence lists every TensorFlow/CUDA variable set (the ones
that change device selection and memory first); it warns about values TensorFlow or CUDA would
ignore or reject (``TF_FORCE_GPU_ALLOW_GROWTH=True``, an unknown ``TF_GPU_ALLOCATOR``,
``XLA_FLAGS`` that are not ``--flags`` or point at a CUDA directory without libdevice, a
``TF_CONFIG`` that does not describe a cluster with this task in it) and notes
a ``TF_CPP_MIN_LOG_LEVEL`` that hides the warnings a log would need.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tfaccel.core.cluster import parse_tf_config
from tfaccel.core.errors import TfaccelError
from tfaccel.core.findings import Finding
from tfaccel.diagnosis.rules._common import dotted, major_minor, make_finding
from tfaccel.snapshot import Snapshot

_BOOL_VALUES = ("0", "1", "true", "false")


def _check_bool(value: str) -> str | None:
    return None if value.strip().lower() in _BOOL_VALUES else "TF reads only 0, 1, true or false"


def _check_int(value: str) -> str | None:
    return None if re.fullmatch(r"\s*\d{1,9}\s*", value) else "TF expects a non-negative integer"


def _check_choice(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value in choices:
            return None
        return f"not one of {', '.join(choices)}; it is ignored"

    return check


def _check_allow_growth(value: str) -> str | None:
    if value in ("true", "false"):
        return None
    return "TF accepts only 'true' or 'false' (lower case); it logs an error and ignores this"


def _check_allocator(value: str) -> str | None:
    if value in ("", "bfc", "cuda_malloc_async", "cuda_malloc", "memory_guard"):
        return None
    return "TF does not know this allocator and uses its default (BFC)"


def _check_log_level(value: str) -> str | None:
    return None if value.strip() in ("0", "1", "2", "3") else "TF expects 0, 1, 2 or 3"


def _check_tf_config(value: str) -> str | None:
    """What ``parse_tf_config`` refuses in a ``TF_CONFIG`` (not JSON, no ``cluster`` or
    ``task``, a task the cluster does not have), else None."""
    try:
        parse_tf_config(value)
    except TfaccelError as exc:
        return f"{exc.what}: {exc.received}" if exc.received else exc.what
    return None


# variable -> (check, fix when the check fails)
_ENV_CHECKS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "TF_FORCE_GPU_ALLOW_GROWTH": (_check_allow_growth, "export TF_FORCE_GPU_ALLOW_GROWTH=true"),
    "TF_GPU_ALLOCATOR": (_check_allocator, "export TF_GPU_ALLOCATOR=cuda_malloc_async"),
    "TF_CPP_MIN_LOG_LEVEL": (_check_log_level, "export TF_CPP_MIN_LOG_LEVEL=0"),
    "TF_CPP_MAX_VLOG_LEVEL": (_check_int, "unset TF_CPP_MAX_VLOG_LEVEL"),
    "TF_ENABLE_ONEDNN_OPTS": (_check_bool, "export TF_ENABLE_ONEDNN_OPTS=1"),
    "TF_DETERMINISTIC_OPS": (_check_bool, "export TF_DETERMINISTIC_OPS=1"),
    "TF_CUDNN_DETERMINISTIC": (_check_bool, "export TF_CUDNN_DETERMINISTIC=1"),
    "TF_MIN_GPU_MULTIPROCESSOR_COUNT": (_check_int, "unset TF_MIN_GPU_MULTIPROCESSOR_COUNT"),
    "TF_NUM_INTRAOP_THREADS": (_check_int, "unset TF_NUM_INTRAOP_THREADS"),
    "TF_NUM_INTEROP_THREADS": (_check_int, "unset TF_NUM_INTEROP_THREADS"),
    "TF_GPU_THREAD_MODE": (
        _check_choice("global", "gpu_private", "gpu_shared"),
        "export TF_GPU_THREAD_MODE=gpu_private",
    ),
    "CUDA_DEVICE_ORDER": (
        _check_choice("FASTEST_FIRST", "PCI_BUS_ID"),
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
    ),
    "CUDA_MODULE_LOADING": (_check_choice("LAZY", "EAGER"), "export CUDA_MODULE_LOADING=LAZY"),
    "TF_CONFIG": (
        _check_tf_config,
        "unset TF_CONFIG for one process, or set it to JSON such as "
        '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
        '"task": {"type": "worker", "index": 0}}',
    ),
}
# fmt: off
_ENV_FIRST = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
    "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "XLA_FLAGS", "TF_XLA_FLAGS",
    "TF_CPP_MIN_LOG_LEVEL",
)
# fmt: on
MAX_ENV_VALUE_CHARS = 200


def env_settings(s: Snapshot) -> Finding:
    """The TensorFlow/CUDA environment variables in force, and any TF would not understand."""
    names = sorted(
        s.env, key=lambda n: (n not in _ENV_FIRST, _ENV_FIRST.index(n) if n in _ENV_FIRST else 0, n)
    )
    if not names:
        return make_finding("env_settings", "ok", "no TensorFlow/CUDA environment variables set")
    evidence = [f"{n}={_shorten(s.env[n])}" for n in names]
    level = s.env.get("TF_CPP_MIN_LOG_LEVEL", "").strip()
    if level in ("2", "3"):
        hidden = "warnings" if level == "2" else "warnings and errors"
        evidence.append(
            f"TF_CPP_MIN_LOG_LEVEL={level} hides TensorFlow's {hidden}: unset it before saving "
            "a log for `tfaccel doctor --log`"
        )
    problems: list[tuple[str, str]] = []  # (evidence, fix)
    for name in names:
        problems += _env_problems(s, name, s.env[name])
    if not problems:
        return make_finding(
            "env_settings", "ok", f"{len(names)} environment variable(s) in force", evidence
        )
    evidence += [p[0] for p in problems]
    return make_finding(
        "env_settings",
        "warn",
        "Some environment variables hold values TensorFlow does not understand",
        evidence,
        "; ".join(dict.fromkeys(p[1] for p in problems)),
    )


def _shorten(value: str) -> str:
    return value if len(value) <= MAX_ENV_VALUE_CHARS else value[: MAX_ENV_VALUE_CHARS - 3] + "..."


def _env_problems(s: Snapshot, name: str, value: str) -> list[tuple[str, str]]:
    if name in ("XLA_FLAGS", "TF_XLA_FLAGS"):
        return _xla_flag_problems(s, name, value)
    check = _ENV_CHECKS.get(name)
    if check is None:
        return []
    problem = check[0](value)
    if problem:
        return [(f"{name}={_shorten(value)!r}: {problem}", check[1])]
    if name == "TF_GPU_ALLOCATOR" and value == "cuda_malloc_async":
        cuda = major_minor(s.tensorflow.cuda_version)
        if cuda is not None and cuda < (11, 2):
            return [
                (
                    f"TF_GPU_ALLOCATOR=cuda_malloc_async needs CUDA >= 11.2; TF: {dotted(cuda)}",
                    "unset TF_GPU_ALLOCATOR",
                )
            ]
    return []


def _xla_flag_problems(s: Snapshot, name: str, value: str) -> list[tuple[str, str]]:
    problems = []
    for token in value.split():
        if not token.startswith("--"):
            problems.append(
                (
                    f"{name}: {token!r} is not a --flag; XLA aborts on flags it cannot parse",
                    f"export {name}='<the flags, each starting with -->'",
                )
            )
        elif token.startswith("--xla_gpu_cuda_data_dir="):
            directory = token.split("=", 1)[1].rstrip("/")
            libdevice = s.tools.libdevice
            if libdevice is None or not libdevice.startswith(directory):
                problems.append(
                    (
                        f"{name} points XLA at {directory!r}, but no libdevice was found there "
                        f"(expected {directory}/nvvm/libdevice/libdevice.10.bc)",
                        "pip install nvidia-cuda-nvcc-cu12, and drop --xla_gpu_cuda_data_dir from "
                        f"{name} (or point it at the CUDA directory holding nvvm/libdevice)",
                    )
                )
    return problems
