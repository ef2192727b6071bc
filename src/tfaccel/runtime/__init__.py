"""Set the TensorFlow runtime up for this machine: devices, memory, precision, XLA, threads.

``setup()`` decides first and applies after. Every argument and every ``TFACCEL_*`` variable
is checked, against the hardware too, before TensorFlow is touched: a bad value raises and
changes nothing. The decision is a pure function of three plain values (the request, the
hardware facts from :mod:`tfaccel.inventory` and TensorFlow's current configuration), so each
rule is tested by building those by hand. What was applied, what was left as it was, and why,
comes back as a :class:`RuntimeConfig`.

TensorFlow fixes the devices, their memory, logical devices and thread pools when its runtime
starts (the first op, or ``tf.config.list_logical_devices()``). ``setup()`` called later applies
what can still change (precision, XLA, determinism, seed) and raises :class:`RuntimeTooLateError`
for the rest.

The modules, in the order ``setup()`` uses them: ``settings`` (names, parsing, the Request),
``model`` (the model's dimensions), ``measured`` (the results store's measurements),
``decision`` (the pure plan), ``apply`` (TensorFlow's state and the calls), ``config`` (the
RuntimeConfig); ``devices`` holds :func:`device`.

Example:
    >>> import tfaccel
    >>> config = tfaccel.setup(precision="auto", memory="growth", jit="auto")
    >>> print(config)                     # one line per setting: status, value, reason
    >>> config["precision"].applied       # 'mixed_bfloat16' on a CPU with AVX512_BF16
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tfaccel import inventory
from tfaccel.architecture import fingerprint as model_fingerprint
from tfaccel.core.checks import check_environ
from tfaccel.core.errors import RuntimeSetupError as RuntimeSetupError  # raised by setup()
from tfaccel.inventory import GpuFacts, Inventory
from tfaccel.probe import system
from tfaccel.runtime.apply import apply_plan, outcome, read_state
from tfaccel.runtime.config import RuntimeConfig, RuntimeTooLateError, Setting
from tfaccel.runtime.decision import Hardware, RuntimeState, SetupPlan, decide
from tfaccel.runtime.devices import on_device
from tfaccel.runtime.measured import measured_jit, measured_precision
from tfaccel.runtime.model import check_model_dims
from tfaccel.runtime.settings import (
    ENV_VARS,
    FIXED_AT_START,
    MAX_LOGICAL_DEVICES,
    PRECISIONS,
    SETTINGS,
    Request,
    build_request,
    check_model,
    parse_setting,
)

__all__ = [
    "ENV_VARS",
    "FIXED_AT_START",
    "MAX_LOGICAL_DEVICES",
    "PRECISIONS",
    "SETTINGS",
    "GpuFacts",
    "Hardware",
    "Request",
    "RuntimeConfig",
    "RuntimeState",
    "RuntimeTooLateError",
    "Setting",
    "SetupPlan",
    "check_model_dims",
    "decide",
    "on_device",
    "parse_setting",
    "setup",
]


def setup(
    *,
    devices: str | int | Sequence[int] | None = None,
    memory: str | int | float | None = None,
    precision: str | None = None,
    jit: str | bool | None = None,
    threads: str | int | tuple[int, int] | None = None,
    logical_devices: str | int | None = None,
    deterministic: bool | None = None,
    seed: str | int | None = None,
    model: Any = None,
    environ: Mapping[str, str] | None = None,
) -> RuntimeConfig:
    """Configure TensorFlow for this machine, all settings checked before any is applied.

    Call it first, before any TensorFlow op or model. Each argument left as None is taken from
    its ``TFACCEL_*`` variable (``TFACCEL_MEMORY=growth``...), else left as TensorFlow has it.

    Args:
        devices: the GPUs to use: an index, a list of indices (TensorFlow's numbering, as in
            ``tf.config.list_physical_devices('GPU')``), "all", or "none" (CPU only).
        memory: "growth" (take memory as needed), a limit per GPU in MiB (int), or a fraction
            of each GPU's memory (float in (0, 1]). Not combinable with growth from
            TF_FORCE_GPU_ALLOW_GROWTH. Without a GPU it is recorded as not applicable.
        precision: "auto", "float32", "mixed_float16" or "mixed_bfloat16" (Keras global
            policy). Auto: the fastest precision measured for this machine and model in the
            results store (``tfaccel tune``) when there is one; else mixed_float16 on GPUs of
            compute capability >= 7.0, mixed_bfloat16 on TPUs and on CPUs with avx512_bf16 or
            amx_bf16, float32 otherwise.
        jit: XLA auto-clustering (``tf.config.optimizer.set_jit``): True, False (bools: text
            such as "on" is for ``TFACCEL_JIT``), or "auto": the
            measured result for this machine and model when the results store has one, else on
            for GPU and off on CPU.
        threads: intra-op threads (int), or (intra, inter).
        logical_devices: split the first visible GPU (or the CPU when none) into this many
            logical devices (at most ``MAX_LOGICAL_DEVICES``, 64), to run multi-device code
            (MirroredStrategy) on one device. On a GPU each gets an equal share of ``memory``
            (default: 90% of the GPU).
        deterministic: True turns op determinism on (``enable_op_determinism``), False off;
            a bool (text such as "yes" is for ``TFACCEL_DETERMINISTIC``).
        seed: seed Python, NumPy and TensorFlow (``keras.utils.set_random_seed``).
        model: a built Keras model, or None: names the model for the XLA measurement lookup,
            and under mixed_float16 warns about dimensions that are not multiples of 8.
        environ: the environment to read TFACCEL_*, TF_FORCE_GPU_ALLOW_GROWTH and
            CUDA_VISIBLE_DEVICES from (default ``os.environ``; TensorFlow itself always reads
            ``os.environ``).

    Returns:
        A RuntimeConfig: per setting, requested and applied values, status and reason.
        Warnings (slow precision choices, model dimensions) are also issued with
        ``warnings.warn``.

    Raises:
        UsageError: an argument or TFACCEL_* variable has a value the setting does not accept,
            ``model`` is not a Keras model, or ``environ`` is not a mapping. Nothing was
            applied.
        RuntimeSetupError: the request does not fit this machine (GPU index, memory size,
            growth with a limit). Nothing was applied.
        RuntimeTooLateError: the runtime had started and a device, memory, logical-device or
            thread setting would change. The others were applied; ``err.config`` has the rest.

    Example:
        >>> import tfaccel
        >>> config = tfaccel.setup(devices="all", memory="growth", precision="auto", jit="auto")
        >>> print(config)
    """
    check_model(model)
    check_environ("environ", environ, where="tfaccel.setup()")
    arguments = {
        "devices": devices,
        "memory": memory,
        "precision": precision,
        "jit": jit,
        "threads": threads,
        "logical_devices": logical_devices,
        "deterministic": deterministic,
        "seed": seed,
    }
    request = build_request(arguments, system.collect_env(environ), model)
    inv = inventory.current()  # the one look at the machine
    tf = importlib.import_module("tensorflow")
    state = read_state(tf)
    architecture = model_fingerprint(model) if model is not None else None
    plan = decide(request, _read_hardware(inv, request, architecture), state)
    too_late = apply_plan(tf, plan, state)
    config = outcome(plan, state, too_late)
    for text in config.warnings:
        warnings.warn(text, RuntimeWarning, stacklevel=2)
    if too_late:
        raise RuntimeTooLateError(config)
    return config


def _read_hardware(inv: Inventory, request: Request, architecture: str | None) -> Hardware:
    """The hardware facts of a decision: the Inventory, the GPUs the TensorFlow of this process
    sees (no runtime start), and, for "auto" settings, what the results store measured here on
    a model of this ``architecture`` (:func:`tfaccel.architecture.fingerprint`)."""
    gpus = inventory.tensorflow_gpus(inv, request.cuda_visible_devices)
    device_name = "gpu:0" if gpus and request.get("devices") != "none" else "cpu"
    digest = inv.fingerprint.digest
    jit, jit_reason = measured_jit(request, device_name, digest, model_fingerprint=architecture)
    precision, precision_reason = measured_precision(
        request, device_name, digest, model_fingerprint=architecture
    )
    return Hardware(
        gpus=gpus,
        nvml_gpus=inv.nvml_gpus,
        cpu_flags=frozenset(inv.cpu_flags),
        tpu_present=inv.tpu is not None,
        usable_cores=inv.cpu.usable_cores,
        measured_jit=jit,
        measured_jit_reason=jit_reason,
        measured_precision=precision,
        measured_precision_reason=precision_reason,
    )
