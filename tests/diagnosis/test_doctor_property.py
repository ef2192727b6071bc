"""Property: any Snapshot, however odd, yields a DoctorReport that serialises to JSON."""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from typing import Any, Union

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfaccel.core.errors import SnapshotError
from tfaccel.core.findings import STATUSES
from tfaccel.diagnosis import DoctorReport, diagnose, match_log
from tfaccel.report.findings import findings_html, findings_markdown
from tfaccel.snapshot import Snapshot

# Values that reach the rules' branches, mixed with odd ones: empty, not a version, half a version.
ODD_TEXT = [
    "", " ", "abc", "12", "12.", "12.x.1", "12.5.1", "9", "9.3.0", "7301", "0", "-1", "1", "0,1",
    "99999999999999999999999", "8.6", "12.0", "3.0", "sm_60", "sm_90a", "compute_90", "sm_120",
    "compute_", "0x10de", "0x10DE", "0x030200", "0x03", "nvidia", "nouveau", "Linux", "Windows",
    "Darwin", "x86_64", "AMD64", "aarch64", "arm64", "tensorflow", "tensorflow-cpu",
    "tensorflow_gpu", "tf-nightly", "tensorflow-intel", "cudnn", "cuda", "cudart", "wheel",
    "GPU:0", "/physical_device:GPU:0", "CPU:0", ":", "GPU-", "MIG-1", "void", "none", "true",
    "yes", "--xla_gpu_cuda_data_dir=/nope", "xla", "Driver/library version mismatch",
    "NVML Shared Library Not Found", "/usr/local/cuda/compat/libcuda.so.1", "\x00", "é\u2028\r\n",
]  # fmt: skip
ENV_NAMES = [
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR", "XLA_FLAGS", "TF_XLA_FLAGS", "CUDA_DEVICE_ORDER", "TF_CPP_MIN_LOG_LEVEL",
    "TF_MIN_GPU_MULTIPROCESSOR_COUNT", "TF_GPU_THREAD_MODE", "LD_LIBRARY_PATH",
]  # fmt: skip

odd_text = st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=24))


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for a Snapshot field's annotation, filling every field of nested dataclasses."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return st.one_of([strategy_for(arg) for arg in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp)}
        return st.builds(tp, **fields)
    if origin is list:
        (item,) = typing.get_args(tp)
        return st.lists(strategy_for(item), max_size=3)
    if origin is dict:
        return st.dictionaries(
            st.one_of(st.sampled_from(ENV_NAMES), odd_text), odd_text, max_size=4
        )
    if tp is str:
        return odd_text
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.one_of(st.integers(-20, 300), st.integers())
    if tp is float:
        return st.floats(allow_nan=False)
    raise TypeError(f"no strategy for {tp!r}")


snapshots = strategy_for(Snapshot).map(lambda s: dataclasses.replace(s, schema_version=1))


def check_report(report: DoctorReport) -> None:
    assert isinstance(report, DoctorReport)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["exit_code"] in (0, 1)
    assert all(f["status"] in STATUSES for f in data["findings"])
    assert all(f["id"] and f["title"] for f in data["findings"])
    assert data["exit_code"] == (1 if data["summary"]["fail"] else 0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots)
def test_any_snapshot_yields_a_json_report(snapshot: Snapshot) -> None:
    check_report(diagnose(snapshot))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots)
def test_a_saved_snapshot_gives_the_same_report(snapshot: Snapshot) -> None:
    try:
        replayed = Snapshot.from_dict(json.loads(snapshot.to_json()))
    except SnapshotError as exc:  # beyond 64 bits or not finite: no machine reports it
        assert "holds a number no machine reports" in str(exc)
        return
    assert diagnose(replayed).to_dict() == diagnose(snapshot).to_dict()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(odd_text, st.sampled_from([
    "OOM when allocating tensor with shape[", "Could not load dynamic library '", "\x1b[31m",
    "Ignoring visible gpu device (", "Loaded runtime CuDNN library: ", "\r",
])), max_size=12).map("\n".join))  # fmt: skip
def test_any_text_yields_a_json_log_report(text: str) -> None:
    report = match_log(text)
    json.dumps(report.to_dict())
    assert all(cause.status in ("warn", "fail") for cause in report.causes)
    assert all(cause.source == "log" and cause.evidence for cause in report.causes)
    lines = [(c.numbers["count"], len(c.numbers["line_numbers"])) for c in report.causes]
    assert all(count >= shown >= 1 for count, shown in lines)
    assert report.matched == bool(report.causes)
    doctor = diagnose(Snapshot(), log=text)
    check_report(doctor)
    doc = json.loads(json.dumps(doctor.to_dict()))
    assert findings_markdown(doc) == findings_markdown(doctor)
    tags = {tag.lstrip("/") for tag in re.findall(r"<(/?\w+)", findings_html(doc))}
    assert tags <= {"table", "thead", "tbody", "tr", "th", "td", "span", "small", "br", "p", "b"}


# Fields of a healthy GPU machine that the GPU rules parse; each may be replaced by odd text.
OPTIONAL_TEXT_FIELDS = [
    "tensorflow.version", "tensorflow.cuda_version", "tensorflow.cudnn_version",
    "tensorflow.distribution", "nvml.driver_version", "nvml.cuda_driver_version", "nvml.error",
    "driver.kernel_module_version", "driver.libcuda_file_version",
    "driver.cuda_driver_api_version",
]  # fmt: skip
TEXT_FIELDS = ["platform.system", "platform.machine"]


def set_path(obj: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for name in parents:
        obj = getattr(obj, name)
    setattr(obj, last, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from(OPTIONAL_TEXT_FIELDS), st.one_of(st.none(), odd_text)),
    st.dictionaries(st.sampled_from(TEXT_FIELDS), odd_text),
    st.lists(odd_text, max_size=4),
    st.one_of(st.none(), odd_text),
    st.dictionaries(st.sampled_from(ENV_NAMES), odd_text, max_size=3),
)
def test_gpu_machine_with_odd_versions_yields_a_json_report(
    optional: dict[str, str | None],
    text: dict[str, str],
    targets: list[str],
    cc: str | None,
    env: dict[str, str],
) -> None:
    from machine_scenarios import gpu_machine

    snapshot = gpu_machine()
    for path, value in {**optional, **text}.items():
        set_path(snapshot, path, value)
    snapshot.tensorflow.cuda_compute_capabilities = targets
    snapshot.nvml.gpus[0].compute_capability = cc
    snapshot.cuda_libs[-1].version = cc
    snapshot.env = env
    check_report(diagnose(snapshot))
