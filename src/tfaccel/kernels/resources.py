"""What each kernel asks of a GPU, read from its compiled code: no GPU needed.

Every kernel of :mod:`tfaccel.kernels`, in every dtype and block or tile size the host code
launches (:func:`kernel_specs`), is compiled for each target architecture the way numba-cuda
compiles it for a GPU: NVVM turns it into PTX for the target (``numba.cuda.compile_ptx``),
then ``ptxas``, the CUDA assembler, turns the PTX into a cubin (the GPU's machine code) and
reports, with ``-v``, what one thread and one block need:

- **registers** per thread (at most 255; past that, or past a cap, values *spill*);
- **spill stores / loads**: bytes a thread moves to and from local memory because its values
  did not fit in registers; local memory is as slow as global memory, so a spill in a loop
  costs a memory round trip where a register costs nothing;
- **static shared memory** per block (``cuda.shared.array``; at most 48 KiB);

and :func:`tfaccel.kernels.occupancy.occupancy` turns them, with the block size, into the
blocks and warps one SM can hold (the *theoretical occupancy*). :func:`check_resources` holds
the rows against the targets' limits and an occupancy floor per kernel.

The compiler comes from pip: ``pip install 'tfaccel[kernels]'`` brings numba-cuda and the
CUDA 12 compiler wheels (``nvidia-cuda-nvcc-cu12``: NVVM and ptxas). CUDA 12 still builds for
``sm_70`` (Volta); CUDA 13's compiler no longer does.

From the command line: ``python benchmarks/bench_kernels.py --resources [--targets ...]
[--json]``.

Example:
    >>> from tfaccel.kernels import resources
    >>> rows = resources.kernel_resources(targets=("sm_80", "sm_90"))  # about 12 s
    >>> violations = resources.check_resources(rows)
    >>> print(resources.render_text(rows, violations))
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tfaccel.core.checks import in_range, is_real
from tfaccel.core.errors import UsageError, argument
from tfaccel.core.records import Record
from tfaccel.kernels import _launch
from tfaccel.kernels._checks import FLOAT_DTYPES, SUM_DTYPES
from tfaccel.kernels._errors import COMPILER_FIX, KernelCompilerError
from tfaccel.kernels.bench import DEFAULT_TILES
from tfaccel.kernels.occupancy import (
    ARCHITECTURES,
    DEFAULT_TARGETS,
    Architecture,
    architecture,
    occupancy,
)

__all__ = [
    "DEFAULT_OCCUPANCY_FLOOR",
    "DEFAULT_TARGETS",
    "OCCUPANCY_FLOORS",
    "KernelSpec",
    "PtxasInfo",
    "ResourceRow",
    "Toolchain",
    "Violation",
    "check_resources",
    "floor_lookup",
    "kernel_resources",
    "kernel_specs",
    "parse_ptxas_info",
    "render_text",
    "report_dict",
    "targets_from",
    "toolchain",
]

DEFAULT_OCCUPANCY_FLOOR = 0.5
# Every kernel here is limited by memory traffic rather than arithmetic (even the tiled matmul,
# one multiply-add per two shared-memory reads), so it needs many resident warps to hide the
# latency of its loads: at least half of the SM's warp slots, on every target.
# The register-tiled matmul (per_thread > 1) is the exception: each thread's per_thread^2
# independent multiply-adds hide the latency that other kernels hide with resident warps, and
# its registers hold it to a quarter of the slots (float32; an eighth for float64's 8x8) by
# design. On an H200 it ran 2.7x the one-output matmul at 100% occupancy (docs/kernels.md).
REGISTER_TILED_FLOOR = 0.125
OCCUPANCY_FLOORS: Mapping[str, float] = {
    "vector_add": DEFAULT_OCCUPANCY_FLOOR,
    "reduce_sum": DEFAULT_OCCUPANCY_FLOOR,
    "matmul": DEFAULT_OCCUPANCY_FLOOR,
    "matmul per_thread": REGISTER_TILED_FLOOR,
    "bias_relu": DEFAULT_OCCUPANCY_FLOOR,
}

REDUCE_BLOCKS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)  # every block reduce_sum launches
PTXAS_TIMEOUT_S = 300
ELF_MAGIC = b"\x7fELF"


# --------------------------------------------------------------------------------------
# What to compile


@dataclass(frozen=True)
class KernelSpec:
    """One kernel in one variant: what to compile, and the block it is launched with.

    Attributes:
        kernel: the public operation, e.g. ``"matmul"``.
        variant: what distinguishes this build, e.g. ``"float32 tile=16"``.
        function: the kernel's Python function (a ``cuda.jit`` kernel's ``py_func``).
        signature: its argument types as numba spells them, e.g.
            ``"(float32[:, ::1], float32[:, ::1], float32[:, ::1])"``.
        block_threads: threads per block at launch.
        one_block: True for a build the host only launches as a single block (reduce_sum's
            short inputs and its second pass): one block per launch leaves the other SMs
            idle whatever the occupancy, so the occupancy floor does not apply to it.
    """

    kernel: str
    variant: str
    function: Callable[..., Any]
    signature: str
    block_threads: int
    one_block: bool = False


def _cuda_kernels() -> ModuleType:
    """:mod:`tfaccel.kernels.cuda`, with numba-cuda's compiler (not the simulator) behind it."""
    try:
        from tfaccel.kernels import cuda as kcuda  # local: imports numba, an optional heavy package
    except ImportError as exc:
        raise KernelCompilerError(
            "compiling the kernels needs numba and numba-cuda, which are not installed",
            expected="importable numba and numba-cuda, with NVVM and ptxas",
            received=f"ImportError: {exc}",
            fix=COMPILER_FIX,
        ) from exc
    if kcuda.is_simulator():
        raise KernelCompilerError(
            "the kernels cannot be compiled for a GPU while numba-cuda's CUDA simulator is on: "
            "the simulator runs the Python source and has no compiler",
            expected="numba.cuda imported without NUMBA_ENABLE_CUDASIM",
            received="NUMBA_ENABLE_CUDASIM=1 (numba reads it once, when numba.cuda is imported)",
            fix="run it in a process without the variable, e.g. "
            "`env -u NUMBA_ENABLE_CUDASIM python benchmarks/bench_kernels.py --resources`",
        )
    return kcuda


