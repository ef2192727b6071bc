"""The ``tfaccel`` command line: parse, call the library, render. No logic lives here.

Each command is a module of this package exposing ``add_parser(subparsers)`` and
``run(args) -> int``, and, when the library's errors may name an argument, ``FLAGS``: the
library's argument names -> the command's flags (``{"trace_dir": "--trace"}``), so a message
names what the user typed (:func:`tfaccel.core.errors.argument_names`, around every command).
``main(argv)`` takes argv so tests call it directly. Every command takes
``--json`` (stdout then holds one JSON document and nothing else) and ``--verbose`` (also
before the command: ``tfaccel --verbose bench``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import stat
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from tfaccel._version import __version__
from tfaccel.cli._output import VERBOSE_HELP, json_document, print_json_error, set_verbose
from tfaccel.core.errors import TfaccelError, UsageError, argument_names
from tfaccel.core.stopping import Terminated, interrupt_code, last_words, stop_signals

# The parser imports every command module, so each cli/<verb>.py imports its library inside
# run(): `tfaccel devices` then loads none of the other commands' libraries (nor TensorFlow).

__all__ = ["COMMANDS", "EXIT_CODES", "main"]

# (command, module): the order is the order --help lists them in.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("devices", "tfaccel.cli.devices"),
    ("doctor", "tfaccel.cli.doctor"),
    ("run", "tfaccel.cli.run"),
    ("profile", "tfaccel.cli.profile"),
    ("launch", "tfaccel.cli.launch"),
    ("bench", "tfaccel.cli.bench"),
    ("tune", "tfaccel.cli.tune"),
    ("plan", "tfaccel.cli.plan"),
    ("report", "tfaccel.cli.report"),
    ("selftest", "tfaccel.cli.selftest"),
)

EXIT_CODES = """exit codes:
  0    success; for doctor: no check failed
  1    doctor found a failure (status 'fail'); bench/report: the digits convergence check failed;
       selftest: a step failed or timed out
  2    usage error: a bad argument or input (the message says what was wrong and the fix); for
       plan: also a script that does not reach its model.fit, a model that cannot be built or
       traced (a plan that fits nowhere is still 0)
  3    internal error in tfaccel (please report it with 'tfaccel doctor --save-snapshot FILE')
  130  interrupted (Ctrl-C); 'tfaccel tune' prints the best configuration found so far
  143  stopped by SIGTERM (129: SIGHUP), as on Ctrl-C
  141  the reader of standard output went away (| head), nothing said
  'tfaccel run' and 'tfaccel profile SCRIPT' return the script's own exit code; 'tfaccel launch'
  returns the failed worker's status (128+N when it was killed by signal N), 124 when the group
  stopped making progress (--hang-timeout) and 75 when it was preempted with no restart left.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tfaccel",
        description="Make TensorFlow/Keras training use the hardware it runs on, and show it.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tfaccel {__version__}")
    parser.add_argument(
        "-v", "--verbose", dest="global_verbose", action="store_true", help=VERBOSE_HELP
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS:
        module = importlib.import_module(module_name)
        module.add_parser(sub)
        command = sub.choices[name]
        _add_verbose(command)
        # Each command knows its own options, to warn when one is given after its SCRIPT, and
        # the flags that stand for the library's arguments in its error messages.
        options = [o for action in command._actions for o in action.option_strings]
        flags = dict(getattr(module, "FLAGS", {}))
        command.set_defaults(own_options=tuple(options), argument_flags=flags)
    return parser


class _ArgumentsRefused(Exception):
    """argparse refused the command line (raised by :class:`_Parser` instead of exiting)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal :func:`main` reports (as argparse does, and under
    ``--json`` as a JSON document too); its commands' parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        raise _ArgumentsRefused(self, message)


def _add_verbose(command: argparse.ArgumentParser) -> None:
    """Give ``command`` the global ``--verbose`` unless it has its own (doctor's also shows the
    evidence of every check)."""
    taken = {o for action in command._actions for o in action.option_strings}
    if "--verbose" not in taken:
        flags = ["--verbose"] if "-v" in taken else ["-v", "--verbose"]
        command.add_argument(*flags, dest="verbose", action="store_true", help=VERBOSE_HELP)


OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EPIPE})
"""Errors of a write to a stream (no file name): where standard output goes cannot take it."""


def _stdout_full() -> bool:
    """Whether standard output is what could not be written: closed, a device (/dev/full),
    or a file on a file system with no space left (a full $TMPDIR elsewhere is not)."""
    try:
        info = os.fstat(1)
    except OSError:
        return True  # closed
    if stat.S_ISCHR(info.st_mode):
        return True
    try:
        return stat.S_ISREG(info.st_mode) and os.fstatvfs(1).f_bavail == 0
    except OSError:
        return False


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that Python's own flush at exit does not raise
    again (the recipe of Python's documentation for SIGPIPE)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    if sys.stdout is None or getattr(sys.stdout, "closed", False):
        sys.stdout = open(os.devnull, "w")  # for the rest of the process


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    if sys.stdout is None:  # started with standard output closed (`tfaccel devices >&-`)
        sys.stdout = open(os.devnull, "w")  # for the rest of the process
    with stop_signals():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except _ArgumentsRefused as refused:
        refused.parser.print_usage(sys.stderr)
        print(f"{refused.parser.prog}: error: {refused.message}", file=sys.stderr)
        if "--json" in words:
            with json_document():
                print_json_error(
                    UsageError(
                        f"{refused.parser.prog}: {refused.message}",
                        expected=refused.parser.format_usage().strip(),
                        fix=f"see {refused.parser.prog} --help",
                    ),
                    2,
                )
        return 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    args.verbose = bool(args.global_verbose or getattr(args, "verbose", False))
    set_verbose(args.verbose)
    as_json = bool(getattr(args, "json", False))
    try:
        with (
            json_document() if as_json else contextlib.nullcontext(),
            last_words(print_json_error) if as_json else contextlib.nullcontext(),
            argument_names(getattr(args, "argument_flags", {})),
        ):
            try:
                code: int = args.handler(args)
            except TfaccelError as exc:
                if as_json:  # stdout still one document: what stopped the command
                    print_json_error(exc, exc.exit_code)
                raise
            except KeyboardInterrupt as exc:
                if as_json:
                    print_json_error(None, interrupt_code(exc))
                raise
    except TfaccelError as exc:
        print(f"tfaccel: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if isinstance(exc, Terminated):
            print(f"tfaccel: stopped by {exc}", file=sys.stderr)
        else:
            print("tfaccel: interrupted", file=sys.stderr)
        return interrupt_code(exc)
    except BrokenPipeError:  # the reader went away (`tfaccel devices --json | head -1`)
        _quiet_stdout()
        return 141  # as a shell reports a process ended by SIGPIPE
    except OSError as exc:
        if exc.filename is not None or exc.errno not in OUTPUT_ERRNOS or not _stdout_full():
            return _internal_error()
        _quiet_stdout()
        print(
            f"tfaccel: error: the output could not be written ({os.strerror(exc.errno)}): "
            "standard output goes somewhere that cannot take it (a full disk, a closed "
            "terminal); redirect it to a file with room",
            file=sys.stderr,
        )
        return 2
    except Exception:  # a bug in tfaccel, not a user mistake: show everything
        return _internal_error()
    return code


def _internal_error() -> int:
    """Show the exception being handled (a bug in tfaccel, not a user mistake) and how to
    report it; exit status 3."""
    traceback.print_exc()
    print(
        "tfaccel: internal error. Please report it with the output above and the file "
        "written by 'tfaccel doctor --save-snapshot snapshot.json'.",
        file=sys.stderr,
    )
    return 3
