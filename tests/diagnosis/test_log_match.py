"""The log matcher: real logs from public issues, TF >= 2.18 absl prefixes, noise, bad input."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from tfaccel.core.errors import LogInputError
from tfaccel.core.findings import Finding
from tfaccel.diagnosis import LogReport, LogText, diagnose, match_log, read_log_file
from tfaccel.diagnosis.log.patterns import CAUSES
from tfaccel.snapshot import Snapshot

LOGS = Path(__file__).parents[1] / "data" / "doctor-logs"
INDEX = [json.loads(line) for line in (LOGS / "index.jsonl").read_text().splitlines() if line]
ABSL = "E0000 00:00:1727000000.123456   12345 "  # TF >= 2.18 prefix


def cause_ids(report: LogReport, status: str | None = None) -> list[str]:
    return [c.id for c in report.causes if status is None or c.status == status]


def shown_lines(cause: Finding) -> list[tuple[int, str]]:
    """The ``line N: text`` evidence of a cause, as (N, text)."""
    pairs = [e.split(": ", 1) for e in cause.evidence if e.startswith("line ")]
    return [(int(head.removeprefix("line ")), text) for head, text in pairs]


def details(cause: Finding) -> list[str]:
    """The evidence read from the lines: neither a line nor the count of lines."""
    return [
        e for e in cause.evidence if not e.startswith("line ") and "matching lines in all" not in e
    ]


# --------------------------------------------------------------------------- shared logs


@pytest.mark.parametrize("entry", [e for e in INDEX if e["cause"]], ids=lambda e: e["file"])
def test_each_public_issue_log_yields_its_cause(entry: dict[str, str]) -> None:
    report = match_log(read_log_file(str(LOGS / entry["file"])))
    assert cause_ids(report, "fail") == [entry["cause"]]
    assert cause_ids(report) == [entry["cause"]]
    cause = report.causes[0]
    assert cause.source == "log" and cause.title == CAUSES[entry["cause"]].title
    assert shown_lines(cause) and cause.numbers["count"] >= 1
    assert [n for n, _ in shown_lines(cause)] == cause.numbers["line_numbers"]
    assert cause.fix == CAUSES[entry["cause"]].fix
    assert report.matched


def test_clean_cpu_startup_has_no_cause_and_labels_benign_lines() -> None:
    report = match_log(read_log_file(str(LOGS / "clean_cpu_startup.log")))
    assert report.causes == []
    assert not report.matched
    labels = {b.label: (b.count, b.first_line) for b in report.benign}
    assert labels["absl logging not yet initialised"] == (2, 1)
    assert labels["oneDNN notice (results may differ in the last bits)"] == (2, 2)
    assert labels["CPU instructions notice"] == (2, 3)
    assert report.summary == f"no known cause matched; {report.line_count} lines read"
    assert (
        diagnose(Snapshot(), log=read_log_file(str(LOGS / "clean_cpu_startup.log"))).exit_code == 0
    )


def test_details_are_extracted_from_the_shared_logs() -> None:
    def details_of(name: str) -> list[str]:
        return details(match_log((LOGS / name).read_text()).causes[0])

    assert details_of("10_missing_cuda_libs.log") == [
        "missing libcusolver.so.11",
        "missing libcudnn.so.8",
    ]
    assert details_of("13_cudnn_mismatch.log") == [
        "loaded cuDNN 7301 (7.3.1), TensorFlow built with 7003 (7.0.3)"
    ]
    assert details_of("17_cc_too_low.log") == [
        "GeForce GTX 660M: compute capability 3.0 < minimum 3.5"
    ]
    assert details_of("23_driver_older_than_ptx.log") == [
        "driver's CUDA 12.4 < PTX compiler 12.5.82"
    ]
    assert details_of("27_oom.log") == [
        "tensor shape [5760,4,4,2048]: 188,743,680 elements, 720.0 MiB as float32"
    ]


# --------------------------------------------------------------------------- message variants


ABSL_VARIANTS = [
    (
        "cuda_dnn.cc:535] Loaded runtime CuDNN library: 9.1.0 but source was compiled with: 9.3.0."
        "  CuDNN library needs to have matching major version and equal or higher minor version.",
        "cudnn_mismatch",
        "fail",
    ),
    (
        "gpu_device.cc:2344] Cannot dlopen some GPU libraries. Please make sure the missing "
        "libraries mentioned above are installed properly. Skipping registering GPU devices...",
        "missing_cuda_libs",
        "fail",
    ),
    (
        "cuda_executor.cc:1001] failed call to cuInit: INTERNAL: CUDA error: Failed call to "
        "cuInit: UNKNOWN ERROR (303)",
        "no_driver_or_hidden",
        "warn",  # the error does not say why CUDA did not start
    ),
    (
        "cuda_driver.cc:282] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device "
        "is detected",
        "no_driver_or_hidden",
        "fail",
    ),
    (
        "cuda_executor.cc:1015] Could not find cuda drivers on your machine, GPU will not be used.",
        "no_driver_or_hidden",
        "fail",
    ),
    (
        "gpu_device.cc:2431] TensorFlow was not built with CUDA kernel binaries compatible with "
        "compute capability 12.0. CUDA kernels will be jit-compiled from PTX, which could take "
        "30 minutes or longer.",
        "cc_too_new",
        "fail",
    ),
    (
        "gpu_device.cc:2431] TensorFlow was not built with CUDA kernel binaries compatible with "
        "compute capability 9.0. CUDA kernels will be jit-compiled from PTX, which could take "
        "30 minutes or longer.",
        "cc_too_new",
        "warn",
    ),
    (
        "gpu_device.cc:2365] Ignoring visible gpu device (device: 1, name: NVIDIA GeForce GT 710, "
        "pci bus id: 0000:02:00.0, compute capability: 3.5) with core count: 1. The minimum "
        "required count is 8. You can adjust this requirement with the env var "
        "TF_MIN_GPU_MULTIPROCESSOR_COUNT.",
        "gpu_too_few_cores",
        "warn",
    ),
    (
        "nvptx_compiler.cc:930] The NVIDIA driver's CUDA version is 12.2 which is older than the "
        "ptxas CUDA version (12.3.107). Because the driver is older than the ptxas version, XLA is "
        "disabling parallel compilation, which may slow down compilation.",
        "driver_older_than_ptx",
        "fail",
    ),
    (
        "cuda_diagnostics.cc:135] kernel version 535.54.3 does not match DSO version 550.54.14 -- "
        "cannot find working devices in this configuration",
        "driver_mismatch",
        "fail",
    ),
    ("libdevice not found at ./libdevice.10.bc", "xla_libdevice_ptxas", "fail"),
    (
        "bfc_allocator.cc:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.25GiB "
        "(rounded to 2415919104)requested by op Conv2D",
        "oom",
        "fail",
    ),
    (
        "bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.23GiB "
        "with freed_by_count=0. The caller indicates that this is not a failure, but this may mean "
        "that there could be performance gains if more memory were available.",
        "oom",
        "warn",
    ),
    (
        "cuda_driver.cc:1000] failed to allocate 3.81G (4089446400 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "oom",
        "fail",
    ),
    ("RuntimeError: CUDA build is not supported for Windows", "windows_native", "fail"),
    (
        "cpu_feature_guard.cc:37] The TensorFlow library was compiled to use AVX instructions, "
        "but these aren't available on your machine.",
        "cpu_no_avx",
        "fail",
    ),
]


@pytest.mark.parametrize(("message", "cause", "status"), ABSL_VARIANTS)
@pytest.mark.parametrize(
    "prefix",
    [
        ABSL,
        "2020-01-19 11:16:48.866550: E tensorflow/stream_executor/cuda/",
        "W external/local_xla/xla/",
    ],
)
def test_message_matches_under_any_prefix(
    prefix: str, message: str, cause: str, status: str
) -> None:
    report = match_log(prefix + message + "\n")
    assert [(c.id, c.status) for c in report.causes] == [(cause, status)]
    [(number, shown)] = shown_lines(report.causes[0])
    assert number == 1 and shown.startswith(prefix.strip())


def test_oom_with_type_gives_size_in_the_details() -> None:
    line = (
        ABSL + "OOM when allocating tensor with shape[64,3,224,224] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"
    )
    cause = match_log(line).causes[0]
    assert details(cause) == ["tensor shape [64,3,224,224]: 9,633,792 elements, 36.8 MiB as float"]


def test_illegal_instruction_and_tensorflow_gpu_pip_error() -> None:
    report = match_log("$ python -c 'import tensorflow'\nIllegal instruction (core dumped)\n")
    assert cause_ids(report) == ["cpu_no_avx"]
    pip = "ERROR: No matching distribution found for tensorflow-gpu==2.12.0"
    assert cause_ids(match_log(pip)) == ["tensorflow_gpu_deprecated"]


def test_ansi_colours_and_carriage_returns_are_stripped() -> None:
    text = (
        "Epoch 1/5\r 1/90 [..] - ETA: 9s\r 2/90 [..]\x1b[31m ResourceExhaustedError: OOM when "
        "allocating tensor with shape[256,64,112,112]\x1b[0m\n"
    )
    report = match_log(text)
    assert cause_ids(report) == ["oom"]
    [(number, shown)] = shown_lines(report.causes[0])
    assert number == 3
    assert "\x1b" not in shown and shown.startswith("2/90")


# --------------------------------------------------------------------------- benign and structure


def test_benign_noise_is_labelled_and_never_a_cause() -> None:
    text = "\n".join(
        [
            ABSL + "cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register "
            "factory for plugin cuDNN when one has already been registered",
            ABSL + "cuda_fft.cc:607] Unable to register cuFFT factory: Attempting to register "
            "factory for plugin cuFFT when one has already been registered",
            ABSL + "cuda_blas.cc:1515] Unable to register cuBLAS factory: Attempting to register "
            "factory for plugin cuBLAS when one has already been registered",
            "I0000 00:00:1727.1 1 cuda_executor.cc:1001] could not open file to read NUMA node: "
            "/sys/bus/pci/devices/0000:00:04.0/numa_node",
            "successful NUMA node read from SysFS had negative value (-1), but there must be at "
            "least one NUMA node, so returning NUMA node zero.",
            "W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
            "find TensorRT",
            "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
            "dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open shared "
            "object file",
            "I0000 00:00:1727.2 1 gpu_device.cc:2022] Created device /job:localhost/replica:0/"
            "task:0/device:GPU:0 with 22282 MB memory:  -> device: 0, name: NVIDIA A10G",
        ]
    )
    report = match_log(text)
    assert report.causes == []
    labels = {b.label: b.count for b in report.benign}
    assert labels == {
        "duplicate CUDA plugin registration (cuDNN/cuFFT/cuBLAS factory)": 3,
        "NUMA node unknown (normal in VMs and containers)": 2,
        "TensorRT not found (only TF-TRT needs it)": 2,
        "TensorFlow created a GPU device": 1,
    }
    assert [b.first_line for b in report.benign] == [1, 4, 6, 8]


def test_nothing_matched_says_so() -> None:
    report = match_log("hello\nworld\n")
    assert not report.matched
    assert report.summary == "no known cause matched; 2 lines read"
    data = report.to_dict()
    assert data["matched"] is False and data["causes"] == [] and data["line_count"] == 2


UNREAD_LOG = """\
2024-03-01 10:00:00.000000: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized to use available CPU instructions
2024-03-01 10:00:01.000000: E tensorflow/core/kernels/x.cc:77] INTERNAL: a message nobody catalogued
E0000 00:00:1727000000.123456   12345 y.cc:9] INTERNAL: a message nobody catalogued
E0000 00:00:1727000000.123456   12345 y.cc:9] INTERNAL: a message nobody catalogued
F0000 00:00:1727000001.000000   12345 z.cc:3] Check failed: ptr != nullptr
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    model.fit(x)
KeyboardInterrupt
ERROR:tensorflow:something went wrong
W0000 00:00:1727000000.123456   12345 gpu_device.cc:2344] Cannot dlopen some GPU libraries.
this line mentions an Error: in prose and is not one
"""


def test_error_lines_no_cause_claims_are_quoted_once_per_message() -> None:
    report = match_log(UNREAD_LOG, source="run.log")
    assert cause_ids(report) == ["missing_cuda_libs"]
    assert [(u.line, u.text[:40]) for u in report.unrecognised] == [
        (2, "2024-03-01 10:00:01.000000: E tensorflow"),
        (5, "F0000 00:00:1727000001.000000 12345 z.cc"),
        (9, "KeyboardInterrupt"),
        (10, "ERROR:tensorflow:something went wrong"),
    ]
    assert report.unrecognised_count == 4
    assert report.summary.endswith("; 4 error line(s) not recognised")
    data = report.to_dict()
    assert data["unrecognised"][0] == {"line": 2, "text": report.unrecognised[0].text}
    assert data["next_step"].startswith("tfaccel doctor --log run.log --bundle ")


def test_unrecognised_lines_are_trimmed_and_capped() -> None:
    text = "".join(
        f"E0000 00:00:1.0 1 op.cc:{i}] INTERNAL: failure {i} {'x' * 400}\n" for i in range(9)
    )
    report = match_log(text)
    assert report.unrecognised_count == 9 and len(report.unrecognised) == 5
    assert all(len(u.text) == 200 and u.text.endswith("...") for u in report.unrecognised)
    assert (
        report.summary == "no known cause matched, but 9 error line(s) not recognised; 9 lines read"
    )


def test_a_pasted_fence_is_never_quoted_as_an_error_and_fenced_errors_are() -> None:
    """As issue pastes are: a traceback cut before its exception, then a closing fence (the
    fence is not the error); an error right after an opening fence; TensorFlow 1's
    ``XError (see above for traceback): ...``."""
    text = (
        "```\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "    import tensorflow as tf\n"
        "```\n"
        "```InvalidArgumentError: indices[3] = 7 is not in [0, 5)\n"
        "InvalidArgumentError (see above for traceback): assertion failed: [x > 0]\n"
    )
    report = match_log(text)
    assert [(u.line, u.text) for u in report.unrecognised] == [
        (6, "```InvalidArgumentError: indices[3] = 7 is not in [0, 5)"),
        (7, "InvalidArgumentError (see above for traceback): assertion failed: [x > 0]"),
    ]


def test_ptxas_that_failed_to_launch_is_benign_where_tensorflow_says_it_goes_on() -> None:
    """TensorFlow's autotuner without a ptxas on the PATH: "Failed to launch ptxas", then
    "Relying on driver to perform ptx compilation." (it trains on). The same line alone, as
    an XLA compilation's error, stays the cause."""
    relying = (
        "W tensorflow/stream_executor/gpu/redzone_allocator.cc:314] Internal: Failed to launch "
        "ptxas\nRelying on driver to perform ptx compilation.\nModify $PATH to customize ptxas "
        "location.\nThis message will be only logged once.\n"
    )
    report = match_log(relying)
    assert cause_ids(report) == [] and report.unrecognised == []
    assert [b.label for b in report.benign] == [
        "ptxas not run: TensorFlow compiles PTX with the driver instead (the run goes on)"
    ]
    alone = "E0000 00:00:1.0 7 nvptx_compiler.cc:9] INTERNAL: Failed to launch ptxas\n"
    assert cause_ids(match_log(alone)) == ["xla_libdevice_ptxas"]
    # the anchor itself wrapped over two lines (claimed as one message), then going on
    wrapped = (
        "W tensorflow/stream_executor/gpu/redzone_allocator.cc:314] Internal: Failed to\n"
        "launch ptxas\nRelying on driver to perform ptx compilation.\n"
    )
    assert cause_ids(match_log(wrapped)) == []
    # a real XLA failure in the same message keeps its cause
    both = (
        "W foo.cc:1] Internal: Failed to launch ptxas\nRelying on driver to perform ptx "
        "compilation.\nE1 x.cc:1] ptxas not found\n"
    )
    assert cause_ids(match_log(both)) == ["xla_libdevice_ptxas"]
    # a failure that is no relieved message is not called benign for the words after it
    failed = (
        "E0000 00:00:1.0 7 nvptx_compiler.cc:9] INTERNAL: ptxas not found\n"
        "Relying on driver to perform ptx compilation.\n"
    )
    report = match_log(failed)
    assert cause_ids(report) == ["xla_libdevice_ptxas"] and report.benign == []


