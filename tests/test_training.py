"""Unit tests of snippets/training.py: the backward pass, Adam and the head scores of chapter 14.

The gradient is checked three ways: against central finite differences of the
loss, against PyTorch's autograd in float64 (where torch is installed; it is
not a requirement of the site, and ``.ci/run`` installs it and requires these
tests to run, ``REQUIRE_TORCH=1``), and the loss itself against the cross-entropy
of ``snippets.transformer.gpt_forward``'s logits. The scores are checked
against loops written from their definitions, and on models built by hand.
"""

import copy
import math

import numpy as np
import pytest

from snippets import _checks, heads, training
from snippets.heads import (
    ablate_heads,
    attention_weights,
    copying_scores,
    in_context_learning_score,
    prefix_matching_scores,
    previous_token_scores,
    token_losses,
)
from snippets.training import adam_step, gpt_loss_and_grads, random_windows, tokenize, train
from snippets.transformer import gpt_forward, init_gpt
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-8        # float64 against PyTorch, as the issue asks
FD_STEP = 1e-5          # central differences: error ~ step² ≈ 1e-10


def small_model(seed=0, vocab_size=11, max_len=9, d_model=12, n_layers=2, n_heads=3, d_ff=20):
    rng = np.random.default_rng(seed)
    return init_gpt(vocab_size, max_len, d_model, n_layers, n_heads, d_ff, rng), n_heads


