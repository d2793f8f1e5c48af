"""MultiheadAttention, with torch.nn.MultiheadAttention's parameters, init and forward."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn import init
from gputensor.nn.functional._attention import _multi_head_attention
from gputensor.nn.parameter import Parameter

from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under PyTorch's class name for the output projection, so reprs match."""


class MultiheadAttention(Module):
    """Attention from ``num_heads`` parallel heads of size ``embed_dim // num_heads``.

    Parameters as in PyTorch: ``in_proj_weight`` (3E, E) when key and value have embed_dim
    features, else ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight``; ``in_proj_bias``
    (3E); ``out_proj`` (weight, bias); ``bias_k`` / ``bias_v`` (1, 1, E) with ``add_bias_kv``.
    Inputs are (L, N, E), or (N, L, E) with ``batch_first``, or unbatched (L, E).
    """

    __constants__ = ["batch_first"]

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(gt.empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(gt.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(gt.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(gt.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(gt.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(gt.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(gt.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def __setstate__(self, state: dict) -> None:
        # Checkpoints from before kdim/vdim existed lack the flag.
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Returns (attn_output, attn_weights): weights averaged over heads (N, L, S), per head
        (N, heads, L, S) with ``average_attn_weights=False``, or None without
        ``need_weights``. Bool masks mark blocked positions; float masks are added."""
        # Batch-first inputs stay batch-first: the functional works in either layout.
        return _multi_head_attention(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, self.training, key_padding_mask,
            need_weights, attn_mask, not self._qkv_same_embed_dim, self.q_proj_weight,
            self.k_proj_weight, self.v_proj_weight, None, None, average_attn_weights, is_causal,
            batch_first=self.batch_first)
