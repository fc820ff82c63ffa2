"""A PPLP session over gRPC when a party dies mid-call, when the parties are not the split's,
and when the coordinator cannot reach a party: it ends by ``--deadline`` (or ``--wait``) with
a typed error naming the party, the survivors are closed, and a wrong party set is refused
before any masked data moves.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time

import numpy as np
import pytest

from securelp.coordinator import grpc_link
from securelp.coordinator.grpc_link import GrpcPartyLink, local_grpc_links
from securelp.coordinator.launcher import LocalParties
from securelp.coordinator.protocol import SessionConfig, run_secure_lp
from securelp.coordinator.transport import InProcessLink
from securelp.party.session import PartySession
from securelp.solvers.errors import AuthenticationError, ExitCode, InputError, TransportError
from securelp.solvers.lp import SolveStatus
from securelp.solvers.lp.partition import ColumnBlock, PublicRows, split_columns
from tests.integration.test_grpc_processes import no_orphans  # noqa: F401 - autouse fixture
from tests.lp_fixtures import random_feasible_lp

pytestmark = pytest.mark.integration


def small_lp(seed=0, m=8, n=9):
    return random_feasible_lp(np.random.default_rng(seed), m, n)


class KilledDuringMask:
    """A link whose party is stopped as its Mask call goes out and SIGKILLed while the call is in
    flight (the connection is then reset under a call the party never answered) -- what the
    reviewer's ``kill -9`` right after "hello" does, made deterministic."""

    def __init__(self, inner, cluster, party_id):
        self.inner, self.cluster, self.party_id = inner, cluster, party_id

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def hello(self, request):
        return self.inner.hello(request)

    def mask(self, request):
        self.cluster.kill(self.party_id, signal.SIGSTOP)
        threading.Timer(0.4, self.cluster.kill, (self.party_id, signal.SIGKILL)).start()
        return self.inner.mask(request)

    def decode(self, notice):
        return self.inner.decode(notice)

    def close(self, request):
        self.inner.close(request)


def _run_in_thread(public, links, config, limit):
    """run_secure_lp in a daemon thread: a hang (the old behaviour) fails the test instead of the suite."""
    box: dict[str, object] = {}

    def target():
        try:
            box["outcome"] = run_secure_lp(public, links, config)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    start = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"the coordinator was still blocked {limit:g} s later (deadline {config.deadline_s:g} s)"
    return box, time.monotonic() - start


def _kill_during_mask(tmp_path, deadline):
    lp = small_lp(1)
    public, blocks = split_columns(lp, [3, 3, 3], ids=["p1", "p2", "p3"])
    with LocalParties(blocks, tmp_path) as cluster:
        links = cluster.links(deadline_s=deadline)
        links[1] = KilledDuringMask(links[1], cluster, "p2")
        box, elapsed = _run_in_thread(public, links, SessionConfig(deadline_s=deadline), deadline + 6)
        codes = cluster.wait(10)
    return box, elapsed, codes


def test_a_party_killed_during_mask_ends_the_session_and_the_others_are_closed(tmp_path):
    box, elapsed, codes = _kill_during_mask(tmp_path, deadline=5.0)
    err = box.get("error")
    assert isinstance(err, TransportError), box
    assert str(err).startswith("mask: party p2 at 127.0.0.1:")
    assert elapsed < 5.0  # Mask is not retried: the reset is reported at once
    # the survivors got Close("aborted: ...") and exited with the protocol code
    assert codes["p1"] == codes["p3"] == int(ExitCode.PROTOCOL)
    assert codes["p2"] == -signal.SIGKILL


def test_the_deadline_holds_whatever_the_retry_policy_does(tmp_path, monkeypatch):
    """With the retry policy on Mask (as before), gRPC left the reader of the reset stream blocked for
    ever; the link's watchdog still ends the call at the deadline."""
    retry_all = {"methodConfig": [{**grpc_link.SERVICE_CONFIG["methodConfig"][0],
                                   "name": [{"service": grpc_link.SERVICE_NAME}]}]}
    monkeypatch.setattr(grpc_link, "SERVICE_CONFIG", retry_all)
    box, elapsed, codes = _kill_during_mask(tmp_path, deadline=2.0)
    err = box.get("error")
    assert isinstance(err, TransportError), box
    assert "party p2" in str(err) and "mask" in str(err)
    assert elapsed < 2.0 + 4.0
    assert codes["p1"] == codes["p3"] == int(ExitCode.PROTOCOL)


def test_only_safe_calls_are_retried():
    """Only the health check is retried by gRPC: a session's calls travel on the runtime's one stream per
    session, which a retry would replay (and a party's state changes with every call)."""
    methods = {(n["service"], n.get("method")) for n in grpc_link.SERVICE_CONFIG["methodConfig"][0]["name"]}
    assert methods == {("grpc.health.v1.Health", "Check")}


# -- the split's roster, over gRPC ------------------------------------------------------------
def test_a_block_of_another_split_is_refused_before_masking(tmp_path):
    lp = small_lp(2)
    public, blocks = split_columns(lp, [4, 5], ids=["a", "b"])
    _, stale = split_columns(lp, [4, 5], ids=["a", "b"])  # same LP, same ids and sizes: another split
    sessions = [PartySession(blocks[0]), PartySession(stale[1])]
    with local_grpc_links(sessions, tmp_path, deadline_s=10) as links, \
            pytest.raises(InputError, match=r"party b: its block belongs to another split"):
        run_secure_lp(public, links, SessionConfig())
    assert all(s._mask is None for s in sessions)  # nobody masked
    assert all(s.closed.is_set() and s.close_reason == "aborted: InputError" for s in sessions)


