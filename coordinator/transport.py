"""The coordinator's view of a party: one interface, two transports.

``PartyLink`` is what protocol logic talks to: four calls (hello, mask, decode, close)
carrying ``securelp.v1`` messages. ``InProcessLink`` drives a ``securelp.party.session.PartySession``
in this process, but still round-trips every message through protobuf serialization and
the chunk framing of ``securelp.protos.codec`` -- so a simulation of hundreds of parties exercises
the same bytes as a deployment. ``securelp.coordinator.grpc_link.GrpcPartyLink`` is the gRPC one.

After ``hello``, ``reported_split_id`` holds the split id the party reported for its block
(``securelp split`` writes the same random id into public.npz and every block; gRPC carries it
in the Hello reply's trailing metadata ``securelp-split-id``); None when the party reported
none (a block file or a party from before split ids existed).

Byte counters are from the party's point of view: ``bytes_sent`` is what the party sent
(replies), ``bytes_received`` what it received (requests), counted as serialized payload
bytes (framing overhead excluded, identical for both transports).
"""

from __future__ import annotations

import abc

from securelp.protos import securelp_pb2 as pb
from securelp.protos.codec import join_chunks, split_payload


class PartyLink(abc.ABC):
    """A connection from the coordinator to one party."""

    def __init__(self, party_id: str) -> None:
        self.party_id = party_id
        self.bytes_sent = 0
        self.bytes_received = 0
        #: the split id the party reported with its hello (None: none reported)
        self.reported_split_id: str | None = None

    @property
    def transport(self) -> str:
        return "unknown"

    @abc.abstractmethod
    def hello(self, request: pb.HelloRequest) -> pb.HelloReply: ...

    @abc.abstractmethod
    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock: ...

    @abc.abstractmethod
    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply: ...

    @abc.abstractmethod
    def close(self, request: pb.CloseRequest) -> None:
        """Tell the party the session ended (best effort; never raises for a dead peer)."""

    def shutdown(self) -> None:
        """Release local resources (channels); the default has none."""

    def cancel_calls(self) -> None:
        """End this link's calls in flight at once (an interrupted run must not wait out their
        deadlines); the link stays usable for a Close. The default has nothing to cancel."""


def _roundtrip(message, cls):  # type: ignore[no-untyped-def]
    """Serialize, frame, reassemble, parse: the bytes a real transport would carry."""
    payload = message.SerializeToString()
    return cls.FromString(join_chunks(split_payload(payload), peer="in-process")), len(payload)


class InProcessLink(PartyLink):
    """A party simulated in this process (every message still goes through protobuf)."""

    def __init__(self, session: object) -> None:
        super().__init__(session.party_id)  # type: ignore[attr-defined]
        self._session = session

    @property
    def transport(self) -> str:
        return "inprocess"

    def _call(self, handler, request, request_cls, reply_cls):  # type: ignore[no-untyped-def]
        parsed, n_in = _roundtrip(request, request_cls)
        self.bytes_received += n_in
        reply = handler(parsed)
        parsed_reply, n_out = _roundtrip(reply, reply_cls)
        self.bytes_sent += n_out
        return parsed_reply

    def hello(self, request: pb.HelloRequest) -> pb.HelloReply:
        reply = self._call(self._session.hello, request, pb.HelloRequest, pb.HelloReply)
        self.reported_split_id = getattr(self._session, "split_id", "") or None
        return reply

    def mask(self, request: pb.MaskRequest) -> pb.MaskedBlock:
        return self._call(self._session.mask, request, pb.MaskRequest, pb.MaskedBlock)

    def decode(self, notice: pb.SolutionNotice) -> pb.DecodeReply:
        return self._call(self._session.decode, notice, pb.SolutionNotice, pb.DecodeReply)

    def close(self, request: pb.CloseRequest) -> None:
        self._call(self._session.close, request, pb.CloseRequest, pb.CloseReply)
