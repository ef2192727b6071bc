"""Checkpoints of data-parallel training: every worker saves, only the chief keeps.

Under MultiWorkerMirroredStrategy every worker must take part in each save (a save may need
values from all of them), but only the chief's files are the checkpoint: the others write to
a temporary directory of their own and delete it right after (the pattern of TensorFlow's
multi-worker guide). Every worker resumes from the chief's directory, so on a real cluster
``checkpoint_dir`` must be on a file system all workers share.

Besides the model and optimizer, a checkpoint holds the global step (where to resume), the
epoch, and the global batch size and steps per epoch it was written with, so a resume with a
different batch or epoch length (which would resume at the wrong place in the data) is an
error rather than a silent mistake.

Example:
    >>> keeper = Checkpointer(directory, {"model": model, "optimizer": optimizer},
    ...                       is_chief=choice.is_chief, task=choice.task)
    >>> start = keeper.restore(global_batch_size=64, steps_per_epoch=10)   # 0 when fresh
    >>> keeper.save(step=20, epoch=2)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from tfaccel.core.checks import (
    check_dir_argument,
    check_flag,
    check_int,
    check_mapping,
    shown_typed,
)
from tfaccel.core.errors import UsageError

__all__ = ["CheckpointError", "Checkpointer"]


class CheckpointError(UsageError):
    """A checkpoint cannot be resumed by this run."""


class Checkpointer:
    """Save and restore model, optimizer, step and epoch with ``tf.train.CheckpointManager``.

    Args:
        directory: the checkpoint directory (the chief's; shared by all workers).
        objects: the trackable objects to save ("model", "optimizer", ...).
        is_chief: this process writes the real checkpoint.
        task: this process's task ("worker:1"), used to name its temporary directory.
        max_to_keep: checkpoints the chief keeps.

    Raises:
        UsageError: ``directory`` cannot be written (a file, a read-only directory, a missing
            directory whose parent cannot be written), ``objects`` is not a dict of names to
            trackable objects (or uses a name the checkpoint holds itself), ``is_chief`` is
            not True or False, ``task`` is not text, or ``max_to_keep`` is not a positive
            integer; checked before anything is made.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        objects: Mapping[str, Any],
        *,
        is_chief: bool = True,
        task: str | None = None,
        max_to_keep: int = 3,
    ) -> None:
        where = "tfaccel.distribute.Checkpointer"
        self.directory = check_dir_argument("directory", directory, where=where)
        check_mapping(
            "objects",
            objects,
            where=where,
            expected="a dict of names to trackable objects, e.g. {'model': model, "
            "'optimizer': optimizer}",
            allow_none=False,
        )
        _check_names(objects, where)
        is_chief = bool(check_flag("is_chief", is_chief, where=where))
        if task is not None and not (isinstance(task, str) and task.strip()):
            raise UsageError(
                f"{where} got an invalid task",
                expected="this process's task as text ('worker:1'), or None",
                received=f"task={shown_typed(task)}",
                fix="pass task=choice.task (tfaccel.distribute.strategy()), or leave it out",
            )
        check_int("max_to_keep", max_to_keep, where=where)
        import tensorflow as tf

        _check_trackable(objects, where, tf.__internal__.tracking.Trackable)
        self.is_chief = is_chief
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.global_batch_size = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.steps_per_epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.checkpoint = tf.train.Checkpoint(
            step=self.step,
            epoch=self.epoch,
            global_batch_size=self.global_batch_size,
            steps_per_epoch=self.steps_per_epoch,
            **objects,
        )
        if is_chief:
            self.write_directory = self.directory
        else:
            name = re.sub(r"[^A-Za-z0-9_]+", "_", task or "worker")
            self.write_directory = os.path.join(self.directory, f"workertemp_{name}")
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.write_directory, max_to_keep=max_to_keep if is_chief else 1
        )

    @property
    def latest(self) -> str | None:
        """The chief's newest checkpoint, None when there is none."""
        import tensorflow as tf

        found: str | None = tf.train.latest_checkpoint(self.directory)
        return found

    def restore(self, *, global_batch_size: int, steps_per_epoch: int) -> int:
        """Load the newest checkpoint, if any; return the global step to resume at.

        Raises:
            CheckpointError: the checkpoint does not match the model or optimizer, or was
                written with another global batch size or steps per epoch.
        """
        path = self.latest
        if path is None:
            return 0
        try:  # a variable of another shape: ValueError; of another structure: AssertionError
            status = self.checkpoint.restore(path)
            status.assert_existing_objects_matched()
        except (ValueError, AssertionError) as exc:
            mismatch = _first_line(str(exc))
            mismatch = f" ({mismatch})" if mismatch else ""
            raise CheckpointError(
                f"The checkpoint in {self.directory} was written by another model or "
                f"optimizer{mismatch}",
                expected="a checkpoint of this model and optimizer (the same model_fn and "
                "optimizer_fn that wrote it)",
                received=f"the directory {self.directory} with the checkpoint {path}",
                fix=f"pass a new checkpoint_dir, or delete {self.directory} to start over",
            ) from None
        status.expect_partial()
        for name, wanted in (
            ("global_batch_size", global_batch_size),
            ("steps_per_epoch", steps_per_epoch),
        ):
            saved = int(getattr(self, name).numpy())
            if saved != wanted:
                raise CheckpointError(
                    f"The checkpoint {path} was written with {name}={saved}",
                    expected=f"{name}={saved}, so training resumes at the same place in the data",
                    received=f"{name}={wanted}",
                    fix=f"pass {name}={saved} to resume, or use a new checkpoint_dir",
                )
        return int(self.step.numpy())

    def save(
        self, *, step: int, epoch: int, global_batch_size: int, steps_per_epoch: int
    ) -> str | None:
        """Save on every worker; return the checkpoint path on the chief, None elsewhere."""
        import tensorflow as tf

        self.step.assign(step)
        self.epoch.assign(epoch)
        self.global_batch_size.assign(global_batch_size)
        self.steps_per_epoch.assign(steps_per_epoch)
        path: str = self.manager.save(checkpoint_number=step)
        if self.is_chief:
            return path
        tf.io.gfile.rmtree(self.write_directory)
        return None


