"""What a bench run measures: benchmark names, profiles (full/quick/smoke) and options.

Pure: nothing here imports TensorFlow, so bad input is rejected before the slow import.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from tfaccel import models
from tfaccel.core.errors import UsageError

__all__ = [
    "BENCHMARKS",
    "GROUPS",
    "MICRO",
    "MODEL_BENCHMARKS",
    "PROFILES",
    "BenchOptions",
    "DataSpec",
    "Profile",
    "parse_data_spec",
    "parse_device_spec",
    "parse_only",
]

BENCHMARKS: dict[str, str] = {
    "matmul": "matrix multiply at several sizes in float32/bfloat16/float16 (TFLOP/s)",
    "bandwidth": "device memory bandwidth: a large copy, bytes read + written (GB/s)",
    "transfer": "host->device and device->host transfer bandwidth (GPU only)",
    "vector_add": "element-wise vector add c = a + b, bytes read + written (GB/s)",
    "conv2d": "3x3 conv2d forward + backward (TFLOP/s)",
    "reference_cnn": "training throughput of the Keras CIFAR-10 CNN (images/s)",
    "mlp": "training throughput of an MLP on 28x28 inputs (images/s)",
    "resnet20": "training throughput of ResNet-20 on 32x32x3 inputs (images/s)",
    "digits": "convergence check: an MLP on the UCI digits reaches >= 0.95 test accuracy",
}
MICRO: tuple[str, ...] = ("matmul", "bandwidth", "transfer", "vector_add", "conv2d")
MODEL_BENCHMARKS: tuple[str, ...] = ("reference_cnn", "mlp", "resnet20")
GROUPS: dict[str, tuple[str, ...]] = {"micro": MICRO, "models": MODEL_BENCHMARKS}


@dataclass(frozen=True)
class Profile:
    """Sizes and durations of one kind of run.

    Attributes:
        name: ``full``, ``quick`` or ``smoke``.
        matmul_sizes: square matrix sizes n (n x n times n x n).
        copy_bytes: bytes of the buffer copied by ``bandwidth``.
        vector_elements: elements of each ``vector_add`` operand.
        transfer_bytes: bytes moved by ``transfer``.
        conv: (batch, height/width, in channels, out channels) of ``conv2d``.
        micro_seconds: target duration of one timed sample of a micro benchmark.
        model_seconds: target duration of one timed sample of a training benchmark.
        tiny_models: use the tiny model sizes (figures are then meaningless).
        synthetic_images: images in the synthetic data set.
        model_configs: ``all`` settings per model or the ``short`` list.
        digits_epochs: epochs of the convergence check.
    """

    name: str
    matmul_sizes: tuple[int, ...]
    copy_bytes: int
    vector_elements: int
    transfer_bytes: int
    conv: tuple[int, int, int, int]
    micro_seconds: float
    model_seconds: float
    tiny_models: bool
    synthetic_images: int
    model_configs: str
    digits_epochs: int


_MIB = 1024 * 1024
PROFILES: dict[str, Profile] = {
    "full": Profile(
        "full", (512, 1024, 2048, 4096), 1024 * _MIB, 64 * _MIB, 256 * _MIB,
        (32, 32, 64, 64), 0.5, 1.0, False, 10_000, "all", 30,
    ),
    "quick": Profile(
        "quick", (512, 2048), 256 * _MIB, 16 * _MIB, 64 * _MIB,
        (16, 32, 64, 64), 0.2, 0.6, False, 2_048, "short", 30,
    ),
    "smoke": Profile(
        "smoke", (64, 128), 4 * _MIB, 256 * 1024, 4 * _MIB,
        (2, 8, 4, 4), 0.01, 0.01, True, 256, "short", 30,
    ),
}  # fmt: skip


@dataclass(frozen=True)
class DataSpec:
    """Where training images come from: ``synthetic`` (with a size) or ``cifar10`` (a dir)."""

    kind: str
    path: str | None = None
    images: int | None = None

    def __str__(self) -> str:
        if self.kind == "cifar10":
            return f"cifar10:{self.path}"
        return "synthetic" if self.images is None else f"synthetic:{self.images}"


def parse_data_spec(text: str) -> DataSpec:
    """Parse ``--data``: ``synthetic``, ``synthetic:N`` or ``cifar10:DIR``.

    Raises:
        UsageError: anything else.
    """
    kind, sep, rest = text.partition(":")
    if kind == "synthetic":
        if not sep:
            return DataSpec("synthetic")
        if rest.isascii() and rest.isdigit() and len(rest) > MAX_IMAGES_DIGITS:
            raise UsageError(
                "The --data size is too large to be a number of images",
                expected=f"synthetic:N with N from 1 to {10**MAX_IMAGES_DIGITS - 1:,} (and "
                "within the machine's memory)",
                received=f"a number of {len(rest):,} digits",
                fix="for example --data synthetic:10000",
            )
        if rest.isascii() and rest.isdigit() and int(rest) > 0:
            return DataSpec("synthetic", images=int(rest))
    elif kind == "cifar10" and rest:
        return DataSpec("cifar10", path=rest)
    raise UsageError(
        "The --data value is not understood",
        expected="'synthetic', 'synthetic:N' (N images) or 'cifar10:DIR' "
        "(the directory of the CIFAR-10 python batches data_batch_1..5 and test_batch)",
        received=repr(text),
        fix="for example --data cifar10:~/data/cifar-10-batches-py",
    )


MAX_IMAGES_DIGITS = 15  # far beyond any memory; the machine's memory bounds N further


_DEVICE_RE = re.compile(r"^(cpu|gpus|all|gpu:\d+)$")


def parse_device_spec(text: str) -> str:
    """Normalise ``--device``: ``cpu``, ``gpu:N``, ``gpus`` (all GPUs, MirroredStrategy), ``all``.

    ``all`` is the CPU, each GPU on its own and, with two or more, all GPUs together.
    Whether ``gpu:N`` exists is checked later, against the GPUs TensorFlow sees.

    Raises:
        UsageError: not one of those forms.
    """
    norm = text.strip().lower()
    if norm == "gpu":
        norm = "gpu:0"
    if not _DEVICE_RE.match(norm):
        raise UsageError(
            f"Unknown device {text!r}",
            expected="cpu, gpu:N (N = 0, 1, ...), gpus (all GPUs with MirroredStrategy) or all",
            received=repr(text),
            fix="run 'tfaccel devices --tf' to see the devices TensorFlow registers",
        )
    return norm


def parse_only(text: str | None) -> tuple[str, ...]:
    """Parse ``--only`` (comma-separated names or the groups ``micro``/``models``).

    Returns:
        The selected benchmark names in canonical order (all of them for None).

    Raises:
        UsageError: an unknown name.
    """
    if text is None:
        return tuple(BENCHMARKS)
    wanted: set[str] = set()
    for raw in text.split(","):
        name = raw.strip().lower().replace("-", "_")
        if not name:
            continue
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in BENCHMARKS:
            wanted.add(name)
        else:
            raise UsageError(
                f"Unknown benchmark {raw.strip()!r}",
                expected="comma-separated names from: " + ", ".join([*BENCHMARKS, *GROUPS]),
                received=repr(text),
                fix="for example --only matmul,reference_cnn",
            )
    if not wanted:
        raise UsageError(
            "--only names no benchmark",
            expected="at least one of " + ", ".join(BENCHMARKS),
            received=repr(text),
            fix="for example --only matmul",
        )
    return tuple(name for name in BENCHMARKS if name in wanted)


@dataclass
class BenchOptions:
    """Options of one bench run (the ``tfaccel bench`` flags).

    Attributes:
        profile: ``full`` (default), ``quick`` (about 1.5 minutes on 2 cores) or ``smoke``
            (tiny sizes: checks that everything runs; its figures mean nothing).
        only: benchmark names to run (default: all).
        device: ``cpu``, ``gpu:N``, ``gpus`` or ``all``.
        batch_size: batch size of the tf.data configurations (default 256); the "Keras
            default" configuration always uses 32.
        repeats: timed samples per configuration (>= 1; 5 or more to estimate the noise).
        warmup: samples run first and discarded.
        data: ``synthetic``, ``synthetic:N`` or ``cifar10:DIR``.
    """

    profile: str = "full"
    only: tuple[str, ...] = field(default_factory=lambda: tuple(BENCHMARKS))
    device: str = "all"
    batch_size: int | None = None
    repeats: int = 5
    warmup: int = 1
    data: str = "synthetic"

    def validate(self) -> None:
        """Check every option that can be checked without TensorFlow.

        Raises:
            UsageError: the first bad option, with the fix.
        """
        if self.profile not in PROFILES:
            raise UsageError(
                f"Unknown profile {self.profile!r}",
                expected="one of " + ", ".join(PROFILES),
                received=repr(self.profile),
                fix="use --quick for the short run",
            )
        for name in self.only:
            if name not in BENCHMARKS:
                parse_only(name)  # raises with the list of names
        self.device = parse_device_spec(self.device)
        if self.batch_size is not None and self.batch_size < 1:
            raise UsageError(
                "The batch size must be a positive integer",
                expected="--batch-size N with N >= 1",
                received=str(self.batch_size),
                fix="for example --batch-size 256",
            )
        if self.repeats < 1 or self.warmup < 0:
            raise UsageError(
                "The number of repeats must be at least 1 and warm-up rounds at least 0",
                expected="--repeats N with N >= 1 (5 or more to estimate the noise)",
                received=f"repeats={self.repeats}, warmup={self.warmup}",
                fix="for example --repeats 5",
            )
        parse_data_spec(self.data)

    def check_memory(self, available_bytes: int | None) -> None:
        """Refuse synthetic training data larger than this machine's memory, before any of it
        is allocated (``--data synthetic:N`` with a huge N).

        Args:
            available_bytes: the memory available here (``CpuInfo.memory_available_bytes``);
                None skips the check.

        Raises:
            UsageError: the data sets of the selected models need more than half of it; the
                message gives the sizes and the largest N that fits.
        """
        spec = self.data_spec
        if spec.kind != "synthetic":
            return
        shapes = {
            name: tuple(models.MODELS[name].input_shape)
            for name in MODEL_BENCHMARKS
            if name in self.only
        }
        count = spec.images or self.profile_spec.synthetic_images
        # local: tfaccel.bench.datasets imports numpy, and these checks run before it
        from tfaccel.bench.datasets import check_synthetic_memory

        check_synthetic_memory(count, shapes, available_bytes, spec=str(spec))

    @property
    def profile_spec(self) -> Profile:
        """The :class:`Profile` named by ``profile``."""
        return PROFILES[self.profile]

    @property
    def data_spec(self) -> DataSpec:
        """The parsed ``data`` option."""
        return parse_data_spec(self.data)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the options."""
        doc = asdict(self)
        doc["only"] = list(self.only)
        return doc