def test_benign_and_claimed_error_lines_are_not_unrecognised() -> None:
    text = (
        f"{ABSL}cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register\n"
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[8,1024]\n"
    )
    report = match_log(text)
    assert report.unrecognised == [] and report.unrecognised_count == 0
    assert report.to_dict()["next_step"] is None


def test_clean_logs_of_the_corpus_hold_no_unrecognised_error() -> None:
    corpus = Path(__file__).parents[1] / "data" / "doctor-corpus"
    for index in sorted(corpus.glob("index-*.jsonl")):
        for line in index.read_text().splitlines():
            entry = json.loads(line)
            if entry["cause"] in ("", None, "clean"):
                report = match_log(read_log_file(str(corpus / entry["file"])))
                assert report.unrecognised == [], entry["file"]


def test_several_causes_in_file_order_with_line_numbers_and_capped_lines() -> None:
    oom = "OOM when allocating tensor with shape[32,1024,1024]"
    lines = ["start", "Could not load dynamic library 'libcudnn.so.8'; dlerror: not found"]
    lines += [f"{oom} step {i}" for i in range(8)]
    report = match_log("\n".join(lines))
    assert cause_ids(report) == ["missing_cuda_libs", "oom"]
    missing, out_of_memory = report.causes
    assert shown_lines(missing) == [(2, lines[1])]
    assert missing.evidence == ["missing libcudnn.so.8", f"line 2: {lines[1]}"]
    assert out_of_memory.numbers == {
        "count": 8,
        "line_numbers": [3, 4, 5, 6, 7],
        "strength": "message",
    }
    assert [n for n, _ in shown_lines(out_of_memory)] == [3, 4, 5, 6, 7]
    assert out_of_memory.evidence[-1] == "8 matching lines in all"
    data = report.to_dict()["causes"][1]
    assert data == out_of_memory.to_dict() and data["source"] == "log"


