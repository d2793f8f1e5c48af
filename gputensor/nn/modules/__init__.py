"""gputensor.nn.modules: Module and the layer classes, one family per file.

Each file lists its classes in ``__all__``; adding a family is a new file plus one star-import
line here (gputensor.nn re-exports everything listed).
"""

from .activation import *  # noqa: F403
from .adaptive import *  # noqa: F403
from .attention import *  # noqa: F403
from .batchnorm import *  # noqa: F403
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .ctc import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .embedding_bag import *  # noqa: F403
from .flatten import *  # noqa: F403
from .fold import *  # noqa: F403
from .fractional_pool import *  # noqa: F403
from .instancenorm import *  # noqa: F403
from .lazy import *  # noqa: F403
from .legacy import *  # noqa: F403
from .linear import *  # noqa: F403
from .linear_cross_entropy import *  # noqa: F403
from .loss import *  # noqa: F403
from .margin import *  # noqa: F403
from .module import *  # noqa: F403
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .pixelshuffle import *  # noqa: F403
from .pool_extra import *  # noqa: F403
from .pooling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .sync_batchnorm import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsampling import *  # noqa: F403

__all__ = sorted(name for name in dir() if name[:1].isupper())
