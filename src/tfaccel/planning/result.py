"""What a plan says: memory by part, and per accelerator fit, largest batch, accumulation, time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.units import MISSING, fmt_bytes
from tfaccel.planning.memory import MemoryEstimate
from tfaccel.planning.roofline import StepTime
from tfaccel.planning.targets import Target

__all__ = ["DevicePlan", "Plan"]

_PART_TITLES = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer_slots": "optimizer slots",
    "activations": "activations kept for the backward pass",
    "input_batch": "input batch",
    "mixed_precision_copies": "16-bit copies of the weights",
    "temporaries": "temporaries of the step",
    "state": "optimizer and metric state",
    "allocator_chunks": "allocator chunks (rounding)",
}


@dataclass
class DevicePlan:
    """The plan on one accelerator (every figure a prediction).

    Attributes:
        needed_bytes: memory the requested batch needs, margin included.
        fits: the requested batch fits in the usable memory.
        max_batch: the largest batch that fits (0: none; None: memory unknown).
        accumulation_steps / micro_batch: when the batch does not fit, Keras 3's
            ``gradient_accumulation_steps=k`` at batch ``micro_batch`` gives the same update.
        step_s / epoch_s: predicted time of one (accumulated) update and of an epoch.
        epoch_cost: ``epoch_s`` at ``price_per_hour``.
        rank / reason: the place in the answer to "which accelerator", and why.
    """

    target: Target
    needed_bytes: int
    fits: bool
    max_batch: int | None
    accumulation_steps: int | None
    micro_batch: int | None
    time: StepTime
    step_s: float | None
    epoch_s: float | None
    price_per_hour: float | None = None
    epoch_cost: float | None = None
    rank: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "key": self.target.key,
            "kind": self.target.kind,
            "name": self.target.name,
            "this_machine": self.target.this_machine,
            "memory_bytes": self.target.memory_bytes,
            "usable_bytes": self.target.usable_bytes,
            "needed_bytes": self.needed_bytes,
            "fits": self.fits,
            "max_batch": self.max_batch,
            "max_batch_at_cap": self.max_batch is not None and self.max_batch >= BATCH_CAP,
            "gradient_accumulation_steps": self.accumulation_steps,
            "micro_batch": self.micro_batch,
            "peak_tflops": self.target.peak_tflops,
            "bandwidth_gbs": self.target.bandwidth_gbs,
            "utilisation": self.target.utilisation,
            "utilisation_source": self.target.utilisation_source,
            "step_s": self.step_s,
            "epoch_s": self.epoch_s,
            "compute_s": self.time.compute_s,
            "memory_s": self.time.memory_s,
            "bound": self.time.bound,
            "op_overhead_s": self.time.op_floor_s,
            "step_overhead_s": self.time.step_overhead_s,
            "time_not_predicted": self.time.why,
            "price_per_hour": self.price_per_hour,
            "epoch_cost": self.epoch_cost,
            "reason": self.reason,
            "source": self.target.source,
            "prediction": True,
        }


@dataclass
class Plan:
    """The plan of one model at one batch: memory by part and a ranked list of accelerators.

    Every figure is a prediction (``notes`` says from what); nothing was trained.
    """

    model: str
    batch_size: int
    precision: str
    optimizer: str
    parameters: int
    flops_per_step: int
    bytes_per_step: int
    memory: MemoryEstimate
    devices: list[DevicePlan]
    examples: int | None = None
    notes: list[str] = field(default_factory=list)

    def device(self, key: str) -> DevicePlan:
        """The row of device ``key`` (``a100-40gb``, ``this-cpu``...).

        Raises:
            KeyError: no such device in this plan.
        """
        for row in self.devices:
            if row.target.key == key:
                return row
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        """The ``tfaccel plan --json`` document."""
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "optimizer": self.optimizer,
            "trainable_parameters": self.parameters,
            "flops_per_step": self.flops_per_step,
            "bytes_per_step": self.bytes_per_step,
            "examples_per_epoch": self.examples,
            "memory": self.memory.to_dict(),
            "devices": [row.to_dict() for row in self.devices],
            "notes": list(self.notes),
            "prediction": True,
        }

    def __str__(self) -> str:
        lines = [
            f"Plan for {self.model}: batch {self.batch_size}, {self.precision}, "
            f"{self.optimizer}, {self.parameters:,} trainable parameters (predictions)",
            "",
            f"Memory of one training step at batch {self.batch_size} (simulated peak):",
        ]
        for part, value in self.memory.parts.items():
            if value:
                lines.append(f"  {_PART_TITLES.get(part, part):<42} {_part(value):>10}")
        lines.append(
            f"  {'margin (fragmentation, workspaces)':<42} {_part(self.memory.margin_bytes):>10}"
        )
        lines.append(f"  {'total':<42} {_part(self.memory.total_bytes):>10}")
        lines += ["", "Accelerators, best first:"]
        header = (
            f"  {'#':>2} {'device':<24} {'memory':>9} {'fits':>4} {'max batch':>12} {'step':>9}"
        )
        if self.examples:
            header += f" {'epoch':>9}"
        if any(row.epoch_cost is not None for row in self.devices):
            header += f" {'cost':>8}"
        lines.append(header + "  why")
        for row in self.devices:
            fits = (
                "yes"
                if row.fits
                else f"k={row.accumulation_steps}"
                if row.accumulation_steps
                else "no"
            )
            line = (
                f"  {row.rank:>2} {row.target.key:<24} {_size(row.target.memory_bytes):>9} "
                f"{fits:>4} {_count(row.max_batch):>12} {_seconds(row.step_s):>9}"
            )
            if self.examples:
                line += f" {_seconds(row.epoch_s):>9}"
            if any(r.epoch_cost is not None for r in self.devices):
                line += f" {'' if row.epoch_cost is None else f'{row.epoch_cost:.3g}':>8}"
            lines.append(line + "  " + row.reason)
        lines += [""] + [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _size(value: int | None) -> str:
    return fmt_bytes(value, smallest="MiB")


def _part(value: int | None) -> str:
    """A part of a step's memory: in MiB and up, in KiB below one MiB (a small model's parts
    read 0.0 MiB)."""
    return fmt_bytes(value, smallest="MiB" if (value or 0) >= 2**20 else "KiB")


BATCH_CAP = 2**24
"""The largest batch the plan tries; a row that fits it says so (``>=``)."""


def _count(value: int | None) -> str:
    if value is None:
        return MISSING
    return f">={value:,}" if value >= BATCH_CAP else f"{value:,}"


def _seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    if value < 1e-4:
        return f"{value * 1e6:.1f} us"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    if value < 600:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"
