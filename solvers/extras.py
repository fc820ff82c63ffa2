"""Optional dependencies, imported only where they are used, with one clear error when missing.

securelp requires only what every user needs (numpy, scipy, HiGHS, gRPC, protobuf, cryptography).
Plots need matplotlib (``pip install 'securelp[plot]'``); recomputing the text dataset's MiniLM
embeddings needs tokenizers and safetensors (``pip install 'securelp[text]'``). A command that needs
a missing one stops with a :class:`~securelp.solvers.errors.ConfigError` (exit code 4) naming the
extra, before it computes anything (docs/reference/exit-codes.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from securelp.solvers.errors import ConfigError

#: the optional packages, by module name: the extra that installs each
EXTRAS = {"matplotlib": "plot", "tokenizers": "text", "safetensors": "text"}


def require_extra(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (one of :data:`EXTRAS`) or say which extra installs it.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"matplotlib"`` or ``"safetensors.numpy"``.
    purpose : str
        What needs it, for the message (``"mdp --plot"``).

    Returns
    -------
    ModuleType
        The imported module.

    Raises
    ------
    ConfigError
        The module is not installed; the message names the package and the extra.
    """
    top = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".", 1)[0] != top:
            raise  # a broken installation of something else: not ours to explain
        extra = EXTRAS.get(top, top)
        raise ConfigError(f"{purpose} needs the Python package {top}, which is not installed: "
                          f"pip install 'securelp[{extra}]'") from None
