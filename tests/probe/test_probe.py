"""The probe layer: real reads of this machine, and fakes only at the binding boundary."""

from __future__ import annotations

import ctypes
import json
import os
import platform
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_nvml import NOT_SUPPORTED, gpu, make_binding

from tfaccel import probe
from tfaccel.probe import cpu, libs, nvml, packages, pci, process, readings, system, tf_gpus, tpu
from tfaccel.probe.tf_gpus import TfGpu
from tfaccel.snapshot import Distribution, DriverInfo, PciDevice, Snapshot

# --- NVML through a fake binding (gpustat-style: per device, per function) ---------------


def test_nvml_reads_every_field_of_a_gpu() -> None:
    binding = make_binding([gpu()])
    info = nvml.collect(binding)
    assert info.available and info.error is None
    assert info.driver_version == "550.54.14"
    assert info.cuda_driver_version == "12.4"
    (g,) = info.gpus
    assert g.name == "NVIDIA A100-SXM4-40GB"  # bytes decoded
    assert g.compute_capability == "8.0"
    assert g.multiprocessor_count == 108
    assert g.memory_total_bytes == 40 * 2**30
    assert g.memory_free_bytes == 39 * 2**30
    assert g.power_draw_watts == 65.0 and g.power_limit_watts == 400.0
    assert g.sm_clock_max_mhz == 1410 and g.memory_clock_max_mhz == 1215
    assert g.pci_bus_id == "00000000:3B:00.0"
    assert binding.calls == ["init", "shutdown"]


def test_nvml_unsupported_fields_become_none_not_errors() -> None:
    """GeForce cards answer NotSupported for some queries (gpustat#42-style)."""
    info = nvml.collect(
        make_binding([gpu("NVIDIA GeForce GTX 1080 Ti", power_mw=NOT_SUPPORTED, sms=NOT_SUPPORTED)])
    )
    (g,) = info.gpus
    assert g.power_draw_watts is None
    assert g.multiprocessor_count is None
    assert g.temperature_celsius == 41


def test_nvml_init_failure_is_a_value() -> None:
    info = nvml.collect(make_binding([], init_error="Driver Not Loaded"))
    assert not info.available
    assert info.error == "Driver Not Loaded"
    assert info.gpus == []


def test_nvml_on_this_machine_reports_why_it_is_unavailable() -> None:
    info = nvml.collect()
    if info.available:
        pytest.skip("this machine has a working NVIDIA driver")
    assert info.error  # e.g. "NVML Shared Library Not Found"


# --- CPU from /proc text and from this machine ---------------------------------------------

CPUINFO_2_SOCKETS_HT = "\n".join(
    f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon Test\n"
    f"physical id\t: {i // 4}\ncore id\t\t: {(i % 4) // 2}\ncpu MHz\t\t: 2100.000\n"
    "flags\t\t: fpu avx avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile\n"
    for i in range(8)
)


def test_parse_cpuinfo_counts_physical_cores_across_sockets_and_smt() -> None:
    info = cpu.parse_cpuinfo(CPUINFO_2_SOCKETS_HT)
    assert info.logical_cores == 8
    assert info.physical_cores == 4  # 2 sockets x 2 cores, SMT x2
    assert info.sockets == 2
    assert info.model == "Xeon Test" and info.vendor == "GenuineIntel"
    assert "avx512_bf16" in info.flags and "amx_bf16" in info.flags
    assert info.base_mhz == 2100.0


def test_parse_cpuinfo_arm() -> None:
    text = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve\nCPU implementer\t: 0x41\n\n" * 1
    info = cpu.parse_cpuinfo(text + "processor\t: 1\nFeatures\t: fp asimd sve\n")
    assert info.logical_cores == 2
    assert "asimd" in info.flags and "sve" in info.flags
    assert info.vendor == "0x41"


def test_cgroup_and_meminfo_parsing() -> None:
    assert cpu.parse_cgroup_cpu_max("200000 100000\n") == 2.0
    assert cpu.parse_cgroup_cpu_max("max 100000") is None
    assert cpu.parse_cgroup_cpu_max("garbage") is None
    mem = cpu.parse_meminfo(
        "MemTotal:       1024 kB\nMemAvailable:    512 kB\nHugePages_Total:       0\n"
    )
    assert mem == {"MemTotal": 1024 * 1024, "MemAvailable": 512 * 1024, "HugePages_Total": 0}


