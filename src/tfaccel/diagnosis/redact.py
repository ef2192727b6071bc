"""Take who and where a machine is out of a text before it is shared (``doctor --bundle``).

:func:`redact` is pure: it replaces, in a text, the strings of an explicit
:class:`~tfaccel.probe.identity.Identity` (user names, home directories, host names, secret
values, MAC addresses; ``tfaccel.probe.identity.collect()`` reads them from this machine) and
what patterns find in any text:

=================  ==============================================  =====================
kind               found                                           becomes
=================  ==============================================  =====================
``secret``         the identity's secret values; ``NAME=value`` and  ``<secret>``
                   ``"NAME": "value"`` where NAME matches
                   :data:`~tfaccel.probe.identity.SECRET_NAME`; a URL's
                   ``user:password@``; well-known token shapes
                   (``ghp_...``, ``AKIA...``, ``hf_...``)
``home``           ``/home/NAME``, ``/Users/NAME``, ``C:\\Users\\NAME``  ``/home/<user>`` ...
                   (any NAME); the identity's home directories       ``<home>``
``email``          e-mail addresses                                ``<email>``
``user``/``host``  the identity's user and host names, as words    ``<user>`` / ``<host>``
``mac``            6 to 20 hex pairs (``aa:bb:..``, ``aa-bb-..``); the  ``<mac>``
                   identity's MACs also without separators
``ipv6``           a valid IPv6 address (checked with :mod:`ipaddress`)  ``<ipv6>``
``ipv4``           four dot-separated numbers of 0 to 255         ``<ipv4>``
=================  ==============================================  =====================

What stays, and why:

* Version numbers. IPv4 needs exactly four numbers of 0-255 standing alone: TensorFlow's
  ``2.21.0``, CUDA's ``12.5.1`` and a driver's ``550.54.14`` have three parts; a part of a longer
  dotted run (``libcublas.so.12.3.4.1``, ``v1.2.3.4``) is not an address. A four-part version
  (``nvidia-curand-cu12 10.3.4.107``) stays when it is in ``keep`` (the bundle passes every
  version its snapshot holds) or follows ``==``, ``>=``, ``-`` or the word ``version``.
* Addresses that identify nothing: loopback (``127.0.0.1``, ``::1``), unspecified (``0.0.0.0``,
  ``::``), netmasks (``255.255.255.0``) and the all-zero and broadcast MACs.
* PCI bus ids (``00000000:01:00.0``: not hex pairs), NVIDIA GPU UUIDs, times (``21:30:47``),
  C++ names (``absl::InitializeLog``; letter-only ``abc::def`` is never taken for IPv6).
* A user or host name shorter than 3 characters or a common one (``root``, ``ubuntu``,
  ``localhost``: :data:`COMMON_NAMES`) is not redacted as a word, which would take those letters
  out of every word of the text: home paths still lose it (any ``/home/NAME``), and
  :meth:`Redactor.value` still redacts a ``hostname`` field whatever it holds. A secret value
  shorter than 4 characters, or one such as ``true`` or ``1``, is left too; one shorter than 8
  is redacted only where it stands alone (between spaces, quotes, ``=`` or ``:``).

The result is idempotent: the placeholders match no pattern, and a second pass changes nothing.

Example:
    >>> from tfaccel.probe.identity import Identity
    >>> me = Identity(users=("alice",), hosts=("alice-laptop",), secrets=("s3cr3t-t0ken",))
    >>> text, counts = redact(
    ...     "alice@alice-laptop:/home/alice/venv TF 2.21.0 from 10.1.2.3 key=s3cr3t-t0ken", me
    ... )
    >>> text
    '<user>@<host>:/home/<user>/venv TF 2.21.0 from <ipv4> key=<secret>'
    >>> counts
    {'secret': 1, 'home': 1, 'user': 1, 'host': 1, 'ipv4': 1}
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from tfaccel.probe.identity import SECRET_NAME, Identity

__all__ = [
    "COMMON_NAMES",
    "KINDS",
    "PLACEHOLDERS",
    "Identity",
    "Redactor",
    "redact",
]

KINDS = {
    "secret": "secret values (environment variables, NAME=value, URL passwords, tokens)",
    "home": "home directories and the user names in home paths",
    "email": "e-mail addresses",
    "user": "user names",
    "host": "host names",
    "mac": "MAC addresses",
    "ipv6": "IPv6 addresses",
    "ipv4": "IPv4 addresses",
}
"""Each kind of redaction, in the order it is applied, and what it covers."""

PLACEHOLDERS = {kind: f"<{kind}>" for kind in KINDS}

COMMON_NAMES = frozenset(
    """
    root admin administrator user users guest nobody default ubuntu debian centos fedora rocky
    alma arch alpine ec2-user runner jovyan vagrant colab kaggle codespace docker container
    localhost localdomain local host server machine worker master main node linux windows
    gpu cpu tpu cuda nvidia tensorflow python test home none null true false info warning error
    """.split()
)
"""User and host names too common to be redacted as words (they are no one's identity)."""

MIN_NAME_CHARS = 3
MIN_SECRET_CHARS = 4
SUBSTRING_SECRET_CHARS = 8
_NOT_SECRET = frozenset("true false yes no on off none null nil".split())

_SECRET_NAME_WORD = rf"[A-Za-z0-9_]{{0,64}}(?:{SECRET_NAME.pattern})[A-Za-z0-9_]{{0,64}}"
_ASSIGNMENT = re.compile(
    rf"(?<![\w-])(?P<name>{_SECRET_NAME_WORD})=(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;<>]+)",
    re.IGNORECASE,
)
_QUOTED_ASSIGNMENT = re.compile(
    rf"(?P<q>[\"'])(?P<name>{_SECRET_NAME_WORD})(?P=q)\s*:\s*"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*')",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?<=://)(?P<user>[^/\s:@<>\"']+):(?P<value>[^/\s@<>\"']+)@")
_TOKENS = re.compile(
    r"(?<![\w-])(?:gh[opsur]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|hf_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,})(?![\w-])"
)
# A home-path segment: a name up to the next separator. On Windows a name may hold spaces
# ("C:\Users\Jane Doe\AppData"); it is then taken up to the next backslash only.
_POSIX_HOME = re.compile(r"(?P<root>/(?:home|Users)/)(?P<name>[^/\s\"'<>:;,|\\*?]+)", re.I)
_WINDOWS_HOME = re.compile(
    r"(?P<root>\b[A-Za-z]:(?:\\+|/)(?:Users|Documents and Settings)(?:\\+|/))"
    r"(?P<name>[^\\/\s\"'<>:;,|*?]+(?: [^\\/\s\"'<>:;,|*?]+)*(?=\\)|[^\\/\s\"'<>:;,|*?]+)",
    re.I,
)
_EMAIL = re.compile(
    r"(?<![\w.+%-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])"
)
_MAC = re.compile(
    r"(?<![\w:.-])[0-9A-Fa-f]{2}(?P<sep>[:-])[0-9A-Fa-f]{2}(?:(?P=sep)[0-9A-Fa-f]{2}){4,18}"
    r"(?![\w:-])"
)
_IPV6 = re.compile(
    r"(?<![\w:.%])(?:[0-9A-Fa-f]{1,4}|(?=:))(?::[0-9A-Fa-f]{0,4}){2,7}"
    r"(?:(?<=:)\d{1,3}(?:\.\d{1,3}){3})?(?:%[\w.-]+)?(?![\w:]|\.\d)"
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.])(?:{_OCTET}\.){{3}}{_OCTET}(?![\w]|\.\d)")
_VERSION_BEFORE = re.compile(r"(?:\bversions?[\s:=]*|[=<>~!]=\s*|-)$", re.IGNORECASE)
_CPP_NAME = re.compile(r"[A-Fa-f]+::[A-Fa-f]+")
_NETMASK_OCTETS = frozenset({0, 128, 192, 224, 240, 248, 252, 254, 255})
_MAC_KEPT = frozenset({"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"})
_PLACEHOLDER_TEXT = frozenset(PLACEHOLDERS.values())


