"""Lazy package attributes: the name resolves on first use, an unknown one is an AttributeError."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hexamer.lazy import lazy_getattr


def test_lazy_getattr_imports_on_use_and_refuses_unknown_names() -> None:
    getattr_ = lazy_getattr("pkg", {"dumps": "json"})
    import json

    assert getattr_("dumps") is json.dumps
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")


def test_import_hexamer_stays_torch_free() -> None:
    code = (
        "import sys, hexamer, hexamer.server, hexamer.demo, hexamer.train.config\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'fastapi' not in sys.modules, 'fastapi imported'\n"
        "hexamer.CarbonTokenizer\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("hexamer", "Carbon"),
        ("hexamer.server", "ServerSettings"),
        ("hexamer.demo", "run_demo"),
        ("hexamer.train", "train"),
    ],
)
def test_public_lazy_names_resolve(package: str, name: str) -> None:
    import importlib

    assert getattr(importlib.import_module(package), name) is not None
