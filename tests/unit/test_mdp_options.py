"""The engines' options objects: validated once with the field named, frozen, and documented in one
generated table (docs/reference/options.md) that this test keeps in step with the code."""

from __future__ import annotations

import dataclasses
import runpy
from pathlib import Path

import pytest

from securelp.solvers.benders import BendersOptions
from securelp.solvers.errors import ConfigError
from securelp.solvers.ldp import LdpOptions
from securelp.solvers.mdp.columns import ColumnGenerationOptions
from securelp.solvers.mdp.columns.options import IPMStartOptions, StartOptions
from securelp.solvers.mdp.ipm import IPMOptions
from securelp.solvers.mdp.records import RecordOptions

RENDERER = Path(__file__).resolve().parents[2] / "docs" / "reference" / "render_options.py"
CLASSES = (RecordOptions, BendersOptions, ColumnGenerationOptions, StartOptions, IPMStartOptions, IPMOptions,
           LdpOptions)


def test_the_committed_options_table_is_what_the_fields_render() -> None:
    """docs/reference/options.md is generated; a field added, renamed or re-documented without
    re-running the script fails here (run ``python docs/reference/render_options.py``)."""
    renderer = runpy.run_path(str(RENDERER))
    assert set(renderer["OPTIONS_CLASSES"]) == set(CLASSES)
    page = renderer["OPTIONS_PAGE"].read_text(encoding="utf-8")
    assert page == renderer["render"](), "docs/reference/options.md is stale: run docs/reference/render_options.py"
    for cls in CLASSES:
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in page
    assert renderer["main"](["--check"]) == 0


def test_a_stale_table_is_detected(tmp_path: Path) -> None:
    """The check can fail: a page with one default edited by hand differs from the rendering."""
    renderer = runpy.run_path(str(RENDERER))
    edited = renderer["render"]().replace("| `pace_window` | `20` |", "| `pace_window` | `25` |")
    assert edited != renderer["render"]()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_says_what_it_trades_and_has_a_rule(cls: type) -> None:
    for f in dataclasses.fields(cls):
        assert len(f.metadata.get("trades", "")) > 10, f"{cls.__name__}.{f.name} has no 'what it trades' line"
        assert f.metadata.get("check") is not None, f"{cls.__name__}.{f.name} is not validated"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_defaults_are_valid_and_every_field_refuses_a_bad_value_by_name(cls: type) -> None:
    default = cls()
    for f in dataclasses.fields(cls):
        bad = "not a value" if not isinstance(getattr(default, f.name), str) else 1.5
        with pytest.raises(ConfigError, match=rf"{cls.__name__}\.{f.name} must be") as caught:
            cls(**{f.name: bad})
        assert caught.value.parameter == f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.__setattr__(dataclasses.fields(cls)[0].name, None)


@pytest.mark.parametrize("cls, field, value", [
    (BendersOptions, "pace_window", -1), (BendersOptions, "in_out_weak_share", 1.5),
    (BendersOptions, "wide_row_ratios", (1e8, -1.0)), (RecordOptions, "in_out", -0.1),
    (ColumnGenerationOptions, "dominance_share", 2.0), (StartOptions, "screen_max_outputs", 0),
    (IPMStartOptions, "max_rounds", 0), (IPMOptions, "step_fraction", 0.0), (LdpOptions, "dense_max", -5),
    (RecordOptions, "benders", ColumnGenerationOptions()), (ColumnGenerationOptions, "ipm_start", IPMOptions()),
])
def test_out_of_range_values_are_refused(cls: type, field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"{cls.__name__}\.{field} must be .*, got") as caught:
        cls(**{field: value})
    assert caught.value.parameter == field


def test_nested_options_reach_the_engine_they_belong_to() -> None:
    """A record decomposition's options carry the Benders engine's; the column decomposition's carry
    the starts', the IPM start's and the IPM's."""
    records = RecordOptions(benders=BendersOptions(pace_window=40))
    assert records.benders.pace_window == 40 and RecordOptions().benders == BendersOptions()
    columns = ColumnGenerationOptions(ipm_start=IPMStartOptions(ipm=IPMOptions(correctors=1)))
    assert columns.ipm_start.ipm.correctors == 1 and columns.starts == StartOptions()
