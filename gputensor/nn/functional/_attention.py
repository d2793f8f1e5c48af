"""Attention: scaled_dot_product_attention and multi_head_attention_forward (torch's
functional forms), composed of matmul / softmax / masked ops so autograd differentiates them.

Masks become one additive float bias (0 where attention is allowed, -inf where it is not)
that broadcasts over the (..., L, S) score matrix. The multi-head path keeps q, k and v as
(N, heads, len, head_dim) views of the projections, so no head split needs a copy.
"""

from __future__ import annotations

import math
import warnings

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast
from gputensor.nn import functional as F
from gputensor.nn.functional._dropout import dropout as _dropout

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _bool_to_bias(mask: Tensor, dtype: gt.dtype, blocked_when: bool) -> Tensor:
    """An additive bias from a bool mask: -inf where ``mask == blocked_when``, 0 elsewhere."""
    blocked = mask if blocked_when else mask.logical_not()
    return gt.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(blocked, _NEG_INF)


def _attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, scale: float,
            dropout_p: float, safe: bool) -> tuple[Tensor, Tensor]:
    """softmax(q k^T * scale + bias) v over the last two dims; returns (output, weights).

    ``safe`` gives rows whose keys are all masked zero weights (SDPA's behaviour) instead of
    the NaNs a plain softmax produces (MultiheadAttention's need_weights path).
    """
    scores = gt.matmul(q * scale, k.transpose(-2, -1))
    full = None
    if bias is not None:
        if safe:
            # Zero the bias of fully masked rows so their softmax stays finite (and so do the
            # gradients through it); their weights are zeroed after the softmax.
            full = (bias == _NEG_INF).all(-1, keepdim=True)
            bias = bias.masked_fill(full, 0.0)
        scores = scores + bias
    weights = gt.softmax(scores, -1)
    if full is not None:
        weights = weights.masked_fill(full, 0.0)
    if dropout_p > 0.0:
        weights = _dropout(weights, dropout_p, True)
    return gt.matmul(weights, v), weights


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(Q K^T * scale + mask) V`` for query (..., L, E), key (..., S, E) and value
    (..., S, Ev).

    A bool ``attn_mask`` marks the positions that MAY attend (True); a float mask is added to
    the scores. ``is_causal`` applies the lower-triangular (top-left aligned) mask. Rows with
    every key masked give zeros. ``enable_gqa`` lets key/value have fewer heads (dim -3) than
    query; each key/value head then serves a group of query heads.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() < 2:
            raise RuntimeError(f"scaled_dot_product_attention: expected {name} to have at least "
                               f"2 dimensions, got shape {tuple(t.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {query.dtype} key.dtype: {key.dtype} and "
                           f"value.dtype: {value.dtype} instead.")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query and key must have the same "
                           f"embedding size, got {tuple(query.shape)} and {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same "
                           f"sequence length, got {tuple(key.shape)} and {tuple(value.shape)}")
    if enable_gqa and query.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hk == 0 or hq % hk or value.shape[-3] != hk:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa the number of "
                               f"query heads ({hq}) must be a multiple of the key/value heads "
                               f"(key {hk}, value {value.shape[-3]})")
        key = key.repeat_interleave(hq // hk, dim=-3)
        value = value.repeat_interleave(hq // hk, dim=-3)

    L, S = query.shape[-2], key.shape[-2]
    bias = None
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        causal = gt.ones((L, S), dtype=gt.bool, device=query.device).tril()
        bias = _bool_to_bias(causal, query.dtype, blocked_when=False)
    elif attn_mask is not None:
        if attn_mask.dtype == gt.bool:
            bias = _bool_to_bias(attn_mask, query.dtype, blocked_when=False)
        elif attn_mask.dtype == query.dtype:
            bias = attn_mask
        else:
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                               f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and  "
                               f"query.dtype: {query.dtype} instead.")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    # A causal row always keeps key 0, so only explicit masks can empty a row.
    return _attend(query, key, value, bias, scale, dropout_p, safe=not is_causal)[0]


# -- multi-head attention ------------------------------------------------------------------------
def _canonical_mask(mask: Tensor | None, name: str, dtype: gt.dtype) -> Tensor | None:
    """A bool mask (True = blocked) as an additive float mask; float masks pass through."""
    if mask is None:
        return None
    if mask.dtype == gt.bool:
        return _bool_to_bias(mask, dtype, blocked_when=True)
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def _shape_check(query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                 attn_mask: Tensor | None, num_heads: int) -> bool:
    """Validate the ranks of the inputs; True when they are batched."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(f"For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.dim()}-D tensor "
                                 f"instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.dim()}-D tensor "
                                 f"instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(f"For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     f"instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                     f"{tuple(attn_mask.shape)}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _in_projection(query: Tensor, key: Tensor, value: Tensor, embed_dim: int,
                   in_proj_weight: Tensor | None, in_proj_bias: Tensor | None,
                   separate: bool, q_w: Tensor | None, k_w: Tensor | None,
                   v_w: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v projections; shared inputs share one gemm (self- and encoder-decoder attention)."""
    E = embed_dim
    if separate:
        if q_w is None or k_w is None or v_w is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, "
                                 "k_proj_weight or v_proj_weight is None")
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = in_proj_bias.chunk(3)
        return F.linear(query, q_w, bq), F.linear(key, k_w, bk), F.linear(value, v_w, bv)
    if in_proj_weight is None:
        raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
    if query is key and key is value:
        return tuple(F.linear(query, in_proj_weight, in_proj_bias).split(E, -1))  # type: ignore
    if key is value:
        w_q, w_kv = in_proj_weight.split([E, 2 * E])
        b_q = b_kv = None
        if in_proj_bias is not None:
            b_q, b_kv = in_proj_bias.split([E, 2 * E])
        k, v = F.linear(key, w_kv, b_kv).split(E, -1)
        return F.linear(query, w_q, b_q), k, v
    w_q, w_k, w_v = in_proj_weight.chunk(3)
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)


