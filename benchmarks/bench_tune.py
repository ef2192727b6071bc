"""``tfaccel.tune`` on a reference model against the Keras default and an exhaustive grid.

In one process, on this machine's default device:

1. ``tfaccel.tune`` searches the space below within ``--budget`` seconds (wall time measured).
2. An exhaustive grid times every configuration of the same space: each is built and warmed up,
   then all are timed in ``--rounds`` interleaved rounds of ``--sample-seconds`` samples (the
   same sample length and final-rung rounds the tuner uses), stopping after ``--grid-limit``
   seconds.
3. One interleaved comparison (``--compare-rounds`` rounds of ``--compare-calls`` samples each,
   after one warm-up round) of the Keras default (``fit`` on NumPy arrays, batch 32, float32,
   no XLA, one step per execution), the tuned configuration and the grid's best, on the models
   the grid built. It is longer than the grid's rounds because it decides the checks: on this
   machine a training process runs in stretches at one of two speeds (up to 2x apart; see
   docs/tune.md, "Two speeds"), so a median needs many samples to settle.
4. The bfloat16 (else float32) matmul ceiling measured on the same device, and the model's
   counted training FLOP/s at the tuned speed as a share of it.

The space: batch {32, 64, 128, 256} x precision {float32, the device's 16-bit mixed policy} x
XLA {off, on} x steps per execution {1, 8} x feed {numpy fit, tfaccel.data.pipeline} = 64
configurations (``--model`` picks the reference model: reference_cnn, resnet20, mlp).

Checks (exit status 1 when one fails): tuned / Keras default >= 2.0 with the tuned
configuration's IQR <= 10% in the final comparison; tuned >= 95% of the grid's best; the
tuner's time <= 30% of the grid's.

    python benchmarks/bench_tune.py [--model reference_cnn] [--budget 150] [--grid-limit 1800]
                                    [--no-grid] [--json] [--out FILE] [--smoke]

``--no-grid`` skips the grid (its two checks are then absent): the tuner against the Keras
default only, for the larger models whose 64-configuration grid would take an hour here.

``--smoke`` runs the tiny model on a 2-configuration space (batch 32, float32, no XLA, the two
feeds) with short samples: it checks that everything runs; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tfaccel.tuning
from tfaccel.bench.training import KERAS_DEFAULT
from tfaccel.core.timing import compare, measure_interleaved, summarize
from tfaccel.tuning.hooks import reference_hooks
from tfaccel.tuning.space import Config
from tfaccel.tuning.trials import TfRunner

MIN_RATIO_OVER_DEFAULT = 2.0
MAX_TUNED_IQR = 0.10
MIN_SHARE_OF_GRID_BEST = 0.95
MAX_SHARE_OF_GRID_TIME = 0.30
CEILING_N = 2048


def _space(mixed: str, smoke: bool) -> dict[str, Any]:
    return {
        "batch_size": [32] if smoke else [32, 64, 128, 256],
        "precision": ["float32"] if smoke else ["float32", mixed],
        "jit": [False] if smoke else [False, True],
        "steps_per_execution": [1] if smoke else [1, 8],
        "feed": ["numpy", "pipeline"],
    }


def _configs(space: dict[str, Any]) -> list[Config]:
    return [
        Config(b, p, j, f, steps_per_execution=e)
        for b in space["batch_size"]
        for p in space["precision"]
        for j in space["jit"]
        for e in space["steps_per_execution"]
        for f in space["feed"]
    ]


def matmul_ceiling(dtype: str, seconds: float, rounds: int) -> dict[str, Any]:
    """The measured n x n matmul TFLOP/s of ``dtype`` on the default device (median, IQR)."""
    import types

    import tensorflow as tf

    from tfaccel.bench import micro

    device = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"
    target = types.SimpleNamespace(tf_devices=(device,), dtypes=(dtype,))
    candidates, plan = micro.matmul_candidates(target, (CEILING_N,), seconds, (dtype,))  # type: ignore[arg-type]
    [(name, call)] = candidates.items()
    k = plan[name][2]
    samples = measure_interleaved({name: call}, repeats=rounds, warmup=1)[name]
    rates = summarize([2.0 * CEILING_N**3 * k / s / 1e12 for s in samples])
    return {
        "dtype": dtype,
        "n": CEILING_N,
        "tflops": rates.median,
        "relative_iqr": rates.relative_iqr,
    }


def training_flops_per_image(hooks: Any) -> int:
    """Counted training FLOPs per example of the model (3 x forward)."""
    from tfaccel.bench.flops import count_model

    return count_model(hooks.model_fn()).training


def run_tuner(hooks: Any, space: dict[str, Any], args: argparse.Namespace) -> tuple[Any, float]:
    began = time.monotonic()
    result = tfaccel.tuning.tune(
        hooks.model_fn,
        hooks.data,
        args.budget,
        space,
        model_name=hooks.model_name,
        sample_s=args.sample_seconds,
        final_rounds=args.rounds,
        store=False,
        progress=not args.json,
    )
    return result, time.monotonic() - began


def run_grid(
    runner: TfRunner, configs: list[Config], args: argparse.Namespace
) -> tuple[dict[Config, list[float]], float, list[str]]:
    """Prepare every configuration, then time all in interleaved rounds (stopping at the limit)."""
    began = time.monotonic()
    notes: list[str] = []
    ready = []
    for index, config in enumerate(configs):
        if time.monotonic() - began > args.grid_limit:
            notes.append(f"grid time limit: {len(configs) - index} configurations not built")
            break
        _status(f"grid: building {index + 1}/{len(configs)} {config.label()}", args)
        runner.prepare(config)
        ready.append(config)
    samples: dict[Config, list[float]] = {c: [] for c in ready}
    for round_index in range(args.rounds):
        if time.monotonic() - began > args.grid_limit:
            notes.append(f"grid time limit: stopped after {round_index} round(s)")
            break
        _status(f"grid: round {round_index + 1}/{args.rounds}", args)
        shift = round_index % len(ready)
        order = ready[shift:] + ready[:shift]  # rotate who goes first, as the timing core does
        seconds = measure_interleaved(
            {c.label(): (lambda c=c: runner.sample(c)) for c in order}, repeats=1, warmup=0
        )
        for config in ready:
            samples[config].extend(1.0 / s for s in seconds[config.label()])
    return samples, time.monotonic() - began, notes


def final_comparison(
    runner: TfRunner, named: dict[str, Config], args: argparse.Namespace
) -> dict[str, Any]:
    unique = dict.fromkeys(named.values())
    calls = args.compare_calls

    def timed(config: Config) -> float:  # seconds per image over `calls` consecutive samples
        return sum(runner.sample(config) for _ in range(calls)) / calls

    seconds = measure_interleaved(
        {c.label(): (lambda c=c: timed(c)) for c in unique},
        repeats=args.compare_rounds,
        warmup=1,
    )
    summaries = {c: summarize([1.0 / s for s in seconds[c.label()]]) for c in unique}
    default, tuned = summaries[named["default"]], summaries[named["tuned"]]
    out: dict[str, Any] = {
        "images_per_s": {
            k: {"config": c.label(), **summaries[c].to_dict()} for k, c in named.items()
        },
        "tuned_over_default": tuned.median / default.median,
        "tuned_over_default_verdict": compare(default, tuned, higher_is_better=True).verdict,
    }
    if "grid_best" in named:
        best = summaries[named["grid_best"]]
        out["tuned_over_grid_best"] = tuned.median / best.median
        out["tuned_vs_grid_best_verdict"] = compare(best, tuned, higher_is_better=True).verdict
    return out


def _status(text: str, args: argparse.Namespace) -> None:
    if not args.json:
        print(f"  {text}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="reference_cnn", help="reference_cnn, resnet20, mlp")
    parser.add_argument("--budget", type=float, default=150.0, help="the tuner's budget (s)")
    parser.add_argument("--grid-limit", type=float, default=1800.0, help="grid time limit (s)")
    parser.add_argument("--sample-seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5, help="final rounds (tuner and grid)")
    parser.add_argument("--compare-rounds", type=int, default=15)
    parser.add_argument(
        "--compare-calls", type=int, default=2, help="samples per comparison sample (longer)"
    )
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument(
        "--no-grid",
        action="store_true",
        help="no exhaustive grid: the tuner and the comparison with the Keras default only",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny model, 2 configurations")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON document to FILE")
    args = parser.parse_args()
    if args.smoke:
        args.sample_seconds, args.rounds, args.compare_rounds, args.compare_calls = 0.05, 3, 3, 1
        args.budget, args.examples = min(args.budget, 60.0), 512

    hooks = reference_hooks(args.model, smoke=args.smoke, examples=args.examples)
    from tfaccel.tuning.trials import device_name, hardware_precisions

    mixed = next((p for p in hardware_precisions() if p != "float32"), "mixed_bfloat16")
    space = _space(mixed, args.smoke)
    configs = _configs(space)
    x, y = hooks.data

    result, tune_s = run_tuner(hooks, space, args)
    assert result.best is not None
    _status("tuner done", args)
    runner = TfRunner(hooks.model_fn, x, y, sample_s=args.sample_seconds)
    default = Config(KERAS_DEFAULT.batch_size, KERAS_DEFAULT.precision, KERAS_DEFAULT.jit, "numpy")
    named = {"default": default, "tuned": result.best}
    grid: dict[Config, list[float]] = {}
    grid_s, notes = 0.0, ["not run (--no-grid)"]
    if not args.no_grid:
        grid, grid_s, notes = run_grid(runner, configs, args)
        named["grid_best"] = max(grid, key=lambda c: summarize(grid[c]).median)
    for config in dict.fromkeys(named.values()):
        if not runner.holds(config):
            runner.prepare(config)
    _status("comparing", args)
    comparison = final_comparison(runner, named, args)
    _status("matmul ceiling", args)
    ceiling_dtype = "bfloat16" if "bfloat16" in mixed else "float32"
    if device_name() != "cpu" and mixed == "mixed_float16":
        ceiling_dtype = "float16"
    ceiling = matmul_ceiling(ceiling_dtype, args.sample_seconds, 3 if args.smoke else 7)
    flops = training_flops_per_image(hooks)
    tuned_rate = comparison["images_per_s"]["tuned"]["median"]
    utilisation = {
        "training_flops_per_image": flops,
        "tuned_tflops": flops * tuned_rate / 1e12,
        "ceiling": ceiling,
        "share_of_ceiling": flops * tuned_rate / 1e12 / ceiling["tflops"],
    }
    doc = {
        "model": hooks.model_name,
        "device": device_name(),
        "space": space,
        "configurations": len(configs),
        "tuner": {
            "seconds": tune_s,
            "budget_s": args.budget,
            "best": result.best.label(),
            "reason": result.reason,
            "trials": len(result.trials),
            "timed_samples": sum(len(s) for t in result.trials for s in t.rung_samples.values()),
            "table": result.table(),
        },
        "grid": {
            "seconds": grid_s,
            "best": named["grid_best"].label() if "grid_best" in named else None,
            "rows": sorted(
                ({"config": c.label(), **summarize(v).to_dict()} for c, v in grid.items() if v),
                key=lambda r: -r["median"],
            ),
            "notes": notes,
        },
        "comparison": comparison,
        "utilisation": utilisation,
        "tuner_share_of_grid_time": tune_s / grid_s if grid_s else None,
    }
    tuned_iqr = comparison["images_per_s"]["tuned"]["relative_iqr"]
    doc["checks"] = {
        f"tuned >= {MIN_RATIO_OVER_DEFAULT}x Keras default": comparison["tuned_over_default"]
        >= MIN_RATIO_OVER_DEFAULT,
        f"tuned IQR <= {MAX_TUNED_IQR:.0%}": tuned_iqr <= MAX_TUNED_IQR,
    }
    if "grid_best" in named:
        doc["checks"][f"tuned >= {MIN_SHARE_OF_GRID_BEST:.0%} of the grid's best"] = (
            comparison["tuned_over_grid_best"] >= MIN_SHARE_OF_GRID_BEST
        )
        doc["checks"][f"tuner time <= {MAX_SHARE_OF_GRID_TIME:.0%} of the grid's"] = (
            doc["tuner_share_of_grid_time"] <= MAX_SHARE_OF_GRID_TIME
        )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, default=str)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        _print(doc)
    return 0 if all(doc["checks"].values()) or args.smoke else 1


def _print(doc: dict[str, Any]) -> None:
    tuner, grid, comparison = doc["tuner"], doc["grid"], doc["comparison"]
    print(
        f"model: {doc['model']}; device: {doc['device']}; "
        f"space: {doc['configurations']} configurations"
    )
    print(
        f"\ntuner: {tuner['seconds']:.0f} s (budget {tuner['budget_s']:g} s), "
        f"{tuner['timed_samples']} timed samples; best {tuner['best']}\n  why: {tuner['reason']}"
    )
    for row in tuner["table"]:
        print("  " + "  ".join(str(cell) for cell in row).rstrip())
    print(f"\ngrid: {grid['seconds']:.0f} s; best {grid['best']}" if grid["best"] else "\ngrid:")
    for row in grid["rows"]:
        print(
            f"  {row['config']:40} {row['median']:8.0f} img/s  IQR "
            f"{row['relative_iqr'] * 100:5.1f}%"
        )
    for note in grid["notes"]:
        print(f"  note: {note}")
    print("\ninterleaved comparison (median images/s, IQR):")
    for name, row in comparison["images_per_s"].items():
        print(
            f"  {name:10} {row['config']:40} {row['median']:8.0f}  "
            f"IQR {row['relative_iqr'] * 100:5.1f}%"
        )
    print(
        f"  tuned / default   x{comparison['tuned_over_default']:.2f} "
        f"({comparison['tuned_over_default_verdict']})"
    )
    if "tuned_over_grid_best" in comparison:
        print(
            f"  tuned / grid best x{comparison['tuned_over_grid_best']:.3f} "
            f"({comparison['tuned_vs_grid_best_verdict']})"
        )
        print(f"  tuner time / grid time: {doc['tuner_share_of_grid_time'] * 100:.0f}%")
    use = doc["utilisation"]
    ceiling = use["ceiling"]
    print(
        f"\nmodel FLOP/s at the tuned speed: {use['tuned_tflops']:.3f} TFLOP/s "
        f"({use['training_flops_per_image'] / 1e6:.1f} MFLOP per training image) = "
        f"{use['share_of_ceiling'] * 100:.0f}% of the measured {ceiling['dtype']} matmul "
        f"ceiling ({ceiling['tflops']:.3f} TFLOP/s, n={ceiling['n']}, IQR "
        f"{ceiling['relative_iqr'] * 100:.1f}%)"
    )
    print()
    for check, passed in doc["checks"].items():
        print(f"  {'PASS' if passed else 'FAIL'}  {check}")


if __name__ == "__main__":
    raise SystemExit(main())
