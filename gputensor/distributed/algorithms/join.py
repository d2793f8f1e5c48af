"""PyTorch's join protocol for uneven inputs (``torch.distributed.algorithms.join``).

Ranks train inside ``with Join([joinable, ...]):``. Each iteration the first joinable of a
rank that still has data announces it (``Join.notify_join_context``: an all-reduce of a one).
A rank that ran out of data leaves the ``with`` body and loops in ``__exit__``: it
all-reduces a zero (the sum is the number of ranks still training) and, while that is not
zero, runs every joinable's ``main_hook``, which issues the same collectives a training
iteration would (with neutral contributions), so the training ranks never wait on it. When
the sum is zero every rank has joined; the post-hooks run (``is_last_joiner`` tells the ranks
that joined last, whose state is the freshest). With ``throw_on_early_termination`` the first
rank to join makes every rank raise instead.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, NamedTuple

from gputensor.distributed import collectives as _coll
from gputensor.distributed import process_group as _pg

__all__ = ["Join", "JoinHook", "Joinable"]

_SKEW_WARNING = 1000  # joined iterations after which the skew is reported, as PyTorch


class JoinHook:
    """What a joined rank runs for one :class:`Joinable`: ``main_hook`` once per iteration the
    others still train (shadowing that iteration's collectives), ``post_hook`` once at the
    end."""

    def main_hook(self) -> None:
        """Shadow the collectives of one training iteration of the non-joined ranks."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Run once every rank has joined; ``is_last_joiner`` is True on the ranks that joined
        last."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config() -> _JoinConfig:
        return _JoinConfig(enable=False, throw_on_early_termination=False,
                           is_first_joinable=False)


class Joinable(ABC):
    """A class taking part in a join context: it returns its :class:`JoinHook` from
    ``join_hook(**kwargs)`` and names the device and group of the context's own
    collectives (``join_device``, ``join_process_group``)."""

    @abstractmethod
    def __init__(self) -> None:
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abstractmethod
    def join_hook(self, **kwargs: Any) -> JoinHook:
        """The hook for this joinable; ``kwargs`` are those given to ``Join``."""

    @property
    @abstractmethod
    def join_device(self) -> Any:
        """The device of the context's collectives."""

    @property
    @abstractmethod
    def join_process_group(self) -> Any:
        """The group of the context's collectives."""


class Join:
    """The join context manager: ``with Join([model, optimizer]):`` around the training loop
    lets ranks with fewer inputs finish early while the others go on (see the module's
    docstring). ``enable=False`` turns it off (for inputs known to be even);
    ``throw_on_early_termination=True`` makes every rank raise once one has finished."""

    def __init__(self, joinables: list[Joinable], enable: bool = True,
                 throw_on_early_termination: bool = False, **kwargs: Any) -> None:
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        self._set_joinable_configs(enable)
        self._extract_dist_info()

    def _set_joinable_configs(self, enable: bool) -> None:
        for i, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(
                enable=enable, throw_on_early_termination=self._throw_on_early_termination,
                is_first_joinable=i == 0)

    def _extract_dist_info(self) -> None:
        group, device = None, None
        for joinable in self._joinables:
            if group is None:
                group = joinable.join_process_group
            elif group != joinable.join_process_group:
                raise ValueError("Using join context manager with multiple process groups")
            if device is None:
                device = joinable.join_device
        self._process_group = group
        self._rank = _pg.get_rank(group)
        self._device = device

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Shadow the others' iterations until every rank has joined, then run the
        post-hooks; raises RuntimeError on every rank with ``throw_on_early_termination``."""
        try:
            if not self._enable or kind is not None:
                return  # an exception in the body propagates as it is
            is_last_joiner, joined_iterations = True, 0
            while self._num_nonjoined_procs() > 0:
                if joined_iterations == _SKEW_WARNING + 1:
                    warnings.warn(
                        f"Detected uneven input skew of greater than {_SKEW_WARNING}. This "
                        f"means that rank {self._rank} has at least {_SKEW_WARNING} fewer "
                        "inputs than other currently-active ranks. This level of skew could "
                        "lead to performance degradation during training.", stacklevel=2)
                if self._throw_on_early_termination:
                    self._notify_procs_to_terminate()
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                joined_iterations += 1
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
        finally:
            # Outside the context the joinables communicate as without it (PyTorch keeps the
            # config, so its later iterations keep paying for the join all-reduces).
            self._set_joinable_configs(False)

    def _num_nonjoined_procs(self) -> int:
        """The joined side of ``notify_join_context``'s all-reduce: a zero."""
        import gputensor as gt
        count = gt.zeros(1, device=self._device)
        _coll.all_reduce(count, group=self._process_group)
        return int(count.item())

    def _notify_procs_to_terminate(self) -> None:
        """The joined side of the early-termination check: a one, then raise here too."""
        import gputensor as gt
        _coll.all_reduce(gt.ones(1, device=self._device), group=self._process_group)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable: Joinable) -> Any:
        """Called by ``joinable`` before its collectives of an iteration: tells the context
        this rank has not joined (an async all-reduce of a one, whose Work is returned: its
        sum is the number of ranks still training), and with ``throw_on_early_termination``
        raises if some rank has joined. Only the first joinable of a context communicates;
        the others (and joinables outside a context) get None."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(f"Check that the {type(joinable)} constructor calls the "
                                 "``Joinable`` constructor")
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        import gputensor as gt
        device, group = joinable.join_device, joinable.join_process_group
        ones = gt.ones(1, device=device)
        work = _coll.all_reduce(ones, group=group, async_op=True)
        if config.throw_on_early_termination:
            flag = gt.zeros(1, device=device)
            _coll.all_reduce(flag, group=group)
            if flag.item():
                work.wait()  # the one's buffer must outlive its all-reduce
                raise RuntimeError("Detected at least one rank that exhausted inputs. "
                                   "Throwing across all ranks.")
        return work
