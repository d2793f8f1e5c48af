"""gt.special: torch.special's names (issue 17; being built)."""

__all__: list[str] = []
