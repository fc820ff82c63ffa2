"""End-to-end empirical privacy audit of the protocols: distinguishing tests on the coordinator's view.

Run a protocol many times on two neighbouring inputs, collect everything its coordinator sees
(:mod:`.views`), choose a distinguishing event on one half of the runs and bound eps from below on
the other half with Clopper-Pearson bounds (:mod:`.harness`, after LDP-Audit, DP-Sniper and
Delta-Siege), and compare with the protocol's claim (:mod:`.audit`). Protocol adapters:
:mod:`.census` (the federated regional census release), :mod:`.ldp` (local-privacy collection),
:mod:`.lp` (the secure LP, which claims no DP). ``securelp audit --protocol ...`` is the command.
"""

from securelp.coordinator.dpaudit.audit import CONSISTENT, NO_CLAIM, VIOLATES, ProtocolAudit, audit_protocol
from securelp.coordinator.dpaudit.harness import DistinguishingResult, distinguish, eps_lower_bound, max_detectable_eps
from securelp.coordinator.dpaudit.views import RecordedViews, TranscriptViews, ViewBatch, flatten_views, write_views

__all__ = ["CONSISTENT", "NO_CLAIM", "VIOLATES", "DistinguishingResult", "ProtocolAudit", "RecordedViews",
           "TranscriptViews", "ViewBatch", "audit_protocol", "distinguish", "eps_lower_bound", "flatten_views",
           "max_detectable_eps", "write_views"]
