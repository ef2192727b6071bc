"""Inventory: spec database matching, CPU peak estimate, the precisions that run fast, GPU
matching between TensorFlow and NVML, the machine fingerprint, and the Snapshot contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tfaccel import inventory, probe
from tfaccel.core.errors import SnapshotError
from tfaccel.inventory import GpuFacts
from tfaccel.probe.tf_gpus import TfGpu
from tfaccel.snapshot import (
    CpuInfo,
    DeepProbe,
    GpuInfo,
    NvmlInfo,
    PciDevice,
    Snapshot,
    TpuInfo,
    load_snapshot,
    save_snapshot,
)

# NVML names as the driver reports them -> spec key.
NVML_NAMES = {
    "NVIDIA GeForce GTX 1080 Ti": "gtx-1080-ti",
    "Tesla T4": "t4",
    "Tesla V100-SXM2-16GB": "v100-sxm2",
    "Tesla V100-PCIE-32GB": "v100-pcie",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA A100-PCIE-40GB": "a100-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-80gb-sxm",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA A10": "a10",
    "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H200": "h200",
    "NVIDIA B200": "b200",
}


@pytest.mark.parametrize("name,key", sorted(NVML_NAMES.items()))
def test_every_reference_gpu_matches_its_row(name: str, key: str) -> None:
    spec = inventory.match_spec(name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    "name", ["NVIDIA GeForce RTX 3090 Ti", "NVIDIA A10G", "NVIDIA H100 NVL", "Quadro P1000"]
)
def test_models_not_in_the_database_are_unknown_not_guessed(name: str) -> None:
    assert inventory.match_spec(name) is None


def test_every_spec_row_has_a_source_and_sane_numbers() -> None:
    specs = inventory.load_specs()
    assert len({s.key for s in specs}) == len(specs)
    for s in specs:
        assert s.source.strip(), s.key
        assert s.memory_gb and s.bandwidth_gbs, s.key
        rates = [r for r in (s.fp32_tflops, s.tf32_tflops, s.fp16_tflops, s.bf16_tflops) if r]
        assert rates and all(0 < r < 10_000 for r in rates), s.key
    a100 = inventory.match_spec("NVIDIA A100-SXM4-40GB")
    assert a100 is not None and (a100.fp32_tflops, a100.bf16_tflops, a100.bandwidth_gbs) == (
        19.5,
        312,
        1555,
    )


@pytest.mark.parametrize(
    "accel,key",
    [
        ("v2-8", "tpu-v2"),
        ("v3-32", "tpu-v3"),
        ("v4-8", "tpu-v4"),
        ("v5litepod-8", "tpu-v5e"),
        ("v5p-8", "tpu-v5p"),
        ("v6e-4", "tpu-v6e"),
    ],
)
def test_tpu_types_match(accel: str, key: str) -> None:
    spec = inventory.match_spec(accel, "tpu")
    assert spec is not None and spec.key == key


def test_cpu_peak_formula() -> None:
    flags = ["avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"]
    peak = inventory.cpu_peak(
        CpuInfo(physical_cores=2, logical_cores=2, usable_cores=2, flags=flags, base_mhz=2700.0)
    )
    assert peak.estimate
    assert peak.fp32_tflops == pytest.approx(2 * 2.7 * 64 / 1000)
    assert peak.bf16_tflops == pytest.approx(2 * 2.7 * 1024 / 1000)
    assert "2 cores x 2.70 GHz (reported) x 64" in (peak.formula or "")
    avx2 = inventory.cpu_peak(
        CpuInfo(
            physical_cores=8,
            logical_cores=16,
            usable_cores=16,
            flags=["avx2", "fma"],
            base_mhz=3000.0,
        )
    )
    assert avx2.fp32_tflops == pytest.approx(
        8 * 3.0 * 32 / 1000
    )  # SMT siblings do not add FMA units
    assert avx2.bf16_tflops is None
    unknown = inventory.cpu_peak(CpuInfo())
    assert unknown.fp32_tflops is None and "unknown" in (unknown.formula or "")


def test_build_inventory_from_a_hand_made_snapshot() -> None:
    snap = Snapshot(
        cpu=CpuInfo(
            model="EPYC",
            physical_cores=4,
            logical_cores=8,
            flags=["avx2", "fma", "avx512_bf16"],
            base_mhz=2000.0,
        ),
        nvml=NvmlInfo(
            available=True,
            driver_version="550.54.14",
            cuda_driver_version="12.4",
            gpus=[
                GpuInfo(index=0, name="Tesla T4", compute_capability="7.5"),
                GpuInfo(index=1, name="Mystery GPU"),
            ],
        ),
        pci=[PciDevice(vendor_id="0x10de", class_id="0x030200")] * 3,
        tpu=TpuInfo(present=True, accelerator_type="v4-8", chip_count=4),
        deep=DeepProbe(ran=True, ok=True, tf_version="2.21.0", physical_devices=["CPU:0", "GPU:0"]),
    )
    inv = inventory.build(snap)
    assert inv.cpu.features == ["AVX2", "FMA", "AVX512_BF16"]
    assert inv.gpus[0].peak is not None and inv.gpus[0].peak.fp16_tflops == 65
    assert inv.gpus[1].peak is None and "unknown model" in inv.gpus[1].peak_note
    assert inv.nvidia_pci_without_nvml == 1
    assert inv.tpu is not None and inv.tpu.peak is not None and inv.tpu.peak.bf16_tflops == 275
    assert inv.tensorflow is not None and inv.tensorflow.physical_devices == ["CPU:0", "GPU:0"]
    assert inv.nvml_gpus[0] == GpuFacts(0, "Tesla T4", "7.5")
    json.dumps(inv.to_dict())
    assert list(inv.to_dict()) == [  # the devices document; the model fields stay out of it
        "cpu",
        "gpus",
        "tpu",
        "driver_version",
        "cuda_driver_version",
        "nvml_error",
        "nvidia_pci_without_nvml",
        "tensorflow",
    ]


# --- the precisions that run fast -----------------------------------------------------------


def _gpus(*ccs: str | None) -> list[GpuFacts]:
    return [GpuFacts(index, compute_capability=cc) for index, cc in enumerate(ccs)]


@pytest.mark.parametrize(
    ("ccs", "flags", "tpu", "fast", "best"),
    [
        ((), {"avx2"}, False, ("float32",), "float32"),
        ((), {"avx512f", "avx512_bf16"}, False, ("float32", "mixed_bfloat16"), "mixed_bfloat16"),
        ((), {"amx_bf16"}, False, ("float32", "mixed_bfloat16"), "mixed_bfloat16"),
        ((), set(), True, ("float32", "mixed_bfloat16"), "mixed_bfloat16"),
        (("7.0",), set(), False, ("float32", "mixed_float16"), "mixed_float16"),  # V100: no bf16
        (
            ("8.0", "8.6"),
            set(),
            False,
            ("float32", "mixed_bfloat16", "mixed_float16"),
            "mixed_float16",
        ),
        (("6.1",), {"avx512_bf16"}, False, ("float32",), "float32"),  # a GPU without tensor cores
        ((None,), set(), False, ("float32",), "float32"),  # unknown capability: treated as too old
        (("8.0", "6.0"), set(), False, ("float32",), "float32"),  # every GPU must be fast
    ],
)
def test_fast_precisions(
    ccs: tuple[str | None, ...], flags: set[str], tpu: bool, fast: tuple[str, ...], best: str
) -> None:
    found = inventory.fast_precisions(_gpus(*ccs), flags, tpu=tpu)
    assert (found.fast, found.best) == (fast, best)
    assert found.best in found.fast and found.reason


def test_precision_reasons_name_the_devices_and_the_thresholds() -> None:
    assert inventory.TENSOR_CORE_MIN_CC == 7.0 and inventory.BF16_MIN_CC == 8.0
    assert "(GPU:0 8.0, GPU:1 7.5)" in inventory.fast_precisions(_gpus("8.0", "7.5")).reason
    assert "(GPU:1 unknown)" in inventory.fast_precisions(_gpus("8.0", None)).reason
    cpu = inventory.fast_precisions([], ["amx_bf16", "avx512_bf16"]).reason
    assert cpu.startswith("this CPU has avx512_bf16, amx_bf16")


def test_slow_precisions_are_warned_about() -> None:
    warning = inventory.precision_warning
    assert "much slower" in (warning("mixed_float16", []) or "")
    assert "GPU:1 (compute capability < 7.0)" in (
        warning("mixed_float16", _gpus("8.0", "6.1")) or ""
    )
    assert "emulated" in (warning("mixed_bfloat16", [], {"avx2"}) or "")
    assert warning("mixed_bfloat16", [], {"avx512_bf16"}) is None
    assert warning("mixed_bfloat16", [], tpu=True) is None
    assert warning("mixed_float16", _gpus("7.0")) is None
    assert warning("float32", []) is None


def test_the_inventory_answers_for_its_gpus_or_the_ones_asked_about() -> None:
    snap = Snapshot(
        cpu=CpuInfo(flags=["avx512_bf16"]),
        nvml=NvmlInfo(
            available=True, gpus=[GpuInfo(index=0, name="Tesla T4", compute_capability="7.5")]
        ),
    )
    inv = inventory.build(snap)
    assert inv.precisions().fast == ("float32", "mixed_float16")  # NVML's T4
    assert inv.precisions(()).best == "mixed_bfloat16"  # the CPU alone
    assert inv.precisions(_gpus("9.0")).fast[-1] == "mixed_float16"


# --- TensorFlow's GPUs matched to NVML's ----------------------------------------------------

A100 = GpuFacts(0, "NVIDIA A100-SXM4-40GB", "8.0", 40 << 30, "GPU-aaaa")
T4 = GpuFacts(1, "Tesla T4", "7.5", 16 << 30, "GPU-bbbb")
H100 = GpuFacts(2, "NVIDIA H100 80GB HBM3", "9.0", 80 << 30, "GPU-cccc")


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, [A100, T4]),  # unset: TensorFlow's numbering is NVML's
        ("2,0", [H100, A100]),  # renumbered by index
        ("GPU-cccc,GPU-bbbb", [H100, T4]),  # renumbered by UUID prefix
    ],
)
def test_tensorflow_gpus_are_matched_to_nvml_through_cuda_visible_devices(
    visible: str | None, expected: list[GpuFacts]
) -> None:
    seen = [TfGpu(0, expected[0].name, expected[0].compute_capability), TfGpu(1)]
    matched = inventory.match_gpus(seen, [A100, T4, H100], visible)
    assert [g.uuid for g in matched] == [g.uuid for g in expected]
    assert [g.index for g in matched] == [0, 1]  # TensorFlow's numbering
    assert matched[1].name == expected[1].name  # TensorFlow gave no name: NVML's
    assert matched[1].compute_capability == expected[1].compute_capability


def test_a_gpu_whose_names_disagree_is_left_unmatched() -> None:
    (gpu,) = inventory.match_gpus([TfGpu(0, "Tesla T4", "7.5")], [A100], None)
    assert gpu == GpuFacts(0, "Tesla T4", "7.5")  # no memory or UUID: unknown beats wrong


def test_tensorflow_gpus_reads_them_through_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe.tf_gpus, "collect", lambda: [TfGpu(0, "", "8.0")])
    snap = Snapshot(nvml=NvmlInfo(gpus=[GpuInfo(name="NVIDIA A100-SXM4-40GB", uuid="GPU-aaaa")]))
    (gpu,) = inventory.tensorflow_gpus(inventory.build(snap), None)
    assert (gpu.name, gpu.compute_capability, gpu.uuid) == (
        "NVIDIA A100-SXM4-40GB",
        "8.0",
        "GPU-aaaa",
    )


# --- the machine fingerprint, and the one look at the machine -------------------------------


def test_fingerprint_changes_with_devices_and_versions() -> None:
    snap = Snapshot(tfaccel_version="0.1.0")
    snap.cpu.model, snap.cpu.flags = "Xeon", ["avx2", "avx512f"]
    snap.tensorflow.version = "2.21.0"
    base = inventory.machine_fingerprint(snap)
    assert base == inventory.machine_fingerprint(snap) == inventory.build(snap).fingerprint
    snap.nvml.gpus = [GpuInfo(name="NVIDIA A100", memory_total_bytes=80 << 30)]
    with_gpu = inventory.machine_fingerprint(snap)
    snap.tensorflow.version = "2.22.0"
    newer_tf = inventory.machine_fingerprint(snap)
    assert len({base.digest, with_gpu.digest, newer_tf.digest}) == 3
    snap.cpu.memory_available_bytes = 123  # what changes from minute to minute does not count
    snap.env = {"CUDA_VISIBLE_DEVICES": "0"}
    assert inventory.machine_fingerprint(snap) == newer_tf


def test_current_probes_the_machine_once_without_loading_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, Any]] = []
    snap = Snapshot(cpu=CpuInfo(usable_cores=3), env={"CUDA_VISIBLE_DEVICES": "1"})

    def snapshot(**kwargs: Any) -> Snapshot:
        calls.append(kwargs)
        return snap

    monkeypatch.setattr(probe, "snapshot", snapshot)
    inv = inventory.current()
    assert calls == [{"libraries": False}]
    assert inv.cpu.usable_cores == 3 and inv.cuda_visible_devices == "1"
    assert inv.fingerprint == inventory.machine_fingerprint(snap)


# --- Snapshot save / load ------------------------------------------------------------------


def test_snapshot_save_and_load_round_trip(tmp_path: Path) -> None:
    snap = Snapshot(
        nvml=NvmlInfo(available=True, gpus=[GpuInfo(name="NVIDIA L4", compute_capability="8.9")])
    )
    path = tmp_path / "snap.json"
    save_snapshot(snap, path)
    assert load_snapshot(path) == snap
    assert [p.name for p in tmp_path.iterdir()] == ["snap.json"]  # no temporary left behind


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"nvml": {"gpus": [{"name": 5}]}}', "snapshot.nvml.gpus[0].name"),
        ('{"cpu": {"logical_cores": "two"}}', "snapshot.cpu.logical_cores"),
        ('{"schema_version": 99}', "schema_version"),
        ('{"nvml": {"available": "yes"}}', "snapshot.nvml.available"),
    ],
)
def test_malformed_snapshot_gives_a_clear_error(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SnapshotError) as exc:
        load_snapshot(path)
    assert needle in str(exc.value)
    assert "Fix:" in str(exc.value)


def test_missing_and_directory_snapshot_paths(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="does not exist"):
        load_snapshot(tmp_path / "nope.json")
    with pytest.raises(SnapshotError, match="is a directory"):
        load_snapshot(tmp_path)
