"""The package list, derived from the tree (pyproject.toml holds everything else).

One distribution, one namespace: the top-level storage/, kernels/ and autograd/ folders install
as gputensor.storage, gputensor.kernels and gputensor.autograd. setuptools' discovery cannot
remap folders like that, so the packages are every folder under the four roots that holds an
``__init__.py``, found here at build time: a new subpackage ships without editing a list.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Installed name -> source folder (setuptools' package_dir: a subpackage's folder is found
# under its nearest mapped parent, e.g. gputensor.kernels.cuda.ops -> kernels/cuda/ops).
ROOTS = {"gputensor": "gputensor", "gputensor.storage": "storage",
         "gputensor.kernels": "kernels", "gputensor.autograd": "autograd"}


def packages() -> Iterator[str]:
    """Every package of the distribution, by its installed name."""
    for name, folder in ROOTS.items():
        base = HERE / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            if "__pycache__" not in rel.parts:
                yield ".".join((name, *rel.parts))


if __name__ == "__main__":
    from setuptools import setup

    setup(package_dir=ROOTS, packages=list(packages()))