def leaves(tree, path=""):
    """(path, array) for every array of a params-like tree."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaves(value, f"{path}[{key!r}]")
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, tree


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# --- The loss ------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(10,), (4, 10), (2, 3, 6)])
def test_loss_is_the_cross_entropy_of_gpt_forward(shape):
    params, n_heads = small_model()
    tokens = np.random.default_rng(1).integers(0, 11, size=shape)
    loss, _ = gpt_loss_and_grads(tokens, params, n_heads)
    log_probs = log_softmax(gpt_forward(tokens[..., :-1], params, n_heads))
    expected = -np.take_along_axis(log_probs, tokens[..., 1:, None], axis=-1).mean()
    assert abs(loss - expected) < 1e-12
    per_position = token_losses(tokens, params, n_heads)
    assert per_position.shape == (*shape[:-1], shape[-1] - 1)
    assert abs(per_position.mean() - loss) < 1e-12


def test_gradient_has_the_structure_of_params():
    params, n_heads = small_model()
    _, grads = gpt_loss_and_grads(np.arange(10) % 11, params, n_heads)
    assert [path for path, _ in leaves(grads)] == [path for path, _ in leaves(params)]
    for (path, g), (_, p) in zip(leaves(grads), leaves(params), strict=True):
        assert g.shape == p.shape and g.dtype == p.dtype, path


# --- The gradient against finite differences -------------------------------------


def test_gradient_equals_central_finite_differences():
    params, n_heads = small_model(seed=2)
    tokens = np.random.default_rng(3).integers(0, 11, size=(3, 8))
    _, grads = gpt_loss_and_grads(tokens, params, n_heads)
    rng = np.random.default_rng(4)
    worst = 0.0
    for (path, array), (_, gradient) in zip(leaves(params), leaves(grads), strict=True):
        # Three entries of every parameter (W_pos: rows the tokens reach).
        rows = 7 if path == "['W_pos']" else array.shape[0]
        for _ in range(3):
            index = (rng.integers(rows),) + tuple(rng.integers(n) for n in array.shape[1:])
            saved = array[index]
            array[index] = saved + FD_STEP
            up, _ = gpt_loss_and_grads(tokens, params, n_heads)
            array[index] = saved - FD_STEP
            down, _ = gpt_loss_and_grads(tokens, params, n_heads)
            array[index] = saved
            numeric = (up - down) / (2 * FD_STEP)
            worst = max(worst, abs(numeric - gradient[index]))
            assert abs(numeric - gradient[index]) < 1e-8, (path, index, numeric, gradient[index])
    assert worst < 1e-8


def test_position_rows_the_tokens_never_reach_get_no_gradient():
    params, n_heads = small_model()
    _, grads = gpt_loss_and_grads(np.arange(5), params, n_heads)     # reads positions 0..3
    assert (grads["W_pos"][4:] == 0).all() and (grads["W_pos"][:4] != 0).all()


# --- The gradient against PyTorch -------------------------------------------------


@pytest.mark.parametrize("seed, shape, n_layers, n_heads", [(0, (4, 9), 2, 3), (1, (9,), 1, 1), (2, (2, 2, 7), 3, 4)])
def test_gradient_equals_pytorch_autograd(seed, shape, n_layers, n_heads):
    require_torch()
    params, _ = small_model(seed=seed, n_layers=n_layers, n_heads=n_heads)
    tokens = np.random.default_rng(seed + 10).integers(0, 11, size=shape)
    loss, grads = gpt_loss_and_grads(tokens, params, n_heads)
    torch_loss, torch_grads = reference.numpy(reference.gpt_loss_and_grads(
        reference.tensors(tokens), reference.tensors(params, grad=True), n_heads))
    assert abs(loss - torch_loss) < TOLERANCE
    theirs = dict(leaves(torch_grads))
    for path, ours in leaves(grads):
        assert np.abs(ours - theirs.pop(path)).max() < TOLERANCE, path
    assert not theirs


def test_adam_equals_pytorch_adam():
    require_torch()
    rng = np.random.default_rng(0)
    params = {"a": rng.normal(size=(3, 4)), "blocks": [{"b": rng.normal(size=5)}]}
    gradients = [{"a": rng.normal(size=(3, 4)), "blocks": [{"b": rng.normal(size=5)}]} for _ in range(5)]
    theirs = reference.tensors(params, grad=True)
    optimiser = reference.adam(theirs, lr=0.01)
    state = None
    for g in gradients:
        params, state = adam_step(params, g, state, lr=0.01)
        theirs["a"].grad, theirs["blocks"][0]["b"].grad = reference.tensors([g["a"], g["blocks"][0]["b"]])
        optimiser.step()
    assert state["step"] == 5
    for (_, ours), (_, tensor) in zip(leaves(params), leaves(reference.numpy(theirs)), strict=True):
        assert np.abs(ours - tensor).max() < 1e-12


# --- Adam and training -------------------------------------------------------------


def test_adam_leaves_its_inputs_unchanged_and_moves_each_entry_by_about_lr():
    params = {"w": np.array([1.0, 1.0, 1.0])}
    grads = {"w": np.array([1e-3, 1.0, -1e6])}
    new, state = adam_step(params, grads, lr=0.01)
    assert params["w"].tolist() == [1.0, 1.0, 1.0] and grads["w"][2] == -1e6
    assert np.allclose(new["w"], [0.99, 0.99, 1.01], atol=1e-4)    # the first step is lr · sign(g)
    again, state = adam_step(new, grads, state, lr=0.01)
    assert state["step"] == 2 and np.allclose(again["w"], [0.98, 0.98, 1.02], atol=1e-4)


def test_adam_takes_a_list_of_plain_numbers_and_an_overflow_names_what_is_too_large():
    new, state = adam_step([0.5, -1.0], [0.5, 2.0], lr=0.1)     # issue 34: was an AttributeError
    assert np.allclose(new, [0.4, -1.1]) and state["step"] == 1
    with pytest.raises(ValueError, match=r"^the Adam step's new parameters overflow float64: "
                                         r"params \(largest \|entry\| 1e\+308\), grads .* expected results within"):
        adam_step({"w": np.array([1e308])}, {"w": np.array([1e308])}, lr=0.5)


def test_adam_on_arrays_laid_end_to_end_equals_adam_array_by_array_bit_for_bit():
    rng = np.random.default_rng(3)
    params = {"a": rng.normal(size=(3, 4)), "b": [rng.normal(size=5), np.array(0.5)]}
    grads = {"a": rng.normal(size=(3, 4)), "b": [rng.normal(size=5), np.array(-2.0)]}
    together, state = params, None
    for _ in range(3):   # one dtype: laid end to end
        together, state = adam_step(together, grads, state, lr=0.01)
    alone = [(p, None) for p in (params["a"], *params["b"])]
    for _ in range(3):   # one array at a time
        alone = [adam_step(p, g, s, lr=0.01) for (p, s), g in zip(alone, (grads["a"], *grads["b"]), strict=True)]
    assert [np.asarray(p).tobytes() for p, _ in alone] == [
        np.asarray(p).tobytes() for p in (together["a"], *together["b"])]
    mixed, _ = adam_step({**params, "c": np.float32([1.0])}, {**grads, "c": np.float32([1.0])}, lr=0.01)
    again, _ = adam_step(params, grads, lr=0.01)     # a float32 array among float64: array by array
    assert mixed["a"].tobytes() == again["a"].tobytes() and np.ndim(mixed["b"][1]) == 0


def test_the_fast_private_helpers_give_numpys_own_numbers_bit_for_bit():
    rng = np.random.default_rng(4)
    table, rows = rng.normal(size=(300, 5)).astype(np.float32), rng.integers(0, 256, size=60).astype(np.uint8)
    values = rng.normal(size=(60, 5)).astype(np.float32)
    expected = table.copy()
    np.add.at(expected, rows, values)
    training._add_rows(table, rows, values)
    assert table.tobytes() == expected.tobytes()
    a, b = rng.normal(size=(2, 3, 5, 6)), rng.normal(size=(2, 3, 6, 4))
    merged = (a @ b).transpose(0, 2, 1, 3).reshape(2, 5, 12)
    assert training._merged_matmul(a, b).tobytes() == merged.tobytes()
    for dtype in (np.float16, np.float32, np.float64):
        x = rng.normal(size=(4, 13)).astype(dtype)
        assert training._row_mean(x).tobytes() == x.mean(axis=-1, keepdims=True).tobytes()


def test_a_few_adam_steps_lower_the_loss_on_a_repeated_batch():
    params, n_heads = small_model(seed=5)
    tokens = np.random.default_rng(6).integers(0, 11, size=(4, 9))
    first, _ = gpt_loss_and_grads(tokens, params, n_heads)
    state = None
    for _ in range(30):
        loss, grads = gpt_loss_and_grads(tokens, params, n_heads)
        params, state = adam_step(params, grads, state, lr=0.01)
    assert loss < 0.7 * first


def test_random_windows_are_consecutive_slices():
    ids = np.arange(50) * 3
    windows = random_windows(ids, 6, 7, np.random.default_rng(0))
    assert windows.shape == (6, 7)
    assert (np.diff(windows, axis=1) == 3).all() and windows.min() >= 0 and windows.max() <= 147
    assert random_windows(ids, 3, 50, np.random.default_rng(0)).tolist() == [ids.tolist()] * 3


def test_tokenize_skips_comment_lines_and_numbers_sorted_words():
    ids, vocab = tokenize("# header\nb a .\n# more\na c\n")
    assert vocab == [".", "a", "b", "c"]
    assert ids.tolist() == [2, 1, 0, 1, 3] and ids.dtype == np.int64


# --- The scores ------------------------------------------------------------------


def test_attention_weights_are_causal_rows_of_the_forward_pass():
    params, n_heads = small_model()
    tokens = np.random.default_rng(0).integers(0, 11, size=(2, 6))
    weights = attention_weights(tokens, params, n_heads)
    assert weights.shape == (2, 2, 3, 6, 6)
    assert np.allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    assert (np.triu(np.ones((6, 6)), k=1)[None, None, None] * weights == 0).all()
    single = attention_weights(tokens[1], params, n_heads)
    assert single.shape == (2, 3, 6, 6) and np.allclose(single, weights[:, 1], atol=1e-12)


def test_previous_token_and_prefix_matching_scores_equal_loops():
    params, n_heads = small_model(seed=7)
    rng = np.random.default_rng(8)
    half = rng.integers(0, 11, size=(3, 4))
    tokens = np.concatenate([half, half], axis=1)                    # (3, 8): each row written twice
    weights = attention_weights(tokens, params, n_heads)
    previous = np.zeros((2, n_heads))
    matching, count = np.zeros((2, n_heads)), 0
    for b, row in enumerate(tokens):
        for t in range(1, 8):
            previous += weights[:, b, :, t, t - 1] / (3 * 7)
        for t in range(8):
            targets = [s for s in range(1, t + 1) if row[s - 1] == row[t]]
            if targets:
                matching += weights[:, b, :, t][..., targets].sum(axis=-1)
                count += 1
    assert np.allclose(previous_token_scores(tokens, params, n_heads), previous, atol=1e-12)
    assert np.allclose(prefix_matching_scores(tokens, params, n_heads), matching / count, atol=1e-12)


def test_copying_score_is_one_for_a_copying_head_and_minus_one_for_its_opposite():
    params, n_heads = small_model(vocab_size=6, d_model=12, n_heads=2)
    # Embeddings with rows of mean zero, so that the layer norm's centring keeps them.
    E = np.zeros((6, 12))
    E[:, :6] = np.eye(6) - 1 / 6
    params["W_E"] = E
    params["W_pos"] = np.zeros_like(params["W_pos"])
    params["ln_f_weight"] = np.ones(12)
    block = params["blocks"][0]
    block["ln_1_weight"] = np.ones(12)
    block["W_V"], block["W_O"] = np.zeros((12, 12)), np.zeros((12, 12))
    block["W_V"][:6, :6] = np.eye(6)      # head 0 reads the token ...
    block["W_O"][:6, :6] = np.eye(6)      # ... and writes it back: a copy
    block["W_V"][:6, 6:] = np.eye(6)      # head 1 reads it ...
    block["W_O"][6:, :6] = -np.eye(6)     # ... and writes its negative
    scores = copying_scores(params, n_heads)
    assert scores.shape == (2, 2)
    assert abs(scores[0, 0] - 1) < 1e-9 and abs(scores[0, 1] + 1) < 1e-9


def test_ablating_a_head_removes_exactly_its_output():
    params, n_heads = small_model()
    tokens = np.random.default_rng(9).integers(0, 11, size=(2, 8))
    ablated = ablate_heads(params, [(1, 2)], n_heads)
    assert params["blocks"][1]["W_O"][8:].any()                      # the original is untouched
    # Layer 0 sees the same input, so its weights do not change; the loss does.
    assert np.array_equal(attention_weights(tokens, ablated, n_heads)[0], attention_weights(tokens, params, n_heads)[0])
    assert not np.allclose(token_losses(tokens, ablated, n_heads), token_losses(tokens, params, n_heads))
    everything = ablate_heads(params, [(layer, h) for layer in range(2) for h in range(3)], n_heads)
    assert all(not block["W_O"].any() for block in everything["blocks"])


def test_in_context_learning_score_is_late_loss_minus_early_loss():
    params, n_heads = small_model()
    tokens = np.random.default_rng(10).integers(0, 11, size=(5, 9))
    losses = token_losses(tokens, params, n_heads)
    score = in_context_learning_score(tokens, params, n_heads, early=2, late=7)
    assert math.isclose(score, losses[:, 6].mean() - losses[:, 1].mean(), abs_tol=1e-12)


# --- Bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("call, error, words", [
    (lambda p: gpt_loss_and_grads([[1, 2, 3]], p, 5), ValueError, "n_heads"),
    (lambda p: gpt_loss_and_grads([[1, 2, 30]], p, 3), ValueError, "0 .. 10"),
    (lambda p: gpt_loss_and_grads([1], p, 3), ValueError, "T >= 2"),
    (lambda p: gpt_loss_and_grads(np.zeros(11, dtype=int), p, 3), ValueError, "max_len = 9"),
    (lambda p: gpt_loss_and_grads([1.0, 2.0], p, 3), TypeError, "integer token ids"),
    (lambda p: gpt_loss_and_grads([1, 2], {**p, "W_E": p["W_E"][:, :5]}, 3), ValueError, "d_model = 5"),
    (lambda p: gpt_loss_and_grads([1, 2], {k: v for k, v in p.items() if k != "ln_f_bias"}, 3), ValueError,
     "ln_f_bias"),
    (lambda p: adam_step(p, {"W_E": 1}, lr=0.1), ValueError, "grads lacks"),
    (lambda p: adam_step(p, p, lr=-1), ValueError, "lr"),
    (lambda p: prefix_matching_scores([1, 2, 3, 4], p, 3), ValueError, "never repeat"),
    (lambda p: ablate_heads(p, [(2, 0)], 3), ValueError, "layer"),
    (lambda p: in_context_learning_score([[1, 2, 3]], p, 3, early=2, late=2), ValueError, "early < late"),
])
def test_bad_input_gets_a_clear_error(call, error, words):
    params, _ = small_model()
    with pytest.raises(error, match=words):
        call(params)


def test_attention_backward_equals_the_attention_share_of_the_gpt_gradient():
    require_torch()
    from snippets.multihead import init_params
    from snippets.training import attention_backward

    rng = np.random.default_rng(11)
    params = init_params(8, 2, rng)
    x, d_out = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    d_x, grads = attention_backward(x, params, 2, d_out)
    their_d_x, theirs = reference.numpy(reference.attention_backward(*reference.tensors([x, params]), 2,
                                                                     reference.tensors(d_out)))
    assert np.abs(d_x - their_d_x).max() < TOLERANCE
    for name, value in grads.items():
        assert np.abs(value - theirs[name]).max() < TOLERANCE, name


def test_train_yields_every_step_and_lowers_the_loss():
    params, n_heads = small_model(seed=12)
    ids = np.tile(np.arange(11), 20)
    seen = [(step, loss) for step, loss, _ in train(params, ids, n_heads, 40, 4, 8, lambda s: 0.01, np.random.default_rng(0))]
    assert [step for step, _ in seen] == list(range(1, 41))
    assert seen[-1][1] < 0.5 * seen[0][1]


def test_a_learning_rate_too_large_is_named_not_the_parameters_it_made():
    """Issue 44: the first step moved every entry by about lr, and the second step's overflow blamed params."""
    params, n_heads = small_model(seed=12)
    with pytest.raises(ValueError, match=r"^lr = 1e\+300 is too large: after 1 Adam steps of about lr each, "
                                         r"gpt_loss_and_grads: .* overflow float64: .* expected a learning rate"):
        list(train(params, np.tile(np.arange(11), 20), n_heads, 3, 4, 8, 1e300, np.random.default_rng(0)))