def test_findings_retag_the_causes_without_changing_the_report() -> None:
    report = match_log("failed call to cuInit: CUDA_ERROR_NO_DEVICE")
    (deep,) = report.findings(source="deep")
    assert deep.source == "deep" and deep.id == "no_driver_or_hidden"
    assert report.causes[0].source == "log"
    assert (deep.status, deep.evidence, deep.fix) == (
        report.causes[0].status,
        report.causes[0].evidence,
        report.causes[0].fix,
    )


def test_a_line_counts_for_one_cause_only() -> None:
    line = "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    report = match_log(line)
    assert [(c.id, c.numbers["count"]) for c in report.causes] == [("no_driver_or_hidden", 1)]
    mismatch = "failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported"
    assert cause_ids(match_log(mismatch)) == ["driver_mismatch"]


def test_very_long_string_is_scanned_in_head_and_tail() -> None:
    filler = "x" * 99 + "\n"
    text = "OOM when allocating tensor with shape[1]\n" + filler * 100_000
    text += "failed call to cuInit: CUDA_ERROR_NO_DEVICE\n" + filler * 400_000
    text += "Illegal instruction\n"
    report = match_log(text)
    assert cause_ids(report) == ["oom", "cpu_no_avx"]  # the middle one was skipped
    assert "scanned the first 8 Mi and the last 24 Mi" in report.notes[0]


