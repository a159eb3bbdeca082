"""Unit tests of snippets/sparse_gated.py: the indexer and the sparse read, the output gate, QK-norm (chapter 17).

Each PyTorch reference (tests/support/torch_reference.py) is written the way
the models' own code writes it, and shares no code with the snippet: DeepSeek-V3.2's indexer (ReLU of each
head's dot products, weighted per query, summed; ``topk`` of the index; a
mask of -inf outside it added to the scores), Qwen3-Next's output gate
(``attn_output * torch.sigmoid(gate)``) and Qwen3's QK-norm
(``torch.nn.functional.rms_norm`` on queries and keys, then
``scaled_dot_product_attention``). float64, random shapes.
"""

import numpy as np
import pytest

from snippets.at_scale import topk_attention
from snippets.attention import scaled_dot_product_attention
from snippets.sparse_gated import gated_output, init_indexer, lightning_indexer, qk_norm_attention, sparse_attention
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-12


@pytest.mark.parametrize(("batch", "T", "S", "d_model", "n_index", "d_index", "k_top"), [
    ((), 5, 9, 8, 2, 4, 3), ((2,), 4, 4, 6, 3, 2, 2), ((2, 3), 3, 7, 5, 1, 3, 7), ((), 6, 6, 4, 4, 4, 1),
])
def test_indexer_and_sparse_read_equal_pytorch(batch, T, S, d_model, n_index, d_index, k_top):
    require_torch()
    rng = np.random.default_rng(T * S + d_model)
    params = init_indexer(rng, d_model, n_index, d_index)
    X_q, X_kv = rng.normal(size=(*batch, T, d_model)), rng.normal(size=(*batch, S, d_model))
    index = lightning_indexer(X_q, X_kv, params, n_index)
    assert index.shape == (*batch, T, S)
    assert np.abs(index - reference.lightning_indexer(*reference.tensors([X_q, X_kv, params]), n_index).numpy()).max() \
        < TOLERANCE
    Q, K, V = rng.normal(size=(*batch, T, 4)), rng.normal(size=(*batch, S, 4)), rng.normal(size=(*batch, S, 3))
    for causal in ((False, True) if T == S else (False,)):
        mask = np.tril(np.ones((T, S), dtype=bool)) if causal else None
        expected_out, expected_w = reference.numpy(reference.sparse_attention(*reference.tensors([Q, K, V, index]), k_top,
                                                                              reference.tensors(mask)))
        out, weights = sparse_attention(Q, K, V, index, k_top, mask=mask)
        # ReLU makes ties (index 0) common, and torch.topk breaks them its own way: compare the rows without one
        ranked = np.sort(np.where(mask, index, -np.inf) if causal else index, axis=-1)[..., ::-1]
        clear = (k_top >= S) | (ranked[..., min(k_top, S) - 1] > ranked[..., min(k_top, S - 1)])
        assert clear.mean() > 0.5
        assert np.abs(out - expected_out)[clear].max() < TOLERANCE
        assert np.abs(weights - expected_w)[clear].max() < TOLERANCE
        allowed = S if mask is None else mask.sum(-1)
        assert ((weights > 0).sum(-1) == np.minimum(k_top, allowed)).all()


def test_sparse_read_is_attention_over_the_kept_keys_and_topk_when_the_index_is_the_score():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(4, 6)), rng.normal(size=(10, 6)), rng.normal(size=(10, 2))
    index = rng.normal(size=(4, 10))
    out, weights = sparse_attention(Q, K, V, index, 3)
    kept = weights > 0
    full_over_kept = scaled_dot_product_attention(Q, K, V, mask=kept)
    assert np.abs(out - full_over_kept[0]).max() < TOLERANCE
    assert np.abs(sparse_attention(Q, K, V, Q @ K.T, 3)[0] - topk_attention(Q, K, V, 3)).max() < TOLERANCE
    assert np.abs(sparse_attention(Q, K, V, index, 10)[0] - scaled_dot_product_attention(Q, K, V)[0]).max() < TOLERANCE
    assert sparse_attention(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32), index, 2)[0].dtype \
        == np.float32


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 6), (2, 2, 4, 10)])
def test_gate_equals_pytorch(shape):
    require_torch()
    rng = np.random.default_rng(len(shape))
    heads, X = rng.normal(size=shape), rng.normal(size=(*shape[:-1], 7))
    W_G = rng.normal(scale=3, size=(7, shape[-1]))
    expected = reference.gated_output(*reference.tensors([heads, X, W_G])).numpy()
    assert np.abs(gated_output(heads, X, W_G) - expected).max() < TOLERANCE
    huge = gated_output(heads, X, W_G * 1e300)          # a gate of exactly 0 or 1, no warning, no NaN
    assert np.isfinite(huge).all() and set(np.unique(np.abs(huge) / np.abs(heads)).round(12)) <= {0.0, 1.0}


