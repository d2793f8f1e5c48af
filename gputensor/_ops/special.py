"""torch.special's functions and their top-level forms (lgamma, digamma, polygamma, mvlgamma,
erfc, erfinv, i0, igamma, igammac), each an elementwise op of one vocabulary expression.

The vocabulary functions live in kernels/cpu/scalar_special.py (Numba, SciPy's compiled Cephes
where SciPy has the function) and kernels/cuda/special_fns.cuh (CUDA's math library where it
has the function, ports of PyTorch's algorithms otherwise). Ops without a top-level name in
PyTorch are private here (``_special_<name>``); gputensor.special exposes them under torch's
names. Derivatives follow derivatives.yaml; the Bessel functions and orthogonal polynomials
have none in PyTorch (their results do not require grad), and igamma/igammac/zeta raise for
the derivative with respect to their first argument, as PyTorch does.
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

from ._core import op, tensor_method
from .elementwise import B, U, elementwise

_SQRT_PI_2 = 0.886226925452758          # sqrt(pi) / 2
_TWO_OVER_SQRT_PI = 1.1283791670955126  # 2 / sqrt(pi)
_INV_SQRT_2PI = 0.3989422804014327      # 1 / sqrt(2 pi)
_SQRT_2PI = 2.5066282746310002


class _NotDifferentiable:
    """The derivative slot of an op whose outputs never require grad (PyTorch's
    ``output_differentiability: [False]``)."""

    def __init__(self, op_name: str) -> None:
        self.op_name = op_name

    def record(self, result: Any, args: Any, params: Any = ()) -> None:
        return None


def _special(name: str, expr: str, arity: int = U, grad: tuple | None = None,
             flops: int = 40, **rules: Any) -> None:
    """A private float elementwise op (``_special_<name>``) of gputensor.special."""
    op_def = elementwise(f"_special_{name}", expr, arity, "float", method=False, inplace=False,
                         flops=flops, no_complex=True, grad=grad, **rules)
    if grad is None:
        op_def.derivative = _NotDifferentiable(op_def.name)


# -- top-level ops (functions, methods, in-place methods) ---------------------------------------
elementwise("lgamma", "lgamma(a)", U, "float", flops=40, no_complex=True,
            grad=("g * a.digamma()",))
elementwise("digamma", "digamma(a)", U, "float", flops=40, no_complex=True,
            grad=("g * _polygamma(a, 1)",))
elementwise("erfc", "erfc(a)", U, "float", flops=20, no_complex=True,
            grad=(f"g * (-a * a).exp() * {-_TWO_OVER_SQRT_PI!r}",))
elementwise("erfinv", "erfinv(a)", U, "float", flops=30, no_complex=True,
            grad=(f"g * (out * out).exp() * {_SQRT_PI_2!r}",))
elementwise("i0", "bessel_i0(a)", U, "float", flops=40, no_complex=True,
            grad=("g * _special_i1(a)",))
elementwise("igamma", "igamma(a, b)", B, flops=200, no_complex=True, float_only=True,
            grad=("not_implemented('igamma: input')",
                  "g * ((a - 1) * b.log() - b - a.lgamma()).exp()"))
elementwise("igammac", "igammac(a, b)", B, flops=200, no_complex=True, float_only=True,
            grad=("not_implemented('igammac: input')",
                  "-g * ((a - 1) * b.log() - b - a.lgamma()).exp()"))
# polygamma(n, x) and mvlgamma(x, p) take an integer parameter: these kernels, wrapped below.
elementwise("_polygamma", "polygamma(n, a)", U, "float", params=("n",), method=False,
            inplace=True, flops=60, no_complex=True,
            grad=("g * _polygamma(a, n + 1)",))
elementwise("_mvlgamma", "mvlgamma(a, p)", U, "float", params=("p",), method=False,
            inplace=True, flops=60, no_complex=True,
            grad=(lambda g, a, p: g * _mvlgamma_grad(a, p),))


def _mvlgamma_grad(a: Tensor, p: int) -> Tensor:
    # d/dx sum_j lgamma(x - j/2) = sum_j digamma(x - j/2)
    total = a.digamma()
    for j in range(1, int(p)):
        total = total + (a - j / 2).digamma()
    return total


def _check_polygamma_n(n: Any) -> None:
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")


@op(method=False)
def polygamma(n: int, input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The n-th derivative of the digamma function."""
    _check_polygamma_n(n)
    return OPS["_polygamma"].frontend(input, n, out=out)


