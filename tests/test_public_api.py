"""The declared public API: ``tfaccel.__all__``, the public and internal submodules, and
wrappers whose signatures are those of the functions they call, so they cannot drift."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import tfaccel

# wrapper name -> (module, function) of its implementation
IMPLEMENTATIONS = {
    "setup": ("tfaccel.runtime", "setup"),
    "tune": ("tfaccel.tuning.api", "tune"),
    "plan": ("tfaccel.planning.api", "plan"),
    "doctor": ("tfaccel.diagnosis", "check"),
    "on_device": ("tfaccel.runtime.devices", "on_device"),
}


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(function).parameters.values()
    ]


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_wrapper_has_the_signature_of_its_implementation(name: str) -> None:
    module, attribute = IMPLEMENTATIONS[name]
    implementation = getattr(importlib.import_module(module), attribute)
    wrapper = getattr(tfaccel, name)
    # names, kinds, defaults and annotations (text under `from __future__ import annotations`)
    assert _parameters(wrapper) == _parameters(implementation)
    assert (
        inspect.signature(wrapper).return_annotation
        == inspect.signature(implementation).return_annotation
    )


def test_devices_keeps_its_keyword_only_flag() -> None:
    (parameter,) = inspect.signature(tfaccel.devices).parameters.values()
    assert parameter.name == "tf" and parameter.default is False
    assert parameter.kind is parameter.KEYWORD_ONLY


@pytest.mark.parametrize(
    "name", [n for n in tfaccel.__all__ if inspect.isfunction(getattr(tfaccel, n))]
)
def test_each_public_function_documents_args_returns_raises_an_example_and_the_cli(
    name: str,
) -> None:
    doc = inspect.getdoc(getattr(tfaccel, name)) or ""
    for section in ("Args:", "Returns:", "Raises:", "Example:", "CLI"):
        assert section in doc, f"tfaccel.{name} has no {section}"


def test_the_signature_shows_in_a_fresh_process() -> None:
    code = "import inspect, sys, tfaccel; print(inspect.signature(tfaccel.setup)); "
    code += "print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    signature, imported = out.stdout.strip().splitlines()
    assert signature.startswith("(*, devices: 'str | int | Sequence[int] | None' = None, memory")
    assert imported == "False"


def test_all_names_exist_and_dir_lists_the_public_names_only() -> None:
    for name in tfaccel.__all__:
        assert hasattr(tfaccel, name), name
    assert dir(tfaccel) == sorted(set(tfaccel.__all__) | tfaccel.PUBLIC_SUBMODULES)
    assert not set(dir(tfaccel)) & tfaccel.INTERNAL_SUBMODULES


def test_public_and_internal_submodules_are_both_reachable_and_cover_the_package() -> None:
    assert not tfaccel.PUBLIC_SUBMODULES & tfaccel.INTERNAL_SUBMODULES
    for name in sorted(tfaccel.INTERNAL_SUBMODULES):
        assert getattr(tfaccel, name).__name__ == f"tfaccel.{name}"
    package = tfaccel.__path__[0]
    found = {m.name for m in pkgutil.iter_modules([package]) if not m.name.startswith("_")}
    found -= {"cli", "scripts"}  # the command line and its script entry points
    assert found == tfaccel.SUBMODULES


def test_device_is_gone_and_its_error_names_on_device() -> None:
    with pytest.raises(AttributeError, match=r"tfaccel\.on_device\(\)") as info:
        tfaccel.device  # noqa: B018
    assert "tfaccel.devices()" in str(info.value)
    assert not hasattr(tfaccel, "device")


def test_an_unknown_name_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"has no attribute 'nothing'$"):
        tfaccel.nothing  # noqa: B018
