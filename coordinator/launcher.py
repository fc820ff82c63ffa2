"""Local party processes for ``securelp demo`` and the integration tests.

``LocalParties`` is MPyC's "M local processes relaunched by the program itself": it
writes a fresh session CA and certificates plus each party's block file into a work
directory, starts one ``securelp party`` process per block, and hands out links with
mutual TLS, in either connection direction:

- dial-in (default): each party listens on 127.0.0.1 port 0; the launcher reads each
  ``LISTENING host:port`` line and hands out ``GrpcPartyLink``s;
- dial-out (``connect=True``): the launcher listens (a ``PartyListener`` on 127.0.0.1 port 0),
  each party is started with ``--connect`` and prints ``CONNECTED host:port``, and the links
  run over the streams the parties opened.

With ``serve=True`` the parties are long-running (``--serve``): :meth:`LocalParties.links`
may be called once per session.

No orphan on any exit path:

- leaving the ``with`` block (normally, by an exception or by Ctrl-C) closes the links,
  sends SIGTERM, waits ``grace_s`` and SIGKILLs what is left, then reaps every child;
- if the coordinator process itself dies (even ``kill -9``), each child gets SIGTERM from
  the kernel (once per launcher thread as they exit; the party's handler is re-entrant):
  the child asks for it with ``prctl(PR_SET_PDEATHSIG)`` (Linux) as soon as
  it starts (``die_with_parent``), then checks its parent is still the launcher, closing
  the window between fork and prctl. This is done in the child rather than in a
  ``preexec_fn``: a ``preexec_fn`` forces ``fork()`` of a process that runs gRPC threads,
  which may deadlock in the child; without one, ``subprocess`` can use ``vfork``;
- a party that never hears from a coordinator exits after its idle timeout.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from securelp.coordinator.certs import validate_party_ids, write_session_certs
from securelp.coordinator.shaping import LinkShape, shaped_addresses
from securelp.party.policy import DEFAULT_POLICY, PartyPolicy
from securelp.solvers.errors import TransportError
from securelp.solvers.lp.partition import ColumnBlock, save_block

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
#: environment variable through which a launcher tells a party process its pid
PARENT_PID_ENV = "SECURELP_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its launcher dies (Linux only).

    Effective only when ``SECURELP_PARENT_PID`` is set (by ``LocalParties``). If the
    launcher is already gone (the process was re-parented), exit at once.

    Returns
    -------
    True if the death signal is armed.
    """
    expected = os.environ.get(PARENT_PID_ENV)
    if not expected or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d); relying on the idle timeout", ctypes.get_errno())
        return False
    if str(os.getppid()) != expected:  # the launcher died before prctl took effect
        os._exit(int(128 + sig))
    return True


