"""gputensor.autograd: grad modes, the backward engine, custom Functions and gradcheck."""

from . import anomaly_mode, forward_ad, functional, graph
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .engine import backward, grad
from .engine_modes import (
    enforce_grad_layout_policy,
    is_multithreading_enabled,  # noqa: F401 (public, outside __all__ as in PyTorch)
    set_multithreading_enabled,
)
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .legacy_function import NestedIOFunction
from .variable import Variable

__all__ = ["Function", "FunctionCtx", "GradcheckError", "backward", "detect_anomaly",
           "enable_grad", "grad", "gradcheck", "gradgradcheck", "graph", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "no_grad", "once_differentiable",
           "set_detect_anomaly", "set_grad_enabled", "anomaly_mode", "Variable", "forward_ad",
           "functional", "NestedIOFunction", "set_multithreading_enabled",
           "enforce_grad_layout_policy"]
