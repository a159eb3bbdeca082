"""One PyTorch reference per public function of snippets/ that PyTorch computes too.

The equality tests and .ci/bench_snippets.py both import these: a result is
checked against the reference its speed is measured against. Each takes the
function's arguments as tensors (:func:`tensors`) and computes the same the
way a PyTorch user writes it: torch.nn.functional's operation where there is
one, else the models' own code (DeepSeek's MLA and indexer, gpt-oss's sinks,
Qwen3-Next's gate). None shares code with snippets/. Masks are the
library's: True where a query may look. Without PyTorch this module imports,
and support.pytorch.require_torch skips (REQUIRE_TORCH=1: fails) the tests.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import torch
    from torch.nn import functional as F
except ImportError:   # PyTorch is not a requirement of the site
    torch = F = None


def _map(function, tree):
    """``function`` of every leaf of dicts, lists and tuples, the structure kept."""
    if isinstance(tree, dict):
        return {key: _map(function, value) for key, value in tree.items()}
    return type(tree)(_map(function, value) for value in tree) if isinstance(tree, (list, tuple)) else function(tree)


def tensors(tree, dtype=None, grad=False):
    """The arrays of ``tree`` as tensors (of ``dtype``; leaves with ``grad``); other values as they are."""
    def tensor(x):
        t = torch.from_numpy(np.ascontiguousarray(x))
        return (t if dtype is None else t.to(dtype)).requires_grad_(grad)

    return _map(lambda x: tensor(x) if isinstance(x, np.ndarray) else x, tree)


def numpy(tree):
    """The tensors of ``tree`` as arrays."""
    return _map(lambda x: x.detach().numpy() if isinstance(x, torch.Tensor) else x, tree)


def _heads(x, n_heads):
    """(..., T, n_heads·d) -> (..., n_heads, T, d)."""
    return x.unflatten(-1, (n_heads, -1)).transpose(-3, -2)


def _merged(x):
    return x.transpose(-3, -2).flatten(-2)


def _causal(T, S=None, start=0):
    return torch.ones(T, T if S is None else S, dtype=torch.bool).tril(diagonal=start)


# --- transformer.py, positions.py ------------------------------------------------------


def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def rms_norm(x, weight, eps=1e-6):
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def gelu(x):
    return F.gelu(x, approximate="tanh")


def rope(x, positions):
    """Column pairs (2i, 2i+1) as complex numbers, times e^(i · position · w_i)."""
    d = x.shape[-1]
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    turn = torch.polar(torch.ones(len(positions), d // 2, dtype=x.dtype), positions.to(x.dtype)[:, None] * w)
    return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous()) * turn).flatten(-2)


def _block(x, b, n_heads, mask=None, cache=None, start=0, scale=None):
    """A pre-norm block; with ``cache`` ``(K, V)``, the rows are positions ``start`` on and their keys and values are written."""
    h = layer_norm(x, b["ln_1_weight"], b["ln_1_bias"])
    Q, K, V = (_heads(h @ b[f"W_{n}"] + b[f"b_{n}"], n_heads) for n in "QKV")
    if cache is not None:
        end = start + x.shape[-2]
        cache[0][:, :, start:end], cache[1][:, :, start:end] = K, V
        K, V = cache[0][:, :, :end], cache[1][:, :, :end]
    x = x + _merged(F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=scale)) @ b["W_O"] + b["b_O"]
    h = layer_norm(x, b["ln_2_weight"], b["ln_2_bias"])
    return x + gelu(h @ b["W_1"] + b["b_1"]) @ b["W_2"] + b["b_2"]


def transformer_block(x, params, n_heads, mask=None):
    """PyTorch's pre-norm encoder layer with a tanh GELU and the block's weights (its mask: True = may not look)."""
    d_model, d_ff = params["W_1"].shape
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, activation=gelu, batch_first=True,
                                             norm_first=True, dtype=x.dtype)
    with torch.no_grad():   # Linear computes x @ weight.T: its weights are the block's matrices transposed
        attention = layer.self_attn
        attention.in_proj_weight.copy_(torch.cat([params[f"W_{n}"] for n in "QKV"], 1).T)
        attention.in_proj_bias.copy_(torch.cat([params[f"b_{n}"] for n in "QKV"]))
        for linear, n in ((attention.out_proj, "O"), (layer.linear1, "1"), (layer.linear2, "2")):
            linear.weight.copy_(params[f"W_{n}"].T)
            linear.bias.copy_(params[f"b_{n}"])
        for norm, name in ((layer.norm1, "ln_1"), (layer.norm2, "ln_2")):
            norm.weight.copy_(params[f"{name}_weight"])
            norm.bias.copy_(params[f"{name}_bias"])
        return layer.eval()(x, src_mask=None if mask is None else ~mask)


def gpt_forward(tokens, params, n_heads, cache=None, start=0):
    """The logits; with ``cache`` (one ``(K, V)`` per block), of the last position only, the ids at positions ``start`` on."""
    T = tokens.shape[-1]
    x = F.embedding(tokens, params["W_E"]) + params["W_pos"][start:start + T]
    for i, b in enumerate(params["blocks"]):
        x = _block(x, b, n_heads, _causal(T, start + T, start), None if cache is None else cache[i], start)
    return layer_norm(x if cache is None else x[:, -1], params["ln_f_weight"], params["ln_f_bias"]) @ params["W_E"].T


def switched_gpt_forward(tokens, params, n_heads, mask, scale=None, positions=True):
    """The logits of a GPT whose queries read where ``mask`` says, scores times ``scale`` (None: 1/√d_head), ``W_pos`` or not."""
    x = F.embedding(tokens, params["W_E"])
    if positions:
        x = x + params["W_pos"][:tokens.shape[-1]]
    for b in params["blocks"]:
        x = _block(x, b, n_heads, mask, scale=scale)
    return layer_norm(x, params["ln_f_weight"], params["ln_f_bias"]) @ params["W_E"].T


def generate(tokens, params, n_heads, n_new):
    """Greedy generation with a KV cache per block: the prompt at once, then one token a step."""
    B, T = tokens.shape
    d = params["W_E"].shape[1]
    shape = (B, n_heads, T + n_new, d // n_heads)
    cache = [(torch.zeros(shape, dtype=params["W_E"].dtype), torch.zeros(shape, dtype=params["W_E"].dtype))
             for _ in params["blocks"]]
    out = torch.empty(B, T + n_new, dtype=torch.int64)
    out[:, :T] = tokens
    start = 0
    for t in range(T, T + n_new):
        out[:, t] = gpt_forward(out[:, start:t], params, n_heads, cache, start).argmax(-1)
        start = t
    return out


# --- training.py ---------------------------------------------------------------------


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    return [leaf for value in tree for leaf in _leaves(value)] if isinstance(tree, list) else [tree]


def gpt_loss_and_grads(tokens, params, n_heads):
    """The mean next-token cross-entropy, and autograd's gradient (``params`` hold leaves: ``tensors(..., grad=True)``)."""
    for leaf in _leaves(params):
        leaf.grad = None
    logits = gpt_forward(tokens[..., :-1], params, n_heads)
    loss = F.cross_entropy(logits.flatten(0, -2), tokens[..., 1:].flatten())
    loss.backward()
    return loss, _map(lambda leaf: leaf.grad, params)


