"""The Python packages TensorFlow runs with: protobuf, Keras and TensorBoard, read without imports.

Finding ids: ``protobuf_incompatible`` (the installed protobuf is outside the range the installed
TensorFlow requires, or newer than the generated code of a TensorFlow <= 2.8 can take),
``keras_versions_mixed`` (a Keras that ``tf.keras`` cannot use, or ``TF_USE_LEGACY_KERAS`` set
without ``tf-keras`` or beside Keras 3) and ``tensorboard_missing`` (no ``tensorboard`` package:
the TensorBoard callback and ``tf.summary.scalar``/``image``/``histogram`` fail; TensorFlow >= 2.21
no longer installs it, so there it is an ``info``: nothing fails until they are used; a ``fail``
where the installed TensorFlow requires it).

The requirements are TensorFlow's own: the ``Requires-Dist`` lines of its distribution's METADATA
(``Snapshot.tensorflow.requires``), e.g. ``protobuf<8.0.0,>=6.31.1`` and ``keras>=3.12.0`` for
2.21. A snapshot without them (an older tfaccel wrote it, or the METADATA was unreadable) makes
the protobuf and TensorBoard rules say ``skip``: the distributions list of such a snapshot does
not say whether those packages are installed.
"""

from __future__ import annotations

import re

from tfaccel.core.findings import Finding, Status
from tfaccel.diagnosis.rules._common import (
    installed_distributions,
    make_finding,
    normalise,
    parse_version,
    skip,
    tf_installed,
    tf_label,
)
from tfaccel.snapshot import Snapshot

__all__ = [
    "keras_versions_mixed",
    "protobuf_incompatible",
    "requirement",
    "satisfies",
    "tensorboard_missing",
]

NO_REQUIRES = "TensorFlow's requirements (its METADATA) were not read"
_LEGACY_TRUE = ("1", "true", "yes", "y", "on")


# --------------------------------------------------------------------------- requirements


def requirement(requires: list[str], name: str) -> str | None:
    """The version specifier TensorFlow requires of ``name`` (``"<8.0.0,>=6.31.1"``).

    Requirements of an extra (``; extra == "and-cuda"``) are left out; ``""`` when the package is
    required without a version, None when it is not required at all.
    """
    for line in requires:
        spec, _, marker = line.partition(";")
        if "extra" in marker:
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?", spec)
        if match and normalise(match.group(1)) == normalise(name):
            return match.group(2).replace(" ", "")
    return None


def satisfies(version: str, spec: str) -> bool | None:
    """Whether ``version`` meets a PEP 440 specifier such as ``<8.0.0,>=6.31.1`` or ``~=2.15.0``.

    Release numbers only (pre-release and local parts are dropped); None when a clause or the
    version cannot be read.
    """
    have = parse_version(version)
    if have is None:
        return None
    for clause in filter(None, spec.split(",")):
        match = re.fullmatch(
            r"(===|==|!=|~=|<=|>=|<|>)\s*v?(\d+(?:\.\d+)*)(\.\*)?\S*", clause.strip()
        )
        if match is None:
            return None
        op, text, wildcard = match.groups()
        want = parse_version(text)
        if want is None:
            return None
        if not _clause(have, op, want, bool(wildcard)):
            return False
    return True


def _clause(have: tuple[int, ...], op: str, want: tuple[int, ...], wildcard: bool) -> bool:
    width = max(len(have), len(want))
    a = have + (0,) * (width - len(have))
    b = want + (0,) * (width - len(want))
    if wildcard and op in ("==", "!="):
        equal = have[: len(want)] == want
        return equal if op == "==" else not equal
    if op in ("==", "==="):
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    # ~=X.Y.Z: >= X.Y.Z and == X.Y.*
    prefix = want[:-1] if len(want) > 1 else want
    return a >= b and have[: len(prefix)] == prefix


def _tf_version(s: Snapshot) -> tuple[int, ...] | None:
    return parse_version(s.tensorflow.version)


