"""Which backends this build has and how a backend string maps devices to them:
``BackendConfig``, ``is_backend_available`` and the ``is_*_available`` probes,
``get_default_backend_for_device``, ``is_torchelastic_launched``, and ``ProcessGroupGloo``.
"""

from __future__ import annotations

import datetime
import os
import warnings
from typing import Any

from . import _gloo
from .process_group import Backend, ProcessGroup, default_pg_timeout
from .store import Store


class BackendConfig:
    """The device type -> backend map a backend string names: ``"gloo"`` (every device the
    backend serves), ``"cpu:gloo,cuda:nccl"``, or "undefined" (the default for this
    machine's accelerator)."""

    def __init__(self, backend: Backend) -> None:
        self.device_backend_map: dict[str, Backend] = {}
        name = str(backend)
        if name == Backend.UNDEFINED:
            from gputensor import accelerator
            dev = accelerator.current_accelerator() if accelerator.is_available() else None
            device_type = dev.type if dev is not None else "cpu"
            if device_type not in Backend.default_device_backend_map:
                raise ValueError(
                    f"We detected accelerator {device_type} on your machine. But we don't "
                    f"know which communication backend to use for this accelerator. Please "
                    f"specify the `backend` argument in the `init_process_group` call.")
            self.device_backend_map[device_type] = Backend(
                Backend.default_device_backend_map[device_type])
        elif name.lower() in Backend.backend_list:
            self.device_backend_map = dict.fromkeys(Backend.backend_capability[name.lower()],
                                                    Backend(name))
        elif ":" in name:
            usage = (f"The custom backend string argument is invalid: {name}. Custom backend "
                     f"string is an experimental feature where the backend string must be in "
                     f"the format: \"<device_type1>:<backend1>,<device_type2>:<backend2>...\". "
                     f"e.g. 'cpu:gloo,cuda:nccl'")
            for pair in name.lower().split(","):
                parts = pair.split(":")
                if len(parts) != 2:
                    raise ValueError(f"Invalid device:backend pairing: {pair}. {usage}")
                device, be = parts
                if device in self.device_backend_map:
                    raise ValueError(f"Duplicate device type {device} in backend string: "
                                     f"{be}. {usage}")
                self.device_backend_map[device] = Backend(be)
        else:
            warnings.warn(f"Device capability of {name} unknown, assuming `cpu` and `cuda`. "
                          f"You can specify it in `device:backend` format in "
                          f"`init_process_group` call.", stacklevel=2)
            self.device_backend_map = dict.fromkeys(("cpu", "cuda", "xpu"), Backend(name))

    def __repr__(self) -> str:
        return ",".join(f"{d}:{b}" for d, b in self.device_backend_map.items())

    def get_device_backend_map(self) -> dict[str, Backend]:
        return self.device_backend_map


def is_ucc_available() -> bool:
    return False  # no UCC engine in this build


def is_xccl_available() -> bool:
    return False  # no XPU devices in this build


def _one_available(name: str) -> bool:
    from . import process_group as P
    probe = {"gloo": P.is_gloo_available, "mpi": P.is_mpi_available,
             "nccl": P.is_nccl_available, "ucc": is_ucc_available,
             "xccl": is_xccl_available}.get(str(name).lower())
    if probe is not None:
        return probe()
    return False  # "fake", "undefined" and unregistered names: nothing runs them here


def is_backend_available(backend: str) -> bool:
    """Whether ``backend`` (a name, or "device:backend" pairs, every one of which must be
    available) can run in this build."""
    if ":" in backend.lower():
        pairs = BackendConfig(Backend(backend)).get_device_backend_map()
        return all(_one_available(b) for b in pairs.values())
    return _one_available(backend)


# The device types PyTorch's device strings may name (this build runs only some of them).
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep",
                       "hip", "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta",
                       "hpu", "mtia", "privateuseone")


def get_default_backend_for_device(device: Any) -> str:
    """The backend a device type uses by default ("gloo" for cpu, "nccl" for cuda)."""
    import gputensor as gt
    if isinstance(device, gt.device):
        device_type = device.type
    else:
        try:
            device_type = gt.device(device).type
        except RuntimeError:
            device_type = str(device).split(":")[0]
            if device_type not in _TORCH_DEVICE_TYPES:
                raise
    backend = Backend.default_device_backend_map.get(device_type)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend


def is_torchelastic_launched() -> bool:
    """Whether a torchelastic-style launcher started this process (TORCHELASTIC_RUN_ID is
    set: torchrun sets it, and so does ``gputensor-run --standalone``)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


class ProcessGroupGloo(ProcessGroup):
    """PyTorch's ``ProcessGroupGloo(store, rank, size, timeout)``. This build's "gloo"
    backend is its own TCP engine (``_gloo.py``: ranks meet through ``store``, then talk over
    pairwise sockets), not Facebook's gloo library: this class builds a group on that engine,
    so ``isinstance(pg, ProcessGroupGloo)`` and its options read as in PyTorch."""

    class Options:
        """Gloo's options: the timeout (``_timeout``); ``_devices``/``_threads`` are kept
        for PyTorch's code that sets them (one engine thread per group here)."""

        def __init__(self, timeout: datetime.timedelta = default_pg_timeout) -> None:
            self.backend = "gloo"
            self._timeout = timeout
            self._devices: list[Any] = []
            self._threads = 2
            self.global_ranks_in_group: list[int] = []
            self.group_name = ""

    class Device:
        """A network interface record (``create_device``): the engine listens on every
        interface, so this only names one."""

        def __init__(self, hostname: str = "", interface: str = "") -> None:
            self.hostname, self.interface = hostname, interface

        def __repr__(self) -> str:
            return f"Device(hostname={self.hostname!r}, interface={self.interface!r})"

    @staticmethod
    def create_device(hostname: str = "", interface: str = "", lazy_init: Any = None
                      ) -> ProcessGroupGloo.Device:
        return ProcessGroupGloo.Device(hostname, interface)

    @staticmethod
    def create_default_device(lazy_init: Any = None) -> ProcessGroupGloo.Device:
        import socket
        return ProcessGroupGloo.Device(socket.gethostname())

    def __init__(self, store: Store, rank: int, size: int,
                 timeout: datetime.timedelta | ProcessGroupGloo.Options = default_pg_timeout
                 ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"ProcessGroupGloo: store must be a gt.distributed.Store, got "
                            f"{type(store).__name__}")
        options = timeout if isinstance(timeout, ProcessGroupGloo.Options) else \
            ProcessGroupGloo.Options(timeout)
        if not 0 <= rank < size:
            raise ValueError(f"Invalid rank {rank} for world size {size}")
        comm = _gloo.world(store, rank, size, options._timeout.total_seconds())
        super().__init__(comm, list(range(size)), Backend.GLOO, False, _gloo)
        self._options = options

    def options(self) -> ProcessGroupGloo.Options:
        return self._options
