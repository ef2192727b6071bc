"""The doctor on logs as people paste them: quoted, wrapped, transcripts, listings, Windows.

The corpus (``tests/data/doctor-corpus``) holds real logs from public issues, each with its
source and the cause the thread established; ``benchmarks/doctor_corpus.py`` prints the
accuracy per cause. Here the corpus must stay at >= 95% with no ``fail`` on an undecidable or
clean log, and each way of pasting is checked on its own.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from tfaccel.cli import main
from tfaccel.diagnosis import diagnose, match_log, read_log_file
from tfaccel.diagnosis.log.facts import read_facts
from tfaccel.diagnosis.log.patterns import CAUSES, UNNAMED_LIBRARY_FIX
from tfaccel.diagnosis.log.shape import strip_quotes, wrapped_groups
from tfaccel.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "doctor-corpus"
sys.path.insert(0, str(ROOT / "benchmarks"))
import doctor_corpus  # noqa: E402

DLOPEN = (
    "2024-04-04 10:56:25.510348: W tensorflow/core/common_runtime/gpu/gpu_device.cc:2251] "
    "Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above "
    "are installed properly if you would like to use GPU."
)


def named(text: str) -> list[tuple[str, str]]:
    return [(c.id, c.status) for c in match_log(text).causes]


# --------------------------------------------------------------------------- the corpus


def test_corpus_index_names_a_source_and_a_known_cause_for_every_log() -> None:
    entries = [
        json.loads(line)
        for index in sorted(CORPUS.glob("index-*.jsonl"))
        for line in index.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert len(entries) >= 60
    files = {e["file"] for e in entries}
    assert len(files) == len(entries), "a log is indexed twice"
    assert files == {p.name for p in CORPUS.glob("*.log")}, "a log without an index line"
    sources = [e["source"] for e in entries]
    assert all(
        re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", s) for s in sources
    )
    assert len(set(sources)) == len(sources), "two logs from one thread"
    for entry in entries:
        assert entry["cause"] in CAUSES or entry["cause"] in ("undecidable", "clean"), entry
        assert entry["established"].strip(), entry


def test_corpus_accuracy_is_at_least_95_percent_and_nothing_fails_without_a_cause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert doctor_corpus.main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is True and data["accuracy"] >= 0.95, data["misses"]
    assert data["fail_on_undecidable_or_clean"] == 0
    per_cause = data["per_cause"]
    assert sum(n.get("right", 0) + n.get("wrong", 0) for n in per_cause.values()) == data["logs"]
    assert {"undecidable", "clean", "windows_native", "cc_too_new", "wsl_libcuda"} <= set(per_cause)


def test_the_corpus_judge_wants_the_cause_named_and_no_fail_on_a_clean_log(tmp_path: Path) -> None:
    oom, hello = tmp_path / "oom.log", tmp_path / "hello.log"
    oom.write_text("OOM when allocating tensor with shape[8,1024]\n")
    hello.write_text("hello\n")

    def right(path: Path, cause: str) -> bool:
        case = doctor_corpus.Case(path, cause, "https://github.com/o/r/issues/1", "x")
        return doctor_corpus.judge(case).right

    assert right(oom, "oom") and not right(hello, "oom") and not right(oom, "cudnn_mismatch")
    assert right(hello, "clean") and not right(oom, "clean")
    assert right(hello, "undecidable") and not right(oom, "undecidable")


# --------------------------------------------------------------------------- quotes and wraps


def test_quote_prefixes_are_stripped_but_prompts_stay() -> None:
    text = "> > Could not load\n>> x\n>>> import tensorflow as tf\n> >>> tf.__version__\n>\nplain"
    assert strip_quotes(text) == (
        "Could not load\nx\n>>> import tensorflow as tf\n>>> tf.__version__\n\nplain"
    )
    assert strip_quotes("no quotes") == "no quotes"


def test_an_email_reply_with_nested_quotes_is_matched_on_its_line() -> None:
    text = "On Tue, someone wrote:\n> > " + DLOPEN + "\n> Skipping registering GPU devices...\n"
    report = match_log(text)
    assert [c.id for c in report.causes] == ["missing_cuda_libs"]
    assert report.causes[0].numbers["line_numbers"][0] == 2


def test_a_message_wrapped_at_a_space_with_an_indent_is_joined() -> None:
    text = (
        "2019-03-01 10:00:00.1: W tensorflow/stream_executor/platform/default/dso_loader.cc:55]"
        " Could not load dynamic\n    library 'libcudnn.so.7'; dlerror: libcudnn.so.7: cannot "
        "open shared object file\nnext line\n"
    )
    (cause,) = match_log(text).causes
    assert cause.id == "missing_cuda_libs" and cause.status == "fail"
    assert "missing libcudnn.so.7" in cause.evidence
    assert cause.numbers["line_numbers"] == [1]
    assert "Could not load dynamic library 'libcudnn.so.7'" in cause.evidence[-1]


def test_a_message_wrapped_mid_word_is_joined_without_a_space() -> None:
    text = "Loaded runtime CuD\nNN library: 8.1.0 but source was compiled with: 8.6.0.\n"
    (cause,) = match_log(text).causes
    assert cause.id == "cudnn_mismatch"
    assert "loaded cuDNN 8.1.0, TensorFlow built with 8.6.0" in cause.evidence


def test_a_wrapped_line_completes_the_details_of_a_line_that_matched_alone() -> None:
    text = (
        "    tensorflow/core/common_runtime/gpu/gpu_device.cc:611\n"
        "     Ignoring gpu device (device: 0, name: GRID K520, pci bus id: 0000:00:03.0) \n"
        "    with Cuda compute capability 3.0. The minimum required Cuda capability is 3.5.\n"
    )
    (cause,) = match_log(text).causes
    assert cause.id == "cc_too_low"
    assert "GRID K520: compute capability 3.0 < minimum 3.5" in cause.evidence


def test_groups_break_at_log_prefixes_prompts_listings_and_blank_lines() -> None:
    text = (
        "2024-01-01 12:00:00 first message\ncontinued\n"
        "W0000 00:00:1.0 second\n>>> tf.test.is_built_with_cuda()\nFalse\n\n"
        "tensorflow   2.16.1\nkeras   3.3.3\n"
    )
    groups = [g.joined for g in wrapped_groups(text)]
    assert groups == [
        "2024-01-01 12:00:00 first message continued",
        ">>> tf.test.is_built_with_cuda() False",
    ]


# --------------------------------------------------------------------------- transcripts


WIN_BANNER = (
    "Python 3.10.10 (tags/v3.10.10:aad5f6a, Feb  7 2023, 17:20:36) [MSC v.1929 64 bit (AMD64)] "
    'on win32\nType "help", "copyright", "credits" or "license" for more information.\n'
)


def test_is_built_with_cuda_false_is_a_weak_inference_a_warn_not_a_fail() -> None:
    text = ">>> import tensorflow as tf\n>>> tf.test.is_built_with_cuda()\nFalse\n"
    report = match_log(text)
    (cause,) = report.causes
    assert (cause.id, cause.status) == ("cpu_only_build", "warn")
    assert cause.numbers["strength"] == "inferred"
    assert cause.evidence[0].startswith("inferred from what the log shows")
    assert "line 3: >>> tf.test.is_built_with_cuda() -> False" in cause.evidence
    assert diagnose(Snapshot(), log=text).exit_code == 0  # a warn is not a failure


def test_windows_banner_and_a_version_past_2_10_name_the_native_windows_build() -> None:
    text = (
        WIN_BANNER + ">>> import tensorflow as tf\n>>> tf.__version__\n'2.12.0'\n"
        ">>> tf.config.list_physical_devices('GPU')\n[]\n"
    )
    (cause,) = match_log(text).causes
    assert (cause.id, cause.status) == ("windows_native", "warn")
    assert any(e.startswith("native Windows: line 1:") for e in cause.evidence)
    assert any(e.startswith("TensorFlow 2.12: line 5") for e in cause.evidence)
    assert "wsl --install" in (cause.fix or "")


def test_windows_with_tensorflow_2_10_and_an_empty_list_does_not_blame_the_build() -> None:
    text = (
        WIN_BANNER + ">>> tf.__version__\n'2.10.1'\n>>> tf.config.list_physical_devices('GPU')\n"
        "[]\n"
    )
    assert named(text) == [("no_gpu_visible", "warn")]


def test_an_empty_gpu_list_alone_says_the_log_does_not_show_why() -> None:
    (cause,) = match_log(">>> tf.config.list_physical_devices('GPU')\n[]\n").causes
    assert (cause.id, cause.status) == ("no_gpu_visible", "warn")
    assert "tfaccel doctor" in (cause.fix or "") and "TF_CPP_MAX_VLOG_LEVEL=3" in (cause.fix or "")


def test_a_gpu_listed_is_not_a_problem() -> None:
    text = (
        ">>> tf.config.list_physical_devices('GPU')\n"
        "[PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')]\n"
    )
    assert named(text) == []
    facts = read_facts(text)
    assert [(f.kind, f.value) for f in facts.facts] == [("gpu_list", "GPU")]


def test_facts_past_the_scanned_head_keep_the_line_numbers_of_the_whole_log() -> None:
    filler = "x" * 60 + "\n"
    text = filler * 60_000 + ">>> tf.test.is_built_with_cuda()\nFalse\n"  # 3.7 Mi characters
    (cause,) = match_log(text).causes
    assert cause.id == "cpu_only_build" and cause.numbers["line_numbers"] == [60_002]
    assert "line 60002: >>> tf.test.is_built_with_cuda() -> False" in cause.evidence


def test_python_dash_c_output_counts_as_a_transcript() -> None:
    text = (
        '(venv) $ python -c "import tensorflow as tf; print(tf.test.is_built_with_cuda())"\nFalse\n'
    )
    assert named(text) == [("cpu_only_build", "warn")]


def test_ipython_prompts_and_out_values_are_read() -> None:
    text = "In [1]: import tensorflow as tf\nIn [2]: tf.test.is_gpu_available()\nOut[2]: False\n"
    assert named(text) == [("no_gpu_visible", "warn")]


def test_the_guides_num_gpus_line_counts_as_printed_evidence() -> None:
    assert named("Num GPUs Available:  0\n") == [("no_gpu_visible", "warn")]
    assert named("Num GPUs Available:  1\n") == []


# --------------------------------------------------------------------------- listings


def test_a_conda_cpu_build_string_names_the_cpu_only_build() -> None:
    text = (
        "# Name                    Version                   Build  Channel\n"
        "tensorflow                2.10.0          mkl_py39h6a7f48e_0\n"
        "tensorflow-base           2.10.0          mkl_py39h353358b_0\n"
    )
    assert named(text) == [("cpu_only_build", "warn")]


def test_a_conda_cuda_build_string_is_a_gpu_build() -> None:
    text = (
        "tensorflow                2.15.0          cuda120py311h0b3d6ec_3    conda-forge\n"
        "tensorflow-base           2.15.0          cuda120py311h8e2d2a1_3    conda-forge\n"
    )
    assert named(text) == []


def test_pip_lists_tensorflow_cpu_and_conda_swaps_to_the_eigen_variant() -> None:
    assert named("Package      Version\ntensorflow-cpu 2.16.1\nnumpy  1.26.4\n") == [
        ("cpu_only_build", "warn")
    ]
    plan = "  _tflow_180_select:   1.0-gpu              --> 3.0-eigen\n"
    assert named(plan) == [("cpu_only_build", "warn")]


def test_aarch64_with_the_and_cuda_extra_missing_names_the_arm_wheels() -> None:
    text = (
        "$ uname -m\naarch64\n$ pip install 'tensorflow[and-cuda]'\n"
        "WARNING: tensorflow 2.16.1 does not provide the extra 'and-cuda'\n"
        ">>> tf.config.list_physical_devices('GPU')\n[]\n"
    )
    (cause,) = match_log(text).causes
    assert (cause.id, cause.status) == ("aarch64_no_cuda", "warn")
    assert any("does not provide the extra 'and-cuda'" in e for e in cause.evidence)


def test_a_system_cuda_on_ld_library_path_beside_pip_nvidia_libraries_is_named() -> None:
    text = (
        "$ echo $LD_LIBRARY_PATH\n"
        "LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64:/usr/local/lib\n"
        "$ pip list | grep nvidia\nnvidia-cudnn-cu12        8.9.7.29\n"
        "E0000 00:00:1.0 1 cuda_dnn.cc:535] Loaded runtime CuDNN library: 8.6.0 but source was "
        "compiled with: 8.9.7.  CuDNN library needs to have matching major version\n"
    )
    ids = named(text)
    assert ids == [("cudnn_mismatch", "fail"), ("ld_library_path_shadowing", "warn")]


def test_libcuda_missing_on_wsl2_is_the_wsl_driver_path() -> None:
    text = (
        "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@x) #1 SMP\n"
        "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
        "library 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared object file\n"
    )
    (cause,) = match_log(text).causes
    assert (cause.id, cause.status) == ("wsl_libcuda", "fail")
    assert cause.evidence[0].startswith("WSL2: line 1:")
    assert "/usr/lib/wsl/lib" in (cause.fix or "")
    assert named(text.split("\n", 1)[1]) == [("no_driver_or_hidden", "fail")]  # not WSL


# --------------------------------------------------------------------------- today's causes


def test_cannot_dlopen_without_a_library_says_how_to_make_tensorflow_name_it() -> None:
    (cause,) = match_log(DLOPEN + "\nSkipping registering GPU devices...\n").causes
    assert cause.id == "missing_cuda_libs" and cause.fix == UNNAMED_LIBRARY_FIX
    assert "TF_CPP_MAX_VLOG_LEVEL=3" in cause.fix and "tfaccel doctor" in cause.fix
    named_lib = "Could not load dynamic library 'libcudnn.so.8'; dlerror: not found\n" + DLOPEN
    (cause,) = match_log(named_lib).causes
    assert cause.fix == CAUSES["missing_cuda_libs"].fix


@pytest.mark.parametrize(
    "line",
    [
        "LLVM ERROR: PTX version 8.5 does not support target 'sm_120' (or 'sm_120a'). Minimum "
        "required PTX version is 8.7",
        "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'",
        "W0000 00:00:1.0 1 gpu_device.cc:2431] TensorFlow was not built with CUDA kernel "
        "binaries compatible with compute capability 12.0. CUDA kernels will be jit-compiled "
        "from PTX, which could take 30 minutes or longer.",
    ],
)
def test_blackwell_messages_name_a_gpu_newer_than_the_build(line: str) -> None:
    assert named(line) == [("cc_too_new", "fail")]


def test_message_findings_say_their_strength() -> None:
    (cause,) = match_log("OOM when allocating tensor with shape[8,1024]").causes
    assert cause.numbers["strength"] == "message"


# --------------------------------------------------------------------------- encodings


SAMPLE = "Skipping registering GPU devices...\r\nOOM when allocating tensor with shape[8,1024]\r\n"


@pytest.mark.parametrize(
    ("encoded", "note"),
    [
        (SAMPLE.encode("utf-8"), None),
        (b"\xff\xfe" + SAMPLE.encode("utf-16-le"), "byte-order mark"),
        (SAMPLE.encode("utf-16-le"), "no byte-order mark"),
        (SAMPLE.encode("utf-16-be"), "no byte-order mark"),
    ],
    ids=["utf8-crlf", "utf16-bom", "utf16le-no-bom", "utf16be-no-bom"],
)
def test_windows_line_endings_and_utf16_logs_are_read(
    tmp_path: Path, encoded: bytes, note: str | None
) -> None:
    path = tmp_path / "tf.log"
    path.write_bytes(encoded)
    log = read_log_file(str(path))
    report = match_log(log)
    assert [c.id for c in report.causes] == ["missing_cuda_libs", "oom"]
    assert report.causes[1].numbers["line_numbers"] == [2]
    assert all("\r" not in e for c in report.causes for e in c.evidence)
    assert (note is None) == (not log.notes) and (note is None or note in log.notes[0])
    assert [c.id for c in diagnose(Snapshot(), log=encoded).log.causes] == [
        "missing_cuda_libs",
        "oom",
    ]


def test_doctor_cli_answers_a_utf16_log_with_crlf_in_bounded_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "powershell.log"
    path.write_bytes(b"\xff\xfe" + (SAMPLE * 2000).encode("utf-16-le"))
    started = time.monotonic()
    code = main(["doctor", "--log", str(path), "--json"])
    assert time.monotonic() - started < 60
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and [c["id"] for c in data["log"]["causes"]] == ["missing_cuda_libs", "oom"]
    assert data["log"]["causes"][1]["numbers"]["count"] == 2000


# --------------------------------------------------------------------------- scenarios by issue

# The log of each public issue that shows one of today's causes, and the cause its thread set.
ISSUE_SCENARIOS = [
    ("d_cc120_tf111958_llvm_ptx85.log", "cc_too_new", "fail"),
    ("c_rtx5080_nightly_cc120_invalid_handle.log", "cc_too_new", "fail"),
    ("d_win_tf62080_transcript_214.log", "windows_native", "warn"),
    ("e_directml18_wsl1_kernel_libcuda.log", "wsl_libcuda", "fail"),
    ("c_poetry_and_cuda_cannot_dlopen.log", "missing_cuda_libs", "fail"),
    ("b_macos_tfapple20_no_metal.log", "macos_no_metal", "warn"),
    ("b_win_tf10971_quoted_32bit.log", "no_matching_wheel", "fail"),
    ("b_conda_ana9698_tflow_select_eigen.log", "cpu_only_build", "warn"),
    ("b_tsfedl2_tfgpu_metadata_failed.log", "tensorflow_gpu_deprecated", "fail"),
    ("d_cudnn_docs2251_wrapped_810_vs_860.log", "cudnn_mismatch", "fail"),
]
_SOURCES = {case.file.name: case.source for case in doctor_corpus.load_cases()}


def _issue_id(scenario: tuple[str, str, str]) -> str:
    url = _SOURCES[scenario[0]]
    owner_repo, _, number = url.removeprefix("https://github.com/").rpartition("/")
    return f"{owner_repo.rsplit('/', 1)[0]}#{number}:{scenario[1]}"


@pytest.mark.parametrize("scenario", ISSUE_SCENARIOS, ids=_issue_id)
def test_the_cause_each_public_issue_established(scenario: tuple[str, str, str]) -> None:
    file, cause, status = scenario
    report = match_log(read_log_file(str(CORPUS / file)))
    found = {c.id: c for c in report.causes}
    assert cause in found, [c.id for c in report.causes]
    assert found[cause].status == status
    assert found[cause].numbers["strength"] == ("inferred" if status == "warn" else "message")


# --------------------------------------------------------------------------- causes of 2026-11


@pytest.mark.parametrize(
    ("file", "cause", "status", "detail"),
    [
        ("f_protobuf_dso60_tf114.log", "protobuf_incompatible", "fail", None),
        ("f_protobuf_nsfw154_tfhub_import.log", "protobuf_incompatible", "fail", None),
        (
            "f_keras_mixed_segmodels413_windows.log",
            "keras_versions_mixed",
            "fail",
            "the optimizer given: tensorflow.python.keras.optimizers.Adam",
        ),
        (
            "f_keras_mixed_radam30_tf20rc0.log",
            "keras_versions_mixed",
            "fail",
            "the optimizer given: keras_radam.optimizers.RAdam",
        ),
        (
            "f_input_ran_out_deepcell519.log",
            "input_ran_out",
            "warn",
            "steps_per_epoch * epochs = 9810.0 batches",
        ),
        ("f_memgrowth_yolov3tf2_225_two_2080ti.log", "memory_growth_inconsistent", "fail", None),
        (
            "f_cudnn_init_urlnet7_tf113.log",
            "cudnn_init_failed",
            "fail",
            "cuDNN: CUDNN_STATUS_INTERNAL_ERROR",
        ),
        (
            "f_legacy_opt_keras3r_1352_tf211.log",
            "legacy_optimizer_needed",
            "fail",
            "decay= is not an argument of the new optimizer",
        ),
        (
            "f_x86emu_tf62860_m1max_illegal4.log",
            "x86_emulation",
            "fail",
            "macOS: line 2: Python 3.11.7 (main, Dec  4 2023, 18:10:11) [Clang 15.0.0 "
            "(clang-1500.1.0.2.5)] on darwin",
        ),
        ("f_cupti_tf39143_nightly_docker.log", "cupti_privileges", "warn", None),
        (
            "f_xla_op_tf126007_stringformat_cpu.log",
            "xla_unsupported_op",
            "fail",
            "StringFormat has no XLA_CPU_JIT kernel (jit_compile)",
        ),
        (
            "f_nccl_tf28372_winserver_4x1080ti.log",
            "nccl_unavailable",
            "fail",
            "NCCL all-reduce over 4 GPUs",
        ),
        (
            "f_plugin_dml331_tfdml_dll_tf211.log",
            "pluggable_device",
            "fail",
            "tfdml_plugin.dll (a PluggableDevice plugin) did not load",
        ),
    ],
)
def test_the_causes_added_in_2026_11_on_their_real_logs(
    file: str, cause: str, status: str, detail: str | None
) -> None:
    report = match_log(read_log_file(str(CORPUS / file)))
    assert [(c.id, c.status) for c in report.causes] == [(cause, status)]
    found = report.causes[0]
    assert found.fix == CAUSES[cause].fix and found.title == CAUSES[cause].title
    if detail is not None:
        assert detail in found.evidence
    assert any(e.startswith("line ") for e in found.evidence)


def test_a_cudnn_handle_that_failed_is_told_from_cudnn_out_of_memory() -> None:
    assert named(
        "E cuda_dnn.cc:334] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR"
    ) == [("cudnn_init_failed", "fail")]
    assert named("E cuda_dnn.cc:334] Could not create cudnn handle: CUDNN_STATUS_ALLOC_FAILED") == [
        ("oom", "fail")
    ]
    assert named(
        "UnknownError: Failed to get convolution algorithm. This is probably because cuDNN "
        "failed to initialize, so try looking to see if a warning log message was printed above."
    ) == [("cudnn_init_failed", "fail")]


def test_out_of_memory_at_context_creation_is_another_process_not_the_batch() -> None:
    at_start = (
        "W platform_util.cc:240] unable to create StreamExecutor for CUDA:0: failed initializing "
        "StreamExecutor for CUDA device ordinal 0: Internal: failed call to "
        "cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory "
        "reported: 11523260416"
    )
    assert named(at_start) == [("gpu_memory_in_use", "fail")]
    assert named("E cuda_driver.cc:152] failed call to cuInit: CUDA_ERROR_OUT_OF_MEMORY") == [
        ("gpu_memory_in_use", "fail")
    ]
    during_training = (
        "E cuda_driver.cc:1002] failed to allocate 190.31M (199557120 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY"
    )
    assert named(during_training) == [("oom", "fail")]
    assert named("failed call to cuInit: CUDA_ERROR_NO_DEVICE") == [("no_driver_or_hidden", "fail")]


def test_the_lr_warning_of_the_new_optimizer_is_only_a_warn() -> None:
    text = (
        "WARNING:absl:`lr` is deprecated in Keras optimizer, please use `learning_rate` or use "
        "the legacy optimizer, e.g.,tf.keras.optimizers.legacy.SGD."
    )
    report = match_log(text)
    assert [(c.id, c.status) for c in report.causes] == [("legacy_optimizer_needed", "warn")]
    assert "lr= is deprecated" in report.causes[0].evidence


def test_a_layer_of_the_other_keras_is_named_as_mixed_kerases() -> None:
    text = (
        "TypeError: The added layer must be an instance of class Layer. Found: "
        "<keras.layers.core.Dense object at 0x7f3c2c1f2e10>"
    )
    report = match_log(text)
    assert [c.id for c in report.causes] == ["keras_versions_mixed"]
    assert "the layer given: keras.layers.core.Dense" in report.causes[0].evidence


def test_the_fresh_split_is_reported_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor_corpus.main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    splits = data["per_split"]
    assert {"earlier", "fresh (all)"} <= set(splits)
    assert any(s.startswith("dev-") for s in splits) and any(s.startswith("fresh-") for s in splits)
    assert (
        sum(n.get("right", 0) + n.get("wrong", 0) for s, n in splits.items() if s != "fresh (all)")
        == data["logs"]
    )
    assert data["clean_with_unrecognised_lines"] == []


def test_a_wrapped_message_names_the_more_specific_cause_its_lines_alone_do_not() -> None:
    text = (
        "for CUDA device ordinal 0: Internal: failed call to cuDevicePrimaryCtxRetain: \n"
        "CUDA_ERROR_OUT_OF_MEMORY; total memory reported: 18446744073709551615\n"
    )
    report = match_log(text)
    assert [(c.id, c.status) for c in report.causes] == [("gpu_memory_in_use", "fail")]
    assert report.causes[0].numbers["line_numbers"] == [1]
    assert named("CUDA_ERROR_OUT_OF_MEMORY; total memory reported: 1\n") == [("oom", "fail")]


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (
            "- OS Platform (e.g.MacOS Bigsur 11.0 M1 Chip):\nillegal hardware instruction  python3",
            "x86_emulation",
        ),
        (
            "Op type not registered 'NcclAllReduce' in binary running on Windows10.",
            "nccl_unavailable",
        ),
        ("tfdml_plugin.dll not found", "pluggable_device"),
        ("Insufficient privilege to run libcupti (you need root permission).", "cupti_privileges"),
        (
            "**decay** is deprecated in the new Keras optimizer as tf.keras.optimizers.legacy.SGD",
            "legacy_optimizer_needed",
        ),
    ],
)
def test_other_wordings_of_the_new_causes(text: str, cause: str) -> None:
    assert [c.id for c in match_log(text).causes] == [cause]


def test_tensorrt_plugin_lines_stay_benign() -> None:
    text = (
        "W dso_loader.cc:64] Could not load dynamic library 'libnvinfer_plugin.so.7'; dlerror: "
        "libnvinfer_plugin.so.7: cannot open shared object file: No such file or directory; "
        "not found\n"
    )
    report = match_log(text)
    assert report.causes == [] and [b.label for b in report.benign] == [
        "TensorRT not found (only TF-TRT needs it)"
    ]
