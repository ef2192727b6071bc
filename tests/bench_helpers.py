"""A hand-built bench run for the tests that render one (no TensorFlow, no measurement)."""

from __future__ import annotations

from collections.abc import Sequence

from tfaccel.bench import BenchMeasurement, BenchRun


def sample_run(
    label: str = "CPU AMD EPYC 7B13", notes: Sequence[str] = (), run_id: int | None = None
) -> BenchRun:
    """A quick run on one CPU: matmul, vector add and the reference CNN in two settings."""

    def m(benchmark: str, median: float, **config: object) -> BenchMeasurement:
        samples = [median * f for f in (0.97, 0.99, 1.0, 1.01, 1.03)]
        extra: dict[str, object] = {
            "percent_of_peak": 50.0,
            "percent_of_best": 100.0,
            "arithmetic_intensity": 100.0,
        }
        unit = "TFLOP/s"
        if benchmark == "reference_cnn":
            unit = "images/s"
            extra = {
                "flops_per_image": 124_446_720,
                "global_batch": config["batch_size"],
                "peak_tflops": 0.35,
                "step_time_s": [0.03, 0.031, 0.029],
            }
        return BenchMeasurement(benchmark, {"device": "cpu", **config}, "m", unit, samples, extra)

    default = {"feed": "numpy", "batch_size": 32, "precision": "float32", "jit": False}
    best = {"feed": "tf.data", "batch_size": 256, "precision": "mixed_bfloat16", "jit": False}
    return BenchRun(
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:01:00+00:00",
        status="complete",
        options={"profile": "quick"},
        fingerprint="f1ngerpr1nt",
        fingerprint_data={},
        tfaccel_version="0.1.0",
        tf_version="2.21.0",
        targets=[{"name": "cpu", "label": label, "peak_tflops": {"float32": 0.35}}],
        measurements=[
            m("matmul", 0.205, dtype="float32", n=2048),
            m("vector_add", 12.0, dtype="float32", n=1024),
            m("reference_cnn", 775.0, **default),
            m("reference_cnn", 1603.0, **best),
        ],
        notes=list(notes),
        run_id=run_id,
    )
