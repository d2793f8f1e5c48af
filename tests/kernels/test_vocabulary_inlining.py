"""Inlining the scalar vocabulary (kernels/cpu/scalar_fns.py) into kernels with several loops
compiles without Numba's pedantic "variable ... is not in scope" warnings reaching the user
(a page of text asking for a bug report at the first LSTM step of a fresh install).

The check runs in a fresh interpreter, as a user's program would: pytest restores the warning
filters after collecting a module, which drops a filter installed at import time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

_PROGRAM = textwrap.dedent('''
    import sys, warnings
    import numpy as np
    from numba import njit
    from gputensor.kernels.cpu import rnn

    if sys.argv[1] == "unfiltered":   # without scalar_fns' filter
        warnings.filters[:] = [f for f in warnings.filters
                               if not (f[1] is not None and "__locals___lambda__" in f[1].pattern)]

    # kernels/cpu/rnn.py's own LSTM gates, compiled afresh (its dispatcher loads from the disk
    # cache, which compiles nothing and so never warns)
    gates = njit(cache=False, error_model="numpy")(rnn._lstm_gates.py_func)

    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    c = np.zeros((2, 2), np.float32)
    a, c_out, h_out = np.empty_like(x), np.empty_like(c), np.empty_like(c)
    gates(x, x, c, a, c_out, h_out)
    print(" ".join(repr(float(v)) for v in a.reshape(-1)))
''')


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "default", "-c", _PROGRAM, mode],
                          capture_output=True, text=True, timeout=300, check=True)


def test_vocabulary_inlining_is_quiet_and_right() -> None:
    run = _run("filtered")
    assert "NumbaIRAssumptionWarning" not in run.stderr, run.stderr[:2000]
    z = np.linspace(-3, 3, 16).reshape(2, 8) * 2
    sig = 1 / (1 + np.exp(-z))
    expect = np.concatenate([sig[:, :4], np.tanh(z[:, 4:6]), sig[:, 6:]], axis=1)
    got = np.array([float(v) for v in run.stdout.split()]).reshape(2, 8)
    np.testing.assert_allclose(got, expect, rtol=1e-6)


def test_the_filter_is_what_silences_it() -> None:
    """Without the module's filter the same compile warns (so the test above can fail)."""
    assert "NumbaIRAssumptionWarning" in _run("unfiltered").stderr, \
        "Numba no longer warns here: the filter in kernels/cpu/scalar_fns.py can go"
