"""Hierarchy CSV reader: every validation error names what and where."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from securelp.solvers.errors import InputError, ResourceError
from securelp.solvers.hierarchy.counts_csv import counts_csv_text, read_counts_csv, read_noisy_csv
from securelp.solvers.hierarchy.errors import CountsFileError, HierarchyError, SizeDomainError
from securelp.solvers.hierarchy.noise import parse_epsilon

HEADER = "level,region_id,parent_id,size,count\n"
GOOD = HEADER + "1,R,,1,3\n1,R,,2,1\n2,A,R,1,2\n2,A,R,2,1\n2,B,R,1,1\n"
TAXI = Path(__file__).resolve().parents[1] / "data" / "census" / "kuo2018_taxi_hierarchy_sizehist.csv"


def _write(tmp_path: Path, text: str, name: str = "d.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_file_round_trips(tmp_path: Path) -> None:
    data = read_counts_csv(_write(tmp_path, GOOD))
    h = data.hierarchy
    assert h.ids[0] == "R" and h.depth == 2 and data.total == 4
    assert data.counts.tolist() == [[3, 1], [2, 1], [1, 0]]
    again = read_counts_csv(_write(tmp_path, counts_csv_text(h, data.counts), "e.csv"))
    assert np.array_equal(again.counts, data.counts)


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD.replace("2,B,R,1,1", "2,B,R,1,2"), "children of region 'R'"),
        (GOOD.replace("2,B,R,1,1", "2,B,R,1,-1") , "non-negative integer"),
        (GOOD.replace("2,B,R,1,1", "2,B,R,1,1.5"), "line 6"),
        (GOOD + "1,Q,,1,0\n", "exactly one root"),
        (GOOD + "2,C,X,1,0\n", "orphan"),
        (HEADER + "1,R,,1,1\n2,A,B,1,1\n2,B,A,1,1\n", "cycle"),
        (HEADER + "1,R,,1,2\n2,A,R,1,1\n2,B,R,1,1\n3,C,A,1,1\n", "same depth"),
        (GOOD.replace("2,A,R,2,1", "3,A,R,2,1"), "level"),
        (GOOD.replace("2,A,R,2,1", "2,A,B,2,1"), "parent_id"),
        (GOOD + "2,B,R,1,0\n", "duplicate"),
        (GOOD.replace("level,region_id", "lvl,region_id"), "header"),
        (GOOD.replace("2,A,R,2,1", "2,A,R,0,1"), "size must be >= 1"),
        (HEADER, "no data rows"),
        (GOOD.replace("2,A,R,2,1", "2,A,R,2"), "5 columns"),
    ],
)
def test_validation_errors(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        read_counts_csv(_write(tmp_path, text))
    assert needle in str(info.value)
    assert isinstance(info.value, (CountsFileError, HierarchyError))


def test_validation_errors_carry_their_fields(tmp_path: Path) -> None:
    """The typed errors say where (file, line) and which regions, as fields and not only as text."""
    path = _write(tmp_path, GOOD.replace("2,B,R,1,1", "2,B,R,1,1.5"))
    with pytest.raises(CountsFileError) as info:
        read_counts_csv(path)
    assert info.value.source == str(path) and info.value.line == 6 and "must be an integer" in info.value.problem
    with pytest.raises(HierarchyError) as tree:
        read_counts_csv(_write(tmp_path, GOOD + "2,C,X,1,0\n"))
    assert tree.value.regions == ["C"]
    with pytest.raises(SizeDomainError) as sizes:
        read_counts_csv(_write(tmp_path, GOOD), max_size=1)
    assert (sizes.value.largest, sizes.value.max_size) == (2, 1) and "--max-size" not in str(sizes.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^counts file .*nope\.csv does not exist$"):
        read_counts_csv(tmp_path / "nope.csv")
    # a device or a directory is not "not found": it is named for what it is
    with pytest.raises(InputError, match=r"^counts file /dev/null is not a regular file"):
        read_counts_csv("/dev/null")
    with pytest.raises(InputError, match=r"^noisy counts file .* is a directory, not a file$"):
        read_noisy_csv(tmp_path)


def test_huge_max_size_is_a_resource_error(tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match="exceeds the limit"):
        read_counts_csv(_write(tmp_path, GOOD), max_size=10**9)


def test_noisy_reader_accepts_negative_and_decimals(tmp_path: Path) -> None:
    text = GOOD.replace(",count", ",noisy_count").replace("2,B,R,1,1", "2,B,R,1,-2.5")
    noisy = read_noisy_csv(_write(tmp_path, text))
    assert noisy.values.dtype == np.float64 and noisy.values[2, 0] == -2.5
    with pytest.raises(InputError, match="must be a number"):
        read_noisy_csv(_write(tmp_path, text.replace("-2.5", "abc"), "f.csv"))


@pytest.mark.parametrize("text, ok", [("0.1", Fraction(1, 10)), ("1", Fraction(1)), ("0", None), ("-1", None), ("x", None)])
def test_parse_epsilon(text: str, ok: Fraction | None) -> None:
    if ok is None:
        with pytest.raises(InputError):
            parse_epsilon(text)
    else:
        assert parse_epsilon(text) == ok


def test_taxi_hierarchy_reads_and_is_consistent() -> None:
    data = read_counts_csv(TAXI)
    assert data.hierarchy.size == 31 and data.hierarchy.depth == 3
    assert data.max_size == 4919 and data.total == 360_872
