"""Unit tests of snippets/induction.py: the hand-built induction model against the plain rule."""

import numpy as np
import pytest

from snippets.induction import PARAM_NAMES, induction_model, induction_predict, slots


def reference_rule(tokens):
    """For each position: the token after the latest earlier occurrence of the current one, or -1."""
    guesses = []
    for t in range(len(tokens)):
        earlier = [s for s in range(t) if tokens[s] == tokens[t]]
        guesses.append(int(tokens[earlier[-1] + 1]) if earlier else -1)
    return guesses


def random_texts(seed, batch, length, vocab_size):
    return np.random.default_rng(seed).integers(0, vocab_size, size=(batch, length))


@pytest.mark.parametrize(("vocab_size", "max_len", "extra"), [(8, 16, 0), (10, 24, 5), (3, 40, 1), (26, 12, 0)])
def test_model_equals_the_plain_rule_on_random_texts(vocab_size, max_len, extra):
    params = induction_model(vocab_size, 3 * vocab_size + max_len + extra, max_len)
    texts = random_texts(vocab_size + max_len, 300, max_len, vocab_size)
    expected = np.array([reference_rule(list(row)) for row in texts])
    guesses = induction_predict(texts, params)
    assert guesses.dtype == np.int64 and guesses.shape == texts.shape
    np.testing.assert_array_equal(guesses, expected)
    assert (expected >= 0).mean() > 0.15  # the texts repeat: the rule has answers to check


def test_shorter_texts_and_one_text_at_a_time():
    params = induction_model(5, 30, 15)
    for row in random_texts(1, 50, 9, 5):
        assert induction_predict(row, params).tolist() == reference_rule(list(row))
    assert induction_predict(list(row), params).tolist() == reference_rule(list(row))


def test_repeated_random_block_is_copied():
    """The classic test: a random block, then the same block again; the second half is predicted."""
    rng = np.random.default_rng(3)
    vocab_size, half = 20, 10
    params = induction_model(vocab_size, 3 * vocab_size + 2 * half, 2 * half)
    for _ in range(50):
        block = rng.permutation(vocab_size)[:half]  # no letter twice in the block
        text = np.concatenate([block, block])
        guesses = induction_predict(text, params)
        np.testing.assert_array_equal(guesses[half:-1], block[1:])
        assert guesses[half - 1] == -1 and (guesses[:half] == -1).all()


def test_latest_occurrence_wins():
    params = induction_model(4, 20, 8)
    # A B C A D A: A was followed by B, then by D; the latest wins.
    assert induction_predict([0, 1, 2, 0, 3, 0], params).tolist() == [-1, -1, -1, 1, -1, 3]


def test_removing_the_previous_token_head_leaves_no_match():
    params = induction_model(8, 40, 16)
    texts = random_texts(0, 500, 16, 8)
    expected = np.array([reference_rule(list(row)) for row in texts])
    has_answer = expected >= 0
    full = induction_predict(texts, params)
    ablated = induction_predict(texts, {**params, "W_O1": np.zeros_like(params["W_O1"])})
    assert (full == expected)[has_answer].mean() >= 0.95
    assert (ablated == expected)[has_answer].mean() <= 1 / 8 + 0.05  # chance at most
    assert (ablated == -1).all()


def test_temperature_fades_the_copy():
    params = induction_model(8, 40, 16)
    texts = random_texts(2, 300, 16, 8)
    expected = np.array([reference_rule(list(row)) for row in texts])
    has_answer = expected >= 0
    accuracy = [
        (induction_predict(texts, params, temperature=t) == expected)[has_answer].mean()
        for t in (1, 4, 16, 64)
    ]
    assert accuracy[0] == 1.0 and accuracy[1] > 0.95
    assert accuracy[2] < 0.5 and accuracy[3] < 0.1
    assert accuracy == sorted(accuracy, reverse=True)


def test_weights_have_the_documented_shapes_and_slots():
    V, L, d_model = 6, 10, 31
    params = induction_model(V, d_model, L)
    assert set(params) == set(PARAM_NAMES)
    assert params["W_E"].shape == (V, d_model) and params["W_pos"].shape == (L, d_model)
    assert params["W_U"].shape == (d_model, V)
    slot = slots(V, L)
    assert [slot[name] for name in ("token", "position", "previous", "next")] == [
        slice(0, 6), slice(6, 16), slice(16, 22), slice(22, 28)]
    # Where to look, head 1: position t against position t - 1 only.
    QK1 = params["W_Q1"] @ params["W_K1"].T
    assert np.count_nonzero(QK1) == L - 1
    assert (QK1[slot["position"], slot["position"]] > 0).sum() == L - 1
    # What to copy: token -> previous, token -> next.
    OV1, OV2 = params["W_V1"] @ params["W_O1"], params["W_V2"] @ params["W_O2"]
    np.testing.assert_array_equal(OV1[slot["token"], slot["previous"]], np.eye(V))
    np.testing.assert_array_equal(OV2[slot["token"], slot["next"]], np.eye(V))
    assert np.abs(OV1).sum() == np.abs(OV2).sum() == V
    # The unused columns beyond 3V + L stay zero everywhere.
    assert not params["W_E"][:, 28:].any() and not params["W_U"][28:].any()


def test_empty_text_gives_an_empty_answer():
    params = induction_model(4, 20, 8)
    assert induction_predict([], params).shape == (0,)
    assert induction_predict(np.zeros((3, 0), dtype=int), params).shape == (3, 0)


