"""gputensor.nn.utils: gradient clipping, parameter/vector conversion, parametrizations
(``parametrize``, ``parametrizations``, the older hook-based ``weight_norm`` and
``spectral_norm``) and ``stateless.functional_call``."""

from . import fusion, init, memory_format, parametrizations, parametrize, rnn, stateless
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import *  # noqa: F403
from .fusion import __all__ as _fusion_all
from .init import skip_init
from .memory_format import (
    convert_conv2d_weight_memory_format,
    convert_conv3d_weight_memory_format,
)
from .spectral_norm import *  # noqa: F403
from .spectral_norm import __all__ as _spectral_all
from .weight_norm import *  # noqa: F403
from .weight_norm import __all__ as _weight_all

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "parametrizations", "parametrize",
           "rnn", "stateless", *_spectral_all, *_weight_all, "fusion", "init", "memory_format",
           *_fusion_all, "skip_init", "convert_conv2d_weight_memory_format",
           "convert_conv3d_weight_memory_format", "clip_grad_norm"]