def _minor(version: tuple[int, ...]) -> str:
    return f"{version[0]}.{version[1] if len(version) > 1 else 0}"


# --------------------------------------------------------------------------- protobuf


def protobuf_incompatible(s: Snapshot) -> Finding:
    """protobuf outside TensorFlow's requirement, or >= 4 under a TensorFlow <= 2.8."""
    id = "protobuf_incompatible"
    if not tf_installed(s):
        return skip(id, "TensorFlow is not installed")
    if not s.tensorflow.requires:
        return skip(id, NO_REQUIRES)
    protobuf = installed_distributions(s).get("protobuf")
    spec = requirement(s.tensorflow.requires, "protobuf")
    if protobuf is None:
        return make_finding(
            id,
            "fail",
            "protobuf is not installed: `import tensorflow` fails",
            [f"{tf_label(s)} requires protobuf{spec or ''}; no protobuf distribution is installed"],
            f"pip install 'protobuf{spec}'" if spec else "pip install protobuf",
        )
    evidence = [f"protobuf {protobuf} installed"]
    if spec:
        evidence.append(f"{tf_label(s)} requires protobuf{spec} (its METADATA)")
        if satisfies(protobuf, spec) is False:
            return make_finding(
                id,
                "fail",
                f"protobuf {protobuf} is outside the range {tf_label(s)} requires",
                evidence,
                f"pip install 'protobuf{spec}'",
            )
    tf = _tf_version(s)
    have = parse_version(protobuf)
    if tf is not None and tf < (2, 9) and have is not None and have[0] >= 4:
        evidence.append(
            "TensorFlow <= 2.8 ships *_pb2.py code generated before protoc 3.19, which protobuf "
            ">= 4 refuses ('Descriptors cannot be created directly')"
        )
        return make_finding(
            id,
            "fail",
            f"protobuf {protobuf} is too new for the generated code of {tf_label(s)}",
            evidence,
            "pip install 'protobuf==3.20.*'",
        )
    return make_finding(id, "ok", f"protobuf {protobuf} fits {tf_label(s)}", evidence)


# --------------------------------------------------------------------------- Keras


