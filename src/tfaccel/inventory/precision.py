"""Which Keras precision policies run fast on some devices, and why: the one rule-set.

``setup(precision="auto")`` applies :attr:`Precisions.best`; ``tfaccel tune`` searches
:attr:`Precisions.fast`; an explicit policy that is slow here gets :func:`precision_warning`.

* float16 runs on tensor cores from compute capability 7.0 (Volta) on;
* bfloat16 runs on GPU tensor cores from 8.0 (Ampere) on, on every TPU, and on CPUs with
  AVX512_BF16 or AMX (without them it is emulated, slower than float32);
* a GPU whose compute capability is unknown counts as too old.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tfaccel.inventory.gpus import GpuFacts

__all__ = [
    "BF16_CPU_FLAGS",
    "BF16_MIN_CC",
    "POLICY_DTYPE",
    "PRECISIONS",
    "TENSOR_CORE_MIN_CC",
    "Precisions",
    "fast_precisions",
    "precision_warning",
]

POLICY_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}
"""Each Keras precision policy tfaccel knows, simplest first, and the dtype it computes in."""

PRECISIONS: tuple[str, ...] = tuple(POLICY_DTYPE)
"""The Keras precision policy names, simplest first: float32, mixed_bfloat16, mixed_float16."""

TENSOR_CORE_MIN_CC = 7.0  # float16 tensor cores: Volta (7.0) and newer
BF16_MIN_CC = 8.0  # bfloat16 tensor cores: Ampere (8.0) and newer
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # CPU instructions that compute in bfloat16

_NO_BF16_CPU = "/".join(BF16_CPU_FLAGS)


@dataclass(frozen=True)
class Precisions:
    """The precision policies that run fast on some devices.

    Attributes:
        fast: the policies worth using, simplest first: float32, then mixed_bfloat16 and
            mixed_float16 where the devices compute them natively.
        best: the policy ``setup(precision="auto")`` applies when nothing was measured.
        reason: why ``best``, in one sentence.
    """

    fast: tuple[str, ...]
    best: str
    reason: str


def fast_precisions(
    gpus: Sequence[GpuFacts], cpu_flags: Iterable[str] = (), *, tpu: bool = False
) -> Precisions:
    """The precisions that run fast on ``gpus``, or, without a GPU, on a TPU or this CPU.

    Args:
        gpus: the GPUs the model trains on (all must compute a policy fast for it to count).
        cpu_flags: the CPU's ISA flags as /proc/cpuinfo spells them.
        tpu: a TPU is attached.

    Example:
        >>> fast_precisions([GpuFacts(0, compute_capability="8.0")]).fast
        ('float32', 'mixed_bfloat16', 'mixed_float16')
        >>> fast_precisions([], {"avx512f"}).best
        'float32'
    """
    if gpus:
        lowest = min(g.capability or 0.0 for g in gpus)
        fast: tuple[str, ...] = ("float32",)
        fast += ("mixed_bfloat16",) if lowest >= BF16_MIN_CC else ()
        fast += ("mixed_float16",) if lowest >= TENSOR_CORE_MIN_CC else ()
        slow = [g for g in gpus if (g.capability or 0.0) < TENSOR_CORE_MIN_CC]
        if not slow:
            ccs = ", ".join(f"{g.key} {g.compute_capability}" for g in gpus)
            reason = (
                f"compute capability >= {TENSOR_CORE_MIN_CC:.1f} ({ccs}): tensor cores for float16"
            )
            return Precisions(fast, "mixed_float16", reason)
        ccs = ", ".join(f"{g.key} {g.compute_capability or 'unknown'}" for g in slow)
        reason = (
            f"compute capability below {TENSOR_CORE_MIN_CC:.1f} or unknown ({ccs}): no tensor cores"
        )
        return Precisions(fast, "float32", reason)
    bf16 = ("float32", "mixed_bfloat16")
    if tpu:
        return Precisions(bf16, "mixed_bfloat16", "a TPU is attached: TPUs compute in bfloat16")
    have = set(cpu_flags)
    flags = [f for f in BF16_CPU_FLAGS if f in have]
    if flags:
        reason = f"this CPU has {', '.join(flags)}: bfloat16 matrix instructions"
        return Precisions(bf16, "mixed_bfloat16", reason)
    return Precisions(("float32",), "float32", f"no GPU, no TPU, and the CPU lacks {_NO_BF16_CPU}")


def precision_warning(
    policy: str, gpus: Sequence[GpuFacts], cpu_flags: Iterable[str] = (), *, tpu: bool = False
) -> str | None:
    """Why ``policy`` is slower than float32 on these devices, None when it is not known to be.

    Example:
        >>> precision_warning("mixed_float16", [])
        'mixed_float16 without a GPU: float16 math on a CPU is much slower than float32'
    """
    if policy == "mixed_float16" and not gpus:
        return "mixed_float16 without a GPU: float16 math on a CPU is much slower than float32"
    if policy == "mixed_float16":
        old = [g.key for g in gpus if (g.capability or 0.0) < TENSOR_CORE_MIN_CC]
        if old:
            return (
                f"mixed_float16 on {', '.join(old)} (compute capability < "
                f"{TENSOR_CORE_MIN_CC:.1f}): no speed-up"
            )
    bf16_cpu = not set(BF16_CPU_FLAGS).isdisjoint(cpu_flags)
    if policy == "mixed_bfloat16" and not gpus and not tpu and not bf16_cpu:
        return f"mixed_bfloat16 on a CPU without {_NO_BF16_CPU}: emulated, slower"
    return None
