"""A long local step (the secure LP's solve, a census post-processing) is abandoned as soon as a
watched party is gone, also when the links record a transcript (every CLI session does)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from securelp.coordinator.drive import while_alive
from securelp.coordinator.transcript import TranscriptRecorder
from securelp.coordinator.transport import PartyLink
from securelp.solvers.errors import TransportError
from securelp.solvers.lp.partition import PublicRows


class _Link(PartyLink):
    """A link whose party is gone once ``lost`` is set."""

    def __init__(self, party_id: str) -> None:
        super().__init__(party_id)
        self.lost = threading.Event()

    def hello(self, request):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    mask = decode = close = hello

    def check_alive(self, what: str) -> None:
        if self.lost.is_set():
            raise TransportError(f"{what}: party {self.party_id} disconnected")


@pytest.mark.parametrize("recorded", [False, True])
def test_a_party_lost_during_a_local_step_is_named_within_a_poll(recorded: bool) -> None:
    links = [_Link("a"), _Link("b")]
    watched = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0))).wrap_all(links) if recorded else links
    threading.Timer(0.2, links[1].lost.set).start()
    start = time.monotonic()
    with pytest.raises(TransportError, match="postprocess: party b disconnected"):
        while_alive(watched, "postprocess", lambda: time.sleep(10))
    assert time.monotonic() - start < 2.0  # not when the 10 s step ends


def test_a_step_that_ends_with_every_party_alive_returns_its_value() -> None:
    links = TranscriptRecorder(PublicRows(np.zeros(0), np.zeros(0))).wrap_all([_Link("a"), _Link("b")])
    assert while_alive(links, "solve", lambda: 42) == 42
