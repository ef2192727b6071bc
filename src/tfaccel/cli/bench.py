"""``tfaccel bench``: measure this machine, record the run, compare with the last one.

The workflow is :func:`tfaccel.bench.run_with_history`; this module parses the flags, calls
it, renders the result (:func:`tfaccel.report.text.render_bench`, or ``--json``) and maps its
status to the exit code ``tfaccel --help`` documents.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tfaccel.cli._args import integer
from tfaccel.cli._output import RichProgress, print_json, quiet_tensorflow
from tfaccel.core.errors import UsageError

if TYPE_CHECKING:
    from tfaccel.bench import BenchOptions, BenchStatus

__all__ = [
    "EXIT_CODE",
    "add_bench_arguments",
    "add_parser",
    "options_from",
    "run",
]

# The bench's status -> the exit code of `tfaccel bench` and `tfaccel report` (see EXIT_CODES
# in tfaccel.cli: 1 when the digits convergence check failed).
EXIT_CODE: dict[BenchStatus, int] = {"ok": 0, "check_failed": 1}

MAX_REPEATS = 10_000  # timed (or warm-up) repeats per configuration


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    """The flags ``bench`` and ``report`` share."""
    p.add_argument(
        "--quick",
        action="store_true",
        help="short run (about 1.5 minutes on 2 cores): fewer sizes and settings",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes: checks that every benchmark runs (figures are meaningless)",
    )
    p.add_argument(
        "--only",
        metavar="NAMES",
        help="comma-separated benchmarks (matmul, bandwidth, transfer, vector_add, "
        "conv2d, reference_cnn, mlp, resnet20, digits) or groups (micro, models)",
    )
    p.add_argument(
        "--device",
        default="all",
        metavar="DEV",
        help="cpu, gpu:N, gpus (all GPUs, MirroredStrategy) or all (default)",
    )
    p.add_argument(
        "--batch-size",
        type=integer("--batch-size", example=256),
        metavar="N",
        help="batch size of the tf.data configurations (default 256)",
    )
    p.add_argument(
        "--repeats",
        type=integer("--repeats", example=5, maximum=MAX_REPEATS),
        default=5,
        metavar="N",
        help="timed repeats per configuration (default 5)",
    )
    p.add_argument(
        "--warmup",
        type=integer("--warmup", example=1, minimum=0, maximum=MAX_REPEATS),
        default=1,
        metavar="N",
        help="warm-up repeats, discarded (default 1)",
    )
    p.add_argument(
        "--data",
        default="synthetic",
        metavar="SPEC",
        help="synthetic (default), synthetic:N, or cifar10:DIR (the CIFAR-10 python batches)",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="results database (default $XDG_DATA_HOME/tfaccel/results.sqlite)",
    )
    p.add_argument(
        "--no-save",
        action="store_true",
        help="do not record the run in the results database (bench --compare then reads it "
        "read only, creating nothing, and refuses a --db that does not exist)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def add_parser(sub: Any) -> None:
    """Register ``tfaccel bench`` on the CLI's subparsers."""
    p = sub.add_parser(
        "bench",
        help="measure matmul, bandwidth and model training against the limit and last time",
        description=(
            "Measure this machine: matmul/bandwidth/conv micro benchmarks (against the spec "
            "peak), training throughput of reference models per device and setting (utilisation "
            "and MFU), and a convergence check. Every run is recorded in a SQLite database; "
            "--compare flags changes beyond the noise since the last run of this machine."
        ),
    )
    add_bench_arguments(p)
    p.add_argument(
        "--compare",
        action="store_true",
        help="compare with the last run of this machine and flag changes beyond noise",
    )
    p.add_argument(
        "--kernels",
        action="store_true",
        help=(
            "measure the tfaccel.kernels CUDA kernels instead: vector_add against the copy "
            "bandwidth, matmul against cuBLAS, tile sizes compared (NVIDIA GPU only; "
            "elsewhere it says why it skipped)"
        ),
    )
    p.set_defaults(handler=run)


