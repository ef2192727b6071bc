"""Inventory: spec database matching, CPU peak estimate, and the Snapshot contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfaccel import inventory
from tfaccel.errors import SnapshotError
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
    json.dumps(inv.to_dict())


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