def test_integer_weights_and_numpy_sizes_are_accepted():
    params = induction_model(np.int64(4), np.int32(20), np.int16(8))
    as_ints = {name: np.asarray(array).round().astype(int) for name, array in params.items()}
    assert induction_predict([2, 0, 1, 3, 0, 1], as_ints).tolist() == [-1, -1, -1, -1, 1, 3]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 20, 8), ValueError, "vocab_size must be a positive integer, got 0"),
        ((4.0, 20, 8), ValueError, "vocab_size must be a positive integer, got 4.0"),
        ((4, 20, True), ValueError, "max_len must be a positive integer, got True"),
        ((4, None, 8), ValueError, "d_model must be a positive integer, got None"),
        ((4, 19, 8), ValueError, r"d_model must be at least 3 \* vocab_size \+ max_len = 20"),
        ((4, 20, -1), ValueError, "max_len must be a positive integer, got -1"),
    ],
)
def test_induction_model_rejects_bad_sizes(args, error, message):
    with pytest.raises(error, match=message):
        induction_model(*args)


@pytest.mark.parametrize(
    ("tokens", "error", "message"),
    [
        ([0, 1, 4], ValueError, r"tokens must be ids in \[0, 4\), got values from 0 to 4"),
        ([0, -1], ValueError, r"tokens must be ids in \[0, 4\)"),
        ([0.0, 1.0], TypeError, "tokens must be integer token ids, got dtype float64"),
        ([True, False], TypeError, "tokens must be integer token ids, got dtype bool"),
        (["A", "B"], TypeError, "tokens must be integer token ids"),
        ([0.5, np.nan], TypeError, "tokens must be integer token ids"),
        (None, TypeError, "tokens must be integer token ids"),
        (np.zeros((2, 2, 2), dtype=int), ValueError, r"tokens must have shape \(T,\) or \(B, T\)"),
        (3, ValueError, r"tokens must have shape \(T,\) or \(B, T\), got \(\)"),
        (list(range(4)) * 3, ValueError, "tokens has length T = 12, more than max_len = 8"),
    ],
)
def test_induction_predict_rejects_bad_tokens(tokens, error, message):
    params = induction_model(4, 20, 8)
    with pytest.raises(error, match=message):
        induction_predict(tokens, params)


def test_huge_weights_get_an_overflow_error_naming_the_largest():
    params = induction_model(4, 20, 8)
    with pytest.raises(ValueError, match=r"^the scores of head 1 overflow float64: params\['W_E'\] \(largest \|entry\| "
                                         r"1e\+300\), params\['W_Q2'\] \(largest \|entry\| 52\), .* expected results"):
        induction_predict([0, 1, 0, 1], {**params, "W_E": np.full_like(params["W_E"], 1e300)})


def test_induction_predict_rejects_bad_weights_and_temperature():
    params = induction_model(4, 20, 8)
    with pytest.raises(TypeError, match="params must be a dict"):
        induction_predict([0, 1], [params])
    with pytest.raises(ValueError, match=r"params lacks \['W_O1'\]"):
        induction_predict([0, 1], {k: v for k, v in params.items() if k != "W_O1"})
    with pytest.raises(ValueError, match=r"^params\['W_Q2'\] contains NaN: expected finite numbers$"):
        induction_predict([0, 1], {**params, "W_Q2": params["W_Q2"] * np.nan})
    with pytest.raises(ValueError, match=r"^params\['null1'\] contains \+inf: expected finite numbers$"):
        induction_predict([0, 1], {**params, "null1": np.inf})
    with pytest.raises(ValueError, match=r"params\['W_U'\] must have shape \(20, 4\)"):
        induction_predict([0, 1], {**params, "W_U": params["W_U"][:, :3]})
    with pytest.raises(ValueError, match=r"params\['W_Q1'\]'s columns and params\['W_K1'\]'s columns must be"):
        induction_predict([0, 1], {**params, "W_K1": params["W_K1"][:, :7]})
    with pytest.raises(ValueError, match=r"params\['W_Q1'\]'s columns .* got shapes \(20, 9\) and \(20, 8\)$"):
        induction_predict([0, 1], {**params, "W_Q1": np.zeros((20, 9))})   # issue 44: it blamed W_K1
    with pytest.raises(ValueError, match=r"params\['W_O2'\] must have shape \(4, 20\)"):
        induction_predict([0, 1], {**params, "W_O2": params["W_O2"][:, :19]})
    with pytest.raises(ValueError, match=r"params\['W_E'\] must hold numbers"):
        induction_predict([0, 1], {**params, "W_E": params["W_E"].astype(str)})
    with pytest.raises(ValueError, match=r"params\['W_E'\] must have shape \(vocab_size, d_model\)"):
        induction_predict([0, 1], {**params, "W_E": params["W_E"][0]})
    for bad in (0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match=r"^temperature must be a finite number( > 0)?, got"):
            induction_predict([0, 1], params, temperature=bad)
    with pytest.raises(TypeError, match=r"^temperature must be a real number, got str '2'$"):
        induction_predict([0, 1], params, temperature="2")
    assert induction_predict([0, 1], params, temperature=10**30).shape == (2,)   # a Python int beyond int64: no error


def test_no_warnings_and_finite_at_extreme_temperatures():
    params = induction_model(8, 40, 16)
    texts = random_texts(5, 20, 16, 8)
    for temperature in (1e-6, 1e6):
        guesses = induction_predict(texts, params, temperature=temperature)
        assert ((guesses >= -1) & (guesses < 8)).all()
    # A tiny temperature makes every lookup exact: still the rule.
    expected = np.array([reference_rule(list(row)) for row in texts])
    np.testing.assert_array_equal(induction_predict(texts, params, temperature=1e-6), expected)
