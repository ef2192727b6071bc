"""``tfaccel plan SCRIPT [ARGS...] | --model NAME``: will it fit, on which accelerator, how long.

SCRIPT is a training script as written: it runs, with ARGS, up to its ``model.fit`` (or its
``tfaccel.workload.mark``), where its workload is captured and planned in this process; nothing
trains. A script defining ``model_fn()`` is read as before (its words after SCRIPT are this
command's own options).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from tfaccel.cli._args import (
    OwnOptions,
    add_capture_options,
    add_script_arguments,
    capture_timeout,
    integer,
    refuse_unused,
    script_words,
)
from tfaccel.cli._output import print_json, quiet_tensorflow, warn_options_after_script
from tfaccel.core.errors import UsageError
from tfaccel.inventory.precision import PRECISIONS

__all__ = ["FLAGS", "add_parser", "run"]

# The arguments of tfaccel.plan -> this command's flags, for the messages of its errors.
FLAGS = {
    "batch_size": "--batch",
    "precision": "--precision",
    "optimizer": "--optimizer",
    "devices": "--device",
    "examples": "--examples",
    "prices": "--price",
    "model": "SCRIPT",
    "fit": "--fit",
    "timeout": "--timeout",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="predict memory, fit, largest batch and epoch time on each accelerator",
        description=(
            "Trace one training step of a model (nothing trains) and predict its peak memory by "
            "part (weights, gradients, optimizer slots, activations kept for the backward "
            "pass, input batch, 16-bit copies), whether it fits on each GPU and TPU of the "
            "spec database and on this machine, the largest batch that fits, the "
            "gradient_accumulation_steps that give the same update when it does not, and the "
            "step and epoch time from a roofline of counted FLOPs and bytes. Every figure is "
            "a prediction. SCRIPT is your training script as written: it runs with ARGS up to "
            "its model.fit (--fit N: the N-th), where the model, its optimizer, the data and "
            "the batch are taken and the script stops (nothing trains, nothing after that "
            "point runs). A SCRIPT defining model_fn() is planned from model_fn()."
        ),
    )
    p.set_defaults(handler=run)
    _add_options(p)
    add_script_arguments(p)


def _batch(text: str) -> int:
    """``--batch``: a positive integer up to the planner's largest batch (the planner is
    imported when the option is read: every command's parser is built for each command)."""
    from tfaccel.planning.api import MAX_BATCH

    return integer("--batch", example=256, maximum=MAX_BATCH)(text)


def _add_options(p: Any) -> None:
    p.add_argument(
        "--model",
        metavar="NAME",
        help="plan a reference model instead: reference-cnn, mlp, resnet20",
    )
    p.add_argument(
        "--batch",
        type=_batch,
        default=None,
        metavar="N",
        help="the global batch size (default: the script's own; 32 for model_fn and --model)",
    )
    add_capture_options(
        p, "plan", timeout_help="the time the script may take to reach model.fit (default 300)"
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="the precision to plan for (default: the model's own)",
    )
    p.add_argument(
        "--optimizer",
        metavar="NAME",
        help="plan with this optimizer (sgd, sgd-momentum, adam, adamw, rmsprop, ...; "
        "default: the model's own); an unknown name is planned as Adam-like, and said so",
    )
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="KEY",
        help="only these devices, repeatable: spec database keys (a100-40gb, h100-sxm, "
        "tpu-v5e, ...; see --list-devices) or this-cpu (default: all)",
    )
    p.add_argument(
        "--examples",
        type=integer("--examples", example=50000),
        metavar="N",
        help="training examples per epoch, for the epoch time (default: the script's data "
        "where its size is known, the reference model's data set; none for model_fn)",
    )
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="KEY=PER_HOUR",
        help="price per hour of a device, repeatable (a100-40gb=1.10): adds the cost per epoch",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="first measure this CPU's per-step and per-op costs and rates (10-30 s) "
        "and store them, so that plans on this machine predict its step time",
    )
    p.add_argument("--list-devices", action="store_true", help="list the device keys and exit")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (a script's own stdout goes to stderr)",
    )


def run(args: argparse.Namespace) -> int:
    """Plan the script or model; print the plan (text or JSON)."""
    words = script_words(args)
    if args.list_devices:
        given = f"--model {args.model}" if args.model else (repr(words[0]) if words else None)
        if given is not None:
            raise UsageError(
                "--list-devices lists the device keys and plans nothing",
                expected="tfaccel plan --list-devices alone, or a plan: tfaccel plan --model "
                "mlp --device a100-40gb",
                received=f"--list-devices with {given}",
                fix="drop --list-devices to plan, or what is planned to list the devices",
            )
        return _list_devices(args)
    if args.calibrate and not words and not args.model:
        return _calibrate_only(args)
    if bool(words) == bool(args.model):
        raise UsageError(
            "Tell tfaccel plan what to plan: a SCRIPT or --model, "
            + ("not both" if args.model else "neither was given"),
            expected="tfaccel plan train.py, or tfaccel plan --model reference-cnn",
            received=f"SCRIPT={(words[0] if words else None)!r}, --model={args.model!r}",
            fix="pass exactly one of them",
        )
    from tfaccel.planning import source
    from tfaccel.scripts import check_script, check_source, defines_hooks, split_command

    examples = args.examples
    if args.model:
        key, model_fn = source.reference_model_fn(args.model)
        examples = examples or source.REFERENCE_EXAMPLES.get(key)
        return _plan(args, model_fn, examples)
    script, script_args = split_command(
        words, command="plan", example="train.py --epochs 1", check=False
    )
    check_script(script, "plan", expected="a Python file", directory=False)
    check_source(script, "plan")  # before TensorFlow is imported
    if defines_hooks(script):
        if script_args:  # a model_fn script takes no arguments: these are plan's own
            OwnOptions("plan", _add_options).parse_args(script_args, namespace=args)
        return _plan(args, source.script_model_fn(script), args.examples)
    warn_options_after_script("plan", getattr(args, "own_options", ()), script, script_args)
    return _plan_script(args, script, script_args)