# --------------------------------------------------------------------------- read_log_file


def test_read_log_file_missing(tmp_path: Path) -> None:
    with pytest.raises(LogInputError) as info:
        read_log_file(str(tmp_path / "nope.log"))
    message = str(info.value)
    assert "does not exist" in message
    assert "Expected:" in message and "Received: no such file" in message and "Fix:" in message


def test_read_log_file_directory(tmp_path: Path) -> None:
    with pytest.raises(LogInputError, match="is a directory"):
        read_log_file(str(tmp_path))


@pytest.mark.parametrize(("content", "what"), [(b"", "is empty"), (b"  \n\t\n", "only whitespace")])
def test_read_log_file_empty_or_whitespace(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(content)
    with pytest.raises(LogInputError, match=what):
        read_log_file(str(path))


def test_read_log_file_binary_with_nul_bytes(tmp_path: Path) -> None:
    path = tmp_path / "model.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n\x00\x00\x00\x00" + bytes(range(256)) * 10)
    with pytest.raises(LogInputError, match="NUL bytes"):
        read_log_file(str(path))


def test_read_log_file_mostly_undecodable(tmp_path: Path) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(128, 256)) * 100)
    with pytest.raises(LogInputError, match="undecodable"):
        read_log_file(str(path))


def test_read_log_file_without_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.log"
    path.write_text("OOM when allocating tensor with shape[1]\n")
    if os.geteuid() != 0:  # root reads anything: fake the refusal there
        path.chmod(0)
    else:

        def refuse(*args: object, **kwargs: object) -> None:
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(LogInputError) as info:
        read_log_file(str(path))
    assert "cannot be read" in str(info.value)
    assert "Permission denied" in str(info.value)
    assert "chmod u+r" in str(info.value)


