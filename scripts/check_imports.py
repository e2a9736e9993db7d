"""Report import cycles and cross-package private-name use among ``hexamer`` modules.

Builds the module import graph of the package from its source with :mod:`ast` (nothing is imported
or executed), in two layers:

* **module level**: imports that run when the module is imported (including those inside
  ``try``/``if`` blocks at module level, but not ``if TYPE_CHECKING:`` blocks, which never run);
* **function level**: imports inside a function or method body, which run on first call; they
  are how a cycle is usually deferred rather than removed.

An edge goes to the deepest module an import names: ``from hexamer.vep import scoring`` is an edge
to ``hexamer.vep.scoring``; ``from hexamer.vep import score_variants`` is an edge to the package
``hexamer.vep`` (its ``__init__``). Cycles are the strongly connected components of more than one
module, listed for the module-level graph and for module + function level together.

A *private-name use across packages* is ``from hexamer.x... import _y`` or ``module._y`` (where
``module`` was bound by an import of a hexamer module) in a module outside ``hexamer.x`` — a
package being the first level under ``hexamer`` (``hexamer.bench``, ``hexamer.vep``, ...; a
top-level module such as ``hexamer.cache`` is its own package). Listed apart, as a heuristic
without type information: ``obj._y`` on an object (not ``self``/``cls``) where ``_y`` is defined
only in other packages, such as a private method of another package's class. Also listed:
product modules that import the benchmarks (``hexamer.bench``); only ``hexamer.cli`` and
``hexamer.testing`` may; and modules that import the test helpers (``hexamer.testing``), which only
tests may (product code builds synthetic models with ``hexamer.synthetic``); and modules that
re-export another module's names in ``__all__`` (a second import path for one name; a package
``__init__`` may).

    python scripts/check_imports.py            # the hexamer/ package of this checkout
    python scripts/check_imports.py --json     # the same, machine-readable

Exits 1 when any cycle is found (module level or with function-level imports), else 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class ModuleInfo:
    name: str
    path: Path
    is_package: bool
    module_edges: set[str] = field(default_factory=set)
    function_edges: set[str] = field(default_factory=set)
    private_uses: list[tuple[int, str]] = field(default_factory=list)
    private_defs: set[str] = field(default_factory=set)
    private_attrs: list[tuple[int, str]] = field(default_factory=list)


def discover(package_dir: Path) -> dict[str, ModuleInfo]:
    """Every ``.py`` file under ``package_dir``, keyed by its dotted module name."""
    base = package_dir.parent
    modules: dict[str, ModuleInfo] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        modules[name] = ModuleInfo(name, path, is_package)
    return modules


def top_package(module: str) -> str:
    """``hexamer.bench.llamacpp.convert`` -> ``hexamer.bench``; ``hexamer.cache`` -> ``hexamer.cache``."""
    return ".".join(module.split(".")[:2])


def resolve_relative(info: ModuleInfo, level: int, module: str | None) -> str:
    package = info.name.split(".") if info.is_package else info.name.split(".")[:-1]
    if level > 1:
        package = package[: len(package) - (level - 1)]
    return ".".join([*package, module] if module else package)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_imports(tree: ast.Module) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Yield (import node, inside a function) for every runtime import; skips TYPE_CHECKING blocks."""

    def visit(node: ast.AST, in_function: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for orelse in child.orelse:
                    yield from visit(ast.Module(body=[orelse], type_ignores=[]), in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, in_function
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from visit(child, inner)

    yield from visit(tree, False)


def analyse(modules: dict[str, ModuleInfo], root_package: str) -> None:
    """Fill in each module's edges and private-name uses."""
    for info in modules.values():
        tree = ast.parse(info.path.read_text(encoding="utf-8"), filename=str(info.path))
        aliases: dict[str, str] = {}  # local name -> hexamer module it is bound to
        for node, in_function in _walk_imports(tree):
            edges = info.function_edges if in_function else info.module_edges
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != root_package:
                        continue
                    target = _deepest_module(alias.name, modules)
                    if target:
                        edges.add(target)
                        if alias.asname:
                            aliases[alias.asname] = target
                continue
            base = resolve_relative(info, node.level, node.module) if node.level else node.module or ""
            if base.split(".")[0] != root_package:
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate in modules:
                    edges.add(candidate)
                    aliases[alias.asname or alias.name] = candidate
                    continue
                target = _deepest_module(base, modules)
                if target:
                    edges.add(target)
                if _is_private(alias.name) and top_package(base) != top_package(info.name):
                    info.private_uses.append((node.lineno, f"from {base} import {alias.name}"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            owner = _dotted(node.value)
            target = aliases.get(owner or "") or (owner if owner in modules else None)
            if target and top_package(target) != top_package(info.name):
                info.private_uses.append((node.lineno, f"{owner}.{node.attr}  ({target})"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _is_private(
                node.name
            ):
                info.private_defs.add(node.name)
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                owner = _dotted(node.value)
                if isinstance(node.ctx, ast.Store):
                    info.private_defs.add(node.attr)
                elif owner not in ("self", "cls") and not (aliases.get(owner or "") or owner in modules):
                    info.private_attrs.append((node.lineno, f"{owner or '<expr>'}.{node.attr}"))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _is_private(node.id):
                info.private_defs.add(node.id)
        for edges in (info.module_edges, info.function_edges):
            edges.discard(info.name)
        info.function_edges -= info.module_edges


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _deepest_module(dotted: str, modules: dict[str, ModuleInfo]) -> str | None:
    parts = dotted.split(".")
    for stop in range(len(parts), 0, -1):
        candidate = ".".join(parts[:stop])
        if candidate in modules:
            return candidate
    return None


def foreign_private_attributes(modules: dict[str, ModuleInfo]) -> dict[str, list[str]]:
    """``obj._y`` where ``_y`` is defined only in other packages: likely another package's private member.

    A heuristic (no type information): an attribute name counts as the accessing package's own when
    any module of that package defines or assigns it.
    """
    defined: dict[str, set[str]] = {}
    for info in modules.values():
        defined.setdefault(top_package(info.name), set()).update(info.private_defs)
    found: dict[str, list[str]] = {}
    for name, info in sorted(modules.items()):
        own = defined[top_package(name)]
        uses = []
        for line, text in sorted(info.private_attrs):
            attr = text.rsplit(".", 1)[1]
            owners = sorted(
                pkg for pkg, names in defined.items() if attr in names and pkg != top_package(name)
            )
            if attr not in own and owners:
                uses.append(f"{line}: {text}  (defined in {', '.join(owners)})")
        if uses:
            found[name] = uses
    return found


#: packages that may import the benchmarks (the CLI runs them; test helpers are not product code)
BENCH_USERS = ("hexamer.bench", "hexamer.cli", "hexamer.testing")


def product_imports_of_bench(modules: dict[str, ModuleInfo]) -> dict[str, list[str]]:
    """Modules outside :data:`BENCH_USERS` that import ``hexamer.bench`` (module or function level)."""
    found: dict[str, list[str]] = {}
    for name, info in sorted(modules.items()):
        if top_package(name) in BENCH_USERS:
            continue
        targets = sorted(
            t for t in info.module_edges | info.function_edges if top_package(t) == "hexamer.bench"
        )
        if targets:
            found[name] = targets
    return found


def re_exports(modules: dict[str, ModuleInfo]) -> dict[str, list[str]]:
    """Names a module (not a package ``__init__``) lists in ``__all__`` but imports from another
    hexamer module: a second import path for one public name. A package may export its modules'
    names (one short path for users); a module exports only what it defines."""
    found: dict[str, list[str]] = {}
    for name, info in sorted(modules.items()):
        if info.is_package:
            continue
        tree = ast.parse(info.path.read_text(encoding="utf-8"), filename=str(info.path))
        imported: dict[str, str] = {}
        exported: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hexamer"):
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                try:
                    exported = list(ast.literal_eval(node.value))
                except ValueError:
                    exported = []
        names = [f"{n} (from {imported[n].rpartition('.')[0]})" for n in exported if n in imported]
        if names:
            found[name] = names
    return found


def imports_of_testing(modules: dict[str, ModuleInfo]) -> dict[str, list[str]]:
    """Modules outside ``hexamer.testing`` that import it: test helpers are for tests; what product
    code needs from them (model folders with random weights, random VCFs) is ``hexamer.synthetic``."""
    found: dict[str, list[str]] = {}
    for name, info in sorted(modules.items()):
        if top_package(name) == "hexamer.testing":
            continue
        targets = sorted(
            t for t in info.module_edges | info.function_edges if top_package(t) == "hexamer.testing"
        )
        if targets:
            found[name] = targets
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components with more than one module, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def cycle_edges(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    members = set(component)
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", type=Path, default=ROOT / "hexamer")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)

    package_dir: Path = args.package.resolve()
    modules = discover(package_dir)
    analyse(modules, package_dir.name)
    module_graph = {name: info.module_edges for name, info in modules.items()}
    full_graph = {name: info.module_edges | info.function_edges for name, info in modules.items()}
    module_cycles = strongly_connected(module_graph)
    all_cycles = strongly_connected(full_graph)
    private = {
        name: [f"{line}: {text}" for line, text in sorted(info.private_uses)]
        for name, info in sorted(modules.items())
        if info.private_uses
    }
    report = {
        "modules": len(modules),
        "module_level_edges": sum(len(e) for e in module_graph.values()),
        "function_level_edges": sum(len(info.function_edges) for info in modules.values()),
        "module_level_cycles": [{"modules": c, "edges": cycle_edges(c, module_graph)} for c in module_cycles],
        "cycles_with_function_imports": [
            {"modules": c, "edges": cycle_edges(c, full_graph)} for c in all_cycles
        ],
        "cross_package_private_uses": private,
        "foreign_private_attributes": foreign_private_attributes(modules),
        "product_imports_of_bench": product_imports_of_bench(modules),
        "imports_of_testing": imports_of_testing(modules),
        "re_exports": re_exports(modules),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_text(report)
    return 1 if module_cycles or all_cycles else 0


def _print_text(report: dict) -> None:
    print(
        f"{report['modules']} modules, {report['module_level_edges']} module-level and "
        f"{report['function_level_edges']} function-level import edges"
    )
    for key, title in (
        ("module_level_cycles", "cycles among module-level imports"),
        ("cycles_with_function_imports", "cycles with function-level imports included"),
    ):
        cycles = report[key]
        print(f"\n{title}: {len(cycles)}")
        for number, cycle in enumerate(cycles, 1):
            print(f"  [{number}] {len(cycle['modules'])} modules: {', '.join(cycle['modules'])}")
            for edge in cycle["edges"]:
                print(f"        {edge}")
    private = report["cross_package_private_uses"]
    total = sum(len(v) for v in private.values())
    print(f"\nprivate names used across packages: {total} in {len(private)} modules")
    for module, uses in private.items():
        print(f"  {module}")
        for use in uses:
            print(f"        {use}")
    bench = report["product_imports_of_bench"]
    print(f"\nproduct modules importing hexamer.bench: {len(bench)}")
    for module, targets in bench.items():
        print(f"  {module} -> {', '.join(targets)}")
    testing = report["imports_of_testing"]
    print(f"\nproduct modules importing hexamer.testing: {len(testing)}")
    for module, targets in testing.items():
        print(f"  {module} -> {', '.join(targets)}")
    again = report["re_exports"]
    print(f"\nmodules re-exporting another module's names: {len(again)}")
    for module, names in again.items():
        print(f"  {module}: {', '.join(names)}")
    foreign = report["foreign_private_attributes"]
    total = sum(len(v) for v in foreign.values())
    print(
        f"\nother packages' private attributes used on objects (heuristic): {total} in {len(foreign)} modules"
    )
    for module, uses in foreign.items():
        print(f"  {module}")
        for use in uses:
            print(f"        {use}")


if __name__ == "__main__":
    sys.exit(main())
