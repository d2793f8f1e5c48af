"""gputensor.storage: untyped and typed storages, device memory drivers, the copy table."""

from .copy_table import COPY_TABLE, copy_storage
from .typed import STORAGE_TYPES, TypedStorage, storage_type
from .untyped import UntypedStorage

__all__ = ["COPY_TABLE", "STORAGE_TYPES", "TypedStorage", "UntypedStorage", "copy_storage",
           "storage_type"]