def kernel_specs() -> list[KernelSpec]:
    """Every kernel of :mod:`tfaccel.kernels` in every variant its host code launches by
    default (the register-tiled ``matmul`` at tile 16 and ``per_thread=8``, the fastest
    measured, stands for its other ``per_thread`` and tiles).

    Host arrays reach the kernels C-contiguous, so the operands are typed contiguous
    (``[::1]``); ``bias_relu`` also in its strided build (device arrays with any strides).

    Raises:
        KernelCompilerError: numba-cuda is missing, or the CUDA simulator is on.
    """
    kcuda = _cuda_kernels()
    specs: list[KernelSpec] = []
    for dtype in SUM_DTYPES:
        vector = f"{dtype}[::1]"
        specs.append(
            KernelSpec(
                "vector_add",
                str(dtype),
                kcuda.vector_add_kernel.py_func,
                f"({vector}, {vector}, {vector})",
                _launch.VECTOR_THREADS,
            )
        )
    for dtype in SUM_DTYPES:
        vector = f"{dtype}[::1]"
        for threads in REDUCE_BLOCKS:
            specs.append(
                KernelSpec(
                    "reduce_sum",
                    f"{dtype} block={threads}",
                    kcuda.reduce_kernel(threads, dtype).py_func,
                    f"({vector}, {vector})",
                    threads,
                    one_block=threads != _launch.REDUCE_THREADS,
                )
            )
    for dtype in FLOAT_DTYPES:
        matrix = f"{dtype}[:, ::1]"
        for tile in DEFAULT_TILES:
            specs.append(
                KernelSpec(
                    "matmul",
                    f"{dtype} tile={tile}",
                    kcuda.matmul_kernel(tile, dtype).py_func,
                    f"({matrix}, {matrix}, {matrix})",
                    tile * tile,
                )
            )
        specs.append(
            KernelSpec(
                "matmul per_thread",
                f"{dtype} tile=16 per_thread=8",
                kcuda.matmul_kernel(16, dtype, 8).py_func,
                f"({matrix}, {matrix}, {matrix})",
                256,
            )
        )
    block = _launch.ELEMENTWISE_BLOCK[0] * _launch.ELEMENTWISE_BLOCK[1]
    for dtype in FLOAT_DTYPES:
        layouts = {
            "contiguous": f"({dtype}[:, ::1], {dtype}[::1], {dtype}[:, ::1])",
            "strided": f"({dtype}[:, :], {dtype}[:], {dtype}[:, :])",
        }
        for layout, signature in layouts.items():
            specs.append(
                KernelSpec(
                    "bias_relu",
                    f"{dtype} {layout}",
                    kcuda.bias_relu_kernel(dtype).py_func,
                    signature,
                    block,
                )
            )
    return specs


