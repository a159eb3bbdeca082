"""Unit tests of snippets/multihead.py: the multi-head attention layer of chapter 4."""

import itertools
import math

import numpy as np
import pytest

from snippets.multihead import (
    causal_mask,
    count_parameters,
    head_params,
    init_params,
    merge_heads,
    multi_head_attention,
    multi_head_attention_loop,
    padding_mask,
    split_heads,
    summed_heads_attention,
)


# A reference written from the formulas, sharing no code with the snippets: its own
# softmax, explicit loops over the batch, the heads and the queries, and each head's
# projections taken as explicit column slices of the big matrices.
def reference_softmax(scores, allowed):
    """Softmax over the allowed entries of a 1-d row; a row with none allowed is all zeros."""
    weights = np.zeros(len(scores))
    idx = [s for s in range(len(scores)) if allowed[s]]
    if idx:
        top = max(scores[s] for s in idx)
        exps = {s: math.exp(scores[s] - top) for s in idx}
        total = math.fsum(exps.values())
        for s in idx:
            weights[s] = exps[s] / total
    return weights


def reference_layer(x_q, x_kv, params, n_heads, mask=None):
    """Multi-head attention for float64 inputs, one scalar formula at a time."""
    batch = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
    T, S = x_q.shape[-2], x_kv.shape[-2]
    d_model = params["W_q"].shape[0]
    d_head = d_model // n_heads
    full_mask = np.ones((*batch, n_heads, T, S), dtype=bool)
    if mask is not None:
        full_mask = full_mask & mask
    batch = full_mask.shape[:-3]  # a mask may carry batch dimensions of its own
    out = np.zeros((*batch, T, d_model))
    weights = np.zeros((*batch, n_heads, T, S))
    for b in itertools.product(*(range(n) for n in batch)):
        xq = np.broadcast_to(x_q, (*batch, T, x_q.shape[-1]))[b]
        xkv = np.broadcast_to(x_kv, (*batch, S, x_kv.shape[-1]))[b]
        concatenated = np.zeros((T, d_model))
        for h in range(n_heads):
            c0, c1 = h * d_head, (h + 1) * d_head
            q = xq @ params["W_q"][:, c0:c1] + params["b_q"][c0:c1]
            k = xkv @ params["W_k"][:, c0:c1] + params["b_k"][c0:c1]
            v = xkv @ params["W_v"][:, c0:c1] + params["b_v"][c0:c1]
            for t in range(T):
                scores = [float(q[t] @ k[s]) / math.sqrt(d_head) for s in range(S)]
                w = reference_softmax(scores, full_mask[b][h, t])
                weights[b][h, t] = w
                concatenated[t, c0:c1] = sum(w[s] * v[s] for s in range(S))
        out[b] = concatenated @ params["W_o"] + params["b_o"]
    return out, weights


CASES = [
    # batch of x_q, batch of x_kv, T, S, d_model, d_kv, n_heads
    ((), (), 3, 5, 8, 6, 2),
    ((2,), (2,), 4, 7, 12, 5, 3),
    ((2, 3), (3,), 2, 3, 6, 4, 1),
    ((1,), (3,), 5, 2, 8, 10, 4),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_layer_equals_reference_in_float64(case, bias):
    batch_q, batch_kv, T, S, d_model, d_kv, n_heads = case
    rng = np.random.default_rng(sum(case[2:]))
    params = init_params(d_model, n_heads, rng, d_kv=d_kv, bias=bias)
    x_q = rng.normal(size=(*batch_q, T, d_model))
    x_kv = rng.normal(size=(*batch_kv, S, d_kv))
    out, weights = multi_head_attention(x_q, x_kv, params, n_heads)
    ref_out, ref_weights = reference_layer(x_q, x_kv, params, n_heads)
    batch = np.broadcast_shapes(batch_q, batch_kv)
    assert out.shape == (*batch, T, d_model) and weights.shape == (*batch, n_heads, T, S)
    assert out.dtype == weights.dtype == np.float64
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-10)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_and_random_masks_equal_reference(seed):
    rng = np.random.default_rng(100 + seed)
    n_heads = int(rng.integers(1, 4))
    d_model = n_heads * int(rng.integers(1, 5))
    d_kv = d_model + int(rng.integers(1, 4))
    T, S = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    B = int(rng.integers(1, 4))
    params = init_params(d_model, n_heads, rng, d_kv=d_kv)
    x_q, x_kv = rng.normal(size=(B, T, d_model)), rng.normal(size=(B, S, d_kv))
    mask = rng.random((B, n_heads, T, S)) > 0.3  # some rows are fully masked
    out, weights = multi_head_attention(x_q, x_kv, params, n_heads, mask=mask)
    ref_out, ref_weights = reference_layer(x_q, x_kv, params, n_heads, mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-10)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-10)


