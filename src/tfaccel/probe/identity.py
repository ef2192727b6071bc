"""Who and where this machine is: what ``tfaccel doctor --bundle`` redacts before it writes.

:func:`collect` reads the user names, home directories, host names, network-card (MAC)
addresses and the values of secret-named environment variables of this process into an
:class:`Identity`. Nothing here is saved in a Snapshot; the pure
:func:`tfaccel.diagnosis.redact.redact` takes it to take those strings out of a text.

Host names are read without the network: :func:`socket.gethostname`, :func:`platform.node`,
``$HOSTNAME`` and ``/etc/hostname`` (:func:`socket.getfqdn` is not called: it asks DNS, which can
hang for seconds on a machine without it).
"""

from __future__ import annotations

import getpass
import os
import platform
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SECRET_NAME", "Identity", "collect", "is_secret_name"]

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH", re.I)
"""An environment variable whose name matches this (anywhere, any case) holds a secret."""

_USER_VARIABLES = ("USER", "LOGNAME", "USERNAME", "LNAME", "SUDO_USER")
_HOME_VARIABLES = ("HOME", "USERPROFILE")
_HOST_VARIABLES = ("HOSTNAME", "HOST", "COMPUTERNAME")


@dataclass(frozen=True)
class Identity:
    """The strings that say who and where a machine is, to be redacted from what it shares.

    Attributes:
        users: user names (the login name, ``$USER``, ``$LOGNAME``, ...).
        homes: home directories (``~``, ``$HOME``, the password database's).
        hosts: host names (``socket.gethostname()``, ``$HOSTNAME``, ...), each with its first
            label when it has dots.
        secrets: the values of the environment variables whose name matches
            :data:`SECRET_NAME` (``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ...).
        macs: this machine's network-card addresses (``/sys/class/net/*/address``).
    """

    users: tuple[str, ...] = ()
    homes: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    macs: tuple[str, ...] = ()

    def merged(self, other: Identity) -> Identity:
        """Both identities' strings (a saved snapshot's host name added to this machine's)."""
        return Identity(
            *(
                _unique([*getattr(self, name), *getattr(other, name)])
                for name in ("users", "homes", "hosts", "secrets", "macs")
            )
        )


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (:data:`SECRET_NAME`)."""
    return bool(SECRET_NAME.search(name))


def collect(environ: Mapping[str, str] | None = None) -> Identity:
    """This process's user, home, host names, MAC addresses and secret values; never raises.

    Args:
        environ: the environment to read (default: this process's).
    """
    env = os.environ if environ is None else environ
    users = [env.get(name, "") for name in _USER_VARIABLES]
    homes = [env.get(name, "") for name in _HOME_VARIABLES]
    hosts = [env.get(name, "") for name in _HOST_VARIABLES]
    users.append(_quiet(getpass.getuser))
    homes.append(_quiet(lambda: os.path.expanduser("~")))
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid())
        users.append(entry.pw_name)
        homes.append(entry.pw_dir)
    except (ImportError, KeyError, OSError, AttributeError):  # Windows, or no entry
        pass
    hosts += [_quiet(socket.gethostname), _quiet(platform.node), _read("/etc/hostname")]
    hosts += [h.split(".", 1)[0] for h in hosts if "." in h]
    # A multi-line value (a private key) is redacted line by line.
    secrets = [
        line for name, value in env.items() if is_secret_name(name) for line in value.splitlines()
    ]
    return Identity(
        users=_unique(users),
        homes=_unique(h.rstrip("/\\") or h for h in homes),
        hosts=_unique(hosts),
        secrets=_unique(secrets),
        macs=_unique(_macs()),
    )


def _macs() -> list[str]:
    found = []
    try:
        cards = sorted(Path("/sys/class/net").iterdir())
    except OSError:
        return []
    for card in cards:
        address = _read(str(card / "address")).lower()
        if re.fullmatch(r"[0-9a-f]{2}(?::[0-9a-f]{2}){5,19}", address) and address.strip("0:"):
            found.append(address)
    return found


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except (OSError, ValueError):
        return ""


def _quiet(read: Callable[[], object]) -> str:
    try:
        value = read()
    except Exception:  # getpass.getuser raises OSError (KeyError before 3.13) with no name
        return ""
    return value if isinstance(value, str) else ""


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        text = value.strip() if isinstance(value, str) else ""
        if text and "\n" not in text:
            seen.setdefault(text, None)
    return tuple(seen)