# --------------------------------------------------------------------------------------
# The compiler


@dataclass(frozen=True)
class Toolchain:
    """The assembler that builds the cubins (NVVM is numba-cuda's, found by numba-cuda).

    Attributes:
        ptxas: path of the ptxas executable.
        ptxas_version: its version, e.g. ``"12.9.86"``.
    """

    ptxas: str
    ptxas_version: str

    def to_dict(self) -> dict[str, Any]:
        return {"ptxas": self.ptxas, "ptxas_version": self.ptxas_version}


def _find_ptxas() -> str | None:
    """ptxas from NVIDIA's wheels, a conda environment or a CUDA toolkit, else from PATH."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:  # a cuda-pathfinder without binary lookup
        return shutil.which("ptxas")
    found: str | None = find_nvidia_binary_utility("ptxas")
    return found or shutil.which("ptxas")


def toolchain() -> Toolchain:
    """Find ptxas, and check that numba-cuda can compile: not the simulator, NVVM loads.

    Raises:
        KernelCompilerError: numba-cuda, NVVM or ptxas is missing, ptxas does not run, or the
            CUDA simulator is on.
    """
    _cuda_kernels()
    from numba.cuda.cudadrv import nvvm

    try:
        nvvm.NVVM()
    except _nvvm_missing_errors() as exc:
        raise _nvvm_missing(exc) from exc
    path = _find_ptxas()
    if path is None:
        raise KernelCompilerError(
            "ptxas, the CUDA assembler that turns PTX into a cubin and reports registers and "
            "spills, was not found",
            expected="ptxas from the nvidia-cuda-nvcc-cu12 wheel, a conda environment or a "
            "CUDA toolkit",
            received="no ptxas in NVIDIA's wheels, $CONDA_PREFIX, $CUDA_HOME or $PATH",
            fix=COMPILER_FIX,
        )
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        done = subprocess.CompletedProcess([path], 127, "", str(exc))
    version = re.search(r"\bV(\d+\.\d+(?:\.\d+)?)", done.stdout)
    if done.returncode != 0 or version is None:
        raise KernelCompilerError(
            f"ptxas at {path} does not run",
            expected="`ptxas --version` to print its version",
            received=f"exit status {done.returncode}: {(done.stdout + done.stderr).strip()[:300]}",
            fix=COMPILER_FIX,
        )
    return Toolchain(ptxas=path, ptxas_version=version.group(1))


def _nvvm_missing_errors() -> tuple[type[BaseException], ...]:
    """The errors numba-cuda raises when it cannot load NVVM."""
    from numba.cuda.cudadrv.error import NvvmSupportError

    found: list[type[BaseException]] = [NvvmSupportError]
    try:
        from cuda.pathfinder import DynamicLibNotFoundError

        found.append(DynamicLibNotFoundError)
    except ImportError:
        pass  # an older cuda-python raises NvvmSupportError alone
    return tuple(found)


def _nvvm_missing(exc: BaseException) -> KernelCompilerError:
    return KernelCompilerError(
        "NVVM (libnvvm), the compiler numba-cuda uses to turn a kernel into PTX, cannot be loaded",
        expected="libnvvm from the nvidia-cuda-nvcc-cu12 wheel or a CUDA toolkit",
        received=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
        fix=COMPILER_FIX,
    )


def _ptx(spec: KernelSpec, arch: Architecture) -> str:
    """NVVM's PTX of ``spec`` for ``arch``."""
    from numba import cuda
    from numba.cuda.cudadrv.error import NvvmError

    try:
        ptx, _ = cuda.compile_ptx(spec.function, spec.signature, cc=arch.compute_capability)
    except _nvvm_missing_errors() as exc:
        raise _nvvm_missing(exc) from exc
    except NvvmError as exc:
        raise KernelCompilerError(
            f"NVVM could not compile {spec.kernel} ({spec.variant}) for {arch.target}",
            expected=f"an NVVM that builds for compute capability "
            f"{arch.compute_capability[0]}.{arch.compute_capability[1]}",
            received=" ".join(str(exc).split())[:400],
            fix=f"leave {arch.target} out of the targets, or {COMPILER_FIX}",
        ) from exc
    return str(ptx)


