"""Unit tests of snippets/transformer.py: the block and the tiny GPT of chapter 13.

Two references share no code with the snippet: one written from the formulas
here (its own softmax, a loop over the heads), and PyTorch where it is
installed (it is not a requirement of the site; ``.ci/run`` installs its CPU
build and fails these tests instead of skipping them, ``REQUIRE_TORCH=1``,
tests/support/pytorch.py; the references are tests/support/torch_reference.py's):
``torch.nn.functional``'s layer norm, RMSNorm and tanh GELU,
``torch.nn.TransformerEncoderLayer(norm_first=True)`` with the same weights,
and a GPT of ``torch.nn.functional`` blocks, equal in float64 to 1e-10.
"""

import math
import warnings

import numpy as np
import pytest

from snippets.multihead import causal_mask, init_params, padding_mask
from snippets.transformer import (
    count_gpt_parameters,
    gelu,
    generate,
    generate_steps,
    gpt_forward,
    init_block,
    init_gpt,
    layer_norm,
    rms_norm,
    transformer_block,
)
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-10   # float64 against PyTorch


# --- A reference from the formulas ---------------------------------------------


def reference_layer_norm(x, weight, bias, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * weight + bias


def reference_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def reference_block(x, p, n_heads, mask=None):
    """One pre-norm block for x (T, d_model), head by head, with its own softmax."""
    T, d_model = x.shape
    d_head = d_model // n_heads
    h = reference_layer_norm(x, p["ln_1_weight"], p["ln_1_bias"])
    heads = []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        Q = h @ p["W_Q"][:, cols] + p["b_Q"][cols]
        K = h @ p["W_K"][:, cols] + p["b_K"][cols]
        V = h @ p["W_V"][:, cols] + p["b_V"][cols]
        scores = Q @ K.T / math.sqrt(d_head)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        heads.append(weights / weights.sum(axis=1, keepdims=True) @ V)
    x = x + np.hstack(heads) @ p["W_O"] + p["b_O"]
    h = reference_layer_norm(x, p["ln_2_weight"], p["ln_2_bias"])
    return x + reference_gelu(h @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]


def reference_gpt(ids, params, n_heads):
    T = len(ids)
    x = params["W_E"][ids] + params["W_pos"][:T]
    for block in params["blocks"]:
        x = reference_block(x, block, n_heads, mask=np.tri(T, dtype=bool))
    return reference_layer_norm(x, params["ln_f_weight"], params["ln_f_bias"]) @ params["W_E"].T


def as_float32(params):
    if isinstance(params, list):
        return [as_float32(block) for block in params]
    return {name: as_float32(value) if name == "blocks" else value.astype(np.float32) for name, value in params.items()}


# --- Layer norm, RMSNorm, GELU ----------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 4, 6)])
def test_layer_norm_equals_the_formula(shape):
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=shape)
    weight, bias = rng.normal(size=shape[-1]), rng.normal(size=shape[-1])
    assert np.allclose(layer_norm(x, weight, bias), reference_layer_norm(x, weight, bias), rtol=0, atol=1e-12)
    plain = layer_norm(x, np.ones(shape[-1]), np.zeros(shape[-1]))
    assert np.allclose(plain.mean(axis=-1), 0, atol=1e-12)
    assert np.allclose(plain.var(axis=-1), 1, atol=1e-4)   # 1 up to eps / variance


def test_layer_norm_ignores_the_scale_of_a_row_even_near_the_largest_float():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 16))
    weight, bias = rng.normal(size=16), rng.normal(size=16)
    small = layer_norm(x, weight, bias, eps=1e-300)
    for scale in (2.0**-20, 1e10, 1e300):
        assert np.allclose(layer_norm(x * scale, weight, bias, eps=1e-300), small, rtol=0, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = layer_norm(np.full((2, 3), np.finfo(float).max) * [1, -1, 0.5], np.ones(3), np.zeros(3))
    assert np.isfinite(huge).all()
    assert np.array_equal(layer_norm(np.full((2, 3), 7.0), weight[:3], bias[:3]), np.tile(bias[:3], (2, 1)))


def test_rms_norm_equals_the_formula():
    rng = np.random.default_rng(2)
    x, weight = rng.normal(size=(3, 4, 8)), rng.normal(size=8)
    expected = x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + 1e-6) * weight
    assert np.allclose(rms_norm(x, weight), expected, rtol=0, atol=1e-12)
    unscaled = rms_norm(x, weight, eps=1e-300)     # the scale of a row does not matter
    assert np.allclose(rms_norm(1e300 * x, weight, eps=1e-300), unscaled, rtol=0, atol=1e-12)


