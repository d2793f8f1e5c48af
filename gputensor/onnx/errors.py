"""gt.onnx.errors: the exporter's exceptions (torch.onnx.errors' names)."""

from __future__ import annotations


class OnnxExporterError(RuntimeError):
    """Errors raised by the ONNX exporter."""


class UnsupportedOperatorError(OnnxExporterError):
    """An op of the traced call has no ONNX translation."""

    def __init__(self, name: str, version: int, supported_version: int | None = None) -> None:
        if supported_version is not None:
            msg = (f"Exporting the operator '{name}' to ONNX opset version {version} is not "
                   f"supported. Support for this operator was added in version "
                   f"{supported_version}, try exporting with this version.")
        else:
            msg = (f"Exporting the operator '{name}' to ONNX opset version {version} is not "
                   "supported by gputensor's exporter.")
        super().__init__(msg)
