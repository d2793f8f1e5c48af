"""gt.special: torch.special's names.

Names PyTorch also has at the top level (erf, lgamma, digamma, logit, xlogy, softmax, ...) are
those very functions; the rest call the private elementwise ops of gputensor/_ops/special.py
with torch.special's signatures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor import _ops as _ops_namespace  # noqa: F401  (declares the ops)
from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
    "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma",
    "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc",
    "gammaln", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
    "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax",
    "logit", "logsumexp", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py",
    "xlogy", "zeta",
]


def _top(name: str) -> Callable:
    return OPS[name].frontend


def _unary(name: str) -> Callable[..., Tensor]:
    kernel = OPS[f"_special_{name}"].frontend

    def fn(input: Any, *, out: Tensor | None = None) -> Tensor:
        return kernel(input, out=out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.special.{name}, elementwise."
    return fn


def _binary(name: str, second: str) -> Callable[..., Tensor]:
    kernel = OPS[f"_special_{name}"].frontend

    def fn(input: Any, *args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if len(args) + len(kwargs) != 1 or (kwargs and second not in kwargs):
            raise TypeError(f"{name}() takes 2 arguments (input, {second}), got "
                            f"{1 + len(args) + len(kwargs)}")
        return kernel(input, args[0] if args else kwargs[second], out=out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.special.{name}({'input'}, {second}), elementwise."
    return fn


# -- the top-level functions themselves -----------------------------------------------------------
erf = _top("erf")
erfc = _top("erfc")
erfinv = _top("erfinv")
exp2 = _top("exp2")
expm1 = _top("expm1")
log1p = _top("log1p")
expit = _top("sigmoid")
gammaln = _top("lgamma")
digamma = psi = _top("digamma")
polygamma = _top("polygamma")
gammainc = _top("igamma")
gammaincc = _top("igammac")
i0 = _top("i0")
sinc = _top("sinc")
round = _top("round")  # noqa: A001  (torch.special.round)
xlogy = _top("xlogy")
logsumexp = _top("logsumexp")
softmax = _top("softmax")
log_softmax = _top("log_softmax")


def multigammaln(input: Tensor, p: int, *, out: Tensor | None = None) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p`` (torch.mvlgamma)."""
    return OPS["mvlgamma"].frontend(input, p, out=out)


def logit(input: Tensor, eps: float | None = None, *, out: Tensor | None = None) -> Tensor:
    """log(x / (1 - x)), x clamped to [eps, 1 - eps] when ``eps`` is given (torch.logit)."""
    result = OPS["logit"].frontend(input, eps)
    if out is None:
        return result
    from gputensor._ops._core import check_out
    check_out(out, result.shape, result.dtype, result.device, "logit")
    return out.copy_(result)


# -- gputensor.special's own ops ------------------------------------------------------------------
erfcx = _unary("erfcx")
i0e = _unary("i0e")
i1 = _unary("i1")
i1e = _unary("i1e")
ndtr = _unary("ndtr")
ndtri = _unary("ndtri")
log_ndtr = _unary("log_ndtr")
entr = _unary("entr")
bessel_j0 = _unary("bessel_j0")
bessel_j1 = _unary("bessel_j1")
bessel_y0 = _unary("bessel_y0")
bessel_y1 = _unary("bessel_y1")
modified_bessel_i0 = _unary("modified_bessel_i0")
modified_bessel_i1 = _unary("modified_bessel_i1")
modified_bessel_k0 = _unary("modified_bessel_k0")
modified_bessel_k1 = _unary("modified_bessel_k1")
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0")
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1")
spherical_bessel_j0 = _unary("spherical_bessel_j0")
airy_ai = _unary("airy_ai")
xlog1py = _binary("xlog1py", "other")
zeta = _binary("zeta", "other")
chebyshev_polynomial_t = _binary("chebyshev_polynomial_t", "n")
chebyshev_polynomial_u = _binary("chebyshev_polynomial_u", "n")
chebyshev_polynomial_v = _binary("chebyshev_polynomial_v", "n")
chebyshev_polynomial_w = _binary("chebyshev_polynomial_w", "n")
shifted_chebyshev_polynomial_t = _binary("shifted_chebyshev_polynomial_t", "n")
shifted_chebyshev_polynomial_u = _binary("shifted_chebyshev_polynomial_u", "n")
shifted_chebyshev_polynomial_v = _binary("shifted_chebyshev_polynomial_v", "n")
shifted_chebyshev_polynomial_w = _binary("shifted_chebyshev_polynomial_w", "n")
hermite_polynomial_h = _binary("hermite_polynomial_h", "n")
hermite_polynomial_he = _binary("hermite_polynomial_he", "n")
laguerre_polynomial_l = _binary("laguerre_polynomial_l", "n")
legendre_polynomial_p = _binary("legendre_polynomial_p", "n")
