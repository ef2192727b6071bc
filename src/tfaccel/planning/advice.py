"""What to do when a batch does not fit: the plan's answer to an out-of-memory error.

:func:`memory_advice` traces the model's training step once and answers, for one device of a
known usable size: what the batch needs, the largest batch that fits, and the accumulation
that keeps the same update (Keras 3's ``gradient_accumulation_steps``). :func:`oom_finding`
turns it into the ``oom`` finding that ``doctor --log --model`` and ``profile`` print:
:func:`find_log_oom` and :func:`answer_log_oom` answer the out-of-memory error of a pasted log
(the batch from the failing tensor's shape, the device memory from the allocator's limit or a
device of the spec database), :func:`answer_oom_error` the one a training run raised here.

Example:
    >>> advice = memory_advice(model_fn, 512, usable_bytes=8 * 2**30)   # doctest: +SKIP
    >>> advice.sentence()                                                # doctest: +SKIP
    'this model at batch 512 needs 11.2 GiB, the device has 8.0 GiB: batch <= 352, or ...'
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel import inventory
from tfaccel.core.errors import UsageError
from tfaccel.core.findings import Finding
from tfaccel.diagnosis.log.memory import oom_context
from tfaccel.planning.api import _check_batch, _check_precision, _prepare, fit_batch, traced
from tfaccel.planning.memory import GPU_BFC_RULES, AllocatorRules, simulate
from tfaccel.planning.result import _size
from tfaccel.planning.targets import targets, training_device
from tfaccel.planning.trace import StepGraph

if TYPE_CHECKING:
    from tfaccel.diagnosis.log.match import LogReport
    from tfaccel.diagnosis.log.memory import OomContext

__all__ = [
    "LogOom",
    "MemoryAdvice",
    "advice_for_step",
    "answer_log_oom",
    "answer_oom_error",
    "find_log_oom",
    "memory_advice",
    "oom_finding",
]


@dataclass(frozen=True)
class MemoryAdvice:
    """The plan's answer for one batch on one device (every figure a prediction).

    Attributes:
        model: the model's name.
        batch_size: the batch asked about.
        needed_bytes: memory that batch needs, margin included.
        usable_bytes: what the device's allocator can hand out.
        device: the device, in words (``the GPU (from the log: Limit 10,567,748,608)``).
        max_batch: the largest batch that fits (0: not even one example).
        accumulation_steps / micro_batch: ``gradient_accumulation_steps=k`` at batch
            ``micro_batch`` gives the same update as ``batch_size``; None when none divides it.
        precision: the policy the step was traced with.
    """

    model: str
    batch_size: int
    needed_bytes: int
    usable_bytes: int
    device: str
    max_batch: int
    accumulation_steps: int | None
    micro_batch: int | None
    precision: str

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.usable_bytes

    def sentence(self) -> str:
        """``this model at batch B needs X GiB, the device has Y: batch <= B' or accumulate k``."""
        head = (
            f"{self.model} at batch {self.batch_size} needs {_size(self.needed_bytes)} "
            f"({self.precision}), {self.device} has {_size(self.usable_bytes)}"
        )
        if self.fits:
            return head + f": it fits (up to batch {self.max_batch})"
        return head + ": " + self.remedy()

    def remedy(self) -> str:
        """``batch <= B', or batch b with gradient_accumulation_steps=k`` (or why neither)."""
        if self.max_batch < 1:
            return "not even batch 1 fits: a smaller model, mixed precision, or a larger device"
        text = f"batch <= {self.max_batch}"
        if self.accumulation_steps:
            text += (
                f", or batch {self.micro_batch} with gradient_accumulation_steps="
                f"{self.accumulation_steps} (the same update as batch {self.batch_size})"
            )
        return text

    def fix(self) -> str:
        """The change to make, as code."""
        if self.max_batch < 1:
            return (
                "keras.mixed_precision.set_global_policy('mixed_float16') halves activations; "
                "else a smaller model or a device with more memory (tfaccel plan --device ...)"
            )
        if self.accumulation_steps:
            return (
                f"model.compile(optimizer=keras.optimizers.Adam(gradient_accumulation_steps="
                f"{self.accumulation_steps}), ...) and model.fit(..., batch_size="
                f"{self.micro_batch}) (keep your optimizer: every Keras 3 optimizer takes "
                f"gradient_accumulation_steps); or model.fit(..., batch_size={self.max_batch})"
            )
        return f"model.fit(..., batch_size={self.max_batch})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "needed_bytes": self.needed_bytes,
            "usable_bytes": self.usable_bytes,
            "device": self.device,
            "fits": self.fits,
            "max_batch": self.max_batch,
            "gradient_accumulation_steps": self.accumulation_steps,
            "micro_batch": self.micro_batch,
            "precision": self.precision,
            "prediction": True,
        }


