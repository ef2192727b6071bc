"""What ``tfaccel.tune`` returns: the best configuration, every trial, and how to reproduce it.

Plain data with ``to_dict`` (the ``--json`` document) and ``str()`` (the text report).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfaccel.core.timing import Summary, summarize
from tfaccel.tuning.batch import BatchSearch
from tfaccel.tuning.search import Trial
from tfaccel.tuning.space import KNOB_DEFAULTS, OWN_FEED, Config, Space, simplicity

__all__ = ["CLAIMED", "CODE_NAMES", "CODE_NAMES_DATASET", "Speedup", "TuneResult"]

CLAIMED = {"precision": "precision", "jit": "XLA"}
"""The settings a result may state a measured verdict on (``setup(...="auto")`` reads them
back), and how the text names them."""

CODE_NAMES = (
    "assumes: build_model() returns your Keras model, not compiled; optimizer and loss are",
    "what you compile it with; x and y are your training arrays (NumPy)",
)
"""The names :meth:`TuneResult.code` assumes are defined, as its first comment says."""
CODE_NAMES_DATASET = (
    CODE_NAMES[0],
    "what you compile it with; dataset is your training dataset, as your script builds it",
)
"""The same, when the winner feeds the script's own dataset as it is (``as-given``)."""


@dataclass(frozen=True)
class Speedup:
    """The winner against the simplest configuration timed in the same rung.

    Attributes:
        ratio: images/s of the winner / images/s of the baseline (medians).
        baseline: the simplest configuration the search timed.
        rung: the rung both were timed in (interleaved).
    """

    ratio: float
    baseline: Config
    rung: int


