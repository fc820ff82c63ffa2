"""Attacks on what the coordinator of a secure LP session saw, and statements that follow from them.

One module per attack family, each working on the transcript alone
(:mod:`securelp.coordinator.transcript`):

- :mod:`~securelp.coordinator.audit.monomial`: normalization and round-number scales of the
  positively scaled, shuffled bounded columns; positions from the revealed solution;
- :mod:`~securelp.coordinator.audit.dense`: the column space of a dense masked product, its row
  support and row Gram estimate, sparse recovery of its columns (random pivot rows, l1), and
  their costs;
- :mod:`~securelp.coordinator.audit.known_rows`: the mask rows of rows mode (Bednarz et al.) and
  rows of A assumed known;
- :mod:`~securelp.coordinator.audit.collusion`: the coordinator with 1 .. p-1 parties;
- :mod:`~securelp.coordinator.audit.solution`: the row activity and the revealed x_j.

:func:`audit_transcript` runs them all within a time budget
(:mod:`~securelp.coordinator.audit.session`); :mod:`~securelp.coordinator.audit.statements`
turns the outcomes into each report's ``leakage`` entry; :mod:`~securelp.coordinator.audit.truth`
scores them against the real blocks when a simulation holds them (Mangasarian 2011, PPLP;
Bednarz, Bean, Roughan 2009).
"""

from securelp.coordinator.audit.known_rows import KnownRows, known_rows_from_truth, singleton_rows
from securelp.coordinator.audit.results import AttackOutcome, AttackStatus, RecoveredColumns
from securelp.coordinator.audit.session import (
    DEFAULT_SESSION_BUDGET_S,
    PartyAudit,
    SessionAudit,
    audit_transcript,
    evaluate,
)
from securelp.coordinator.audit.statements import audit_entry, leakage_entry, text_lines
from securelp.coordinator.audit.truth import Truth, load_truth

__all__ = ["DEFAULT_SESSION_BUDGET_S", "AttackOutcome", "AttackStatus", "KnownRows", "PartyAudit", "RecoveredColumns",
           "SessionAudit", "Truth", "audit_entry", "audit_transcript", "evaluate", "known_rows_from_truth",
           "leakage_entry", "load_truth", "singleton_rows", "text_lines"]
