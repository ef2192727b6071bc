"""``tfaccel bench``: measure this machine, record the run, compare with the last one."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tfaccel.cli._output import print_json

__all__ = [
    "RichProgress",
    "add_bench_arguments",
    "add_parser",
    "options_from",
    "quiet_tensorflow",
    "render",
    "run",
]


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
        type=int,
        metavar="N",
        help="batch size of the tf.data configurations (default 256)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        metavar="N",
        help="timed repeats per configuration (default 5)",
    )
    p.add_argument(
        "--warmup", type=int, default=1, metavar="N", help="warm-up repeats, discarded (default 1)"
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
    p.add_argument("--no-save", action="store_true", help="do not record the run")
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


def options_from(args: argparse.Namespace) -> Any:
    """Build :class:`tfaccel.bench.BenchOptions` from parsed flags (validated)."""
    from tfaccel.bench.options import BenchOptions, parse_only

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
    return options


class RichProgress:
    """A rich progress bar on stderr; use as a context manager around the run."""

    def __init__(self, description: str = "starting") -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]tfaccel[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._progress.add_task(description, total=None)

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def status(self, description: str) -> None:
        """Show what is happening before the measurements start."""
        self._progress.update(self._task, description=description)

    def start(self, total: int) -> None:
        """Switch the bar from "starting" to counting ``total`` timed calls."""
        self._progress.update(self._task, total=total, completed=0, description="measuring")

    def advance(self, label: str) -> None:
        """One timed call done; show what is being measured."""
        from rich.markup import escape

        self._progress.update(self._task, advance=1, description=escape(label))


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ info lines off the terminal unless the user asked for them."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def render(
    summary: dict[str, Any], bench: dict[str, Any], comparison: dict[str, Any] | None
) -> Any:
    """The terminal view of a run: the report's headline and tables, what was not measured,
    and the changes beyond the noise since the last run."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from tfaccel.report.html import Status, headline_text, report_tables

    style = {"ok": "green", "better": "green", "fail": "bold red", "worse": "bold red"}

    def cell(value: Any) -> str:
        text = escape(str(value))
        colour = style.get(str(value)) if isinstance(value, Status) else None
        return f"[{colour}]{text}[/{colour}]" if colour else text

    parts: list[Any] = []
    if summary.get("headline"):
        parts.append(Text(headline_text(summary["headline"]), style="bold"))
    for table in report_tables(summary, comparison):
        rows = table.rows
        if table.key == "comparison" and comparison is not None:
            rows = [r for r in rows if str(r[6]) in ("better", "worse")]  # only the changes
            counts = ", ".join(f"{v} {k}" for k, v in sorted(comparison["counts"].items()))
            parts.append(Text(f"{table.title}: {counts}"))
            if not rows:
                continue
        view = Table(title=escape(table.title), title_justify="left")
        for i, name in enumerate(table.header):
            view.add_column(escape(name), justify="right" if i in table.numeric else "left")
        for row in rows:
            view.add_row(*(cell(c) for c in row))
        parts.append(view)
    for s in bench.get("skipped") or []:
        line = f"not measured: {s['benchmark']} on {s['device']}: {s['reason']}"
        parts.append(Text(line, style="dim"))
    return Group(*parts)


def run(args: argparse.Namespace) -> int:
    """Run the bench, record it, print tables (or JSON); exit 1 if a correctness check failed."""
    from tfaccel import bench, probe
    from tfaccel.store import ResultsStore

    if args.kernels:
        return run_kernels(args)
    options = options_from(args)
    db = None if args.no_save and not args.compare else ResultsStore(args.db)
    try:
        with RichProgress("probing the machine") as progress:
            snap = probe.snapshot()  # before quiet_tensorflow(), so it records the user's env
            quiet_tensorflow()
            progress.status("importing TensorFlow")
            store = None if args.no_save else db
            result = bench.run(options, store=store, progress=progress, snapshot=snap)
        comparison = None
        if args.compare and db is not None:
            before = bench.previous_run(db, result) if result.run_id else _last(db, result)
            comparison = bench.compare_runs(before, result) if before is not None else None
    finally:
        if db is not None:
            db.close()
    summary = bench.summarize_run(result)
    failed = any(c.get("passed") is False for c in summary["checks"])
    if args.json:
        doc = {
            "run": result.to_dict(),
            "summary": summary,
            "comparison": comparison,
            "db": None if db is None else str(db.path),
        }
        print_json(doc)
        return 1 if failed else 0
    from tfaccel.report.text import console

    out = console()
    out.print(render(summary, result.to_dict(), comparison))
    if args.compare and comparison is None:
        out.print("no earlier complete run of this machine to compare with")
    if db is not None and result.run_id is not None:
        out.print(f"recorded as run {result.run_id} in {db.path}")
    return 1 if failed else 0


def _last(db: Any, result: Any) -> Any:
    from tfaccel import bench

    record = db.last_run(result.fingerprint)
    return bench.load_run(db, record.id) if record is not None else None


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