def redact(
    text: str, identity: Identity | None = None, *, keep: Iterable[str] = ()
) -> tuple[str, dict[str, int]]:
    """``text`` with the identity's strings and every address, home path and secret replaced.

    Args:
        text: any text (a log, a path, JSON text is better given to :meth:`Redactor.value`).
        identity: the strings of this machine to take out (``tfaccel.probe.identity.collect()``);
            None for the patterns alone.
        keep: strings never taken for an IPv4 address (the versions a snapshot holds).

    Returns:
        The redacted text, and how many of each kind (:data:`KINDS`) were replaced, kinds with
        none left out.
    """
    redactor = Redactor(identity, keep=keep)
    return redactor.text(text), redactor.counts()


class Redactor:
    """:func:`redact` over many texts and JSON values, counting what it replaced in all.

    Args:
        identity: as for :func:`redact`.
        keep: as for :func:`redact`.
    """

    def __init__(self, identity: Identity | None = None, *, keep: Iterable[str] = ()) -> None:
        me = identity if identity is not None else Identity()
        self._counts: Counter[str] = Counter()
        self._keep = frozenset(keep)
        self._secrets = _secret_pattern(me.secrets)
        self._homes = _literal_pattern(
            [h for h in me.homes if _is_personal_home(h)],
            before=r"(?<![\w.-])",
            after=r"(?![\w.-])",
        )
        names = [(n, "host") for n in me.hosts] + [(n, "user") for n in me.users]
        kept = [(n, kind) for n, kind in names if _is_distinct_name(n)]
        self.unredacted_names = len({n.lower() for n, _ in names} - {n.lower() for n, _ in kept})
        """How many of the identity's user and host names were too short or too common to be
        redacted as words (:data:`COMMON_NAMES`)."""
        self._kind_of = {n.lower(): kind for n, kind in reversed(kept)}  # a host wins a tie
        self._names = _literal_pattern(
            [n for n, _ in kept], before=r"(?<![\w<])", after=r"(?![\w>])", flags=re.I
        )
        compact = [m.replace(":", "").replace("-", "") for m in me.macs]
        self._macs = _literal_pattern(
            [c for c in compact if re.fullmatch(r"[0-9A-Fa-f]{12,40}", c)], flags=re.I
        )

    def counts(self) -> dict[str, int]:
        """How many of each kind were replaced so far, in :data:`KINDS` order, none left out."""
        return {kind: self._counts[kind] for kind in KINDS if self._counts[kind]}

    def text(self, text: str) -> str:
        """``text`` redacted (see the module's docstring)."""
        if not text:
            return text
        text = self._secret_values(text)
        text = self._sub(_ASSIGNMENT, text, "secret", self._assignment)
        text = self._sub(_QUOTED_ASSIGNMENT, text, "secret", self._assignment)
        text = self._sub(_URL_CREDENTIALS, text, "secret", lambda m: "<user>:<secret>@")
        text = self._sub(_TOKENS, text, "secret", lambda m: "<secret>")
        text = self._sub(_WINDOWS_HOME, text, "home", _home_path)
        text = self._sub(_POSIX_HOME, text, "home", _home_path)
        if self._homes is not None:
            text = self._sub(self._homes, text, "home", lambda m: "<home>")
        text = self._sub(_EMAIL, text, "email", lambda m: "<email>")
        if self._names is not None:
            text = self._names_out(text)
        if self._macs is not None:
            text = self._sub(self._macs, text, "mac", lambda m: "<mac>")
        text = self._sub(_MAC, text, "mac", self._mac)
        text = self._sub(_IPV6, text, "ipv6", self._ipv6)
        return self._sub(_IPV4, text, "ipv4", self._ipv4)

    def value(self, value: Any, key: str | None = None) -> Any:
        """A JSON-ready value (dicts, lists, text, numbers) with every text redacted.

        Keys are redacted as text too. Beyond :meth:`text`: the text under a key that names a
        secret (``"AWS_SECRET_ACCESS_KEY": "..."``, :data:`SECRET_NAME`) becomes ``<secret>``
        whatever it holds, and the text under ``hostname`` becomes ``<host>``.
        """
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        if not isinstance(value, str):
            return value
        if key is not None and value and value not in _PLACEHOLDER_TEXT:
            if SECRET_NAME.search(key) and value.lower() not in _NOT_SECRET:
                self._counts["secret"] += 1
                return "<secret>"
            if key == "hostname":
                self._counts["host"] += 1
                return "<host>"
        return self.text(value)

    # -- the replacements ----------------------------------------------------------------------

    def _sub(
        self,
        pattern: re.Pattern[str],
        text: str,
        kind: str,
        replace: Callable[[re.Match[str]], str | None],
    ) -> str:
        def one(match: re.Match[str]) -> str:
            new = replace(match)
            if new is None or new == match.group(0):
                return match.group(0)
            self._counts[kind] += 1
            return new

        return pattern.sub(one, text)

    def _secret_values(self, text: str) -> str:
        if self._secrets is None:
            return text
        return self._sub(self._secrets, text, "secret", lambda m: "<secret>")

    def _assignment(self, match: re.Match[str]) -> str | None:
        value = match.group("value")
        bare = value.strip("\"'")
        if len(bare) < MIN_SECRET_CHARS or bare in _PLACEHOLDER_TEXT or bare.lower() in _NOT_SECRET:
            return None
        quoted = value[0] + "<secret>" + value[-1] if value[0] in "\"'" else "<secret>"
        start, end = match.span("value")
        whole = match.group(0)
        offset = match.start()
        return whole[: start - offset] + quoted + whole[end - offset :]

    def _names_out(self, text: str) -> str:
        assert self._names is not None

        def one(match: re.Match[str]) -> str:
            kind = self._kind_of.get(match.group(0).lower(), "user")
            self._counts[kind] += 1
            return f"<{kind}>"

        return self._names.sub(one, text)

    def _mac(self, match: re.Match[str]) -> str | None:
        normal = match.group(0).lower().replace("-", ":")
        return None if normal in _MAC_KEPT else "<mac>"

    def _ipv6(self, match: re.Match[str]) -> str | None:
        found = match.group(0)
        if _CPP_NAME.fullmatch(found):
            return None
        try:
            address = ipaddress.IPv6Address(found.split("%", 1)[0])
        except ValueError:
            return None
        mapped = address.ipv4_mapped
        if address.is_loopback or address.is_unspecified or (mapped and _kept_v4(mapped)):
            return None
        return "<ipv6>"

    def _ipv4(self, match: re.Match[str]) -> str | None:
        found = match.group(0)
        if found in self._keep or _kept_v4(ipaddress.IPv4Address(found)):
            return None
        line_start = match.string.rfind("\n", 0, match.start()) + 1
        before = match.string[max(line_start, match.start() - 16) : match.start()]
        if _VERSION_BEFORE.search(before):
            return None
        return "<ipv4>"


