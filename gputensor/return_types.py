"""Named result tuples (PyTorch's torch.return_types): tuples whose fields are attributes."""

from collections import namedtuple

max = namedtuple("max", ["values", "indices"])  # noqa: A001 - PyTorch's names
min = namedtuple("min", ["values", "indices"])  # noqa: A001
aminmax = namedtuple("aminmax", ["min", "max"])
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
frexp = namedtuple("frexp", ["mantissa", "exponent"])

for _t in (max, min, aminmax, sort, topk, kthvalue, median, nanmedian, cummax, cummin,
           frexp):
    _t.__module__ = "gputensor.return_types"

# torch.linalg's named results (issue 17)
linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
slogdet = namedtuple("slogdet", ["sign", "logabsdet"])
linalg_inv_ex = namedtuple("linalg_inv_ex", ["inverse", "info"])
linalg_solve_ex = namedtuple("linalg_solve_ex", ["result", "info"])
linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_eig = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
svd = namedtuple("svd", ["U", "S", "V"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
qr = namedtuple("qr", ["Q", "R"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
triangular_solve = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])

for _t in (linalg_slogdet, slogdet, linalg_inv_ex, linalg_solve_ex, linalg_cholesky_ex,
           linalg_eigh, linalg_eig, linalg_svd, svd, linalg_qr, qr, linalg_lstsq,
           triangular_solve):
    _t.__module__ = "gputensor.return_types"
linalg_lu_factor_ex = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
linalg_lu_factor = namedtuple("linalg_lu_factor", ["LU", "pivots"])
linalg_lu = namedtuple("linalg_lu", ["P", "L", "U"])
lu_unpack = namedtuple("lu_unpack", ["P", "L", "U"])
linalg_ldl_factor_ex = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
linalg_ldl_factor = namedtuple("linalg_ldl_factor", ["LD", "pivots"])

for _t in (linalg_lu_factor_ex, linalg_lu_factor, linalg_lu, lu_unpack, linalg_ldl_factor_ex,
           linalg_ldl_factor):
    _t.__module__ = "gputensor.return_types"
mode = namedtuple("mode", ["values", "indices"])
geqrf = namedtuple("geqrf", ["a", "tau"])
histogram = namedtuple("histogram", ["hist", "bin_edges"])
histogramdd = namedtuple("histogramdd", ["hist", "bin_edges"])

for _t in (mode, geqrf, histogram, histogramdd):
    _t.__module__ = "gputensor.return_types"