def adam(params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """adam_step's reference: torch.optim.Adam over the leaves of ``params``, whose ``step()`` is one step."""
    return torch.optim.Adam(_leaves(params), lr=lr, betas=(beta1, beta2), eps=eps)


def attention_backward(x, params, n_heads, d_out):
    """Causal self-attention's gradients with respect to ``x`` and the eight parameters, by autograd."""
    x, p = x.detach().requires_grad_(), {name: value.detach().requires_grad_() for name, value in params.items()}
    Q, K, V = (_heads(x @ p[f"W_{n}"] + p[f"b_{n}"], n_heads) for n in "QKV")
    out = _merged(F.scaled_dot_product_attention(Q, K, V, is_causal=True)) @ p["W_O"] + p["b_O"]
    (out * d_out).sum().backward()
    return x.grad, {name: value.grad for name, value in p.items()}


# --- attention variants: multihead.py, kv_cache.py, no_match.py, at_scale.py, linear_memory.py, paged_cache.py --


def scaled_dot_product_attention(Q, K, V, mask=None, scale=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=scale)


def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
    """The layer with its weights on view, as ``nn.MultiheadAttention(need_weights=True)`` computes them."""
    Q = _heads(x_q @ params["W_Q"] + params["b_Q"], n_heads)
    K, V = (_heads(x_kv @ params[f"W_{n}"] + params[f"b_{n}"], n_heads) for n in "KV")
    scores = Q @ K.mT / math.sqrt(Q.shape[-1])
    weights = (scores if mask is None else scores.masked_fill(~mask, -math.inf)).softmax(-1)
    return _merged(weights @ V) @ params["W_O"] + params["b_O"], weights


def grouped_query_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, enable_gqa=True)