def test_cpu_collect_reads_a_fake_root(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(CPUINFO_2_SOCKETS_HT)
    (tmp_path / "proc/meminfo").write_text("MemTotal: 2048 kB\nMemAvailable: 1024 kB\n")
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text("150000 100000\n")
    info = cpu.collect(str(tmp_path))
    assert info.physical_cores == 4
    assert info.memory_total_bytes == 2048 * 1024
    assert info.cgroup_cpu_limit == 1.5


def test_cpu_collect_on_this_machine_matches_the_os() -> None:
    import os

    info = cpu.collect()
    assert info.logical_cores == os.cpu_count()
    assert info.physical_cores is not None and 1 <= info.physical_cores <= info.logical_cores
    assert info.memory_total_bytes and info.memory_total_bytes > 2**28
    assert info.flags  # Linux CI always has /proc/cpuinfo


# --- PCI, TPU, env ----------------------------------------------------------------------


def _pci_dev(root: Path, address: str, vendor: str, cls: str, driver: str | None) -> None:
    d = root / "sys/bus/pci/devices" / address
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text("0x20b0\n")
    (d / "class").write_text(cls + "\n")
    if driver:
        drv = root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (d / "driver").symlink_to(drv)


def test_pci_finds_nvidia_gpus_with_and_without_a_driver(tmp_path: Path) -> None:
    _pci_dev(tmp_path, "0000:3b:00.0", "0x10de", "0x030200", "nvidia")
    _pci_dev(tmp_path, "0000:3b:00.1", "0x10de", "0x040300", "snd_hda_intel")  # HDMI audio
    _pci_dev(tmp_path, "0000:af:00.0", "0x10de", "0x030000", None)
    _pci_dev(tmp_path, "0000:00:02.0", "0x8086", "0x030000", "i915")
    found = pci.collect(str(tmp_path))
    assert [(d.address, d.driver) for d in found] == [
        ("0000:3b:00.0", "nvidia"),
        ("0000:af:00.0", None),
    ]


def test_tpu_from_signals() -> None:
    google = PciDevice(address="0000:00:04.0", vendor_id="0x1ae0", class_id="0x120000")
    info = tpu.from_signals(
        {"TPU_ACCELERATOR_TYPE": "v4-8"},
        ["/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3"],
        [google] * 4,
        [Distribution(name="libtpu", version="0.0.9")],
    )
    assert info.present and info.accelerator_type == "v4-8"
    assert info.chip_count == 4 and info.libtpu_version == "0.0.9"
    none = tpu.from_signals({}, [], [], [])
    assert not none.present and none.chip_count is None


def test_env_records_only_relevant_variables() -> None:
    env = system.collect_env(
        {"CUDA_VISIBLE_DEVICES": "", "HOME": "/root", "TFACCEL_PRECISION": "auto"}
    )
    assert env == {"CUDA_VISIBLE_DEVICES": "", "TFACCEL_PRECISION": "auto"}


# --- TensorFlow build info without importing TensorFlow ------------------------------------

GPU_BUILD_INFO = """
import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-18/bin/clang'), ('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), ('is_rocm_build', False), ('is_tensorrt_build', False)])
"""


def test_build_info_parses_gpu_and_old_style_files() -> None:
    info = packages.build_info_from_text(GPU_BUILD_INFO)
    assert info["is_cuda_build"] is True
    assert info["cuda_compute_capabilities"][-1] == "compute_90"
    old = packages.build_info_from_text("is_cuda_build = True\ncuda_version_number = '10.1'\n")
    assert old == {"is_cuda_build": True, "cuda_version_number": "10.1"}
    with pytest.raises(ValueError):
        packages.build_info_from_text("import os\n")


def test_installed_tensorflow_is_read_from_its_files_not_imported() -> None:
    import subprocess
    import sys

    code = "import sys, tfaccel.probe as p; p.snapshot(); print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    build = packages.collect_tensorflow(packages.collect_distributions())
    assert build.installed and build.build_info_found, build.error
    assert build.version and build.distribution in packages.TF_DISTRIBUTIONS
    assert build.is_cuda_build in (True, False)


def test_nvidia_wheel_dirs_and_tools(tmp_path: Path) -> None:
    nvcc = tmp_path / "nvidia/cuda_nvcc"
    (nvcc / "bin").mkdir(parents=True)
    (nvcc / "bin/ptxas").write_text("")
    (nvcc / "nvvm/libdevice").mkdir(parents=True)
    (nvcc / "nvvm/libdevice/libdevice.10.bc").write_text("")
    (tmp_path / "nvidia/cudnn/lib").mkdir(parents=True)
    tools = packages.collect_tools({}, [str(tmp_path)])
    assert tools.nvidia_wheel_lib_dirs == [str(tmp_path / "nvidia/cudnn/lib")]
    assert tools.libdevice == str(nvcc / "nvvm/libdevice/libdevice.10.bc")
    assert tools.ptxas is not None


# --- dlopen the way TensorFlow does ---------------------------------------------------------


def test_required_libraries_follow_the_build() -> None:
    libs12 = dict((s, c) for c, s in libs.required_libraries("12.5.1", "9"))
    assert "libcudart.so.12" in libs12 and "libcudnn.so.9" in libs12 and "libcufft.so.11" in libs12
    assert "libcudart.so.11.0" in dict((s, c) for c, s in libs.required_libraries("11.8", "8.6"))
    assert libs.required_libraries(None, None) == []


def test_load_library_reports_the_loader_error_and_the_wheel_fallback(tmp_path: Path) -> None:
    wheel_lib = tmp_path / "nvidia/cudnn/lib"
    wheel_lib.mkdir(parents=True)
    (wheel_lib / "libcudnn.so.9").write_text("")
    loaded: list[str] = []

    def loader(name: str) -> ctypes.CDLL:
        if "/" not in name:
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        loaded.append(name)
        return ctypes.CDLL(None)  # this process: a real handle without cudnn symbols

    ok = libs.load_library("cudnn", "libcudnn.so.9", [str(wheel_lib)], loader)
    assert ok.loaded and ok.found_via == "wheel" and loaded == [str(wheel_lib / "libcudnn.so.9")]
    missing = libs.load_library("cusolver", "libcusolver.so.11", [str(wheel_lib)], loader)
    assert not missing.loaded
    assert "libcusolver.so.11: cannot open shared object file" in (missing.error or "")


def test_real_dlopen_of_a_missing_library_keeps_the_loader_text() -> None:
    result = libs.load_library("cudart", "libtfaccel-does-not-exist.so.12", [])
    assert not result.loaded and "libtfaccel-does-not-exist.so.12" in (result.error or "")


def test_kernel_module_version_parsing() -> None:
    text = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
        "GCC version:  gcc version 12.2.0\n"
    )
    assert libs.parse_kernel_module_version(text) == "550.54.14"
    open_module = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build"
    )
    assert libs.parse_kernel_module_version(open_module) == "570.86.15"
    assert libs.parse_kernel_module_version("nothing here") is None


