"""gputensor.nn.functional: stateless versions of the nn layers (torch.nn.functional).

Each family lives in a private submodule that lists its functions in ``__all__``; adding a
family is a new file plus one star-import line here.
"""

from gputensor.nn import grad as grad  # torch.nn.functional.grad is torch.nn.grad (not in __all__)

from ._activation import *  # noqa: F403
from ._attention import *  # noqa: F403
from ._conv import *  # noqa: F403
from ._ctc import *  # noqa: F403
from ._distance import *  # noqa: F403
from ._dropout import *  # noqa: F403
from ._embedding_bag import *  # noqa: F403
from ._fold import *  # noqa: F403
from ._fractional_pool import *  # noqa: F403
from ._grid import *  # noqa: F403
from ._grouped_mm import *  # noqa: F403
from ._interpolate import *  # noqa: F403
from ._linear import *  # noqa: F403
from ._linear_cross_entropy import *  # noqa: F403
from ._loss import *  # noqa: F403
from ._margin import *  # noqa: F403
from ._norm import *  # noqa: F403
from ._overrides import *  # noqa: F403
from ._pool_extra import *  # noqa: F403
from ._pooling import *  # noqa: F403
from ._sparse import *  # noqa: F403
from ._tbc_shuffle import *  # noqa: F403
from ._vision import *  # noqa: F403

__all__ = sorted(name for name in dir() if not name.startswith("_") and name != "grad")