@tensor_method("polygamma")
def _polygamma_method(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)


@tensor_method("polygamma_")
def _polygamma_inplace(self: Tensor, n: int) -> Tensor:
    _check_polygamma_n(n)
    return OPS["_polygamma"].inplace_fn(self, n)


def _check_mvlgamma_p(p: Any) -> None:
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")


@op(inplace=True)
def mvlgamma(input: Tensor, p: int, *, out: Tensor | None = None) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``."""
    _check_mvlgamma_p(p)
    return OPS["_mvlgamma"].frontend(input, p, out=out)


@tensor_method("mvlgamma_")
def _mvlgamma_inplace(self: Tensor, p: int) -> Tensor:
    _check_mvlgamma_p(p)
    return OPS["_mvlgamma"].inplace_fn(self, p)


# -- gputensor.special's own ops ------------------------------------------------------------------
_special("erfcx", "erfcx(a)", grad=(f"g * (a * out * 2 - {_TWO_OVER_SQRT_PI!r})",))
_special("i0e", "bessel_i0e(a)", grad=("g * (_special_i1e(a) - a.sgn() * out)",))
_special("i1", "bessel_i1(a)", grad=(lambda g, a, out: g * _i1_grad(a, out, a.i0()),))
_special("i1e", "bessel_i1e(a)", grad=(lambda g, a, out: g * _i1e_grad(a, out),))
_special("ndtr", "ndtr(a)", flops=20,
         grad=(f"g * (a * a * -0.5).exp() * {_INV_SQRT_2PI!r}",))
_special("ndtri", "ndtri(a)", flops=30,
         grad=(f"g * (out * out * 0.5).exp() * {_SQRT_2PI!r}",))
_special("log_ndtr", "log_ndtr(a)", flops=30,
         grad=(f"g * (a * a * -0.5 - out).exp() * {_INV_SQRT_2PI!r}",))
_special("entr", "entr(a)", flops=20, grad=("g * -(a.log() + 1)",))
_special("xlog1py", "xlog1py(a, b)", B, flops=20,
         grad=("masked(g * b.log1p(), (a != 0) | (b > -1))", "g * a / (b + 1)"))
_special("zeta", "zeta(a, b)", B, flops=200,
         grad=("not_implemented('zeta')", "g * -a * _special_zeta(a + 1, b)"))
for _name, _expr in [
    ("bessel_j0", "bessel_j0(a)"), ("bessel_j1", "bessel_j1(a)"), ("bessel_y0", "bessel_y0(a)"),
    ("bessel_y1", "bessel_y1(a)"), ("modified_bessel_i0", "bessel_i0(a)"),
    ("modified_bessel_i1", "bessel_i1(a)"), ("modified_bessel_k0", "bessel_k0(a)"),
    ("modified_bessel_k1", "bessel_k1(a)"), ("scaled_modified_bessel_k0", "bessel_k0e(a)"),
    ("scaled_modified_bessel_k1", "bessel_k1e(a)"), ("spherical_bessel_j0", "spherical_j0(a)"),
    ("airy_ai", "airy_ai(a)"),
]:
    _special(_name, _expr)
for _name, _fn in [("chebyshev_polynomial_t", "cheb_t"), ("chebyshev_polynomial_u", "cheb_u"),
                   ("chebyshev_polynomial_v", "cheb_v"), ("chebyshev_polynomial_w", "cheb_w")]:
    _special(_name, f"{_fn}(a, b)", B)
    _special(f"shifted_{_name}", f"{_fn}(a + a - 1, b)", B)
for _name, _fn in [("hermite_polynomial_h", "hermite_h"), ("hermite_polynomial_he", "hermite_he"),
                   ("laguerre_polynomial_l", "laguerre_l"),
                   ("legendre_polynomial_p", "legendre_p")]:
    _special(_name, f"{_fn}(a, b)", B)


def _i1_grad(a: Tensor, out: Tensor, i0: Tensor) -> Tensor:
    # I1' = I0 - I1 / x, with the limit 1/2 at x = 0
    import gputensor as gt
    return gt.where(a == 0, 0.5, i0 - out / a)


def _i1e_grad(a: Tensor, out: Tensor) -> Tensor:
    # (e^-|x| I1)' = i0e - i1e (sgn x + 1/x), with the limit 1/2 at x = 0
    import gputensor as gt
    return gt.where(a == 0, 0.5, OPS["_special_i0e"].frontend(a) - out * (a.sgn() + 1 / a))