def test_driver_on_a_fake_proc(tmp_path: Path) -> None:
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    )

    def no_libcuda(name: str) -> ctypes.CDLL:
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    info = libs.collect_driver(no_libcuda, str(tmp_path))
    assert info.kernel_module_version == "535.104.05"
    assert info.libcuda is not None and not info.libcuda.loaded
    assert "libcuda.so.1" in (info.libcuda.error or "")


# --- the whole snapshot ---------------------------------------------------------------------


def test_snapshot_of_this_machine_round_trips_through_json() -> None:
    snap = probe.snapshot()
    again = Snapshot.from_dict(json.loads(snap.to_json()))
    assert again == snap
    assert snap.cpu.logical_cores and snap.tensorflow.installed


def test_snapshot_without_libraries_loads_nothing_into_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a library was loaded")

    monkeypatch.setattr(libs, "collect_driver", refuse)
    monkeypatch.setattr(libs, "load_library", refuse)
    snap = probe.snapshot(libraries=False)
    assert snap.driver == DriverInfo() and snap.cuda_libs == []
    assert snap.cpu.logical_cores and snap.tensorflow.installed


# --- the TensorFlow of this process, through a fake module (the binding boundary) ----------


def _fake_tf(details: dict[str, dict[str, Any]]) -> Any:
    devices = [SimpleNamespace(name=f"/physical_device:{key}") for key in details]
    return SimpleNamespace(
        config=SimpleNamespace(
            list_physical_devices=lambda kind: [d for d in devices if f":{kind}:" in d.name],
            experimental=SimpleNamespace(
                get_device_details=lambda d: details[d.name.split("/physical_device:")[1]]
            ),
        )
    )


