"""Reading a trained GPT's heads: where each looks, what each copies, what each is for (chapter 14).

The model and its parameters are ``snippets.transformer``'s (``init_gpt``);
every score runs its forward pass, keeping each layer's values, and reads
them. :func:`attention_weights` gives every head's weights on a text;
:func:`previous_token_scores` and :func:`prefix_matching_scores` say how much
each head looks one token back, or right after an earlier copy of the
current token (an induction head's "where to look"); :func:`copying_scores`
and :func:`token_circuits` say what a head copies; :func:`ablate_heads`
removes heads, and :func:`token_losses` and
:func:`in_context_learning_score` measure what the model lost with them;
:func:`logit_contributions` says how much each head, and each other part,
raised the logit of the token that came next ("Write with the model").
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Mapping

import numpy as np

from snippets._checks import all_finite, describe
from snippets.training import _cross_entropy
from snippets.transformer import _check_gpt, _check_tokens, _forward, _gpt_overflow


def _overflow_checked(function):
    """``function`` with no overflow warning: a result that is not finite is refused, naming the largest parameters.

    Parameters can be finite and still too large for the sums of a forward
    pass (which refuses them the same way) or of what a score does with them.
    """
    signature = inspect.signature(function)

    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                result = function(*args, **kwargs)
        except np.linalg.LinAlgError:  # an overflowed matrix handed to NumPy's linear algebra
            result = np.inf
        if not all_finite(result):
            p, _ = _check_gpt(signature.bind(*args, **kwargs).arguments["params"], 1)
            raise _gpt_overflow(f"{function.__name__}: the parameters", p)
        return result

    return checked


def _model_arguments(tokens, params, n_heads, min_len=2):
    """The checked ids as a batch (B, T), the checked parameters, and the ids' shape."""
    p, _ = _check_gpt(params, n_heads)
    tokens = _check_tokens(tokens, p["W_E"], p["W_pos"], min_len)
    return tokens.reshape(-1, tokens.shape[-1]), p, tokens.shape


@_overflow_checked
def attention_weights(tokens, params, n_heads: int):
    """Every head's attention weights on ``tokens``: ``(n_layers, ..., n_heads, T, T)``.

    Row t of a head's ``(T, T)`` matrix is where position t looks: its
    weights over positions 0 .. t, summing to 1.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> weights = attention_weights([1, 2, 3], params, n_heads=2)
    >>> weights.shape, weights[1, 0].sum(axis=-1).round(6).tolist()
    ((2, 2, 3, 3), [1.0, 1.0, 1.0])
    """
    batch, p, shape = _model_arguments(tokens, params, n_heads, min_len=1)
    _, (_, _, blocks) = _forward(batch, p, n_heads, "attention_weights: the stream", keep=True)
    weights = np.stack([attention[4] for _, attention, *_ in blocks])
    T = shape[-1]
    return weights.reshape(len(blocks), *shape[:-1], n_heads, T, T)


@_overflow_checked
def previous_token_scores(tokens, params, n_heads: int):
    """How much each head looks at the token just before: ``(n_layers, n_heads)``.

    The mean weight from position t to t - 1, over every t >= 1 and every
    row of ``tokens``. 1 for a head that always looks one back.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> previous_token_scores([[1, 2, 3, 4], [0, 0, 1, 1]], params, n_heads=2).shape
    (2, 2)
    """
    weights = attention_weights(tokens, params, n_heads)
    T = weights.shape[-1]
    if T < 2:
        raise ValueError(f"tokens must have at least 2 positions to have a previous token, got T = {T}")
    t = np.arange(1, T)
    one_back = weights[..., t, t - 1]                           # (L, ..., H, T - 1)
    return np.moveaxis(one_back, -2, 1).reshape(weights.shape[0], n_heads, -1).mean(axis=-1)


@_overflow_checked
def prefix_matching_scores(tokens, params, n_heads: int):
    """How much each head looks right after earlier copies of the current token: ``(n_layers, n_heads)``.

    The induction head's "where to look" (Olsson et al., 2022): at position
    t, the targets are the positions s <= t whose previous token
    ``tokens[s - 1]`` equals ``tokens[t]``. The score is the weight on the
    targets, averaged over the positions that have any. Measured on text
    that repeats, such as a random sequence written twice.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> prefix_matching_scores([1, 3, 0, 2, 1, 3, 0, 2], params, n_heads=2).shape
    (2, 2)
    """
    weights = attention_weights(tokens, params, n_heads)
    batch = np.asarray(tokens).reshape(-1, weights.shape[-1])
    T = batch.shape[-1]
    # targets[b, t, s]: the token before s equals the token at t, and s <= t.
    targets = np.zeros((len(batch), T, T), dtype=bool)
    targets[:, :, 1:] = batch[:, :, None] == batch[:, None, :-1]
    targets &= np.tril(np.ones((T, T), dtype=bool))
    has_target = targets.any(axis=-1)                            # (B, T)
    if not has_target.any():
        raise ValueError("tokens never repeat a token, so no position has a place to look: "
                         "prefix matching needs text with repeats, such as a random sequence written twice")
    w = weights.reshape(weights.shape[0], len(batch), n_heads, T, T)
    on_targets = (w * targets[:, None]).sum(axis=-1)             # (L, B, H, T)
    return on_targets.transpose(0, 2, 1, 3)[..., has_target].mean(axis=-1)