def test_self_attention_with_causal_and_padding_masks_equals_reference():
    rng = np.random.default_rng(7)
    B, T, d_model, n_heads = 3, 6, 8, 2
    params = init_params(d_model, n_heads, rng)
    x = rng.normal(size=(B, T, d_model))
    lengths = [6, 4, 1]
    mask = causal_mask(T) & padding_mask(lengths, T)
    assert mask.shape == (B, 1, T, T)
    out, weights = multi_head_attention(x, x, params, n_heads, mask=mask)
    ref_out, ref_weights = reference_layer(x, x, params, n_heads, mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-10)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-10)
    # no weight on the future, none on padding, and every row that sees a key sums to 1
    assert (weights[:, :, np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0).all()
    for b, n in enumerate(lengths):
        assert (weights[b, :, :, n:] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=0, atol=1e-12)


def test_cross_attention_with_padding_mask_and_an_empty_source():
    rng = np.random.default_rng(8)
    B, T, S, d_model, d_kv, n_heads = 3, 4, 5, 6, 9, 3
    params = init_params(d_model, n_heads, rng, d_kv=d_kv)
    x_q, x_kv = rng.normal(size=(B, T, d_model)), rng.normal(size=(B, S, d_kv))
    mask = padding_mask([5, 2, 0], S)
    out, weights = multi_head_attention(x_q, x_kv, params, n_heads, mask=mask)
    ref_out, ref_weights = reference_layer(x_q, x_kv, params, n_heads, mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-10)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-10)
    # the sequence with no source at all: zero weights, and the layer returns only b_o, no NaN
    assert (weights[2] == 0).all()
    np.testing.assert_array_equal(out[2], np.broadcast_to(params["b_o"], (T, d_model)))
    assert np.isfinite(out).all()


def test_causal_outputs_do_not_depend_on_later_tokens():
    rng = np.random.default_rng(9)
    T, d_model, n_heads = 5, 8, 4
    params = init_params(d_model, n_heads, rng)
    x = rng.normal(size=(T, d_model))
    changed = x.copy()
    changed[3:] = rng.normal(size=(2, d_model))
    out, _ = multi_head_attention(x, x, params, n_heads, mask=causal_mask(T))
    out_changed, _ = multi_head_attention(changed, changed, params, n_heads, mask=causal_mask(T))
    np.testing.assert_array_equal(out[:3], out_changed[:3])
    assert not np.allclose(out[3:], out_changed[3:])


@pytest.mark.parametrize("case", CASES)
def test_loop_version_equals_reshape_version(case):
    batch_q, batch_kv, T, S, d_model, d_kv, n_heads = case
    rng = np.random.default_rng(11)
    params = init_params(d_model, n_heads, rng, d_kv=d_kv)
    x_q = rng.normal(size=(*batch_q, T, d_model))
    x_kv = rng.normal(size=(*batch_kv, S, d_kv))
    mask = rng.random((n_heads, T, S)) > 0.4
    out, weights = multi_head_attention(x_q, x_kv, params, n_heads, mask=mask)
    loop_out, loop_weights = multi_head_attention_loop(x_q, x_kv, params, n_heads, mask=mask)
    np.testing.assert_allclose(out, loop_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, loop_weights, rtol=0, atol=1e-12)


def test_head_params_are_column_slices():
    rng = np.random.default_rng(12)
    params = init_params(6, 3, rng, d_kv=4)
    heads = head_params(params, 3)
    assert [h["W_q"].shape for h in heads] == [(6, 2)] * 3
    assert [h["W_k"].shape for h in heads] == [(4, 2)] * 3
    assert [h["W_o"].shape for h in heads] == [(2, 6)] * 3
    np.testing.assert_array_equal(np.concatenate([h["W_v"] for h in heads], axis=1), params["W_v"])
    np.testing.assert_array_equal(np.concatenate([h["W_o"] for h in heads], axis=0), params["W_o"])


def test_split_and_merge_heads():
    x = np.arange(2 * 3 * 6).reshape(2, 3, 6)
    heads = split_heads(x, 2)
    assert heads.shape == (2, 2, 3, 3)
    np.testing.assert_array_equal(heads[1, 0], x[1, :, :3])  # head 0: the first 3 columns
    np.testing.assert_array_equal(heads[1, 1], x[1, :, 3:])
    np.testing.assert_array_equal(merge_heads(heads), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype):
    rng = np.random.default_rng(13)
    params64 = init_params(8, 2, rng, d_kv=5)
    params = {name: value.astype(dtype) for name, value in params64.items()}
    x_q, x_kv = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 5))
    mask = padding_mask([4, 1], 4)
    out, weights = multi_head_attention(x_q.astype(dtype), x_kv.astype(dtype), params, 2, mask=mask)
    assert out.dtype == weights.dtype == dtype
    ref_out, ref_weights = reference_layer(x_q, x_kv, params64, 2, mask)
    tolerance = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=tolerance)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=tolerance)