def test_tensorflow_gpus_and_their_details() -> None:
    fake = _fake_tf(
        {
            "GPU:0": {"device_name": "NVIDIA A100-SXM4-40GB", "compute_capability": (8, 0)},
            "GPU:1": {},  # a build that reports nothing about it
        }
    )
    assert tf_gpus.collect(fake) == [
        TfGpu(
            0,
            "NVIDIA A100-SXM4-40GB",
            "8.0",
            {"device_name": "NVIDIA A100-SXM4-40GB", "compute_capability": "(8, 0)"},
        ),
        TfGpu(1),
    ]
    assert tf_gpus.collect(_fake_tf({})) == []
    assert tf_gpus.compute_capability([9, 0]) == "9.0"
    assert tf_gpus.compute_capability("8.0") is None


def test_readings_of_a_running_process_go_through_one_door() -> None:
    assert readings.rss_bytes is process.rss_bytes
    assert readings.cpu_seconds is process.cpu_seconds
    assert readings.open_gpu_sampler is nvml.open_sampler
    assert isinstance(readings.open_gpu_sampler(nvml=make_binding([])), str)  # no GPU: a reason


def test_cuda_runtimes_tries_each_major_on_the_loaders_path_only() -> None:
    asked: list[str] = []

    def loader(name: str) -> ctypes.CDLL:
        asked.append(name)
        if name != "libcudart.so.13":
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return ctypes.CDLL(None)  # this process: a real handle without cudart symbols

    found = {lib.soname: lib for lib in libs.cuda_runtimes(loader)}
    assert asked == ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
    assert found["libcudart.so.13"].loaded and found["libcudart.so.13"].found_via == "system"
    assert not found["libcudart.so.12"].loaded
    assert "cannot open shared object file" in (found["libcudart.so.12"].error or "")


def test_platform_reads_glibc_and_the_free_space_where_pip_installs() -> None:
    info = system.collect_platform()
    if platform.libc_ver()[0] == "glibc":
        assert info.libc == "glibc" and info.libc_version.count(".") >= 1
    assert info.install_dir and info.install_dir_free_bytes is not None
    assert info.install_dir_free_bytes >= 0


def test_cuda_runtimes_knows_a_runtime_found_through_a_linked_ld_library_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "cuda-13.0/targets/x86_64-linux/lib"
    real.mkdir(parents=True)
    (tmp_path / "cuda-13.0/lib64").symlink_to(real)
    mapped = real / "libcudart.so.13.0.96"

    def loader(name: str) -> ctypes.CDLL:
        if name != "libcudart.so.13":
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return ctypes.CDLL(None)

    monkeypatch.setattr(libs, "_mapped_path", lambda soname, exact=False: str(mapped))
    via_path = libs.cuda_runtimes(loader, ld_library_path=str(tmp_path / "cuda-13.0/lib64"))
    assert via_path[0].found_via == "LD_LIBRARY_PATH" and via_path[0].path == str(mapped)
    via_cache = libs.cuda_runtimes(loader, ld_library_path="/usr/local/nvidia/lib64")
    assert via_cache[0].found_via == "system"


# --- emulation, the driver's profiling setting, TensorFlow's requirements -------------------


def test_detect_emulation_rosetta_qemu_user_and_native() -> None:
    name, evidence = system.detect_emulation("Darwin", "x86_64", None, 1)
    assert name == "rosetta" and "sysctl.proc_translated = 1" in (evidence or "")
    assert system.detect_emulation("Darwin", "arm64", None, 0) == (None, None)
    arm_cpuinfo = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    name, evidence = system.detect_emulation("Linux", "x86_64", arm_cpuinfo, None)
    assert name == "qemu-user" and "Arm CPU" in (evidence or "")
    assert system.detect_emulation("Linux", "aarch64", arm_cpuinfo, None) == (None, None)
    x86_cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t: fpu sse avx\n"
    assert system.detect_emulation("Linux", "x86_64", x86_cpuinfo, None) == (None, None)


def test_collect_platform_records_emulation_and_admin() -> None:
    info = system.collect_platform()
    assert info.emulator in (None, "rosetta", "qemu-user")
    geteuid = getattr(os, "geteuid", None)
    assert info.is_admin == (geteuid() == 0 if geteuid is not None else None)