def advice_for_step(
    step: StepGraph,
    batch_size: int,
    usable_bytes: int,
    *,
    device: str = "the device",
    model_name: str = "this model",
    rules: AllocatorRules = GPU_BFC_RULES,
) -> MemoryAdvice:
    """:class:`MemoryAdvice` from a traced step (pure: no TensorFlow)."""

    @functools.cache
    def total(batch: int) -> int:
        return simulate(step, batch, rules=rules).total_bytes

    need, largest, accumulation = fit_batch(total, batch_size, usable_bytes)
    return MemoryAdvice(
        model=model_name,
        batch_size=batch_size,
        needed_bytes=need,
        usable_bytes=usable_bytes,
        device=device,
        max_batch=largest,
        accumulation_steps=accumulation,
        micro_batch=batch_size // accumulation if accumulation else None,
        precision=step.policy,
    )


def memory_advice(
    model: Any,
    batch_size: int,
    usable_bytes: int,
    *,
    device: str = "the device",
    precision: str | None = None,
    optimizer: Any = None,
    rules: AllocatorRules = GPU_BFC_RULES,
) -> MemoryAdvice:
    """Trace ``model`` (a Keras model or a ``model_fn``) once and advise for ``batch_size``.

    Raises:
        UsageError: a bad batch size or precision.
        PlanError: the model cannot be built or traced.
    """
    _check_batch(batch_size)
    _check_precision(precision)
    built, _ = _prepare(model, precision, optimizer)
    step = traced(built, batch_size)
    return advice_for_step(
        step,
        batch_size,
        usable_bytes,
        device=device,
        model_name=f"model {getattr(built, 'name', 'model')!r}",
        rules=rules,
    )


def oom_finding(
    advice: MemoryAdvice, *, evidence: list[str] | None = None, source: str = "profile"
) -> Finding:
    """The ``oom`` finding that carries the plan's answer (status ``fail``)."""
    lines = [*(evidence or []), "plan (a prediction): " + advice.sentence()]
    return Finding(
        "oom",
        "fail",
        f"Out of memory at batch {advice.batch_size}: {advice.remedy()}",
        lines,
        advice.fix(),
        source=source,
        numbers={
            "batch_size": advice.batch_size,
            "needed_bytes": advice.needed_bytes,
            "usable_bytes": advice.usable_bytes,
            "max_batch": advice.max_batch,
            "gradient_accumulation_steps": advice.accumulation_steps,
            "micro_batch": advice.micro_batch,
        },
    )


# --- the out-of-memory error of a pasted log (``tfaccel doctor --log --model``) ----------------


@dataclass(frozen=True)
class LogOom:
    """A log's out-of-memory error, with the batch and the device memory to plan it for.

    Attributes:
        index: where the ``oom`` cause is in the log report's ``causes``.
        batch: the batch that ran out of memory (given, or read from the failing tensor).
        usable_bytes / device: the device's usable memory and the words for it.
        evidence: the cause's evidence, with how the batch was guessed when it was.
    """

    index: int
    batch: int
    usable_bytes: int
    device: str
    evidence: list[str]


