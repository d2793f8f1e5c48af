"""gt.linalg: torch.linalg's names (issue 17; being built)."""

__all__: list[str] = []