def test_gelu_equals_the_formula_and_its_limits():
    x = np.linspace(-8, 8, 101)
    assert np.allclose(gelu(x), reference_gelu(x), rtol=0, atol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ends = gelu([-1e300, -50.0, 50.0, 1e300])
    assert ends.tolist() == [-0.0, -0.0, 50.0, 1e300]
    assert gelu(np.float32([1e30])).tolist() == [np.float32(1e30)]
    assert gelu(-0.75) < 0 and gelu(-0.75) == pytest.approx(-0.1700, abs=1e-4)


@pytest.mark.parametrize("function", ["layer_norm", "rms_norm", "gelu"])
def test_float32_in_float32_out_for_the_functions(function):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 6))
    weight, bias = rng.normal(size=6), rng.normal(size=6)
    call = {
        "layer_norm": lambda dtype: layer_norm(x.astype(dtype), weight.astype(dtype), bias.astype(dtype)),
        "rms_norm": lambda dtype: rms_norm(x.astype(dtype), weight.astype(dtype)),
        "gelu": lambda dtype: gelu(x.astype(dtype)),
    }[function]
    single, double = call(np.float32), call(np.float64)
    assert single.dtype == np.float32 and double.dtype == np.float64
    assert np.allclose(single, double, rtol=0, atol=1e-5)
    assert call(np.float16).dtype == np.float16


@pytest.mark.parametrize(("call", "message"), [
    (lambda: layer_norm(np.ones((2, 3)), np.ones(4), np.zeros(3)), r"weight must have shape \(d,\) = \(3,\)"),
    (lambda: layer_norm(np.ones((2, 3)), np.ones(3), np.zeros(3), eps=0), "eps must be > 0"),
    (lambda: rms_norm(np.ones(3), [1.0, np.nan, 1.0]), "weight contains NaN"),
    (lambda: gelu("abc"), "x must hold numbers"),
])
def test_norm_and_gelu_errors_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- One block --------------------------------------------------------------------


def test_init_block_shapes_and_reproducibility():
    params = init_block(12, 3, 40, np.random.default_rng(0))
    expected = dict.fromkeys(("W_Q", "W_K", "W_V", "W_O"), (12, 12))
    expected |= dict.fromkeys(("b_Q", "b_K", "b_V", "b_O", "b_2", "ln_1_weight", "ln_1_bias", "ln_2_weight",
                               "ln_2_bias"), (12,))
    expected |= {"W_1": (12, 40), "b_1": (40,), "W_2": (40, 12)}
    assert {name: value.shape for name, value in params.items()} == expected
    again = init_block(12, 3, 40, np.random.default_rng(0))
    assert all(np.array_equal(params[name], again[name]) for name in params)
    # the attention part is snippets.multihead's, drawn first from the same generator
    attention = init_params(12, 3, np.random.default_rng(0))
    assert all(np.array_equal(params[name], attention[name]) for name in attention)


@pytest.mark.parametrize(("T", "d_model", "n_heads", "d_ff", "masked"), [
    (5, 8, 2, 32, True), (7, 12, 3, 20, False), (1, 6, 1, 4, True), (9, 16, 4, 64, True),
])
def test_block_equals_the_reference(T, d_model, n_heads, d_ff, masked):
    rng = np.random.default_rng(T)
    params = init_block(d_model, n_heads, d_ff, rng)
    x = rng.normal(size=(T, d_model))
    mask = causal_mask(T) if masked else None
    out = transformer_block(x, params, n_heads, mask=mask)
    assert out.shape == x.shape
    assert np.allclose(out, reference_block(x, params, n_heads, mask), rtol=0, atol=1e-12)


