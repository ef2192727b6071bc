"""What to do when a batch does not fit: the plan's answer to an out-of-memory error.

:func:`memory_advice` traces the model's training step once and answers, for one device of a
known usable size: what the batch needs, the largest batch that fits, and the accumulation
that keeps the same update (Keras 3's ``gradient_accumulation_steps``). :func:`oom_finding`
turns it into the ``oom`` finding that ``doctor --log --model`` and ``profile`` print.

Example:
    >>> advice = memory_advice(model_fn, 512, usable_bytes=8 * 2**30)   # doctest: +SKIP
    >>> advice.sentence()                                                # doctest: +SKIP
    'this model at batch 512 needs 11.2 GiB, the device has 8.0 GiB: batch <= 352, or ...'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tfaccel.core.findings import Finding
from tfaccel.planning.memory import GPU_BFC_RULES, AllocatorRules, simulate
from tfaccel.planning.result import _size
from tfaccel.planning.trace import StepGraph

__all__ = ["MemoryAdvice", "advice_for_step", "memory_advice", "oom_finding"]


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
    from tfaccel.planning.api import fit_batch

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
    from tfaccel.planning.api import _check_batch, _check_precision, _prepare, traced

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
