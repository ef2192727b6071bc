"""Input pipelines that keep the device fed: ``tfaccel.data``.

``tfaccel.data.pipeline(source, batch_size, ...)`` builds a tuned ``tf.data`` pipeline (shuffle,
cache where it fits, parallel or vectorised map, prefetch, device prefetch) and records every
choice with its reason; ``tfaccel.data.describe(dataset)`` returns that record. TensorFlow is
imported when a pipeline is built, never when this package is imported.

Example:
    >>> import numpy as np
    >>> import tfaccel.data
    >>> x = np.zeros((1000, 32, 32, 3), "float32"); y = np.zeros(1000, "int32")
    >>> ds = tfaccel.data.pipeline((x, y), 64, seed=0)  # doctest: +SKIP
    >>> print(tfaccel.data.describe(ds))  # doctest: +SKIP
"""

from __future__ import annotations

from tfaccel.data.pipeline import Choice, PipelineInfo, describe, pipeline

__all__ = ["Choice", "PipelineInfo", "describe", "pipeline"]
