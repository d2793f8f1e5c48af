"""gputensor.optim: PyTorch's optimizers and learning-rate schedulers.

Adam, AdamW, SGD and Adagrad update contiguous float32/float64 parameters with one fused kernel
per parameter (the backend's ``_fused_adam``/``_fused_sgd``/``_fused_adagrad``) by default; every
optimizer also has an op-by-op path that follows PyTorch's single-tensor update rule.
"""

from . import lr_scheduler, swa_utils
from ._stateless import swap_in_optimizer_params_and_state
from .adadelta import Adadelta
from .adafactor import *  # noqa: F403
from .adafactor import __all__ as _adafactor_all
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import *  # noqa: F403
from .asgd import __all__ as _asgd_all
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer, required
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import *  # noqa: F403
from .rprop import __all__ as _rprop_all
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "Muon", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "SGD", "SparseAdam", "lr_scheduler", "required", "swa_utils",
           "swap_in_optimizer_params_and_state",
           *_adafactor_all, *_asgd_all, *_rprop_all]
