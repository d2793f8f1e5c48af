"""gputensor.nn.utils: gradient clipping, parameter/vector conversion, parametrizations
(``parametrize``, ``parametrizations``, the older hook-based ``weight_norm`` and
``spectral_norm``) and ``stateless.functional_call``."""

from . import parametrizations, parametrize, rnn, stateless
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .spectral_norm import *  # noqa: F403
from .spectral_norm import __all__ as _spectral_all
from .weight_norm import *  # noqa: F403
from .weight_norm import __all__ as _weight_all

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "parametrizations", "parametrize",
           "rnn", "stateless", *_spectral_all, *_weight_all]
