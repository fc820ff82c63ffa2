"""Hosts without containers: each party and the coordinator in its own Linux network namespace.

:class:`NetnsHosts` builds a small private network on one machine, touching nothing of the host's
own network: a namespace ``<tag>-net`` holding a bridge, and one namespace per host, each joined
to the bridge by a veth pair whose ends are created directly inside the two namespaces, with its
own address on a private /24 (the coordinator first). Processes start in a host with
:meth:`NetnsHosts.command` (``ip netns exec``), so what crosses between parties and coordinator
crosses a real (virtual) network: its own addresses, a link that can be set down mid-transfer
(:meth:`NetnsHosts.set_link`), a peer that vanishes with its namespace.

Every namespace's name carries the owner's pid and start time (``slp-<pid>-<start>-...``). They
are removed when the block ends, however it ends (also by the exit clean-ups of an interrupted
run), and a later run removes what a run killed beyond any clean-up left behind
(:func:`sweep_stale_namespaces`). Deleting a namespace deletes its interfaces, and nothing is
ever created in the host's namespace, so nothing else is left.

Root only (``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``); iproute2's ``ip`` must be installed.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from securelp.coordinator.exit_cleanups import register_exit_cleanup, unregister_exit_cleanup
from securelp.solvers.errors import ConfigError, TransportError

log = logging.getLogger(__name__)

#: the private subnet of every run (each run's bridge lives in its own namespace, so runs never meet)
SUBNET = ipaddress.ip_network("10.77.0.0/24")
#: prefix of every namespace this module creates
NAME_PREFIX = "slp"
_NAME_RE = re.compile(rf"{NAME_PREFIX}-(\d+)-(\d+)-([a-z0-9]+)$")
#: seconds any ``ip`` call may take
IP_TIMEOUT_S = 20.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise TransportError(f"`ip {' '.join(args)}` did not finish in {IP_TIMEOUT_S:g} s") from None
    if check and done.returncode != 0:
        raise TransportError(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")
    return done


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def check_netns_available() -> None:
    """Refuse at once, with what to do, where namespaces cannot be made.

    Raises
    ------
    ConfigError
        Not root, not Linux, or no ``ip`` command.
    """
    if not os.path.isdir("/proc/self/ns"):
        raise ConfigError("--hosts netns needs Linux network namespaces (this system has none)")
    if os.geteuid() != 0:
        raise ConfigError("--hosts netns needs root (it creates network namespaces); run it as root, or use "
                          "--hosts local")
    if shutil.which("ip") is None:
        raise ConfigError("--hosts netns needs iproute2's `ip` command (Debian: apt-get install iproute2)")


def list_namespaces() -> list[str]:
    """The names of every network namespace (``ip netns list``)."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def sweep_stale_namespaces() -> list[str]:
    """Delete the namespaces of runs whose owner process no longer runs; returns their names."""
    removed = []
    for name in list_namespaces():
        found = _NAME_RE.match(name)
        if not found:
            continue
        pid, start = int(found.group(1)), found.group(2)
        if _start_time(pid) == start:
            continue  # its owner still runs
        if _ip("netns", "delete", name, check=False).returncode == 0:
            removed.append(name)
    if removed:
        log.info("removed %d network namespaces left by an earlier run", len(removed))
    return removed


class NetnsHosts:
    """One network namespace per host on a private bridge (a context manager).

    Parameters
    ----------
    hosts : host names (letters, digits; e.g. ``["coordinator", "owner1", "owner2"]``); the
        first gets the subnet's first address.
    """

    def __init__(self, hosts: Sequence[str]) -> None:
        names = list(hosts)
        if not names or len(set(names)) != len(names):
            raise ConfigError("network-namespace hosts need distinct names")
        if len(names) > SUBNET.num_addresses - 3:
            raise ConfigError(f"at most {SUBNET.num_addresses - 3} hosts fit the private subnet {SUBNET}")
        self.hosts = names
        pid = os.getpid()
        self._tag = f"{NAME_PREFIX}-{pid}-{_start_time(pid) or 0}"
        self.bridge_namespace = f"{self._tag}-net"
        self.namespaces = {h: f"{self._tag}-h{i}" for i, h in enumerate(names)}
        self.addresses = {h: str(SUBNET.network_address + 1 + i) for i, h in enumerate(names)}
        self._made: list[str] = []
        self._cleanup_key: int | None = None

    def __enter__(self) -> NetnsHosts:  # noqa: PYI034 - typing.Self needs Python 3.11
        check_netns_available()
        sweep_stale_namespaces()
        self._cleanup_key = register_exit_cleanup(self.remove)
        try:
            self._build()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        net = self.bridge_namespace
        self._add_namespace(net)
        _ip("-n", net, "link", "add", "br0", "type", "bridge")
        _ip("-n", net, "link", "set", "br0", "up")
        for i, host in enumerate(self.hosts):
            ns = self.namespaces[host]
            self._add_namespace(ns)
            port = f"p{i}"
            _ip("-n", net, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", net, "link", "set", port, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[host]}/{SUBNET.prefixlen}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        log.info("network namespaces: %s", ", ".join(f"{h}={self.addresses[h]}" for h in self.hosts))

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[host], *argv]

    def set_link(self, host: str, up: bool) -> None:
        """Set ``host``'s link to the bridge up or down (a pulled cable: its connections stall)."""
        port = f"p{self.hosts.index(host)}"
        _ip("-n", self.bridge_namespace, "link", "set", port, "up" if up else "down")

    def remove(self) -> None:
        """Delete every namespace this object made (idempotent; safe from the exit clean-ups)."""
        for name in reversed(self._made):
            _ip("netns", "delete", name, check=False)
        self._made.clear()
        if self._cleanup_key is not None:
            unregister_exit_cleanup(self._cleanup_key)
            self._cleanup_key = None