@dataclass(frozen=True)
class PtxasInfo:
    """What ``ptxas -v`` reports for one entry function (one kernel).

    Attributes:
        function: the entry function's (mangled) name.
        target: the ``sm_XY`` it was assembled for.
        registers: registers per thread.
        shared_bytes: static shared memory per block.
        stack_bytes: the stack frame per thread (local memory).
        spill_store_bytes: bytes a thread stores to local memory for want of registers.
        spill_load_bytes: bytes it loads back.
        barriers: named barriers used (``syncthreads`` uses one).
    """

    function: str
    target: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else 0


def parse_ptxas_info(text: str) -> list[PtxasInfo]:
    """The entry functions of a ``ptxas -v`` log, in order.

    ptxas prints, per entry function::

        ptxas info    : Compiling entry function 'NAME' for 'sm_80'
        ptxas info    : Function properties for NAME
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, 568 bytes cmem[0]

    (no ``smem`` when the kernel has no shared memory; no ``barriers`` before CUDA 12).

    Raises:
        KernelCompilerError: an entry without its "Used N registers" line.
    """
    entries = list(_ENTRY.finditer(text))
    found: list[PtxasInfo] = []
    for n, entry in enumerate(entries):
        end = entries[n + 1].start() if n + 1 < len(entries) else len(text)
        block = text[entry.start() : end]
        name, target = entry.group(1), entry.group(2)
        used = _USED.search(block)
        if used is None:
            raise KernelCompilerError(
                "ptxas -v did not report the registers of a kernel",
                expected="a line 'Used N registers' after 'Compiling entry function'",
                received=block.strip()[-400:],
                fix="check that ptxas ran with -v; report the ptxas version if it did",
            )
        properties = block
        marker = block.find(f"Function properties for {name}")
        if marker >= 0:
            properties = block[marker:]
        found.append(
            PtxasInfo(
                function=name,
                target=target,
                registers=int(used.group(1)),
                shared_bytes=_number(r"(\d+) bytes smem", block),
                stack_bytes=_number(r"(\d+) bytes stack frame", properties),
                spill_store_bytes=_number(r"(\d+) bytes spill stores", properties),
                spill_load_bytes=_number(r"(\d+) bytes spill loads", properties),
                barriers=_number(r"used (\d+) barriers", block),
            )
        )
    return found


