"""A user's script, run as ``python SCRIPT ARGS...`` would run it: checked, then run in-process.

``tfaccel run``, ``tfaccel profile SCRIPT`` and ``tfaccel launch`` take ``SCRIPT [ARGS...]``
after their own options; :func:`split_command` separates and checks them, and
:func:`run_script` runs the script as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]``.
``tfaccel tune``, ``tfaccel plan`` and ``tfaccel doctor --model`` read functions from a script
without running its training: :func:`read_hooks` is the one reader of those hooks
(``tfaccel_tune()``, or ``model_fn()`` and ``data``); it runs the script under another module
name (:func:`load_script`) so its code under ``if __name__ == "__main__":`` does not run.
:func:`defines_hooks` tells such a script from one written as it trains (read, not run).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import runpy
import shlex
import stat
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.core.files import check_path, file_kind, os_reason, trailing_slash

__all__ = [
    "HOOK_KEYS",
    "HOOK_NAMES",
    "ScriptHooks",
    "check_script",
    "check_source",
    "defines_hooks",
    "load_script",
    "read_hooks",
    "run_script",
    "script_traceback",
    "split_command",
]

HOOK_NAMES = ("model_fn", "tfaccel_tune")
"""The module-level names that make a script one tfaccel reads functions from (``model_fn()``,
``tfaccel_tune()``) rather than one it runs up to its ``fit``."""
HOOK_KEYS = ("model_fn", "data", "space", "model_name", "pipeline_kwargs")
"""The keys a ``tfaccel_tune()`` hook may return."""


def defines_hooks(path: str | os.PathLike[str], names: tuple[str, ...] = HOOK_NAMES) -> bool:
    """Whether the script defines one of ``names`` at module level (a function, an assignment
    or an import; read, not run: a script that does not parse defines none)."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=os.fspath(path))
    except (OSError, SyntaxError, ValueError):
        return False
    wanted = set(names)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in wanted:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in wanted for t in node.targets
        ):
            return True
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) in wanted for a in node.names
        ):
            return True
    return False


