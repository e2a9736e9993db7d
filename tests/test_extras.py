"""A node with only torch, numpy, tokenizers, safetensors, pyarrow, typer and rich: hexamer imports,
and a command that needs an absent package says what to install (one ``error:`` line, exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hexamer.extras import EXTRAS, install_hint

ROOT = Path(__file__).resolve().parents[1]
#: every optional package (and what pulls them in); typer's own pydantic stays importable
HIDDEN = sorted({*EXTRAS, "openai", "scipy", "peft", "hypothesis"})

#: imports of a hidden package fail as for an absent one; ``importlib.util.find_spec`` says None
BLOCKER = """
import importlib.util, sys
HIDDEN = set({hidden!r})
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
_find_spec = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] in HIDDEN:
        return None
    return _find_spec(name, package)
importlib.util.find_spec = find_spec
"""


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a subprocess in which every optional package is missing."""
    site = tmp_path_factory.mktemp("bare")
    (site / "sitecustomize.py").write_text(BLOCKER.format(hidden=HIDDEN))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT
    )


def test_imports_without_optional_packages(bare_env: dict[str, str]) -> None:
    code = (
        "import sys, hexamer, hexamer.cli\n"
        "from hexamer import Carbon\n"
        "from hexamer.cli.app import app\n"
        f"hidden = {HIDDEN!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in hidden))\n"
    )
    done = _run(bare_env, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_commands_name_what_to_install(bare_env: dict[str, str], tiny_folder: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nACGTACGTAACCGGTT\n")
    score = _run(bare_env, "-m", "hexamer", "score", "--model", str(tiny_folder), "-i", str(fasta))
    assert score.returncode == 2
    assert "Traceback" not in score.stderr
    assert re.fullmatch(r"error: .*pip install 'pysam>=0\.22'\s*", score.stderr, flags=re.S), score.stderr
    serve = _run(bare_env, "-m", "hexamer", "serve", "--model", str(tiny_folder), "--port", "0")
    assert serve.returncode == 2
    assert "Traceback" not in serve.stderr
    assert "hexamer serve needs" in serve.stderr and "pip install" in serve.stderr


def test_hint_only_for_optional_packages() -> None:
    assert install_hint(ModuleNotFoundError("x", name="pyBigWig")).endswith("pip install 'hexamer[tracks]')")
    assert install_hint(ModuleNotFoundError("x", name="fastapi.responses")) is not None
    assert install_hint(ModuleNotFoundError("x", name="torch")) is None  # a core package: the traceback
    assert install_hint(ImportError("x")) is None


def _requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        listed.extend(extra)
    return {re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0].lower(): r for r in listed}


def test_hints_match_pyproject() -> None:
    """A hint installs the version pyproject.toml asks for (and names an extra that exists)."""
    requirements = _requirements()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRAS.items():
        for req in extra.requirements:
            name = re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower()
            assert requirements.get(name) == req, (module, req)
        assert extra.extra is None or extra.extra in extras, module


def test_torch_is_a_range_and_the_machines_pin_the_cpu_wheel() -> None:
    from packaging.requirements import Requirement

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = Requirement(next(d for d in deps if d.startswith("torch")))
    assert "2.6.0" in torch_req.specifier and "2.13.0" in torch_req.specifier
    assert "2.5.1" not in torch_req.specifier  # transformers 5, the parity peer, needs 2.6
    pins = [
        line.strip()
        for line in (ROOT / "constraints" / "cpu.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert pins == ["torch==2.13.0"]
    assert "2.13.0" in torch_req.specifier  # the pinned wheel satisfies the range
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -c constraints/cpu.txt -e '.[test]'" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()  # CI installs through the Makefile
