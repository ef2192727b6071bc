"""What the log matcher knows: the causes it names and the messages that name them.

Patterns match the message text, never the source-path prefix: the prefix moved from
``tensorflow/stream_executor/...`` to ``external/local_xla/xla/...``, and TF >= 2.18 writes absl
prefixes (``E0000 00:00:...``). Each pattern has a literal ``anchor`` that every matching line
contains, so the matcher can find candidate lines with ``str.find``.

* :data:`CAUSES`: per cause id, the title and the fix the report shows;
* :data:`PATTERNS`: the messages, specific before generic (the first to match a line claims it),
  each with the status it gives and the detail it reads from the line (a library, a shape);
* :data:`BENIGN`: lines TensorFlow prints on every healthy start (``Unable to register cuDNN
  factory``, the CPU-instructions notice, ...), labelled and never called a cause.

A new pattern goes here, with a real log from a public issue in ``tests/data/doctor-corpus``
(its source and the cause the thread established in an ``index-*.jsonl``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tfaccel.core.findings import Status
from tfaccel.core.units import fmt_bytes

__all__ = [
    "BENIGN",
    "CAUSES",
    "PATTERNS",
    "RELIEVED",
    "UNNAMED_LIBRARY_FIX",
    "Cause",
    "Pattern",
]


@dataclass(frozen=True)
class Cause:
    """What the report says about a cause id, whichever of its patterns matched."""

    title: str
    fix: str


# How to let the profiler read the GPU's counters (also the cupti_privileges rule's fix).
PROFILING_FIX = (
    "run the profiled job as root, or allow every user on the host: "
    "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
    "/etc/modprobe.d/nvidia-profiling.conf && sudo update-initramfs -u && sudo reboot; "
    "in Docker: docker run --cap-add SYS_ADMIN ..."
)

ARM64_PYTHON = (
    "install an arm64 Python: `python -c 'import platform; print(platform.machine())'` must "
    "print arm64"
)
"""The fix of an x86_64 Python under Rosetta on Apple silicon (no AVX there)."""

CAUSES: dict[str, Cause] = {
    "tensorflow_gpu_deprecated": Cause(
        "The tensorflow-gpu package was removed; pip cannot install it",
        "pip uninstall -y tensorflow-gpu && pip install 'tensorflow[and-cuda]' "
        "(Linux; elsewhere `pip install tensorflow`), and write tensorflow instead of "
        "tensorflow-gpu in requirements files",
    ),
    "windows_native": Cause(
        "TensorFlow >= 2.11 has no CUDA build for native Windows",
        "wsl --install, then inside WSL2: pip install 'tensorflow[and-cuda]' "
        "(NVIDIA Windows driver >= 528.33)",
    ),
    "cpu_no_avx": Cause(
        "The CPU lacks AVX, which the official TensorFlow wheels need (Illegal instruction)",
        "run on a CPU with AVX, or build TensorFlow on this machine: "
        "bazel build --copt=-march=native //tensorflow/tools/pip_package:wheel; on a Mac with "
        "Apple silicon (zsh's 'illegal hardware instruction') it is an x86_64 Python under "
        f"Rosetta: {ARM64_PYTHON}",
    ),
    "no_driver_or_hidden": Cause(
        "CUDA found no usable GPU: no driver, or the GPUs are hidden",
        "unset CUDA_VISIBLE_DEVICES (or set it to existing indices, e.g. "
        "`export CUDA_VISIBLE_DEVICES=0`); check the driver with `nvidia-smi`; "
        "in Docker: docker run --gpus all ...",
    ),
    "driver_mismatch": Cause(
        "The NVIDIA kernel module and the user-space driver (libcuda) differ in version",
        "sudo reboot (after a driver upgrade); in a container, do not install a driver in the "
        "image: docker run --gpus all ...",
    ),
    "driver_older_than_ptx": Cause(
        "The NVIDIA driver is older than the CUDA that TensorFlow was built with",
        "upgrade the NVIDIA driver until `nvidia-smi` shows a CUDA Version >= TensorFlow's: "
        "sudo ubuntu-drivers install && sudo reboot",
    ),
    "missing_cuda_libs": Cause(
        "CUDA/cuDNN libraries did not load, so TensorFlow skipped the GPU",
        "pip install 'tensorflow[and-cuda]'; to see each load attempt: "
        'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
        "print(tf.config.list_physical_devices('GPU'))\"",
    ),
    "cudnn_mismatch": Cause(
        "The cuDNN that loaded is not the one TensorFlow was built for",
        "pip install 'tensorflow[and-cuda]' and take older cuDNN directories off "
        "LD_LIBRARY_PATH; TensorFlow's own is in "
        "`python -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])'`/lib",
    ),
    "cc_too_low": Cause(
        "The GPU's compute capability is below the minimum this TensorFlow was built for",
        "build TensorFlow from source with TF_CUDA_COMPUTE_CAPABILITIES=<the GPU's X.Y> "
        "./configure, or install an older TensorFlow whose wheels target it",
    ),
    "gpu_too_few_cores": Cause(
        "TensorFlow ignored a GPU with fewer multiprocessors than its other GPUs",
        "export TF_MIN_GPU_MULTIPROCESSOR_COUNT=<the ignored GPU's core count>, or hide it: "
        "export CUDA_VISIBLE_DEVICES=<the other GPUs' indices>",
    ),
    "cc_too_new": Cause(
        "The GPU is newer than the CUDA kernels shipped in this TensorFlow",
        "compute capability 9.x: let the first PTX JIT finish and keep its cache "
        "(export CUDA_CACHE_MAXSIZE=4294967296); 10.x/12.x (Blackwell): "
        "docker run --gpus all -it --rm nvcr.io/nvidia/tensorflow:25.02-tf2-py3, "
        "or build TensorFlow from source",
    ),
    "xla_libdevice_ptxas": Cause(
        "XLA cannot find libdevice or ptxas, so XLA/jit_compile fails on the GPU",
        "pip install nvidia-cuda-nvcc-cu12; or "
        "export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda (the directory holding "
        "nvvm/libdevice)",
    ),
    "oom": Cause(
        "The GPU ran out of memory",
        "halve the batch size; against fragmentation: export TF_GPU_ALLOCATOR=cuda_malloc_async; "
        "tf.keras.mixed_precision.set_global_policy('mixed_float16') halves activations; "
        "`nvidia-smi` shows other processes holding memory",
    ),
    "no_matching_wheel": Cause(
        "pip found no TensorFlow wheel for this Python: a 32-bit Python, or a Python version "
        "TensorFlow has no wheel for",
        "python -c \"import struct, sys; print(struct.calcsize('P') * 8, sys.version)\" must "
        "print 64 and a Python version that https://www.tensorflow.org/install/pip lists; "
        "create the environment with such a Python (64-bit) and install again",
    ),
    "macos_no_metal": Cause(
        "On macOS, TensorFlow uses the GPU only through the tensorflow-metal plugin",
        "pip install tensorflow-metal (Apple silicon or AMD GPU, macOS 12 or later), in the same "
        "environment as tensorflow",
    ),
    "cpu_only_build": Cause(
        "The TensorFlow installed is a build without CUDA (CPU only)",
        "pip uninstall -y tensorflow-cpu tensorflow && pip install 'tensorflow[and-cuda]' "
        "(Linux x86_64); with conda: conda install -c conda-forge 'tensorflow=*=cuda*'; "
        "on macOS there is no CUDA: pip install tensorflow-metal uses the Apple GPU",
    ),
    "aarch64_no_cuda": Cause(
        "TensorFlow's PyPI wheels for aarch64 (ARM64) have no CUDA: [and-cuda] gives a CPU build",
        "on Grace Hopper and other ARM64 servers: docker run --gpus all -it --rm "
        "nvcr.io/nvidia/tensorflow:25.02-tf2-py3 (NVIDIA's container has CUDA for ARM64), or "
        "build TensorFlow from source with CUDA; on Jetson: install the TensorFlow wheel of "
        "NVIDIA's JetPack for your JetPack version, not the PyPI one",
    ),
    "wsl_libcuda": Cause(
        "On WSL2, libcuda.so.1 (the Windows driver's, in /usr/lib/wsl/lib) was not found",
        "install the NVIDIA driver on Windows only (remove any Linux NVIDIA driver installed "
        "inside WSL), then export LD_LIBRARY_PATH=/usr/lib/wsl/lib:$LD_LIBRARY_PATH; "
        "`ls -l /usr/lib/wsl/lib/libcuda.so.1` must list the file",
    ),
    "ld_library_path_shadowing": Cause(
        "A system CUDA on LD_LIBRARY_PATH is loaded instead of the nvidia-* libraries pip "
        "installed for TensorFlow",
        "unset LD_LIBRARY_PATH, or take the /usr/local/cuda*/lib64 entries out of it (and out "
        "of ~/.bashrc), so TensorFlow loads the nvidia-* libraries of its own wheels; "
        "`tfaccel doctor` on that machine shows which copy of each library loads",
    ),
    "no_gpu_visible": Cause(
        "TensorFlow listed no GPU, and the log does not show why",
        "run `tfaccel doctor` on that machine: it checks the driver, each CUDA library and the "
        "TensorFlow build without importing TensorFlow; to make TensorFlow name what failed: "
        'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
        "print(tf.config.list_physical_devices('GPU'))\" 2>&1 | grep -iE 'dlopen|cuda'",
    ),
    "config_after_init": Cause(
        "Devices were configured after TensorFlow's runtime had started",
        "call tf.config.experimental.set_memory_growth(gpu, True) / set_visible_devices / "
        "set_logical_device_configuration right after `import tensorflow as tf`, before any "
        "tensor is created or a library that creates one is imported; or "
        "export TF_FORCE_GPU_ALLOW_GROWTH=true",
    ),
    "memory_growth_inconsistent": Cause(
        "Memory growth was set on some GPUs and not on others (TensorFlow needs it alike on "
        "every visible GPU)",
        "for gpu in tf.config.list_physical_devices('GPU'): "
        "tf.config.experimental.set_memory_growth(gpu, True) ; or hide the other GPUs first: "
        "export CUDA_VISIBLE_DEVICES=0 ; or export TF_FORCE_GPU_ALLOW_GROWTH=true instead",
    ),
    "gpu_memory_in_use": Cause(
        "CUDA could not start on the GPU for lack of memory: another process holds it",
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv "
        "(then stop those processes, or export CUDA_VISIBLE_DEVICES=<a free GPU's index>)",
    ),
    "cudnn_init_failed": Cause(
        "cuDNN failed to initialise (could not create its handle)",
        "let TensorFlow's GPU memory grow so cuDNN can allocate its workspace: "
        "export TF_FORCE_GPU_ALLOW_GROWTH=true (or tf.config.experimental.set_memory_growth(gpu, "
        "True) for every GPU, first thing); `nvidia-smi` shows other processes holding the GPU; "
        "if it persists, the cuDNN loaded does not fit the CUDA and driver: "
        "pip install 'tensorflow[and-cuda]'",
    ),
    "protobuf_incompatible": Cause(
        "The protobuf package is newer than the generated *_pb2.py code that imports it",
        "pip install 'protobuf==3.20.*' (code generated before protoc 3.19 needs protobuf < 4), "
        "or upgrade the package whose *_pb2.py the traceback names; slow workaround: "
        "export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python",
    ),
    "keras_versions_mixed": Cause(
        "Two Kerases are mixed: objects of one (keras, tf.keras, Keras 3, tf_keras) were "
        "given to the other",
        "import every layer, optimizer and model from one Keras: all from tensorflow.keras "
        "(or all from keras); a package built on Keras 2 under TensorFlow >= 2.16: "
        "pip install tf-keras && export TF_USE_LEGACY_KERAS=1 ; an add-on built on standalone "
        "Keras (keras-radam, keras-gradient-accumulation): export TF_KERAS=1",
    ),
    "legacy_optimizer_needed": Cause(
        "The new Keras optimizer (TensorFlow >= 2.11) does not take this argument or use",
        "give the new optimizer what it takes (learning_rate, not lr; a schedule, not decay: "
        "tf.keras.optimizers.schedules.InverseTimeDecay(lr, decay_steps=1, decay_rate=decay)), "
        "or use the legacy one: tf.keras.optimizers.legacy.Adam (TensorFlow 2.11 to 2.15; "
        "from 2.16: pip install tf-keras && export TF_USE_LEGACY_KERAS=1)",
    ),
    "x86_emulation": Cause(
        "An x86_64 TensorFlow ran on Apple silicon under Rosetta, which has no AVX "
        "(Illegal instruction)",
        f"{ARM64_PYTHON} (Miniforge for arm64, or python.org's universal2 build; untick 'Open "
        "using Rosetta' for the terminal), then in a new environment: pip install tensorflow "
        "(>= 2.13; before: tensorflow-macos) and pip install tensorflow-metal for the GPU",
    ),
    "cupti_privileges": Cause(
        "The profiler may not read the GPU's counters (CUPTI needs admin rights): the profile "
        "has no GPU activity",
        f"{PROFILING_FIX}; to train without profiling: "
        "tf.keras.callbacks.TensorBoard(profile_batch=0)",
    ),
    "xla_unsupported_op": Cause(
        "XLA (jit_compile) has no kernel for an op in the compiled function",
        "compile that function without XLA: model.compile(..., jit_compile=False), or "
        "@tf.function without jit_compile=True; or move the op named (tf.print, tf.py_function, "
        "string ops, shapes that depend on values such as tf.where) out of the compiled "
        "function; TF_XLA_FLAGS=--tf_xla_auto_jit=2 compiles only the parts XLA supports",
    ),
    "nccl_unavailable": Cause(
        "MirroredStrategy's all-reduce uses NCCL, which this TensorFlow build (Windows) lacks",
        "strategy = tf.distribute.MirroredStrategy("
        "cross_device_ops=tf.distribute.HierarchicalCopyAllReduce()) "
        "(or tf.distribute.ReductionToOneDevice()); or run in WSL2 or Linux, whose TensorFlow "
        "has NCCL",
    ),
    "pluggable_device": Cause(
        "A PluggableDevice plugin (tensorflow-directml-plugin, tensorflow-metal) did not load or "
        "found no GPU",
        "a plugin runs only with the TensorFlow release it was built for: "
        "tensorflow-directml-plugin: pip install tensorflow-cpu==2.10.0 "
        "tensorflow-directml-plugin; tensorflow-metal: pip install the tensorflow-metal release "
        "that https://developer.apple.com/metal/tensorflow-plugin/ lists for your TensorFlow; "
        "DirectML finds no adapter on a GPU without full Direct3D 12 (Intel before Gen 9): "
        "update the GPU driver, or train on the CPU",
    ),
    "cublas_init_failed": Cause(
        "cuBLAS failed to initialise (could not create its handle or allocate its workspace): "
        "the GPU's memory was taken, by TensorFlow's own allocator or another process",
        "let TensorFlow's GPU memory grow so cuBLAS can allocate: "
        "export TF_FORCE_GPU_ALLOW_GROWTH=true (or tf.config.experimental.set_memory_growth(gpu, "
        "True) for every GPU, first thing); `nvidia-smi` shows other processes holding the GPU; "
        "if it persists, the cuBLAS loaded does not fit the CUDA and driver: "
        "pip install 'tensorflow[and-cuda]'",
    ),
    "ptxas_older_than_gpu": Cause(
        "The CUDA toolkit's ptxas is older than the GPU, so TensorFlow compiles its kernels with "
        "the driver instead (a warning: the run goes on, its start is slower)",
        "nothing breaks; to silence it, install a ptxas that knows the GPU: "
        "pip install nvidia-cuda-nvcc-cu12 (or a CUDA toolkit at least as new as the GPU, "
        "first on PATH)",
    ),
    "numpy_abi_mismatch": Cause(
        "A compiled module and the installed NumPy do not match: one built for NumPy 1.x "
        "under NumPy 2 (TensorFlow < 2.18, or another compiled package), or one built for a "
        "newer NumPy than the one installed",
        "under NumPy 2 (\"compiled using NumPy 1.x\"): pip install 'numpy<2', or upgrade the "
        "package the traceback imports to a release built for NumPy 2 (TensorFlow >= 2.18); "
        '"compiled against API version 0x.." (NumPy too old for the module): '
        "pip install --upgrade numpy (to the version the package requires)",
    ),
    "numpy_too_new": Cause(
        "NumPy is newer than this TensorFlow (or a package built on it) supports: an alias it "
        "uses was removed (np.object, np.bool: NumPy >= 1.24), or TensorFlow < 2.5 meets NumPy "
        ">= 1.20 (a symbolic tensor cannot become an array)",
        "pip install 'numpy<1.24' (for the removed aliases) or 'numpy<1.20' (TensorFlow < "
        "2.5), in the environment that trains; better: upgrade TensorFlow to a release of "
        "the NumPy you have",
    ),
    "host_memory_oom": Cause(
        "The machine's memory (RAM) ran out: TensorFlow's CPU allocator could not allocate a "
        "tensor (a run on the CPU, or data held on the host), not a GPU's memory",
        "halve the batch size; keep the data on disk and read it with tf.data (not whole "
        "arrays in memory); `free -h` shows what is left, and other programs' use",
    ),
    "tpu_needs_gcs": Cause(
        "A Cloud TPU reads and writes through Cloud Storage: a local path (a checkpoint, the "
        "data) is a file system it does not have",
        "give the TPU gs:// paths: the model directory and the data in a bucket "
        "(model_dir='gs://BUCKET/run1'), readable and writable by the TPU's service account",
    ),
    "optimizer_outside_strategy_scope": Cause(
        "The model or its optimizer was created outside strategy.scope(): under a "
        "tf.distribute strategy the optimizer's first step fails (merge_call inside a "
        "tf.function)",
        "create the model and call model.compile(...) inside `with strategy.scope():`, then "
        "model.fit as before",
    ),
    "tpu_connect_to_host_api": Cause(
        "The TPU was connected with tf.config.experimental_connect_to_host, so its functions "
        "are placed on a TPU that was never initialised for them",
        "resolver = tf.distribute.cluster_resolver.TPUClusterResolver(); "
        "tf.config.experimental_connect_to_cluster(resolver); "
        "tf.tpu.experimental.initialize_tpu_system(resolver); "
        "strategy = tf.distribute.TPUStrategy(resolver)",
    ),
    "h5py3_old_keras": Cause(
        "Keras before 2.5 (TensorFlow < 2.4) reads .h5 files with h5py 3, which returns text "
        "where it expects bytes ('str' object has no attribute 'decode')",
        "pip install 'h5py<3' (h5py 2.10.0, in the environment that loads the model), or "
        "upgrade TensorFlow/Keras to a release that reads h5py 3 (TensorFlow >= 2.4)",
    ),
    "gpu_p2p_blocked": Cause(
        "GPU peer-to-peer transfers are blocked (the IOMMU faults them: DMAR errors in dmesg), "
        "so NCCL's all-reduce between GPUs hangs or fails",
        "export NCCL_P2P_DISABLE=1 (NCCL goes through host memory), or turn the IOMMU off or "
        "to passthrough (kernel options intel_iommu=off or iommu=pt, then reboot); "
        "nvidia-smi topo -m and NCCL's all_reduce_perf check peer access",
    ),
    "tf_keras_missing": Cause(
        "Keras 2 (the tf_keras package) is needed, by TF_USE_LEGACY_KERAS or by a library "
        "built on it (Transformers' TensorFlow models), and is not installed",
        "pip install 'tf-keras~=<your TensorFlow's minor version>' (e.g. tf-keras~=2.16.0 for "
        "TensorFlow 2.16), or unset TF_USE_LEGACY_KERAS if the code is written for Keras 3",
    ),
    "dataset_batch_shapes": Cause(
        "tf.data cannot batch elements of different shapes (images of different sizes, "
        "sequences of different lengths)",
        "make the elements one shape before .batch(): images: "
        "dataset.map(lambda x, y: (tf.image.resize(x, (224, 224)), y)); sequences: "
        "dataset.padded_batch(batch_size) or dataset.ragged_batch(batch_size)",
    ),
    "input_not_numeric": Cause(
        "The data given to fit is not numeric arrays: NumPy arrays of Python objects (mixed "
        "types, lists of different lengths, a DataFrame's text columns) cannot become tensors",
        "convert before fit: x = np.asarray(x).astype('float32') (a DataFrame: "
        "df.apply(pd.to_numeric, errors='coerce') and drop or encode its text columns); "
        "sequences of different lengths: keras.utils.pad_sequences(x)",
    ),
    "labels_loss_mismatch": Cause(
        "The labels do not fit the loss: integer class labels need a sparse loss, one-hot "
        "labels a categorical one, and their shape must match the model's output",
        "integer labels (y of shape (n,) or (n, 1)): loss='sparse_categorical_crossentropy'; "
        "one-hot labels (n, classes): loss='categorical_crossentropy' "
        "(keras.utils.to_categorical(y) makes them); and a last layer of as many units as "
        "classes",
    ),
    "mixed_precision_dtypes": Cause(
        "Under a mixed_float16/mixed_bfloat16 policy, float16 and float32 tensors met in one "
        "operation (a tensor made in float32 inside a layer or a loss)",
        "make tensors in a layer's compute dtype (tf.cast(t, self.compute_dtype), not "
        "tf.float32), set the policy before the model is built, and give the last layer "
        "dtype='float32'",
    ),
    "tensorboard_missing": Cause(
        "TensorBoard is not installed: the TensorBoard callback and tf.summary.scalar/image/"
        "histogram fail (TensorFlow >= 2.21 no longer installs it)",
        "pip install tensorboard (in the environment that runs the training)",
    ),
    "input_ran_out": Cause(
        "The input ran out of data before steps_per_epoch * epochs batches: training stopped early",
        "drop steps_per_epoch (each epoch then runs to the end of the data), or set it to "
        "len(x_train) // batch_size; a tf.data.Dataset meant to loop: dataset.repeat() before "
        "model.fit",
    ),
}


# x86_emulation as a log shows it under QEMU user mode (infer.py): the same cause with its own
# title and fix, since Rosetta's remedy (an arm64 Python) is not a container's.
QEMU_EMULATION_TITLE = (
    "An x86_64 TensorFlow ran under QEMU user-mode emulation (an amd64 image on an Arm host), "
    "which lacks the AVX the wheels need"
)
QEMU_EMULATION_FIX = (
    "run the arm64 build natively instead of the x86_64 one under emulation: "
    "docker run --platform linux/arm64 ... (TensorFlow has aarch64 wheels: pip install tensorflow)"
)

# "Cannot dlopen some GPU libraries" with no library named (TF >= 2.16 names each one only at a
# high log level): how to make TensorFlow name it, and what to run on the machine itself.
UNNAMED_LIBRARY_FIX = (
    "the log names no library; to make TensorFlow name each one it failed to load: "
    'TF_CPP_MAX_VLOG_LEVEL=3 python -c "import tensorflow as tf; '
    "print(tf.config.list_physical_devices('GPU'))\" 2>&1 | grep -i dlopen ; "
    "`tfaccel doctor` (no --log) on that machine loads every CUDA library TensorFlow needs and "
    "names the missing ones; the usual fix: pip install 'tensorflow[and-cuda]'"
)


# --------------------------------------------------------------------------- details


def _extract(regex: str, template: str) -> Callable[[str], str | None]:
    """A detail function: search ``regex`` in the line and fill ``template`` with its groups."""
    compiled = re.compile(regex)

    def detail(line: str) -> str | None:
        match = compiled.search(line)
        if match is None:
            return None
        groups = {k: (v or "?").strip().rstrip(".") for k, v in match.groupdict().items()}
        return template.format(**groups)

    return detail


# fmt: off
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1,
}
# fmt: on
_OOM_SHAPE_RE = re.compile(r"shape ?\[(?P<shape>[^\]]*)\](?: and type (?P<dtype>\w+))?")


def _oom_shape(line: str) -> str | None:
    """``OOM when allocating tensor with shape[5760,4,4,2048]`` -> the shape and its size."""
    match = _OOM_SHAPE_RE.search(line)
    if match is None:
        return None
    shape = match.group("shape").replace(" ", "")
    dims = shape.split(",")
    if not all(d.isdigit() and len(d) < 10 for d in dims):
        return f"tensor shape [{shape}]"
    elements = 1
    for d in dims:
        elements *= int(d)
    dtype = match.group("dtype")
    size = elements * _DTYPE_BYTES.get(dtype or "float", 4)
    as_what = dtype if dtype else "float32"
    return f"tensor shape [{shape}]: {elements:,} elements, {_human_bytes(size)} as {as_what}"


def _human_bytes(size: int) -> str:
    return fmt_bytes(size)


_CUDNN_RE = re.compile(
    r"Loaded runtime CuDNN library: ?(?P<loaded>[\d.]+).*?but source was compiled with:? ?"
    r"(?P<compiled>[\d.]+)"
)


def _cudnn_versions(line: str) -> str | None:
    """``7301 ... 7003`` -> ``loaded cuDNN 7301 (7.3.1), TensorFlow built with 7003 (7.0.3)``."""
    match = _CUDNN_RE.search(line)
    if match is None:
        return None
    loaded = _cudnn_readable(match.group("loaded").rstrip("."))
    compiled = _cudnn_readable(match.group("compiled").rstrip("."))
    return f"loaded cuDNN {loaded}, TensorFlow built with {compiled}"


def _cudnn_readable(version: str) -> str:
    """cuDNN < 9 printed ``major*1000 + minor*100 + patch``; show the dotted form beside it."""
    if version.isdigit() and len(version) == 4:
        number = int(version)
        return f"{version} ({number // 1000}.{number % 1000 // 100}.{number % 100})"
    return version


# --------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Pattern:
    """One message that names a cause.

    Attributes:
        cause: the cause id.
        anchor: literal text every matching line contains (searched with ``str.find``).
        regex: when set, the line must also match it.
        status: ``fail`` or, for milder messages, ``warn``.
        detail: pulls a value worth showing (a library name, a shape) out of the line.
    """

    cause: str
    anchor: str
    regex: re.Pattern[str] | None = None
    status: Status = "fail"
    detail: Callable[[str], str | None] | None = None


def _p(
    cause: str,
    anchor: str,
    regex: str | None = None,
    status: Status = "fail",
    detail: Callable[[str], str | None] | None = None,
) -> Pattern:
    return Pattern(cause, anchor, re.compile(regex) if regex else None, status, detail)


# Specific before generic: the first pattern to match a line claims it.
PATTERNS: tuple[Pattern, ...] = (
    _p(
        "driver_mismatch",
        "does not match DSO version",
        detail=_extract(
            r"kernel version (?P<k>[\d.]+) does not match DSO version (?P<d>[\d.]+)",
            "kernel module {k}, libcuda (DSO) {d}",
        ),
    ),
    _p("driver_mismatch", "Driver/library version mismatch"),
    _p(
        "driver_mismatch",
        "API mismatch",
        regex=r"NVRM: API mismatch",
        detail=_extract(
            r"client has the version (?P<c>[\d.]+), but (?:NVRM: )?this kernel module has the "
            r"version (?P<k>[\d.]+)",
            "driver libraries {c}, kernel module {k}",
        ),
    ),
    _p("driver_mismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    _p(
        "driver_older_than_ptx",
        "which is older than the",
        regex=r"CUDA version is [\d.]+ which is older than the",
        detail=_extract(
            r"CUDA version is (?P<d>[\d.]+) which is older than the [\w ]*?version "
            r"\(?(?P<p>[\d.]+)",
            "driver's CUDA {d} < PTX compiler {p}",
        ),
    ),
    _p("driver_older_than_ptx", "CUDA driver version is insufficient for CUDA runtime version"),
    _p("driver_older_than_ptx", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    _p("tensorflow_gpu_deprecated", '"tensorflow-gpu" package has been removed'),
    _p("tensorflow_gpu_deprecated", "No matching distribution found for tensorflow-gpu"),
    _p(
        "tensorflow_gpu_deprecated",
        "gpu-2.",
        regex=r"tensorflow[-_]gpu-2\.(?:1[2-9]|[2-9]\d)\.\d+\.tar\.gz",
        detail=_extract(
            r"(?P<s>tensorflow[-_]gpu-[\d.]+)\.tar\.gz",
            "{s}: the stub that only says it was removed",
        ),
    ),
    _p(
        "no_matching_wheel",
        "No matching distribution found for tensorflow",
        regex=r"for tensorflow(?:[-_](?:cpu|intel|macos|metal))?(?:[<>=!~\[ ]|$)",
    ),
    _p(
        "no_matching_wheel",
        "is not a supported wheel on this platform",
        regex=r"tensorflow",
        detail=_extract(r"(?P<w>\S*tensorflow\S*\.whl)", "{w}"),
    ),
    _p("windows_native", "CUDA build is not supported for Windows"),
    _p("cpu_no_avx", "Illegal instruction"),
    _p("cpu_no_avx", "illegal hardware instruction"),
    _p("cpu_no_avx", "compiled to use AVX instructions, but these aren't available"),
    _p(  # NVIDIA's NGC containers, at start
        "cpu_no_avx",
        "was built for CPUs supporting at least the AVX",
        detail=lambda line: "the container's build needs AVX",
    ),
    _p("cpu_no_avx", "which does not report support for AVX"),
    _p(
        "no_driver_or_hidden",
        "libcuda.so.1",
        regex=r"Could not load dynamic library 'libcuda\.so|libcuda\.so\.1: (?:cannot open|file "
        r"too short)",
        detail=_extract(r"(?P<e>libcuda\.so\.1: (?:cannot open|file too short)[^;]*)", "{e}"),
    ),
    _p(
        "gpu_memory_in_use",
        "failed call to cuInit",
        regex=r"CUDA_ERROR_OUT_OF_MEMORY",
        detail=_extract(r"failed call to cuInit: (?P<e>.{1,160})", "cuInit: {e}"),
    ),
    _p(
        "gpu_memory_in_use",
        "CUDA_ERROR_OUT_OF_MEMORY",
        regex=r"(?i)(?:create|retain|initiali[sz]e) (?:a )?(?:CUDA )?context|cuCtxCreate|"
        r"cuDevicePrimaryCtxRetain",
        detail=_extract(
            r"(?P<f>cuDevicePrimaryCtxRetain|cuCtxCreate|(?i:create|retain|initiali[sz]e) "
            r"(?:a )?(?:CUDA )?context)\W",
            "CUDA_ERROR_OUT_OF_MEMORY in {f}: CUDA's own context did not fit, before any "
            "tensor was allocated",
        ),
    ),
    _p(
        "no_driver_or_hidden",
        "failed call to cuInit",
        regex=r"CUDA_ERROR_NO_DEVICE|no CUDA-capable device",
        detail=_extract(r"failed call to cuInit: (?P<e>.{1,160})", "cuInit: {e}"),
    ),
    # Another cuInit error shows that CUDA did not start, not why: no driver is the likeliest
    # reason, not an established one.
    _p(
        "no_driver_or_hidden",
        "failed call to cuInit",
        status="warn",
        detail=_extract(
            r"failed call to cuInit: (?P<e>.{1,160})",
            "cuInit: {e} (this error does not say why; no driver is the likeliest reason)",
        ),
    ),
    _p(
        "no_driver_or_hidden",
        "Couldn't open CUDA library libcuda",
        detail=_extract(r"(?P<e>Couldn't open CUDA library libcuda\S*)", "{e}"),
    ),
    _p("no_driver_or_hidden", "CUDA_ERROR_NO_DEVICE"),
    _p("no_driver_or_hidden", "kernel driver does not appear to be running on this host"),
    _p("no_driver_or_hidden", "Could not find cuda drivers on your machine"),
    _p("no_driver_or_hidden", "/dev/nvidia0 does not exist"),
    _p(
        "missing_cuda_libs",
        "Could not load dynamic library",
        regex=r"Could not load dynamic library '(?!libnvinfer|nvinfer|libcuda\.)[^']+'",
        detail=_extract(r"Could not load dynamic library '(?P<lib>[^']+)'", "missing {lib}"),
    ),
    _p(
        "missing_cuda_libs",
        "Could not load library ",
        regex=r"Could not load library \S+\. Error:",
        detail=_extract(
            r"Could not load library (?P<lib>\S+)\. Error: (?P<e>.{1,120})", "{lib}: {e}"
        ),
    ),
    _p(
        "missing_cuda_libs",
        "Couldn't open CUDA library",
        detail=_extract(r"Couldn't open CUDA library (?P<lib>\S+?)\.? ", "missing {lib}"),
    ),
    _p("missing_cuda_libs", "Unable to load cuDNN DSO"),
    _p("missing_cuda_libs", "Cannot dlopen some GPU libraries"),
    _p("missing_cuda_libs", "Skipping registering GPU devices"),
    _p("missing_cuda_libs", "DNN library is not found"),
    _p("cudnn_mismatch", "Loaded runtime CuDNN library", detail=_cudnn_versions),
    _p(
        "cudnn_init_failed",
        "cudnn handle",
        regex=r"(?i)(?:create|destroy) cudnn handle(?!: CUDNN_STATUS_ALLOC_FAILED)",
        detail=_extract(r"(?i)create cudnn handle: (?P<e>CUDNN_STATUS_\w+)", "cuDNN: {e}"),
    ),
    _p(
        "cudnn_init_failed",
        "cudnn library could not create a handle",
        regex=r"could not create a handle(?!: CUDNN_STATUS_ALLOC_FAILED)",
        detail=_extract(r"create a handle: (?P<e>CUDNN_STATUS_\w+)", "cuDNN: {e}"),
    ),
    _p("cudnn_init_failed", "This is probably because cuDNN failed to initialize"),
    _p("cudnn_mismatch", "DNN library initialization failed"),
    _p(
        "cc_too_low",
        "The minimum required Cuda capability",
        regex=r"compute capability [\d.]+\. The minimum required",
        detail=_extract(
            r"name: (?P<n>[^,)]+).*?compute capability (?P<cc>[\d.]+)\. The minimum "
            r"required Cuda capability is (?P<m>[\d.]+)",
            "{n}: compute capability {cc} < minimum {m}",
        ),
    ),
    _p(
        "gpu_too_few_cores",
        "The minimum required count is",
        regex=r"(?:core|multiprocessor) count",
        status="warn",
        detail=_extract(
            r"name: (?P<n>[^,)]+).*?(?:core|multiprocessor) count: (?P<c>\d+)\. The minimum "
            r"required count is (?P<m>\d+)",
            "{n}: {c} multiprocessors < minimum {m}",
        ),
    ),
    _p(
        "cc_too_new",
        "not built with CUDA kernel binaries compatible with compute capability",
        regex=r"compute capability (?:1\d|[2-9]\d)\.\d",
        detail=_extract(r"compute capability (?P<cc>\d+\.\d+)", "compute capability {cc}"),
    ),
    _p(
        "cc_too_new",
        "not built with CUDA kernel binaries compatible with compute capability",
        status="warn",
        detail=_extract(
            r"compute capability (?P<cc>\d+\.\d+)",
            "compute capability {cc}: PTX JIT at start (can take many minutes)",
        ),
    ),
    _p("cc_too_new", "CUDA_ERROR_INVALID_PTX"),
    _p(
        "cc_too_new",
        "does not support target 'sm_",
        detail=_extract(
            r"PTX version (?P<p>[\d.]+) does not support target '(?P<t>sm_\w+)'",
            "PTX {p} of this build cannot target {t}",
        ),
    ),
    _p(
        "ptxas_older_than_gpu",
        "Your CUDA software stack is old",
        status="warn",
        detail=_extract(r"Value '(?P<t>sm_\w+)' is not defined", "ptxas does not know {t}"),
    ),
    _p(
        "cc_too_new",
        "is not defined for option 'gpu-name'",
        detail=_extract(r"Value '(?P<t>sm_\w+)' is not defined", "ptxas does not know {t}"),
    ),
    _p("cc_too_new", "device kernel image is invalid"),
    _p("cc_too_new", "no kernel image is available for execution on the device"),
    _p("xla_libdevice_ptxas", "libdevice not found"),
    _p(
        "xla_libdevice_ptxas",
        "Can't find libdevice directory",
        detail=_extract(r"Can't find libdevice directory (?P<d>\S+)", "looked in {d}"),
    ),
    _p("xla_libdevice_ptxas", "Searched for CUDA in the following directories"),
    _p("xla_libdevice_ptxas", "ptxas not found"),
    _p("xla_libdevice_ptxas", "find ptxas binary"),
    _p("xla_libdevice_ptxas", "Failed to launch ptxas"),
    _p(
        "host_memory_oom",
        "OOM when allocating tensor",
        regex=r"device:CPU:\d+ by allocator (?:cpu|mklcpu|mkl_cpu)",
        detail=_oom_shape,
    ),
    _p("oom", "OOM when allocating tensor", detail=_oom_shape),
    _p(
        "oom",
        "ran out of memory trying to allocate",
        regex=r"not a failure",
        status="warn",
        detail=_extract(
            r"trying to allocate (?P<s>[\d.]+\s*[KMGT]?i?B)",
            "{s} allocation failed (TensorFlow retried; it may be slower)",
        ),
    ),
    _p(
        "oom",
        "ran out of memory trying to allocate",
        detail=_extract(r"trying to allocate (?P<s>[\d.]+\s*[KMGT]?i?B)", "{s} allocation failed"),
    ),
    _p(
        "oom",
        "CUDA_ERROR_OUT_OF_MEMORY",
        detail=_extract(r"failed to allocate (?P<s>[\d.]+\s*[KMGT]?i?B?)", "{s} allocation failed"),
    ),
    _p(
        "oom",
        "Out of memory while trying to allocate",
        detail=_extract(r"trying to allocate (?P<s>\d+) bytes", "{s} bytes allocation failed"),
    ),
    _p("oom", "CUDNN_STATUS_ALLOC_FAILED"),
    _p("oom", "ResourceExhaustedError"),
    _p("memory_growth_inconsistent", "Memory growth cannot differ between GPU devices"),
    _p(
        "protobuf_incompatible",
        "be created directly",
        regex=r"Descriptors (?:cannot (?:not )?|should not )be created directly",
    ),
    _p(
        "keras_versions_mixed",
        "Could not interpret optimizer identifier",
        detail=_extract(r"identifier:?'?,? <(?P<o>[\w.]+) object", "the optimizer given: {o}"),
    ),
    _p(
        "keras_versions_mixed",
        "The added layer must be an instance of class Layer",
        detail=_extract(r"Found: <(?P<o>[\w.]+) object", "the layer given: {o}"),
    ),
    _p(
        "keras_versions_mixed",
        "can be added to a Sequential model",
        regex=r"Only instances of `keras\.Layer` can be added to a Sequential model",
        detail=_extract(r"Received: <(?P<o>[\w.]+) object", "the layer given: {o}"),
    ),
    _p(
        "keras_versions_mixed",
        "A KerasTensor cannot be used as input to a TensorFlow function",
        detail=lambda line: "a Keras 3 tensor given to a tf.* function (code for tf.keras 2)",
    ),
    _p(
        "keras_versions_mixed",
        "to return a valid Keras Model instance",
        regex=r"Received: <(?:tf_keras|keras)\.",
        detail=_extract(r"Received: <(?P<o>[\w.]+) object", "the model given: {o}"),
    ),
    _p(
        "keras_versions_mixed",
        "No module named 'keras.",
        regex=r"No module named '(?:keras\.src|keras\.engine|keras\.layers\.core|"
        r"keras\.legacy|keras\.wrappers|keras\.api\._v2)[\w.]*'(?!; 'keras' is not a package)",
        detail=_extract(
            r"No module named '(?P<m>keras\.[\w.]+)'",
            "{m} is in another Keras than the one installed",
        ),
    ),
    _p(
        "tf_keras_missing",
        "you do not have the tf_keras package installed",
    ),
    _p(
        "numpy_abi_mismatch",
        "compiled using NumPy 1.x cannot be run in",
        detail=_extract(r"cannot be run in\s+NumPy (?P<v>[\d.]+)", "NumPy {v} installed"),
    ),
    _p("numpy_abi_mismatch", "_ARRAY_API not found"),
    _p(  # the error; the RuntimeWarning of the same words is harmless
        "numpy_abi_mismatch",
        "numpy.dtype size changed, may indicate binary incompatibility",
        regex=r"ValueError: numpy\.dtype size changed|from C header",
    ),
    _p(
        "numpy_abi_mismatch",
        "module compiled against API version",
        regex=r"module compiled against API version 0x[0-9a-f]+ but this version of numpy is",
        detail=_extract(
            r"API version (?P<a>0x[0-9a-f]+) but this version of numpy is (?P<b>0x[0-9a-f]+)",
            "built for NumPy C API {a}, installed {b}",
        ),
    ),
    _p(
        "numpy_too_new",
        "module 'numpy' has no attribute '",
        regex=r"module 'numpy' has no attribute '(?:object|bool|int|float|complex|str|long|"
        r"unicode)'",
        detail=_extract(r"has no attribute '(?P<a>\w+)'", "np.{a} is gone (NumPy >= 1.24)"),
    ),
    _p(
        "numpy_too_new",
        "Cannot convert a symbolic Tensor (",
        detail=lambda line: "TensorFlow < 2.5 under NumPy >= 1.20",
    ),
    _p("tf_keras_missing", "but this is not yet supported in Transformers"),
    _p(
        "tpu_needs_gcs",
        "File system scheme '[local]' not implemented",
        detail=_extract(r"\(file: '(?P<f>[^']+)'", "a local path: {f}"),
    ),
    _p(
        "optimizer_outside_strategy_scope",
        "`merge_call` called while defining a new graph or a tf.function",
    ),
    _p(
        "tpu_connect_to_host_api",
        "does not have registered OpKernel support for _Arg",
        regex=r"device:TPU:\d+' does not have registered OpKernel support for _Arg",
    ),
    _p(  # the traceback's line in Keras's hdf5 loader
        "h5py3_old_keras",
        ".decode(",
        regex=r"attrs(?:\.get\(|\[)['\"](?:keras_version|backend|model_config|"
        r"training_config|layer_names|weight_names)['\"]\]?\)?\.decode\(",
        detail=lambda line: "Keras's .h5 loader decodes what h5py 3 gives as text",
    ),
    _p(  # any PCI device's DMA can fault: a warning, the GPUs' own the likely ones in a log
        "gpu_p2p_blocked",
        "DMAR: [DMA ",
        regex=r"DMAR: \[DMA (?:Read|Write)(?: NO_PASID)?\] Request device \[[0-9a-f:.]+\] "
        r"(?:PASID \w+ )?fault addr",
        status="warn",
        detail=_extract(r"Request device \[(?P<d>[0-9a-f:.]+)\]", "IOMMU faults from {d}"),
    ),
    _p(
        "missing_cuda_libs",
        "Could not find '",
        regex=r"Could not find '(?:cudart|cudnn|cublas|cufft|curand|cusolver|cusparse|nvcuda)"
        r"\w*\.dll'",
        detail=_extract(r"Could not find '(?P<lib>\w+\.dll)'", "missing {lib}"),
    ),
    _p("cublas_init_failed", "failed to create cublas handle"),
    _p("cublas_init_failed", "CUBLAS_STATUS_NOT_INITIALIZED"),
    _p("cublas_init_failed", "CUBLAS_STATUS_ALLOC_FAILED"),
    _p("cublas_init_failed", "Blas GEMM launch failed"),
    _p(
        "dataset_batch_shapes",
        "Cannot batch tensors with different shapes in component",
        detail=_extract(
            r"had shape (?P<a>\[[\d, ]*\]) and element (?P<n>\d+) had shape (?P<b>\[[\d, ]*\])",
            "element 0 {a}, element {n} {b}",
        ),
    ),
    _p(
        "input_not_numeric",
        "Failed to convert a NumPy array to a Tensor",
        detail=_extract(r"\((?P<t>Unsupported object type \w+)\)", "{t}"),
    ),
    _p(
        "labels_loss_mismatch",
        "Error when checking target: expected",
        detail=_extract(
            r"expected (?P<l>\w+) to have shape (?P<e>\([^)]*\)) but got array with shape "
            r"(?P<g>\([^)]*\))",
            "the labels {g}, the model's output {e}",
        ),
    ),
    _p(
        "labels_loss_mismatch",
        "are incompatible",
        regex=r"Shapes \(None, \d+\) and \(None, \d+\) are incompatible",
        detail=_extract(r"(?P<s>Shapes \(None, \d+\) and \(None, \d+\))", "{s}"),
    ),
    _p(
        "labels_loss_mismatch",
        "logits and labels must have the same first dimension",
    ),
    _p(
        "labels_loss_mismatch",
        "which is outside the valid range of",
        regex=r"Received a label value of -?\d+ which is outside the valid range",
        detail=_extract(
            r"label value of (?P<v>-?\d+) which is outside the valid range of \[0, (?P<n>\d+)\)",
            "label {v} with {n} outputs",
        ),
    ),
    _p(
        "mixed_precision_dtypes",
        "was expected to be a half tensor but is a float tensor",
        detail=_extract(r"cannot compute (?P<o>\w+) as input", "{o} got float16 and float32"),
    ),
    _p(
        "mixed_precision_dtypes",
        "was expected to be a float tensor but is a half tensor",
        detail=_extract(r"cannot compute (?P<o>\w+) as input", "{o} got float32 and float16"),
    ),
    _p(
        "legacy_optimizer_needed",
        "Argument `decay` is no longer supported",
        status="warn",
        detail=lambda line: "decay= is ignored by the Keras 3 optimizer",
    ),
    _p(
        "legacy_optimizer_needed",
        "Argument(s) not recognized",
        regex=r"Argument\(s\) not recognized: \{'(?:lr|decay)'",
        detail=_extract(r"\{'(?P<a>lr|decay)'", "{a}= is not an argument of the Keras 3 optimizer"),
    ),
    _p(
        "legacy_optimizer_needed",
        "is deprecated in Keras optimizer",
        status="warn",
        detail=_extract(r"`?(?P<a>\w+)`? is deprecated in Keras optimizer", "{a}= is deprecated"),
    ),
    _p(
        "legacy_optimizer_needed",
        "legacy optimizer",
        regex=r"(?i)use (?:the )?legacy optimizer",
        detail=_extract(
            r"(?P<a>\w+) is deprecated in the new Keras optimizer",
            "{a}= is not an argument of the new optimizer",
        ),
    ),
    _p(
        "xla_unsupported_op",
        "Detected unsupported operations when trying to compile graph",
        detail=_extract(
            r"on (?P<d>XLA_\w+?_JIT): (?P<o>\w+)", "{o} has no {d} kernel (jit_compile)"
        ),
    ),
    _p(
        "xla_unsupported_op",
        "OpKernel for XLA_",
        regex=r"No registered '\w+' OpKernel for XLA_\w+ devices",
        detail=_extract(
            r"No registered '(?P<o>\w+)' OpKernel for (?P<d>XLA_\w+) devices",
            "{o} has no {d} kernel (jit_compile)",
        ),
    ),
    _p(
        "nccl_unavailable",
        "NcclAllReduce",
        regex=r"(?:No OpKernel was registered to support Op|Op type not registered) 'Nccl\w+'",
        detail=_extract(r"num_devices=(?P<n>\d+)", "NCCL all-reduce over {n} GPUs"),
    ),
    _p("cupti_privileges", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", status="warn"),
    _p("cupti_privileges", "Insufficient privilege to run libcupti", status="warn"),
    _p(
        "pluggable_device",
        "tensorflow-plugins",
        regex=r"tensorflow-plugins[\\/][^\s,)]+.*not found",
        detail=_extract(
            r"tensorflow-plugins[\\/](?P<p>[^\s,)\\/]+)",
            "{p} (a PluggableDevice plugin) did not load",
        ),
    ),
    _p(
        "pluggable_device",
        "_plugin.",
        regex=r"(?<!nvinfer)_plugin\.(?:dll|so|dylib)\b.*\bnot found",
        detail=_extract(
            r"(?P<p>\w+_plugin\.(?:dll|so|dylib))", "{p} (a PluggableDevice plugin) did not load"
        ),
    ),
    _p(
        "pluggable_device",
        "found 0 compatible adapters",
        detail=_extract(r"(?P<e>DirectML device enumeration: found 0 compatible adapters)", "{e}"),
    ),
    _p(
        "legacy_optimizer_needed",
        "deprecated in the new Keras optimizer",
        detail=_extract(
            r"(?P<a>\w+)\W* is deprecated in the new Keras optimizer",
            "{a}= is not an argument of the new optimizer",
        ),
    ),
    _p(
        "tensorboard_missing",
        "TensorBoard is not installed, missing implementation for",
        detail=_extract(r"missing implementation for (?P<a>[\w.]+)", "{a} needs tensorboard"),
    ),
    _p("tensorboard_missing", "TBNotInstalledError"),
    _p(
        "tensorboard_missing",
        "No module named 'tensorboard",
        regex=r"No module named '?tensorboard(?:'|\.|$)",
        detail=_extract(r"No module named '(?P<m>tensorboard[\w.]*)'", "import of {m} failed"),
    ),
    _p(
        "tensorboard_missing",
        "summary' has no attribute '",
        regex=r"summary' has no attribute '(?:scalar|image|histogram|text|audio)'",
        detail=_extract(
            r"(?P<m>[\w.]*summary)' has no attribute '(?P<a>\w+)'",
            "{m}.{a} is missing (it comes from tensorboard)",
        ),
    ),
    _p(
        "tensorboard_missing",
        "due to missing TensorBoard installation",
        status="warn",
        detail=_extract(r"Limited (?P<a>[\w.]+) API", "limited {a} API"),
    ),
    _p(
        "input_ran_out",
        "Your input ran out of data",
        status="warn",
        detail=_extract(
            r"in this case, (?P<n>[\d.]+) batches", "steps_per_epoch * epochs = {n} batches"
        ),
    ),
    _p(
        "config_after_init",
        "devices cannot be modified after being initialized",
        detail=_extract(
            r"(?P<k>Physical|Virtual|Visible) devices cannot be modified",
            "{k} devices configured after the runtime started",
        ),
    ),
)


# label -> anchors: lines TensorFlow prints on healthy runs too.
BENIGN: dict[str, tuple[str, ...]] = {
    "duplicate CUDA plugin registration (cuDNN/cuFFT/cuBLAS factory)": (
        "Unable to register cu",
        "computation placer already registered",
    ),
    "NUMA node unknown (normal in VMs and containers)": (
        "NUMA node read from SysFS had negative value",
        "could not open file to read NUMA node",
    ),
    "TensorRT not found (only TF-TRT needs it)": (
        "TF-TRT Warning: Could not find TensorRT",
        "Could not load dynamic library 'libnvinfer",
        "Cannot dlopen some TensorRT libraries",
    ),
    "CPU instructions notice": (
        "This TensorFlow binary is optimized to use available CPU instructions",
        "To enable the following instructions:",
        "Your CPU supports instructions that this TensorFlow binary was not compiled to use",
        "This TensorFlow binary is optimized with oneAPI",
    ),
    "oneDNN notice (results may differ in the last bits)": ("oneDNN custom operations are on",),
    "absl logging not yet initialised": ("All log messages before absl::InitializeLog()",),
    "cudart not found on a machine without a GPU set up": (
        "Ignore above cudart dlerror if you do not have a GPU set up",
    ),
    "TensorFlow created a GPU device": ("Created device /job:",),
    "cuDNN loaded": ("Loaded cuDNN version",),
    "XLA started": ("XLA service 0x", "StreamExecutor device ("),
    "XLA compiled a cluster": ("Compiled cluster using XLA!",),
    "end of a tf.data dataset (normal)": ("OUT_OF_RANGE: End of sequence",),
    "MLIR crash reproducer disabled": ("disabling MLIR crash reproducer",),
    "TF_FORCE_GPU_ALLOW_GROWTH applied": (
        "Overriding orig_value setting because the TF_FORCE_GPU_ALLOW_GROWTH",
    ),
}


# label -> (what the message goes on to say, the anchors of the lines it relieves)
RELIEVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "ptxas not run: TensorFlow compiles PTX with the driver instead (the run goes on)": (
        "Relying on driver to perform ptx compilation",
        ("Failed to launch ptxas", "Couldn't get ptxas version", "Couldn't invoke ptxas"),
    ),
}
"""Lines a cause's pattern claims alone, which the message wrapped after them says are not a
failure: TensorFlow's GPU autotuner prints ``Failed to launch ptxas`` and then ``Relying on
driver to perform ptx compilation.`` when the CUDA toolkit's ptxas is not on the PATH, and
trains on (a maintainer of rocker-org/ml: "a known TensorFlow quirk"). Where the message goes
on that way, its lines are this benign label, not the cause."""
