"""Snapshots of machines for the doctor's rules and the tests that render their findings: a
healthy GPU machine and its parts, each changed by keyword to make a scenario."""

from __future__ import annotations

from tfaccel.snapshot import (
    CpuInfo,
    Distribution,
    DriverInfo,
    GpuInfo,
    LibraryLoad,
    NvmlInfo,
    PciDevice,
    PlatformInfo,
    Snapshot,
    TfBuild,
    ToolPaths,
)

GIB = 2**30
WHEEL_LIBS = "/venv/lib/python3.11/site-packages/nvidia"
CURRENT_TARGETS = ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]


def gpu(
    index: int = 0,
    name: str = "NVIDIA GeForce RTX 4090",
    cc: str | None = "8.9",
    sms: int | None = 128,
    total_gib: float = 24,
    used_gib: float = 0.4,
) -> GpuInfo:
    return GpuInfo(
        index=index,
        name=name,
        uuid=f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        pci_bus_id=f"00000000:0{index + 1}:00.0",
        memory_total_bytes=int(total_gib * GIB),
        memory_used_bytes=int(used_gib * GIB),
        memory_free_bytes=int((total_gib - used_gib) * GIB),
        compute_capability=cc,
        multiprocessor_count=sms,
    )


def nvidia_pci(index: int = 0, driver: str | None = "nvidia") -> PciDevice:
    return PciDevice(f"0000:0{index + 1}:00.0", "0x10de", "0x2684", "0x030000", driver)


def cuda_libs(cudnn_version: str = "9.3.0", via: str = "wheel") -> list[LibraryLoad]:
    names = [
        ("libcudart.so.12", "cudart"), ("libcublas.so.12", "cublas"),
        ("libcublasLt.so.12", "cublasLt"), ("libcufft.so.11", "cufft"),
        ("libcusolver.so.11", "cusolver"), ("libcusparse.so.12", "cusparse"),
        ("libcudnn.so.9", "cudnn"),
    ]  # fmt: skip
    return [
        LibraryLoad(
            soname=soname,
            component=component,
            loaded=True,
            path=f"{WHEEL_LIBS}/{component}/lib/{soname}",
            found_via=via,
            version=cudnn_version if component == "cudnn" else None,
        )
        for soname, component in names
    ]


def gpu_machine(
    gpus: list[GpuInfo] | None = None,
    tf_version: str = "2.21.0",
    cuda: str = "12.5.1",
    cudnn: str = "9",
    driver: str = "560.35.03",
    driver_cuda: str = "12.6",
) -> Snapshot:
    """A healthy Linux x86_64 machine with an RTX 4090 and tensorflow[and-cuda]."""
    gpus = gpus if gpus is not None else [gpu()]
    return Snapshot(
        platform=PlatformInfo(system="Linux", machine="x86_64", python_version="3.11.9"),
        cpu=CpuInfo(model="AMD EPYC 7B13", flags=["sse4_2", "avx", "avx2", "fma"]),
        pci=[nvidia_pci(g.index) for g in gpus],
        nvml=NvmlInfo(
            available=True, driver_version=driver, cuda_driver_version=driver_cuda, gpus=gpus
        ),
        driver=DriverInfo(
            proc_version=f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}",
            kernel_module_version=driver,
            libcuda=LibraryLoad("libcuda.so.1", "cuda", True, f"/usr/lib/libcuda.so.{driver}"),
            libcuda_file_version=driver,
            cuda_driver_api_version=driver_cuda,
            nvidia_smi_path="/usr/bin/nvidia-smi",
        ),
        cuda_libs=cuda_libs(),
        distributions=[Distribution("tensorflow", tf_version)],
        tensorflow=TfBuild(
            installed=True,
            distribution="tensorflow",
            version=tf_version,
            build_info_found=True,
            is_cuda_build=True,
            cuda_version=cuda,
            cudnn_version=cudnn,
            cuda_compute_capabilities=list(CURRENT_TARGETS),
        ),
        tools=ToolPaths(
            ptxas=f"{WHEEL_LIBS}/cuda_nvcc/bin/ptxas",
            libdevice=f"{WHEEL_LIBS}/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
            nvidia_wheel_lib_dirs=[f"{WHEEL_LIBS}/cudnn/lib", f"{WHEEL_LIBS}/cublas/lib"],
        ),
    )
