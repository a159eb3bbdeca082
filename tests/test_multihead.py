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
    d_model = params["W_Q"].shape[0]
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
            Q = xq @ params["W_Q"][:, c0:c1] + params["b_Q"][c0:c1]
            K = xkv @ params["W_K"][:, c0:c1] + params["b_K"][c0:c1]
            V = xkv @ params["W_V"][:, c0:c1] + params["b_V"][c0:c1]
            for t in range(T):
                scores = [float(Q[t] @ K[s]) / math.sqrt(d_head) for s in range(S)]
                w = reference_softmax(scores, full_mask[b][h, t])
                weights[b][h, t] = w
                concatenated[t, c0:c1] = sum(w[s] * V[s] for s in range(S))
        out[b] = concatenated @ params["W_O"] + params["b_O"]
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
    # the sequence with no source at all: zero weights, and the layer returns only b_O, no NaN
    assert (weights[2] == 0).all()
    np.testing.assert_array_equal(out[2], np.broadcast_to(params["b_O"], (T, d_model)))
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
    assert [h["W_Q"].shape for h in heads] == [(6, 2)] * 3
    assert [h["W_K"].shape for h in heads] == [(4, 2)] * 3
    assert [h["W_O"].shape for h in heads] == [(2, 6)] * 3
    np.testing.assert_array_equal(np.concatenate([h["W_V"] for h in heads], axis=1), params["W_V"])
    np.testing.assert_array_equal(np.concatenate([h["W_O"] for h in heads], axis=0), params["W_O"])


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
    params = {"W_Q": eye, "W_K": eye, "W_V": eye, "W_O": eye, "b_Q": zero, "b_K": zero, "b_V": zero, "b_O": zero}
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
        padded[h, :, h * d_head:(h + 1) * d_head] = params["W_V"][:, h * d_head:(h + 1) * d_head]
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
    expected = sum(ref_weights[h] @ (x_kv @ head_values[h]) for h in range(n_heads)) @ params["W_O"] + params["b_O"]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"head_values has shape \(2, 4, 4\), expected .* \(2, 3, 4\)"):
        summed_heads_attention(x_q, x_kv, params, n_heads, np.ones((2, 4, 4)))


def test_init_params_shapes_and_bias():
    rng = np.random.default_rng(17)
    params = init_params(12, 4, rng, d_kv=7)
    shapes = {name: value.shape for name, value in params.items()}
    assert shapes == {
        "W_Q": (12, 12), "W_K": (7, 12), "W_V": (7, 12), "W_O": (12, 12),
        "b_Q": (12,), "b_K": (12,), "b_V": (12,), "b_O": (12,),
    }
    assert all(np.abs(params[name]).sum() > 0 for name in ("b_Q", "b_K", "b_V", "b_O"))
    default = init_params(6, 2, rng)
    assert default["W_K"].shape == default["W_V"].shape == (6, 6)
    no_bias = init_params(6, 3, rng, d_kv=2, bias=False)
    assert all((no_bias[name] == 0).all() for name in ("b_Q", "b_K", "b_V", "b_O"))
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
        (lambda p, q, kv: (p, q, np.ones((3, 4, 5)), 2, None),
         r"x_q \(2, 3, 8\) and x_kv \(3, 4, 5\) do not broadcast"),
        (lambda p, q, kv: (p, q, kv, 3, None), r"d_model = 8 is not divisible by n_heads = 3"),
        (lambda p, q, kv: (p, q, kv, 2, np.ones((3, 4))), "mask must be boolean"),
        (
            lambda p, q, kv: (p, q, kv, 2, np.ones((3, 3), dtype=bool)),
            r"mask of shape \(3, 3\) does not broadcast .* \(2, 2, 3, 4\)",
        ),
        (lambda p, q, kv: ({**p, "W_O": np.ones((8, 4))}, q, kv, 2, None),
         r"W_O has shape \(8, 4\), expected \(8, 8\)"),
        (lambda p, q, kv: ({**p, "b_K": np.ones(5)}, q, kv, 2, None), r"b_K has shape \(5,\), expected \(8,\)"),
        (lambda p, q, kv: ({**p, "W_Q": np.ones((8, 6))}, q, kv, 2, None), r"W_Q must be square.*\(8, 6\)"),
        (lambda p, q, kv: ({k: v for k, v in p.items() if k != "b_V"}, q, kv, 2, None), r"params lacks \['b_V'\]"),
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
    assert sum(params[name].size for name in ("W_Q", "W_K", "W_V", "W_O")) == count_parameters(12, bias=False)


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


# Issue 10 §6: the outside tester's cases.

def test_outside_testers_cases_are_refused_or_computed():
    with pytest.raises(ValueError, match=r"S must be a non-negative integer, got 3\.5"):
        padding_mask([2], 3.5)
    with pytest.raises(TypeError, match="rng must be a NumPy random Generator"):
        init_params(4, 2, 0)
    with pytest.raises(TypeError, match="bias must be True or False"):
        count_parameters(4, bias="no")
    assert merge_heads(np.ones((0, 2, 3, 4))).shape == (0, 3, 8)          # an empty batch
    params, x_q, x_kv = _layer_inputs()
    out, weights = multi_head_attention(x_q[:0], x_kv[:0], params, 2)
    assert out.shape == (0, 3, 8) and weights.shape == (0, 2, 3, 4)
    # a wrong W_K is blamed on W_K, not on W_V
    for wrong in (np.ones((4, 8)), np.ones((6, 8)), np.ones((5, 7))):
        with pytest.raises(ValueError, match=r"^W_K has shape"):
            multi_head_attention(x_q, x_kv, {**params, "W_K": wrong}, 2)
    with pytest.raises(ValueError, match=r"W_K and W_V must have the same number of rows"):
        head_params({**params, "W_K": np.ones((4, 8))}, 2)
    with pytest.raises(ValueError, match=r"^x_kv contains NaN"):
        multi_head_attention(x_q, np.where(x_kv > 1, np.nan, x_kv), params, 2)
    with pytest.raises(ValueError, match=r"^b_Q contains \+inf"):
        multi_head_attention(x_q, x_kv, {**params, "b_Q": np.full(8, np.inf)}, 2)
    with pytest.raises(ValueError, match="overflow float64: x_q"):
        multi_head_attention(x_q * 1e200, x_kv * 1e200, params, 2)
