"""How many blocks of a kernel fit on one streaming multiprocessor (SM), per GPU architecture.

A pure calculation, the one the CUDA Occupancy Calculator and the runtime's
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` make (``cuda_occupancy.h`` in the CUDA
Toolkit): a block is resident on an SM only when the SM has room for all of its warps, all of
its registers and all of its shared memory, and fewer than its maximum number of blocks. The
*theoretical occupancy* is the resident warps over the most the SM can hold; the warps a
kernel keeps resident are what hides memory latency, so a kernel that fits few of them waits.

Per architecture (:data:`ARCHITECTURES`), from the CUDA C++ Programming Guide's table
"Technical Specifications per Compute Capability" and NVIDIA CCCL's
``cuda/__device/arch_traits.h`` (resident warps, blocks and shared memory per SM, the
shared memory the driver reserves per block from compute capability 8.0), and from
``cuda_occupancy.h`` (how registers and shared memory are allocated):

- registers: 64K 32-bit registers per SM and per block, at most 255 per thread; allocated per
  warp in units of 256, in each of the SM's 4 sub-partitions (a warp's registers come from
  one sub-partition, so 16K registers hold ``16384 // per_warp`` warps in each);
- shared memory: at most 48 KiB of static shared memory per block; allocated per block in
  units of 256 bytes (compute capability 7.x) or 128 bytes (8.0 and later), plus 1 KiB the
  driver reserves per block from 8.0 on; an SM offers up to its maximum carve-out (the
  runtime's default when a kernel asks for no preference);
- at most 1024 threads per block on every architecture here.

Example:
    >>> from tfaccel.kernels.occupancy import ARCHITECTURES, occupancy
    >>> result = occupancy(ARCHITECTURES["sm_80"], threads=256, registers=32, shared_bytes=0)
    >>> result.blocks_per_sm, result.occupancy, result.limited_by
    (8, 1.0, 'warps')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfaccel.core.errors import UsageError, argument

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_TARGETS",
    "Architecture",
    "Occupancy",
    "architecture",
    "occupancy",
]

WARP = 32
KIB = 1024


@dataclass(frozen=True)
class Architecture:
    """What one SM of a GPU architecture holds (every GPU of a compute capability alike).

    Attributes:
        target: the ``sm_XY`` name compilers use, e.g. ``"sm_80"``.
        compute_capability: ``(major, minor)``.
        gpus: a few GPUs of this compute capability, for readers.
        max_warps_per_sm: resident warps per SM (resident threads / 32).
        max_blocks_per_sm: resident blocks per SM.
        shared_bytes_per_sm: the most shared memory an SM can give its blocks (the largest
            carve-out of its unified L1/shared memory).
        reserved_shared_bytes_per_block: shared memory the driver keeps per block (1 KiB from
            compute capability 8.0), on top of the kernel's own.
        shared_allocation_bytes: shared memory is given to a block in multiples of this.
        registers_per_sm: 32-bit registers per SM.
        registers_per_block: the most registers one block may hold.
        max_registers_per_thread: the most registers ptxas gives one thread.
        register_allocation_unit: registers are given to a warp in multiples of this.
        sub_partitions: register file partitions (one warp scheduler each).
        max_threads_per_block: threads per block.
        max_static_shared_bytes_per_block: static shared memory (``cuda.shared.array``) per
            block; more needs dynamic shared memory and an opt-in.
    """

    target: str
    compute_capability: tuple[int, int]
    gpus: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_bytes_per_sm: int
    reserved_shared_bytes_per_block: int
    shared_allocation_bytes: int
    registers_per_sm: int = 64 * KIB
    registers_per_block: int = 64 * KIB
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256
    sub_partitions: int = 4
    max_threads_per_block: int = 1024
    max_static_shared_bytes_per_block: int = 48 * KIB

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "compute_capability": f"{self.compute_capability[0]}.{self.compute_capability[1]}",
            "gpus": self.gpus,
            "max_warps_per_sm": self.max_warps_per_sm,
            "max_blocks_per_sm": self.max_blocks_per_sm,
            "shared_bytes_per_sm": self.shared_bytes_per_sm,
            "reserved_shared_bytes_per_block": self.reserved_shared_bytes_per_block,
            "shared_allocation_bytes": self.shared_allocation_bytes,
            "registers_per_sm": self.registers_per_sm,
            "registers_per_block": self.registers_per_block,
            "max_registers_per_thread": self.max_registers_per_thread,
            "register_allocation_unit": self.register_allocation_unit,
            "max_threads_per_block": self.max_threads_per_block,
            "max_static_shared_bytes_per_block": self.max_static_shared_bytes_per_block,
        }


def _arch(cc: tuple[int, int], gpus: str, warps: int, blocks: int, shared_kib: int) -> Architecture:
    major = cc[0]
    return Architecture(
        target=f"sm_{cc[0]}{cc[1]}",
        compute_capability=cc,
        gpus=gpus,
        max_warps_per_sm=warps,
        max_blocks_per_sm=blocks,
        shared_bytes_per_sm=shared_kib * KIB,
        reserved_shared_bytes_per_block=KIB if major >= 8 else 0,
        shared_allocation_bytes=128 if major >= 8 else 256,
    )


ARCHITECTURES: dict[str, Architecture] = {
    a.target: a
    for a in (
        _arch((7, 0), "Volta: V100", 64, 32, 96),
        _arch((7, 5), "Turing: T4, RTX 20", 32, 16, 64),
        _arch((8, 0), "Ampere: A100, A30", 64, 32, 164),
        _arch((8, 6), "Ampere: A10, A40, RTX 30", 48, 16, 100),
        _arch((8, 9), "Ada: L4, L40S, RTX 40", 48, 24, 100),
        _arch((9, 0), "Hopper: H100, H200", 64, 32, 228),
        _arch((10, 0), "Blackwell: B200, GB200", 64, 32, 228),
        _arch((12, 0), "Blackwell: RTX 50, RTX PRO 6000", 48, 24, 100),
    )
}
"""The architectures the occupancy calculation knows, by ``sm_XY`` target."""

DEFAULT_TARGETS: tuple[str, ...] = ("sm_70", "sm_80", "sm_90", "sm_120")
"""Volta, Ampere, Hopper and Blackwell (GeForce): the oldest GPU CUDA 12 builds for, and the
data-centre and desktop generations since."""


def architecture(target: str) -> Architecture:
    """The :class:`Architecture` of ``target``: ``"sm_80"``, ``"80"`` or ``"8.0"``.

    Raises:
        UsageError: a target this table does not hold.
    """
    text = str(target).strip().lower()
    if "." in text:
        major, _, minor = text.partition(".")
        text = f"sm_{major}{minor}"
    elif not text.startswith("sm_"):
        text = "sm_" + text.removeprefix("sm")
    found = ARCHITECTURES.get(text)
    if found is None:
        raise UsageError(
            "unknown GPU target",
            expected="one of " + ", ".join(ARCHITECTURES),
            received=argument("targets", target),
            fix="pick the target of your GPU's compute capability (`tfaccel devices` shows "
            "it; 9.0 is sm_90), e.g. sm_80",
        )
    return found


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel one SM holds, and what stops it holding more.

    Attributes:
        blocks_per_sm: resident blocks per SM (0: one block does not fit, the launch fails).
        active_warps: resident warps per SM.
        occupancy: active_warps / the architecture's max_warps_per_sm, 0 to 1.
        limited_by: the resource that sets blocks_per_sm: ``"warps"``, ``"registers"``,
            ``"shared memory"`` or ``"blocks"`` (the per-SM block limit); the first of these
            when several tie.
        limits: blocks per SM each resource alone would allow.
    """

    blocks_per_sm: int
    active_warps: int
    occupancy: float
    limited_by: str
    limits: dict[str, int]


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(arch: Architecture, threads: int, registers: int, shared_bytes: int) -> Occupancy:
    """The theoretical occupancy of a kernel with these resources, launched in these blocks.

    Args:
        arch: the target architecture.
        threads: threads per block.
        registers: registers per thread (``ptxas -v``'s "Used N registers").
        shared_bytes: static plus dynamic shared memory per block, in bytes.

    Returns:
        :class:`Occupancy`; ``blocks_per_sm`` is 0 when one block does not fit (too many
        threads, registers or shared memory for one block).

    Raises:
        UsageError: threads below 1, or negative registers or shared memory.
    """
    if threads < 1 or registers < 0 or shared_bytes < 0:
        raise UsageError(
            "occupancy needs a positive block size and non-negative resources",
            expected="threads >= 1, registers >= 0, shared_bytes >= 0",
            received=f"threads={threads}, registers={registers}, shared_bytes={shared_bytes}",
            fix="pass the block's thread count and the kernel's resources from ptxas -v",
        )
    warps = -(-threads // WARP)
    limits: dict[str, int] = {}

    limits["warps"] = arch.max_warps_per_sm // warps if threads <= arch.max_threads_per_block else 0

    per_warp = _round_up(registers * WARP, arch.register_allocation_unit)
    # The hardware checks a block's registers as if its warps filled every sub-partition.
    per_block_checked = per_warp * _round_up(warps, arch.sub_partitions)
    if registers > arch.max_registers_per_thread or per_block_checked > arch.registers_per_block:
        limits["registers"] = 0
    elif per_warp == 0:
        limits["registers"] = arch.max_blocks_per_sm
    else:
        warps_per_partition = (arch.registers_per_sm // arch.sub_partitions) // per_warp
        limits["registers"] = warps_per_partition * arch.sub_partitions // warps

    if shared_bytes > arch.max_static_shared_bytes_per_block:
        limits["shared memory"] = 0
    else:
        per_block = _round_up(
            shared_bytes + arch.reserved_shared_bytes_per_block, arch.shared_allocation_bytes
        )
        limits["shared memory"] = (
            arch.shared_bytes_per_sm // per_block if per_block else arch.max_blocks_per_sm
        )

    limits["blocks"] = arch.max_blocks_per_sm
    limited_by = min(limits, key=lambda name: limits[name])  # the first of equals
    blocks = limits[limited_by]
    return Occupancy(
        blocks_per_sm=blocks,
        active_warps=blocks * warps,
        occupancy=blocks * warps / arch.max_warps_per_sm,
        limited_by=limited_by,
        limits=limits,
    )
