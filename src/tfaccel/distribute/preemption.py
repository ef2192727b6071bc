"""Save at a step boundary on SIGTERM, every worker at the same step, then exit with 75.

``tfaccel.distribute.train(checkpoint_dir=...)`` catches SIGTERM (a preemption notice from a
scheduler, or ``tfaccel launch`` stopping the group) in a flag. The flag goes into the next
step: each replica adds it to the same all-reduce that sums the loss, so every worker learns
after that step whether any worker was told to stop, and all of them save a checkpoint of the
same step and exit with :data:`PREEMPTED_EXIT_CODE` (``Preempted``, a ``SystemExit``). A
worker blocked inside a step sees the flag when the step returns.

TensorFlow's ``tf.distribute.experimental.PreemptionCheckpointHandler`` does the same job but
is not used: creating it asks the GCE metadata server over the network whether it runs on
Google Cloud (a request that a worker without network, or a private one, cannot answer, with a
5 s timeout), it does nothing useful on a Google Cloud CPU VM, it keeps its own step counter
and checkpoint manager beside ours, and it agrees on the step through the coordination
service's key-value store in background threads. One all-reduce in the step is simpler and
works under every strategy.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["PREEMPTED_EXIT_CODE", "Preempted", "SigtermFlag"]

PREEMPTED_EXIT_CODE = 75
"""A worker's exit status after it saved on SIGTERM (``EX_TEMPFAIL``: try again)."""


class Preempted(SystemExit):
    """Raised by ``train()`` after the checkpoint of a SIGTERM: exits with status 75.

    Attributes:
        step: the global step saved.
    """

    def __init__(self, step: int) -> None:
        super().__init__(PREEMPTED_EXIT_CODE)
        self.step = step


class SigtermFlag:
    """Set when SIGTERM arrives while :meth:`catching` (in the main thread only)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()

    @contextlib.contextmanager
    def catching(self, enabled: bool = True) -> Iterator[SigtermFlag]:
        """Catch SIGTERM in this flag inside the block (the previous handler after it)."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGTERM, self._handle)
        try:
            yield self
        finally:
            # None: the previous handler was not set from Python (TensorFlow's own, in C++)
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