def test_read_log_file_dash_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (LOGS / "27_oom.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    log = read_log_file("-")
    assert log.source == "<stdin>" and not log.partial
    assert cause_ids(match_log(log)) == ["oom"]
    assert match_log(log).source == "<stdin>"


def test_read_log_file_empty_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(LogInputError, match="Standard input is empty"):
        read_log_file("-")


def test_read_log_file_big_stdin_keeps_head_and_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    block = (b"y" * 1023 + b"\n") * 1024
    data = b"Illegal instruction\n" + block * 40 + b"OOM when allocating tensor with shape[2]\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    log = read_log_file("-")
    assert log.partial and log.size_bytes == len(data)
    assert cause_ids(match_log(log)) == ["cpu_no_avx", "oom"]


def test_read_log_file_utf16_from_powershell(tmp_path: Path) -> None:
    path = tmp_path / "ps.log"
    path.write_bytes((LOGS / "07_no_driver_or_hidden.log").read_text().encode("utf-16"))
    log = read_log_file(str(path))
    assert cause_ids(match_log(log)) == ["no_driver_or_hidden"]
    assert log.notes == ["decoded as utf-16 (byte-order mark)"]


def test_read_log_file_invalid_utf8_is_replaced_not_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.log"
    path.write_bytes("Gerät: ".encode("latin-1") + b"OOM when allocating tensor with shape[4]\n")
    assert cause_ids(match_log(read_log_file(path))) == ["oom"]


def test_read_log_file_200_mb_scans_head_and_tail_only(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    line = b"I0000 00:00:1727.1 1 training.py:10] step done, loss=0.123\n"
    block = line * (2**20 // len(line))
    with path.open("wb") as fh:
        fh.write(b"W0000 00:00:1.0 1 gpu_device.cc:2344] Cannot dlopen some GPU libraries.\n")
        for i in range(200):
            fh.write(block)
            if i == 100:  # in the skipped middle: must not be seen
                fh.write(b"Illegal instruction\n")
        fh.write(b"OOM when allocating tensor with shape[1024,1024,256] and type float\n")
    size = path.stat().st_size
    try:
        log = read_log_file(str(path))
    finally:
        path.unlink()  # do not leave 200 MB in pytest's kept temporary directories
    assert isinstance(log, LogText) and log.partial
    assert log.size_bytes == size > 199 * 2**20
    assert log.bytes_scanned == 32 * 2**20
    assert "scanned the first 8 MiB and the last 24 MiB" in log.notes[0]
    report = match_log(log)
    assert cause_ids(report) == ["missing_cuda_libs", "oom"]
    assert report.notes == log.notes
    assert report.to_dict()["bytes_scanned"] == 32 * 2**20


def test_read_log_file_stdin_that_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: object) -> int:
            raise OSError("reading from stdin while output is captured")

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Closed())))
    with pytest.raises(LogInputError, match="Standard input cannot be read"):
        read_log_file("-")


