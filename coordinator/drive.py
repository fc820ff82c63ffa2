"""What every protocol's coordinator driver needs of its links, whatever the protocol and transport.

A protocol's driver (the secure LP's ``securelp.coordinator.protocol.run_secure_lp``, the example
``securelp.coordinator.secure_sum.run_secure_sum``) is a sequence of phases; in each it calls every
party, or works alone (the secure LP's solve). Three helpers, and one for simulations:

- :func:`each` runs one call on every link concurrently and names the party (and the phase) in
  any typed error; an interrupt (Ctrl-C, SIGTERM) goes up at once instead of waiting for the
  other parties' calls;
- :func:`close_all` tells every party the session is over, best effort, concurrently;
- :func:`while_alive` runs a long local step (a solve) while it watches the links: a party that
  dies or stops meanwhile is reported within the runtime's keepalive, naming it and the phase,
  not when the step ends. (The step's thread is left to finish on its own: a HiGHS solve cannot
  be cancelled from outside the backend; it runs as a daemon thread and ends with the process.)
- :func:`run_on_hosts` runs a driver against party hosts simulated in this process, over the
  in-process transport or real gRPC (fresh mutual-TLS certificates), and times it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from securelp.solvers.errors import SecureLPError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: how often :func:`while_alive` looks at the links
LIVENESS_POLL_S = 0.1


class Link(Protocol):
    """What the helpers use of a link (any protocol's)."""

    party_id: str

    def check_alive(self, what: str) -> None: ...


def each(links: Sequence[Any], call: Callable[[Any], T], what: str, pool: ThreadPoolExecutor | None = None) -> list[T]:
    """Run ``call`` on every link concurrently; typed errors name the party and start with ``what``.

    ``pool``: the session's executor, reused across phases (starting threads while the
    previous phase's work still holds the GIL cost ~2-3 ms each; measured 18 ms per
    session for 3 parties and 7 phases). Without one, a pool lives for this call.
    """

    def guarded(link: Any) -> T:
        try:
            return call(link)
        except SecureLPError as exc:
            text = str(exc)
            if link.party_id not in text:
                text = f"party {link.party_id}: {text}"
            if not text.startswith(f"{what}: "):  # a gRPC link names the call already
                text = f"{what}: {text}"
            kind = getattr(exc, "kind", None)
            raise (type(exc)(text, kind=kind) if kind is not None else type(exc)(text)) from None

    if len(links) == 1:
        return [guarded(links[0])]
    if pool is None:
        with ThreadPoolExecutor(max_workers=min(32, len(links))) as own:
            return each(links, call, what, own)
    futures = [pool.submit(guarded, link) for link in links]
    errors: list[BaseException] = []
    results: list[T] = []
    for fut in futures:
        try:
            results.append(fut.result())
        except Exception as exc:  # noqa: BLE001 - collect, raise the first after all finished
            errors.append(exc)
        # a KeyboardInterrupt (Ctrl-C, SIGTERM) while waiting goes up at once: the caller cancels
        # the calls in flight instead of waiting for each of them to its deadline
    if errors:
        raise errors[0]
    return results


def close_all(links: Sequence[Any], close: Callable[[Any], None], pool: ThreadPoolExecutor | None = None) -> None:
    """Tell every party the session is over with ``close(link)`` (best effort; concurrently when a pool
    is given): a party that cannot be told is logged, not raised."""

    def one(link: Any) -> None:
        try:
            close(link)
        except Exception as exc:  # noqa: BLE001 - best effort: a dead party cannot be told
            log.info("could not close party %s: %s", link.party_id, exc)

    if pool is None or len(links) == 1:
        for link in links:
            one(link)
    else:
        list(pool.map(one, links))


def check_alive(links: Sequence[Any], what: str) -> None:
    """Raise the typed error of the first link whose party is gone (naming it and ``what``)."""
    for link in links:
        checker = getattr(link, "check_alive", None)
        if checker is not None:
            checker(what)


def while_alive(links: Sequence[Any], what: str, step: Callable[[], T], *, poll_s: float = LIVENESS_POLL_S) -> T:
    """Run ``step`` (a long local computation) while watching the links' liveness.

    Returns what ``step`` returns (or raises what it raises). A party that dies or stops while it runs
    raises its typed error (``TransportError``, naming the party and ``what``) within the runtime's
    keepalive; ``step`` is then abandoned (a daemon thread).
    """
    check_alive(links, what)
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = step()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, name=f"securelp-{what}", daemon=True)
    worker.start()
    while not done.wait(poll_s):
        try:
            check_alive(links, what)
        except SecureLPError:
            log.warning("%s abandoned: a party is gone", what)
            raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_on_hosts(hosts: Sequence[Any], transport: str, workdir: Path | str | None, deadline_s: float,
                 run: Callable[[list[Any]], T], *, on_certificates: Callable[[Path], None] | None = None
                 ) -> tuple[T, float]:
    """``run`` (a driver taking one connection per host) against ``hosts`` (``PartyHost`` objects in
    this process); returns its outcome and the seconds it took.

    ``transport`` ``inprocess`` hands over every message through protobuf and the runtime's frames;
    ``grpc`` serves each host on 127.0.0.1 (port 0) with mutual TLS, fresh session certificates in
    ``workdir/certs``, and calls ``on_certificates(workdir/certs)`` once they exist (a party that signs
    with its certificate loads it there). Servers and channels are gone when this returns.
    """
    from securelp.coordinator.transport import InProcessConnection

    start = time.perf_counter()
    if transport == "inprocess":
        outcome = run([InProcessConnection(h) for h in hosts])
    else:
        from securelp.coordinator.grpc_link import local_grpc_links  # lazy: gRPC only when asked for

        workdir = Path(str(workdir))
        with local_grpc_links(hosts, workdir, deadline_s=deadline_s) as grpc_links:
            if on_certificates is not None:
                on_certificates(workdir / "certs")
            outcome = run([link.connection for link in grpc_links])
    return outcome, time.perf_counter() - start
