"""Progress of long work on a terminal: one live line, drawn by tqdm, and nothing elsewhere.

Long commands (``securelp mdp``'s iterations, ``census release --repeat``) show progress on standard
error when it is a terminal, and stay quiet without one, with ``--quiet`` or with ``--json -``
(:func:`progress_enabled`). tqdm draws the line: it fits the line to the terminal's width, shows the
elapsed time and the rate, and, inside :meth:`ProgressLine.active`, routes log records through
``tqdm.write`` so a warning printed during the work does not break the line. It is one small package
without dependencies of its own, where rich would bring two more (markdown-it-py, pygments) for the
same line. The line carries only what may be shown: iteration counts, bounds and times, never data.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO


def progress_enabled(json_path: str | None, quiet: bool = False, stream: TextIO | None = None) -> bool:
    """Whether a command shows progress: a terminal on ``stream`` (standard error), not ``--quiet``, and
    the JSON report not on standard output."""
    stream = sys.stderr if stream is None else stream
    return not quiet and json_path != "-" and stream.isatty()


class ProgressLine:
    """One status line (``total`` given: a bar) on ``stream``; a no-op when not ``enabled``.

    Parameters
    ----------
    enabled : bool
        Draw anything at all (see :func:`progress_enabled`).
    total : int or None
        The number of steps, for a bar; ``None``: a status line with a counter.
    desc : str
        The line's prefix.
    """

    def __init__(self, enabled: bool, *, total: int | None = None, desc: str = "",
                 stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, file=sys.stderr if stream is None else stream, leave=False,
                             dynamic_ncols=True, bar_format=None if total is not None else "{desc}{postfix}")

    def status(self, text: str) -> None:
        """Replace the line's text after its prefix."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def advance(self, steps: int = 1, text: str | None = None) -> None:
        """Count ``steps`` more (and show ``text``)."""
        if self._bar is not None:
            if text is not None:
                self._bar.set_postfix_str(text, refresh=False)
            self._bar.update(steps)

    def close(self) -> None:
        """Remove the line from the terminal (before anything else is printed)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    @contextlib.contextmanager
    def active(self) -> Iterator[ProgressLine]:
        """The line while the block runs; log records go through tqdm meanwhile; closed at the end."""
        try:
            if self._bar is None:
                yield self
                return
            from tqdm.contrib.logging import logging_redirect_tqdm

            with logging_redirect_tqdm():
                yield self
        finally:
            self.close()
