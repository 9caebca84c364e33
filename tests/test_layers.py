"""The layers of `vdla.layers` hold: no import points up, no modules import each other in a cycle.

Every import of every module is read with `ast`, whichever way it is written:
``import`` and ``from ... import`` at module level or inside a function,
relative ones, under ``if TYPE_CHECKING:``, and modules named by a string
(``importlib.import_module`` and ``__import__`` arguments, an f-string's
constant ``vdla.``… head, a string that is exactly a module's name, as tables
of modules to load hold). A module's imports of its own packages are left
out (Python imports those before it). The layers inside ``hw`` and
``compiler`` (``hw.core`` < ``hw.boards`` < ...) are layers like the others.

An import under ``if TYPE_CHECKING:`` must not point up either (a lower
layer's annotation naming a higher layer's type is the same dependency), but
it never runs, so it closes no import cycle: ``hw.isa`` annotates with
``HwConfig`` that way, whose module imports ``hw.isa`` to validate itself.

The checker itself is tested on a small tree with one planted upward import
of each kind, one across the layers inside a part, and planted cycles.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from vdla.layers import LAYERS, layer_of

REPO = Path(__file__).resolve().parents[1]
# A string naming a module outright (not a sentence that mentions one).
MODULE_NAME = re.compile(r"vdla(\.[A-Za-z_]\w*)+")
# The layer table names every layer's modules in strings, which import nothing.
TABLE = "vdla.layers"


@dataclass(frozen=True)
class Edge:
    source: str   # the importing module
    target: str   # the module imported
    where: str    # file:line
    typing: bool = False   # under ``if TYPE_CHECKING:``: never runs


def package_dirs(repo: Path) -> dict[str, str]:
    """pyproject's mapping of packages to folders (the folders sit at the repository's top)."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["package-dir"]


def modules(repo: Path, dirs: dict[str, str]) -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found = {}
    for package, folder in dirs.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(repo / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in (an attribute of), if any."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _named(node: ast.AST) -> list[str]:
    """Module names a node gives as a string: a whole-name constant, an f-string's package head."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if MODULE_NAME.fullmatch(node.value) else []
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        if head.startswith("vdla.") and "." in head:
            package = head[:head.rindex(".")]
            return [package] if MODULE_NAME.fullmatch(package) else []
    return []


def imports(module: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """Every vdla module ``module`` (the file ``path``) imports, by any of the ways above."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges: list[Edge] = []

    def add(name: str, node: ast.AST, typing: bool) -> None:
        target = _resolve(name, known)
        # A module's own packages are imported before it, whatever it names.
        if target is not None and not (module + ".").startswith(target + "."):
            edges.append(Edge(module, target, f"{path}:{node.lineno}", typing))

    def visit(node: ast.AST, typing: bool = False) -> None:
        if _is_type_checking(node):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, typing)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # `from package import module` imports the module, else the name's module.
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base, node,
                    typing)
        elif isinstance(node, (ast.Constant, ast.JoinedStr)):
            for name in _named(node) if module != TABLE else ():
                add(name, node, typing)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, typing)

    visit(ast.parse(path.read_text(), str(path)))
    return edges


@functools.cache   # each test of the repository reads it once per session
def import_graph(repo: Path) -> tuple[dict[str, Path], list[Edge]]:
    known = modules(repo, package_dirs(repo))
    return known, [edge for module, path in known.items() for edge in imports(module, path, known)]


def layering_problems(repo: Path) -> list[str]:
    """One line per module in no layer and per import of a higher layer."""
    rank = {layer: index for index, (layer, _, _) in enumerate(LAYERS)}
    known, edges = import_graph(repo)
    problems = [f"{path.relative_to(repo)}: {module} is in no layer of vdla.layers.LAYERS"
                for module, path in known.items() if layer_of(module) is None]
    for edge in edges:
        low, high = layer_of(edge.source), layer_of(edge.target)
        if low is not None and high is not None and rank[high] > rank[low]:
            where = Path(edge.where).relative_to(repo)
            problems.append(f"{where}: {edge.source} ({low}) imports {edge.target} ({high}), "
                            "a higher layer")
    return problems


