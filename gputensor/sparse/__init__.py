"""gputensor.sparse: the sparse_coo legacy tensor types (SparseCPU / SparseCUDA backends).

The sparse kernels plug into the SparseCPU and SparseCUDA backends of the registry; until they
do, constructing a sparse tensor raises a clear error naming the missing backend kernel.
"""

from gputensor._legacy import types_in

globals().update(types_in("gputensor.sparse"))
