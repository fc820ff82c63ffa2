"""Transcripts: what the coordinator received and sent, recorded at the link layer, written and read
back; malformed, truncated and foreign files are refused with one line naming the file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from securelp.coordinator.protocol import SessionConfig
from securelp.coordinator.simulation import simulated_links
from securelp.coordinator.transcript import (
    MAGIC,
    Direction,
    TranscriptRecorder,
    read_transcript,
    run_recorded,
    write_transcript,
)
from securelp.coordinator.transport import InProcessLink, PartyLink
from securelp.party.session import PROTOCOL_VERSION, PartySession
from securelp.protos import securelp_pb2 as pb
from securelp.protos import transcript_pb2 as tpb
from securelp.solvers.errors import InputError, ProtocolError
from securelp.solvers.lp.partition import split_columns
from tests.audit_fixtures import netlib, run_session

EXPECTED_CALLS = ["hello", "hello", "mask", "mask", "decode", "decode", "close"]


def _types(transcript, party):
    return [(r.direction, r.message_type) for r in transcript.of(party)]


def test_every_message_of_a_session_is_recorded_per_party(tmp_path: Path) -> None:
    outcome, transcript, blocks = run_session(netlib("afiro"), parties=2, path=str(tmp_path / "t.bin"))
    assert [b.party_id for b in blocks] == list(transcript.party_ids)
    for party in transcript.party_ids:
        assert _types(transcript, party) == [
            (Direction.TO_PARTY, "securelp.v1.HelloRequest"), (Direction.FROM_PARTY, "securelp.v1.HelloReply"),
            (Direction.TO_PARTY, "securelp.v1.MaskRequest"), (Direction.FROM_PARTY, "securelp.v1.MaskedBlock"),
            (Direction.TO_PARTY, "securelp.v1.SolutionNotice"), (Direction.FROM_PARTY, "securelp.v1.DecodeReply"),
            (Direction.TO_PARTY, "securelp.v1.CloseRequest")]
        assert [r.call for r in transcript.of(party)] == EXPECTED_CALLS
    assert [r.sequence for r in transcript.records] == list(range(len(transcript.records)))
    times = [r.seconds for r in transcript.records]
    assert times == sorted(times) and times[0] >= 0
    h = transcript.header
    assert h.session_id == outcome.session_id and h.protocol_version == PROTOCOL_VERSION
    assert h.transport == "inprocess" and h.public.roster is not None
    # the bytes are those of the messages: the masked block parses to what the party sent
    block = transcript.of("party1", "securelp.v1.MaskedBlock")[0].message()
    assert block.party_id == "party1" and block.scaled_a.cols == blocks[0].n_cols


def test_the_file_reads_back_to_the_same_records(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    _, transcript, _ = run_session(netlib("sc50b"), parties=3, path=str(path))
    assert path.read_bytes().startswith(MAGIC)
    assert (path.stat().st_mode & 0o777) == 0o600  # every party's masked data: owner only
    back = read_transcript(path)
    assert len(back.records) == len(transcript.records)
    for a, b in zip(transcript.records, back.records):
        assert (a.sequence, a.party_id, a.direction, a.message_type, a.call, dict(a.metadata)) == \
               (b.sequence, b.party_id, b.direction, b.message_type, b.call, dict(b.metadata))
        assert a.payload == b.payload and a.seconds == pytest.approx(b.seconds)
    assert back.header.session_id == transcript.header.session_id
    np.testing.assert_array_equal(back.header.public.row_lower, transcript.header.public.row_lower)
    np.testing.assert_array_equal(back.header.public.row_upper, transcript.header.public.row_upper)
    assert back.header.public.roster == transcript.header.public.roster
    assert back.source == str(path)
    # the split id each party reported arrives as call metadata of its hello reply
    hello = back.of("party2", "securelp.v1.HelloReply")[0]
    assert hello.metadata["securelp-split-id"] == transcript.header.public.roster.split_id


def test_recording_is_generic_over_calls_and_message_types() -> None:
    """A call the links gain later (here a made-up ``aggregate``) is recorded like the four
    protocol calls: its request as sent, its reply as received, by full type name."""

    class Extended(InProcessLink):
        def aggregate(self, request: pb.Chunk) -> pb.Chunk:
            return pb.Chunk(total_size=request.total_size * 2, data=b"share")

    lp = netlib("afiro")
    public, blocks = split_columns(lp, [32])
    recorder = TranscriptRecorder(public)
    link = recorder.wrap(Extended(PartySession(blocks[0])))
    assert isinstance(link, PartyLink) and link.party_id == "party1" and link.transport == "inprocess"
    reply = link.aggregate(pb.Chunk(total_size=21))
    assert reply.total_size == 42
    recs = recorder.transcript().records
    assert [(r.direction, r.message_type, r.call) for r in recs] == [
        (Direction.TO_PARTY, "securelp.v1.Chunk", "aggregate"), (Direction.FROM_PARTY, "securelp.v1.Chunk", "aggregate")]
    assert recs[1].message().data == b"share"


@pytest.mark.parametrize("transport", ["inprocess", pytest.param("grpc", marks=pytest.mark.integration)])
def test_both_transports_record_the_same_messages(transport: str) -> None:
    lp = netlib("afiro")
    public, blocks = split_columns(lp, [16, 16])
    with simulated_links(blocks, transport, insecure=transport == "grpc") as links:
        outcome, transcript = run_recorded(public, links, SessionConfig(), central=lp)
    assert transcript.header.transport == transport
    for party in ("party1", "party2"):
        assert [t for _, t in _types(transcript, party)] == [
            "securelp.v1.HelloRequest", "securelp.v1.HelloReply", "securelp.v1.MaskRequest",
            "securelp.v1.MaskedBlock", "securelp.v1.SolutionNotice", "securelp.v1.DecodeReply",
            "securelp.v1.CloseRequest"]
    assert outcome.status.value == "optimal"


def test_a_failed_session_still_writes_what_was_seen(tmp_path: Path) -> None:
    """A party that breaks the protocol (wrong id) ends the session; the transcript of the messages
    up to then is written."""
    lp = netlib("afiro")
    public, blocks = split_columns(lp, [16, 16])

    class Liar(PartySession):
        def hello(self, request):  # type: ignore[no-untyped-def]
            reply = super().hello(request)
            reply.party_id = "someone-else"
            return reply

    links = [InProcessLink(PartySession(blocks[0])), InProcessLink(Liar(blocks[1]))]
    path = tmp_path / "aborted.bin"
    with pytest.raises(ProtocolError, match="introduced itself"):
        run_recorded(public, links, SessionConfig(), path=str(path))
    back = read_transcript(path)
    assert {r.message_type for r in back.records} >= {"securelp.v1.HelloRequest", "securelp.v1.HelloReply"}
    assert not back.of("party1", "securelp.v1.MaskedBlock")


# -- refused files ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tr") / "good.bin"
    run_session(netlib("afiro"), parties=2, path=str(path))
    return path


def _frames(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each frame's bytes (after its length prefix)."""
    out, pos = [], len(MAGIC)
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append((pos + 8, pos + 8 + n))
        pos += 8 + n
    return out