@pytest.mark.parametrize(
    ("line", "status", "detail"),
    [
        (  # tensorflow/python/summary/tb_summary.py (TF >= 2.16), stared/livelossplot#152
            "tensorflow.python.summary.tb_summary.TBNotInstalledError: TensorBoard is not "
            "installed, missing implementation for tf.summary.scalar",
            "fail",
            "tf.summary.scalar needs tensorboard",
        ),
        (  # keras callbacks importing it
            "ModuleNotFoundError: No module named 'tensorboard'",
            "fail",
            "import of tensorboard failed",
        ),
        (  # tensorflow#50673
            "AttributeError: module 'tensorflow._api.v2.summary' has no attribute 'scalar'",
            "fail",
            "tensorflow._api.v2.summary.scalar is missing (it comes from tensorboard)",
        ),
        (  # tensorflow/tensorboard#2352
            "W0617 10:17:07.384346 139892139185984 __init__.py:343] Limited tf.summary API due "
            "to missing TensorBoard installation.",
            "warn",
            "limited tf.summary API",
        ),
    ],
)
def test_tensorboard_missing_from_tensorflow_and_keras_messages(
    line: str, status: str, detail: str
) -> None:
    report = match_log(line)
    assert cause_ids(report, status) == ["tensorboard_missing"]
    assert details(report.causes[0]) == [detail]
    assert CAUSES["tensorboard_missing"].fix.startswith("pip install tensorboard")