def _first_line(message: str, limit: int = 240) -> str:
    """TensorFlow's first line, without the variable's values (Keras prints them) and with its
    own "Received:" spelled so that it does not read as the error's, cut to ``limit``."""
    lines = message.strip().splitlines()
    line = lines[0] if lines else ""
    line = line.split(" Target variable:")[0].replace("Received: ", "received ").rstrip(".")
    return line if len(line) <= limit else line[: limit - 1] + "…"


# The names the checkpoint holds of its own, beside the caller's objects.
_OWN_NAMES = ("step", "epoch", "global_batch_size", "steps_per_epoch")


def _check_names(objects: Mapping[Any, Any], where: str) -> None:
    for name in objects:
        if isinstance(name, str) and name.strip() and name not in _OWN_NAMES:
            continue
        own = isinstance(name, str) and name in _OWN_NAMES
        raise UsageError(
            f"{where} cannot save an object under the name {name!r}"
            + (": the checkpoint holds that name itself" if own else ""),
            expected="names that are non-empty text, other than " + ", ".join(_OWN_NAMES),
            received=f"objects has the key {shown_typed(name)}",
            fix="name the objects e.g. {'model': model, 'optimizer': optimizer}",
        )


def _check_trackable(objects: Mapping[str, Any], where: str, trackable: type) -> None:
    for name, value in objects.items():
        if not isinstance(value, trackable):
            raise UsageError(
                f"{where} cannot save objects[{name!r}]: it is not a trackable object",
                expected="a Keras model or layer, an optimizer, a tf.Variable, a tf.Module or "
                "another tf.train.Checkpoint-able object",
                received=f"objects[{name!r}]={shown_typed(value)}",
                fix=f"pass the model or optimizer itself as objects[{name!r}] (not its "
                "weights, a number or a path)",
            )
