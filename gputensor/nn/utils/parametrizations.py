"""Ready-made parametrizations (PyTorch's ``torch.nn.utils.parametrizations``): weight
normalization and spectral normalization, registered through :mod:`.parametrize` so their
state_dict keys and buffers match PyTorch's.

``orthogonal`` is not provided: it needs ``matrix_exp``, Householder products or QR, which
gputensor does not have yet.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.autograd.grad_mode import no_grad
from gputensor.nn.functional import normalize
from gputensor.nn.modules.conv import _ConvTranspose
from gputensor.nn.modules.module import Module

from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """PyTorch's ``norm_except_dim(v, 2, dim)``: the 2-norm of every slice along ``dim``,
    shaped to broadcast against ``v``; ``dim == -1`` means the norm of the whole tensor."""
    if dim == -1:
        return v.norm(2)
    ndim = v.dim()
    d = dim + ndim if dim < 0 else dim
    moved = v.transpose(0, d) if d else v
    norms = moved.reshape(moved.size(0), -1).norm(2, dim=1)
    shape = [1] * ndim
    shape[d] = v.size(d)
    return norms.reshape(shape)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """PyTorch's ``_weight_norm``: ``v`` rescaled to have norm ``g`` along ``dim``."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    """weight = g * v / ||v||, with the norm taken over every dim but ``dim``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as magnitude times direction (Salimans & Kingma).

    ``parametrizations.<name>.original0`` is the magnitude g (norm over every dim but ``dim``;
    ``dim=None`` uses the whole tensor) and ``original1`` the direction v. State dicts saved
    with the older hook-based ``weight_norm`` (``<name>_g``/``<name>_v``) still load.
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(mod: Module, state_dict: dict[str, Any], prefix: str,
                                 local_metadata: dict, strict: bool, missing_keys: list[str],
                                 unexpected_keys: list[str], error_msgs: list[str]) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of the weight seen as a matrix,
    estimated by power iteration whose vectors ``_u``, ``_v`` persist as buffers."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            # A vector's spectral norm is its 2-norm: it needs no power iteration.
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            # Start from a good estimate rather than random vectors.
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        # ``dim`` becomes the rows (1 for ConvTranspose, whose output channels are dim 1).
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # In place into the buffers, outside autograd, as PyTorch's (forward clones them).
        with no_grad():
            for _ in range(n_power_iterations):
                normalize(gt.mv(weight_mat, self._v), dim=0, eps=self.eps, out=self._u)
                normalize(gt.mv(weight_mat.H, self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.dim() == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # Clones: the next training forward overwrites the buffers, which this graph saves.
        u = self._u.clone(memory_format=gt.contiguous_format)
        v = self._v.clone(memory_format=gt.contiguous_format)
        sigma = gt.vdot(u, gt.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        # Any tensor is a valid original: the forward rescales it.
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm (Miyato et al.), stabilising GAN
    discriminators.

    The norm comes from ``n_power_iterations`` power-iteration steps per training-mode
    forward; in eval mode the stored vectors are reused. ``dim`` (default 0, 1 for
    ConvTranspose) is the output-channel dim that becomes the matrix rows.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _ConvTranspose) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