def decode_with_cache(x, params, n_heads):
    """One position at a time: its key and value appended to the cache, its query reading every entry so far."""
    B, T, d = x.shape
    K, V = (torch.empty(B, n_heads, T, d // n_heads, dtype=x.dtype) for _ in range(2))
    outs = []
    for t in range(T):
        x_t = x[:, t:t + 1]
        K[:, :, t:t + 1], V[:, :, t:t + 1], q = (_heads(x_t @ params[f"W_{n}"] + params[f"b_{n}"], n_heads)
                                                 for n in "KVQ")
        read = F.scaled_dot_product_attention(q, K[:, :, :t + 1], V[:, :, :t + 1])
        outs.append(_merged(read) @ params["W_O"] + params["b_O"])
    return torch.cat(outs, dim=1)


def attention_with_sink(Q, K, V, sink_score=0.0, mask=None):
    """gpt-oss's sinks: one more column of scores, a number or one per head, dropped after the softmax."""
    scores = Q @ K.mT / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    sink = torch.as_tensor(sink_score, dtype=scores.dtype)
    sink = sink.reshape(-1, 1, 1) if sink.ndim else sink
    weights = torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1).softmax(-1)[..., :-1]
    return weights @ V, weights


def sparse_attention(Q, K, V, index, k_top, mask=None):
    """DeepSeek-V3.2's read: ``topk`` of the index, a mask of -inf outside it added to the scores."""
    if mask is not None:
        index = index.masked_fill(~mask, -math.inf)
    chosen = index.topk(min(k_top, index.shape[-1]), dim=-1).indices
    keep = torch.full_like(index, -math.inf).scatter(-1, chosen, 0.0)
    if mask is not None:   # topk may pick a masked key when a row has fewer than k_top allowed
        keep = keep.masked_fill(~mask, -math.inf)
    weights = (Q @ K.mT / math.sqrt(Q.shape[-1]) + keep).softmax(-1)
    return weights @ V, weights


def topk_attention(Q, K, V, k_top):
    return sparse_attention(Q, K, V, Q @ K.mT, k_top)[0]


def linear_attention(Q, K, V, chunk=64):
    """Causal, a chunk at a time: masked scores inside a chunk, the memory ``M`` of the chunks before."""
    out = torch.empty(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype)
    M = torch.zeros(*Q.shape[:-2], K.shape[-1], V.shape[-1], dtype=Q.dtype)
    future = ~_causal(chunk)
    for a in range(0, Q.shape[-2], chunk):
        q, k, v = Q[..., a:a + chunk, :], K[..., a:a + chunk, :], V[..., a:a + chunk, :]
        n = q.shape[-2]
        out[..., a:a + chunk, :] = q @ M + (q @ k.mT).masked_fill(future[:n, :n], 0) @ v
        M = M + k.mT @ v
    return out


def delta_rule(K, V, beta=1.0):
    M = torch.zeros(*K.shape[:-2], K.shape[-1], V.shape[-1], dtype=K.dtype)
    for s in range(K.shape[-2]):
        k, v = K[..., s, :], V[..., s, :]
        M += beta * k[..., :, None] * (v - (k[..., None, :] @ M)[..., 0, :])[..., None, :]
    return M


def paged_attention(Q, K_pages, V_pages, table, length, mask=None):
    """Attention over a sequence's pages, gathered by its page table and cut to its ``length`` entries."""
    K, V = (pages[table].flatten(0, 1)[:length] for pages in (K_pages, V_pages))
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


# --- Part IV: mla.py, moe.py, sparse_gated.py --------------------------------------------


def mla_attention(X, params, n_heads):
    """DeepSeek's naive form: each head's content and RoPE parts concatenated, the RoPE key shared by the heads."""
    *batch, T, _ = X.shape
    d_rope = params["W_KR"].shape[1]
    positions = torch.arange(T, dtype=X.dtype)
    latent = X @ params["W_DKV"]
    k_nope, v = (_heads(latent @ params[name], n_heads) for name in ("W_UK", "W_UV"))
    k_pe = rope(X @ params["W_KR"], positions)[..., None, :, :].expand(*batch, n_heads, T, d_rope)
    q_nope, q_pe = _heads(X @ params["W_Q"], n_heads), rope(_heads(X @ params["W_QR"], n_heads), positions)
    scale = 1 / math.sqrt(q_nope.shape[-1] + d_rope)
    out = F.scaled_dot_product_attention(torch.cat([q_nope, q_pe], -1), torch.cat([k_nope, k_pe], -1), v,
                                         is_causal=True, scale=scale)
    return _merged(out) @ params["W_O"]


def mla_decode(X, params, n_heads):
    """One token at a time from a latent cache, absorbed: queries moved into the latent space, never the keys built."""
    *batch, T, _ = X.shape
    d_rope = params["W_KR"].shape[1]
    W_UK, W_UV = (params[name].unflatten(-1, (n_heads, -1)).transpose(0, 1) for name in ("W_UK", "W_UV"))
    C = torch.empty(*batch, T, params["W_DKV"].shape[1], dtype=X.dtype)
    K_R = torch.empty(*batch, T, d_rope, dtype=X.dtype)
    scale = 1 / math.sqrt(W_UK.shape[-1] + d_rope)
    outs = []
    for s in range(T):
        x, position = X[..., s:s + 1, :], torch.tensor([float(s)], dtype=X.dtype)
        C[..., s:s + 1, :], K_R[..., s:s + 1, :] = x @ params["W_DKV"], rope(x @ params["W_KR"], position)
        q_c, q_r = _heads(x @ params["W_Q"], n_heads), rope(_heads(x @ params["W_QR"], n_heads), position)
        latents = C[..., None, :s + 1, :]
        scores = ((q_c @ W_UK.mT) @ latents.mT + q_r @ K_R[..., None, :s + 1, :].mT) * scale
        outs.append(_merged((scores.softmax(-1) @ latents) @ W_UV) @ params["W_O"])
    return torch.cat(outs, dim=-2)


def router_weights(X, params, top_k):
    kept, chosen = (X @ params["W_router"]).topk(top_k, dim=-1)
    return torch.zeros(*X.shape[:-1], params["W_router"].shape[1], dtype=X.dtype).scatter(-1, chosen, kept.softmax(-1))


def moe_forward(X, params, top_k):
    """Each expert run on the tokens that chose it, its answers weighted and added back in place."""
    x = X.reshape(-1, X.shape[-1])
    kept, chosen = (x @ params["W_router"]).topk(top_k, dim=-1)
    gates = kept.softmax(-1)
    out = torch.zeros_like(x)
    for e, p in enumerate(params["experts"]):
        rows, slot = (chosen == e).nonzero(as_tuple=True)
        answer = gelu(x[rows] @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]
        out.index_add_(0, rows, answer * gates[rows, slot, None])
    return out.reshape(X.shape)


def lightning_indexer(X_q, X_kv, params, n_index):
    """DeepSeek-V3.2's indexer: ReLU of each head's dot products, weighted per query, summed over the heads."""
    q = (X_q @ params["W_IQ"]).unflatten(-1, (n_index, -1))
    match = torch.relu(torch.einsum("...tnd,...sd->...tns", q, X_kv @ params["W_IK"]))
    return torch.einsum("...tns,...tn->...ts", match, X_q @ params["W_Iw"])


def gated_output(heads, X, W_G):
    """Qwen3-Next's gate: ``attn_output * torch.sigmoid(gate)``."""
    return heads * torch.sigmoid(X @ W_G)


def qk_norm_attention(Q, K, V, q_weight, k_weight, eps=1e-6, mask=None):
    """Qwen3's QK-norm: rms_norm on the queries and the keys, then attention."""
    return F.scaled_dot_product_attention(rms_norm(Q, q_weight, eps), rms_norm(K, k_weight, eps), V, attn_mask=mask)


# --- sampling.py -------------------------------------------------------------------------


def sampling_probabilities(logits, temperature=1.0, k_top=None, p_top=1.0):
    """Hugging Face's TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, in that order, then the softmax."""
    scores = logits / temperature
    if k_top is not None:
        kth = torch.topk(scores, min(k_top, scores.shape[-1])).values[..., -1, None]
        scores = scores.masked_fill(scores < kth, -math.inf)
    if p_top < 1:
        ascending, order = torch.sort(scores, descending=False)
        cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= 1 - p_top
        remove[..., -1:] = False          # the most likely token always stays
        scores = scores.masked_fill(remove.scatter(-1, order, remove), -math.inf)
    return scores.softmax(dim=-1)
