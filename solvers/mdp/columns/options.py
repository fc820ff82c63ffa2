"""The column decomposition's tunables: :class:`ColumnGenerationOptions` with its first-order starts'
(:class:`StartOptions`) and its IPM start's (:class:`IPMStartOptions`), passed to
:func:`securelp.solvers.mdp.columns.driver.solve_colgen`."""

from __future__ import annotations

from dataclasses import dataclass, field

from securelp.solvers.mdp.ipm.options import IPMOptions
from securelp.solvers.options import at_least, boolean, fraction, nested, non_negative, option, positive, validate

__all__ = ["ColumnGenerationOptions", "IPMStartOptions", "StartOptions"]


@dataclass(frozen=True)
class StartOptions:
    """Tunables of the column decomposition's first-order starts and of ``auto``'s choice among them."""

    dual_ascent_min_size: int = option(
        300_000, "components with more records x kept outputs get a start by default (a strong early bound "
        "where a full pricing round takes minutes; smaller ones price cheaply)", at_least(0))
    pdlp_min_size: int = option(
        2_500, "the PDLP-based and IPM starts never run on components below this many records x kept outputs "
        "(their pricing LPs are cheaper)", at_least(0))
    pdlp_max_nonzeros: int = option(
        400_000_000, "above this many nonzeros in the component LP PDLP on the whole LP is replaced by the "
        "screened start (memory)", at_least(0))
    pdlp_memory_share: float = option(0.7, "the PDLP start may plan on at most this share of the memory available",
                                      fraction())
    pdlp_seconds_per_nonzero_iteration: float = option(
        17e-9, "PDLP's seconds per iteration per nonzero, this machine's estimate: auto's expected PDLP "
        "iterations under a time limit", positive())
    pdlp_budget_share: float = option(
        0.9, "under a time limit a pdlp start gets this share of it, the column generation the rest", fraction())
    pdlp_polish_share: float = option(
        0.5, "share of a pdlp start's budget for the smoothed ascent from PDLP's duals, which raises the bound "
        "faster than more PDLP iterations", fraction())
    pdlp_screen_share: float = option(
        1.0 / 3.0, "share of a pdlp start's budget for PDLP on the outputs the ascent after it screens: better "
        "start columns (upper bound) for less PDLP on the whole LP (lower bound); 0: off", fraction())
    polish_smoothing: float = option(
        0.1, "the ascent after PDLP starts with a smoothing bias of this fraction of the gap PDLP left: "
        "larger first undoes PDLP's duals, smaller ascends slowly", positive())
    auto_pdlp_min_iterations: float = option(
        300, "under a time limit auto takes the pdlp start when its PDLP on the whole LP gets at least this "
        "many expected iterations, else the screened start", non_negative())
    screen_min_iterations: float = option(
        300, "... and the screened start when its PDLP gets this many on the screened outputs, else the "
        "smoothed ascent", non_negative())
    screen_budget_share: float = option(
        0.9, "under a time limit the screened and ipm starts get this share of it, the column generation the "
        "rest", fraction())
    screen_ascent_share: float = option(
        1.0 / 3.0, "share of the screened start's budget for its first ascent (a bound, and the screen)",
        fraction())
    screen_resume_share: float = option(
        1.0 / 3.0, "share of the screened start's budget for the ascent again after its PDLP (0: none)",
        fraction())
    screen_max_outputs: int = option(
        200, "at most this many outputs in the screened PDLP (fewer when memory is short): more outputs, "
        "better columns, slower PDLP iterations", at_least(1))
    screen_pdlp_iterations: int = option(
        2_500, "at most this many PDLP iterations on the screened outputs (its repaired iterate gets worse "
        "with longer runs); the rest of its time goes to the ascent after it", at_least(1))
    screen_temperature: float = option(
        1e-3, "softmin temperature of the screen, relative to each record's row minimum: how near the "
        "minimum an output must be to count as used", positive())
    ascent_parallel_min: int = option(
        1_000_000, "the smoothed ascent runs on threads from this many iterate entries on (below, the threads' "
        "overhead outweighs the work; the iterates are the same either way)", at_least(0))
    ascent_memory_share: float = option(0.6, "the ascent may plan on at most this share of the memory available",
                                        fraction())
    unlimited_budget: float = option(
        300.0, "without a time limit the pdlp, screened and ipm starts get this many seconds", positive())
    smoothed_share: float = option(
        0.2, "the smoothed ascent's share of a time limit (without one: smoothed_unlimited seconds)", fraction())
    smoothed_unlimited: float = option(60.0, "the smoothed ascent's seconds without a time limit", positive())
    ipm_switch_iterations: int = option(
        25, "auto on a component without a start: when the column generation has not closed the gap after "
        "this many iterations, the ipm start runs after all and the column generation goes on from it",
        at_least(1))
    ipm_switch_min_records: int = option(
        100, "... on components of at least this many records (a smaller one's column generation is cheap) "
        "and not on dense ones (lazy rows)", at_least(0))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class IPMStartOptions:
    """Tunables of the column decomposition's ``ipm`` start (output generation with the structured IPM)."""

    ascent_iterations: int = option(
        300, "iterations of smoothed ascent that screen the outputs: the screen, and the rounds after it, "
        "the same on any machine where they bind first", at_least(0))
    ascent_seconds: float = option(
        60.0, "under a time limit the screening ascent takes at most this many seconds ...", non_negative())
    ascent_share: float = option(0.2, "... and at most this share of the start's budget", fraction())
    max_outputs: int = option(
        200, "outputs the first round holds (fewer when their inverses would not fit in memory)", at_least(1))
    max_rounds: int = option(
        6, "IPM rounds at most, each on the outputs of the last still in use plus those the pricing at its "
        "duals finds violated", at_least(1))
    probe_rounds: int = option(
        3, "only the first this many rounds may stop at their probe; the later ones run to the gap",
        at_least(0))
    max_grown_outputs: int = option(
        400, "the rounds grow to at most this many outputs (fewer when they would not fit in memory)",
        at_least(1))
    probe_gap: float = option(
        1e-3, "a round prices the other outputs once on the way, at this relative gap, and restarts with the "
        "violated ones at once", non_negative())
    prune_below: float = option(
        1e-2, "between rounds an output whose entries are all below this leaves (unless some record's "
        "largest); one the optimum needs comes back when found violated", non_negative())
    prune_gap: float = option(
        1e-2, "a round that holds the cap's outputs drops such outputs within the round from this relative "
        "gap on, making room for its probe (0: never)", non_negative())
    memory_share: float = option(0.6, "the ipm start may plan on at most this share of the memory available",
                                 fraction())
    gap_share: float = option(
        0.25, "a round stops when its restricted LP's relative gap is this share of the target gap",
        positive())
    expected_iterations: float = option(
        100, "auto's estimate of the IPM's iterations, which must fit in the start's budget", non_negative())
    seconds_per_cube: float = option(
        2.9e-11, "auto's estimate of the IPM's seconds per output, per record cubed and per iteration (this "
        "machine's): larger makes auto prefer the other starts", positive())
    ipm: IPMOptions = field(default_factory=IPMOptions,
                            metadata=nested(IPMOptions, "the structured IPM's own tunables"))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class ColumnGenerationOptions:
    """Tunables of the column decomposition (solvers/mdp/columns)."""

    dominance: bool = option(
        True, "drop the outputs a lossy transport proves dominated in the cone's dual order before the column "
        "generation: fewer outputs to price for the search's time", boolean())
    dominance_share: float = option(
        0.05, "under a time limit the dominance search gets at most this share of it per component; outputs "
        "not visited are kept", fraction())
    dominance_tries: int = option(3, "dominators tried per output", at_least(1))
    dominance_neighbours: int = option(64, "... among this many nearest live outputs", at_least(1))
    transport_max_records: int = option(
        4_000, "components of at most this many records get transport certificates and the dominance search "
        "(their m x m tables take about 24 bytes a pair)", at_least(0))
    status_min_records: int = option(
        200, "components of at least this many records report their slow phases to a status line",
        at_least(0))
    finish_reserve: float = option(
        2.0, "iterations stop this many times the longest repair and verification of the rows before the time "
        "limit, for what runs after them", non_negative())
    box_widenings: int = option(
        8, "widenings (x4) of a dual box under which the master has no solution before the box is dropped",
        at_least(0))
    enter_factor: float = option(
        10.0, "a priced column enters only below minus this many master tolerances of reduced cost at unit "
        "mass (smaller ones do not pivot in and would be priced again and again)", positive())
    master_tighten: float = option(
        100.0, "when the column generation stalls short of the gap, the master's tolerances are divided by "
        "this and it goes on", positive())
    stall_tolerance: float = option(
        1e-10, "the floor of that tightening (HiGHS refuses 1e-11): lower closes tighter gaps", positive())
    master_accept_infeasibility: float = option(
        1e-5, "a master solve that no fallback ends 'Optimal' is still taken at unit-row residuals up to this "
        "(its duals only steer the pricing; its mechanism is repaired and verified)", non_negative())
    column_idle_solves: int = option(
        10, "a column is retired from the master after this many solves in a row at zero weight ...",
        at_least(1))
    column_pool_per_record: float = option(
        4, "... once the master holds more than this many columns per record: faster master pivots for "
        "columns priced again when needed", non_negative())
    pricing_dual_min_ratio: float = option(
        8.0, "components with at least this many mDP rows per record price through the pricing LP's dual "
        "(one basis row per record instead of one per mDP row)", non_negative())
    lazy_rows_min_ratio: float = option(
        64.0, "components with at least this many mDP rows per record give their pricing LPs only the rows "
        "they need (dense mDP graphs)", non_negative())
    lazy_start_neighbours: int = option(
        8, "every lazy pricing LP carries the rows between each record and this many nearest neighbours",
        at_least(0))
    lazy_add_per_record: int = option(
        64, "rows added per record and separation round (its most violated ones): fewer rounds against larger "
        "LPs", at_least(1))
    starts: StartOptions = field(default_factory=StartOptions,
                                 metadata=nested(StartOptions, "the first-order starts' tunables"))
    ipm_start: IPMStartOptions = field(default_factory=IPMStartOptions,
                                       metadata=nested(IPMStartOptions, "the ipm start's tunables"))

    def __post_init__(self) -> None:
        validate(self)