def test_identity_projections_give_plain_attention():
    rng = np.random.default_rng(14)
    d = 6
    eye, zero = np.eye(d), np.zeros(d)
    params = {"W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye, "b_q": zero, "b_k": zero, "b_v": zero, "b_o": zero}
    x_q, x_kv = rng.normal(size=(3, d)), rng.normal(size=(4, d))
    out, weights = multi_head_attention(x_q, x_kv, params, 1)
    ref_out, ref_weights = reference_layer(x_q, x_kv, params, 1)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    scores = x_q @ x_kv.T / np.sqrt(d)
    expected = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights[0], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, expected @ x_kv, rtol=0, atol=1e-12)


def test_summed_heads_with_zero_padded_values_is_concatenation():
    rng = np.random.default_rng(15)
    d_model, d_kv, n_heads = 6, 4, 3
    params = init_params(d_model, n_heads, rng, d_kv=d_kv, bias=False)
    x_q, x_kv = rng.normal(size=(2, 3, d_model)), rng.normal(size=(2, 5, d_kv))
    d_head = d_model // n_heads
    padded = np.zeros((n_heads, d_kv, d_model))
    for h in range(n_heads):
        padded[h, :, h * d_head:(h + 1) * d_head] = params["W_v"][:, h * d_head:(h + 1) * d_head]
    summed, _ = summed_heads_attention(x_q, x_kv, params, n_heads, padded)
    concatenated, _ = multi_head_attention(x_q, x_kv, params, n_heads)
    np.testing.assert_allclose(summed, concatenated, rtol=0, atol=1e-12)


def test_summed_heads_equals_its_definition():
    rng = np.random.default_rng(16)
    d_model, d_kv, n_heads = 4, 3, 2
    params = init_params(d_model, n_heads, rng, d_kv=d_kv)
    head_values = rng.normal(size=(n_heads, d_kv, d_model))
    x_q, x_kv = rng.normal(size=(5, d_model)), rng.normal(size=(2, d_kv))
    out, weights = summed_heads_attention(x_q, x_kv, params, n_heads, head_values)
    _, ref_weights = reference_layer(x_q, x_kv, params, n_heads)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    expected = sum(ref_weights[h] @ (x_kv @ head_values[h]) for h in range(n_heads)) @ params["W_o"] + params["b_o"]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"head_values has shape \(2, 4, 4\), expected .* \(2, 3, 4\)"):
        summed_heads_attention(x_q, x_kv, params, n_heads, np.ones((2, 4, 4)))


def test_init_params_shapes_and_bias():
    rng = np.random.default_rng(17)
    params = init_params(12, 4, rng, d_kv=7)
    shapes = {name: value.shape for name, value in params.items()}
    assert shapes == {
        "W_q": (12, 12), "W_k": (7, 12), "W_v": (7, 12), "W_o": (12, 12),
        "b_q": (12,), "b_k": (12,), "b_v": (12,), "b_o": (12,),
    }
    assert all(np.abs(params[name]).sum() > 0 for name in ("b_q", "b_k", "b_v", "b_o"))
    default = init_params(6, 2, rng)
    assert default["W_k"].shape == default["W_v"].shape == (6, 6)
    no_bias = init_params(6, 3, rng, d_kv=2, bias=False)
    assert all((no_bias[name] == 0).all() for name in ("b_q", "b_k", "b_v", "b_o"))
    first = init_params(6, 2, np.random.default_rng(3))
    again = init_params(6, 2, np.random.default_rng(3))
    assert all((first[name] == again[name]).all() for name in first)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((10, 4), r"d_model = 10 is not divisible by n_heads = 4"),
        ((8, 0), r"n_heads must be a positive integer, got 0"),
        ((0, 1), r"d_model must be a positive integer, got 0"),
        ((8.0, 2), r"d_model must be a positive integer, got 8.0"),
    ],
)
def test_init_params_errors(args, message):
    with pytest.raises(ValueError, match=message):
        init_params(*args, np.random.default_rng(0))


def test_init_params_d_kv_error():
    with pytest.raises(ValueError, match="d_kv must be a positive integer, got -3"):
        init_params(8, 2, np.random.default_rng(0), d_kv=-3)


