"""The doctor's checks: pure functions of a Snapshot, run in the order of :data:`RULES`.

Each rule reads a :class:`~tfaccel.snapshot.Snapshot` and returns one :class:`Finding` (or a
list of them). Rules do no I/O and never import TensorFlow, so every one of them is tested with
a Snapshot built by hand. A rule that does not apply says ``skip`` and why; a machine without
an NVIDIA GPU running a CPU build of TensorFlow gets ``ok`` and ``skip``, never a failure.

The facts behind the rules (driver minimums, wheel targets, message texts) are the ones of
section 1 of the project's reference notes, from TensorFlow's install docs and source and
NVIDIA's CUDA release notes.

One module per family of checks; a rule's function is named after its finding id:

================================  ==========================================================
module                            finding ids
================================  ==========================================================
:mod:`.tensorflow_install`        tensorflow_missing, tensorflow_gpu_deprecated,
                                  conflicting_tf_distributions, windows_native,
                                  cpu_only_build, cpu_no_avx, x86_emulation
:mod:`.python_packages`           protobuf_incompatible, keras_versions_mixed,
                                  tensorboard_missing
:mod:`.driver`                    no_driver_or_hidden, driver_mismatch, driver_older_than_ptx,
                                  cupti_privileges
:mod:`.cuda_libraries`            missing_cuda_libs, cudnn_mismatch, xla_libdevice_ptxas
:mod:`.compute_capability`        cc_too_low, cc_too_new
:mod:`.gpu_cores`                 gpu_too_few_cores
:mod:`.memory`                    gpu_memory_in_use, oom, config_after_init
:mod:`.environment`               env_settings
:mod:`.deep_probe`                tf_import, tf_gpus_registered, and the log causes found in
                                  what ``import tensorflow`` logged (deep_log_causes)
================================  ==========================================================

:mod:`._common` holds what several families share. A new rule goes in the module of its
family and into :data:`RULES` below, at the place its finding should have in the report.
"""

from __future__ import annotations

from collections.abc import Callable

from tfaccel.core.findings import Finding
from tfaccel.diagnosis.rules.compute_capability import cc_too_low, cc_too_new
from tfaccel.diagnosis.rules.cuda_libraries import (
    cudnn_mismatch,
    missing_cuda_libs,
    xla_libdevice_ptxas,
)
from tfaccel.diagnosis.rules.deep_probe import deep_log_causes, tf_gpus_registered, tf_import
from tfaccel.diagnosis.rules.driver import (
    cupti_privileges,
    driver_mismatch,
    driver_older_than_ptx,
    no_driver_or_hidden,
)
from tfaccel.diagnosis.rules.environment import env_settings
from tfaccel.diagnosis.rules.gpu_cores import gpu_too_few_cores
from tfaccel.diagnosis.rules.memory import config_after_init, gpu_memory_in_use, oom
from tfaccel.diagnosis.rules.python_packages import (
    keras_versions_mixed,
    protobuf_incompatible,
    tensorboard_missing,
)
from tfaccel.diagnosis.rules.tensorflow_install import (
    conflicting_tf_distributions,
    cpu_no_avx,
    cpu_only_build,
    tensorflow_gpu_deprecated,
    tensorflow_missing,
    windows_native,
    x86_emulation,
)
from tfaccel.snapshot import Snapshot

__all__ = ["RULES", "Rule", "run_rules"]

Rule = Callable[[Snapshot], "Finding | list[Finding]"]

RULES: tuple[Rule, ...] = (
    tensorflow_missing,
    tensorflow_gpu_deprecated,
    conflicting_tf_distributions,
    windows_native,
    cpu_only_build,
    cpu_no_avx,
    x86_emulation,
    protobuf_incompatible,
    keras_versions_mixed,
    tensorboard_missing,
    no_driver_or_hidden,
    driver_mismatch,
    driver_older_than_ptx,
    missing_cuda_libs,
    cudnn_mismatch,
    cc_too_low,
    cc_too_new,
    gpu_too_few_cores,
    xla_libdevice_ptxas,
    gpu_memory_in_use,
    cupti_privileges,
    oom,
    config_after_init,
    env_settings,
    tf_import,
    tf_gpus_registered,
    deep_log_causes,
)


def run_rules(snapshot: Snapshot) -> list[Finding]:
    """Run every rule of :data:`RULES` in order and return their findings.

    Args:
        snapshot: what was probed.

    Returns:
        The findings, in rule order.
    """
    findings: list[Finding] = []
    for rule in RULES:
        result = rule(snapshot)
        findings.extend(result if isinstance(result, list) else [result])
    return findings
