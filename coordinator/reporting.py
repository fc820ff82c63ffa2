"""Writing machine-readable reports: atomic (never half-written), NaN-free JSON."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

import numpy as np

from securelp.solvers.files import check_distinct, check_writable, write_atomically

__all__ = ["check_distinct", "check_writable", "human_stream", "quiet_output", "write_json_report"]


def _clean(obj: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into strict-JSON values."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def write_json_report(path: str | os.PathLike[str], report: dict[str, Any]) -> None:
    """Write ``report`` as JSON to ``path`` atomically; ``-`` means standard output.

    Non-finite floats become ``null``. The file appears complete or not at all
    (written to a temporary file in the same directory, then renamed).
    """
    text = json.dumps(_clean(report), indent=2, sort_keys=False, allow_nan=False) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomically(path, text, what="report ")


def quiet_output(json_path: str | None) -> bool:
    """True when progress output must stay quiet: JSON to stdout, or no terminal."""
    return json_path == "-" or not sys.stderr.isatty()


def human_stream(json_path: str | None) -> Any:
    """Where the human-readable report goes: stderr when the JSON report takes stdout."""
    return sys.stderr if json_path == "-" else sys.stdout
