"""Unit tests of snippets/switches.py: the GPT with a part switched off, as the model writer switches it.

The reference is a GPT of torch.nn.functional blocks (tests/support/torch_reference.py)
that removes each part as the page says: ``scaled_dot_product_attention``
with ``scale=1``, no ``W_pos`` added, and the mask given as it is.
"""

import itertools

import numpy as np
import pytest

from snippets.heads import ablate_heads
from snippets.switches import SWITCHES, reading_mask, switched_generate, switched_logits, switched_params
from snippets.transformer import generate, gpt_forward, init_gpt
from support import torch_reference as reference
from support.pytorch import require_torch
from tools import train

TOLERANCE = 1e-10   # float64 against PyTorch, relative to the row's largest logit


def small_gpt(seed=0):
    return init_gpt(13, 16, 12, 2, 3, 20, np.random.default_rng(seed)), 3


def test_nothing_switched_off_is_the_model_itself():
    params, H = small_gpt()
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    assert np.abs(switched_logits(ids, params, H, n_prompt=3) - gpt_forward(ids, params, H)).max() < 1e-12
    assert switched_generate(ids[:3], params, H, n_new=8).tolist() == generate(ids[:3], params, H, 8).tolist()
    sampled = switched_generate(ids[:3], params, H, 8, temperature=0.9, rng=np.random.default_rng(7))
    assert sampled.tolist() == generate(ids[:3], params, H, 8, temperature=0.9, rng=np.random.default_rng(7)).tolist()


def test_the_masks():
    assert np.array_equal(reading_mask(5, 3), np.tri(5, dtype=bool))
    lifted = reading_mask(5, 3, ["causal mask"])
    assert lifted[:3, :3].all() and np.array_equal(lifted[3:], np.tri(5, dtype=bool)[3:])
    frozen = reading_mask(5, 3, ["cache"])
    assert np.array_equal(frozen[:3], np.tri(5, dtype=bool)[:3])
    assert frozen[3:, :3].all() and not frozen[3:, 3:].any()    # the written tokens' keys were never written
    assert np.array_equal(reading_mask(5, 5, ["cache"]), np.tri(5, dtype=bool))


@pytest.mark.parametrize("removed", [[part] for part in SWITCHES] + [list(SWITCHES), ["scale", "cache"]])
def test_each_switch_equals_pytorch_with_the_part_removed(removed):
    torch = require_torch()
    params, _ = train.load_run()
    n_heads = 4
    ids = np.random.default_rng(len(removed)).integers(0, len(params["W_E"]), size=30)
    for n_prompt, off in ((12, []), (30, [(1, 2)]), (1, [(0, 1), (1, 3)])):
        ours = switched_logits(ids, params, n_heads, n_prompt, removed, off)
        torn = reference.tensors(ablate_heads(params, off, n_heads))
        mask = torch.from_numpy(reading_mask(len(ids), n_prompt, removed))
        theirs = reference.switched_gpt_forward(torch.from_numpy(ids), torn, n_heads, mask,
                                                scale=1.0 if "scale" in removed else None,
                                                positions="positions" not in removed).numpy()
        gap = (np.abs(ours - theirs).max(axis=-1) / np.abs(theirs).max(axis=-1)).max()
        assert gap < TOLERANCE, (removed, n_prompt, off, gap)
        # a switch that changes nothing here: a one-word prompt has nothing ahead, a whole-text prompt writes nothing
        if (removed, n_prompt) not in ((["causal mask"], 1), (["cache"], len(ids))):
            assert np.abs(ours - gpt_forward(ids, ablate_heads(params, off, n_heads), n_heads)).max() > 1e-3


def test_the_scale_switch_multiplies_the_queries_and_the_positions_switch_zeroes_w_pos():
    params, H = small_gpt()
    changed = switched_params(params, H, ["scale"], heads=[(1, 0)])
    for before, after in zip(params["blocks"], changed["blocks"], strict=True):
        assert np.allclose(after["W_Q"], 2 * before["W_Q"]) and np.allclose(after["b_Q"], 2 * before["b_Q"])   # √4
        assert np.array_equal(after["W_K"], before["W_K"])
    assert not changed["blocks"][1]["W_O"][:4].any() and np.array_equal(changed["W_pos"], params["W_pos"])
    assert not switched_params(params, H, ["positions"])["W_pos"].any()
    for parts in itertools.combinations(["causal mask", "cache"], 1):
        same = switched_params(params, H, list(parts))
        assert all(np.array_equal(same[name], params[name]) for name in ("W_E", "W_pos"))


def test_a_frozen_cache_reads_the_prompt_only_and_the_prompt_rows_do_not_change():
    params, H = small_gpt(2)
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    frozen = switched_logits(ids, params, H, 4, ["cache"])
    plain = gpt_forward(ids, params, H)
    assert np.abs(frozen[:4] - plain[:4]).max() < 1e-12
    # a written token reads the prompt's keys only: the tokens written before it change nothing
    other = ids.copy()
    other[4:7] = [0, 0, 0]
    assert np.abs(switched_logits(other, params, H, 4, ["cache"])[7] - frozen[7]).max() < 1e-12
    # without the causal mask, a prompt row reads the prompt's later tokens
    lifted = switched_logits(ids, params, H, 4, ["causal mask"])
    changed = ids.copy()
    changed[3] = 0
    assert np.abs(switched_logits(changed, params, H, 4, ["causal mask"])[0] - lifted[0]).max() > 1e-6


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda p: switched_params(p, 3, ["heads"]), ValueError, "not a part that can be switched off"),
    (lambda p: switched_params(p, 3, "scale"), TypeError, "removed must be a list"),
    (lambda p: reading_mask(4, 5), ValueError, "n_prompt must be at most T = 4"),
    (lambda p: switched_logits([1, 2], p, 3, 0), ValueError, "n_prompt must be a positive integer"),
    (lambda p: switched_generate([[1, 2]], p, 3, 2), ValueError, r"shape \(T,\)"),
    (lambda p: switched_generate([1, 2], p, 3, 15), ValueError, "more than max_len = 16"),
    (lambda p: switched_generate([1, 2], p, 3, 2, heads=[(2, 0)]), ValueError, "layer"),
])
def test_bad_input_gets_a_clear_error(call, error, words):
    params, _ = small_gpt()
    with pytest.raises(error, match=words):
        call(params)