def _layer_inputs():
    rng = np.random.default_rng(18)
    params = init_params(8, 2, rng, d_kv=5)
    return params, rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 5))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p, q, kv: (p, q[..., :7], kv, 2, None), r"x_q \(2, 3, 7\) must end in d_model = 8"),
        (lambda p, q, kv: (p, q, kv[..., :4], 2, None), r"x_kv \(2, 4, 4\) must end in d_kv = 5"),
        (lambda p, q, kv: (p, q[0, 0], kv, 2, None), r"got x_q \(8,\) and x_kv \(2, 4, 5\)"),
        (lambda p, q, kv: (p, q, np.ones((3, 4, 5)), 2, None), r"x_q \(2, 3, 8\) and x_kv \(3, 4, 5\) do not broadcast"),
        (lambda p, q, kv: (p, q, kv, 3, None), r"d_model = 8 is not divisible by n_heads = 3"),
        (lambda p, q, kv: (p, q, kv, 2, np.ones((3, 4))), "mask must be boolean"),
        (
            lambda p, q, kv: (p, q, kv, 2, np.ones((3, 3), dtype=bool)),
            r"mask of shape \(3, 3\) does not broadcast .* \(2, 2, 3, 4\)",
        ),
        (lambda p, q, kv: ({**p, "W_o": np.ones((8, 4))}, q, kv, 2, None), r"W_o has shape \(8, 4\), expected \(8, 8\)"),
        (lambda p, q, kv: ({**p, "b_k": np.ones(5)}, q, kv, 2, None), r"b_k has shape \(5,\), expected \(8,\)"),
        (lambda p, q, kv: ({**p, "W_q": np.ones((8, 6))}, q, kv, 2, None), r"W_q must be square.*\(8, 6\)"),
        (lambda p, q, kv: ({k: v for k, v in p.items() if k != "b_v"}, q, kv, 2, None), r"params lacks \['b_v'\]"),
    ],
)
@pytest.mark.parametrize("layer", [multi_head_attention, multi_head_attention_loop])
def test_layer_errors_name_the_shapes(layer, change, message):
    params, x_q, x_kv, n_heads, mask = change(*_layer_inputs())
    with pytest.raises(ValueError, match=message):
        layer(x_q, x_kv, params, n_heads, mask=mask)


def test_masks():
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert causal_mask(3).dtype == bool
    pad = padding_mask(np.array([2, 0, 3]), 3)
    assert pad.shape == (3, 1, 1, 3) and pad.dtype == bool
    np.testing.assert_array_equal(pad[:, 0, 0], [[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    assert (causal_mask(4) & padding_mask([4, 2], 4)).shape == (2, 1, 4, 4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: causal_mask(0), "T must be a positive integer, got 0"),
        (lambda: causal_mask(2.5), "T must be a positive integer, got 2.5"),
        (lambda: padding_mask([1, 4], 3), r"lengths must lie in 0..S = 0..3, got \[1, 4\]"),
        (lambda: padding_mask([-1], 3), r"got \[-1\]"),
        (lambda: padding_mask([[1, 2]], 3), r"1-d array of integers \(B,\), got int64 \(1, 2\)"),
        (lambda: padding_mask([1.5], 3), "1-d array of integers"),
    ],
)
def test_mask_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_count_parameters():
    assert count_parameters(1) == 8
    assert count_parameters(1, bias=False) == 4
    assert count_parameters(512) == 4 * 512 * 512 + 4 * 512 == 1_050_624
    assert count_parameters(512, n_layers=6, bias=False) == 6 * 4 * 512 * 512
    gpt3 = count_parameters(12288, n_layers=96, bias=False)
    assert gpt3 == 57_982_058_496 and round(gpt3 / 1e9) == 58
    assert count_parameters(12288, n_layers=96) - gpt3 == 96 * 4 * 12288
    # the count is the number of entries init_params creates
    params = init_params(12, 3, np.random.default_rng(0))
    assert sum(value.size for value in params.values()) == count_parameters(12)
    assert sum(params[name].size for name in ("W_q", "W_k", "W_v", "W_o")) == count_parameters(12, bias=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [((0,), "d_model must be a positive integer"), ((8, 0), "n_layers must be a positive integer, got 0")],
)
def test_count_parameters_errors(args, message):
    with pytest.raises(ValueError, match=message):
        count_parameters(*args)


def test_split_and_merge_heads_name_the_shapes_they_refuse():
    from snippets.multihead import merge_heads, split_heads

    with pytest.raises(ValueError, match=r"divisible by n_heads = 5, got shape \(3, 12\)"):
        split_heads(np.ones((3, 12)), 5)
    with pytest.raises(ValueError, match=r"\(\.\.\., H, T, d_head\), got shape \(3, 4\)"):
        merge_heads(np.ones((3, 4)))
    x = np.arange(24.0).reshape(2, 3, 4)
    assert split_heads(x, 2).shape == (2, 2, 3, 2)
    assert (merge_heads(split_heads(x, 2)) == x).all()