def _one_token_reads(p, n_heads):
    """For every layer: what its heads read, LN₁ without bias, for each one-token text [x]: (vocab_size, d_model)."""
    n_vocab = p["W_E"].shape[0]
    _, (_, _, blocks) = _forward(np.arange(n_vocab)[:, None], p, n_heads, "the one-token texts", keep=True)
    return [values[0][0][:, 0] * block["ln_1_weight"] for block, values in zip(p["blocks"], blocks, strict=True)]


def _copy_circuit(p, reads, layer, head, n_heads):
    """(vocab_size, vocab_size): row x, the logits the head raises when it looks at the one-token text [x]."""
    block, d_head = p["blocks"][layer], p["W_E"].shape[1] // n_heads
    cols = slice(head * d_head, (head + 1) * d_head)
    written = reads[layer] @ block["W_V"][:, cols] @ block["W_O"][cols, :]
    written = written - written.mean(axis=-1, keepdims=True)   # the final layer norm centres it
    return (written * p["ln_f_weight"]) @ p["W_E"].T


@_overflow_checked
def copying_scores(params, n_heads: int):
    """How much each head's "what to copy" copies: ``(n_layers, n_heads)``, from -1 to 1.

    For every token x, take the residual stream of the one-token text
    ``[x]`` as it enters the head's layer (so the layers before it have
    had their say), normalise it as the layer norm does, and send it
    through the head's value and output projections to the logits. Row x
    of the resulting ``(vocab_size, vocab_size)`` matrix says which tokens'
    logits the head raises when it looks at x. The score is ``Σλ / Σ|λ|``
    over the matrix's eigenvalues λ (Elhage et al., 2021): 1 when looking
    at x raises x itself, as a copy does, -1 when it lowers it. The layer
    norms' biases are left out, and the final layer norm counts by its
    weights and its centring only.

    This is an adaptation: Elhage et al. read the head's "direct path",
    ``W_E W_V W_O W_Eᵀ``, which sends the embedding itself through the head.
    A head of a later layer never reads the bare embedding: it reads the
    stream after the layers before it have added to it, normalised. Here
    the rows of that matrix are the words as the head sees them, so the
    score says what the head does to what it really reads.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> copying_scores(params, n_heads=2).shape
    (2, 2)
    """
    p, _ = _check_gpt(params, n_heads)
    reads = _one_token_reads(p, n_heads)
    scores = np.zeros((len(p["blocks"]), n_heads))
    for layer in range(len(p["blocks"])):
        for head in range(n_heads):
            eigenvalues = np.linalg.eigvals(_copy_circuit(p, reads, layer, head, n_heads))
            size = np.abs(eigenvalues).sum()
            scores[layer, head] = eigenvalues.real.sum() / size if size > 0 else 0.0
    return scores


@_overflow_checked
def token_circuits(params, layer: int, head: int, n_heads: int):
    """One head's "where to look" and "what to copy", token by token: two ``(vocab_size, vocab_size)`` arrays.

    ``look[x, y]`` is the score (before the softmax) between a query whose
    token is x and a key whose *previous* token is y: both read at position
    1 of the two-token texts ``[w, x]`` and ``[y, z]``, averaged over w and
    z. An induction head scores high on the diagonal. ``copy[x, y]`` is how
    much the head raises the logit of y when it looks at x, as in
    :func:`copying_scores`; a copying head has a large diagonal.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> look, copy = token_circuits(params, 1, 0, n_heads=2)
    >>> look.shape, copy.shape
    ((5, 5), (5, 5))
    """
    p, _ = _check_gpt(params, n_heads)
    n_vocab, d = p["W_E"].shape
    for name, index, size in (("layer", layer, len(p["blocks"])), ("head", head, n_heads)):
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {describe(index)}")
        if not 0 <= index < size:
            raise ValueError(f"{name} must lie in 0 .. {size - 1}, got {index}")
    if p["W_pos"].shape[0] < 2:
        raise ValueError("the model must read at least 2 positions (W_pos has one row): keys are read at position 1")
    pairs = np.stack(np.meshgrid(np.arange(n_vocab), np.arange(n_vocab), indexing="ij"), axis=-1).reshape(-1, 2)
    block, d_head = p["blocks"][layer], d // n_heads
    # What the head reads: the stream entering its block, layer-normed (its attention's input).
    _, (_, _, blocks) = _forward(pairs, p, n_heads, "the two-token texts", keep=True)
    normed = blocks[layer][1][0][:, 1].reshape(n_vocab, n_vocab, d)             # [first token, second token]
    cols = slice(head * d_head, (head + 1) * d_head)
    queries = normed.mean(axis=0) @ block["W_Q"][:, cols] + block["b_Q"][cols]   # by the token itself
    keys = normed.mean(axis=1) @ block["W_K"][:, cols] + block["b_K"][cols]      # by the token before it
    look = queries @ keys.T / math.sqrt(d_head)
    return look, _copy_circuit(p, _one_token_reads(p, n_heads), layer, head, n_heads)


