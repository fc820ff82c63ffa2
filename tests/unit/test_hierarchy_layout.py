"""The hierarchy engine stays a set of small modules whose imports only point down.

Checked on the sources (AST, nothing imported): no import cycle between the engine's modules; no
import inside a function except a solver backend's (``highspy``, imported lazily); no import of
another module's private names; every module under 800 lines and every function body within a
screen (60 lines); no history notes (a "stop N" note) in the engine, its CLI or its tests. Each check is
also run on a planted bad source, which it must reject.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from securelp.solvers.hierarchy.baselines import CqpOptions, HqpOptions
from securelp.solvers.hierarchy.chain import ChainOptions
from securelp.solvers.hierarchy.hdp import HdpOptions
from securelp.solvers.hierarchy.mechanisms import PostprocessOptions

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "securelp.solvers.hierarchy"
ENGINE = REPO / "solvers" / "hierarchy"
#: modules a function may import lazily (solver backends, as STYLE.md asks)
LAZY_IMPORTS = {"highspy"}
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ENGINE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def _sources() -> dict[str, str]:
    return {_module_name(p): p.read_text() for p in sorted(ENGINE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    package = base if module.endswith("__init__") else base[:-node.level]
    return ".".join(package + ([node.module] if node.module else []))


def import_problems(sources: dict[str, str]) -> list[str]:
    """Function-level imports (other than LAZY_IMPORTS) and imports of private names, per module."""
    problems = []
    for module, text in sources.items():
        tree = ast.parse(text)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [_resolve(module, node)]
                else:
                    continue
                bad = [n for n in names if n.split(".")[0] not in LAZY_IMPORTS]
                if bad:
                    problems.append(f"{module}: function {fn.name} imports {', '.join(bad)}")
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and _resolve(module, node).startswith("securelp"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"]
                if private:
                    problems.append(f"{module}: imports private {', '.join(private)} from {node.module}")
    return problems


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the engine modules it imports at module level (a package import counts as its __init__)."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for module, text in sources.items():
        for node in ast.parse(text).body:
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                if target in sources and target != module:
                    graph[module].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def long_functions(sources: dict[str, str], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions whose body (docstring excluded) is longer than ``limit`` lines."""
    out = []
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                start = body[1].lineno if doc and len(body) > 1 else body[0].lineno
                if node.end_lineno - start + 1 > limit:
                    out.append(f"{module}.{node.name}: {node.end_lineno - start + 1} lines")
    return out


HISTORY = re.compile(r"\bstops? \d+\b|\bbefore stop\b|\buntil stop\b", re.IGNORECASE)


def history_notes(texts: dict[str, str]) -> list[str]:
    return [f"{name}: {m.group(0)!r}" for name, text in texts.items() for m in HISTORY.finditer(text)]


def test_no_import_cycles() -> None:
    graph = import_graph(_sources())
    assert f"{PACKAGE}.chain.rounds" in graph and graph[f"{PACKAGE}.mechanisms"]  # the graph is not empty
    assert find_cycle(graph) is None


def test_no_function_level_or_private_imports() -> None:
    assert import_problems(_sources()) == []


def test_modules_and_functions_are_small() -> None:
    sources = _sources()
    assert len(sources) >= 15
    assert {m: len(t.splitlines()) for m, t in sources.items() if len(t.splitlines()) >= MAX_MODULE_LINES} == {}
    assert long_functions(sources) == []


def test_no_history_notes() -> None:
    texts = {str(p.relative_to(REPO)): p.read_text() for p in sorted(ENGINE.rglob("*.py"))}
    for pattern in ("tests/unit/test_census_*.py", "tests/unit/test_hierarchy_*.py"):
        texts.update({str(p.relative_to(REPO)): p.read_text() for p in sorted(REPO.glob(pattern))})
    texts["coordinator/commands/census.py"] = (REPO / "coordinator" / "commands" / "census.py").read_text()
    texts["docs/explanation/census.md"] = (REPO / "docs" / "explanation" / "census.md").read_text()
    texts = {k: v for k, v in texts.items() if not k.endswith("test_hierarchy_layout.py")}
    assert history_notes(texts) == []


PLANTED = {
    f"{PACKAGE}.a": "from securelp.solvers.hierarchy.b import thing\n",
    f"{PACKAGE}.b": (
        "import numpy\n"
        "from securelp.solvers.hierarchy.c import _secret\n"
        "def f():\n"
        "    from securelp.solvers.hierarchy.a import thing\n"
        "    import highspy\n"
        "    return thing\n"
    ),
    f"{PACKAGE}.c": "from securelp.solvers.hierarchy import a\n_secret = 1\n",
}


def test_the_checks_reject_planted_problems() -> None:
    """Negative controls: a cycle a -> b -> c -> a, a function-level import, a private import, a long
    function and a history note are all found."""
    cycle = find_cycle(import_graph(PLANTED))
    assert cycle is not None and set(cycle) == {f"{PACKAGE}.{m}" for m in "abc"}
    problems = import_problems(PLANTED)
    assert any("function f imports securelp.solvers.hierarchy.a" in p for p in problems)
    assert any("private _secret" in p for p in problems)
    assert not any("highspy" in p for p in problems)  # a lazy backend import is allowed
    long = {f"{PACKAGE}.d": "def g():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES + 1)}
    assert long_functions(long) == [f"{PACKAGE}.d.g: {MAX_FUNCTION_LINES + 1} lines"]
    planted = "measured at stop " + "18 (until stop " + "47)"  # spelled in pieces so the repository stays clean
    assert history_notes({"x": planted}) == [f"x: {planted[12:19]!r}", "x: 'until stop'"]


@pytest.mark.parametrize("module", ["chain", "baselines", "hdp", "mechanisms"])
def test_options_are_frozen_dataclasses_not_module_globals(module: str) -> None:
    """Tunables are fields of frozen options dataclasses: assigning one fails, and the engine modules
    hold no mutable module-level knob a test could reconfigure."""
    for cls in (ChainOptions, HdpOptions, HqpOptions, CqpOptions, PostprocessOptions):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cls(), dataclasses.fields(cls)[0].name, None)
    path = ENGINE / module if (ENGINE / module).is_dir() else ENGINE / f"{module}.py"
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    knobs = re.compile(r"^(REBUILD_GROWTH|WARM_BUDGET_\w+|START_CHUNK_SEGMENTS|MAX_TABLE_CELLS|HIGHS_QP_MAX_\w+|"
                       r"MAX_MIP_ROUNDS|MIP_TIME_LIMIT|MAX_LEVEL_SET_SEGMENTS|MAX_BLOCK_SEGMENTS)\s*=", re.MULTILINE)
    assert [f.name for f in files if knobs.search(f.read_text())] == []