def test_block_takes_a_batch_and_a_padding_mask():
    rng = np.random.default_rng(4)
    params = init_block(8, 2, 16, rng)
    x = rng.normal(size=(3, 6, 8))
    batched = transformer_block(x, params, 2, mask=causal_mask(6))
    for b in range(3):
        assert np.allclose(batched[b], transformer_block(x[b], params, 2, mask=causal_mask(6)), rtol=0, atol=1e-12)
    lengths = np.array([6, 4, 2])
    padded = transformer_block(x, params, 2, mask=padding_mask(lengths, 6))
    for b, n in enumerate(lengths):   # the real tokens do not see the padding
        assert np.allclose(padded[b, :n], transformer_block(x[b, :n], params, 2), rtol=0, atol=1e-12)


def test_block_float32_in_float32_out():
    rng = np.random.default_rng(5)
    params = init_block(8, 2, 16, rng)
    x = rng.normal(size=(4, 8))
    single = transformer_block(x.astype(np.float32), as_float32(params), 2, mask=causal_mask(4))
    assert single.dtype == np.float32
    assert np.allclose(single, transformer_block(x, params, 2, mask=causal_mask(4)), rtol=0, atol=1e-4)


@pytest.mark.parametrize(("change", "message"), [
    ({"W_1": np.ones((7, 16))}, r"W_1 must have shape \(d_model, d_ff\) with d_model = 8"),
    ({"W_2": np.ones((15, 8))}, r"W_2 has shape \(15, 8\), expected \(16, 8\)"),
    ({"ln_2_bias": np.ones(9)}, r"ln_2_bias has shape \(9,\), expected \(8,\)"),
    ({"W_K": np.ones((6, 8)), "W_V": np.ones((6, 8))}, r"W_K has shape \(6, 8\): a block attends to itself"),
])
def test_block_errors_name_the_parameter(change, message):
    params = init_block(8, 2, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        transformer_block(np.ones((3, 8)), {**params, **change}, 2)


def test_block_errors_for_x_and_mask():
    params = init_block(8, 2, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_model\) or \(B, T, d_model\) with d_model = 8"):
        transformer_block(np.ones((3, 7)), params, 2)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .* from x \(3, 8\)"):
        transformer_block(np.ones((3, 8)), params, 2, mask=causal_mask(4))
    with pytest.raises(ValueError, match="d_model = 8 is not divisible by n_heads = 3"):
        transformer_block(np.ones((3, 8)), params, 3)


# --- The GPT ------------------------------------------------------------------------


def small_gpt(seed=0, **sizes):
    sizes = {"vocab_size": 13, "max_len": 16, "d_model": 12, "n_layers": 3, "n_heads": 3, "d_ff": 20} | sizes
    return init_gpt(**sizes, rng=np.random.default_rng(seed)), sizes["n_heads"]


def test_init_gpt_shapes_and_count():
    params, _ = small_gpt()
    assert params["W_E"].shape == (13, 12) and params["W_pos"].shape == (16, 12)
    assert len(params["blocks"]) == 3 and params["ln_f_weight"].shape == params["ln_f_bias"].shape == (12,)
    sizes = [value.size for name, value in params.items() if name != "blocks"]
    sizes += [value.size for block in params["blocks"] for value in block.values()]
    assert sum(sizes) == count_gpt_parameters(13, 16, 12, 3, 20)


def test_gpt_forward_equals_the_reference_and_is_causal():
    params, H = small_gpt()
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    logits = gpt_forward(ids, params, H)
    assert logits.shape == (8, 13)
    assert np.allclose(logits, reference_gpt(ids, params, H), rtol=0, atol=1e-12)
    changed = ids.copy()
    changed[5] = 0      # a later token changes nothing before it
    other = gpt_forward(changed, params, H)
    assert np.array_equal(other[:5], logits[:5]) and not np.allclose(other[5:], logits[5:])
    batch = gpt_forward(np.stack([ids, changed]), params, H)
    assert batch.shape == (2, 8, 13)
    assert np.allclose(batch[1], other, rtol=0, atol=1e-12)


def test_gpt_forward_float32_in_float32_out():
    params, H = small_gpt()
    ids = [0, 5, 12, 7]
    single = gpt_forward(ids, as_float32(params), H)
    assert single.dtype == np.float32
    assert np.allclose(single, gpt_forward(ids, params, H), rtol=0, atol=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0, 3.0])