def test_token_circuits_equal_a_reference_built_from_the_transformer_snippet():
    from snippets.heads import token_circuits
    from snippets.multihead import causal_mask
    from snippets.transformer import layer_norm, transformer_block

    params, n_heads = small_model(seed=13, vocab_size=6)
    V, d = params["W_E"].shape
    d_head = d // n_heads
    layer, head = 1, 2
    cols = slice(head * d_head, (head + 1) * d_head)
    block = params["blocks"][layer]
    streams = np.zeros((V, V, d))                      # [first token, second token]: position 1 entering `layer`
    for a in range(V):
        for b in range(V):
            x = params["W_E"][[a, b]] + params["W_pos"][:2]
            x = transformer_block(x, params["blocks"][0], n_heads, mask=causal_mask(2))
            streams[a, b] = layer_norm(x[1], block["ln_1_weight"], block["ln_1_bias"])
    queries = streams.mean(axis=0) @ block["W_Q"][:, cols] + block["b_Q"][cols]
    keys = streams.mean(axis=1) @ block["W_K"][:, cols] + block["b_K"][cols]
    look, copy = token_circuits(params, layer, head, n_heads)
    assert look.shape == copy.shape == (V, V)
    assert np.abs(look - queries @ keys.T / math.sqrt(d_head)).max() < 1e-10
    eigenvalues = np.linalg.eigvals(copy)
    score = eigenvalues.real.sum() / np.abs(eigenvalues).sum()
    assert abs(score - copying_scores(params, n_heads)[layer, head]) < 1e-10


