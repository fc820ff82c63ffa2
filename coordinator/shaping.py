"""Shaped links: a user-space TCP proxy that gives a loopback connection the latency, jitter and
bandwidth of a real network, and can lose a connection mid-transfer.

Machines without ``tc netem`` (containers, CI runners) cannot shape a link in the kernel. A
:class:`ShapingProxy` listens on 127.0.0.1 and forwards every connection to its target through two
pumps, one per direction. Each chunk read at time ``t`` (at most :data:`CHUNK_BYTES`) leaves the
proxy at

    start = max(t, link_free)          link_free = start + 8 * len(chunk) / bandwidth
    deliver = max(last_deliver, link_free + latency + U(0, jitter))

so a direction is a FIFO queue served at ``bandwidth`` followed by a delay line of ``latency``
plus jitter (never reordering the byte stream, as TCP would not). ``cut_after_bytes`` resets a
connection once that many bytes crossed it (both directions counted), and :meth:`ShapingProxy.set_down`
(or ``down_after_s``) takes the whole link down: open connections are reset and new ones refused,
as a pulled cable or a failed route would do. gRPC reconnects through the proxy like through any
network path, and TLS passes through untouched (the proxy never sees plaintext).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields

from securelp.solvers.errors import InputError

log = logging.getLogger(__name__)

#: bytes a pump reads at once; a smaller chunk shapes more smoothly at a higher cost per byte
CHUNK_BYTES = 64 * 1024

_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_SIZE_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


@dataclass(frozen=True)
class LinkShape:
    """How one link behaves, each direction alike.

    Parameters
    ----------
    latency_s : one-way delay added to every byte.
    jitter_s : extra delay drawn uniformly from [0, jitter_s] per chunk (the order is kept).
    bandwidth_bps : bits per second each direction carries; None means unlimited.
    cut_after_bytes : reset each connection once this many bytes crossed it; None: never.
    down_after_s : the link goes down this many seconds after the proxy starts; None: never.
    """

    latency_s: float = 0.0
    jitter_s: float = 0.0
    bandwidth_bps: float | None = None
    cut_after_bytes: int | None = None
    down_after_s: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not (value >= 0 and value < float("inf")):
                raise InputError(f"link {f.name} must be a finite non-negative number, got {value!r}")
        if self.bandwidth_bps is not None and self.bandwidth_bps <= 0:
            raise InputError(f"link bandwidth must be positive, got {self.bandwidth_bps!r} bit/s")

    @property
    def is_plain(self) -> bool:
        """True when the shape changes nothing (no proxy is needed)."""
        return self == LinkShape()

    def describe(self) -> str:
        """A short human form, e.g. ``latency 50 ms, bandwidth 10 Mbit/s``."""
        parts = []
        if self.latency_s:
            parts.append(f"latency {self.latency_s * 1e3:g} ms")
        if self.jitter_s:
            parts.append(f"jitter {self.jitter_s * 1e3:g} ms")
        if self.bandwidth_bps:
            parts.append(f"bandwidth {self.bandwidth_bps / 1e6:g} Mbit/s")
        if self.cut_after_bytes is not None:
            parts.append(f"cut after {self.cut_after_bytes:,} B")
        if self.down_after_s is not None:
            parts.append(f"down after {self.down_after_s:g} s")
        return ", ".join(parts) or "unshaped"


def _quantity(text: str, units: Mapping[str, float], what: str, item: str) -> float:
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not found or found.group(2).lower() not in units:
        raise InputError(f"--link {item!r}: {text!r} is not a {what} (units: {', '.join(units)})")
    return float(found.group(1)) * units[found.group(2).lower()]


_KEYS = {
    "latency": ("latency_s", _TIME_UNITS, "duration"),
    "jitter": ("jitter_s", _TIME_UNITS, "duration"),
    "bandwidth": ("bandwidth_bps", _RATE_UNITS, "rate"),
    "cut": ("cut_after_bytes", _SIZE_UNITS, "size"),
    "down": ("down_after_s", _TIME_UNITS, "duration"),
}


def parse_link_shape(text: str, base: LinkShape | None = None) -> LinkShape:
    """``latency=50ms,jitter=5ms,bandwidth=10mbit,cut=2MB,down=3s`` (any subset) on top of ``base``."""
    values = {f.name: getattr(base or LinkShape(), f.name) for f in fields(LinkShape)}
    seen: set[str] = set()
    for item in (p.strip() for p in text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key.strip().lower() not in _KEYS:
            raise InputError(f"--link {text!r}: {item!r} is not KEY=VALUE with KEY one of {', '.join(_KEYS)}")
        if key.strip().lower() in seen:
            raise InputError(f"--link {text!r}: {key.strip()} is given twice")
        seen.add(key.strip().lower())
        name, units, what = _KEYS[key.strip().lower()]
        amount = _quantity(value, units, what, item)
        values[name] = int(amount) if name == "cut_after_bytes" else amount
    return LinkShape(**values)


def parse_link_specs(specs: Sequence[str], party_ids: Sequence[str]) -> dict[str, LinkShape]:
    """Each party's link from ``--link`` options: ``SHAPE`` applies to every party, ``ID:SHAPE`` to
    one (on top of the common shape, whatever the order given).

    Raises
    ------
    InputError
        A malformed shape, or an ID that is not one of ``party_ids``.
    """
    common = LinkShape()
    own: dict[str, list[str]] = {}
    for spec in specs:
        head, sep, rest = spec.partition(":")
        if sep and "=" not in head:
            if head not in party_ids:
                raise InputError(f"--link {spec!r}: {head!r} is not a party of this session "
                                 f"({', '.join(party_ids)})")
            if not rest.strip():
                raise InputError(f"--link {spec!r}: no shape after {head}: (e.g. {head}:latency=50ms)")
            own.setdefault(head, []).append(rest)
        else:
            common = parse_link_shape(spec, common)
    shapes = {}
    for pid in party_ids:
        shape = common
        for text in own.get(pid, []):
            shape = parse_link_shape(text, shape)
        shapes[pid] = shape
    return shapes


class _Direction:
    """The delivery schedule of one direction of one connection."""

    def __init__(self, shape: LinkShape, rng: random.Random) -> None:
        self.shape = shape
        self.rng = rng
        self.link_free = 0.0
        self.last_deliver = 0.0

    def deliver_at(self, now: float, size: int) -> float:
        s = self.shape
        start = max(now, self.link_free)
        self.link_free = start + (8.0 * size / s.bandwidth_bps if s.bandwidth_bps else 0.0)
        jitter = self.rng.uniform(0.0, s.jitter_s) if s.jitter_s else 0.0
        self.last_deliver = max(self.last_deliver, self.link_free + s.latency_s + jitter)
        return self.last_deliver


class ShapingProxy:
    """A shaped TCP proxy from ``127.0.0.1:<port>`` to ``target`` (``host:port``), on its own thread.

    Use as a context manager; :attr:`address` is where to connect. ``bytes_forwarded`` counts the
    bytes that crossed it (both directions), ``connections`` the connections accepted.
    """

    def __init__(self, target: str, shape: LinkShape, *, name: str = "", seed: int | None = None) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host.strip("[]") or "127.0.0.1", int(port))
        self.shape = shape
        self.name = name or target
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"securelp-link-{self.name}",
                                        daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._down = False
        self.address = ""
        self.bytes_forwarded = 0
        self.connections = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> str:
        """Listen on a free loopback port; returns ``127.0.0.1:<port>``."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0, family=socket.AF_INET), self._loop).result(10)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        if self.shape.down_after_s is not None:
            self._loop.call_soon_threadsafe(self._loop.call_later, self.shape.down_after_s, self._go_down)
        log.info("shaped link %s: %s -> %s:%d (%s)", self.name, self.address, *self._target, self.shape.describe())
        return self.address

    def close(self) -> None:
        """Stop listening, reset every connection and end the thread."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            self._go_down()
            if self._server is not None:
                self._server.close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> ShapingProxy:  # noqa: PYI034 - typing.Self needs Python 3.11
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_down(self) -> None:
        """Take the link down now: open connections are reset, new ones refused."""
        asyncio.run_coroutine_threadsafe(self._set_down(), self._loop).result(10)

    async def _set_down(self) -> None:
        self._go_down()

    def _go_down(self) -> None:
        if not self._down:
            log.info("shaped link %s: down", self.name)
        self._down = True
        for writer in list(self._writers):
            _reset(writer)
        self._writers.clear()

    # -- forwarding ------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._down:
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            _reset(writer)
            return
        self.connections += 1
        ends = (writer, up_writer)
        self._writers.update(ends)
        crossed = [0]
        try:
            await asyncio.gather(self._pump(reader, up_writer, crossed, ends),
                                 self._pump(up_reader, writer, crossed, ends), return_exceptions=True)
        except asyncio.CancelledError:
            # the proxy is closing: end this connection quietly (a cancelled connection task is
            # otherwise logged by asyncio's stream protocol as an error)
            for end in ends:
                _reset(end)
        for w in ends:
            self._writers.discard(w)
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, crossed: list[int],
                    ends: tuple[asyncio.StreamWriter, ...]) -> None:
        """Forward one direction until its EOF (passed on as a half-close), a cut or the link going
        down (both ends reset); a chunk leaves at its scheduled time (see the module docstring)."""
        loop = asyncio.get_running_loop()
        schedule = _Direction(self.shape, self._rng)
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            while (item := await queue.get()) is not None:
                at, data = item
                delay = at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
                self.bytes_forwarded += len(data)

        sender = asyncio.ensure_future(deliver())
        try:
            while not self._down:
                data = await reader.read(CHUNK_BYTES)
                if not data:
                    break
                cut = self.shape.cut_after_bytes
                if cut is not None and crossed[0] + len(data) > cut:
                    keep = max(0, cut - crossed[0])
                    if keep:
                        queue.put_nowait((schedule.deliver_at(loop.time(), keep), data[:keep]))
                    crossed[0] = cut
                    queue.put_nowait(None)
                    await sender
                    log.info("shaped link %s: connection cut after %d bytes", self.name, cut)
                    for w in ends:
                        _reset(w)
                    return
                crossed[0] += len(data)
                queue.put_nowait((schedule.deliver_at(loop.time(), len(data)), data))
            queue.put_nowait(None)
            await sender
            if not self._down and writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            for w in ends:
                _reset(w)
        finally:
            sender.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a lost link looks to both ends."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        writer.transport.abort()
    except OSError:
        pass


def start_proxies(targets: Mapping[str, str], shapes: Mapping[str, LinkShape], *,
                  seed: int | None = None) -> dict[str, ShapingProxy]:
    """One started proxy per party whose shape is not plain; the caller closes them."""
    proxies: dict[str, ShapingProxy] = {}
    try:
        for i, (pid, target) in enumerate(targets.items()):
            shape = shapes.get(pid, LinkShape())
            if not shape.is_plain:
                proxies[pid] = ShapingProxy(target, shape, name=pid, seed=None if seed is None else seed + i)
                proxies[pid].start()
    except BaseException:
        for proxy in proxies.values():
            proxy.close()
        raise
    return proxies



@contextlib.contextmanager
def shaped_addresses(targets: Mapping[str, str], shapes: Mapping[str, LinkShape] | None, *,
                     seed: int | None = None) -> Iterator[dict[str, str]]:
    """Where to connect instead of each target: a started proxy's address for each party whose
    shape is not plain, the target itself otherwise; the proxies are closed on exit."""
    proxies = start_proxies(targets, shapes or {}, seed=seed)
    try:
        yield {pid: proxies[pid].address if pid in proxies else target for pid, target in targets.items()}
    finally:
        for proxy in proxies.values():
            proxy.close()
