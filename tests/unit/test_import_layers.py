"""The house drawn from the code's own imports: the subpackages import downward only
(coordinator -> party -> protos -> solvers, docs/explanation/architecture.md), and no module-level
import cycle exists anywhere in the package. Read with ``ast``, so nothing is imported to check."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: each subpackage may import those of lower rank and itself, never one of higher rank
RANK = {"solvers": 0, "protos": 1, "party": 2, "coordinator": 3}


def modules() -> dict[str, Path]:
    """``securelp.x.y`` -> its file, for every hand-written module of the four subpackages."""
    found = {}
    for top in RANK:
        for path in (REPO / top).rglob("*.py"):
            if "_pb2" in path.name:
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(("securelp", *parts))
            found[name.removesuffix(".__init__")] = path
    return found


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed module (parsed once for both tests; they only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imported(path: Path, known: dict[str, Path], *, module_level: bool) -> set[str]:
    """The package's modules ``path`` imports (``from pkg import sub`` counts as ``pkg.sub`` when
    ``sub`` is a module); ``module_level``: only statements run at import (not in functions or under
    ``if TYPE_CHECKING``)."""
    tree = _tree(path)
    nodes = tree.body if module_level else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("securelp"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & known.keys()
            if subs:
                out |= subs
            if len(subs) < len(node.names) and node.module in known:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
    return out


def test_imports_point_down_the_layers() -> None:
    known = modules()
    upward = [f"{name} imports {target}" for name, path in known.items()
              for target in imported(path, known, module_level=False)
              if RANK[target.split(".")[1]] > RANK[name.split(".")[1]]]
    assert not upward, "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_check_finds_a_planted_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle() -> None:
    known = modules()
    graph = {name: imported(path, known, module_level=True) for name, path in known.items()}
    assert sum(len(targets) for targets in graph.values()) > 300  # the reader sees the package's imports
    assert cycles(graph) == []
