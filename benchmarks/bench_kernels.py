"""The tfaccel kernels against the GPU's limits: vector_add against a device copy, the tiled
matmul against tf.matmul (cuBLAS, float32 with TF32 off), each tile size compared.

Targets (not results): vector_add >= 80% of the copy bandwidth, matmul >= 50% of cuBLAS
float32 for large sizes. Needs an NVIDIA GPU; elsewhere, and on the CUDA simulator, it says
why it skipped and exits 0.

With --resources it needs no GPU: it compiles every kernel variant to PTX and a cubin for each
target (NVVM and ptxas from the CUDA compiler wheels, `pip install 'tfaccel[kernels]'`) and
prints the registers, shared memory, spills and theoretical occupancy of each, against the
targets' limits and an occupancy floor. Exit 0 when every build is within them, 1 when one is
not, 2 when the compiler is missing or an argument is wrong.

    python benchmarks/bench_kernels.py [--sizes 1024 2048 4096] [--tiles 8 16 32]
                                       [--vector-sizes 16777216] [--repeats 5] [--json]
    python benchmarks/bench_kernels.py --resources [--targets sm_70 sm_80 sm_90 sm_120]
                                       [--occupancy-floor 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from tfaccel.core import jsonout
from tfaccel.core.errors import TfaccelError, UsageError, argument_names
from tfaccel.kernels import KernelBackendError, bench, resources
from tfaccel.kernels.occupancy import ARCHITECTURES, DEFAULT_TARGETS

GPU_OPTIONS = ("sizes", "tiles", "vector_sizes", "repeats")
RESOURCE_OPTIONS = ("targets", "occupancy_floor")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


FLAGS = {name: _flag(name) for name in RESOURCE_OPTIONS}


def _check_options(args: argparse.Namespace) -> None:
    """Options of one mode given with the other are refused, not ignored."""
    misplaced = [
        n
        for n in (RESOURCE_OPTIONS if not args.resources else GPU_OPTIONS)
        if getattr(args, n) is not None
    ]
    if not misplaced:
        return
    flags = " ".join(_flag(n) for n in misplaced)
    if args.resources:
        raise UsageError(
            f"{flags} set the GPU timings, which --resources does not run",
            expected="--resources with --targets, --occupancy-floor and --json only",
            received=f"--resources {flags}",
            fix=f"drop {flags}, or drop --resources to time the kernels on a GPU",
        )
    raise UsageError(
        f"{flags}: only with --resources",
        expected="--targets and --occupancy-floor together with --resources",
        received=flags,
        fix=f"add --resources, or drop {flags}",
    )


def run_resources(args: argparse.Namespace) -> int:
    """Compile, read, check and print; the exit status says whether every limit held."""
    resources.floor_lookup(args.occupancy_floor)  # a bad floor is refused before compiling
    chain = resources.toolchain()
    targets = args.targets or DEFAULT_TARGETS
    rows = resources.kernel_resources(targets, chain=chain)
    violations = resources.check_resources(rows, args.occupancy_floor)
    if args.json:
        document = resources.report_dict(rows, violations, chain, args.occupancy_floor)
        print(jsonout.dumps(document))
    else:
        print(resources.render_text(rows, violations, chain, args.occupancy_floor))
    return 1 if violations else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--tiles", type=int, nargs="+")
    parser.add_argument("--vector-sizes", type=int, nargs="+")
    parser.add_argument("--repeats", type=int)
    parser.add_argument(
        "--resources",
        action="store_true",
        help="no GPU needed: compile every kernel for each target and print registers, "
        "shared memory, spills and occupancy against the limits",
    )
    parser.add_argument(
        "--targets",
        nargs="+",
        metavar="SM",
        help=f"with --resources: targets to compile for (default {' '.join(DEFAULT_TARGETS)}; "
        f"known: {' '.join(ARCHITECTURES)})",
    )
    parser.add_argument(
        "--occupancy-floor",
        type=float,
        metavar="SHARE",
        help="with --resources: one floor for every kernel, 0 to 1 (default: "
        f"{resources.DEFAULT_OCCUPANCY_FLOOR} per kernel, resources.OCCUPANCY_FLOORS)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    try:
        _check_options(args)
        if args.resources:
            with argument_names(FLAGS):
                return run_resources(args)
        result = bench.run(
            sizes=args.sizes or bench.DEFAULT_SIZES,
            tiles=args.tiles or bench.DEFAULT_TILES,
            vector_sizes=args.vector_sizes or bench.DEFAULT_VECTOR_SIZES,
            repeats=5 if args.repeats is None else args.repeats,
        )
    except KernelBackendError as exc:  # no GPU here: a skip, with the reason
        if args.json:
            print(json.dumps({"skipped": str(exc)}))
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    except TfaccelError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(bench.render_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
