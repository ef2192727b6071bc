"""The bug-report bundle (``tfaccel doctor --bundle FILE``): one redacted Markdown file.

It holds the versions that matter (tfaccel, Python, TensorFlow's build, the NVIDIA driver and
CUDA as probed), the doctor's findings as a Markdown table, the log given with ``--log`` and
TensorFlow's own start-up log (``--deep``) as text, then the whole of it as one JSON document
in a ```json block (``{"tfaccel_bundle": 1, "versions": ..., "doctor": ..., "snapshot": ...}``:
the ``doctor`` part is ``tfaccel doctor --json``'s document, the ``snapshot`` part replays with
``tfaccel doctor --snapshot``). It ends with what was redacted: the kinds and how many, never
the values.

Everything that goes in is redacted first (:mod:`tfaccel.diagnosis.redact`), the JSON value by
value (so it stays valid JSON), against the identity of this machine
(:func:`tfaccel.probe.identity.collect`) and the host name the snapshot recorded.
:func:`build_bundle` is pure; :func:`write_bundle` writes it atomically.

Example:
    >>> from tfaccel.diagnosis import diagnose
    >>> from tfaccel.probe.identity import Identity
    >>> from tfaccel.snapshot import Snapshot
    >>> snap = Snapshot(tfaccel_version="0.1.0")
    >>> snap.platform.python_executable = "/home/alice/venv/bin/python"
    >>> bundle = build_bundle(snap, diagnose(snap), Identity(users=("alice",)))
    >>> "/home/<user>/venv/bin/python" in bundle.text, "alice" in bundle.text
    (True, False)
    >>> bundle.redacted
    {'home': 2}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel.core.files import write_atomic
from tfaccel.core.jsonout import dumps
from tfaccel.core.markup import md_line
from tfaccel.core.units import fmt_bytes
from tfaccel.diagnosis.redact import KINDS, PLACEHOLDERS, Redactor
from tfaccel.probe import identity as probe_identity
from tfaccel.probe.identity import Identity
from tfaccel.report.findings import findings_markdown
from tfaccel.snapshot import Snapshot

if TYPE_CHECKING:
    from tfaccel.diagnosis import DoctorReport, LogText

__all__ = ["BUNDLE_VERSION", "MAX_LOG_CHARS", "Bundle", "build_bundle", "write_bundle"]

BUNDLE_VERSION = 1
MAX_LOG_CHARS = 200_000
"""The most of a log a bundle holds: its first quarter and its last three quarters of this
(a log's cause is most often near its end). The deep probe already keeps only the last
200,000 characters of TensorFlow's log; a ``--log`` file may be longer."""


@dataclass(frozen=True)
class Bundle:
    """A bug-report bundle, redacted.

    Attributes:
        text: the Markdown file.
        redacted: how many replacements of each kind (:data:`tfaccel.diagnosis.redact.KINDS`)
            the file holds; kinds with none left out.
        unredacted_names: user and host names too short or too common to be redacted as words
            (``root``); they are still taken out of home paths and the ``hostname`` field.
    """

    text: str
    redacted: dict[str, int]
    unredacted_names: int = 0


def build_bundle(
    snapshot: Snapshot | None,
    report: DoctorReport,
    identity: Identity | None = None,
    *,
    log: str | LogText | None = None,
) -> Bundle:
    """The bundle of a doctor's run, redacted against ``identity`` (pure).

    Args:
        snapshot: what was probed (None when nothing was: the file then says so).
        report: the doctor's report on it.
        identity: the strings of this machine to redact (``tfaccel.probe.identity.collect()``);
            the host name ``snapshot`` recorded is added to it.
        log: the log given with ``--log`` (its text or the :class:`LogText` read), or None.

    Returns:
        A :class:`Bundle`.
    """
    me = identity if identity is not None else Identity()
    if snapshot is not None and snapshot.platform.hostname:
        me = me.merged(Identity(hosts=(snapshot.platform.hostname,)))
    snap_doc = snapshot.to_dict() if snapshot is not None else None
    redactor = Redactor(me, keep=_versions(snap_doc))
    versions = redactor.value(_version_rows(snapshot))
    doctor = redactor.value(report.to_dict())
    snap_json = redactor.value(snap_doc)
    log_text = log if isinstance(log, str) or log is None else log.text
    log_source = None if log is None or isinstance(log, str) else log.source
    given_log = redactor.text(_cut(log_text)) if log_text is not None else None
    source = redactor.text(log_source) if log_source else None
    deep = snapshot.deep if snapshot is not None else None
    deep_log = redactor.text(_cut(deep.log)) if deep is not None and deep.ran else None
    counts = redactor.counts()

    out = [
        "# tfaccel doctor bundle",
        "",
        "Made by `tfaccel doctor --bundle` to attach to a bug report. User names, home paths, "
        "host names, IP and MAC addresses and secret values were replaced by placeholders "
        "such as `<user>` (see *What was redacted* at the end); read it before you share it.",
        "",
        "## Versions",
        "",
        *(f"- **{md_line(name)}**: {md_line(value)}" for name, value in versions.items()),
        "",
        "## Findings",
        "",
        findings_markdown(doctor).rstrip("\n"),
        "",
    ]
    if given_log is not None:
        out += ["## The log given with --log", ""]
        if source:
            out += [f"From {md_line(source)}.", ""]
        out += [_fenced(given_log, "text"), ""]
    out += ["## TensorFlow's start-up log", ""]
    if deep_log is not None:
        out += ["What TensorFlow logged when `tfaccel doctor --deep` imported it:", ""]
        out += [_fenced(deep_log or "(nothing)", "text"), ""]
    else:
        out += ["Not recorded: run `tfaccel doctor --deep --bundle FILE` to add it.", ""]
    document = {
        "tfaccel_bundle": BUNDLE_VERSION,
        "versions": versions,
        "doctor": doctor,
        "snapshot": snap_json,
        "redacted": counts,
    }
    out += [
        "## JSON",
        "",
        "The versions, the doctor's report (`tfaccel doctor --json`) and the snapshot "
        "(save the `snapshot` part as a file to replay it: `tfaccel doctor --snapshot FILE`).",
        "",
        _fenced(dumps(document), "json"),
        "",
        *_redaction_section(counts, redactor.unredacted_names),
    ]
    return Bundle("\n".join(out), counts, redactor.unredacted_names)


def write_bundle(
    path: str | os.PathLike[str],
    report: DoctorReport,
    snapshot: Snapshot | None,
    *,
    identity: Identity | None = None,
    log: str | LogText | None = None,
    argument_name: str = "path",
) -> Bundle:
    """Build the bundle and write it to ``path`` atomically.

    Args:
        path: the file to write.
        report: the doctor's report (``tfaccel.doctor()``, ``tfaccel.diagnosis.diagnose``).
        snapshot: what it was made of (``tfaccel.probe.snapshot()``), or None.
        identity: what to redact; default: this machine's (``tfaccel.probe.identity.collect()``).
        log: the log that was diagnosed, if any.
        argument_name: the argument that gave ``path``, named in an error.

    Raises:
        UsageError: the file cannot be written there.
    """
    if identity is None:
        identity = probe_identity.collect()
    bundle = build_bundle(snapshot, report, identity, log=log)
    write_atomic(path, bundle.text, argument_name=argument_name)
    return bundle


# -- the parts ---------------------------------------------------------------------------------


def _version_rows(snap: Snapshot | None) -> dict[str, str]:
    if snap is None:
        return {"snapshot": "this machine was not probed"}
    p, tf, nvml, driver = snap.platform, snap.tensorflow, snap.nvml, snap.driver
    rows = {
        "tfaccel": snap.tfaccel_version or "?",
        "Python": f"{p.python_version or '?'} on {p.system or '?'} {p.release} {p.machine}".strip(),
    }
    if p.is_wsl or p.in_container:
        rows["Python"] += (
            " ("
            + ", ".join(
                n for n, on in (("WSL", p.is_wsl), ("in a container", p.in_container)) if on
            )
            + ")"
        )
    if tf.installed:
        build = "CUDA build" if tf.is_cuda_build else "CPU-only build"
        if tf.is_rocm_build:
            build = "ROCm build"
        if tf.cuda_version or tf.cudnn_version:
            build += f" (CUDA {tf.cuda_version or '?'}, cuDNN {tf.cudnn_version or '?'})"
        if tf.cuda_compute_capabilities:
            build += ", compute capabilities " + " ".join(tf.cuda_compute_capabilities)
        if not tf.build_info_found:
            build = "build information not found"
        rows["TensorFlow"] = f"{tf.distribution or 'tensorflow'} {tf.version or '?'}, {build}"
    else:
        rows["TensorFlow"] = "not installed" + (f" ({tf.error})" if tf.error else "")
    if nvml.available:
        supports = (
            f" (supports CUDA {nvml.cuda_driver_version})" if nvml.cuda_driver_version else ""
        )
        rows["NVIDIA driver"] = f"{nvml.driver_version or '?'}{supports}"
    elif driver.kernel_module_version:
        rows["NVIDIA driver"] = (
            f"{driver.kernel_module_version} (kernel module; NVML: {nvml.error})"
        )
    else:
        rows["NVIDIA driver"] = f"not found (NVML: {nvml.error or 'not available'})"
    if driver.cuda_driver_api_version:
        rows["CUDA driver API"] = driver.cuda_driver_api_version
    for gpu in nvml.gpus:
        memory = (
            f", {fmt_bytes(total, unit='GiB', digits=0)}"
            if (total := gpu.memory_total_bytes)
            else ""
        )
        cc = f", compute capability {gpu.compute_capability}" if gpu.compute_capability else ""
        rows[f"GPU {gpu.index}"] = f"{gpu.name}{cc}{memory}"
    if snap.cuda_libs:
        rows["CUDA libraries"] = ", ".join(
            f"{lib.soname} {lib.version or ''} {'loaded' if lib.loaded else 'MISSING'}".replace(
                "  ", " "
            )
            for lib in snap.cuda_libs
        )
    wheels = [d for d in snap.distributions if d.name.lower().startswith("nvidia-")]
    if wheels:
        rows["NVIDIA wheels"] = ", ".join(f"{d.name} {d.version}" for d in wheels)
    deep = snap.deep
    if deep is None or not deep.ran:
        rows["TensorFlow import"] = "not run (add --deep)"
    else:
        devices = ", ".join(deep.physical_devices) or "no devices"
        outcome = "ok" if deep.ok else f"failed: {deep.error or 'see its log'}"
        took = f" in {deep.duration_s:.1f} s" if deep.duration_s is not None else ""
        rows["TensorFlow import"] = f"{deep.tf_version or '?'} imported{took}, {outcome}; {devices}"
    rows["probed at"] = snap.created_at or "?"
    return rows


def _versions(doc: Any, key: str = "") -> set[str]:
    """Every text a snapshot holds under a key that names a version (never an IP address)."""
    found: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            found |= _versions(v, str(k))
    elif isinstance(doc, list):
        for v in doc:
            found |= _versions(v, key)
    elif isinstance(doc, str) and "version" in key.lower():
        found |= set(re.findall(r"\d+(?:\.\d+)+", doc))
    return found


def _cut(text: str) -> str:
    if len(text) <= MAX_LOG_CHARS:
        return text
    head, tail = MAX_LOG_CHARS // 4, MAX_LOG_CHARS - MAX_LOG_CHARS // 4
    left_out = len(text) - head - tail
    return (
        f"{text[:head]}\n[... {left_out:,} characters left out of the bundle ...]\n{text[-tail:]}"
    )


def _redaction_section(counts: dict[str, int], unredacted_names: int) -> list[str]:
    out = ["## What was redacted", ""]
    if counts:
        out += ["| kind | placeholder | replaced |", "|---|---|---|"]
        out += [f"| {KINDS[kind]} | {_SHOWN_AS[kind]} | {n} |" for kind, n in counts.items()]
    else:
        out += ["Nothing: no user name, home path, host name, address or secret was found."]
    out += [
        "",
        "Only the kinds and counts are written here, never the values. Kept on purpose: "
        "version numbers, "
        "loopback and unspecified addresses (127.0.0.1, ::1, 0.0.0.0), netmasks, PCI bus ids "
        "and GPU UUIDs.",
    ]
    if unredacted_names:
        out += [
            "",
            f"{unredacted_names} user or host name(s) of this machine are too short or too "
            "common (such as root) to be redacted as words; they were still taken out of home "
            "paths and of the snapshot's hostname field.",
        ]
    return [*out, ""]


_SHOWN_AS = {
    **{kind: f"`{placeholder}`" for kind, placeholder in PLACEHOLDERS.items()},
    "home": "`/home/<user>`, `C:\\Users\\<user>`, `<home>`",
    "secret": "`<secret>`, `<user>:<secret>@`",
}


def _fenced(text: str, lang: str) -> str:
    """``text`` in a fenced block no line of it can close: a fence longer than any run of
    backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"