def test_generate_with_the_cache_chooses_what_recomputation_chooses(temperature):
    params, H = small_gpt(seed=1)
    prompt = [2, 7, 7]
    seed = 11
    cached = generate(prompt, params, H, n_new=10, temperature=temperature, rng=np.random.default_rng(seed))
    rng, ids = np.random.default_rng(seed), list(prompt)
    for _ in range(10):
        last = reference_gpt(np.array(ids), params, H)[-1]
        if temperature == 0:
            ids.append(int(last.argmax()))
        else:
            p = np.exp((last - last.max()) / temperature)
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    assert cached.dtype == np.int64 and cached.tolist() == ids


def test_generate_a_batch_row_by_row_and_edge_cases():
    params, H = small_gpt(seed=2)
    prompts = np.array([[1, 2, 3], [4, 4, 4]])
    batch = generate(prompts, params, H, n_new=6)
    assert batch.shape == (2, 9)
    for row, prompt in zip(batch, prompts, strict=True):
        assert row.tolist() == generate(prompt, params, H, n_new=6).tolist()
    assert generate([5], params, H, n_new=0).tolist() == [5]
    assert generate([5], params, H, n_new=15).shape == (16,)              # exactly max_len positions
    float32 = generate(prompts, as_float32(params), H, n_new=6)
    assert float32.dtype == np.int64


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generate_steps_chooses_what_generate_chooses_and_shows_the_keys_and_values_written(temperature):
    params, H = small_gpt(seed=3)
    prompts = np.array([[1, 2, 3], [4, 4, 4]])
    whole = generate(prompts, params, H, n_new=5, temperature=temperature, rng=np.random.default_rng(4))
    steps = list(generate_steps(prompts, params, H, n_new=5, temperature=temperature, rng=np.random.default_rng(4)))
    assert len(steps) == 5
    d_head = params["W_E"].shape[1] // H
    for i, (ids, cache) in enumerate(steps, start=1):
        assert ids.tolist() == whole[:, : 3 + i].tolist()
        assert len(cache) == len(params["blocks"])
        for K, V in cache:
            assert K.shape == V.shape == (2, H, 3 + i - 1, d_head)     # one key and one value per token read
    # Block 0's keys are the projections of the normalised embeddings, head by head.
    ids, cache = steps[-1]
    block = params["blocks"][0]
    read = ids[:, :-1]
    x = params["W_E"][read] + params["W_pos"][: read.shape[-1]]
    keys = reference_layer_norm(x, block["ln_1_weight"], block["ln_1_bias"]) @ block["W_K"] + block["b_K"]
    keys = keys.reshape(2, -1, H, d_head).transpose(0, 2, 1, 3)
    assert np.allclose(cache[0][0], keys, rtol=0, atol=1e-12)
    # One sequence: no batch axis; the arguments are checked before the first step.
    ids, cache = next(generate_steps([5, 6], params, H, n_new=1))
    assert ids.shape == (3,) and cache[1][0].shape == (H, 2, d_head)
    with pytest.raises(ValueError, match="n_new = 15 tokens after the T = 2"):
        generate_steps([1, 2], params, H, n_new=15)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda p: gpt_forward([0, 13], p, 3), ValueError, r"tokens must lie in 0 .. vocab_size - 1 = 0 .. 12 "
                                                       r"\(the rows of W_E \(13, 12\)\)"),
    (lambda p: gpt_forward(list(range(13)) * 2, p, 3), ValueError, "more than max_len = 16, the rows of W_pos"),
    (lambda p: gpt_forward([0.0, 1.0], p, 3), TypeError, "tokens must be integer token ids"),
    (lambda p: gpt_forward([1], {**p, "blocks": []}, 3), TypeError, "blocks must be a non-empty list"),
    (lambda p: gpt_forward([1], {**p, "blocks": [{**p["blocks"][0], "b_1": np.ones(3)}]}, 3), ValueError,
     r"blocks\[0\]: b_1 has shape \(3,\), expected \(20,\)"),
    (lambda p: generate([1, 2], p, 3, n_new=15), ValueError, "n_new = 15 tokens after the T = 2 of tokens make 17"),
    (lambda p: generate([1, 2], p, 3, n_new=2, temperature=0.5), TypeError, "rng must be a NumPy random Generator"),
    (lambda p: generate([1, 2], p, 3, n_new=2, temperature=-1.0), ValueError, "temperature must be >= 0"),
])
def test_gpt_errors_name_the_argument(call, error, message):
    params, _ = small_gpt()
    with pytest.raises(error, match=message):
        call(params)


