"""What a data owner agrees to: the bounds modes it answers and whether it reveals its x_j.

Mangasarian's PPLP (Optim. Lett. 2011) lets the coordinator ask each party for its masked
block and, after the solve, for its decoded x_j. Two of those requests are the owner's to
grant, not the coordinator's to choose:

- ``BOUNDS_MODE_ROWS`` sends the bound rows B_b' of the party's bounded columns; with them the
  coordinator recovers A_.j exactly (Bednarz, Bean, Roughan, WPES 2009). The default allows
  only ``BOUNDS_MODE_MONOMIAL`` (bounded columns leak up to positive scaling and order).
- revealing x_j hands the coordinator the party's share of the solution (and A_.j x_j). The
  default keeps it: a data owner expects its solution to stay with it unless it says otherwise.

The party reports its policy with its hello (``HelloReply.policy``), so a coordinator can stop
a session whose request a party would refuse before any masked data moves, and the party
refuses, on its own, every request the policy does not allow (``PartySession``). The same
frozen object configures ``securelp party`` (``--allow-bounds``, ``--reveal/--no-reveal``) and
the parties that ``securelp.coordinator.simulation`` builds in-process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from securelp.protos import securelp_pb2 as pb
from securelp.solvers.errors import ConfigError, ProtocolError

#: the bounds modes by name, as the CLI spells them
BOUNDS_MODE_NAMES: dict[str, int] = {"monomial": pb.BOUNDS_MODE_MONOMIAL, "rows": pb.BOUNDS_MODE_ROWS}
_NAME_OF_MODE = {v: k for k, v in BOUNDS_MODE_NAMES.items()}


def bounds_mode_name(mode: int) -> str:
    """``pb.BOUNDS_MODE_ROWS`` -> ``"rows"`` (an unknown value -> its number)."""
    return _NAME_OF_MODE.get(int(mode), str(int(mode)))


@dataclass(frozen=True)
class PartyPolicy:
    """The requests a data owner grants.

    Parameters
    ----------
    allow_bounds : the bounds modes the party answers (names: ``"monomial"``, ``"rows"``);
        default monomial only.
    reveal : whether the party sends its decoded x_j when the coordinator asks; default False.
    """

    allow_bounds: frozenset[str] = frozenset({"monomial"})
    reveal: bool = False

    def __post_init__(self) -> None:
        modes = frozenset(str(m) for m in self.allow_bounds)
        unknown = sorted(modes - set(BOUNDS_MODE_NAMES))
        if unknown:
            raise ConfigError(f"bounds mode {', '.join(unknown)} is not one of {', '.join(BOUNDS_MODE_NAMES)}")
        if not modes:
            raise ConfigError("a party must allow at least one bounds mode (--allow-bounds monomial|rows)")
        object.__setattr__(self, "allow_bounds", modes)
        object.__setattr__(self, "reveal", bool(self.reveal))

    @classmethod
    def from_names(cls, names: Iterable[str], *, reveal: bool = False) -> PartyPolicy:
        """A policy from ``--allow-bounds`` values (each a name or a comma list: ``["monomial,rows"]``)."""
        modes = {part.strip() for name in names for part in str(name).split(",") if part.strip()}
        return cls(frozenset(modes), reveal)

    def allows_mode(self, mode: int) -> bool:
        """Whether the wire bounds mode ``mode`` is allowed."""
        return bounds_mode_name(mode) in self.allow_bounds

    def describe(self) -> str:
        """One line for logs and reports: ``bounds modes monomial; decoded solution kept (--no-reveal)``
        (the party's log never names x_j, so a search for it finds no value either)."""
        modes = ", ".join(m for m in BOUNDS_MODE_NAMES if m in self.allow_bounds)
        shown = "revealed when asked (--reveal)" if self.reveal else "kept (--no-reveal)"
        return f"bounds modes {modes}; decoded solution {shown}"

    def to_pb(self) -> pb.PartyPolicy:
        """The policy as reported in ``HelloReply.policy``."""
        return pb.PartyPolicy(allowed_bounds=[BOUNDS_MODE_NAMES[m] for m in BOUNDS_MODE_NAMES if m in self.allow_bounds],
                              reveal=self.reveal)

    @classmethod
    def from_pb(cls, msg: pb.PartyPolicy, *, who: str = "party") -> PartyPolicy:
        """The policy a party reported; a malformed one is a ``ProtocolError`` naming ``who``."""
        names = []
        for mode in msg.allowed_bounds:
            if mode not in _NAME_OF_MODE:
                raise ProtocolError(f"{who} reported a policy with an unknown bounds mode {int(mode)}")
            names.append(_NAME_OF_MODE[mode])
        if not names:
            raise ProtocolError(f"{who} reported a policy that allows no bounds mode")
        return cls(frozenset(names), bool(msg.reveal))

    def as_dict(self) -> dict[str, object]:
        """For JSON reports: ``{"allow_bounds": ["monomial"], "reveal": false}``."""
        return {"allow_bounds": [m for m in BOUNDS_MODE_NAMES if m in self.allow_bounds], "reveal": self.reveal}


#: what ``securelp party`` and ``PartySession`` grant unless told otherwise
DEFAULT_POLICY = PartyPolicy()