def test_matching_blocks_report_their_split_over_grpc(tmp_path):
    lp = small_lp(3)
    public, blocks = split_columns(lp, [4, 5], ids=["a", "b"])
    with local_grpc_links([PartySession(b) for b in blocks], tmp_path, deadline_s=10) as links:
        outcome = run_secure_lp(public, links, SessionConfig())
        assert [link.reported_split_id for link in links] == [public.roster.split_id] * 2
    assert outcome.status is SolveStatus.OPTIMAL


def test_a_missing_party_is_refused_before_any_call():
    lp = small_lp(4)
    public, blocks = split_columns(lp, [3, 3, 3])
    sessions = [PartySession(blocks[0]), PartySession(blocks[2])]
    with pytest.raises(InputError, match=r"does not match the split \(missing party2\)"):
        run_secure_lp(public, [InProcessLink(s) for s in sessions], SessionConfig())
    assert all(s._state == "new" for s in sessions)


def test_another_column_count_is_refused():
    lp = small_lp(5)
    public, _ = split_columns(lp, [4, 5], ids=["a", "b"])
    sid = public.roster.split_id
    moved = [ColumnBlock("a", lp.A[:, :5], lp.c[:5], lp.col_lower[:5], lp.col_upper[:5], sid),
             ColumnBlock("b", lp.A[:, 5:], lp.c[5:], lp.col_lower[5:], lp.col_upper[5:], sid)]
    with pytest.raises(InputError, match="party a: its block has 5 columns but the split gave it 4"):
        run_secure_lp(public, [InProcessLink(PartySession(b)) for b in moved], SessionConfig())


def test_files_without_a_roster_still_work_with_a_warning(caplog):
    lp = small_lp(6)
    public, blocks = split_columns(lp, [4, 5], ids=["a", "b"])
    old_public = PublicRows(public.row_lower, public.row_upper, public.sense, public.offset, public.name)
    old_blocks = [ColumnBlock(b.party_id, b.A, b.c, b.col_lower, b.col_upper) for b in blocks]
    outcome = run_secure_lp(old_public, [InProcessLink(PartySession(b)) for b in old_blocks], SessionConfig())
    assert outcome.status is SolveStatus.OPTIMAL
    # new public rows, a block from before split ids: accepted, with a warning naming the party
    with caplog.at_level(logging.WARNING, logger="securelp.coordinator.protocol"):
        outcome = run_secure_lp(public, [InProcessLink(PartySession(blocks[0])), InProcessLink(PartySession(old_blocks[1]))],
                                SessionConfig())
    assert outcome.status is SolveStatus.OPTIMAL
    assert "party b reported no split id" in caplog.text


# -- reaching a party ---------------------------------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_names_wait_and_the_cause():
    port = _free_port()
    link = GrpcPartyLink("ghost", f"127.0.0.1:{port}", tls=None, insecure=True, deadline_s=30)
    try:
        with pytest.raises(TransportError) as info:
            link.wait_ready(2.0)
    finally:
        link.shutdown()
    text = str(info.value)
    assert text.startswith(f"party ghost at 127.0.0.1:{port} was not ready within 2 s (--wait): ")
    assert "Connection refused" in text and "--wait" in text and "--deadline" not in text


def _assert_told_at_once(link, error: type[Exception], pattern: str) -> None:
    """``link.wait_ready`` fails with ``error`` (message matching ``pattern``) well before its 20 s wait."""
    try:
        start = time.monotonic()
        with pytest.raises(error, match=pattern):
            link.wait_ready(20)
        assert time.monotonic() - start < 8
    finally:
        link.shutdown()


def test_plaintext_coordinator_against_a_tls_party_is_told_at_once(tmp_path):
    lp = small_lp(7)
    _, blocks = split_columns(lp, [9], ids=["tlsparty"])
    with local_grpc_links([PartySession(blocks[0])], tmp_path) as (tls_link,):
        plain = GrpcPartyLink("tlsparty", tls_link.address, tls=None, insecure=True, deadline_s=10)
        _assert_told_at_once(plain, TransportError, "requires TLS .*--insecure")


def test_tls_coordinator_against_a_plaintext_party_is_told_at_once(tmp_path):
    from securelp.coordinator.certs import write_session_certs
    from securelp.coordinator.grpc_link import ChannelTls

    lp = small_lp(8)
    _, blocks = split_columns(lp, [9], ids=["plain"])
    write_session_certs(tmp_path / "certs", ["plain"])
    with local_grpc_links([PartySession(blocks[0])], tmp_path / "w", insecure=True) as (plain_link,):
        link = GrpcPartyLink("plain", plain_link.address, tls=ChannelTls.from_dir(tmp_path / "certs"), deadline_s=10)
        _assert_told_at_once(link, AuthenticationError, "serve plaintext")


def test_cli_a_mismatch_on_one_party_does_not_wait_for_the_others(tmp_path, capsys):
    """``securelp coordinator --insecure`` against a TLS party, with another party not up yet: the
    mismatch is reported at once (exit 6, one line), not after the other party's --wait."""
    from securelp.coordinator.cli import main
    from securelp.solvers.lp.partition import save_public

    lp = small_lp(9)
    public, blocks = split_columns(lp, [4, 5], ids=["tlsparty", "later"])
    save_public(public, tmp_path / "public.npz")
    with local_grpc_links([PartySession(blocks[0])], tmp_path) as (tls_link,):
        start = time.monotonic()
        code = main(["coordinator", "--public", str(tmp_path / "public.npz"), "--insecure", "--wait", "30",
                     "--party", f"tlsparty={tls_link.address}", "--party", f"later=127.0.0.1:{_free_port()}"])
        elapsed = time.monotonic() - start
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.TRANSPORT and elapsed < 10
    assert "party tlsparty" in err and "requires TLS" in err and "Traceback" not in err
