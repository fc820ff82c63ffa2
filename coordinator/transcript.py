"""Session transcripts: exactly what the coordinator received and sent, per party.

The coordinator of a PPLP session (Mangasarian, *Privacy-Preserving Linear Programming*,
Optim. Lett. 2011) sees the public rows and every message of every party; a leakage claim is
only as good as the attacks run on that view. This module records the view at the link
layer, so it works for every transport (in-process, gRPC in either direction, any later one),
for every message type and for every protocol the runtime carries (the secure LP ``pplp``, the
example ``secure-sum``, ...), without knowing the protocol: the header names the protocol, each
record its method and message type.

* :class:`TranscriptRecorder` wraps links (:meth:`TranscriptRecorder.wrap`); each
  :class:`RecordingLink` forwards every call to its link and records every protobuf message
  that crosses it: the requests it sends (direction ``to_party``) and the replies it receives
  (``from_party``), with the party id, the message's full type name, its serialized bytes, a
  sequence number and the seconds since the recording started. Calls the link gains later
  (say, for secure aggregation) are recorded the same way, and so is the generic
  ``call(method, request)`` of any protocol's ``ProtocolLink`` (recorded under its method).
* :func:`write_transcript` writes the file atomically; :func:`read_transcript` reads it back
  into typed objects and refuses a malformed, truncated or foreign file with one
  :class:`~securelp.solvers.errors.InputError` line naming the file and what is wrong.

File format (``protos/transcript.proto``, format version :data:`FORMAT_VERSION`): the 8-byte
magic :data:`MAGIC`, then frames, each a little-endian uint64 length and a serialized
``securelp.v1.TranscriptFrame``: first the header (public rows and roster, session id, protocol
name and version, transport), then one record per message, then an end frame holding the record
count. Format 2 added the protocol's name to the header; a format-1 file (written before) is read
as a ``pplp`` session.

Received messages are kept as the parsed objects the protocol itself holds (no second copy of a
masked block); they are serialized when the file is written.
"""

from __future__ import annotations

import enum
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from securelp.coordinator.transport import PartyLink
from securelp.protos import census_federated_pb2 as _census_federated_pb2  # noqa: F401 - for reading
from securelp.protos import ldp_collect_pb2 as _ldp_collect_pb2  # noqa: F401 - for reading
from securelp.protos import secure_sum_pb2 as _secure_sum_pb2  # noqa: F401 - its message types, for reading
from securelp.protos import securelp_pb2 as pb
from securelp.protos import transcript_pb2 as tpb
from securelp.solvers.errors import InputError
from securelp.solvers.files import require_file, write_atomically
from securelp.solvers.lp.model import Sense
from securelp.solvers.lp.partition import PublicRows, Roster

__all__ = ["DEFAULT_PROTOCOL", "FORMAT_VERSION", "MAGIC", "READABLE_VERSIONS", "Direction", "RecordingLink", "Transcript", "TranscriptHeader",
           "TranscriptRecord", "TranscriptRecorder", "read_transcript", "run_recorded", "write_transcript"]

#: first bytes of every transcript file
MAGIC = b"SLPTRNS\n"
#: the transcript format this module writes (it also reads :data:`READABLE_VERSIONS`)
FORMAT_VERSION = 2
#: format versions it reads: 1 has no protocol name in its header (its sessions are pplp)
READABLE_VERSIONS = (1, 2)
#: the protocol of a transcript whose header names none (format 1)
DEFAULT_PROTOCOL = "pplp"
#: metadata key under which a party's reported split id is recorded (gRPC: trailing metadata)
SPLIT_ID_KEY = "securelp-split-id"
_LENGTH = struct.Struct("<Q")


class Direction(enum.Enum):
    """Direction of a message, seen from the coordinator."""

    TO_PARTY = "to_party"
    FROM_PARTY = "from_party"


_DIR_TO_PB = {Direction.TO_PARTY: tpb.TRANSCRIPT_DIRECTION_TO_PARTY,
              Direction.FROM_PARTY: tpb.TRANSCRIPT_DIRECTION_FROM_PARTY}
_DIR_FROM_PB = {v: k for k, v in _DIR_TO_PB.items()}


def message_class(type_name: str) -> type[Message] | None:
    """The generated class of a protobuf message type by its full name (None: unknown here)."""
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(type_name)
    except KeyError:
        return None
    return message_factory.GetMessageClass(descriptor)


