"""Optional dependencies: a missing extra is one line naming it, exit code 4, before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from securelp.coordinator.cli import main
from securelp.solvers.errors import ConfigError, ExitCode
from securelp.solvers.extras import require_extra


def test_mdp_plot_without_matplotlib_names_the_plot_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    report = tmp_path / "r.json"
    rc = main(["mdp", "--rows", "3", "--cols", "3", "--plot", str(tmp_path / "p.png"), "--json", str(report)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == ExitCode.CONFIG and len(err) == 1
    assert "needs the Python package matplotlib" in err[0] and "pip install 'securelp[plot]'" in err[0]
    assert not report.exists()  # refused before the solve


def test_the_control_with_matplotlib_writes_the_plot(tmp_path: Path) -> None:
    assert main(["mdp", "--rows", "3", "--cols", "3", "--plot", str(tmp_path / "p.png"), "--quiet"]) == 0
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_text_embeddings_without_tokenizers_name_the_text_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from securelp.solvers.mdp.datasets.text import MiniLMEncoder

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ConfigError, match=r"pip install 'securelp\[text\]'"):
        MiniLMEncoder(zip_path=Path("unused.zip"))


def test_a_broken_dependency_of_an_extra_is_not_mistaken_for_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ImportError of another module inside the extra's import is re-raised as it is."""
    def broken(name: str) -> None:
        raise ImportError("libsomething.so: cannot open shared object file", name="libsomething")

    monkeypatch.setattr("importlib.import_module", broken)
    with pytest.raises(ImportError, match="libsomething"):
        require_extra("safetensors", "a test")
