"""scripts/check_imports.py finds cycles (also through imports inside functions), private names
used across packages and product imports of the benchmarks, on a small package written here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_imports.py"


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "hexamer" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "hexamer"


def _check(package: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(package), "--json"], capture_output=True, text=True, check=False
    )
    return proc.returncode, json.loads(proc.stdout)


def test_a_clean_package_passes(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "from hexamer.a.core import run\n",
            "a/core.py": "from hexamer.b import helper\n\ndef run():\n    return helper()\n",
            "b/__init__.py": "def helper():\n    return 1\n",
        },
    )
    code, report = _check(package)
    assert code == 0
    assert report["module_level_cycles"] == [] and report["cycles_with_function_imports"] == []
    assert report["cross_package_private_uses"] == {} and report["product_imports_of_bench"] == {}
    assert report["imports_of_testing"] == {}


def test_product_code_never_imports_the_test_helpers(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "testing/__init__.py": "from hexamer.synthetic import build\n",
            "testing/cli.py": "from hexamer.testing import build\n",  # inside the package: fine
            "synthetic/__init__.py": "def build():\n    return 1\n",
            "train/__init__.py": "def init():\n    from hexamer.testing.cli import build\n",
        },
    )
    _, report = _check(package)
    assert report["imports_of_testing"] == {"hexamer.train": ["hexamer.testing.cli"]}
    _, real = _check(SCRIPT.parents[1] / "hexamer")
    assert real["imports_of_testing"] == {}


def test_a_module_re_exporting_another_modules_name_is_listed(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "from hexamer.a.core import run\n\n__all__ = ['run']\n",  # a package may
            "a/core.py": "def run():\n    return 1\n\n__all__ = ['run']\n",
            "a/other.py": "from hexamer.a.core import run\n\n__all__ = ['run', 'walk']\n\ndef walk():\n    return run()\n",
        },
    )
    _, report = _check(package)
    assert report["re_exports"] == {"hexamer.a.other": ["run (from hexamer.a.core)"]}


def test_one_import_path_per_public_name_in_these_packages() -> None:
    _, real = _check(SCRIPT.parents[1] / "hexamer")
    packages = ("calibration", "evals", "finetune", "io", "ism", "model", "synthetic", "testing", "train")
    again = {m: names for m, names in real["re_exports"].items() if m.split(".")[1] in packages}
    assert again == {}


def test_cycles_private_names_and_bench_imports_are_reported(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            # a cycle only through an import inside a function
            "a/x.py": "def f():\n    from hexamer.a import y\n    return y\n",
            "a/y.py": "from hexamer.a import x\n",
            # a cycle at module level, through a relative import
            "b/__init__.py": "from .p import P\n",
            "b/p.py": "from hexamer.b import q\nP = 1\n",
            "b/q.py": "import hexamer.b as b_pkg\n",
            # another package's private names, by name and as a module attribute
            "c/__init__.py": "",
            "c/use.py": (
                "from hexamer.b.p import _hidden\nfrom hexamer.b import p\n\ndef g():\n    return p._other\n"
            ),
            "bench/__init__.py": "",
            "bench/typing_only.py": "",
            "bench/timing.py": "from hexamer.b.p import _fine_inside_bench_only_if_same_package\n",
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hexamer.bench import typing_only\n"
            "def h():\n    from hexamer.bench.timing import clock\n",
        },
    )
    code, report = _check(package)
    assert code == 1
    assert [c["modules"] for c in report["module_level_cycles"]] == [
        ["hexamer.b", "hexamer.b.p", "hexamer.b.q"]
    ]
    assert [c["modules"] for c in report["cycles_with_function_imports"]] == [
        ["hexamer.a.x", "hexamer.a.y"],
        ["hexamer.b", "hexamer.b.p", "hexamer.b.q"],
    ]
    private = report["cross_package_private_uses"]
    assert [u.split(": ", 1)[1] for u in private["hexamer.c.use"]] == [
        "from hexamer.b.p import _hidden",
        "p._other  (hexamer.b.p)",
    ]
    assert list(private) == ["hexamer.bench.timing", "hexamer.c.use"]
    # the TYPE_CHECKING import never runs; the one inside h() does
    assert report["product_imports_of_bench"] == {"hexamer.d": ["hexamer.bench.timing"]}
