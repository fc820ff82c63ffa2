"""One secure-LP session across network-namespace hosts: ``securelp demo --hosts netns``.

Each party runs ``securelp party`` and the coordinator ``securelp coordinator`` as separate
processes, each in its own network namespace with its own address on a private bridge
(:class:`securelp.coordinator.netns.NetnsHosts`), so every message crosses a (virtual) network
between hosts, in either connection direction: dial-in (the coordinator dials each party's
``--listen`` address) or dial-out (the parties ``--connect`` to the coordinator's ``--listen``
address). Certificates, blocks, the report and the transcript live in a private temporary
directory; the namespaces, the processes and the directory are removed however the run ends.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from securelp.coordinator.certs import write_session_certs
from securelp.coordinator.launcher import PARENT_PID_ENV, REPO_ROOT
from securelp.coordinator.netns import NetnsHosts
from securelp.coordinator.protocol import SessionConfig
from securelp.party.policy import PartyPolicy
from securelp.solvers.errors import TransportError
from securelp.solvers.lp.partition import ColumnBlock, PublicRows, save_block, save_public

log = logging.getLogger(__name__)

#: the port every host listens on (each host has its own namespace, so they never collide)
PORT = 50051
#: seconds the coordinator may take beyond the session's deadline and its wait for the parties
SLACK_S = 60.0


@dataclass(frozen=True)
class NetnsRun:
    """What a session across namespace hosts produced."""

    exit_code: int
    report: dict[str, object] | None  # the coordinator's JSON report (None if it wrote none)
    summary: str  # the coordinator's human summary (its stdout)
    transcript: Path | None
    addresses: dict[str, str]  # host -> address on the private bridge
    party_exit_codes: dict[str, int | None]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "securelp.coordinator.cli", *args]


def _session_flags(config: SessionConfig) -> list[str]:
    flags = ["--bounds", config.bounds_mode, "--reveal" if config.reveal else "--no-reveal",
             "--deadline", f"{config.deadline_s:g}"]
    if config.k is not None:
        flags += ["--k", str(config.k)]
    if config.secure_aggregation:
        flags.append("--secure-aggregation")
    return flags


def run_on_namespaces(public: PublicRows, blocks: Sequence[ColumnBlock], config: SessionConfig, workdir: Path, *,
                      policy: PartyPolicy, direction: str = "dial-in", keepalive_s: float = 10.0,
                      wait_s: float = 30.0, transcript: bool = True, seed: str | None = None,
                      on_started: Callable[[NetnsHosts, dict[str, subprocess.Popen[bytes]]], None] | None = None
                      ) -> NetnsRun:
    """Run one session with the coordinator and every party in its own namespace (root only).

    ``seed``: reproducible masks, party j seeded with ``f"{seed}/{id}"`` -- NOT private.
    ``on_started`` is called once every process has started, with the hosts and the processes by
    host name (fault injection in tests: kill a party, set a link down)."""
    ids = [b.party_id for b in blocks]
    certs = workdir / "certs"
    write_session_certs(certs, ids, force=True)
    save_public(public, workdir / "public.npz")
    for block in blocks:
        save_block(block, workdir / f"{block.party_id}.npz")
    report_path = workdir / "report.json"
    transcript_path = workdir / "session.transcript" if transcript else None
    env = dict(os.environ)
    env[PARENT_PID_ENV] = str(os.getpid())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    with NetnsHosts(["coordinator", *ids]) as hosts:
        addr = hosts.addresses
        try:
            coord = _cli("coordinator", "--public", str(workdir / "public.npz"), "--certs", str(certs),
                         "--json", str(report_path), "--wait", f"{wait_s:g}", "--keepalive", f"{keepalive_s:g}",
                         *_session_flags(config))
            if transcript_path is not None:
                coord += ["--transcript", str(transcript_path)]
            if direction == "dial-out":
                coord += ["--listen", f"{addr['coordinator']}:{PORT}"] + [a for pid in ids for a in ("--party", pid)]
            else:
                coord += [a for pid in ids for a in ("--party", f"{pid}={addr[pid]}:{PORT}")]
            for pid in ids:
                where = (["--connect", f"{addr['coordinator']}:{PORT}"] if direction == "dial-out"
                         else ["--listen", f"{addr[pid]}:{PORT}"])
                argv = _cli("party", *where, "--data", str(workdir / f"{pid}.npz"), "--id", pid, "--certs", str(certs),
                            "--keepalive", f"{keepalive_s:g}", "--allow-bounds", ",".join(sorted(policy.allow_bounds)),
                            "--reveal" if policy.reveal else "--no-reveal")
                if seed is not None:
                    argv += ["--seed", f"{seed}/{pid}"]
                if direction == "dial-out":
                    argv += ["--idle-timeout", f"{wait_s + config.deadline_s + SLACK_S:g}"]
                with open(workdir / f"{pid}.log", "wb") as err:
                    procs[pid] = subprocess.Popen(hosts.command(pid, argv), stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=str(workdir))
            with open(workdir / "coordinator.log", "wb") as err:
                procs["coordinator"] = subprocess.Popen(hosts.command("coordinator", coord), stdin=subprocess.DEVNULL,
                                                        stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(workdir))
            if on_started is not None:
                on_started(hosts, procs)
            try:
                out, _ = procs["coordinator"].communicate(timeout=wait_s + config.deadline_s + SLACK_S)
            except subprocess.TimeoutExpired:
                raise TransportError(f"the coordinator did not finish within {wait_s + config.deadline_s + SLACK_S:g} s "
                                     "across the namespace hosts") from None
            code = procs["coordinator"].returncode
            end = time.monotonic() + 10.0
            parties: dict[str, int | None] = {}
            for pid in ids:
                try:
                    parties[pid] = procs[pid].wait(timeout=max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    parties[pid] = None
            if code != 0 and not report_path.exists():
                tail = (workdir / "coordinator.log").read_text(errors="replace").strip().splitlines()[-3:]
                log.error("the coordinator exited with code %d: %s", code, " | ".join(tail))
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        return NetnsRun(code, report, out.decode("utf-8", "replace"),
                        transcript_path if transcript_path is not None and transcript_path.exists() else None,
                        dict(addr), parties)