def _heads(x: Tensor, num_heads: int, batch_first: bool) -> Tensor:
    """(len, N, E), or (N, len, E) when batch_first, -> (N, heads, len, head_dim) as a view."""
    x = x.unflatten(-1, (num_heads, x.shape[-1] // num_heads))
    return x.permute(0, 2, 1, 3) if batch_first else x.permute(1, 2, 0, 3)


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float,
        out_proj_weight: Tensor, out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention over time-major inputs: query (L, N, E), key (S, N, kdim), value
    (S, N, vdim), or unbatched (L, E) / (S, kdim) / (S, vdim).

    Bool masks mark BLOCKED positions (True); float masks are added to the scores.
    ``key_padding_mask`` is (N, S); ``attn_mask`` is (L, S) or (N * num_heads, L, S).
    Returns (attn_output (L, N, E), attn_weights (N, L, S) averaged over heads, or
    (N, num_heads, L, S), or None when ``need_weights`` is False).
    """
    return _multi_head_attention(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
        bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
        key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
        k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal,
        batch_first=False)


def _multi_head_attention(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float,
        out_proj_weight: Tensor, out_proj_bias: Tensor | None, training: bool,
        key_padding_mask: Tensor | None, need_weights: bool, attn_mask: Tensor | None,
        use_separate_proj_weight: bool, q_proj_weight: Tensor | None,
        k_proj_weight: Tensor | None, v_proj_weight: Tensor | None, static_k: Tensor | None,
        static_v: Tensor | None, average_attn_weights: bool, is_causal: bool,
        batch_first: bool) -> tuple[Tensor, Tensor | None]:
    """multi_head_attention_forward on time-major or (``batch_first``) batch-major inputs.

    Working in the caller's layout saves the copy that a transposed input would cost in the
    projections; the output comes back in the same layout, contiguous.
    """
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        batch_first = False
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    if batch_first:
        bsz, tgt_len, embed_dim = query.shape
        src_len = key.shape[1]
    else:
        tgt_len, bsz, embed_dim = query.shape
        src_len = key.shape[0]

    if (key_padding_mask is not None and attn_mask is not None
            and key_padding_mask.dtype != attn_mask.dtype):
        warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. Use "
                      "same type for both instead.", stacklevel=2)
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None   # the hint stands in for the mask (SDPA builds it)
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                                 f"match value's {tuple(value.shape[:2])}")
    elif key.shape != value.shape:
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)}")

    q, k, v = _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight, q_proj_weight, k_proj_weight,
                             v_proj_weight)

    # attn_mask as (1 or N, 1 or heads, L, S) so it broadcasts over the (N, heads, L, S) scores.
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.view(1, 1, tgt_len, src_len)
        elif attn_mask.dim() == 3:
            expected = (bsz * num_heads, tgt_len, src_len)
            if tuple(attn_mask.shape) != expected:
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {expected}.")
            attn_mask = attn_mask.view(bsz, num_heads, tgt_len, src_len)
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key or value.")
        shape, dim = ((bsz, 1, embed_dim), 1) if batch_first else ((1, bsz, embed_dim), 0)
        k = gt.cat([k, bias_k.reshape(1, 1, embed_dim).expand(*shape)], dim)
        v = gt.cat([v, bias_v.reshape(1, 1, embed_dim).expand(*shape)], dim)
        attn_mask = None if attn_mask is None else gt.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else gt.pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be set or both be None")

    q = _heads(q, num_heads, batch_first)
    k = _heads(k, num_heads, batch_first) if static_k is None else \
        _static(static_k, "static_k", bsz, num_heads, head_dim)
    v = _heads(v, num_heads, batch_first) if static_v is None else \
        _static(static_v, "static_v", bsz, num_heads, head_dim)

    if add_zero_attn:
        zeros = gt.zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k = gt.cat([k, zeros], 2)
        v = gt.cat([v, zeros], 2)
        attn_mask = None if attn_mask is None else gt.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else gt.pad(key_padding_mask, (0, 1))
    src_len = k.shape[2]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.view(bsz, 1, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0
    if need_weights:
        out, weights = _attend(q, k, v, attn_mask, 1.0 / math.sqrt(head_dim), dropout_p,
                               safe=False)
    else:
        if is_causal:
            causal = gt.ones((tgt_len, src_len), dtype=gt.bool, device=q.device).tril()
            attn_mask = _bool_to_bias(causal, q.dtype, blocked_when=False)
        out, weights = _attend(q, k, v, attn_mask, 1.0 / math.sqrt(head_dim), dropout_p,
                               safe=not is_causal)
    # (N, heads, L, d) -> (L * N, E) or (N * L, E): one copy, then the output projection as
    # one gemm.
    lead = (bsz, tgt_len) if batch_first else (tgt_len, bsz)
    out = out.permute(0, 2, 1, 3) if batch_first else out.permute(2, 0, 1, 3)
    out = F.linear(out.reshape(bsz * tgt_len, embed_dim), out_proj_weight, out_proj_bias)
    out = out.view(*lead, -1)
    if not need_weights:
        return (out if batched else out.squeeze(1)), None
    if average_attn_weights:
        weights = weights.mean(dim=1)
    if not batched:
        out, weights = out.squeeze(1), weights.squeeze(0)
    return out, weights


def _static(t: Tensor, name: str, bsz: int, num_heads: int, head_dim: int) -> Tensor:
    """A precomputed (N * heads, S, head_dim) key or value as (N, heads, S, head_dim)."""
    if t.dim() != 3 or t.shape[0] != bsz * num_heads or t.shape[2] != head_dim:
        raise AssertionError(f"expecting {name} of shape ({bsz * num_heads}, S, {head_dim}), "
                             f"but got {tuple(t.shape)}")
    return t.view(bsz, num_heads, t.shape[1], head_dim)


# Autocast policies (gputensor/amp/autocast_mode.py's tables).
_autocast.apply(globals(), ("scaled_dot_product_attention",))
