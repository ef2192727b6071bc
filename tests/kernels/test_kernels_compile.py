"""Every kernel compiled for real GPUs, without one: PTX by NVVM, a cubin by ptxas, per target.

The compiler is the CUDA 12 compiler wheels' (``pip install 'tfaccel[kernels]'``, which
``make test`` installs), so these tests run on any machine; where it is missing they fail with
the install command, they do not skip. Compiling needs numba-cuda's real target, and
tests/kernels/test_kernels.py puts numba on the CUDA simulator in this process, so every build runs in
a subprocess without ``NUMBA_ENABLE_CUDASIM``: ``benchmarks/bench_kernels.py --resources
--json`` for every shipped kernel and target (about 25 s on two quiet cores), whose rows the
tests share (tests/conftest.py's ``kernel_resources``, run once: docs/kernels.md's command in
tests/test_docs.py reads it too), and one for the planted register-hungry kernel; this process
never imports numba.

Run with ``-s`` to see the table: registers, shared memory, spills and occupancy per kernel
and target.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import compiler_env, no_compiler

from tfaccel.core.errors import UsageError
from tfaccel.kernels import KernelCompilerError
from tfaccel.kernels.occupancy import ARCHITECTURES, DEFAULT_TARGETS, architecture, occupancy
from tfaccel.kernels.resources import (
    OCCUPANCY_FLOORS,
    ResourceRow,
    Toolchain,
    check_resources,
    floor_lookup,
    parse_ptxas_info,
    render_text,
    report_dict,
)

ROOT = Path(__file__).resolve().parents[2]
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4}
# The kernel factories of tfaccel/kernels/cuda.py and the operation each one implements.
KERNEL_OF = {
    "vector_add_kernel": ("vector_add",),
    "reduce_kernel": ("reduce_sum",),
    "matmul_kernel": ("matmul", "matmul per_thread"),
    "bias_relu_kernel": ("bias_relu",),
}
# Builds per kernel: vector_add 3 dtypes; reduce_sum 3 dtypes x 6 blocks; matmul 2 x 3 tiles;
# the register-tiled matmul 2 dtypes at tile 16, 8x8 per thread; bias_relu 2 dtypes x 2 layouts.
BUILDS = {"vector_add": 3, "reduce_sum": 18, "matmul": 6, "matmul per_thread": 2, "bias_relu": 4}
HUNGRY_LIVE_VALUES = 80

# A test-only kernel that needs more registers than a thread may have: it loads 80 complex128
# values (4 registers each) before it stores any, and `out` may alias `x`, so every value
# stays live until its own store: 320 registers wanted, 255 at most, the rest spilled.
PLANTED = textwrap.dedent(
    f"""
    import json, sys
    from numba import cuda
    from tfaccel.kernels import KernelCompilerError, resources

    live = {HUNGRY_LIVE_VALUES}
    source = ["def hungry(x, out):", "    i = cuda.grid(1)"]
    source += [f"    v{{j}} = x[i, {{j}}]" for j in range(live)]
    source += [f"    out[i, {{j}}] = v{{j}} * v{{(j + 1) % live}} + v{{(j + 7) % live}}"
               for j in range(live)]
    namespace = {{"cuda": cuda}}
    exec("\\n".join(source), namespace)
    hungry = resources.KernelSpec(
        "hungry", f"complex128 {{live}} live values", namespace["hungry"],
        "(complex128[:, ::1], complex128[:, ::1])", 256,
    )
    try:
        rows = resources.kernel_resources({DEFAULT_TARGETS!r}, [hungry])
    except KernelCompilerError as exc:
        print(json.dumps({{"error": str(exc)}}))
        sys.exit(0)
    print(json.dumps({{"rows": [r.to_dict() for r in rows]}}))
    """
)


@pytest.fixture(scope="module")
def report(kernel_resources: dict[str, Any]) -> dict[str, Any]:
    """``bench_kernels.py --resources --json`` for the default targets: every shipped kernel
    (run once in the session: docs/kernels.md's command in tests/test_docs.py reads it too)."""
    return kernel_resources


@pytest.fixture(scope="module")
def shipped(report: dict[str, Any]) -> list[ResourceRow]:
    return [ResourceRow.from_dict(r) for r in report["rows"]]


@pytest.fixture(scope="module")
def planted() -> list[ResourceRow]:
    done = subprocess.run(
        [sys.executable, "-c", PLANTED],
        capture_output=True,
        text=True,
        timeout=300,
        env=compiler_env(),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    if "error" in result:
        no_compiler(result["error"])
    return [ResourceRow.from_dict(r) for r in result["rows"]]


def _kernel_factories() -> list[str]:
    """The ``*_kernel`` definitions of tfaccel/kernels/cuda.py, read without importing numba."""
    tree = ast.parse((ROOT / "src" / "tfaccel" / "kernels" / "cuda.py").read_text())
    return sorted(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel")
    )


# --- the shipped kernels, compiled ------------------------------------------------------------


def test_every_kernel_variant_builds_a_cubin_for_every_target(
    report: dict[str, Any], shipped: list[ResourceRow]
) -> None:
    chain = Toolchain(**report["toolchain"])
    text = render_text(shipped, check_resources(shipped), chain)
    print()
    print(text)
    assert text.startswith("toolchain: numba-cuda's NVVM to PTX ISA ")
    assert text.endswith(
        f"within every limit: {len(shipped)} kernel builds, no spills, "
        "occupancy at or above the floor"
    )
    assert _kernel_factories() == sorted(KERNEL_OF), (
        "a kernel of tfaccel/kernels/cuda.py has no builds in resources.kernel_specs "
        f"(or KERNEL_OF here is stale): {_kernel_factories()}"
    )
    names = {name for names in KERNEL_OF.values() for name in names}
    assert names == set(BUILDS) == {r.kernel for r in shipped}
    assert list(report["targets"]) == list(DEFAULT_TARGETS)
    for target in DEFAULT_TARGETS:
        built = [r for r in shipped if r.target == target]
        counts = {k: sum(r.kernel == k for r in built) for k in BUILDS}
        assert counts == BUILDS, f"{target}: {counts}"
    for row in shipped:
        assert row.cubin_bytes > 1000, row
        major, minor = row.ptx_isa.split(".")
        assert int(major) >= 7 and minor.isdigit(), row.ptx_isa
    assert chain.ptxas_version.startswith("12."), chain  # the CUDA 12 wheel: it builds sm_70


def test_registers_shared_memory_and_barriers_are_what_the_code_says(
    shipped: list[ResourceRow],
) -> None:
    """Registers in range; static shared memory exactly the kernels' shared arrays; a barrier
    where the kernel synchronises; no spills and no stack anywhere."""
    for row in shipped:
        dtype, _, rest = row.variant.partition(" ")
        size = ITEMSIZE[dtype]
        assert 0 < row.registers <= architecture(row.target).max_registers_per_thread, row
        assert (row.spill_store_bytes, row.spill_load_bytes, row.stack_bytes) == (0, 0, 0), row
        if row.kernel == "matmul":
            tile = int(rest.removeprefix("tile="))
            assert row.block_threads == tile * tile
            assert row.shared_bytes == 2 * tile * tile * size, row  # tile_a and tile_b
            assert row.barriers >= 1, row
        elif row.kernel == "matmul per_thread":
            tile_text, per_text = rest.split()
            tile = int(tile_text.removeprefix("tile="))
            per = int(per_text.removeprefix("per_thread="))
            assert row.block_threads == tile * tile
            assert row.shared_bytes == 2 * tile * per * tile * size, row  # slice_a and slice_b
            assert row.barriers >= 1, row
        elif row.kernel == "reduce_sum":
            assert row.shared_bytes == row.block_threads * size, row  # one value per thread
            assert row.barriers >= 1, row
        else:
            assert row.shared_bytes == 0 and row.barriers == 0, row


def test_occupancy_is_at_or_above_each_kernels_floor(
    report: dict[str, Any], shipped: list[ResourceRow]
) -> None:
    print()
    for kernel, floor in OCCUPANCY_FLOORS.items():
        mine = [r for r in shipped if r.kernel == kernel]
        lowest = min(mine, key=lambda r: r.occupancy if not r.one_block else 2.0)
        print(
            f"{kernel:<11} floor {floor:.0%}: lowest {lowest.occupancy:.1%} "
            f"({lowest.variant} on {lowest.target}, {lowest.registers} registers, "
            f"limited by {lowest.limited_by})"
        )
        for row in mine:
            if not row.one_block:
                assert row.occupancy >= floor, row
            assert row.blocks_per_sm >= 1, row
    assert check_resources(shipped) == []
    assert report["ok"] is True and report["violations"] == []
    assert report["occupancy_floors"] == dict(OCCUPANCY_FLOORS)


def test_a_register_hungry_kernel_spills_and_fails_the_check(planted: list[ResourceRow]) -> None:
    print()
    violations = check_resources(planted)
    text = render_text(planted, violations)
    print(text)
    assert f"\n{len(violations)} limits broken:\n" in text
    for v in violations:
        assert f"  {v.kernel} ({v.variant}) on {v.target}: {v.check}: " in text
    assert [r.target for r in planted] == list(DEFAULT_TARGETS)
    for row in planted:
        assert row.registers > 200, row  # ptxas gave it about all it may...
        assert row.spill_store_bytes > 0 and row.spill_load_bytes > 0, row  # ...and spilled
        checks = {v.check for v in violations if v.target == row.target}
        assert {"spills", "occupancy"} <= checks, (row.target, checks)
    spill = next(v for v in violations if v.check == "spills")
    assert "spilled to local memory" in spill.message and spill.value > 0


# --- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--resources", "--targets", "sm_99"], {}, "Received: --targets sm_99"),
        (["--resources", "--occupancy-floor", "2"], {}, "Received: --occupancy-floor 2"),
        (["--targets", "sm_80"], {}, "--targets: only with --resources"),
        (["--resources", "--tiles", "8"], {}, "--tiles set the GPU timings"),
        (["--resources"], {"NUMBA_ENABLE_CUDASIM": "1"}, "simulator is on"),
    ],
)
def test_the_script_refuses_bad_input_before_compiling(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_kernels.py"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**compiler_env(), **env},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "", done.stdout  # no table, no rows: refused, not compiled
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


MISSING = {
    "ptxas": (
        "resources._find_ptxas = lambda: None",
        "ptxas, the CUDA assembler",
    ),
    "NVVM": (
        "import numba.cuda.cudadrv.nvvm as nvvm\n"
        "from numba.cuda.cudadrv.error import NvvmSupportError\n"
        "def no_nvvm():\n"
        "    raise NvvmSupportError('libNVVM cannot be found')\n"
        "nvvm.NVVM = no_nvvm",
        "NVVM (libnvvm)",
    ),
    "numba": (
        "sys.modules['numba'] = None",  # import numba then raises ImportError
        "needs numba and numba-cuda",
    ),
}


@pytest.mark.parametrize("missing", list(MISSING))
def test_a_missing_compiler_piece_is_named_with_the_install(missing: str) -> None:
    """As on a machine without the compiler wheels: the error names what is missing and the
    install line, before anything is compiled."""
    hide, what = MISSING[missing]
    script = (
        "import sys\nfrom tfaccel.kernels import KernelCompilerError, resources\n"
        f"{hide}\n"
        "try:\n"
        "    resources.kernel_resources(('sm_80',))\n"
        "except KernelCompilerError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=compiler_env(),
    )
    assert done.returncode == 0, done.stderr
    assert what in done.stdout, done.stdout
    assert "Fix: pip install 'tfaccel[kernels]'" in done.stdout, done.stdout


# --- pure parts: the ptxas log, the occupancy arithmetic, the checks ------------------------

PTXAS_LOG = """\
ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function '_Z6matmulPfS_S_' for 'sm_90'
ptxas info    : Function properties for _Z6matmulPfS_S_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem
ptxas info    : Compile time = 12.752 ms
ptxas info    : Compiling entry function 'hungry' for 'sm_80'
ptxas info    : Function properties for hungry
    792 bytes stack frame, 1008 bytes spill stores, 1056 bytes spill loads
ptxas info    : Used 254 registers, used 0 barriers, 792 bytes cumulative stack size, 496 bytes cmem[0]
ptxas info    : Compiling entry function 'old' for 'sm_70'
ptxas info    : Function properties for old
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, 352 bytes cmem[0]
"""


def test_the_ptxas_log_is_read_per_entry_function() -> None:
    matmul, hungry, old = parse_ptxas_info(PTXAS_LOG)
    assert (matmul.function, matmul.target, matmul.registers) == ("_Z6matmulPfS_S_", "sm_90", 32)
    assert (matmul.shared_bytes, matmul.barriers, matmul.spill_store_bytes) == (2048, 1, 0)
    assert (hungry.registers, hungry.stack_bytes) == (254, 792)
    assert (hungry.spill_store_bytes, hungry.spill_load_bytes) == (1008, 1056)
    assert (old.registers, old.shared_bytes, old.barriers, old.stack_bytes) == (20, 0, 0, 8)
    assert parse_ptxas_info("ptxas info    : 0 bytes gmem\n") == []
    with pytest.raises(KernelCompilerError, match="did not report the registers"):
        parse_ptxas_info("ptxas info    : Compiling entry function 'k' for 'sm_80'\n")


@pytest.mark.parametrize(
    ("target", "threads", "registers", "shared", "blocks", "share", "limit"),
    [
        # 32 registers x 256 threads: 8 blocks of 8 warps fill the 64 warp slots.
        ("sm_80", 256, 32, 0, 8, 1.0, "warps"),
        # 40 registers: 1280 per warp, 12 warps per 16K sub-partition, 48 warps: one block
        # of 32 warps (the tiled matmul at tile 32 on Volta).
        ("sm_70", 1024, 40, 8192, 1, 0.5, "registers"),
        # 45 registers: 1536 per warp, 10 warps per sub-partition: 5 blocks of 8 warps.
        ("sm_90", 256, 45, 0, 5, 40 / 64, "registers"),
        # 65 registers x 1024 threads need 73728 registers: no block fits, the launch fails.
        ("sm_80", 1024, 65, 0, 0, 0.0, "registers"),
        # 48 KiB of static shared memory + 1 KiB reserved: 4 blocks in 228 KiB.
        ("sm_90", 128, 16, 48 * 1024, 4, 16 / 64, "shared memory"),
        # Volta reserves nothing: 2 blocks of 48 KiB in 96 KiB.
        ("sm_70", 128, 16, 48 * 1024, 2, 8 / 64, "shared memory"),
        # one warp per block: the SM's 24 block slots hold 24 of its 48 warps.
        ("sm_120", 32, 16, 128, 24, 0.5, "blocks"),
        # more than 48 KiB of static shared memory, or 1025 threads: nothing fits.
        ("sm_80", 256, 32, 48 * 1024 + 4, 0, 0.0, "shared memory"),
        ("sm_80", 1025, 16, 0, 0, 0.0, "warps"),
    ],
)
def test_occupancy_follows_the_cuda_occupancy_calculator(
    target: str, threads: int, registers: int, shared: int, blocks: int, share: float, limit: str
) -> None:
    result = occupancy(architecture(target), threads, registers, shared)
    assert (result.blocks_per_sm, result.limited_by) == (blocks, limit), result
    assert result.occupancy == pytest.approx(share)


def test_targets_are_named_three_ways_and_unknown_ones_are_refused() -> None:
    assert architecture("sm_90") is architecture("90") is architecture("9.0")
    assert architecture("SM_120").compute_capability == (12, 0)
    with pytest.raises(UsageError, match="unknown GPU target") as err:
        architecture("sm_61")
    assert "sm_70" in str(err.value.expected) and err.value.fix
    for arch in ARCHITECTURES.values():  # the table against the CUDA-wide constants
        assert arch.max_warps_per_sm * 32 >= arch.max_threads_per_block
        assert arch.shared_bytes_per_sm >= arch.max_static_shared_bytes_per_block


def _row(**changes: Any) -> ResourceRow:
    base = ResourceRow(
        kernel="matmul",
        variant="float32 tile=16",
        target="sm_80",
        block_threads=256,
        one_block=False,
        registers=32,
        shared_bytes=2048,
        spill_store_bytes=0,
        spill_load_bytes=0,
        stack_bytes=0,
        barriers=1,
        blocks_per_sm=8,
        active_warps=64,
        occupancy=1.0,
        limited_by="warps",
        ptx_isa="8.8",
        cubin_bytes=10_000,
    )
    return dataclasses.replace(base, **changes)


def test_each_limit_is_checked() -> None:
    cases = {
        "threads_per_block": _row(block_threads=2048, blocks_per_sm=0, limited_by="warps"),
        "registers_per_thread": _row(registers=300),
        "spills": _row(spill_store_bytes=8, spill_load_bytes=8),
        "shared_per_block": _row(shared_bytes=64 * 1024),
        "fits_on_sm": _row(blocks_per_sm=0, active_warps=0, occupancy=0.0),
        "occupancy": _row(blocks_per_sm=2, active_warps=16, occupancy=0.25),
    }
    for check, row in cases.items():
        found = {v.check for v in check_resources([row])}
        assert check in found, (check, found)
    assert check_resources([_row()]) == []
    # a build launched as one block has no occupancy floor; every other limit still holds
    lonely = _row(one_block=True, blocks_per_sm=2, active_warps=16, occupancy=0.25)
    assert check_resources([lonely]) == []
    assert check_resources([dataclasses.replace(lonely, spill_store_bytes=4)])[0].check == "spills"


def test_floors_can_be_set_for_all_kernels_or_per_kernel() -> None:
    low = _row(blocks_per_sm=5, active_warps=40, occupancy=40 / 64)
    assert check_resources([low]) == []  # 62.5% >= the default 50%
    assert [v.check for v in check_resources([low], 0.75)] == ["occupancy"]
    assert check_resources([low], {"vector_add": 0.9}) == []
    assert [v.limit for v in check_resources([low], {"matmul": 0.7})] == [0.7]
    assert floor_lookup(None)("a kernel of yours") == 0.5
    for bad in (1.5, -0.1, True, "0.5"):
        with pytest.raises(UsageError, match="occupancy floor"):
            check_resources([low], bad)  # type: ignore[arg-type]


def test_the_report_is_one_json_document() -> None:
    rows = [_row(), _row(target="sm_90", spill_store_bytes=4)]
    document = report_dict(rows, check_resources(rows), Toolchain("/x/ptxas", "12.9.86"))
    assert json.loads(json.dumps(document)) == document
    assert document["ok"] is False and document["violations"][0]["target"] == "sm_90"
    assert set(document["targets"]) == {"sm_80", "sm_90"}
    assert document["occupancy_floors"] == {"matmul": 0.5}
    assert ResourceRow.from_dict(document["rows"][1]) == rows[1]


def _bench_script() -> Any:
    """benchmarks/bench_kernels.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location(
        "bench_kernels", ROOT / "benchmarks" / "bench_kernels.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("rows", "code"),
    [
        ([_row(), _row(target="sm_90")], 0),
        ([_row(), _row(target="sm_90", spill_store_bytes=4, spill_load_bytes=4)], 1),
    ],
)
def test_the_script_prints_the_check_and_exits_1_on_a_broken_limit(
    rows: list[ResourceRow],
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--resources``, as text and as JSON, on rows given in place of the compiler's."""
    from tfaccel.kernels import resources

    chain = Toolchain("/x/ptxas", "12.9.86")
    asked: list[Any] = []
    monkeypatch.setattr(resources, "toolchain", lambda: chain)

    def compiled(targets: Any, *, chain: Toolchain) -> list[ResourceRow]:
        asked.append(targets)
        return rows

    monkeypatch.setattr(resources, "kernel_resources", compiled)
    script = _bench_script()

    assert script.main(["--resources"]) == code
    text = capsys.readouterr().out
    assert text.rstrip("\n") == render_text(rows, check_resources(rows), chain)
    assert asked == [DEFAULT_TARGETS]
    if code:
        assert "1 limits broken:\n  matmul (float32 tile=16) on sm_90: spills: 4 bytes" in text
    else:
        assert "within every limit: 2 kernel builds" in text

    assert (
        script.main(["--resources", "--json", "--targets", "sm_90", "--occupancy-floor", "0.7"])
        == code
    )
    document = json.loads(capsys.readouterr().out)
    assert document == report_dict(rows, check_resources(rows, 0.7), chain, 0.7)
    assert document["ok"] is (code == 0) and document["occupancy_floors"] == {"matmul": 0.7}
    assert asked[-1] == ["sm_90"]