def ablate_heads(params, heads, n_heads: int):
    """A copy of ``params`` in which the heads ``[(layer, head), ...]`` write nothing.

    A head's output reaches the residual stream through its rows of ``W_O``;
    setting them to zero removes the head and leaves everything else as it was.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> ablated = ablate_heads(params, [(1, 0)], n_heads=2)
    >>> float(np.abs(ablated["blocks"][1]["W_O"][:4]).sum()), bool((ablated["blocks"][1]["W_O"][4:] != 0).all())
    (0.0, True)
    """
    p, _ = _check_gpt(params, n_heads)
    d = p["W_E"].shape[1]
    try:
        pairs = None if isinstance(heads, (str, bytes, Mapping)) else list(heads)
    except TypeError:
        pairs = None
    if pairs is None:
        raise TypeError(f"heads must be a list of (layer, head) pairs, got {describe(heads)}")
    out = {name: [{k: v.copy() for k, v in b.items()} for b in value] if name == "blocks" else value.copy()
           for name, value in p.items()}
    d_head = d // n_heads
    for pair in pairs:
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in pair)
        if not ok or not (0 <= pair[0] < len(p["blocks"]) and 0 <= pair[1] < n_heads):
            raise ValueError(
                f"heads must hold (layer, head) pairs with 0 <= layer < {len(p['blocks'])} "
                f"and 0 <= head < {n_heads}, got {pair!r}"
            )
        layer, head = pair
        out["blocks"][layer]["W_O"][head * d_head:(head + 1) * d_head] = 0.0
    return out