@dataclass
class TuneResult:
    """The outcome of ``tfaccel.tune``.

    Attributes:
        best: the configuration to use (None when nothing was timed).
        reason: why it won.
        trials: every configuration considered, in the order tried.
        model_name: the name the result is stored under (the Keras model's name by default).
        device: ``cpu`` or ``gpu:0``.
        space: the space searched.
        budget_s / elapsed_s: seconds allowed and spent.
        interrupted: Ctrl-C ended the search; ``best`` is the best so far.
        batch_search: the memory search, when batch sizes were "auto".
        final_rounds: interleaved rounds behind the decision.
        notes: facts a reader needs.
        run_id / db_path: where the result was stored (None: not stored).
        model_fingerprint: the architecture fingerprint of the model tuned
            (:func:`tfaccel.architecture.fingerprint`), stored with the winner so that
            ``setup(..., model=model)`` applies it only to a model of that architecture; None
            when the search never built the model (the result then applies to no model).
        baseline: a script tuned as written: its own configuration (None otherwise).
        baseline_verdict: the script's own configuration against the search's winner, timed
            together: ``kept`` (the answer is the script's own), ``ratio``, ``noise``,
            ``rounds``, ``says``.
        not_run: what the script does at its ``fit`` that the trials did not run (its
            callbacks, validation...).
        workload: the script's workload, summarised (:meth:`tfaccel.workload.Workload.describe`),
            with how each precision's models were built (``models``).

    Example:
        >>> result = tfaccel.tune(model_fn, (x, y), budget_s=120)      # doctest: +SKIP
        >>> result.best.label(), result.setup_kwargs()                 # doctest: +SKIP
        ('bs256 mixed_bfloat16 pipeline xla=off', {'precision': 'mixed_bfloat16', 'jit': False})
    """

    best: Config | None
    reason: str
    trials: list[Trial]
    model_name: str
    device: str
    space: Space
    budget_s: float
    elapsed_s: float
    interrupted: bool = False
    batch_search: BatchSearch | None = None
    final_rounds: int = 0
    notes: list[str] = field(default_factory=list)
    run_id: int | None = None
    db_path: str | None = None
    model_fingerprint: str | None = None
    baseline: Config | None = None
    baseline_verdict: dict[str, Any] | None = None
    not_run: list[str] = field(default_factory=list)
    workload: dict[str, Any] | None = None

    # -- the best ---------------------------------------------------------------------------

    @property
    def best_trial(self) -> Trial | None:
        """The winner's trial."""
        return next((t for t in self.trials if t.config == self.best), None)

    @property
    def best_summary(self) -> Summary | None:
        """The winner's images/s in the rung that decided."""
        trial = self.best_trial
        return trial.summary if trial is not None else None

    @property
    def speedup(self) -> Speedup | None:
        """The winner against a script's own configuration (:attr:`baseline`), else the
        simplest configuration timed in a rung with it."""
        winner = self.best_trial
        if winner is None:
            return None
        timed = [t for t in self.trials if t.rung_samples and t.config != self.best]
        # a script's own configuration first (timed with the winner), then the simplest
        for trial in sorted(timed, key=lambda t: (t.config != self.baseline, simplicity(t.config))):
            common = set(trial.rung_samples) & set(winner.rung_samples)
            if common:
                rung = max(common)
                ratio = (
                    summarize(winner.rung_samples[rung]).median
                    / summarize(trial.rung_samples[rung]).median
                )
                return Speedup(ratio, trial.config, rung)
        return None

    # -- what was compared ------------------------------------------------------------------

    def timed_values(self, key: str) -> list[Any]:
        """The values of ``key`` (``precision``, ``jit``) among the trials that were timed, in
        the order first timed: a trial whose setting did not take effect was never timed."""
        values: list[Any] = []
        for trial in self.trials:
            value = getattr(trial.config, key)
            if trial.rung_samples and value not in values:
                values.append(value)
        return values

    def compared(self, key: str) -> bool:
        """Whether the search timed two values or more of ``key``: only then is the winner's
        value a measured verdict (stored for ``setup(...="auto")``)."""
        return len(self.timed_values(key)) > 1

    def settings_searched(self) -> dict[str, dict[str, Any]]:
        """For each setting in :data:`CLAIMED`: the values searched, those timed, whether they
        were compared, and one sentence saying so."""
        out = {}
        for key, name in CLAIMED.items():
            searched = list(getattr(self.space, key))
            timed = self.timed_values(key)
            out[key] = {
                "searched": searched,
                "timed": timed,
                "compared": len(timed) > 1,
                "says": _says(name, key, searched, timed, self.trials),
            }
        return out

    # -- reproducing it ---------------------------------------------------------------------

    def setup_kwargs(self) -> dict[str, Any]:
        """The ``tfaccel.setup(...)`` arguments of the winner: precision, XLA, threads."""
        if self.best is None:
            return {}
        kwargs: dict[str, Any] = {"precision": self.best.precision, "jit": self.best.jit}
        if self.best.threads is not None:
            intra, inter = self.best.threads
            kwargs["threads"] = (intra, inter) if inter is not None else intra
        return kwargs

    def compile_kwargs(self) -> dict[str, Any]:
        """The ``model.compile(...)`` arguments that reproduce the XLA setting and the steps
        per execution (left out when it is Keras' default of 1)."""
        if self.best is None:
            return {}
        kwargs: dict[str, Any] = {"jit_compile": self.best.jit}
        if self.best.steps_per_execution != 1:
            kwargs["steps_per_execution"] = self.best.steps_per_execution
        return kwargs

    def pipeline_kwargs(self) -> dict[str, Any] | None:
        """The ``tfaccel.data.pipeline(source, ...)`` arguments, None for the numpy feed."""
        if self.best is None or self.best.feed != "pipeline":
            return None
        kwargs: dict[str, Any] = {"batch_size": self.best.batch_size}
        kwargs.update(
            {k: v for k, v in self.best.pipeline_knobs().items() if v != KNOB_DEFAULTS[k]}
        )
        return kwargs

    def fit_kwargs(self) -> dict[str, Any]:
        """The ``model.fit(x, y, ...)`` arguments for the numpy feed (``batch_size``)."""
        if self.best is None or self.best.feed != "numpy":
            return {}
        return {"batch_size": self.best.batch_size}

    def code(self) -> str:
        """Python lines that reproduce the winner in a training script, valid as written.

        They start with a comment naming what they assume is defined (:data:`CODE_NAMES`):
        ``build_model()`` returning the Keras model (not compiled), the ``optimizer`` and
        ``loss`` it is compiled with, and the training arrays ``x`` and ``y`` (or, for a
        winner that feeds the script's own dataset, that ``dataset``: :data:`CODE_NAMES_DATASET`).
        """
        if self.best is None:
            return ""
        setup, _, feed = self.apply_lines()
        names = CODE_NAMES_DATASET if self.best.feed == OWN_FEED else CODE_NAMES
        lines = [
            *(f"# {line}" for line in names),
            "import tfaccel",
            f"{setup}  # first, before building the model",
            "model = build_model()",
            f"model.compile(optimizer=optimizer, loss=loss, {kwargs_text(self.compile_kwargs())})",
            *feed,
        ]
        return "\n".join(lines)

    def apply_lines(self) -> tuple[str, str, list[str]]:
        """The statements that apply the winner: ``tfaccel.setup(...)``, ``model.compile(...,
        ...)`` and the feed (``tfaccel.data.pipeline`` then ``fit``, or ``fit`` on the
        arrays), for :meth:`code` and the report's "What to change"."""
        pipeline = self.pipeline_kwargs()
        if self.best is not None and self.best.feed == OWN_FEED:
            feed = ["model.fit(dataset)  # your dataset, as your script builds it"]
        elif pipeline is not None:
            feed = [
                f"dataset = tfaccel.data.pipeline((x, y), {kwargs_text(pipeline)})",
                "model.fit(dataset)",
            ]
        else:
            feed = [f"model.fit(x, y, {kwargs_text(self.fit_kwargs())})"]
        return (
            f"tfaccel.setup({kwargs_text(self.setup_kwargs())})",
            f"model.compile(..., {kwargs_text(self.compile_kwargs())})",
            feed,
        )

    # -- output -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tfaccel tune --json``)."""
        summary = self.best_summary
        speedup = self.speedup
        return {
            "model_name": self.model_name,
            "model_fingerprint": self.model_fingerprint,
            "device": self.device,
            "best": self.best.to_dict() if self.best is not None else None,
            "best_label": self.best.label() if self.best is not None else None,
            "images_per_s": summary.to_dict() if summary is not None else None,
            "reason": self.reason,
            "speedup": None
            if speedup is None
            else {
                "ratio": speedup.ratio,
                "baseline": speedup.baseline.to_dict(),
                "baseline_label": speedup.baseline.label(),
                "rung": speedup.rung,
            },
            "settings": self.settings_searched(),
            "setup": self.setup_kwargs(),
            "compile": self.compile_kwargs(),
            "pipeline": self.pipeline_kwargs(),
            "fit": self.fit_kwargs(),
            "code": self.code(),
            "trials": [t.to_dict() for t in self.trials],
            "space": self.space.to_dict(),
            "batch_search": self.batch_search.to_dict() if self.batch_search else None,
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed_s,
            "final_rounds": self.final_rounds,
            "interrupted": self.interrupted,
            "notes": self.notes,
            "run_id": self.run_id,
            "db_path": self.db_path,
            "baseline": self.baseline.to_dict() if self.baseline is not None else None,
            "baseline_label": self.baseline.label() if self.baseline is not None else None,
            "baseline_verdict": self.baseline_verdict,
            "not_run": list(self.not_run),
            "workload": self.workload,
            "apply": self.run_line(),
        }

    def table(self) -> list[tuple[str, str, str, str, str, str]]:
        """Rows (configuration, images/s median, spread, samples, status, note) of every trial.

        The winner first, then the trials that went furthest (the last rung, fastest first),
        then out of memory, errors and skipped ones. The spread is the interquartile range
        relative to the median, of the samples of the last rung the trial was timed in.
        """
        rows = []
        for trial in sorted(self.trials, key=self._rank):
            summary = trial.summary
            note = "winner" if trial.config == self.best else trial.note
            rows.append(
                (
                    trial.config.label(),
                    f"{summary.median:.0f}" if summary else "-",
                    f"+-{summary.relative_iqr * 100:.1f}%" if summary and summary.n > 1 else "-",
                    str(summary.n) if summary else "0",
                    trial.status,
                    note,
                )
            )
        return rows

    def _rank(self, trial: Trial) -> tuple[int, int, float]:
        summary = trial.summary
        median = summary.median if summary is not None else 0.0
        if trial.config == self.best:
            return (0, 0, 0.0)
        status = ("ok", "dropped", "not applied", "oom", "error", "skipped", "pending")
        group = 1 + (status.index(trial.status) if trial.status in status else len(status))
        return (group, -(trial.last_rung or 0), -median)

    def __str__(self) -> str:
        head = (
            f"tfaccel tune: {self.model_name} on {self.device}, {self.elapsed_s:.0f} s of a "
            f"{self.budget_s:g} s budget"
        )
        if self.interrupted:
            head += " (interrupted: best so far)"
        lines = [head]
        summary = self.best_summary
        if self.best is None or summary is None:
            lines.append("no configuration was timed")
        else:
            best = f"best: {self.best.label()}  {summary.median:.0f} images/s"
            speedup = self.speedup
            if speedup is not None and not (self.baseline_verdict or {}).get("kept"):
                best += (
                    f", x{speedup.ratio:.2f} over {speedup.baseline.label()} (timed together in "
                    f"rung {speedup.rung})"
                )
            lines += [best, f"why: {self.reason}"]
            if self.baseline is not None:
                lines.append(f"yours: {self.baseline.label()}" + self._baseline_text())
            lines += [f"{s['says']}" for s in self.settings_searched().values()]
        lines += ["", *_render_table(self.table())]
        if self.best is not None:
            lines += ["", "reproduce:", *("  " + line for line in self.code().splitlines())]
        run_line = self.run_line()
        if run_line:
            lines += ["", "apply it to the script as it is:", f"  {run_line}"]
        lines += [f"note: {note}" for note in self.notes]
        if self.baseline is not None:
            lines.append(
                "not run in the trials: "
                + (", ".join(self.not_run) if self.not_run else "nothing the script asked")
                + " (the script stopped at its fit; nothing it does there or after ran)"
            )
        if self.run_id is not None:
            lines.append(f"stored as run {self.run_id} in {self.db_path}")
        return "\n".join(lines)

    def run_line(self) -> str | None:
        """For a script tuned as it is: the command that runs it with the winner, and what that
        applies (None: not a script, or no winner)."""
        origin = (self.workload or {}).get("origin") or {}
        script = origin.get("script")
        if not script or self.best is None or self.baseline is None:
            return None
        if (self.baseline_verdict or {}).get("kept") or self.best == self.baseline:
            return f"nothing to apply: {shlex.quote(str(script))} is fastest as it is"
        fit = int(origin.get("fit") or 1)
        words = ["tfaccel", "run", "--tuned"]
        note = ""
        if self.best.batch_size != self.baseline.batch_size:
            words[2] = "--tuned=all"
            note = (
                f"  # --tuned=all: also the batch ({self.baseline.batch_size} -> "
                f"{self.best.batch_size}), which changes the optimisation: scale the learning "
                "rate with it; --tuned keeps your batch"
            )
        if fit != 1:
            words += ["--fit", str(fit)]
        words += [str(script), *(str(a) for a in origin.get("args") or ())]
        return " ".join(shlex.quote(w) for w in words) + note

    def _baseline_text(self) -> str:
        verdict = self.baseline_verdict or {}
        trial = next((t for t in self.trials if t.config == self.baseline), None)
        rate = trial.summary if trial is not None else None
        text = f"  {rate.median:.0f} images/s" if rate is not None else ""
        if verdict.get("kept"):
            return text + " (the answer: keep yours)"
        if verdict.get("ratio") is None:
            return text + " (not timed against the winner)"
        return text + " (timed against the winner, interleaved)"