def _plan(args: argparse.Namespace, model_fn: Any, examples: int | None) -> int:
    refuse_unused(
        (("--fit", args.fit), ("--timeout", args.timeout)),
        applies="to a training script that calls model.fit (the fit it is planned at, the "
        "time to reach it)",
        expected="tfaccel plan --fit 2 train.py, or tfaccel plan --model reference-cnn",
        fix="drop {flag}: a reference model or a model_fn() is built, not run up to a fit",
    )
    prices = _prices(args.price)
    from tfaccel import inventory
    from tfaccel.planning.targets import targets

    machine = inventory.current()  # probed once, without TensorFlow
    if args.device:  # an unknown key is refused before TensorFlow starts
        targets(args.precision or "float32", args.device, inv=machine)
    quiet_tensorflow()
    _calibrate(args, machine)
    from tfaccel.planning.api import plan

    result = plan(
        model_fn,
        batch_size=args.batch or 32,
        precision=args.precision,
        optimizer=args.optimizer,
        devices=args.device or None,
        examples=examples,
        prices=prices,
        inventory=machine,
    )
    if args.json:
        print_json(result.to_dict())
    else:
        print(result)
    return 0


def _plan_script(args: argparse.Namespace, script: str, script_args: list[str]) -> int:
    """Capture the script's workload at its fit, and plan it here, in this process."""
    prices = _prices(args.price)
    timeout = capture_timeout(args.timeout)
    from tfaccel import inventory
    from tfaccel.planning.targets import targets

    machine = inventory.current()
    devices = args.device or None
    targets(args.precision or "float32", devices, inv=machine)  # a bad key, before the script runs
    quiet_tensorflow()
    _calibrate(args, machine)
    from tfaccel.planning.source import plan_workload
    from tfaccel.workload import DEFAULT_TIMEOUT_S, capture, no_fit_explained

    if timeout is None:
        timeout = DEFAULT_TIMEOUT_S
    with no_fit_explained(
        script,
        expected="a script that trains with model.fit (planned where it calls it), marks its "
        "own training loop, or defines model_fn()",
    ):
        workload = capture(script, script_args, fit=args.fit or 1, timeout=timeout, command="plan")
    result = plan_workload(
        workload,
        batch_size=args.batch,
        precision=args.precision,
        optimizer=args.optimizer,
        devices=devices,
        examples=args.examples,
        prices=prices,
        inventory=machine,
    )
    if args.json:
        print_json({**result.to_dict(), "workload": workload.describe()})
    else:
        print(result)
    return 0


def _calibrate_only(args: argparse.Namespace) -> int:
    """``tfaccel plan --calibrate`` alone: measure and store this CPU's time calibration, and
    say what it measured (what a plan's "run `tfaccel plan --calibrate` once" asks for)."""
    from tfaccel import inventory

    quiet_tensorflow()
    done = _calibrate(args, inventory.current(), quiet=bool(args.json))
    assert done is not None  # args.calibrate is set
    if args.json:
        print_json({"calibrated": True, "seconds": done.cost_s, "calibration": done.to_dict()})
    else:
        print("stored: every plan on this machine now predicts its step time on this CPU")
    return 0


def _calibrate(args: argparse.Namespace, machine: Any, *, quiet: bool = False) -> Any:
    """``--calibrate``: measure and store this CPU's time calibration before planning, and say
    what it measured (on stdout alone, on stderr before a plan; ``quiet``: not at all). The
    calibration, or None without ``--calibrate``."""
    if not getattr(args, "calibrate", False):
        return None
    from tfaccel.planning.roofline import calibrate

    done = calibrate(machine)
    if not quiet:
        words = script_words(args)
        alone = not words and not args.model
        print(
            f"calibrated in {done.cost_s:.1f} s: {done.describe()}",
            file=sys.stdout if alone else sys.stderr,
        )
    return done


def _prices(items: list[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not sep or not key.strip() or not math.isfinite(price) or price < 0:
            raise UsageError(
                "A --price is not KEY=PER_HOUR",
                expected="a device key, '=', and a finite price per hour of at least 0",
                received=f"--price {item!r}",
                fix="e.g. --price a100-40gb=1.10",
            )
        prices[key.strip().lower()] = price
    if prices:
        from tfaccel.inventory import load_specs

        known = {s.key for s in load_specs()} | {"this-cpu"}
        unknown = [k for k in prices if k not in known and not k.startswith("gpu:")]
        if unknown:
            raise UsageError(
                f"--price names an unknown device key {unknown[0]!r}",
                expected="keys of the spec database (tfaccel plan --list-devices)",
                received=f"--price {unknown[0]}={prices[unknown[0]]:g}",
                fix="use a key from tfaccel plan --list-devices, e.g. --price a100-40gb=1.10",
            )
    return prices


def _list_devices(args: argparse.Namespace) -> int:
    from tfaccel.inventory import load_specs

    rows = [
        {
            "key": s.key,
            "kind": s.kind,
            "name": s.name,
            "memory_gb": s.memory_gb,
            "bandwidth_gbs": s.bandwidth_gbs,
            "source": s.source,
        }
        for s in load_specs()
    ]
    if args.json:
        print_json({"devices": rows})
    else:
        for row in rows:
            print(f"{row['key']:<18} {row['kind']:<4} {row['name']:<28} {row['memory_gb']:g} GB")
    return 0