def _reading_mask(mask, T):
    """``mask`` checked as a ``(T, T)`` boolean array (True = position t may read position s), or None."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (T, T):
        raise ValueError(f"mask must be a boolean (T, T) = ({T}, {T}) array, True where position t may read "
                         f"position s, got {describe(mask)}")
    if not mask.any(axis=-1).all():
        raise ValueError(f"mask lets position {int(np.argmin(mask.any(axis=-1)))} read no position: "
                         "a softmax needs at least one key")
    return mask


@_overflow_checked
def logit_contributions(tokens, params, n_heads: int, mask=None):
    """What each part of the model adds, directly, to the logit of the token that comes next: a dict of arrays.

    The logits read the residual stream as it ends, the sum of what every
    part wrote into it: the token's embedding and its position's row, and
    in every layer each head's output, the attention's bias ``b_O`` and the
    feed-forward layer's output. The final layer norm centres that sum and
    divides it by one number per position, σ, so a part's direct share of
    the logit of token w is ``((part - its mean) / σ · ln_f_weight) ·
    W_E[w]``. With the final norm's bias, ``ln_f_bias · W_E[w]``, the
    shares add up to the logit exactly. At every position t < T - 1, w is
    the token that follows, ``tokens[t + 1]``:

    - ``"heads"`` ``(..., T - 1, n_layers, n_heads)``: each head's share;
    - ``"feed_forward"`` ``(..., T - 1, n_layers)``: each feed-forward layer's;
    - ``"embedding"`` ``(..., T - 1)``: the token's and its position's rows';
    - ``"biases"`` ``(..., T - 1)``: the attention biases' and the final norm's.

    A direct share leaves out what a part does through the layers after it
    (a head of layer 0 also changes what layer 1 reads). ``mask (T, T)``,
    True where position t may read position s, replaces the causal mask
    (snippets.switches builds the ones the "Write with the model" page uses).

    >>> from snippets.transformer import gpt_forward, init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> shares = logit_contributions([1, 2, 3, 1], params, n_heads=2)
    >>> shares["heads"].shape, shares["feed_forward"].shape
    ((3, 2, 2), (3, 2))
    >>> total = sum(s.reshape(3, -1).sum(axis=1) for s in shares.values())
    >>> logits = gpt_forward([1, 2, 3], params, n_heads=2)
    >>> bool(np.allclose(total, logits[[0, 1, 2], [2, 3, 1]]))
    True
    """
    batch, p, shape = _model_arguments(tokens, params, n_heads, min_len=1)
    T = shape[-1]
    if T < 2:
        raise ValueError(f"tokens must have at least 2 positions, a token and the one that follows, got T = {T}")
    mask = _reading_mask(mask, T)
    what = "logit_contributions: the stream"
    _, (_, (_, inv_std, ln_f_weight), blocks) = _forward(batch, p, n_heads, what, keep=True, mask=mask)
    E_next = p["W_E"][batch[:, 1:]]                                    # (B, T - 1, d)
    reads = ln_f_weight * E_next * inv_std[:, :-1]                     # what the logit reads of a part

    def share(part):
        """part (B, T - 1, ..., d): its share of each next token's logit, (B, T - 1, ...)."""
        centred = part - part.mean(axis=-1, keepdims=True)
        return np.einsum("bt...d,btd->bt...", centred, reads)

    d = p["W_E"].shape[1]
    d_head = d // n_heads
    heads, feed_forward, biases = [], [], (p["ln_f_bias"] * E_next).sum(axis=-1)
    for block, (_, attention, _, _, _, hidden, _) in zip(p["blocks"], blocks, strict=True):
        read = attention[5][:, :-1].reshape(*E_next.shape[:2], n_heads, d_head)
        heads.append(share(np.einsum("btha,had->bthd", read, block["W_O"].reshape(n_heads, d_head, d))))
        feed_forward.append(share(hidden[:, :-1] @ block["W_2"] + block["b_2"]))
        biases = biases + share(np.broadcast_to(block["b_O"], E_next.shape))
    embedding = share(p["W_E"][batch[:, :-1]] + p["W_pos"][:T - 1])
    rows = (*shape[:-1], T - 1)
    return {"heads": np.stack(heads, axis=-2).reshape(*rows, len(blocks), n_heads),
            "feed_forward": np.stack(feed_forward, axis=-1).reshape(*rows, len(blocks)),
            "embedding": embedding.reshape(rows), "biases": biases.reshape(rows)}


@_overflow_checked
def token_losses(tokens, params, n_heads: int):
    """The loss at every position: ``-log p(tokens[..., t + 1])``, shape ``(..., T - 1)``.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 1, 2, 16, np.random.default_rng(0))
    >>> token_losses([1, 2, 3, 1, 2], params, n_heads=2).round(2).tolist()
    [1.8, 2.4, 2.68, 1.25]
    """
    batch, p, shape = _model_arguments(tokens, params, n_heads)
    losses, _ = _cross_entropy(_forward(batch[:, :-1], p, n_heads, "token_losses: the logits"), batch[:, 1:])
    return losses.reshape(*shape[:-1], shape[-1] - 1)


@_overflow_checked
def in_context_learning_score(tokens, params, n_heads: int, early: int = 5, late: int = 50):
    """Loss at token ``late`` of a context minus loss at token ``early``: an adaptation of Olsson et al.'s score.

    Averaged over the rows of ``tokens (B, T)``. Negative when the model
    guesses better late in a text than early, which it can only do by using
    what it read earlier in the same text. Olsson et al. (2022) take the
    loss at the 500th token minus the loss at the 50th, in contexts of
    hundreds of tokens; chapter 14's windows hold 64 tokens, so it takes the
    50th minus the 5th (``late = 50``, ``early = 5``), the same question
    asked of a shorter text.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 1, 2, 16, np.random.default_rng(0))
    >>> round(in_context_learning_score([[1, 2, 3, 1, 2, 3, 1]], params, 2, early=1, late=5), 2)
    2.24
    """
    batch, p, shape = _model_arguments(tokens, params, n_heads)
    for name, index in (("early", early), ("late", late)):
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"{name} must be a token index, an integer, got {describe(index)}")
    if not 1 <= early < late <= shape[-1] - 1:
        raise ValueError(
            f"need 1 <= early < late <= T - 1 = {shape[-1] - 1} (token indices, predicted "
            f"from the tokens before them), got early = {early}, late = {late}"
        )
    logits = _forward(batch[:, :late], p, n_heads, "in_context_learning_score: the logits")
    losses, _ = _cross_entropy(logits, batch[:, 1:late + 1])
    return float(losses[:, late - 1].mean() - losses[:, early - 1].mean())
