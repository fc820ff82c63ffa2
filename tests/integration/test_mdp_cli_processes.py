"""``securelp mdp``'s partition seed is the same in processes with different string hashing."""

from __future__ import annotations

import os
import subprocess
import sys

import securelp.coordinator.commands.mdp as mdp_cmd


def test_a_word_seed_is_the_same_in_every_process() -> None:
    """Python salts ``hash`` per process (PYTHONHASHSEED); the partition seed of a word must not follow it."""
    seeds = []
    for salt in ("1", "2"):  # two processes with different string hashing
        code = "from securelp.coordinator.commands.mdp import partition_seed; print(partition_seed('abc'))"
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": salt}, check=True,
                              capture_output=True, text=True, timeout=60)
        seeds.append(int(done.stdout))
    assert seeds[0] == seeds[1] == mdp_cmd.partition_seed("abc")