def test_params_to_arrays_and_back_through_an_npz_file(tmp_path):
    from snippets.training import params_from_arrays, params_to_arrays

    params, _ = small_model(seed=14)
    np.savez(tmp_path / "weights.npz", **params_to_arrays(params))
    with np.load(tmp_path / "weights.npz") as arrays:
        again = params_from_arrays(arrays)
    assert [path for path, _ in leaves(again)] == [path for path, _ in leaves(params)]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(leaves(again), leaves(params), strict=True))
    with pytest.raises(ValueError, match="blocks.1.W_Q"):
        params_from_arrays({k: v for k, v in params_to_arrays(params).items() if k != "blocks.1.W_Q"})


# --- parameters finite but too large: a clear error, never a warning or a NaN (issue 34) ----

_HUGE_CALLS = {
    "gpt_loss_and_grads": lambda p: training.gpt_loss_and_grads([[1, 2, 3, 1, 2]], p, 2),
    "token_losses": lambda p: heads.token_losses([1, 2, 3, 1, 2], p, 2),
    "in_context_learning_score": lambda p: heads.in_context_learning_score(
        [[1, 2, 3, 1, 2, 3, 1]], p, 2, early=1, late=5),
    "attention_weights": lambda p: heads.attention_weights([1, 2, 3], p, 2),
    "previous_token_scores": lambda p: heads.previous_token_scores([[1, 2, 3, 4]], p, 2),
    "prefix_matching_scores": lambda p: heads.prefix_matching_scores([1, 3, 0, 2, 1, 3, 0, 2], p, 2),
    "copying_scores": lambda p: heads.copying_scores(p, 2),
    "token_circuits": lambda p: heads.token_circuits(p, 1, 0, 2),
    "train": lambda p: list(training.train(p, np.array([0, 1, 2, 3, 4] * 4), 2, 2, 2, 6, 0.01,
                                           np.random.default_rng(0))),
}


@pytest.mark.parametrize("call", list(_HUGE_CALLS))
def test_huge_finite_parameters_give_a_finite_result_or_an_error_naming_them(call):
    base = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    names = [name for name in base if name != "blocks"] + list(base["blocks"][0])
    for name in names:
        for value in (1e154, 1e300, -1e300):
            params = copy.deepcopy(base)
            for holder in [params, *params["blocks"]]:
                if name in holder:
                    holder[name] = np.full_like(holder[name], value)
            try:
                result = _HUGE_CALLS[call](params)
            except ValueError as error:
                # train's Adam step says how large the parameters, the gradients and lr were
                named = "params (largest |entry|" if call == "train" and "Adam" in str(error) else f"'{name}']"
                assert named in str(error) and "overflow" in str(error), str(error)
                continue
            assert _checks.all_finite(result if call != "train" else [loss for _, loss, _ in result]), (call, name)
