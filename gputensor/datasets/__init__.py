"""gputensor.datasets: small ready-to-use datasets and a reader for MNIST's IDX files.

``digits()`` loads the 8x8 handwritten digits packaged with gputensor (no download).
``mnist(root)`` reads MNIST (or Fashion-MNIST) IDX files from a folder you provide.

Credit for the digits data: scikit-learn's copy of the UCI ML "Optical Recognition of
Handwritten Digits" dataset (E. Alpaydin and C. Kaynak, 1998), licensed under CC BY 4.0;
scikit-learn is BSD-3-Clause. See ``_digits.py`` for the full note.
"""

from gputensor.datasets._digits import Digits, digits, digits_dataset, split_indices
from gputensor.datasets._mnist import MNIST, mnist, mnist_dataset, parse_idx, read_idx

__all__ = ["MNIST", "Digits", "digits", "digits_dataset", "mnist", "mnist_dataset",
           "parse_idx", "read_idx", "split_indices"]
