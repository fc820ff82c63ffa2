"""Round numbers: how many significant decimal digits a value needs.

Real LP data are written by people and programs in decimal with few digits (netlib's MPS
fields hold at most 12 characters; of 22 netlib LPs, all but three need at most 6 significant
digits, none more than 9). A value multiplied by a random factor (a monomial mask's scale
drawn log-uniformly) needs all 16 or 17. The normalization attacks use this: a candidate scale
that makes a column's entries, its cost and its bounds round numbers is very likely the true
one (Bednarz, Bean, Roughan, WPES 2009, observed that positive scalings leave such structure).

A value is *round* when it equals a decimal with at most :data:`MAX_DIGITS` significant
digits to within a relative :data:`REL_TOL`. A value off by a random factor passes by chance
with probability about ``2 * REL_TOL * 10**(MAX_DIGITS - 1)``, i.e. 2e-5 per value.
"""

from __future__ import annotations

import numpy as np

#: the most significant digits a round value may need
MAX_DIGITS = 9
#: relative distance to the nearest decimal still called equal (float errors of a few divisions
#: are about 5e-16; a scale drawn at random misses by far more)
REL_TOL = 1e-13
#: what :func:`significant_digits` returns for a value that is not round
NOT_ROUND = MAX_DIGITS + 1


def significant_digits(values: np.ndarray, max_digits: int = MAX_DIGITS, rel_tol: float = REL_TOL) -> np.ndarray:
    """Significant decimal digits each value needs: 0 for zero, ``max_digits + 1`` when no decimal
    with at most ``max_digits`` significant digits lies within ``rel_tol`` (relative) of it.

    Parameters
    ----------
    values : any float array (non-finite entries count as not round).

    Returns
    -------
    Integer array of the same shape.
    """
    v = np.abs(np.asarray(values, dtype=np.float64))
    out = np.full(v.shape, max_digits + 1, dtype=np.int16)
    finite = np.isfinite(v)
    out[finite & (v == 0)] = 0
    live = finite & (v > 0)
    if not live.any():
        return out
    w = v[live]
    exponent = np.floor(np.log10(w))
    digits = np.full(w.shape, max_digits + 1, dtype=np.int16)
    for r in range(max_digits, 0, -1):
        quantum = 10.0 ** (exponent - r + 1)
        ok = np.abs(np.round(w / quantum) * quantum - w) <= rel_tol * w
        digits[ok] = r
    out[live] = digits
    return out


def is_round(values: np.ndarray) -> np.ndarray:
    """Whether each value is zero or a decimal with at most :data:`MAX_DIGITS` significant digits."""
    return significant_digits(values) <= MAX_DIGITS