def test_count_gpt_parameters_of_the_gpt2_family():
    # vocab_size 50257, 1024 positions, d_ff = 4 d_model, tied embeddings
    gpt2 = {"small": (768, 12), "medium": (1024, 24), "large": (1280, 36), "xl": (1600, 48)}
    counts = {name: count_gpt_parameters(50257, 1024, d, n_layers, 4 * d) for name, (d, n_layers) in gpt2.items()}
    assert counts == {"small": 124_439_808, "medium": 354_823_168, "large": 774_030_080, "xl": 1_557_611_200}
    assert isinstance(counts["xl"], int)


# --- Against PyTorch ------------------------------------------------------------------


def test_layer_norm_rms_norm_and_gelu_equal_pytorch():
    require_torch()
    rng = np.random.default_rng(6)
    x = rng.normal(1.0, 3.0, size=(2, 5, 16))
    weight, bias = rng.normal(size=16), rng.normal(size=16)
    arguments = {layer_norm: (x, weight, bias), rms_norm: (x, weight), gelu: (x,)}
    for function, args in arguments.items():
        theirs = getattr(reference, function.__name__)(*reference.tensors(args)).numpy()
        assert np.abs(function(*args) - theirs).max() < TOLERANCE, function.__name__


@pytest.mark.parametrize(("B", "T", "d_model", "n_heads", "d_ff", "masked"), [
    (2, 5, 8, 2, 32, True), (3, 7, 12, 3, 20, False), (1, 9, 16, 4, 64, True),
])
def test_block_equals_pytorchs_pre_norm_encoder_layer(B, T, d_model, n_heads, d_ff, masked):
    require_torch()
    rng = np.random.default_rng(T)
    params = init_block(d_model, n_heads, d_ff, rng)
    x = rng.normal(size=(B, T, d_model))
    mask = causal_mask(T) if masked else None
    theirs = reference.transformer_block(*reference.tensors([x, params]), n_heads, reference.tensors(mask)).numpy()
    ours = transformer_block(x, params, n_heads, mask=mask)
    assert np.abs(ours - theirs).max() < TOLERANCE
    assert np.abs(transformer_block(x[0], params, n_heads, mask=mask) - theirs[0]).max() < TOLERANCE


def test_gpt_equals_pytorch_with_tied_embeddings():
    require_torch()
    params, H = small_gpt(seed=3)
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]])
    theirs = reference.gpt_forward(*reference.tensors([ids, params]), H).numpy()   # the head: the token table, transposed
    assert np.abs(gpt_forward(ids, params, H) - theirs).max() < TOLERANCE
    prompt = ids[:, :4]
    assert np.array_equal(generate(prompt, params, H, 5), reference.generate(*reference.tensors([prompt, params]), H, 5))


@pytest.mark.parametrize(("call", "message"), [
    (lambda rng: init_block(8, 2, 10**30, rng), r"^d_model = 8 and d_ff = 10{30}: too large"),
    (lambda rng: init_gpt(10**30, 16, 8, 2, 2, 32, rng), r"^vocab_size = 10{30} and d_model = 8: too large"),
    (lambda rng: init_gpt(11, 2**63, 8, 2, 2, 32, rng), r"^max_len = 9223372036854775808 and d_model = 8: too large"),
    (lambda rng: init_gpt(11, 16, 8, 10**30, 2, 32, rng), r"^n_layers = 10{30} and d_model = 8 and d_ff = 32: too large"),
    (lambda rng: generate([1], init_gpt(11, 16, 8, 1, 2, 32, rng), 2, np.iinfo(np.int64).max),
     r"^n_new = 9223372036854775807 tokens after the T = 1 of tokens make 9223372036854775808 positions"),
])
def test_huge_sizes_get_a_clear_error_before_any_allocation(call, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=message):
            call(np.random.default_rng(0))
