"""Regenerate every benchmark table in the docs from ``benchmarks/results/*.jsonl``.

    python -m benchmarks.render           # rewrite every marked table
    python -m benchmarks.render --check   # exit 1 when a committed table differs from its results

A table lives in a docs page between two markers (:func:`begin_marker`, :func:`end_marker`):
``<!-- benchmarks.render: NAME -->`` and ``<!-- end of benchmarks.render: NAME -->``; :data:`TABLES`
says which function of which benchmark renders it from which results file. Nothing between the
markers is edited by hand: tests/unit/test_benchmark_results.py runs the check.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results import REPO, load, results_path
from securelp.solvers.errors import InputError
from securelp.solvers.files import write_atomically


def begin_marker(name: str) -> str:
    """The line that opens table ``name`` in its page."""
    return f"<!-- benchmarks.render: {name} -->"


def end_marker(name: str) -> str:
    """The line that closes table ``name`` in its page."""
    return f"<!-- end of benchmarks.render: {name} -->"


@dataclass(frozen=True)
class Table:
    """One generated table: its page, the function that renders it, and the results it reads."""

    name: str
    page: str  #: relative to the repository
    module: str  #: ``benchmarks.bench_X``
    function: str  #: ``function(records: list[dict]) -> str`` of that module
    results: str  #: ``benchmarks/results/<results>.jsonl``
    begin: str | None = None  #: a page's own markers, where it keeps them (threat_model.md's leakage table)
    end: str | None = None

    @property
    def markers(self) -> tuple[str, str]:
        return (self.begin or begin_marker(self.name), self.end or end_marker(self.name))

    def render(self) -> str:
        records = load(results_path(self.results))
        if not records:
            raise InputError(f"{results_path(self.results)} holds no results: run python -m {self.module} first")
        fn: Callable[[list[dict[str, Any]]], str] = getattr(importlib.import_module(self.module), self.function)
        return fn(records)


#: every generated table, in the order of docs/BENCHMARKS.md
TABLES = (
    Table("pplp", "docs/benchmarks/pplp.md", "benchmarks.bench_pplp", "table", "pplp"),
    Table("netlib", "docs/benchmarks/pplp.md", "benchmarks.bench_netlib", "table", "netlib"),
    Table("grpc", "docs/benchmarks/grpc.md", "benchmarks.bench_grpc", "table", "grpc"),
    Table("links", "docs/benchmarks/grpc.md", "benchmarks.bench_links", "table", "links"),
    Table("dpaudit", "docs/benchmarks/privacy-audit.md", "benchmarks.bench_dpaudit", "table", "dpaudit"),
    Table("secagg", "docs/benchmarks/secagg.md", "benchmarks.bench_secagg", "table", "secagg"),
    Table("mpyc", "docs/benchmarks/mpc.md", "benchmarks.bench_mpyc", "render_table", "mpyc"),
    Table("leakage", "docs/threat_model.md", "benchmarks.bench_leakage", "table", "leakage",
          "<!-- leakage-table:begin -->", "<!-- leakage-table:end -->"),
    Table("leakage-heldout", "docs/threat_model.md", "benchmarks.bench_leakage", "heldout_table", "leakage",
          "<!-- heldout-table:begin -->", "<!-- heldout-table:end -->"),
    Table("leakage-hit-rates", "docs/threat_model.md", "benchmarks.bench_leakage", "hit_rates_table", "leakage",
          "<!-- hit-rates:begin -->", "<!-- hit-rates:end -->"),
    Table("decoys", "docs/threat_model.md", "benchmarks.bench_decoys", "table", "decoys"),
    Table("mdp", "docs/benchmarks/mdp.md", "benchmarks.bench_mdp", "table", "mdp"),
    Table("ldp-scale", "docs/benchmarks/ldp.md", "benchmarks.bench_ldp", "table_scale", "ldp"),
    Table("ldp-fig1", "docs/benchmarks/ldp.md", "benchmarks.bench_ldp", "table_fig1", "ldp"),
    Table("ldp-baselines", "docs/benchmarks/ldp.md", "benchmarks.bench_ldp", "table_baselines", "ldp"),
    Table("census-taxi", "docs/benchmarks/census.md", "benchmarks.bench_census", "table_taxi", "census"),
    Table("census-scale", "docs/benchmarks/census.md", "benchmarks.bench_census", "table_census", "census"),
    Table("census-attack", "docs/benchmarks/census.md", "benchmarks.bench_census", "table_attack", "census"),
    Table("federated-census", "docs/howto/federated-census.md", "benchmarks.bench_federated", "table_census",
          "federated"),
    Table("federated-ldp", "docs/howto/ldp-collection.md", "benchmarks.bench_federated", "table_ldp", "federated"),
)


def replace_section(text: str, begin: str, end: str, body: str, where: str) -> str:
    """``text`` with what lies between the lines ``begin`` and ``end`` replaced by ``body``.

    Raises
    ------
    InputError
        The markers are missing or out of order (naming ``where`` and the lines to add).
    """
    if begin not in text or end not in text or text.index(begin) > text.index(end):
        raise InputError(f"{where} lacks the table markers; add the line {begin!r} and, below it, {end!r} where "
                         "the table goes")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.rstrip()}\n{end}{tail}"


def rendered_pages(tables: tuple[Table, ...] = TABLES) -> dict[Path, str]:
    """Every page with its tables rendered from the results files (nothing written)."""
    pages: dict[Path, str] = {}
    for t in tables:
        path = REPO / t.page
        text = pages.get(path)
        if text is None:
            text = path.read_text(encoding="utf-8")
        begin, end = t.markers
        pages[path] = replace_section(text, begin, end, t.render(), t.page)
    return pages


def main(argv: list[str] | None = None) -> int:
    """Rewrite every table (``--check``: only compare, exit code 1 naming the stale pages)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed pages instead of writing")
    args = parser.parse_args(argv)
    try:
        pages = rendered_pages()
    except InputError as exc:
        print(f"benchmarks.render: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    stale = [p for p, text in pages.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(REPO)} is stale: run python -m benchmarks.render", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        write_atomically(p, pages[p], what="benchmark page ")
        print(f"rewrote {p.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