def find_log_oom(
    log_report: LogReport,
    text: str,
    *,
    model: str,
    batch: int | None = None,
    device_key: str | None = None,
    log_path: str = "FILE",
    own_batch: Callable[[], tuple[int | None, str]] | None = None,
) -> LogOom | None:
    """The out-of-memory error of ``log_report`` (read from ``text``) to plan ``model`` for.

    The batch is ``batch`` when given, else the model's own (``own_batch``, called only once
    the log shows an out-of-memory error and the device memory is known: a training script's
    batch, and how it was learned), else the first dimension of the tensor that failed.
    None when the log shows no out-of-memory error: a note then says no plan was made.

    Raises:
        UsageError: the batch is neither given nor known, the device memory is neither
            given (``device_key``) nor in the log, or ``device_key`` is unknown.
    """
    index = next((i for i, c in enumerate(log_report.causes) if c.id == "oom"), None)
    if index is None:
        log_report.notes.append(
            f"--model {model}: the log shows no out-of-memory error, so no plan was made"
        )
        return None
    found = log_report.causes[index]
    context = oom_context(text)
    evidence = list(found.evidence)
    guessed = batch
    if guessed is None and context.batch_guess is None and own_batch is None:
        raise UsageError(
            "The batch that ran out of memory is not in the log",
            expected="--batch N (the batch size the training used)",
            received="a log without an 'OOM when allocating tensor with shape[...]' line",
            fix=f"add --batch N, e.g. tfaccel doctor --log {log_path} --model {model} --batch 256",
        )
    usable, device = _device_memory(device_key, context)
    if guessed is None and own_batch is not None:
        guessed, how = own_batch()
        if guessed is not None:
            evidence.append(f"batch {guessed}: {how} (pass --batch if the batch was another)")
    if guessed is None and context.batch_guess is not None:
        guessed = context.batch_guess
        evidence.append(
            f"batch {guessed}: the first dimension of the tensor that did not fit, "
            f"shape {list(context.shape or ())} (pass --batch if the batch was another)"
        )
    if guessed is None:
        raise UsageError(
            "The batch that ran out of memory is neither in the log nor readable from the model",
            expected="--batch N (the batch size the training used)",
            received="a log without an 'OOM when allocating tensor with shape[...]' line, and "
            "training data without a batch dimension",
            fix=f"add --batch N, e.g. tfaccel doctor --log {log_path} --model {model} --batch 256",
        )
    return LogOom(index, guessed, usable, device, evidence)


def answer_log_oom(
    log_report: LogReport, oom: LogOom, model_fn: Any, *, optimizer: Any = None
) -> None:
    """Replace the log's ``oom`` finding with one that carries the plan's answer for
    ``model_fn`` (a ``model_fn`` or a Keras model, with ``optimizer`` when it is not compiled;
    traced here: this imports TensorFlow)."""
    found = log_report.causes[oom.index]
    advice = memory_advice(
        model_fn, oom.batch, oom.usable_bytes, device=oom.device, optimizer=optimizer
    )
    answer = oom_finding(advice, evidence=oom.evidence, source=found.source)
    if advice.fits:
        # The plan says it fits: the answer is not a smaller batch, so the log's fix stays.
        answer = dataclasses.replace(
            answer,
            title=found.title,
            fix=found.fix,
            evidence=[
                *answer.evidence,
                "the plan predicts this batch fits, so the memory went elsewhere: other "
                "processes on the GPU (nvidia-smi), an input or model larger than --model's, "
                "or fragmentation",
            ],
        )
    log_report.causes[oom.index] = dataclasses.replace(
        answer,
        status=found.status,
        numbers={**found.numbers, **answer.numbers},
    )


def _device_memory(key: str | None, context: OomContext) -> tuple[int, str]:
    """Usable bytes and the words for them: the device ``key``, else the log's allocator
    limit."""
    if key is not None:
        target = targets("float32", [key])[0]
        if target.usable_bytes:
            return target.usable_bytes, f"{target.name} (usable, from the spec database)"
    if context.usable_bytes:
        return context.usable_bytes, f"the device (the log: {context.usable_from})"
    raise UsageError(
        "The log does not say how much memory the device had",
        expected="a log with the allocator's 'Limit:' line or 'Created device ... with N MB "
        "memory', or --device KEY",
        received="neither",
        fix="add --device KEY (tfaccel plan --list-devices), e.g. --device rtx-3090",
    )


# --- the out-of-memory error of a training run (``tfaccel profile --model``) -------------------


def answer_oom_error(
    exc: BaseException, model_fn: Any, batch_size: int, precision: str | None
) -> Finding:
    """The ``oom`` finding for ``exc``, raised while training ``model_fn``'s model at
    ``batch_size`` on the device Keras trains on here.

    When the plan cannot be made, the finding says why and keeps the general advice.
    """
    message = str(exc).strip().splitlines()
    seen = f"{type(exc).__name__}: {message[0] if message else ''}"[:300]
    device = training_device(inventory.current())
    if device.usable_bytes is not None:
        try:
            advice = memory_advice(
                model_fn,
                batch_size,
                device.usable_bytes,
                device=device.words,
                precision=precision,
                rules=device.rules,
            )
        except Exception as failed:  # the run's own error stays the news
            why = f"no plan: {type(failed).__name__}: {failed}"
        else:
            return oom_finding(advice, evidence=[seen], source="profile")
    else:
        why = f"no plan: {device.words}"
    return Finding(
        "oom",
        "fail",
        f"Out of memory at batch {batch_size}",
        [seen, why],
        "a smaller batch (tfaccel plan shows the largest that fits), "
        "or keras.mixed_precision.set_global_policy('mixed_float16')",
        source="profile",
        numbers={"batch_size": batch_size},
    )
