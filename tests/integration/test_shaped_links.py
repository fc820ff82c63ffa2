"""The shaping proxy delays, throttles and cuts a loopback TCP connection as its shape says, and the
``--link`` syntax parses into per-party shapes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from securelp.coordinator.shaping import LinkShape, ShapingProxy, parse_link_shape, parse_link_specs
from securelp.solvers.errors import InputError

pytestmark = pytest.mark.integration


@pytest.fixture()
def echo_server() -> Iterator[str]:
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join(2)
    srv.close()


def _echo(conn: socket.socket) -> None:
    try:
        while data := conn.recv(65536):
            conn.sendall(data)
    except OSError:
        pass
    finally:
        conn.close()


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _round_trip(sock: socket.socket) -> float:
    start = time.monotonic()
    sock.sendall(b"x")
    assert sock.recv(1) == b"x"
    return time.monotonic() - start


def _echo_seconds(sock: socket.socket, size: int) -> float:
    start = time.monotonic()
    threading.Thread(target=sock.sendall, args=(b"y" * size,), daemon=True).start()
    got = 0
    while got < size:
        chunk = sock.recv(1 << 20)
        assert chunk, "connection closed early"
        got += len(chunk)
    return time.monotonic() - start


def test_latency_adds_twice_the_one_way_delay_per_round_trip(echo_server):
    with ShapingProxy(echo_server, LinkShape()) as plain, ShapingProxy(echo_server, LinkShape(latency_s=0.08)) as slow, \
            _connect(plain.address) as a, _connect(slow.address) as b:
        base = min(_round_trip(a) for _ in range(3))
        shaped = min(_round_trip(b) for _ in range(3))
    assert 0.16 <= shaped <= 0.16 + base + 0.08, (base, shaped)


def test_bandwidth_limits_the_transfer_time(echo_server):
    size = 1_000_000  # 8 Mbit each way, pipelined through the echo: about 8 / 20 = 0.4 s at 20 Mbit/s
    with ShapingProxy(echo_server, LinkShape(bandwidth_bps=20e6)) as proxy, _connect(proxy.address) as sock:
        seconds = _echo_seconds(sock, size)
    assert 0.38 <= seconds <= 1.5, seconds
    with ShapingProxy(echo_server, LinkShape()) as proxy, _connect(proxy.address) as sock:
        assert _echo_seconds(sock, size) < 0.3  # control: unshaped is much faster


def test_jitter_never_reorders_the_stream(echo_server):
    with ShapingProxy(echo_server, LinkShape(latency_s=0.005, jitter_s=0.02), seed=1) as proxy, \
            _connect(proxy.address) as sock:
        payload = bytes(range(256)) * 2000
        threading.Thread(target=sock.sendall, args=(payload,), daemon=True).start()
        got = b""
        while len(got) < len(payload):
            got += sock.recv(65536)
    assert got == payload


def test_a_cut_resets_the_connection_after_its_bytes(echo_server):
    with ShapingProxy(echo_server, LinkShape(cut_after_bytes=50_000)) as proxy, _connect(proxy.address) as sock:
        threading.Thread(target=lambda: _quiet(sock.sendall, b"z" * 1_000_000), daemon=True).start()
        got = 0
        with pytest.raises(OSError):
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionResetError("closed")
                got += len(chunk)
        assert got <= 50_000
        assert proxy.bytes_forwarded <= 50_000


def test_a_link_set_down_resets_open_connections_and_refuses_new_ones(echo_server):
    with ShapingProxy(echo_server, LinkShape()) as proxy:
        sock = _connect(proxy.address)
        assert _round_trip(sock) < 1
        proxy.set_down()
        with pytest.raises(OSError):
            sock.sendall(b"x")
            if not sock.recv(1):
                raise ConnectionResetError("closed")
        sock.close()
        with pytest.raises(OSError), _connect(proxy.address) as late:  # refused at connect or first read
            late.sendall(b"x")
            if not late.recv(1):
                raise ConnectionResetError("closed")


def _quiet(fn, *args) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(*args)
    except OSError:
        pass


def test_link_specs_common_and_per_party():
    shapes = parse_link_specs(["p2:latency=200ms", "latency=50ms,bandwidth=10mbit"], ["p1", "p2", "p3"])
    assert shapes["p1"] == LinkShape(latency_s=0.05, bandwidth_bps=10e6)
    assert shapes["p2"] == LinkShape(latency_s=0.2, bandwidth_bps=10e6)  # its own latency on the common shape
    assert parse_link_shape("cut=2MiB,down=3s,jitter=1ms") == LinkShape(cut_after_bytes=2 * 1024**2, down_after_s=3.0,
                                                                         jitter_s=0.001)
    assert parse_link_shape("bandwidth=1gbit").bandwidth_bps == 1e9


@pytest.mark.parametrize("spec, fragment", [
    ("latency=50", "not a duration"),
    ("latency=-5ms", "not a duration"),
    ("speed=10mbit", "KEY=VALUE"),
    ("bandwidth=0mbit", "must be positive"),
    ("p9:latency=5ms", "'p9' is not a party"),
])
def test_bad_link_specs_are_refused_with_the_item(spec, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_link_specs([spec], ["p1", "p2"])