@dataclass(frozen=True, eq=False)
class TranscriptRecord:
    """One message between the coordinator and one party.

    ``payload`` is the serialized message; :meth:`message` the parsed one.
    """

    sequence: int
    party_id: str
    direction: Direction
    message_type: str
    seconds: float
    call: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    _payload: bytes | None = field(default=None, repr=False)
    _message: Message | None = field(default=None, repr=False)

    @property
    def payload(self) -> bytes:
        """The serialized message."""
        if self._payload is not None:
            return self._payload
        assert self._message is not None
        return self._message.SerializeToString()

    @property
    def size(self) -> int:
        """Bytes of the serialized message."""
        return len(self._payload) if self._payload is not None else int(self._message.ByteSize())  # type: ignore[union-attr]

    def message(self) -> Message:
        """The parsed protobuf message.

        Raises
        ------
        InputError
            The type is not known to this securelp, or the bytes do not parse as it.
        """
        if self._message is not None:
            return self._message
        cls = message_class(self.message_type)
        if cls is None:
            raise InputError(f"transcript record {self.sequence} holds a {self.message_type!r}, a message type this "
                             "securelp does not know")
        try:
            msg = cls.FromString(self._payload or b"")
        except DecodeError:
            raise InputError(f"transcript record {self.sequence}: its payload is not a valid {self.message_type}") \
                from None
        object.__setattr__(self, "_message", msg)
        return msg


@dataclass(frozen=True, eq=False)
class TranscriptHeader:
    """What the coordinator held at the start of the session."""

    session_id: str
    protocol_version: int
    transport: str
    public: PublicRows
    started_unix: float
    securelp_version: str
    format_version: int = FORMAT_VERSION
    #: the protocol's name on the wire ("pplp", "secure-sum", ...)
    protocol: str = DEFAULT_PROTOCOL


@dataclass(frozen=True, eq=False)
class Transcript:
    """A whole session as the coordinator saw it: the header and the records in order."""

    header: TranscriptHeader
    records: tuple[TranscriptRecord, ...]
    duration_s: float
    source: str = ""  # the file it was read from ("" when recorded in this process)

    @property
    def party_ids(self) -> tuple[str, ...]:
        """Party ids in the roster's order (else in order of first appearance)."""
        roster = self.header.public.roster
        seen = list(dict.fromkeys(r.party_id for r in self.records))
        if roster is not None:
            return tuple(p for p in roster.party_ids if p in seen) + tuple(p for p in seen if p not in roster.party_ids)
        return tuple(seen)

    def of(self, party_id: str, message_type: str | None = None,
           direction: Direction | None = None) -> list[TranscriptRecord]:
        """The records of one party, optionally of one message type and direction."""
        return [r for r in self.records if r.party_id == party_id
                and (message_type is None or r.message_type == message_type)
                and (direction is None or r.direction is direction)]

    @property
    def n_bytes(self) -> int:
        """Payload bytes of all records."""
        return sum(r.size for r in self.records)