def _says(name: str, key: str, searched: list[Any], timed: list[Any], trials: list[Trial]) -> str:
    """One sentence on what the search learnt of a setting: compared, or not and why."""

    def shown(value: Any) -> str:
        return ("on" if value else "off") if key == "jit" else str(value)

    if len(timed) > 1:
        return f"{name}: compared {', '.join(shown(v) for v in timed)} (measured)"
    if len(searched) < 2:
        kept = shown(searched[0]) if searched else "-"
        return f"{name}: not searched (kept {kept}), no verdict"
    unapplied = [
        shown(v)
        for v in searched
        if v not in timed
        and any(t.status == "not applied" and getattr(t.config, key) == v for t in trials)
    ]
    only = ", ".join(shown(v) for v in timed) or "none"
    why = f"; {', '.join(unapplied)} did not take effect on the model" if unapplied else ""
    return f"{name}: not compared, only {only} was timed{why}; no verdict"


def kwargs_text(kwargs: Mapping[str, Any]) -> str:
    """Keyword arguments as Python writes them: ``batch_size=256, jit_compile=True``."""
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _render_table(rows: list[tuple[str, str, str, str, str, str]]) -> list[str]:
    header = ("configuration", "images/s", "spread", "n", "status", "note")
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    right = (False, True, True, True, False)
    out = []
    for row in table:
        cells = [row[i].rjust(widths[i]) if right[i] else row[i].ljust(widths[i]) for i in range(5)]
        out.append(("  " + "  ".join([*cells, row[5]])).rstrip())
    return out