def test_tensorboardx_missing_is_not_tensorboard_missing() -> None:
    assert cause_ids(match_log("ModuleNotFoundError: No module named 'tensorboardX'")) == []


# The fresh-2026-11-26d miss (tensorchord/envd#881): an amd64 image under QEMU on Apple
# silicon; TensorFlow's AVX abort is the emulator's missing AVX, not the host CPU's.
QEMU_AVX_ABORT = (
    "The TensorFlow library was compiled to use AVX instructions, but these aren't available "
    "on your machine.\n"
    "qemu: uncaught target signal 6 (Aborted) - core dumped\n"
    "[1]    307 abort      python3 main.py\n"
)


@pytest.mark.parametrize(
    "text",
    [
        QEMU_AVX_ABORT,
        "qemu-x86_64: uncaught target signal 4 (Illegal instruction) - core dumped\n",
        "WARNING: The requested image's platform (linux/amd64) does not match the detected host "
        "platform (linux/arm64/v8) and no specific platform was requested\n"
        "Illegal instruction (core dumped)\n",
    ],
)
def test_an_avx_abort_under_qemu_user_mode_is_x86_emulation(text: str) -> None:
    report = match_log(text)
    assert cause_ids(report) == ["x86_emulation"]
    (cause,) = report.causes
    assert cause.status == "fail"
    assert "QEMU" in cause.title and "--platform linux/arm64" in cause.fix
    assert cause.evidence[0].startswith("QEMU user mode: line ")


def test_an_avx_abort_without_an_emulator_stays_cpu_no_avx() -> None:
    text = QEMU_AVX_ABORT.replace("qemu: uncaught target signal 6 (Aborted) - core dumped\n", "")
    assert cause_ids(match_log(text)) == ["cpu_no_avx"]
    # a qemu line alone (a guest that died of something else) names nothing
    assert cause_ids(match_log("qemu: uncaught target signal 11 (Segmentation fault)\n")) == []
    # on macOS the Rosetta reading is kept
    mac = "Python 3.8.2 (default) [Clang 12.0.0] on darwin\nzsh: illegal hardware instruction  python\n"
    rosetta = match_log(mac).causes
    assert [c.id for c in rosetta] == ["x86_emulation"] and "Rosetta" in rosetta[0].title