def import_cycles(repo: Path) -> list[frozenset[str]]:
    """The sets of modules that import each other in a cycle (strongly connected, two or more),
    through imports that run (not those under ``if TYPE_CHECKING:``)."""
    known, edges = import_graph(repo)
    graph: dict[str, set[str]] = {module: set() for module in known}
    for edge in edges:
        if not edge.typing:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    for root in graph:  # Tarjan's algorithm, iteratively (no recursion limit on long chains)
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(frozenset(component))
    return cycles


def test_no_module_imports_a_higher_layer():
    assert layering_problems(REPO) == []


def test_no_modules_import_each_other_in_a_cycle():
    cycles = import_cycles(REPO)
    assert [sorted(cycle) for cycle in cycles] == []


def test_every_layer_holds_a_module_and_no_module_is_listed_twice():
    known, _ = import_graph(REPO)
    listed = [name for _, names, _ in LAYERS for name in names]
    assert len(listed) == len(set(listed))
    assert {layer_of(module) for module in known} == {layer for layer, _, _ in LAYERS}


def test_the_layers_inside_a_part_are_next_to_each_other():
    """``hw.core``, ``hw.boards``, ...: a part's layers form one run of the table, so the
    parts keep their order and only the layers inside a part are added."""
    parts = [layer.split(".")[0] for layer, _, _ in LAYERS]
    runs = [part for index, part in enumerate(parts) if index == 0 or parts[index - 1] != part]
    assert len(runs) == len(set(runs)), parts


@pytest.mark.parametrize("lower, higher", [
    ("vdla.hw.config", "vdla.hw.boards.top"),            # the core below the boards
    ("vdla.hw.boards.table", "vdla.hw.synth.flow"),      # synthesis places a board's top
    ("vdla.hw.synth.tools", "vdla.hw.boards.bitstream"),  # the bitstream runs synthesis
    ("vdla.compiler.ops", "vdla.compiler.accel.schedule"),
    ("vdla.compiler.host_runner", "vdla.compiler.cpu.runner"),
    ("vdla.compiler.cpu.schedule", "vdla.compiler.gpu.schedule"),  # gpu reuses cpu's problem
    ("vdla.compiler.gpu.runner", "vdla.compiler.runners"),
    ("vdla.compiler.accel.driver", "vdla.compiler"),
])
def test_the_sub_packages_are_ordered(lower, higher):
    rank = {layer: index for index, (layer, _, _) in enumerate(LAYERS)}
    assert rank[layer_of(lower)] < rank[layer_of(higher)]


def test_the_architecture_diagram_is_the_layer_table():
    """docs/architecture.md draws the layers, top first, one ``layer: modules`` line each."""
    text = (REPO / "docs" / "architecture.md").read_text()
    diagram = re.search(r"<!-- layers -->\n```\n(.*?)```", text, re.DOTALL)
    assert diagram, "docs/architecture.md has no <!-- layers --> diagram"
    drawn = [(line.split(":")[0].strip(), tuple(line.split(":")[1].split()))
             for line in diagram.group(1).splitlines() if ":" in line]
    assert drawn == [(layer, names) for layer, names, _ in reversed(LAYERS)]


# ------------------------------------------------------------------ the checker itself
def _tree(tmp_path: Path, sources: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"vdla" = "vdla"\n"vdla.hw" = "hw"\n'
        '"vdla.sim" = "sim"\n"vdla.runtime" = "runtime"\n"vdla.compiler" = "compiler"\n')
    for name in ("vdla/__init__.py", "hw/__init__.py", "hw/config.py", "sim/__init__.py",
                 "runtime/__init__.py", "runtime/board.py", *sources):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sources.get(name, ""))
    return tmp_path


