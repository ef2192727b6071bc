"""What numba-cuda expects of NumPy, restored where a newer NumPy removed it.

numba-cuda 0.30.4 registers its implementation of ``np.row_stack`` the first time it compiles
a kernel, by reading ``numpy.row_stack``. NumPy 2.5 removed that name: it had been an alias of
``numpy.vstack`` (the same function object) since NumPy 1.x and deprecated since 2.0. Without
the name, every compile fails inside numba-cuda with ``AttributeError: module 'numpy' has no
attribute 'row_stack'`` (numba itself checks for the name first; numba-cuda 0.30.4 does not).

:func:`restore_numpy_aliases` puts the alias back, as the same ``numpy.vstack`` object, only
where it is missing, before numba-cuda compiles. Code that calls ``np.row_stack`` then gets
``np.vstack``, which is what that name always meant. Other incompatibilities still surface as
:func:`tfaccel.kernels._errors.incompatible_numba`'s error.
"""

from __future__ import annotations

__all__ = ["REMOVED_ALIASES", "restore_numpy_aliases"]

#: Names NumPy removed that numba-cuda still reads, and the NumPy function each one was.
REMOVED_ALIASES: dict[str, str] = {"row_stack": "vstack"}


def restore_numpy_aliases() -> list[str]:
    """Put back each alias of :data:`REMOVED_ALIASES` that this NumPy lacks; returns the names
    restored (empty where NumPy still has them all)."""
    import numpy

    restored = []
    for name, target in REMOVED_ALIASES.items():
        if not hasattr(numpy, name) and hasattr(numpy, target):
            setattr(numpy, name, getattr(numpy, target))
            restored.append(name)
    return restored