def _kept_v4(address: ipaddress.IPv4Address) -> bool:
    if address.is_loopback or address.is_unspecified:
        return True
    octets = [int(o) for o in str(address).split(".")]
    mask = octets[0] == 255 and all(o in _NETMASK_OCTETS for o in octets)
    return mask and octets == sorted(octets, reverse=True)


def _home_path(match: re.Match[str]) -> str | None:
    if match.group("name") in _PLACEHOLDER_TEXT:
        return None
    return match.group("root") + "<user>"


def _is_distinct_name(name: str) -> bool:
    return len(name) >= MIN_NAME_CHARS and name.lower() not in COMMON_NAMES


def _is_personal_home(home: str) -> bool:
    """Whether a home directory says who someone is: not ``/``, ``/root`` or ``/nonexistent``."""
    parts = [p for p in re.split(r"[\\/]+", home) if p and not p.endswith(":")]
    return bool(parts) and _is_distinct_name(parts[-1]) and parts[-1] != "nonexistent"


def _secret_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    long: list[str] = []
    short: list[str] = []
    for value in values:
        if len(value) < MIN_SECRET_CHARS or value.lower() in _NOT_SECRET:
            continue
        (long if len(value) >= SUBSTRING_SECRET_CHARS else short).append(value)
    parts = []
    if long:
        parts.append("|".join(re.escape(v) for v in sorted(set(long), key=len, reverse=True)))
    if short:
        alone = "|".join(re.escape(v) for v in sorted(set(short), key=len, reverse=True))
        parts.append(rf"(?<![^\s\"'=:,;(\[{{<>])(?:{alone})(?![^\s\"',;)\]}}<>])")
    return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None


def _literal_pattern(
    values: Iterable[str], *, before: str = "", after: str = "", flags: int = 0
) -> re.Pattern[str] | None:
    unique = sorted({v for v in values if v}, key=len, reverse=True)
    if not unique:
        return None
    return re.compile(before + "(?:" + "|".join(re.escape(v) for v in unique) + ")" + after, flags)