def _refused(path: Path, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        read_transcript(path)
    message = str(err.value)
    assert str(path) in message and fragment in message and "\n" not in message


def test_the_intact_file_is_read(good_file: Path) -> None:  # the control of the refusals below
    assert len(read_transcript(good_file).records) == 14


def test_foreign_and_missing_files_are_refused(good_file: Path, tmp_path: Path) -> None:
    foreign = tmp_path / "afiro.mps"
    foreign.write_bytes((Path(__file__).parents[1] / "data" / "netlib" / "afiro.mps").read_bytes())
    _refused(foreign, "not a securelp transcript")
    _refused(tmp_path / "missing.bin", "does not exist")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    _refused(empty, "truncated")


@pytest.mark.parametrize("cut", ["mid-frame", "at-frame-boundary", "in-length"])
def test_truncated_files_are_refused(good_file: Path, tmp_path: Path, cut: str) -> None:
    data = good_file.read_bytes()
    frames = _frames(data)
    end = {"mid-frame": frames[5][0] + 3, "at-frame-boundary": frames[-1][0] - 8, "in-length": frames[3][0] - 5}[cut]
    bad = tmp_path / f"{cut}.bin"
    bad.write_bytes(data[:end])
    _refused(bad, "truncated")


def test_other_format_versions_and_corrupt_frames_are_refused(good_file: Path, tmp_path: Path) -> None:
    data = good_file.read_bytes()
    frames = _frames(data)
    start, end = frames[0]
    frame = tpb.TranscriptFrame.FromString(data[start:end])
    frame.header.format_version = 3
    raw = frame.SerializeToString()
    newer = tmp_path / "v3.bin"
    newer.write_bytes(data[:start - 8] + struct.pack("<Q", len(raw)) + raw + data[end:])
    _refused(newer, "format version 3 is not supported")
    s, e = frames[4]
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(data[:s] + b"\xff" * (e - s) + data[e:])
    _refused(corrupt, "frame 4")
    # two records swapped: out of sequence
    s3, e3 = frames[3]
    s4, e4 = frames[4]
    swapped = tmp_path / "swapped.bin"
    swapped.write_bytes(data[:s3 - 8] + data[s4 - 8:e4] + data[s3 - 8:e3] + data[e4:])
    _refused(swapped, "sequence number")
    stray = tmp_path / "stray.bin"
    stray.write_bytes(data + b"\0")
    _refused(stray, "stray bytes")


def test_a_payload_that_does_not_parse_is_refused(good_file: Path, tmp_path: Path) -> None:
    data = good_file.read_bytes()
    frames = _frames(data)
    s, e = next((s, e) for s, e in frames[1:-1]
                if tpb.TranscriptFrame.FromString(data[s:e]).record.message_type == "securelp.v1.MaskedBlock")
    frame = tpb.TranscriptFrame.FromString(data[s:e])
    frame.record.payload = b"\x0a\xff\xff\xff"  # field 1, a length beyond the payload
    raw = frame.SerializeToString()
    bad = tmp_path / "payload.bin"
    bad.write_bytes(data[:s - 8] + struct.pack("<Q", len(raw)) + raw + data[e:])
    _refused(bad, "not a valid securelp.v1.MaskedBlock")


def test_write_refuses_a_directory(tmp_path: Path, good_file: Path) -> None:
    with pytest.raises(InputError):
        write_transcript(read_transcript(good_file), tmp_path)