@pytest.mark.parametrize("source, line", [
    ("from vdla.runtime.board import BoardBackend\n", 1),
    ("import vdla.runtime.board as board\n", 1),
    ("def load():\n    from vdla.runtime import board\n    return board\n", 2),
    ("def load():\n    from ..runtime import board\n", 2),
    ("import importlib\nBUILTIN = ('vdla.sim.fsim', 'vdla.runtime.board')\n", 2),
    ("import importlib\nimportlib.import_module('vdla.runtime.board')\n", 2),
    ("def load(name):\n    return __import__(f'vdla.runtime.{name}')\n", 2),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from vdla.runtime.board import BoardBackend\n", 3),
])
def test_a_planted_upward_import_fails_naming_file_line_and_layers(tmp_path, source, line):
    repo = _tree(tmp_path, {"sim/backend.py": source})
    (problem,) = layering_problems(repo)
    target = "vdla.runtime" if "{name}" in source else "vdla.runtime.board"
    assert problem == (f"sim/backend.py:{line}: vdla.sim.backend (sim) imports {target} "
                       "(runtime), a higher layer")


def test_downward_type_checking_and_unrelated_imports_pass(tmp_path):
    repo = _tree(tmp_path, {
        "runtime/board.py": ("from typing import TYPE_CHECKING\nfrom vdla.sim import backend\n"
                             "if TYPE_CHECKING:\n    from vdla.hw.config import X\n"),
        "hw/config.py": "import numpy\nMESSAGE = 'see vdla.runtime.board for the driver'\n",
        "sim/backend.py": ""})
    assert layering_problems(repo) == []


@pytest.mark.parametrize("path, source, problem", [
    ("hw/config.py", "from vdla.hw.boards.top import BoardTop\n",
     "hw/config.py:1: vdla.hw.config (hw.core) imports vdla.hw.boards.top (hw.boards)"),
    ("hw/boards/top.py", "def build():\n    from vdla.hw.boards import bitstream\n",
     "hw/boards/top.py:2: vdla.hw.boards.top (hw.boards) imports vdla.hw.boards.bitstream "
     "(hw.bitstream)"),
    ("compiler/ops.py", "from vdla.compiler.accel.schedule import Schedule\n",
     "compiler/ops.py:1: vdla.compiler.ops (compiler.shared) imports "
     "vdla.compiler.accel.schedule (compiler.accel)"),
    ("compiler/host.py", "from vdla.compiler import runners\n",
     "compiler/host.py:1: vdla.compiler.host (compiler.shared) imports vdla.compiler.runners "
     "(compiler.dispatch)"),
])
def test_a_planted_import_up_the_layers_inside_a_part_fails(tmp_path, path, source, problem):
    """Inside ``hw`` and ``compiler``: the core never names a board, what the targets share
    never names a target or the package root."""
    repo = _tree(tmp_path, {"hw/boards/__init__.py": "", "hw/boards/top.py": "",
                            "hw/boards/bitstream.py": "", "compiler/__init__.py": "",
                            "compiler/ops.py": "", "compiler/host.py": "",
                            "compiler/runners.py": "", "compiler/accel/__init__.py": "",
                            "compiler/accel/schedule.py": "", path: source})
    assert layering_problems(repo) == [f"{problem}, a higher layer"]


def test_a_module_in_no_layer_is_named(tmp_path):
    repo = _tree(tmp_path, {"vdla/extra.py": ""})
    assert layering_problems(repo) == ["vdla/extra.py: vdla.extra is in no layer of "
                                       "vdla.layers.LAYERS"]


def test_a_planted_cycle_is_found(tmp_path):
    repo = _tree(tmp_path, {"hw/isa.py": "def f():\n    from vdla.hw import config\n",
                            "hw/config.py": "from vdla.hw.isa import f\n"})
    assert import_cycles(repo) == [frozenset({"vdla.hw.isa", "vdla.hw.config"})]


def test_a_type_checking_import_closes_no_cycle(tmp_path):
    repo = _tree(tmp_path, {"hw/isa.py": ("from typing import TYPE_CHECKING\n"
                                          "if TYPE_CHECKING:\n    from vdla.hw.config import C\n"),
                            "hw/config.py": "from vdla.hw.isa import f\n"})
    assert import_cycles(repo) == [] and layering_problems(repo) == []
