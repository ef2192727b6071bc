"""What every command shares to show its output: the ``--json`` printer, the progress bar,
and TensorFlow's C++ log kept off the terminal."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

__all__ = ["RichProgress", "print_json", "quiet_tensorflow"]


def print_json(document: Any) -> None:
    """Print ``document`` as one JSON document on stdout.

    NaN and infinities (a ratio over a zero median, a spread of one sample) become null, since
    JSON has neither; values JSON does not know (paths, dates) are written as text.
    """
    sys.stdout.write(json.dumps(_finite(document), indent=2, default=str, allow_nan=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ info lines off the terminal unless the user asked for them."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class RichProgress:
    """A rich progress bar on stderr; use as a context manager around the run.

    It is a :class:`tfaccel.bench.Progress` (``start``, ``advance``) that also shows what
    happens between measurements (``status``).
    """

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
