"""tfaccel: make TensorFlow/Keras training use the hardware it runs on, and show it.

Importing tfaccel is cheap: it never imports TensorFlow. The public functions load their
modules on first use.

The public API is ``__all__`` and ``PUBLIC_SUBMODULES``, the names ``dir(tfaccel)`` lists
(docs/api.md has one line on each):

- functions: :func:`devices`, :func:`doctor`, :func:`setup`, :func:`on_device`, :func:`tune`,
  :func:`plan`; the base of every tfaccel error, :class:`TfaccelError`; ``__version__``.
- submodules, each an attribute of ``tfaccel`` imported on first use
  (``tfaccel.data.pipeline(...)`` after a plain ``import tfaccel``): ``bench``, ``data``,
  ``diagnosis``, ``distribute``, ``inventory``, ``keras``, ``kernels``, ``models``,
  ``placement``, ``planning``, ``profile``, ``report``, ``runtime``, ``tuning``.

``INTERNAL_SUBMODULES`` (``architecture``, ``core``, ``probe``, ``snapshot``, ``store``) are the
layers the public modules are built on: importable as ``tfaccel.probe`` and so on, but not
the API, and they may change without notice.

Example:
    >>> import tfaccel
    >>> inv = tfaccel.devices()          # CPU, GPUs, TPUs and their peaks; no TensorFlow import
    >>> report = tfaccel.doctor()        # why TensorFlow does (not) use the GPU
    >>> tfaccel.plan(model, batch_size=256)  # fit and time per accelerator  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tfaccel._version import __version__
from tfaccel.core.checks import check_flag
from tfaccel.core.errors import TfaccelError

__all__ = [
    "TfaccelError",
    "__version__",
    "devices",
    "doctor",
    "on_device",
    "plan",
    "setup",
    "tune",
]

# The submodules that are part of the API.
PUBLIC_SUBMODULES = frozenset(
    {
        "bench",
        "data",
        "diagnosis",
        "distribute",
        "inventory",
        "keras",
        "kernels",
        "models",
        "placement",
        "planning",
        "profile",
        "report",
        "runtime",
        "tuning",
        "workload",
    }
)
# The layers under them: reachable as attributes, not the API.
INTERNAL_SUBMODULES = frozenset({"architecture", "core", "probe", "selftest", "snapshot", "store"})
SUBMODULES = PUBLIC_SUBMODULES | INTERNAL_SUBMODULES

# Names that were public once, and what replaced them.
_RENAMED = {
    "device": "on_device",
}


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        return importlib.import_module(f"tfaccel.{name}")
    if name in _RENAMED:
        new = _RENAMED[name]
        raise AttributeError(
            f"module 'tfaccel' has no attribute {name!r}: use tfaccel.{new}() "
            f"(tfaccel.{new}('GPU:0') is the checked tf.device context manager; "
            "tfaccel.devices() lists the hardware)"
        )
    raise AttributeError(f"module 'tfaccel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | PUBLIC_SUBMODULES)


if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from tfaccel.diagnosis import DoctorReport, LogText
    from tfaccel.inventory import Inventory
    from tfaccel.planning import Plan
    from tfaccel.runtime import RuntimeConfig
    from tfaccel.tuning import TuneResult
    from tfaccel.tuning.api import StoreTarget
    from tfaccel.tuning.search import Runner


def devices(*, tf: bool = False) -> Inventory:
    """Return the devices of this machine and what they can do.

    CPU (cores, features, peak FLOP/s), NVIDIA GPUs through NVML (memory, compute capability,
    peaks), TPUs, and the CUDA/cuDNN the installed TensorFlow wants. Without ``tf`` nothing
    imports TensorFlow.

    CLI: ``tfaccel devices [--tf] [--json]``.

    Args:
        tf: also ask TensorFlow (in a subprocess) which devices it registers (a bool).

    Returns:
        An :class:`~tfaccel.inventory.Inventory`; ``print()`` shows it as ``tfaccel devices``
        does.

    Raises:
        UsageError: ``tf`` is not a bool.

    Example:
        >>> inv = tfaccel.devices()
        >>> inv.cpu.logical_cores, [gpu.name for gpu in inv.nvml_gpus]  # doctest: +SKIP
    """
    from tfaccel import inventory, probe

    check_flag("tf", tf, where="tfaccel.devices()")
    return inventory.build(probe.snapshot(deep=tf))


def doctor(*, deep: bool = False, log: str | bytes | LogText | None = None) -> DoctorReport:
    """Diagnose why TensorFlow does or does not use the accelerators.

    Probes this machine (driver, CUDA, cuDNN, the TensorFlow build, environment variables) and
    runs every rule on it; with ``log``, also matches a TensorFlow log or traceback against the
    known failures (out of memory, missing libraries, ...). Both arguments are checked before
    anything is probed.

    CLI: ``tfaccel doctor [--deep] [--log FILE] [--json]``.

    Args:
        deep: import TensorFlow in a subprocess and read what it logs (a bool).
        log: the text of a TensorFlow log or traceback to diagnose as well: a str, bytes
            (decoded as UTF-8, undecodable bytes replaced and counted in the report's notes),
            or a :class:`~tfaccel.diagnosis.LogText`.

    Returns:
        A :class:`~tfaccel.diagnosis.DoctorReport`: the findings, each with its evidence and
        fix, and the causes matched in ``log``; ``exit_code`` is what ``tfaccel doctor`` exits
        with.

    Raises:
        UsageError: ``deep`` is not a bool, or ``log`` is not text, bytes or a LogText.
        LogInputError: ``log`` is empty or blank.

    Example:
        >>> report = tfaccel.doctor(log="OOM when allocating tensor with shape[8,1024]")
        >>> [finding.id for finding in report.findings]  # doctest: +SKIP
    """
    from tfaccel.diagnosis import check

    return check(deep=deep, log=log)


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
    The full rules: :func:`tfaccel.runtime.setup`.

    CLI: ``tfaccel run [--devices IDS] [--memory M] [--precision P] [--jit J] [--threads N[,M]]
    [--logical-devices N] [--deterministic] [--seed N] SCRIPT [ARGS...]`` applies it, then runs
    the script.

    Args:
        devices: the GPUs to use: an index, a list of indices, "all", or "none" (CPU only).
        memory: "growth", a limit per GPU in MiB (int), or a fraction of each GPU's memory
            (float in (0, 1]).
        precision: "auto", "float32", "mixed_float16" or "mixed_bfloat16" (the Keras global
            policy); "auto" takes what ``tfaccel tune`` measured here, else the hardware's best.
        jit: XLA auto-clustering: True, False, or "auto" (measured, else on for GPU only).
        threads: intra-op threads (int), or (intra, inter).
        logical_devices: split the first visible GPU (or the CPU) into this many logical
            devices.
        deterministic: True turns op determinism on, False off.
        seed: seed Python, NumPy and TensorFlow.
        model: a built Keras model, or None: names the model for the measurement lookup, and
            under mixed_float16 warns about dimensions that are not multiples of 8.
        environ: the environment to read TFACCEL_*, TF_FORCE_GPU_ALLOW_GROWTH and
            CUDA_VISIBLE_DEVICES from (default ``os.environ``).

    Returns:
        A :class:`~tfaccel.runtime.RuntimeConfig`: per setting, requested and applied values,
        status and reason.

    Raises:
        UsageError: an argument or TFACCEL_* variable has a value the setting does not accept.
            Nothing was applied.
        RuntimeSetupError: the request does not fit this machine. Nothing was applied.
        RuntimeTooLateError: the runtime had started and a device, memory, logical-device or
            thread setting would change. The others were applied; ``err.config`` has the rest.

    Example:
        >>> config = tfaccel.setup(memory="growth", precision="auto", jit="auto")  # doctest: +SKIP
        >>> print(config)                                                       # doctest: +SKIP
    """
    from tfaccel import runtime

    return runtime.setup(
        devices=devices,
        memory=memory,
        precision=precision,
        jit=jit,
        threads=threads,
        logical_devices=logical_devices,
        deterministic=deterministic,
        seed=seed,
        model=model,
        environ=environ,
    )


def on_device(spec: str) -> AbstractContextManager[Any]:
    """Run the ops of a ``with`` block on one device that exists: a checked ``tf.device``.

    Not to be confused with :func:`devices`, which lists the hardware. TensorFlow's own
    ``tf.device`` silently falls back to another device when the named one does not exist;
    this raises instead. Checking starts TensorFlow's runtime, so call :func:`setup` before.
    The implementation: :func:`tfaccel.runtime.on_device`.

    CLI: none; ``tfaccel devices --tf`` lists the devices TensorFlow registers.

    Args:
        spec: the device: ``'GPU:0'``, ``'/gpu:0'``, ``'/device:GPU:0'``, ``'cpu:0'``...

    Returns:
        The ``tf.device`` context manager for it.

    Raises:
        UsageError: ``spec`` is not text, or the text is not a device name (checked before
            TensorFlow is imported).
        RuntimeSetupError: no such device; the message lists those that exist.

    Example:
        >>> with tfaccel.on_device("GPU:0"):  # doctest: +SKIP
        ...     y = tf.matmul(x, x)
    """
    from tfaccel import runtime

    return runtime.on_device(spec)


def tune(
    model_fn: Callable[[], Any],
    data: Any,
    budget_s: float = 300.0,
    space: Mapping[str, Any] | None = None,
    *,
    model_name: str | None = None,
    batch_cap: int | None = None,
    margin: float = 0.1,
    is_oom: Callable[[BaseException], bool] | None = None,
    store: StoreTarget = True,
    sample_s: float = 1.0,
    final_rounds: int = 5,
    pipeline_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    runner: Runner | None = None,
    batched: bool | None = None,
) -> TuneResult:
    """Find the fastest training configuration of a model on this machine, within a budget.

    Searches batch size, precision, XLA, the feed and the input pipeline's knobs, measuring
    each candidate and dropping losers early; a configuration wins only when it is faster
    beyond the noise. The winner is stored, so ``tfaccel.setup(precision="auto", jit="auto",
    model=model)`` applies it on this machine. The full description of every argument:
    :func:`tfaccel.tuning.tune`.

    CLI: ``tfaccel tune --model reference-cnn`` (a reference model) or ``tfaccel tune SCRIPT``.

    Args:
        model_fn: builds and compiles the model; called once per configuration.
        data: ``(x, y)`` arrays (or dicts of arrays), a ``tf.data.Dataset`` of ``(x, y)``, a
            generator function yielding ``(x, y)``, or a ``keras.utils.PyDataset``.
        budget_s: seconds the search may take.
        space: what to search, e.g. ``{"batch_size": [64, 128, 256], "jit": False}``
            (the default space for the keys left out).
        model_name: the name the result is stored under (default: the model's ``name``).
        batch_cap: the largest batch size (default 1024 for ``batch_size="auto"``).
        margin: fraction kept below the largest batch that fitted in memory.
        is_oom: which exceptions mean "out of memory" (None: TensorFlow's
            ``ResourceExhaustedError`` and ``MemoryError``).
        store: True (the default results database), False, or a database path.
        sample_s: seconds per timed sample.
        final_rounds: interleaved rounds of the final comparison.
        pipeline_kwargs: fixed ``tfaccel.data.pipeline`` arguments (``map_fn``, ``seed``...).
        progress: show a progress bar with the current best on stderr.
        runner: runs the trials (default: TensorFlow); tests inject timings through it.
        batched: whether the elements of a dataset or generator are batches (None: by rank).

    Returns:
        A :class:`~tfaccel.tuning.TuneResult`: ``best``, every trial, and the calls that
        reproduce it (``setup_kwargs()``, ``compile_kwargs()``, ``pipeline_kwargs()``,
        ``code()``).

    Raises:
        SpaceError: an unknown space key or value.
        BudgetError: the budget cannot pay for one trial.
        ModelFnError: ``model_fn`` raised or returned no compiled model.
        TuneError: data in no accepted form, or the first trial failed.

    Example:
        >>> result = tfaccel.tune(model_fn, (x_train, y_train), budget_s=300)  # doctest: +SKIP
        >>> result.setup_kwargs()                                               # doctest: +SKIP
        {'precision': 'mixed_bfloat16', 'jit': False}
    """
    from tfaccel.tuning.api import tune as run

    return run(
        model_fn,
        data,
        budget_s,
        space,
        model_name=model_name,
        batch_cap=batch_cap,
        margin=margin,
        is_oom=is_oom,
        store=store,
        sample_s=sample_s,
        final_rounds=final_rounds,
        pipeline_kwargs=pipeline_kwargs,
        progress=progress,
        runner=runner,
        batched=batched,
    )


def plan(
    model: Any,
    batch_size: int = 32,
    precision: str | None = None,
    optimizer: Any = None,
    devices: Sequence[str] | None = None,
    *,
    examples: int | None = None,
    prices: Mapping[str, float] | None = None,
    inventory: Any = None,
    data: Any = None,
    step_call: str = "fit",
) -> Plan:
    """Predict memory, fit, largest batch and step time of training on each accelerator.

    Nothing trains: one training step is traced, its buffers simulated to a peak by part, and
    its FLOPs and bytes give a roofline time on every accelerator of the spec database and on
    this machine. The implementation: :func:`tfaccel.planning.plan`.

    CLI: ``tfaccel plan --model reference-cnn --batch 256 [--json]``.

    Args:
        model: a Keras model, or a function returning one.
        batch_size: the global batch (a positive integer).
        precision: ``float32``, ``mixed_bfloat16`` or ``mixed_float16`` (default: the model's).
        optimizer: a Keras optimizer or its name (default: the model's, else Adam).
        devices: spec database keys (``["a100-40gb", "h100-sxm"]``) or ``this-cpu``
            (default: every GPU and TPU row and this machine).
        examples: training examples per epoch (default: none, no epoch time).
        prices: device key -> price per hour, for the cost of an epoch.
        inventory: this machine's Inventory (default: probed once).
        data: one batch as ``fit`` hands it to ``train_step`` (``x``, ``(x, y)``, dicts), or
            a dataset whose first batch is taken: the model's own ``train_step`` is traced on
            it, with every optimizer it holds (a subclassed model, a VAE, a GAN).
        step_call: how each step will be called, for this CPU's time: ``fit`` (default; a
            custom loop too) or ``train_on_batch`` (a loop of calls, each resetting the
            model's metrics).

    Returns:
        A :class:`~tfaccel.planning.Plan`; every figure in it is a prediction.

    Raises:
        UsageError: a bad batch size, precision, device key, price or step call.
        PlanError: the model cannot be built or traced.

    Example:
        >>> result = tfaccel.plan(model_fn, batch_size=256, devices=["a100-40gb"])  # doctest: +SKIP
        >>> result.devices[0].max_batch                                             # doctest: +SKIP
    """
    from tfaccel.planning.api import plan as make

    return make(
        model,
        batch_size,
        precision,
        optimizer,
        devices,
        examples=examples,
        prices=prices,
        inventory=inventory,
        data=data,
        step_call=step_call,
    )
