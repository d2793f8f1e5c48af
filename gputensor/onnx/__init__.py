"""gt.onnx: export a model's traced forward as an ONNX graph (torch.onnx's TorchScript-style
exporter). Needs the ``onnx`` package (``pip install gputensor[onnx]``)."""

from . import errors
from ._export import DEFAULT_OPSET, OperatorExportTypes, TrainingMode, export
from ._trace import is_in_onnx_export
from .errors import OnnxExporterError, UnsupportedOperatorError

__all__ = ["export", "is_in_onnx_export", "TrainingMode", "OperatorExportTypes", "errors",
           "OnnxExporterError", "UnsupportedOperatorError", "DEFAULT_OPSET"]