@pytest.mark.parametrize(("batch", "T", "S", "d_k", "eps"), [((), 4, 6, 8, 1e-6), ((2, 3), 5, 5, 4, 1e-5)])
def test_qk_norm_equals_pytorch_and_bounds_the_scores(batch, T, S, d_k, eps):
    require_torch()
    rng = np.random.default_rng(d_k)
    Q, K, V = rng.normal(size=(*batch, T, d_k)) * 50, rng.normal(size=(*batch, S, d_k)), rng.normal(size=(*batch, S, 3))
    q_weight, k_weight = rng.uniform(0.5, 2, size=d_k), rng.uniform(0.5, 2, size=d_k)
    mask = np.tril(np.ones((T, S), dtype=bool))
    expected = reference.qk_norm_attention(*reference.tensors([Q, K, V, q_weight, k_weight]), eps,
                                           reference.tensors(mask)).numpy()
    q, k = (reference.rms_norm(*reference.tensors([x, w]), eps) for x, w in ((Q, q_weight), (K, k_weight)))
    out, weights = qk_norm_attention(Q, K, V, q_weight, k_weight, eps=eps, mask=mask)
    assert np.abs(out - expected).max() < TOLERANCE
    scores = (q @ k.transpose(-1, -2)).numpy() / np.sqrt(d_k)
    assert np.abs(scores).max() <= d_k * q_weight.max() * k_weight.max() / np.sqrt(d_k)
    big = qk_norm_attention(Q * 1e6, K, V, q_weight, k_weight, eps=eps, mask=mask)[0]
    assert np.abs(big - out).max() < 1e-6        # a row's size no longer reaches the scores (but for eps)


@pytest.mark.parametrize(("call", "words"), [
    (lambda r: sparse_attention(r(3, 4), r(5, 4), r(5, 2), r(3, 4), 2), "index must have shape (..., T, S)"),
    (lambda r: sparse_attention(r(3, 4), r(5, 4), r(5, 2), r(3, 5), 0), "k_top must be a positive integer"),
    (lambda r: lightning_indexer(r(3, 8), r(4, 8), init_indexer(np.random.default_rng(0), 8, 2, 4), 3),
     "W_IQ has 8 columns, expected n_index·d_index = 3·4"),
    (lambda r: gated_output(r(3, 4), r(3, 5), r(5, 3)), "heads must have shape (..., T, d_out) with d_out = 3"),
    # issue 44: a gate broadcast over the batch read other texts' states
    (lambda r: gated_output(r(2, 3, 4), r(1, 3, 5), r(5, 4)), "heads and X must have the same leading shape"),
    (lambda r: qk_norm_attention(r(3, 4), r(5, 4), r(5, 2), np.ones(3), np.ones(4)), "q_weight must have shape (d_k,)"),
    (lambda r: qk_norm_attention(r(3, 4), r(5, 4), r(5, 2), np.ones(4) * 1e200, np.ones(4) * 1e200),
     "the scores of the normalised queries and keys overflow"),
])
def test_bad_input_is_named(call, words):
    rng = np.random.default_rng(6)
    with pytest.raises((ValueError, TypeError)) as caught:
        call(lambda *shape: rng.normal(size=shape))
    assert words in str(caught.value)