def _ptxas_fix(log: str, arch: Architecture) -> str:
    if "is not defined for option 'gpu-name'" in log:
        return (
            f"this ptxas does not build for {arch.target} (CUDA 13 dropped Volta, sm_70 and "
            f"sm_72): leave {arch.target} out of the targets, or use CUDA 12's: {COMPILER_FIX}"
        )
    if "Unsupported .version" in log:
        return f"this ptxas is older than NVVM: install both from one CUDA release, {COMPILER_FIX}"
    return f"report the ptxas message with the ptxas version; {COMPILER_FIX}"


def _assemble(
    chain: Toolchain, spec: KernelSpec, arch: Architecture, ptx: str, path: Path
) -> tuple[PtxasInfo, int]:
    """``ptxas -v`` on ``ptx`` for ``arch``: what it reports, and the cubin's size."""
    path.write_text(ptx)
    cubin = path.with_suffix(".cubin")
    command = [chain.ptxas, "-v", f"-arch={arch.target}", str(path), "-o", str(cubin)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PTXAS_TIMEOUT_S)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        errors = [line for line in log.splitlines() if "error" in line or "fatal" in line]
        raise KernelCompilerError(
            f"ptxas {chain.ptxas_version} could not assemble {spec.kernel} ({spec.variant}) "
            f"for {arch.target}",
            expected=f"a cubin for {arch.target}",
            received=" ".join(errors or log.splitlines()[-3:])[:400],
            fix=_ptxas_fix(log, arch),
        )
    entries = parse_ptxas_info(log)
    binary = cubin.read_bytes() if cubin.exists() else b""
    if len(entries) != 1 or not binary.startswith(ELF_MAGIC):
        raise KernelCompilerError(
            f"ptxas did not build one kernel for {spec.kernel} ({spec.variant}) on {arch.target}",
            expected="one entry function in the log and an ELF cubin",
            received=f"{len(entries)} entry functions, a cubin of {len(binary)} bytes",
            fix="report this with the ptxas version and its log",
        )
    return entries[0], len(binary)


# --------------------------------------------------------------------------------------
# The rows


@dataclass(frozen=True)
class ResourceRow(Record):
    """One kernel variant, compiled for one target.

    Attributes:
        kernel: the operation, e.g. ``"matmul"``.
        variant: e.g. ``"float32 tile=16"``.
        target: ``sm_XY``.
        block_threads: threads per block at launch.
        one_block: only ever launched as a single block (no occupancy floor).
        registers: registers per thread.
        shared_bytes: static shared memory per block.
        spill_store_bytes: bytes spilled to local memory per thread.
        spill_load_bytes: bytes loaded back from local memory per thread.
        stack_bytes: stack frame per thread.
        barriers: barriers used.
        blocks_per_sm: resident blocks per SM (0: the launch fails).
        active_warps: resident warps per SM.
        occupancy: active warps over the SM's maximum, 0 to 1.
        limited_by: what sets blocks_per_sm (see :class:`~tfaccel.kernels.occupancy.Occupancy`).
        ptx_isa: the PTX ISA version NVVM wrote, e.g. ``"8.8"``.
        cubin_bytes: size of the cubin ptxas built.
    """

    kernel: str
    variant: str
    target: str
    block_threads: int
    one_block: bool
    registers: int
    shared_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    barriers: int
    blocks_per_sm: int
    active_warps: int
    occupancy: float
    limited_by: str
    ptx_isa: str
    cubin_bytes: int

    @property
    def spill_bytes(self) -> int:
        """Spill stores plus spill loads: 0 when every value stayed in registers."""
        return self.spill_store_bytes + self.spill_load_bytes


def targets_from(targets: Iterable[str] | str) -> tuple[Architecture, ...]:
    """The architectures of ``targets`` (``"sm_80"``, ``"80"`` or ``"8.0"``), each once.

    Raises:
        UsageError: no target, or one the occupancy table does not know.
    """
    names = [targets] if isinstance(targets, str) else list(targets)
    if not names:
        raise UsageError(
            "no GPU target to compile for",
            expected="at least one of " + ", ".join(ARCHITECTURES),
            received="targets=()",
            fix="pass e.g. targets=('sm_80',), or leave it out for " + ", ".join(DEFAULT_TARGETS),
        )
    found: dict[str, Architecture] = {}
    for name in names:
        arch = architecture(name)
        found.setdefault(arch.target, arch)
    return tuple(found.values())


