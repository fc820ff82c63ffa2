"""The ``securelp`` console script: one parser, one module per subcommand.

Subcommand modules live in ``securelp.coordinator.commands`` and are imported lazily, so
``securelp census ...`` does not pay for importing gRPC and ``securelp --help`` stays
fast. Typed errors (``securelp.solvers.errors.SecureLPError``) become a one-line message on
stderr and their exit code; only an unexpected exception prints a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

from securelp.coordinator.exit_cleanups import run_exit_cleanups
from securelp.solvers.errors import ExitCode, SecureLPError

#: subcommand name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("securelp.coordinator.commands.demo", "run Mangasarian's example end to end over gRPC with mTLS"),
    "solve": ("securelp.coordinator.commands.solve", "solve an MPS file securely with N simulated parties"),
    "split": ("securelp.coordinator.commands.split", "split an MPS file into one private block per party"),
    "party": ("securelp.coordinator.commands.party", "run one data-owner process (gRPC server)"),
    "coordinator": ("securelp.coordinator.commands.coordinate", "run the coordinator against party processes"),
    "certs": ("securelp.coordinator.commands.certs", "make a session CA, a coordinator and party certificates"),
    "mdp": ("securelp.coordinator.commands.mdp", "optimal metric-DP perturbation (direct LP or Benders)"),
    "perturb": ("securelp.coordinator.commands.perturb", "release true records through a saved mDP mechanism"),
    "ldp": ("securelp.coordinator.commands.ldp", "local d-privacy: Linear-Equations mechanism and baselines"),
    "census": ("securelp.coordinator.commands.census", "hierarchical DP group-size releases (PGSR)"),
    "audit": ("securelp.coordinator.commands.audit", "run the leakage attacks on a session transcript"),
    "examples": ("securelp.coordinator.commands.examples", "write the example inputs of the tour and the tutorial"),
}


#: subcommands that never construct a HiGHS model
_NO_SOLVER_COMMANDS = frozenset({"certs", "party", "perturb", "examples"})


class _Parser(argparse.ArgumentParser):
    """argparse with our exit code for usage errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(int(ExitCode.USAGE), f"{self.prog}: error: {message}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the parser; with ``only`` set, import just that subcommand's module."""
    parser = _Parser(prog="securelp", description="Multi-party privacy-preserving optimization.",
                     epilog="Reference: docs/reference/cli.md; exit codes: docs/reference/exit-codes.md.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"securelp {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module_name, help_text) in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            sub.add_parser(name, help=f"{help_text} (not available in this build)")
            continue
        module.register(sub)
    return parser


def _version() -> str:
    from securelp import __version__

    return __version__


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    env_level = os.environ.get("SECURELP_LOG_LEVEL")
    if env_level:
        level = getattr(logging, env_level.upper(), level)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(only=command if command in COMMANDS else None)
    args = parser.parse_args(args_list)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    if not hasattr(args, "func"):
        print(f"securelp {args.command}: not available in this build", file=sys.stderr)
        return int(ExitCode.CONFIG)
    _configure_logging(args.verbose)
    if args.command not in _NO_SOLVER_COMMANDS:
        from securelp.solvers.lp.highs import consume_highs_banner

        try:
            consume_highs_banner()  # keep HiGHS's banner out of stdout (``--json -``); imported while signals are noted
        except ImportError as exc:  # under ulimit -v: "failed to map segment from shared object"
            if "failed to map" not in str(exc) and "Cannot allocate memory" not in str(exc):
                raise
            print(f"securelp {args.command}: error: out of memory loading HiGHS ({str(exc)[-80:]}); the machine or "
                  "a limit such as ulimit -v left too little for this run", file=sys.stderr)
            return int(ExitCode.RESOURCE)
    try:
        _terminate_like_interrupt()
        if args.command in _PROMPT_EXIT_COMMANDS:
            exit_promptly_on_interrupt(_PROMPT_EXIT_COMMANDS[args.command], command=args.command)
        if _console and _signalled:  # a signal while the command loaded (_defer_early_signals)
            raise KeyboardInterrupt
        return int(args.func(args))
    except SecureLPError as exc:
        # a path that is not valid UTF-8 (surrogate escapes) must not turn the message into a traceback
        message = f"securelp {args.command}: error: {exc}".encode("utf-8", "backslashreplace").decode("utf-8")
        print(message, file=sys.stderr)
        return int(exc.exit_code)
    except MemoryError as exc:  # a limit the estimates missed (they refuse what they foresee with exit 12)
        detail = f" ({str(exc)[:200]})" if str(exc) else ""
        print(f"securelp {args.command}: error: out of memory{detail}; the machine, its cgroup or a limit such "
              "as ulimit -v left too little for this run", file=sys.stderr)
        return int(ExitCode.RESOURCE)
    except KeyboardInterrupt:
        return _interrupted(args.command)
    except RuntimeError as exc:
        if _console and _signalled:  # e.g. a module whose import the interrupt cut short
            return _interrupted(args.command)
        if "can't start new thread" not in str(exc):
            raise
        print(f"securelp {args.command}: error: no new thread could be started ({exc}); the machine or a limit "
              "such as ulimit -v or ulimit -u left too little for this run", file=sys.stderr)
        return int(ExitCode.RESOURCE)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except Exception:
        if _console and _signalled:  # an unexpected error after an interrupt: the interrupt's doing
            logging.getLogger(__name__).debug("after %s", _signalled[0], exc_info=True)
            return _interrupted(args.command)
        raise


def _interrupted(command: str) -> int:
    """The interrupt path: no second signal, the registered clean-ups, one line, 130."""
    _ignore_further_interrupts()  # a second signal must not turn the clean-up into a traceback
    run_exit_cleanups()  # what an interrupted clean-up left (normally nothing)
    what = f" by {_signalled[0]}" if _signalled else ""
    print(f"securelp {command}: interrupted{what}", file=sys.stderr)
    return int(ExitCode.INTERRUPTED)


#: seconds an interrupted solver run may take to exit after the signal: the main thread can be
#: inside one long C call (a HiGHS master or block solve of Qiu's BD: tens of seconds on Rome),
#: where Python cannot raise KeyboardInterrupt, and worker threads in such calls hold the exit
INTERRUPT_EXIT_GRACE_S = 3.0

#: commands whose interrupted run is ended after this many seconds even from inside a C call
#: (after the clean-ups of :func:`run_exit_cleanups`); ``mdp`` arms it itself. Not ``party``: its
#: server handles SIGTERM/SIGINT and has its own watchdog (``--grace``).
_PROMPT_EXIT_COMMANDS = {"solve": 5.0, "demo": 5.0, "coordinator": 5.0, "census": 5.0, "ldp": 5.0}

_console = False  # set by the console script only: in-process callers (tests) keep their signals
_signalled: list[str] = []  # names of the signals turned into KeyboardInterrupt (handler: append only)

def _raise_interrupt(signum: int, frame: object) -> None:
    _signalled.append(signal.Signals(signum).name)  # no lock: a handler may be re-entered
    raise KeyboardInterrupt


def _terminate_like_interrupt() -> None:
    """In the console script (main thread), SIGTERM -- ``kill``, ``timeout``, a container stop --
    takes the path of Ctrl-C: KeyboardInterrupt, clean-up (``finally`` blocks and context managers:
    temporary directories, child processes, sessions aborted), one line, code 130. Without it the
    process died at once with 143, no message, and its temporary keys and blocks left behind. An
    ignored SIGTERM stays ignored; a handler installed later (the party server's) takes over."""
    if _console:
        _take_signals(_raise_interrupt)  # SIGINT too: the same, and it names the signal


def _take_signals(handler: Callable[[int, object], None]) -> None:
    """Install ``handler`` for SIGTERM and SIGINT where each still has its default (or the
    start-up's :func:`_note_early_signal`); main thread only. An ignored signal stays ignored, a
    handler someone else installed stays."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if signal.getsignal(sig) in (default, _note_early_signal):
            signal.signal(sig, handler)


def _ignore_further_interrupts() -> None:
    if _console and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is _raise_interrupt:
                signal.signal(sig, signal.SIG_IGN)


def exit_promptly_on_interrupt(grace_s: float = INTERRUPT_EXIT_GRACE_S, *, command: str = "") -> None:
    """For a solver command run from the console script: from the first SIGINT or SIGTERM on, the
    process ends with code 130 within ``grace_s`` seconds, whatever C call it is in. The C-level
    signal handler writes the signal's number to a wakeup pipe at once, and a daemon thread that
    reads it starts the countdown; a run that handles the interrupt in time exits on its own first.
    At the deadline the thread runs :func:`run_exit_cleanups` (temporary directories with keys and
    blocks removed, child processes killed), writes one line and calls ``os._exit``. Nothing is
    lost: reports are written only by runs that finish. A no-op outside the console script and off
    the main thread; calling it again does nothing."""
    global _prompt_exit_armed
    if not _console or threading.current_thread() is not threading.main_thread() or _prompt_exit_armed:
        return
    _prompt_exit_armed = True
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    _terminate_like_interrupt()
    label = f"securelp {command}" if command else "securelp"

    def watch() -> None:
        while True:
            data = os.read(r, 64)
            if not data or any(b in (signal.SIGINT, signal.SIGTERM) for b in data):
                break
        time.sleep(grace_s)
        run_exit_cleanups()
        try:
            os.write(2, f"{label}: interrupted; shutdown did not finish within {grace_s:g} s; "
                        f"exiting (code {int(ExitCode.INTERRUPTED)})\n".encode())
        finally:
            os._exit(int(ExitCode.INTERRUPTED))

    threading.Thread(target=watch, name="interrupt-watch", daemon=True).start()


_prompt_exit_armed = False


def entry() -> None:
    """The ``securelp`` console script: :func:`main`, then exit with its code.

    A SIGINT or SIGTERM is heard from the moment this module is imported, before the command's
    modules load (numpy and the command take 0.2-0.3 s to load; a SIGTERM then would otherwise kill
    the process with 143): one line and 130 like any other interrupt. Only the interpreter's own
    start-up, about 35 ms, comes before."""
    global _console
    _console = True
    inherited_ignored = {sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is signal.SIG_IGN}
    _defer_early_signals()
    try:
        code = main()
    except KeyboardInterrupt:  # a signal in the instant between the run's end and the line below
        print("securelp: interrupted", file=sys.stderr)
        code = int(ExitCode.INTERRUPTED)
    _after_the_run(code, inherited_ignored)
    sys.exit(code)


def _note_early_signal(signum: int, frame: object) -> None:
    _signalled.append(signal.Signals(signum).name)  # acted on by main once the command is loaded


def _defer_early_signals() -> None:
    """From the console script's start until :func:`main` has loaded the command, a SIGINT or
    SIGTERM is noted, then acted on (one line, 130) before the command runs. Not raised where it
    comes: a KeyboardInterrupt inside an import leaves a half-imported module (measured: numpy's C
    extension turned one into "PyCapsule_Import could not import module datetime", exit 1 and a
    63-line traceback)."""
    _take_signals(_note_early_signal)


def _after_the_run(code: int, inherited_ignored: set[int]) -> None:
    """The run is over (its outputs written or refused). A SIGINT while the interpreter shuts down
    ends it at once with the run's code (not a KeyboardInterrupt traceback from an exit function);
    SIGTERM gets its default action back, so that a shutdown that hangs stays killable (seen under
    ``ulimit -v``: gRPC's channel close in a finalizer, with the signals ignored after an interrupt,
    left only SIGKILL). A signal the process inherited ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return

    def exit_now(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken stream: exit all the same
                stream.flush()
        os._exit(code)

    if signal.SIGTERM not in inherited_ignored:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if signal.SIGINT not in inherited_ignored:
        signal.signal(signal.SIGINT, exit_now)


if __name__ == "__main__":  # pragma: no cover
    entry()