def keras_versions_mixed(s: Snapshot) -> Finding:
    """A Keras tf.keras cannot use, or TF_USE_LEGACY_KERAS without tf-keras or beside Keras 3."""
    id = "keras_versions_mixed"
    if not tf_installed(s):
        return skip(id, "TensorFlow is not installed")
    tf = _tf_version(s)
    if tf is None:
        return skip(id, "TensorFlow's version is unknown")
    dists = installed_distributions(s)
    keras, tf_keras = dists.get("keras"), dists.get("tf-keras")
    legacy_value = s.env.get("TF_USE_LEGACY_KERAS")
    legacy = (legacy_value or "").strip().lower() in _LEGACY_TRUE
    evidence = [tf_label(s)]
    evidence += [f"{n} {v}" for n, v in (("keras", keras), ("tf-keras", tf_keras)) if v]
    if legacy_value is not None:
        evidence.append(f"TF_USE_LEGACY_KERAS={legacy_value}")
    keras_v = parse_version(keras) if keras else None
    tf_minor = _minor(tf)

    spec = requirement(s.tensorflow.requires, "keras") if s.tensorflow.requires else None
    wrong_keras = False
    if keras and spec:
        evidence.append(f"{tf_label(s)} requires keras{spec} (its METADATA)")
        wrong_keras = satisfies(keras, spec) is False
    elif keras_v is not None and not s.tensorflow.requires:
        # without the METADATA: 2.16+ needs Keras 3; 2.6 to 2.15 bring their own Keras 2.x
        wrong_keras = (tf >= (2, 16) and keras_v[0] < 3) or (
            (2, 6) <= tf < (2, 16) and keras_v[0] >= 3
        )
    if wrong_keras and not (legacy and tf >= (2, 16) and tf_keras):
        fix = (
            f"pip install 'keras{spec}'"
            if spec
            else (
                "pip install 'keras>=3'" if tf >= (2, 16) else f"pip install 'keras~={tf_minor}.0'"
            )
        )
        return make_finding(
            id,
            "fail",
            f"keras {keras} is not the Keras {tf_label(s)} works with: tf.keras fails or mixes two "
            "Kerases",
            evidence,
            fix,
        )
    if tf < (2, 16):
        if legacy:
            evidence.append("TensorFlow < 2.16 ignores TF_USE_LEGACY_KERAS (tf.keras is Keras 2)")
        return make_finding(id, "ok", f"tf.keras is the Keras 2 of {tf_label(s)}", evidence)
    if legacy and not tf_keras:
        return make_finding(
            id,
            "fail",
            "TF_USE_LEGACY_KERAS is set but tf-keras is not installed: tf.keras fails to import",
            evidence,
            f"pip install 'tf-keras~={tf_minor}.0' (or unset TF_USE_LEGACY_KERAS to use Keras 3)",
        )
    if legacy and tf_keras:
        tk = parse_version(tf_keras)
        if tk is not None and tk[:2] != tf[:2]:
            return make_finding(
                id,
                "warn",
                f"tf-keras {tf_keras} was made for another TensorFlow than {tf_label(s)}",
                evidence,
                f"pip install 'tf-keras~={tf_minor}.0'",
            )
        if keras_v is not None and keras_v[0] >= 3:
            evidence.append(
                "with TF_USE_LEGACY_KERAS, tf.keras is tf_keras (Keras 2) while `import keras` "
                "is Keras 3: a layer, optimizer or model of one given to the other fails"
            )
            return make_finding(
                id,
                "warn",
                "Two Kerases are in use: tf.keras is tf_keras (Keras 2), `import keras` is Keras 3",
                evidence,
                "import every layer, optimizer and model from one Keras: from tensorflow import "
                "keras (tf_keras here) everywhere, or unset TF_USE_LEGACY_KERAS and use Keras 3 "
                "everywhere",
            )
        return make_finding(id, "ok", "tf.keras is tf_keras (TF_USE_LEGACY_KERAS)", evidence)
    if tf_keras:
        evidence.append("tf-keras is used only with TF_USE_LEGACY_KERAS=1")
    which = f"Keras {keras}" if keras else "Keras 3"
    return make_finding(id, "ok", f"tf.keras is {which}", evidence)


# --------------------------------------------------------------------------- TensorBoard


def tensorboard_missing(s: Snapshot) -> Finding:
    """No tensorboard package: the TensorBoard callback and tf.summary.scalar/image fail."""
    id = "tensorboard_missing"
    if not tf_installed(s):
        return skip(id, "TensorFlow is not installed")
    if not s.tensorflow.requires:
        return skip(id, NO_REQUIRES)
    dists = installed_distributions(s)
    board = next(((n, dists[n]) for n in ("tensorboard", "tb-nightly") if n in dists), None)
    if board is not None:
        return make_finding(
            id, "ok", f"{board[0]} {board[1]} is installed", [f"{board[0]} {board[1]}"]
        )
    required = requirement(s.tensorflow.requires, "tensorboard")
    evidence = [f"no tensorboard distribution is installed beside {tf_label(s)}"]
    fix = "pip install tensorboard"
    status: Status
    if required is not None:
        evidence.append(f"{tf_label(s)} requires tensorboard{required}: the install is incomplete")
        status, fix = "fail", f"pip install 'tensorboard{required}'"
    else:
        evidence.append(
            f"{tf_label(s)} does not require tensorboard (TensorFlow >= 2.21 no longer installs it)"
        )
        status = "info"  # nothing is wrong until the TensorBoard callback or tf.summary is used
    evidence.append(
        "the Keras TensorBoard callback and tf.summary.scalar/image/histogram raise "
        "TBNotInstalledError ('TensorBoard is not installed, missing implementation for ...')"
    )
    return make_finding(
        id,
        status,
        "TensorBoard is not installed: the TensorBoard callback and tf.summary fail",
        evidence,
        fix,
    )