def check_source(path: str | os.PathLike[str], command: str) -> None:
    """Refuse a script that Python cannot compile (a syntax error, an encoding it does not
    declare, a binary file), with its line and no frames of tfaccel's, before it runs.

    Raises:
        UsageError: what Python said, where.
    """
    name = Path(path).name
    try:
        source = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(
            f"The script {name} cannot be read",
            expected="a readable Python file",
            received=os_reason(exc),
            fix="check the path's permissions",
        ) from None
    if b"\x00" in source:  # Python refuses NUL bytes in source: a binary file
        raise UsageError(
            f"The script {name} is not Python source: it holds NUL bytes",
            expected="a Python source file (text)",
            received=f"{_file_kind_of_bytes(source)} of {len(source):,} bytes",
            fix=f"pass the training script (train.py), not a binary; tfaccel {command}'s "
            "options go before it, the script's own after it",
        )
    try:
        compile(source, os.fspath(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = f"{name}:{line}" if line else name
        shown = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        raise UsageError(
            f"The script {name} is not valid Python: {getattr(exc, 'msg', exc)} at {where}",
            expected="a Python source file that `python` can run",
            received=shown,
            fix=f"fix it at {where} (`python {name}` shows the same error), then run "
            f"tfaccel {command} again",
        ) from None


def _file_kind_of_bytes(data: bytes) -> str:
    """A word for what ``data`` looks like: an executable (ELF), an archive, or binary data."""
    if data.startswith(b"\x7fELF"):
        return "an executable (ELF)"
    if data.startswith(b"PK\x03\x04"):
        return "a ZIP archive"
    return "binary data"


def check_script(
    script: str | os.PathLike[str],
    command: str = "run",
    *,
    expected: str = "a Python file (or a directory with __main__.py)",
    directory: bool = True,
    usage: str | None = None,
) -> Path:
    """Refuse a ``script`` that is not a readable Python file (or, with ``directory``, a
    directory with ``__main__.py``), saying what it is instead.

    Returns:
        The script's path, ``~`` expanded.

    Raises:
        UsageError: the path is empty, too long, loops (:func:`tfaccel.core.files.check_path`),
            does not exist, ends with a slash but is no directory, is a directory without
            ``__main__.py``, a named pipe, a device or a
            socket, or cannot be read (``command`` names the subcommand; ``usage`` replaces
            the sentence on where its options and the script's go).
    """
    script = os.fspath(script)
    options = usage or f"tfaccel {command}'s options go before SCRIPT, the script's after it"
    path = check_path(script, what="the script", fix=f"pass the path of a Python file; {options}")

    def refuse(problem: str, received: str, fix: str) -> UsageError:
        return UsageError(
            f"The script {script!r} {problem}", expected=expected, received=received, fix=fix
        )

    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise refuse(
            "does not exist",
            f"{script!r} (working directory {os.getcwd()})",
            f"check the path; {options}",
        ) from None
    except OSError as exc:
        raise refuse("cannot be read", os_reason(exc), "check the path's permissions") from None
    if stat.S_ISDIR(info.st_mode):
        if directory and (path / "__main__.py").is_file():
            return path
        raise refuse(
            "is a directory" + (", without a __main__.py" if directory else ""),
            f"{script!r}, a directory",
            f"name the Python file inside it, e.g. tfaccel {command} {path / 'train.py'}",
        )
    bare = trailing_slash(script)  # Path drops the slash: "train.py/" would run train.py
    if bare is not None:
        raise refuse(
            "ends with a slash, which names a directory, but it is " + file_kind(info.st_mode),
            f"{script!r}",
            f"drop the slash: tfaccel {command} {shlex.quote(bare)}",
        )
    if not stat.S_ISREG(info.st_mode):
        kind = file_kind(info.st_mode)
        raise refuse(
            f"is not a file: it is {kind}",
            f"{script!r}, {kind}",
            f"pass the path of a Python file (.py); {options}",
        )
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise refuse(
            "cannot be read",
            f"{script!r}: {os_reason(exc)}",
            f"give this user read permission (chmod u+r {shlex.quote(script)}), or pass a "
            "script it can read",
        ) from None
    return path


def split_command(
    words: list[str],
    *,
    command: str = "run",
    example: str = "--memory growth train.py",
    check: bool = True,
) -> tuple[str, list[str]]:
    """Split ``SCRIPT [ARGS...]`` and, with ``check``, check the script exists (``command``
    names the subcommand and ``example`` an invocation of it in the messages).

    Raises:
        UsageError: no script, or the script does not exist.
    """
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UsageError(
            f"No script to {command}",
            expected=f"tfaccel {command} [OPTIONS] SCRIPT [ARGS...]",
            received="no SCRIPT",
            fix=f"name the script after the options: tfaccel {command} {example}",
        )
    if check:
        check_script(words[0], command)
    return words[0], words[1:]


def run_script(script: str, script_args: list[str]) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *script_args]``.

    Returns:
        The script's exit status: 0 when it ends, its ``SystemExit`` code, or 1 after an
        exception (whose traceback, starting at the script's own frames, goes to stderr).
    """
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [script, *script_args]
    sys.path[0:1] = [str(Path(script).resolve().parent)]  # as `python SCRIPT` sets it
    parent = os.getpid()
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        end_forked_child(parent, 130)
        raise  # Ctrl-C (and tfaccel's SIGTERM): the command's interrupt path
    except BaseException as exc:  # the script's own error, even one not an Exception
        _print_script_traceback(exc, script)  # as Python would show it, exit 1
        code = 1
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    end_forked_child(parent, code)
    return code


def end_forked_child(parent: int, code: int) -> None:
    """Where a script forked (``os.fork``, a multiprocessing worker of the fork method) and
    the child ran on to the script's end: end the child there with ``code``, as Python ends
    a forked child's script, instead of letting it run on through tfaccel (a second report,
    a second JSON document). Nothing in the process that started the script (``parent``)."""
    if os.getpid() == parent:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_status(code: object) -> int:
    """What Python itself makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def load_script(script: Path, module_name: str, error: type[TfaccelError]) -> dict[str, Any]:
    """Run ``script`` as the module ``module_name`` and return its namespace: its code under
    ``if __name__ == "__main__":`` (the training) does not run. Its folder goes on
    ``sys.path``, as ``python SCRIPT`` puts it, for the imports its functions make later.

    Raises:
        error: the script exited or raised while loading (the message holds its traceback).
    """
    directory = str(script.resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        namespace: dict[str, Any] = runpy.run_path(str(script), run_name=module_name)
    except SystemExit as exc:
        raise error(
            f"The script {script.name} exited while loading (sys.exit({exc.code!r}))",
            expected="a script whose training runs under if __name__ == '__main__':",
            received=f"SystemExit({exc.code!r}) at import",
            fix="move the code that exits under if __name__ == '__main__':",
        ) from None
    except Exception as exc:
        raise error(
            f"The script {script.name} raised {type(exc).__name__} while loading: {exc}",
            expected="a script that loads without error",
            received="this traceback, from your script:\n" + script_traceback(exc, script),
            fix=f"fix the error; `python -c \"import runpy; runpy.run_path('{script}')\"` "
            "reproduces it",
        ) from exc
    return namespace


def script_traceback(exc: BaseException, script: str | os.PathLike[str]) -> str:
    """The traceback of ``exc`` from the script's first frame on (as Python would print it)."""
    tb = _from_script(exc, script) or exc.__traceback__
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()


def _print_script_traceback(exc: BaseException, script: str) -> None:
    """Print the traceback from the script's first frame on, without tfaccel's and runpy's."""
    traceback.print_exception(type(exc), exc, _from_script(exc, script), file=sys.stderr)


def _from_script(exc: BaseException, script: str | os.PathLike[str]) -> TracebackType | None:
    """The first frame of ``exc``'s traceback in the script (or its ``__main__.py``)."""
    targets = {os.path.abspath(script), os.path.abspath(os.path.join(script, "__main__.py"))}
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) not in targets:
        tb = tb.tb_next
    return tb


@dataclass
class ScriptHooks:
    """What a script's hooks give: :func:`read_hooks`'s answer.

    Attributes:
        model_fn: builds (and compiles) the model.
        data: the training data, a function returning it already called (a generator function,
            one that yields, is the data itself); None when only the model was asked for.
        space / model_name / pipeline_kwargs: what ``tfaccel_tune()`` returned beside them.
    """

    model_fn: Callable[[], Any]
    data: Any = None
    space: dict[str, Any] | None = None
    model_name: str | None = None
    pipeline_kwargs: dict[str, Any] | None = None


def read_hooks(
    script: Path, module_name: str, error: type[TfaccelError], *, data: bool = True
) -> ScriptHooks:
    """The hooks of a script that says what to run: ``tfaccel_tune()`` returning a dict with
    ``model_fn`` and ``data`` (and, if wanted, ``space``, ``model_name``,
    ``pipeline_kwargs``), or module-level ``model_fn`` and ``data`` (the data, or a function
    returning it). The script is loaded as ``module_name`` (:func:`load_script`).

    Args:
        script: the checked script (:func:`check_script`).
        module_name: the module name it runs under (not ``__main__``).
        error: the error class of the command reading it (``TuneError``, ``PlanError``).
        data: whether the data is wanted too (``tfaccel tune``); without it only ``model_fn``
            is read, and ``tfaccel_tune()`` is called only when the script has no module-level
            ``model_fn``.

    Raises:
        error: the script exited or raised while loading, a hook raised or returned what is not
            a hook, or the script defines neither form.
    """
    namespace = load_script(script, module_name, error)
    shown = script.name
    hook = namespace.get("tfaccel_tune")
    own = callable(namespace.get("model_fn")) and (not data or "data" in namespace)
    if callable(hook) and (data or not own):
        spec = _hook_spec(hook, shown, script, error, data)
    elif own:
        spec = {"model_fn": namespace["model_fn"], "data": namespace.get("data")}
    else:
        raise _no_hooks(shown, namespace, error, data)
    given = spec.get("data") if data else None
    if callable(given) and not inspect.isgeneratorfunction(given):
        given = _call_user(given, f"data() in {shown}", script, error)
    space, pipeline_kwargs = spec.get("space"), spec.get("pipeline_kwargs")
    return ScriptHooks(
        model_fn=spec["model_fn"],
        data=given,
        space=dict(space) if space else None,
        model_name=spec.get("model_name"),
        pipeline_kwargs=dict(pipeline_kwargs) if pipeline_kwargs else None,
    )


def _hook_spec(
    hook: Callable[[], Any],
    shown: str,
    script: Path,
    error: type[TfaccelError],
    data: bool,
) -> dict[str, Any]:
    where = f"tfaccel_tune() in {shown}"
    spec = _call_user(hook, where, script, error)
    needed = ("model_fn", "data") if data else ("model_fn",)
    if not isinstance(spec, Mapping) or any(key not in spec for key in needed):
        raise error(
            f"{where} did not return a dict with {' and '.join(needed)}",
            expected="{'model_fn': function, 'data': (x, y)} (optional keys: space, "
            "model_name, pipeline_kwargs)",
            received=repr(spec)[:200],
            fix="return dict(model_fn=model_fn, data=(x_train, y_train))",
        )
    unknown = [k for k in spec if k not in HOOK_KEYS]
    if unknown:
        raise error(
            f"{where} returned unknown keys",
            expected="keys among " + ", ".join(HOOK_KEYS),
            received=", ".join(repr(k) for k in unknown),
            fix="remove them",
        )
    if not callable(spec["model_fn"]):
        raise error(
            f"{where} returned a model_fn that is not callable",
            expected="a function returning a compiled keras.Model",
            received=type(spec["model_fn"]).__name__,
            fix="return the function itself (model_fn), not its result (model_fn())",
        )
    return dict(spec)


def _call_user(fn: Callable[[], Any], shown: str, script: Path, error: type[TfaccelError]) -> Any:
    try:
        return fn()
    except Exception as exc:
        raise error(
            f"{shown} raised {type(exc).__name__}: {exc}",
            expected=f"{shown} to run without error",
            received="this traceback, from your script:\n" + script_traceback(exc, script),
            fix=f"fix the error in {shown}",
        ) from exc


def _no_hooks(
    shown: str, namespace: Mapping[str, Any], error: type[TfaccelError], data: bool
) -> TfaccelError:
    if not data:
        return error(
            f"The script {shown} defines no model_fn",
            expected="a module-level function model_fn() returning a keras.Model",
            received="defined: "
            + (", ".join(n for n in HOOK_NAMES if n in namespace) or "neither"),
            fix="add def model_fn(): ... returning the model (compiled, to plan with its "
            "optimizer); keep training under if __name__ == '__main__':",
        )
    found = [name for name in ("model_fn", "data", "tfaccel_tune") if name in namespace]
    return error(
        f"The script {shown} does not say what to tune",
        expected="a function tfaccel_tune() returning dict(model_fn=..., data=(x, y)), or "
        "module-level model_fn() (returning a compiled keras.Model) and data ((x, y), or a "
        "function returning it)",
        received="defined: " + (", ".join(found) or "none of them"),
        fix="add def model_fn(): ... and def data(): return x_train, y_train to the script; "
        "keep its training code under if __name__ == '__main__':",
    )