class LocalParties:
    """One ``securelp party`` process per block on localhost (a context manager).

    Parameters
    ----------
    blocks : the parties' private blocks (their ids name the processes).
    workdir : an existing directory for certificates, block files and party logs.
    insecure : plaintext gRPC (for debugging only).
    seed : reproducible-simulation mode; party j gets the seed ``f"{seed}/{id}"``.
    startup_timeout : seconds every party gets to print ``LISTENING``.
    idle_timeout : each party's ``--idle-timeout``.
    grace_s : seconds between SIGTERM and SIGKILL on exit.
    blas_threads : BLAS/OpenMP threads per party process; None: cores // parties (at least
        1), so parties masking at the same time do not oversubscribe the cores. Variables
        already set in the environment win.
    policy : every party's policy, passed as ``--allow-bounds`` and ``--reveal/--no-reveal``
        (default: the default of ``securelp party``).
    connect : dial-out: the parties dial a listener of this process (``--connect``).
    serve : long-running parties (``--serve``): one session after another.
    keepalive_s : the runtime's keepalive, on both sides (``--keepalive``).
    outputs : each party writes its x_j to ``WORKDIR/<id>-x.csv`` (``--out``; :meth:`result_path`).
    link_shapes : each party's shaped link (``securelp.coordinator.shaping``): the coordinator reaches
        a listening party, or a dialing party reaches the coordinator, through a proxy of that shape.
    """

    def __init__(self, blocks: Sequence[ColumnBlock], workdir: Path, *, insecure: bool = False,
                 seed: str | None = None, startup_timeout: float = 30.0, idle_timeout: float = 600.0,
                 grace_s: float = 5.0, blas_threads: int | None = None,
                 policy: PartyPolicy = DEFAULT_POLICY, connect: bool = False, serve: bool = False,
                 keepalive_s: float = 10.0, outputs: bool = False,
                 link_shapes: Mapping[str, LinkShape] | None = None) -> None:
        self.blocks = list(blocks)
        self.ids = validate_party_ids([b.party_id for b in self.blocks])
        self.workdir = Path(workdir)
        self.insecure = insecure
        self.seed = seed
        self.startup_timeout = startup_timeout
        self.idle_timeout = idle_timeout
        self.grace_s = grace_s
        self.policy = policy
        self.blas_threads = blas_threads or max(1, (os.cpu_count() or 1) // max(1, len(self.blocks)))
        self.certs_dir = self.workdir / "certs"
        self.connect = connect
        self.serve = serve
        self.keepalive_s = keepalive_s
        self.outputs = outputs
        self.link_shapes = dict(link_shapes or {})
        self._proxies: contextlib.ExitStack = contextlib.ExitStack()
        self._party_addresses: dict[str, str] = {}  # dial-in: where the coordinator reaches each party
        self.listener: object | None = None  # dial-out: the PartyListener the parties dial
        self.coordinator_address = ""
        self._sessions_handed = 0
        self.endpoints: dict[str, str] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._readers: dict[str, threading.Thread] = {}
        self._stdout: dict[str, collections.deque[str]] = {}
        self._listening: dict[str, threading.Event] = {}
        self._links: list[object] = []
        self._cleanup_key: int | None = None

    # -- start ------------------------------------------------------------------------
    def __enter__(self) -> LocalParties:  # noqa: PYI034 - typing.Self needs Python 3.11
        from securelp.coordinator.exit_cleanups import register_exit_cleanup

        # if the console script is forced out after an interrupt (stuck in a C call), no party survives
        self._cleanup_key = register_exit_cleanup(self._kill_all)
        try:
            self._start()
        except BaseException:
            self._stop(error=True)
            raise
        return self

    def _kill_all(self) -> None:
        """SIGKILL every party still running (from any thread; no waiting)."""
        for proc in list(self._procs.values()):
            if proc.poll() is None:
                try:
                    proc.kill()
                except OSError:
                    pass

    def _start(self) -> None:
        if not self.workdir.is_dir():
            raise TransportError(f"work directory {self.workdir} does not exist")
        if not self.insecure:
            write_session_certs(self.certs_dir, self.ids, force=True)
        dial_to: dict[str, str] = {}
        if self.connect:
            self._listen()
            dial_to = self._proxies.enter_context(
                shaped_addresses({pid: self.coordinator_address for pid in self.ids}, self.link_shapes))
        env = dict(os.environ)
        env[PARENT_PID_ENV] = str(os.getpid())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, str(self.blas_threads))
        for block in self.blocks:
            pid = block.party_id
            data = self.workdir / f"{pid}.npz"
            save_block(block, data)
            where = ["--connect", dial_to[pid]] if self.connect else ["--listen", "127.0.0.1:0"]
            cmd = [sys.executable, "-m", "securelp.coordinator.cli", "party", *where, "--data", str(data),
                   "--id", pid, "--idle-timeout", str(self.idle_timeout), "--keepalive", str(self.keepalive_s)]
            if self.serve:
                cmd.append("--serve")
            if self.outputs:
                cmd += ["--out", str(self.result_path(pid))]
            cmd += ["--insecure"] if self.insecure else ["--certs", str(self.certs_dir)]
            cmd += ["--allow-bounds", ",".join(sorted(self.policy.allow_bounds)),
                    "--reveal" if self.policy.reveal else "--no-reveal"]
            if self.seed is not None:
                cmd += ["--seed", f"{self.seed}/{pid}"]
            with open(self._log_path(pid), "wb") as err:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                        env=env, cwd=str(self.workdir), close_fds=True)
            self._procs[pid] = proc
            self._stdout[pid] = collections.deque(maxlen=50)
            self._listening[pid] = threading.Event()
            reader = threading.Thread(target=self._read_stdout, args=(pid, proc), daemon=True,
                                      name=f"party-stdout-{pid}")
            reader.start()
            self._readers[pid] = reader
        end = time.monotonic() + self.startup_timeout
        for pid in self.ids:
            proc = self._procs[pid]
            while not self._listening[pid].wait(timeout=0.05):
                if proc.poll() is not None:
                    self._readers[pid].join(timeout=1.0)
                    if self._listening[pid].is_set():
                        break
                    raise TransportError(f"party {pid} exited with code {proc.returncode} before "
                                         f"{'connecting' if self.connect else 'listening'}: {self.stderr_tail(pid)}")
                if time.monotonic() > end:
                    raise TransportError(f"party {pid} did not report {'CONNECTED' if self.connect else 'LISTENING'} "
                                         f"within {self.startup_timeout:g} s: {self.stderr_tail(pid)}")
        log.info("started %d party processes: %s", len(self.ids),
                 ", ".join(f"{p}@{a}" for p, a in self.endpoints.items()))

    def _read_stdout(self, pid: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:  # drains until EOF so the child never blocks on a full pipe
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._stdout[pid].append(line)
            if line.startswith(("LISTENING ", "CONNECTED ")) and not self._listening[pid].is_set():
                self.endpoints[pid] = line.split(" ", 1)[1].strip()
                self._listening[pid].set()
        proc.stdout.close()

    def _listen(self) -> None:
        """Dial-out: the listener the parties connect to, on 127.0.0.1 port 0."""
        from securelp.coordinator.certs import COORDINATOR_ID, load_identity
        from securelp.coordinator.listener import PartyListener
        from securelp.protos.channels import ServerTls

        tls = None
        if not self.insecure:
            ident = load_identity(self.certs_dir, COORDINATOR_ID)
            tls = ServerTls(ident.private_key, ident.certificate, ident.ca_certificate)
        listener = PartyListener("127.0.0.1:0", tls=tls, insecure=self.insecure, expected=self.ids,
                                 keepalive_s=self.keepalive_s)
        self.coordinator_address = f"127.0.0.1:{listener.start()}"
        self.listener = listener

    def result_path(self, party_id: str) -> Path:
        """Where a party writes its x_j (with ``outputs``)."""
        return self.workdir / f"{party_id}-x.csv"

    def _log_path(self, pid: str) -> Path:
        return self.workdir / f"{pid}.log"

    def stderr_tail(self, party_id: str, lines: int = 5) -> str:
        """The last lines of a party's stderr (its log), for error messages."""
        try:
            text = self._log_path(party_id).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        tail = " | ".join(text[-lines:])
        return tail or "(its stderr is empty)"

    def stdout_lines(self, party_id: str) -> list[str]:
        """What a party printed on stdout so far (``LISTENING``, its final status line)."""
        return list(self._stdout.get(party_id, ()))

    # -- use ----------------------------------------------------------------------------
    @property
    def processes(self) -> dict[str, int]:
        """Process id of each party."""
        return {pid: proc.pid for pid, proc in self._procs.items()}

    def links(self, deadline_s: float = 120.0, *, wait_ready: bool = True,
              ready_timeout: float | None = None) -> list[object]:
        """One ``GrpcPartyLink`` per party (mTLS unless insecure); closed on exit.

        With ``wait_ready`` (default), each link first checks the party's health service,
        which also sets up its TLS connection -- as ``securelp coordinator --wait`` does --
        so a session's timings do not include connection set-up. ``ready_timeout``
        defaults to ``startup_timeout``.
        """
        from concurrent.futures import ThreadPoolExecutor

        from securelp.coordinator.grpc_link import ChannelTls, GrpcPartyLink

        if self.listener is not None:  # dial-out: the parties' streams, once all are connected
            if self._sessions_handed:
                self.listener.new_session()  # type: ignore[attr-defined]
            self._sessions_handed += 1
            timeout = self.startup_timeout if ready_timeout is None else ready_timeout
            return list(self.listener.links(timeout, deadline_s))  # type: ignore[attr-defined]
        tls = None if self.insecure else ChannelTls.from_dir(self.certs_dir)
        if not self._party_addresses:  # the shaped links, once, for every session of these parties
            self._party_addresses = self._proxies.enter_context(
                shaped_addresses({pid: self.endpoints[pid] for pid in self.ids}, self.link_shapes))
        made = [GrpcPartyLink(pid, self._party_addresses[pid], tls=tls, insecure=self.insecure, deadline_s=deadline_s,
                              keepalive_s=self.keepalive_s)
                for pid in self.ids]
        self._links.extend(made)
        if wait_ready:
            with ThreadPoolExecutor(max_workers=min(16, len(made))) as pool:
                timeout = self.startup_timeout if ready_timeout is None else ready_timeout
                for fut in [pool.submit(link.wait_ready, timeout) for link in made]:
                    fut.result()
        return list(made)

    def kill(self, party_id: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one party (tests of a party dying or hanging mid-session)."""
        proc = self._procs[party_id]
        if proc.poll() is None:
            proc.send_signal(sig)
            if sig == signal.SIGKILL:
                proc.wait(timeout=10)

    def wait(self, timeout: float) -> dict[str, int | None]:
        """Wait up to ``timeout`` s for the parties to exit by themselves; their exit codes (None: running)."""
        end = time.monotonic() + timeout
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        return {pid: proc.poll() for pid, proc in self._procs.items()}

    # -- stop ---------------------------------------------------------------------------
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop(error=exc_type is not None)

    def _stop(self, *, error: bool) -> None:
        try:
            for link in self._links:
                try:
                    link.shutdown()  # type: ignore[attr-defined]
                except Exception as exc:  # noqa: BLE001 - cleanup must go on
                    log.debug("shutting down a link failed: %s", exc.__class__.__name__)
            self._links.clear()
            if self.listener is not None:
                self.listener.stop()  # type: ignore[attr-defined]
            self._proxies.close()
            if not error:  # after Close the parties exit on their own; give them a moment
                self.wait(1.0)
            for proc in self._procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            end = time.monotonic() + self.grace_s
            for proc in self._procs.values():
                try:
                    proc.wait(timeout=max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:  # even on a second Ctrl-C: nothing survives
            for pid, proc in self._procs.items():
                if proc.poll() is None:
                    log.warning("party %s (pid %d) ignored SIGTERM; killing it", pid, proc.pid)
                    proc.kill()
                    proc.wait()
            for reader in self._readers.values():
                reader.join(timeout=1.0)
            if self._cleanup_key is not None:
                from securelp.coordinator.exit_cleanups import unregister_exit_cleanup

                unregister_exit_cleanup(self._cleanup_key)
                self._cleanup_key = None
