"""gputensor.nn: neural network building blocks (torch.nn).

Layers live in ``modules/`` (one family per file); adding a family is a module file plus one
import line in ``modules/__init__.py`` (the star import below re-exports it here).
``parallel`` holds DataParallel.
"""

from gputensor.nn import functional, grad, init, parallel, utils
from gputensor.nn._factory import factory_kwargs
from gputensor.nn.modules import *  # noqa: F403 - the layer classes are the public API
from gputensor.nn.modules import __all__ as _modules_all
from gputensor.nn.parallel import DataParallel
from gputensor.nn.parameter import Buffer, Parameter

__all__ = ["Buffer", "DataParallel", "Parameter", "factory_kwargs", "functional", "grad", "init",
           "parallel", "utils",
           *_modules_all]
