"""The one way every command prints its ``--json`` document."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

__all__ = ["print_json"]


def print_json(document: Any) -> None:
    """Print ``document`` as one JSON document on stdout.

    NaN and infinities (a ratio over a zero median, a spread of one sample) become null, since
    JSON has neither; values JSON does not know (paths, dates) are written as text.
    """
    sys.stdout.write(json.dumps(_finite(document), indent=2, default=str, allow_nan=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