def _row(spec: KernelSpec, arch: Architecture, info: PtxasInfo, isa: str, size: int) -> ResourceRow:
    fit = occupancy(arch, spec.block_threads, info.registers, info.shared_bytes)
    return ResourceRow(
        kernel=spec.kernel,
        variant=spec.variant,
        target=arch.target,
        block_threads=spec.block_threads,
        one_block=spec.one_block,
        registers=info.registers,
        shared_bytes=info.shared_bytes,
        spill_store_bytes=info.spill_store_bytes,
        spill_load_bytes=info.spill_load_bytes,
        stack_bytes=info.stack_bytes,
        barriers=info.barriers,
        blocks_per_sm=fit.blocks_per_sm,
        active_warps=fit.active_warps,
        occupancy=fit.occupancy,
        limited_by=fit.limited_by,
        ptx_isa=isa,
        cubin_bytes=size,
    )


def kernel_resources(
    targets: Iterable[str] | str = DEFAULT_TARGETS,
    specs: Sequence[KernelSpec] | None = None,
    *,
    chain: Toolchain | None = None,
) -> list[ResourceRow]:
    """Compile each kernel variant to PTX and a cubin per target; read its resources.

    NVVM compiles one kernel at a time; ptxas assembles the previous ones meanwhile.

    Args:
        targets: ``sm_XY`` targets (default sm_70, sm_80, sm_90, sm_120).
        specs: what to compile; default :func:`kernel_specs` (every shipped kernel).
        chain: the toolchain; default :func:`toolchain`.

    Returns:
        One :class:`ResourceRow` per spec and target, in that order.

    Raises:
        UsageError: an unknown target.
        KernelCompilerError: numba-cuda, NVVM or ptxas is missing, the simulator is on, or
            the compiler does not build for a target.
    """
    archs = targets_from(targets)
    chain = chain or toolchain()
    todo = kernel_specs() if specs is None else list(specs)
    pending: list[tuple[KernelSpec, Architecture, str, Future[tuple[PtxasInfo, int]]]] = []
    with tempfile.TemporaryDirectory(prefix="tfaccel-ptx-") as tmp, ThreadPoolExecutor(2) as pool:
        for n, spec in enumerate(todo):
            for arch in archs:
                ptx = _ptx(spec, arch)
                version = re.search(r"^\s*\.version\s+(\S+)", ptx, re.M)
                path = Path(tmp) / f"k{n}_{arch.target}.ptx"
                job = pool.submit(_assemble, chain, spec, arch, ptx, path)
                pending.append((spec, arch, version.group(1) if version else "?", job))
        rows = []
        for spec, arch, isa, job in pending:
            info, size = job.result()
            rows.append(_row(spec, arch, info, isa, size))
    return rows


# --------------------------------------------------------------------------------------
# The checks


@dataclass(frozen=True)
class Violation(Record):
    """A row past a limit of its target, or below its occupancy floor.

    Attributes:
        kernel, variant, target: the row.
        check: ``"threads_per_block"``, ``"registers_per_thread"``, ``"spills"``,
            ``"shared_per_block"``, ``"fits_on_sm"`` (no block fits: the launch fails) or
            ``"occupancy"``.
        value: the row's value.
        limit: the limit it broke.
        message: what it means.
    """

    kernel: str
    variant: str
    target: str
    check: str
    value: float
    limit: float
    message: str