def options_from(args: argparse.Namespace) -> BenchOptions:
    """Build :class:`tfaccel.bench.BenchOptions` from parsed flags, validated before any work:
    the options themselves and the size of the synthetic data against this machine's memory."""
    from tfaccel.bench.options import BenchOptions, parse_only
    from tfaccel.probe import cpu

    if args.smoke and args.quick:
        raise UsageError(
            "--smoke and --quick cannot be combined",
            expected="one of them: --quick (a short run with real figures) or --smoke (tiny "
            "sizes that check that everything runs; the figures mean nothing)",
            received="both",
            fix="drop one of them",
        )
    profile = "smoke" if args.smoke else "quick" if args.quick else "full"
    options = BenchOptions(
        profile=profile,
        only=parse_only(args.only),
        device=args.device,
        batch_size=args.batch_size,
        repeats=args.repeats,
        warmup=args.warmup,
        data=args.data,
    )
    options.validate()
    options.check_memory(cpu.collect().memory_available_bytes)
    return options


def check_db(args: argparse.Namespace, *, compare: bool) -> None:
    """Refuse a ``--db`` the run would open but cannot (too long, a directory, a symbolic link
    loop, under a file; missing when only read; a SQLite file of another program, a corrupt
    or newer database), before probing the machine or starting TensorFlow (``tfaccel tune``
    and ``tfaccel report``, which open the database in the library). A database with data, or
    one only read, is opened read only to tell (SQLite's ``mode=ro``: nothing written, not
    even a journal; opening checks the path first). ``compare``: the run reads the database
    even when it records nothing."""
    from tfaccel.store import check_store, default_path

    if args.no_save and not compare:
        return
    if args.db is None and args.no_save and not default_path().exists():
        return  # nothing recorded yet to compare with: said after the run
    check_store(args.db, read_only=args.no_save)


def run(args: argparse.Namespace) -> int:
    """Run the bench, record it, print tables (or JSON); exit 1 if a correctness check failed."""
    from tfaccel import bench, probe
    from tfaccel.bench.history import open_store

    if args.kernels:
        return run_kernels(args)
    options = options_from(args)
    # opened (so a bad --db refused) once, before the machine is probed or TensorFlow starts
    store = open_store(args.db, save=not args.no_save, compare=args.compare)
    try:
        with RichProgress("probing the machine") as progress:
            snap = probe.snapshot()  # before quiet_tensorflow(), so it records the user's env
            progress.status("starting TensorFlow")
            quiet_tensorflow()
            result = bench.run_with_history(
                options,
                snapshot=snap,
                db=store,
                save=not args.no_save,
                compare=args.compare,
                progress=progress,
            )
    finally:
        if store is not None:
            store.close()
    if args.json:
        print_json(result.to_dict())
        return EXIT_CODE[result.status]
    from tfaccel.report.text import console, render_bench

    out = console()
    out.print(render_bench(result))
    if args.compare and result.comparison is None:
        out.print("no earlier complete run of this machine to compare with")
    if result.db_path is not None and result.run.run_id is not None:
        out.print(f"recorded as run {result.run.run_id} in {result.db_path}")
    return EXIT_CODE[result.status]


def run_kernels(args: argparse.Namespace) -> int:
    """``tfaccel bench --kernels``: the kernels against the GPU, or the reason it skipped."""
    from tfaccel.kernels import KernelBackendError
    from tfaccel.kernels import bench as kernel_bench

    try:
        result = kernel_bench.run(repeats=args.repeats, warmup=args.warmup)
    except KernelBackendError as exc:  # no GPU, or only the simulator: a skip, with the reason
        if args.json:
            print_json({"kernels": None, "skipped": str(exc)})
        else:
            print(f"kernels not measured: {exc}")
        return 0
    if args.json:
        print_json({"kernels": result.to_dict(), "skipped": None})
    else:
        print(kernel_bench.render_text(result))
    return 0