class TranscriptRecorder:
    """Records every message that crosses the links it wraps (thread-safe).

    Parameters
    ----------
    public : the public rows the coordinator holds (they go into the header).
    clock : a monotonic clock (seconds); the recording starts at construction.
    """

    def __init__(self, public: PublicRows, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.public = public
        self._clock = clock
        self._start = clock()
        self._started_unix = time.time()
        self._lock = threading.Lock()
        self._records: list[TranscriptRecord] = []
        self._transport = ""
        self._session_id = ""
        self._protocol_version = 0
        self._protocol = ""

    def wrap(self, link: PartyLink) -> RecordingLink:
        """A link that forwards to ``link`` (a ``PartyLink``, or any protocol's ``ProtocolLink``) and
        records what crosses it."""
        with self._lock:
            if not self._transport:
                self._transport = link.transport
            if not self._protocol:
                self._protocol = str(getattr(link, "protocol", "") or DEFAULT_PROTOCOL)
        return RecordingLink(link, self)

    def wrap_all(self, links: Sequence[PartyLink]) -> list[PartyLink]:
        return [self.wrap(link) for link in links]

    def record(self, party_id: str, direction: Direction, message: Message, call: str,
               metadata: Mapping[str, str] | None = None) -> None:
        """Append one message. Sent messages are serialized now (what went out); received ones are
        kept as the parsed objects the protocol holds and serialized when written."""
        payload = message.SerializeToString() if direction is Direction.TO_PARTY else None
        kept = None if payload is not None else message
        with self._lock:
            if direction is Direction.TO_PARTY:
                self._note_session(message)
            self._records.append(TranscriptRecord(
                sequence=len(self._records), party_id=party_id, direction=direction,
                message_type=message.DESCRIPTOR.full_name, seconds=self._clock() - self._start, call=call,
                metadata=dict(metadata or {}), _payload=payload, _message=kept))

    def _note_session(self, message: Message) -> None:
        fields = message.DESCRIPTOR.fields_by_name
        if not self._session_id and "session_id" in fields and message.session_id:
            self._session_id = str(message.session_id)
        if not self._protocol_version and "protocol_version" in fields and message.protocol_version:
            self._protocol_version = int(message.protocol_version)

    def transcript(self) -> Transcript:
        """The transcript so far (the whole session once the protocol has returned)."""
        from securelp import __version__

        with self._lock:
            header = TranscriptHeader(session_id=self._session_id, protocol_version=self._protocol_version,
                                      transport=self._transport or "unknown", public=self.public,
                                      started_unix=self._started_unix, securelp_version=__version__,
                                      protocol=self._protocol or DEFAULT_PROTOCOL)
            return Transcript(header, tuple(self._records), self._clock() - self._start)


def _is_message(value: object) -> bool:
    return isinstance(value, Message)


class RecordingLink(PartyLink):
    """A ``PartyLink`` that forwards to another and records every message crossing it.

    The four calls of the protocol are forwarded explicitly; any other method of the wrapped
    link is forwarded through :meth:`__getattr__` and recorded the same way: each protobuf
    message among its arguments as sent, a protobuf message it returns (or each one of a
    list or tuple it returns) as received. Counters, ids and the transport name are the
    wrapped link's.
    """

    def __init__(self, inner: PartyLink, recorder: TranscriptRecorder) -> None:
        # no PartyLink.__init__: the counters and the reported split id live on the wrapped link
        self._inner = inner
        self._recorder = recorder

    # -- attributes of the wrapped link --------------------------------------------------------
    @property  # type: ignore[override]
    def party_id(self) -> str:
        return self._inner.party_id

    @property  # type: ignore[override]
    def bytes_sent(self) -> int:
        return self._inner.bytes_sent

    @property  # type: ignore[override]
    def bytes_received(self) -> int:
        return self._inner.bytes_received

    @property  # type: ignore[override]
    def reported_split_id(self) -> str | None:
        return self._inner.reported_split_id

    @property
    def transport(self) -> str:
        return self._inner.transport

    @property
    def protocol(self) -> str:  # type: ignore[override]
        return str(getattr(self._inner, "protocol", DEFAULT_PROTOCOL))

    @property
    def inner(self) -> PartyLink:
        """The wrapped link."""
        return self._inner

    # -- recorded calls ------------------------------------------------------------------------
    def _recorded(self, call: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        pid = self._inner.party_id
        for value in (*args, *kwargs.values()):
            if _is_message(value):
                self._recorder.record(pid, Direction.TO_PARTY, value, call)
        split_before = getattr(self._inner, "reported_split_id", None)
        result = method(*args, **kwargs)
        split_after = getattr(self._inner, "reported_split_id", None)
        metadata = {SPLIT_ID_KEY: str(split_after)} if split_after and split_after != split_before else {}
        replies = result if isinstance(result, (list, tuple)) else (result,)
        for reply in replies:
            if _is_message(reply):
                self._recorder.record(pid, Direction.FROM_PARTY, reply, call, metadata)
        return result

    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        return self._recorded("hello", self._inner.hello, request)

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        return self._recorded("mask", self._inner.mask, request)

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        return self._recorded("decode", self._inner.decode, notice)

    def close(self, request: pb.CloseRequest) -> None:
        return self._recorded("close", self._inner.close, request)

    # -- not messages: forwarded only ----------------------------------------------------------
    def check_alive(self, what: str) -> None:
        # explicit: PartyLink's own (a no-op) would otherwise shadow __getattr__, and a party lost
        # during a long local step (the solve, a census post-processing) would go unnoticed until it ends
        check = getattr(self._inner, "check_alive", None)
        if check is not None:
            check(what)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def cancel_calls(self) -> None:
        self._inner.cancel_calls()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def recorded(*args: Any, **kwargs: Any) -> Any:
            # a protocol's generic call(method, request): recorded under its method
            call = args[0] if name == "call" and args and isinstance(args[0], str) else name
            return self._recorded(call, value, *args, **kwargs)

        return recorded


# -- the file ------------------------------------------------------------------------------------
def _header_pb(header: TranscriptHeader) -> tpb.TranscriptHeader:
    public = header.public
    msg = tpb.TranscriptHeader(
        format_version=FORMAT_VERSION, session_id=header.session_id, protocol_version=header.protocol_version,
        transport=header.transport, row_lower=np.ascontiguousarray(public.row_lower, dtype="<f8").tobytes(),
        row_upper=np.ascontiguousarray(public.row_upper, dtype="<f8").tobytes(), sense=public.sense.value,
        offset=float(public.offset), name=public.name, started_unix=header.started_unix,
        securelp_version=header.securelp_version, protocol=header.protocol)
    if public.roster is not None:
        msg.roster.CopyFrom(tpb.TranscriptRoster(split_id=public.roster.split_id, party_ids=public.roster.party_ids,
                                                 n_cols=public.roster.n_cols))
    return msg


def _frame(out: BinaryIO, frame: tpb.TranscriptFrame) -> None:
    data = frame.SerializeToString()
    out.write(_LENGTH.pack(len(data)))
    out.write(data)


def encode_transcript(transcript: Transcript, out: BinaryIO) -> None:
    """Write ``transcript`` in the file format to the binary stream ``out``."""
    out.write(MAGIC)
    _frame(out, tpb.TranscriptFrame(header=_header_pb(transcript.header)))
    for i, rec in enumerate(transcript.records):
        pb_rec = tpb.TranscriptRecord(sequence=i, party_id=rec.party_id, direction=_DIR_TO_PB[rec.direction],
                                      message_type=rec.message_type, payload=rec.payload, seconds=rec.seconds,
                                      call=rec.call)
        pb_rec.metadata.update(dict(rec.metadata))
        _frame(out, tpb.TranscriptFrame(record=pb_rec))
    _frame(out, tpb.TranscriptFrame(end=tpb.TranscriptEnd(records=len(transcript.records),
                                                          seconds=transcript.duration_s)))


def write_transcript(transcript: Transcript, path: str | os.PathLike[str]) -> None:
    """Write the transcript file atomically (mode ``0600``: it holds every party's masked data).

    Raises
    ------
    InputError
        The path cannot be written (a directory, a missing directory, refused by the system).
    ResourceError
        The disk is full.
    """
    write_atomically(path, lambda handle: encode_transcript(transcript, handle), what="transcript ", mode=0o600)


class _Reader:
    """Frames of a transcript file held in memory, with errors that name the file."""

    def __init__(self, path: Path, data: bytes) -> None:
        self.path = path
        self.data = memoryview(data)
        self.pos = len(MAGIC)

    def fail(self, what: str) -> InputError:
        return InputError(f"transcript file {self.path}: {what}")

    def frame(self, index: int) -> tpb.TranscriptFrame | None:
        if self.pos == len(self.data):
            return None
        if self.pos + _LENGTH.size > len(self.data):
            raise self.fail(f"truncated: frame {index} has an incomplete length prefix "
                            f"({len(self.data) - self.pos} of {_LENGTH.size} bytes)")
        (length,) = _LENGTH.unpack_from(self.data, self.pos)
        start = self.pos + _LENGTH.size
        if length > len(self.data) - start:
            raise self.fail(f"truncated: frame {index} announces {length} bytes, only {len(self.data) - start} remain")
        frame = tpb.TranscriptFrame()
        try:
            frame.ParseFromString(self.data[start:start + length].tobytes())
        except DecodeError:
            raise self.fail(f"frame {index} is not a valid transcript frame (corrupt file)") from None
        self.pos = start + length
        return frame


def _floats(raw: bytes, reader: _Reader, what: str) -> np.ndarray:
    if len(raw) % 8:
        raise reader.fail(f"the header's {what} is {len(raw)} bytes, not a whole number of doubles")
    return np.frombuffer(raw, dtype="<f8").astype(np.float64)


def _parse_header(msg: tpb.TranscriptHeader, reader: _Reader) -> TranscriptHeader:
    if msg.format_version not in READABLE_VERSIONS:
        raise reader.fail(f"format version {msg.format_version} is not supported (this securelp reads versions "
                          f"{', '.join(map(str, READABLE_VERSIONS))}); use the securelp that wrote it")
    lo, hi = _floats(msg.row_lower, reader, "row_lower"), _floats(msg.row_upper, reader, "row_upper")
    if lo.shape != hi.shape or np.isnan(lo).any() or np.isnan(hi).any():
        raise reader.fail("the header's row bounds are inconsistent or NaN")
    try:
        sense = Sense(msg.sense)
    except ValueError:
        raise reader.fail(f"the header's sense {msg.sense!r} is neither 'min' nor 'max'") from None
    roster = None
    if msg.HasField("roster"):
        try:
            roster = Roster(msg.roster.split_id, tuple(msg.roster.party_ids), tuple(int(n) for n in msg.roster.n_cols))
        except InputError as exc:
            raise reader.fail(str(exc)) from None
    public = PublicRows(lo, hi, sense, float(msg.offset), msg.name, roster)
    return TranscriptHeader(session_id=msg.session_id, protocol_version=int(msg.protocol_version),
                            transport=msg.transport, public=public, started_unix=float(msg.started_unix),
                            securelp_version=msg.securelp_version, format_version=int(msg.format_version),
                            protocol=msg.protocol or DEFAULT_PROTOCOL)


def read_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read a transcript file written by :func:`write_transcript`.

    Every record of a message type this securelp knows is parsed here, so a corrupt payload is
    refused at once; records of unknown types (a newer protocol) keep their bytes.

    Raises
    ------
    InputError
        One line naming the file and what is wrong: missing, not a transcript (foreign magic),
        an unsupported format version, truncated (a frame cut short or no end frame), records
        out of sequence, or a payload that does not parse.
    """
    p = require_file(path, "transcript file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"transcript file {p}: cannot be read ({exc.strerror or exc})") from None
    reader = _Reader(p, data)
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):
            raise reader.fail(f"truncated: {len(data)} bytes, not even the {len(MAGIC)}-byte magic")
        raise reader.fail("not a securelp transcript (its first bytes are not the transcript magic)")
    first = reader.frame(0)
    if first is None:
        raise reader.fail("truncated: no header after the magic")
    if first.WhichOneof("kind") != "header":
        raise reader.fail(f"the first frame is a {first.WhichOneof('kind') or 'empty frame'}, not the header")
    header = _parse_header(first.header, reader)
    records: list[TranscriptRecord] = []
    duration = 0.0
    index = 1
    while True:
        frame = reader.frame(index)
        if frame is None:
            raise reader.fail(f"truncated: it ends after {len(records)} records without its end frame")
        kind = frame.WhichOneof("kind")
        if kind == "end":
            if int(frame.end.records) != len(records):
                raise reader.fail(f"its end frame counts {int(frame.end.records)} records, the file holds "
                                  f"{len(records)}")
            duration = float(frame.end.seconds)
            if reader.pos != len(reader.data):
                raise reader.fail(f"{len(reader.data) - reader.pos} stray bytes after the end frame")
            break
        if kind != "record":
            raise reader.fail(f"frame {index} is a {kind or 'empty frame'} where a record was expected")
        rec = frame.record
        if int(rec.sequence) != len(records):
            raise reader.fail(f"record {len(records)} carries sequence number {int(rec.sequence)}")
        if rec.direction not in _DIR_FROM_PB:
            raise reader.fail(f"record {len(records)} has no valid direction")
        if not rec.party_id or not rec.message_type:
            raise reader.fail(f"record {len(records)} lacks its party id or message type")
        record = TranscriptRecord(sequence=int(rec.sequence), party_id=rec.party_id,
                                  direction=_DIR_FROM_PB[rec.direction], message_type=rec.message_type,
                                  seconds=float(rec.seconds), call=rec.call, metadata=dict(rec.metadata),
                                  _payload=bytes(rec.payload))
        if message_class(record.message_type) is not None:
            try:
                record.message()
            except InputError as exc:
                raise reader.fail(str(exc)) from None
            object.__setattr__(record, "_payload", None)  # keep the parsed message only
        records.append(record)
        index += 1
    return Transcript(header, tuple(records), duration, source=str(p))


def iter_messages(transcript: Transcript, party_id: str, message_type: str,
                  direction: Direction | None = None) -> Iterator[Message]:
    """The parsed messages of one type of one party, in order."""
    for rec in transcript.of(party_id, message_type, direction):
        yield rec.message()


def run_recorded(public: PublicRows, links: Sequence[PartyLink], config: Any, *, central: Any = None,
                 path: str | os.PathLike[str] | None = None,
                 run: Callable[..., Any] | None = None) -> tuple[Any, Transcript]:
    """Run one session over ``links`` with every message recorded; returns the outcome and the
    transcript. With ``path``, the transcript file is written when the session ends, also when it
    ends in an error (what the coordinator saw at that point); an interrupt writes nothing.

    Parameters
    ----------
    public, links, config, central : as for :func:`securelp.coordinator.protocol.run_secure_lp`.
    path : the ``--transcript`` file, or None.
    run : the session driver (default :func:`securelp.coordinator.protocol.run_secure_lp`; the
        commands pass the one they import, which tests replace).
    """
    if run is None:
        from securelp.coordinator.protocol import run_secure_lp as run  # the protocol does not import this module

    recorder = TranscriptRecorder(public)
    try:
        outcome = run(public, recorder.wrap_all(links), config, central=central)
    except Exception:
        if path is not None:
            write_transcript(recorder.transcript(), path)
        raise
    transcript = recorder.transcript()
    if path is not None:
        write_transcript(transcript, path)
    return outcome, transcript
