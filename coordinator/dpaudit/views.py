"""What a coordinator sees, as rows of numbers: views, their flattening and where they come from.

A *view* is everything one run of a protocol shows the coordinator: the messages it received
(every field of every message), what it computed and published (the release and its report).
One view is a mapping ``name -> value`` (a number, a bool, a string, or an array); a batch of
runs is a :class:`ViewBatch`, a ``runs x features`` float matrix with one name per column, the
input of the distinguishing test (:mod:`.harness`).

Flattening rules (the same on both neighbouring inputs, so they add no distinguishability):
arrays become one feature per cell (``name[i,j]``); bools 0/1; strings the CRC-32 of their
UTF-8 text (a categorical code); a field missing from some runs becomes 0 there plus a
``name#present`` indicator. Wall-clock timings are not part of a view (names in
:data:`TIMING_FIELDS`): on a shared machine they measure the load, not the data, and would make a
correct protocol look distinguishable when D0's and D1's runs meet different loads.

A view source (:class:`ViewSource`) produces the runs of one input: an in-process protocol adapter
(:mod:`.census`, :mod:`.ldp`, :mod:`.lp`) or recorded views (:class:`RecordedViews`, a JSON-lines
file of views written by :func:`write_views` or by any transport that records what the
coordinator saw; :class:`TranscriptViews`, securelp session transcripts).
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.randomness import SecureRandom

__all__ = ["TIMING_FIELDS", "RecordedViews", "TranscriptViews", "ViewBatch", "ViewSource", "flatten_views",
           "transcript_view", "write_views"]

#: field names (the last part of a view's key) left out of every view: wall-clock measurements
TIMING_FIELDS = frozenset({"time_s", "compute_seconds", "seconds", "lp_time_s", "mip_time_s", "elapsed_s"})

View = Mapping[str, Any]


@dataclass(frozen=True)
class ViewBatch:
    """Runs of one protocol as a matrix: ``values[run, feature]``, one name per feature."""

    names: tuple[str, ...]
    values: np.ndarray

    @property
    def runs(self) -> int:
        """Number of runs (rows)."""
        return int(self.values.shape[0])


class ViewSource(Protocol):
    """Where the runs of one neighbouring pair come from.

    ``claimed_eps`` is the protocol's claim for this pair (None: the protocol claims no DP),
    ``describe()`` what D0, D1 and the view are (for the report), and ``views(side, runs, rng)``
    returns ``runs`` views of input ``side`` (0: D0, 1: D1), each drawn with fresh randomness from
    ``rng``.
    """

    protocol: str
    claimed_eps: float | None

    def describe(self) -> dict[str, Any]: ...

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]: ...


def _leaf_name(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _items(view: View) -> Iterable[tuple[str, float]]:
    for key, value in view.items():
        if _leaf_name(key) in TIMING_FIELDS:
            continue
        if isinstance(value, str):
            yield key, float(zlib.crc32(value.encode("utf-8")))
        elif isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
            yield key, float(value)
        elif value is None:
            continue
        else:
            arr = np.asarray(value, dtype=np.float64)
            if arr.ndim == 0:
                yield key, float(arr)
                continue
            for idx in np.ndindex(arr.shape):
                yield f"{key}[{','.join(map(str, idx))}]", float(arr[idx])


def flatten_views(views: Sequence[View], names: Sequence[str] | None = None) -> ViewBatch:
    """A :class:`ViewBatch` of ``views``; with ``names``, exactly those features in that order
    (missing ones 0), so two batches line up column by column.

    Raises
    ------
    InputError
        No views, or a value that is neither a number, a string nor an array of numbers.
    """
    if not views:
        raise InputError("no views to flatten: the audit needs at least one run per input")
    rows: list[dict[str, float]] = []
    for i, view in enumerate(views):
        try:
            rows.append(dict(_items(view)))
        except (TypeError, ValueError) as exc:
            raise InputError(f"view {i} holds a value that is not a number, string or numeric array: {exc}") from exc
    if names is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        base = list(seen)
        partial = [n for n in base if any(n not in row for row in rows)]
        names = base + [f"{n}#present" for n in partial]
    values = np.zeros((len(rows), len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        if name.endswith("#present"):
            inner = name[: -len("#present")]
            values[:, j] = [1.0 if inner in row else 0.0 for row in rows]
        else:
            values[:, j] = [row.get(name, 0.0) for row in rows]
    values[~np.isfinite(values)] = 0.0
    return ViewBatch(tuple(names), values)


def write_views(path: str | os.PathLike[str], views: Sequence[tuple[int, View]], meta: Mapping[str, Any]) -> None:
    """Write ``(side, view)`` pairs as JSON lines (a first line ``{"meta": ...}``), atomically.

    The file holds what the coordinator saw in every run; for a simulation with a planted leak it
    holds the planted truth too.
    """
    from securelp.solvers.files import write_atomically

    def clean(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, (np.integer,)):
            return int(value)
        if isinstance(value, (np.floating,)):
            return float(value)
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    lines = [json.dumps({"meta": dict(meta)}, default=clean)]
    lines += [json.dumps({"input": int(side), "view": {k: clean(v) for k, v in view.items()}}, default=clean)
              for side, view in views]
    write_atomically(path, "\n".join(lines) + "\n", what="views ")


class RecordedViews:
    """Views read from a JSON-lines file (:func:`write_views`): the audit of recorded runs.

    ``runs`` asked of a side are the next ones of that input in the file; asking for more than it
    holds is an error that says how many there are. The claim comes from the file's ``meta``
    (``claimed_eps``; absent or null: no claim) unless given.
    """

    def __init__(self, path: str | os.PathLike[str], claimed_eps: float | None = None) -> None:
        self.path = str(path)
        sides: dict[int, list[View]] = {0: [], 1: []}
        meta: dict[str, Any] = {}
        try:
            with open(self.path, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise InputError(f"{self.path}:{lineno}: not a JSON line ({exc.msg}); a views file has one "
                                         "JSON object per line") from exc
                    if "meta" in obj:
                        meta.update(obj["meta"])
                        continue
                    side = obj.get("input")
                    if side not in (0, 1) or not isinstance(obj.get("view"), dict):
                        raise InputError(f"{self.path}:{lineno}: a view line needs \"input\": 0 or 1 and a \"view\" "
                                         "object")
                    sides[side].append(obj["view"])
        except OSError as exc:
            raise InputError(f"cannot read the views file {self.path}: {exc.strerror or exc}") from exc
        self._sides = sides
        self._next = {0: 0, 1: 0}
        self.meta = meta
        self.protocol = str(meta.get("protocol", "recorded"))
        claim = claimed_eps if claimed_eps is not None else meta.get("claimed_eps")
        self.claimed_eps = None if claim is None else float(claim)

    def available(self, side: int) -> int:
        """Views of input ``side`` in the file."""
        return len(self._sides[side])

    def describe(self) -> dict[str, Any]:
        return {"source": "recorded views", "file": self.path, **{k: v for k, v in self.meta.items()
                                                                  if k not in ("claimed_eps",)}}

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]:
        start = self._next[side]
        if start + runs > len(self._sides[side]):
            raise InputError(f"{self.path} holds {len(self._sides[side])} views of input D{side}; the audit asked for "
                             f"{start + runs}: lower --runs or record more runs")
        self._next[side] = start + runs
        return self._sides[side][start:start + runs]


def _message_features(msg: Any, prefix: str, out: dict[str, Any]) -> None:
    from google.protobuf.descriptor import FieldDescriptor

    from securelp.protos.codec import matrix_from_pb, vector_from_pb

    for field, value in msg.ListFields():
        name = f"{prefix}.{field.name}"
        repeated = bool(field.is_repeated)
        if field.message_type is not None:
            items = list(value) if repeated else [value]
            for i, item in enumerate(items):
                key = f"{name}[{i}]" if repeated else name
                kind = field.message_type.full_name
                if kind == "securelp.v1.Matrix":
                    mat = matrix_from_pb(item, what=key)
                    out[key] = np.asarray(mat.toarray() if hasattr(mat, "toarray") else mat, dtype=np.float64)
                elif kind == "securelp.v1.Vector":
                    out[key] = vector_from_pb(item, what=key)
                else:
                    _message_features(item, key, out)
        elif field.type == FieldDescriptor.TYPE_BYTES:
            # opaque bytes (keys, certificates, ring shares): their sizes only
            out[f"{name}#bytes"] = float(sum(len(v) for v in value) if repeated else len(value))
        elif repeated:
            out[name] = np.asarray([zlib.crc32(v.encode()) if isinstance(v, str) else v for v in value], dtype=float)
        else:
            out[name] = value


def transcript_view(transcript: Any) -> dict[str, Any]:
    """The view of one securelp session transcript (:class:`securelp.coordinator.transcript.Transcript`):
    every field of every message the coordinator sent or received, keyed by party, message type and
    its occurrence (``party1.MaskedBlock#0.c_masked``), plus each message's size in bytes. Session
    ids (fresh random strings) are left out."""
    out: dict[str, Any] = {}
    seen: dict[tuple[str, str], int] = {}
    for record in transcript.records:
        msg = record.message()
        kind = msg.DESCRIPTOR.name
        n = seen.get((record.party_id, kind), 0)
        seen[(record.party_id, kind)] = n + 1
        prefix = f"{record.party_id}.{kind}#{n}"
        out[f"{prefix}#size"] = float(record.size)
        fields: dict[str, Any] = {}
        _message_features(msg, prefix, fields)
        out.update({k: v for k, v in fields.items() if _leaf_name(k) != "session_id"})
    return out


class TranscriptViews:
    """Views from securelp session transcript files (``--transcript``), one file per run: the audit
    of sessions recorded over any transport."""

    protocol = "lp"

    def __init__(self, d0: Sequence[str | os.PathLike[str]], d1: Sequence[str | os.PathLike[str]],
                 claimed_eps: float | None = None) -> None:
        self._files = {0: [str(p) for p in d0], 1: [str(p) for p in d1]}
        self._next = {0: 0, 1: 0}
        self.claimed_eps = claimed_eps

    def describe(self) -> dict[str, Any]:
        return {"source": "transcript files", "runs_d0": len(self._files[0]), "runs_d1": len(self._files[1])}

    def views(self, side: int, runs: int, rng: SecureRandom) -> list[View]:
        from securelp.coordinator.transcript import read_transcript

        start = self._next[side]
        files = self._files[side]
        if start + runs > len(files):
            raise InputError(f"{len(files)} transcripts of input D{side} were given; the audit asked for {start + runs}")
        self._next[side] = start + runs
        return [transcript_view(read_transcript(p)) for p in files[start:start + runs]]
