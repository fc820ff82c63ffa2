"""Network-namespace hosts: a private bridge between namespaces, reachable by address only inside,
a link that can be set down, and nothing left afterwards (also after a run killed by SIGKILL)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from securelp.coordinator.netns import NetnsHosts, list_namespaces, sweep_stale_namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="network namespaces need root and iproute2's ip (CI runs as root)"),
]

SERVER = ("import socket,sys; s=socket.create_server((sys.argv[1], 7001)); print('up', flush=True); "
          "c,_=s.accept(); c.sendall(c.recv(100))")
CLIENT = ("import socket,sys; c=socket.create_connection((sys.argv[1], 7001), timeout=3); c.sendall(b'ping'); "
          "print(c.recv(100).decode())")


def _ours() -> list[str]:
    return [n for n in list_namespaces() if n.startswith(f"slp-{os.getpid()}-")]


def test_hosts_talk_over_the_bridge_and_vanish_afterwards():
    with NetnsHosts(["coordinator", "owner1"]) as hosts:
        assert hosts.addresses == {"coordinator": "10.77.0.1", "owner1": "10.77.0.2"}
        assert len(_ours()) == 3
        server = subprocess.Popen(hosts.command("owner1", [sys.executable, "-c", SERVER, "10.77.0.2"]),
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline().strip() == "up"
            got = subprocess.run(hosts.command("coordinator", [sys.executable, "-c", CLIENT, "10.77.0.2"]),
                                 capture_output=True, text=True, timeout=20, check=False)
            assert got.stdout.strip() == "ping", got.stderr
        finally:
            server.kill()
            server.wait()
        # the party's address is not reachable from the host's own namespace
        outside = subprocess.run([sys.executable, "-c", CLIENT, "10.77.0.2"], capture_output=True, text=True, check=False,
                                 timeout=20)
        assert outside.returncode != 0
    assert _ours() == []


def test_a_link_set_down_stops_the_traffic():
    with NetnsHosts(["coordinator", "owner1"]) as hosts:
        server = subprocess.Popen(hosts.command("owner1", [sys.executable, "-c", SERVER, "10.77.0.2"]),
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline().strip() == "up"
            hosts.set_link("owner1", up=False)
            got = subprocess.run(hosts.command("coordinator", [sys.executable, "-c", CLIENT, "10.77.0.2"]),
                                 capture_output=True, text=True, timeout=20, check=False)
            assert got.returncode != 0 and "timed out" in got.stderr
            hosts.set_link("owner1", up=True)  # control: the same client gets through once it is up again
            for _ in range(5):  # the port may take a moment to forward again
                got = subprocess.run(hosts.command("coordinator", [sys.executable, "-c", CLIENT, "10.77.0.2"]),
                                     capture_output=True, text=True, timeout=20, check=False)
                if got.returncode == 0:
                    break
            assert got.stdout.strip() == "ping", got.stderr
        finally:
            server.kill()
            server.wait()


def test_a_killed_runs_namespaces_are_swept_by_the_next_run():
    code = ("import time; from securelp.coordinator.netns import NetnsHosts\n"
            "with NetnsHosts(['coordinator', 'owner1']):\n    print('built', flush=True); time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert run.stdout.readline().strip() == "built"
    left = [n for n in list_namespaces() if n.startswith(f"slp-{run.pid}-")]
    assert len(left) == 3
    run.send_signal(signal.SIGKILL)
    run.wait()
    time.sleep(0.1)
    assert [n for n in list_namespaces() if n.startswith(f"slp-{run.pid}-")] == left  # nothing ran on SIGKILL
    assert sorted(sweep_stale_namespaces()) == sorted(left)
    assert [n for n in list_namespaces() if n.startswith(f"slp-{run.pid}-")] == []
