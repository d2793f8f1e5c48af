"""The older, hook-based spectral normalization (PyTorch's ``torch.nn.utils.spectral_norm``).

``weight`` becomes the parameter ``weight_orig`` plus the power-iteration buffers
``weight_u`` and ``weight_v``; a forward pre-hook sets ``module.weight = weight_orig / sigma``
before every call. The state_dict carries PyTorch's ``spectral_norm`` version metadata, and
loading a version-0 checkpoint (which stored ``weight`` but not ``weight_v``) rebuilds
``weight_v`` from it as PyTorch does.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.autograd.grad_mode import no_grad
from gputensor.nn.functional import normalize
from gputensor.nn.modules.conv import _ConvTranspose
from gputensor.nn.modules.module import Module
from gputensor.nn.parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]

T_module = TypeVar("T_module", bound=Module)


class SpectralNorm:
    """The forward pre-hook computing ``module.<name>`` from ``<name>_orig``, ``<name>_u``
    and ``<name>_v``."""

    # Version 1 added ``<name>_v`` to the state_dict (version 0 saved ``<name>`` instead).
    _version: int = 1
    name: str
    dim: int
    n_power_iterations: int
    eps: float

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix whose rows run along ``dim``."""
        mat = weight
        if self.dim != 0:
            mat = mat.permute(self.dim, *[d for d in range(mat.dim()) if d != self.dim])
        return mat.reshape(mat.size(0), -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            # The buffers are updated in place; the clones keep this forward's graph valid
            # when the next forward overwrites them.
            with no_grad():
                for _ in range(self.n_power_iterations):
                    normalize(gt.mv(weight_mat.t(), u), dim=0, eps=self.eps, out=v)
                    normalize(gt.mv(weight_mat, v), dim=0, eps=self.eps, out=u)
                u = u.clone(memory_format=gt.contiguous_format)
                v = v.clone(memory_format=gt.contiguous_format)
        sigma = gt.dot(u, gt.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat: Tensor, u: Tensor, target_sigma: Tensor
                             ) -> Tensor:
        # The v with W v = u in the least-squares, minimum-norm sense (pinv(W) u), scaled
        # so that u^T W v equals target_sigma. A one-off load-time migration, solved on the
        # host because gputensor has no pseudo-inverse op.
        w = weight_mat.detach().cpu().numpy().astype(np.float64)
        u_np = u.detach().cpu().numpy().astype(np.float64)
        v_np = np.linalg.pinv(w.T @ w) @ w.T @ u_np
        v = gt.from_numpy(v_np).to(device=weight_mat.device, dtype=weight_mat.dtype)
        return v.mul_(target_sigma / gt.dot(u, gt.mv(weight_mat, v)))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # A plain attribute (not a parameter) so the hook can overwrite it; it holds the
        # unnormalised weight until the first forward.
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module.register_state_dict_post_hook(SpectralNormStateDictHook(fn))
        module.register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Migrates version-0 entries (``<name>`` saved, no ``<name>_v``) before loading."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Module, state_dict: dict[str, Any], prefix: str,
                 local_metadata: dict, strict: bool, missing_keys: list[str],
                 unexpected_keys: list[str], error_msgs: list[str]) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        weight_key = prefix + fn.name
        # Without metadata (e.g. a hand-built dict), a complete version-1 layout is fine.
        if version is None and weight_key not in state_dict and \
                all(weight_key + s in state_dict for s in ("_orig", "_u", "_v")):
            return
        has_missing_keys = False
        for suffix in ("_orig", "", "_u"):
            key = weight_key + suffix
            if key not in state_dict:
                has_missing_keys = True
                if strict:
                    missing_keys.append(key)
        if has_missing_keys:
            return
        with no_grad():
            weight_orig = state_dict[weight_key + "_orig"]
            weight = state_dict.pop(weight_key)
            sigma = (weight_orig / weight).mean()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            u = state_dict[weight_key + "_u"]
            state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma)


class SpectralNormStateDictHook:
    """Records ``spectral_norm.<name>.version`` in the module's state_dict metadata."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Module, state_dict: dict[str, Any], prefix: str,
                 local_metadata: dict) -> None:
        versions = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in versions:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        versions[key] = self.fn._version


def spectral_norm(module: T_module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> T_module:
    """Divide ``module.<name>`` by its spectral norm before every forward, estimated by
    ``n_power_iterations`` power-iteration steps per training-mode call.

    ``dim`` (default 0, 1 for ConvTranspose) is the dim that becomes the matrix rows.
    """
    if dim is None:
        dim = 1 if isinstance(module, _ConvTranspose) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T_module, name: str = "weight") -> T_module:
    """Replace ``<name>_orig``/``_u``/``_v`` by a Parameter holding the normalised weight."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for store, kind in ((module._state_dict_hooks, SpectralNormStateDictHook),
                        (module._load_state_dict_pre_hooks, SpectralNormLoadStateDictPreHook)):
        for key, hook in store.items():
            if isinstance(hook, kind) and hook.fn.name == name:
                del store[key]
                break
    return module