def floor_lookup(occupancy_floor: float | Mapping[str, float] | None) -> Callable[[str], float]:
    """The occupancy floor of each kernel name: ``occupancy_floor`` for every kernel, its entry
    for a kernel it names, else :data:`OCCUPANCY_FLOORS` (:data:`DEFAULT_OCCUPANCY_FLOOR`).

    Raises:
        UsageError: a floor outside [0, 1].
    """
    if occupancy_floor is None:
        table: dict[str, float] = {}
    elif isinstance(occupancy_floor, Mapping):
        table = dict(occupancy_floor)
    else:
        table = {"*": occupancy_floor}
    for name, value in table.items():
        if not is_real(value) or not in_range(value, minimum=0, maximum=1):
            raise UsageError(
                "an occupancy floor must be a share of the SM's warps, from 0 to 1",
                expected="a number in [0, 1], e.g. 0.5 for half the warps",
                received=argument("occupancy_floor", value)
                + ("" if name == "*" else f" for {name}"),
                fix=f"pass e.g. {argument('occupancy_floor', 0.5)}, or leave it out for the "
                "per-kernel floors",
            )
    if "*" in table:
        return lambda kernel: float(table["*"])
    return lambda kernel: float(
        table.get(kernel, OCCUPANCY_FLOORS.get(kernel, DEFAULT_OCCUPANCY_FLOOR))
    )


def check_resources(
    rows: Iterable[ResourceRow], occupancy_floor: float | Mapping[str, float] | None = None
) -> list[Violation]:
    """The rows that break a limit of their target or fall below their occupancy floor.

    Args:
        rows: from :func:`kernel_resources`.
        occupancy_floor: one floor for every kernel, a floor per kernel name, or None for
            :data:`OCCUPANCY_FLOORS` (:data:`DEFAULT_OCCUPANCY_FLOOR` for other kernels).

    Returns:
        One :class:`Violation` per broken limit; empty when every row is within them.

    Raises:
        UsageError: a floor outside [0, 1], or a row of an unknown target.
    """
    floor_of = floor_lookup(occupancy_floor)
    return [
        Violation(row.kernel, row.variant, row.target, *broken)
        for row in rows
        for broken in _broken_limits(row, architecture(row.target), floor_of(row.kernel))
    ]


def _broken_limits(
    row: ResourceRow, arch: Architecture, floor: float
) -> Iterator[tuple[str, float, float, str]]:
    """``(check, value, limit, message)`` for each limit of ``arch`` that ``row`` breaks."""
    if row.block_threads > arch.max_threads_per_block:
        yield (
            "threads_per_block",
            row.block_threads,
            arch.max_threads_per_block,
            f"{row.block_threads} threads per block, more than {arch.target} allows",
        )
    if row.registers > arch.max_registers_per_thread:
        yield (
            "registers_per_thread",
            row.registers,
            arch.max_registers_per_thread,
            f"{row.registers} registers per thread, more than {arch.target} gives one",
        )
    if row.spill_bytes:
        yield (
            "spills",
            row.spill_bytes,
            0,
            f"{row.spill_store_bytes} bytes spilled to local memory and "
            f"{row.spill_load_bytes} loaded back, per thread, with {row.registers} "
            "registers: its values do not fit in registers, and local memory is as slow "
            "as global memory",
        )
    if row.shared_bytes > arch.max_static_shared_bytes_per_block:
        yield (
            "shared_per_block",
            row.shared_bytes,
            arch.max_static_shared_bytes_per_block,
            f"{row.shared_bytes} bytes of static shared memory per block, more than "
            f"{arch.max_static_shared_bytes_per_block}",
        )
    if row.blocks_per_sm == 0:
        yield (
            "fits_on_sm",
            0,
            1,
            f"one block of {row.block_threads} threads needs more {row.limited_by} than "
            f"an SM of {arch.target} has: the launch fails ('too many resources requested "
            "for launch')",
        )
    elif row.occupancy < floor and not row.one_block:
        yield (
            "occupancy",
            row.occupancy,
            floor,
            f"{row.active_warps} of {arch.max_warps_per_sm} warps resident "
            f"({row.occupancy:.1%}, limited by {row.limited_by}), below the floor of "
            f"{floor:.0%}",
        )


# --------------------------------------------------------------------------------------
# Rendering