def test_nvidia_params_profiling_restriction(tmp_path: Path) -> None:
    assert system.parse_nvidia_params("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    assert system.parse_nvidia_params("RmProfilingAdminOnly: 0\n") is False
    assert system.parse_nvidia_params("ResmanDebugLevel: 1\n") is None
    assert system.nvidia_profiling_admin_only(str(tmp_path)) is None  # no driver
    params = tmp_path / "proc/driver/nvidia/params"
    params.parent.mkdir(parents=True)
    params.write_text("EnableMSI: 1\nRmProfilingAdminOnly: 1\n")
    assert system.nvidia_profiling_admin_only(str(tmp_path)) is True


def test_tensorflow_requires_are_read_from_its_metadata_without_import() -> None:
    build = packages.collect_tensorflow(packages.collect_distributions())
    if not build.installed or not build.distribution:
        pytest.skip("no TensorFlow distribution installed here")
    assert any(r.startswith("protobuf") for r in build.requires)
    assert packages.distribution_requires("no-such-distribution-xyz") == []


def test_a_probe_reads_each_distributions_metadata_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata
    from collections import Counter

    from tfaccel import probe

    reads: Counter[str] = Counter()
    read_text = importlib.metadata.PathDistribution.read_text

    def counted(self: importlib.metadata.PathDistribution, filename: str) -> str | None:
        if filename in ("METADATA", "PKG-INFO"):
            reads[f"{self._path}/{filename}"] += 1
        return read_text(self, filename)

    monkeypatch.setattr(importlib.metadata.PathDistribution, "read_text", counted)
    snap = probe.snapshot(libraries=False)
    assert reads, "no METADATA was read"
    assert max(reads.values()) == 1, [name for name, n in reads.items() if n > 1][:5]
    if snap.tensorflow.distribution:  # its Requires-Dist came from that one read
        assert any(r.startswith("protobuf") for r in snap.tensorflow.requires)


def _fake_distribution(site: Path, folder: str, name: str, version: str) -> None:
    info = site / f"{folder}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_fingerprints_probe_finds_the_tensorflow_the_full_probe_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tensorflow_release looks the TensorFlow distributions up by name: the same one as
    collect_tensorflow (first sorted name, first sys.path entry), here on fake installs that
    come first on sys.path, and again after an upgrade (nothing kept from the first look)."""
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "tensorflow").mkdir(parents=True)
    (first / "tensorflow" / "__init__.py").write_text("")
    _fake_distribution(first, "tensorflow_cpu", "tensorflow-cpu", "2.30.0")
    _fake_distribution(second, "tensorflow_cpu", "tensorflow-cpu", "2.10.0")  # shadowed
    _fake_distribution(second, "tf_nightly", "tf-nightly", "2.31.0.dev1")  # sorts after
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    full = packages.collect_tensorflow(packages.collect_distributions())
    light = packages.tensorflow_release()
    assert (light.installed, light.distribution, light.version) == (
        True,
        "tensorflow-cpu",
        "2.30.0",
    )
    assert (full.distribution, full.version, full.location) == (
        light.distribution, light.version, light.location,
    )  # fmt: skip
    # upgraded in place: another .dist-info folder, read again
    (first / "tensorflow_cpu-2.30.0.dist-info").rename(first / "tensorflow_cpu-2.32.0.dist-info")
    meta = first / "tensorflow_cpu-2.32.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("2.30.0", "2.32.0"))
    stat = first.stat()
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a listing that changed
    assert packages.tensorflow_release().version == "2.32.0"


def test_the_fingerprints_probe_gives_the_full_probes_fingerprint_reading_one_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    from tfaccel import inventory

    full = inventory.current().fingerprint
    reads: list[str] = []
    read_text = importlib.metadata.PathDistribution.read_text

    def counted(self: importlib.metadata.PathDistribution, filename: str) -> str | None:
        if filename in ("METADATA", "PKG-INFO"):
            reads.append(str(self._path))
        return read_text(self, filename)

    monkeypatch.setattr(importlib.metadata.PathDistribution, "read_text", counted)
    assert inventory.current_fingerprint() == full
    assert len(set(reads)) <= 1, reads  # TensorFlow's own METADATA at most
    snap = probe.fingerprint_snapshot()
    assert inventory.machine_fingerprint(snap) == full
