"""kernels/temme_gamma.py: the derivation of Temme's coefficients, the committed table and the
generated CUDA header agree, and the expansion they feed matches the published first terms."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from gputensor.kernels import temme_gamma

CUDA_HEADER = Path(temme_gamma.__file__).parent / "cuda" / "temme_gamma.cuh"


def test_committed_table_is_the_derivation_rounded() -> None:
    exact = temme_gamma.derive()
    rounded = np.array([[float(v) for v in row] for row in exact])
    assert temme_gamma.COEFFICIENTS.shape == (temme_gamma.TERMS, temme_gamma.TAYLOR)
    np.testing.assert_array_equal(temme_gamma.COEFFICIENTS, rounded)


def test_cuda_header_is_generated_from_the_table() -> None:
    assert CUDA_HEADER.read_text() == temme_gamma.cuda_header()


def test_first_coefficients_are_dlmf_8_12_9() -> None:
    d = temme_gamma.derive(3, 4)
    F = Fraction
    assert d[0] == [F(-1, 3), F(1, 12), F(-2, 135), F(1, 864)]
    assert d[1] == [F(-1, 540), F(-1, 288), F(1, 378), F(-77, 77760)]
    assert d[2][:2] == [F(25, 6048), F(-139, 51840)]


def test_stirling_coefficients_are_dlmf_5_11_3() -> None:
    F = Fraction
    assert temme_gamma.stirling_coefficients(5) == [F(1), F(1, 12), F(1, 288), F(-139, 51840),
                                                    F(-571, 2488320)]


def test_expansion_reproduces_gamma_at_the_centre() -> None:
    """At x = a the expansion is Q = 1/2 + sum_k c_k(0) a^-k / sqrt(2 pi a); at a = 1e6 this
    is mpmath's Q(1e6, 1e6) = 0.4998670192391274 (the table's k sum, not a library call)."""
    a = 1e6
    s = sum(temme_gamma.COEFFICIENTS[k, 0] * a ** -k for k in range(temme_gamma.TERMS))
    q = 0.5 + s / np.sqrt(2 * np.pi * a)
    assert abs(q - 0.4998670192391274) < 1e-15