def _floor_text(occupancy_floor: float | Mapping[str, float] | None, kernels: Iterable[str]) -> str:
    floor_of = floor_lookup(occupancy_floor)
    by_floor: dict[float, list[str]] = {}
    for kernel in dict.fromkeys(kernels):
        by_floor.setdefault(floor_of(kernel), []).append(kernel)
    return "; ".join(f"{floor:.0%} ({', '.join(names)})" for floor, names in by_floor.items())


def render_text(
    rows: Sequence[ResourceRow],
    violations: Sequence[Violation],
    chain: Toolchain | None = None,
    occupancy_floor: float | Mapping[str, float] | None = None,
) -> str:
    """A table of the rows, the targets' limits, and the violations (or that there are none)."""
    lines: list[str] = []
    if chain is not None:
        isas = sorted({row.ptx_isa for row in rows})
        lines.append(
            f"toolchain: numba-cuda's NVVM to PTX ISA {', '.join(isas)}, ptxas "
            f"{chain.ptxas_version} to cubins ({chain.ptxas})"
        )
        lines.append("")
    kw = max([len("kernel"), *(len(row.kernel) for row in rows)])
    vw = max([len("variant"), *(len(row.variant) for row in rows)])
    header = (
        f"{'kernel':<{kw}} {'variant':<{vw}} {'target':<7} {'block':>5} {'regs':>4} "
        f"{'shared B':>8} {'spills st/ld':>12} {'blocks/SM':>9} {'occupancy':>9}  limited by"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for row in rows:
        spills = f"{row.spill_store_bytes}/{row.spill_load_bytes}"
        lines.append(
            f"{row.kernel:<{kw}} {row.variant:<{vw}} {row.target:<7} {row.block_threads:>5} "
            f"{row.registers:>4} {row.shared_bytes:>8} {spills:>12} {row.blocks_per_sm:>9} "
            f"{row.occupancy:>9.1%}  {row.limited_by}"
            + (" (one-block launches: no floor)" if row.one_block else "")
        )
    lines.append("")
    lines.append("per SM (CUDA C++ Programming Guide, compute capabilities; cuda_occupancy.h):")
    for target in dict.fromkeys(row.target for row in rows):
        arch = architecture(target)
        lines.append(
            f"  {arch.target:<7} {arch.gpus}: {arch.max_warps_per_sm} warps, "
            f"{arch.max_blocks_per_sm} blocks, {arch.registers_per_sm // 1024}K registers "
            f"(<= {arch.max_registers_per_thread} per thread), "
            f"{arch.shared_bytes_per_sm // 1024} KiB shared memory "
            f"(<= {arch.max_static_shared_bytes_per_block // 1024} KiB static per block)"
        )
    lines.append("occupancy floor: " + _floor_text(occupancy_floor, (row.kernel for row in rows)))
    lines.append("")
    if not violations:
        lines.append(
            f"within every limit: {len(rows)} kernel builds, no spills, occupancy at or "
            "above the floor"
        )
    else:
        lines.append(f"{len(violations)} limits broken:")
        for v in violations:
            lines.append(f"  {v.kernel} ({v.variant}) on {v.target}: {v.check}: {v.message}")
    return "\n".join(lines)


def report_dict(
    rows: Sequence[ResourceRow],
    violations: Sequence[Violation],
    chain: Toolchain | None = None,
    occupancy_floor: float | Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """A JSON-ready document: toolchain, per-target limits, floors, rows and violations."""
    floor_of = floor_lookup(occupancy_floor)
    kernels = dict.fromkeys(row.kernel for row in rows)
    targets = dict.fromkeys(row.target for row in rows)
    return {
        "toolchain": chain.to_dict() if chain is not None else None,
        "targets": {t: architecture(t).to_dict() for t in targets},
        "occupancy_floors": {k: floor_of(k) for k in kernels},
        "rows": [row.to_dict() for row in rows],
        "violations": [v.to_dict() for v in violations],
        "ok": not violations,
    }
