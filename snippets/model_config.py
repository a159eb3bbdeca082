"""Reading a model's configuration as
dictionary choices (chapter 18).

A model's ``config.json`` is a dictionary of
sizes. Every field the chapters teach sets
one choice: how many heads read (``H``), how
many key tables they share (``G``), whether
the cache keeps a latent row (MLA), which
layers forget (a window) or hold a fixed-size
memory (a hybrid), how many experts a token
reads (``k_top``). :func:`read_config` reads
those fields and returns, for every layer,
its kind of attention, the bytes its cache
holds for a context of ``context`` tokens,
and the total and active parameters.

Publishers name one choice in several ways:
DeepSeek's own inference code says ``dim``
and ``n_heads`` where the config.json of the
Hugging Face hub says ``hidden_size`` and
``num_attention_heads``, and OpenAI's
reference code says ``num_experts`` for
``num_local_experts``. ``ALIASES`` maps each
such name to the hub's. A field this module
does not know is listed in the result
(``unknown``), never guessed at.

What is counted: every weight matrix, the two
norms of each layer and the final one,
attention biases where ``attention_bias``
says so, and the sizes the fields give, a
full layer's own key tables and head width
(Gemma 4's ``num_global_key_value_heads``,
``global_head_dim``) and an output gate's
half of ``W_Q`` (``attn_output_gate``) among
them. A hybrid's fixed-size memory layer
(``linear_attention``, Qwen3-Next's Gated
DeltaNet) counts its projections, its short
convolution, its decay and its norm. Biases
of experts and routers that no field
announces (gpt-oss's), a per-head sink
logit, QK-norm weights where ``use_qk_norm``
does not announce them, a shared expert's
one-row gate (Qwen3-Next's) and a
multi-token prediction module are not in any
field read here, and are left out. *Active*
is what one token multiplies by: everything
but the input embedding table, with ``k_top``
routed experts instead of all of them.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

# The hub's names for what other files call
# differently.
ALIASES = {
    # DeepSeek's inference code
    # (config_671B_*.json)
    "dim": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "inter_dim": "intermediate_size",
    "moe_inter_dim": "moe_intermediate_size",
    "n_dense_layers":
        "first_k_dense_replace",
    "n_activated_experts":
        "num_experts_per_tok",
    "n_expert_groups": "n_group",
    "n_limited_groups": "topk_group",
    "route_scale": "routed_scaling_factor",
    "score_func": "scoring_func",
    "original_seq_len":
        "original_max_position_embeddings",
    "rope_factor": "rope_scaling_factor",
    # OpenAI's reference code
    # (gpt_oss/torch/model.py)
    "num_experts": "n_routed_experts",
    "num_local_experts": "n_routed_experts",
    "experts_per_token":
        "num_experts_per_tok",
    "initial_context_length":
        "original_max_position_embeddings",
    # Google's Gemma code
    # (gemma/gm/nn/_gemma.py)
    "num_embed": "vocab_size",
    "embed_dim": "hidden_size",
    "hidden_dim": "intermediate_size",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "sliding_window_size": "sliding_window",
    # Google's Gemma 4 code
    # (gemma4/_gemma4.py)
    "num_global_kv_heads":
        "num_global_key_value_heads",
    "global_key_size": "global_head_dim",
    "k_eq_v_global": "attention_k_eq_v",
}

# Fields with integer sizes: name -> the
# smallest value.
SIZES = {
    "hidden_size": 1, "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "num_key_value_heads": 1, "head_dim": 1,
    "intermediate_size": 0, "vocab_size": 1,
    "max_position_embeddings": 1,
    "original_max_position_embeddings": 1,
    "kv_lora_rank": 1, "q_lora_rank": 0,
    "qk_nope_head_dim": 1,
    "qk_rope_head_dim": 0, "v_head_dim": 1,
    "n_routed_experts": 1,
    "num_experts_per_tok": 1,
    "n_shared_experts": 0,
    "moe_intermediate_size": 1,
    "shared_expert_intermediate_size": 0,
    "first_k_dense_replace": 0,
    "moe_layer_freq": 1,
    "decoder_sparse_step": 1, "n_group": 1,
    "topk_group": 1, "index_n_heads": 1,
    "index_head_dim": 1, "index_topk": 1,
    "sliding_window": 1,
    "full_attention_interval": 1,
    "linear_num_key_heads": 1,
    "linear_num_value_heads": 1,
    "linear_key_head_dim": 1,
    "linear_value_head_dim": 1,
    "linear_conv_kernel_dim": 1,
    "num_global_key_value_heads": 1,
    "global_head_dim": 1,
}
# Fields with a real number each.
NUMBERS = (
    "routed_scaling_factor", "rope_theta",
    "rope_scaling_factor",
    "query_pre_attn_scalar", "swiglu_limit",
    "partial_rotary_factor",
)
# Names: a string each (architectures: a
# list of them).
NAMES = (
    "model_type", "scoring_func",
    "torch_dtype", "dtype", "hidden_act",
    "query_pre_attn_norm", "topk_method",
)

# What each field sets: (symbol, chapter
# page, the choice).
FIELDS = {
    "hidden_size": (
        "d_model", "multi-head.md",
        "the width of every token's state"),
    "num_hidden_layers": (
        "L", "transformer-block.md",
        "how many blocks, each a lookup"),
    "num_attention_heads": (
        "H", "multi-head.md",
        "how many dictionaries "
        "each layer reads"),
    "num_key_value_heads": (
        "G", "kv-cache.md",
        "how many key tables the heads "
        "share (not the cache of an "
        "MLA model: its latent is)"),
    "head_dim": (
        "d_head", "multi-head.md",
        "a head's key width; "
        "need not be d_model / H"),
    "intermediate_size": (
        "d_ff", "weight-memories.md",
        "the keys of the "
        "feed-forward memory"),
    "vocab_size": (
        "n_vocab", "keys-and-positions.md",
        "rows of the embedding table"),
    "tie_word_embeddings": (
        "", "transformer-block.md",
        "one table reads tokens "
        "in and logits out"),
    "attention_bias": (
        "", "multi-head.md",
        "biases on the projections"),
    "max_position_embeddings": (
        "", "transformer-block.md",
        "the longest context "
        "the model is set for"),
    "original_max_position_embeddings": (
        "", "transformer-block.md",
        "the context RoPE was "
        "trained at, before YaRN"),
    "rope_scaling": (
        "", "transformer-block.md",
        "YaRN: RoPE's angles stretched "
        "to reach a longer context"),
    "rope_scaling_factor": (
        "", "transformer-block.md",
        "YaRN's stretch: context "
        "= original x factor"),
    "rope_theta": (
        "", "transformer-block.md",
        "the base of RoPE's angles"),
    "partial_rotary_factor": (
        "", "transformer-block.md",
        "the share of a head's "
        "width RoPE turns"),
    "num_global_key_value_heads": (
        "G", "kv-cache.md",
        "the key tables of the full layers, "
        "if not num_key_value_heads"),
    "global_head_dim": (
        "d_head", "multi-head.md",
        "a full layer's head "
        "width, if not head_dim"),
    "attn_output_gate": (
        "", "choosing-what-to-read.md",
        "a sigmoid gate on each head's "
        "answer: W_Q twice as wide"),
    "attention_k_eq_v": (
        "", "kv-cache.md",
        "a full layer's keys and "
        "values come from one "
        "projection (both still cached)"),
    "sliding_window": (
        "n_win", "kv-cache.md",
        "how many recent keys "
        "a windowed layer keeps"),
    "layer_types": (
        "", "choosing-what-to-read.md",
        "which layers forget, or "
        "keep a fixed-size memory"),
    "kv_lora_rank": (
        "d_latent",
        "latent-and-paged-caches.md",
        "the latent row each token caches"),
    "q_lora_rank": (
        "", "latent-and-paged-caches.md",
        "the queries' own "
        "latent (no cache)"),
    "qk_nope_head_dim": (
        "d_head",
        "latent-and-paged-caches.md",
        "a head's content key, "
        "read from the latent"),
    "qk_rope_head_dim": (
        "d_rope",
        "latent-and-paged-caches.md",
        "the RoPE key all "
        "heads share, cached"),
    "v_head_dim": (
        "d_v", "latent-and-paged-caches.md",
        "a head's value width"),
    "n_routed_experts": (
        "n_experts", "experts.md",
        "the memories a router picks from"),
    "num_experts_per_tok": (
        "k_top", "experts.md",
        "experts each token reads"),
    "n_shared_experts": (
        "", "experts.md",
        "experts every token reads"),
    "moe_intermediate_size": (
        "", "experts.md",
        "one expert's keys"),
    "shared_expert_intermediate_size": (
        "", "experts.md",
        "the keys of the expert "
        "every token reads"),
    "first_k_dense_replace": (
        "", "experts.md",
        "the first layers "
        "keep one dense memory"),
    "moe_layer_freq": (
        "", "experts.md",
        "every how many "
        "layers has experts"),
    "decoder_sparse_step": (
        "", "experts.md",
        "experts in layer i if (i + 1) "
        "is a multiple of it"),
    "mlp_only_layers": (
        "", "experts.md",
        "layers that keep one "
        "dense memory"),
    "n_group": (
        "", "experts.md",
        "experts in groups, "
        "for the router"),
    "topk_group": (
        "", "experts.md",
        "groups a token may pick from"),
    "routed_scaling_factor": (
        "", "experts.md",
        "the routed experts' "
        "weights, scaled up"),
    "scoring_func": (
        "", "experts.md",
        "softmax or sigmoid router scores"),
    "norm_topk_prob": (
        "", "experts.md",
        "kept weights renormalised to 1"),
    "topk_method": (
        "", "experts.md",
        "how the router keeps its top k"),
    "index_n_heads": (
        "n_index",
        "choosing-what-to-read.md",
        "the indexer's small heads"),
    "index_head_dim": (
        "d_index",
        "choosing-what-to-read.md",
        "their width; one key is cached"),
    "index_topk": (
        "k_top", "choosing-what-to-read.md",
        "keys the sparse read keeps"),
    "full_attention_interval": (
        "", "choosing-what-to-read.md",
        "one full layer "
        "in every this many"),
    "linear_num_key_heads": (
        "", "linear-attention.md",
        "a hybrid's "
        "fixed-memory key heads"),
    "linear_num_value_heads": (
        "", "linear-attention.md",
        "its memories: one per value head"),
    "linear_key_head_dim": (
        "d_k", "linear-attention.md",
        "rows of each memory"),
    "linear_value_head_dim": (
        "d_v", "linear-attention.md",
        "columns of each memory"),
    "linear_conv_kernel_dim": (
        "", "choosing-what-to-read.md",
        "the short convolution's "
        "last inputs, kept"),
    "use_qk_norm": (
        "", "choosing-what-to-read.md",
        "RMSNorm on queries and keys"),
    "query_pre_attn_scalar": (
        "", "soft-keys.md",
        "scores scale by its "
        "inverse square root"),
    "query_pre_attn_norm": (
        "", "soft-keys.md",
        "which width the "
        "scores' scale uses"),
    "swiglu_limit": (
        "", "transformer-block.md",
        "a clamp inside the feed-forward"),
    "model_type": (
        "", "",
        "the code that reads it"),
    "architectures": (
        "", "",
        "the model's class"),
    "torch_dtype": (
        "", "latent-and-paged-caches.md",
        "the weights' number format"),
    "dtype": (
        "", "latent-and-paged-caches.md",
        "the weights' number format"),
    "hidden_act": (
        "", "transformer-block.md",
        "the feed-forward's nonlinearity"),
    "rms_norm_eps": (
        "", "transformer-block.md",
        "RMSNorm's small safety term"),
}

KNOWN = frozenset(FIELDS)

LAYER_KINDS = ("full_attention",
               "sliding_attention",
               "linear_attention")


def _is_whole(value):
    """An int, and not a bool (True is 1)."""
    return (isinstance(value, Integral)
            and not isinstance(value, bool))


def _is_number(value):
    """A real number, and not a bool."""
    return (isinstance(value, Real)
            and not isinstance(value, bool))


def _field_error(name, got, wanted):
    shown = repr(got)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ValueError(f"{name} = {shown}: "
                      f"expected {wanted}")


def _check_finite(name, value):
    """No NaN or infinity anywhere, read or
    not."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{name}[{key!r}]"
            _check_finite(where, item)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            where = f"{name}[{i}]"
            _check_finite(where, item)
    elif (isinstance(value, Real)
            and not math.isfinite(value)):
        raise _field_error(name, value,
                           "a finite number")


def _canonical(config):
    """The fields under the hub's names;
    unknown names apart."""
    if not isinstance(config, dict):
        raise TypeError(
            "config must be a dict (a "
            "config.json read by "
            "json.load), got "
            f"{type(config).__name__}")
    fields, unknown, named = {}, [], {}
    for name, value in config.items():
        if not isinstance(name, str):
            raise _field_error(
                "a field name", name,
                "a string")
        _check_finite(name, value)
        hub = ALIASES.get(name, name)
        if hub not in KNOWN:
            unknown.append(name)
            continue
        if (hub in fields
                and fields[hub] != value):
            raise ValueError(
                f"{named[hub]} = "
                f"{fields[hub]!r} and "
                f"{name} = {value!r} name "
                f"the same field ({hub}) "
                "with two values")
        fields[hub], named[hub] = value, name
    return fields, unknown, named


def _size(fields, named, name, default=None):
    value = fields.get(name, default)
    if value is None:
        if (default is None
                and name not in fields):
            return None
        return default
    low = SIZES[name]
    if not _is_whole(value) or value < low:
        raise _field_error(
            named.get(name, name), value,
            f"a whole number >= {low}")
    return int(value)


def _require(fields, named, name):
    value = _size(fields, named, name)
    if value is None:
        raise ValueError(
            f"{name} is missing: a model "
            "config must give it")
    return value


def _flag(fields, named, name):
    value = fields.get(name, False)
    if not isinstance(value, bool):
        raise _field_error(
            named.get(name, name), value,
            "true or false")
    return value


def _check_other(f, named):
    texts = {name: f[name] for name in NAMES
             if name in f}
    for name, value in texts.items():
        if not isinstance(value, str):
            raise _field_error(
                named[name], value,
                "a string")
    names = f.get("architectures", [])
    if not (isinstance(names, list)
            and all(isinstance(n, str)
                    for n in names)):
        raise _field_error(
            named["architectures"], names,
            "a list of strings")
    eps = f.get("rms_norm_eps", 1e-6)
    if not (_is_number(eps) and 0 < eps < 1):
        raise _field_error(
            named["rms_norm_eps"], eps,
            "a number between 0 and 1")
    turned = f.get("partial_rotary_factor")
    if turned is not None and not (
            _is_number(turned)
            and 0 < turned <= 1):
        raise _field_error(
            named["partial_rotary_factor"],
            turned, "a number in (0, 1]")
    scaling = f.get("rope_scaling")
    if not isinstance(scaling, dict | None):
        raise _field_error(
            named["rope_scaling"], scaling,
            "a dict (or null)")


def _layer_kinds(f, named, L):
    """Each layer's kind: full, sliding,
    linear or latent."""
    types = f.get("layer_types")
    if types is not None:
        return _listed_kinds(types, named, L)
    if "kv_lora_rank" in f:
        return ["latent"] * L
    every = _size(
        f, named, "full_attention_interval")
    if every is not None:
        # one full layer in every `every`
        return ["full_attention"
                if (i + 1) % every == 0
                else "linear_attention"
                for i in range(L)]
    if f.get("sliding_window") is not None:
        return ["sliding_attention"] * L
    return ["full_attention"] * L


def _listed_kinds(types, named, L):
    """layer_types, checked: a known kind for
    each of the L layers."""
    if (not isinstance(types, list)
            or len(types) != L):
        raise _field_error(
            named["layer_types"], types,
            f"a list of {L} layer kinds "
            "(num_hidden_layers)")
    for i, kind in enumerate(types):
        if kind not in LAYER_KINDS:
            kinds = ", ".join(LAYER_KINDS)
            raise _field_error(
                f"layer_types[{i}]", kind,
                f"one of {kinds}")
    return list(types)


def _attention(f, named, kind):
    """(parameters, numbers cached per token,
    fixed numbers at state precision, fixed
    numbers at cache precision)."""
    d = _require(f, named, "hidden_size")
    H = _require(
        f, named, "num_attention_heads")
    if kind == "latent":
        return _latent(f, named, d, H)
    if kind == "linear_attention":
        return _linear(f, named, d)
    tables = "num_key_value_heads"
    G = _size(f, named, tables, H)
    d_head = _size(f, named, "head_dim")
    if d_head is None:
        if d % H:
            raise ValueError(
                "head_dim is missing and "
                f"hidden_size = {d} is not "
                "a multiple of "
                f"num_attention_heads = {H}")
        d_head = d // H
    # Gemma 4's full layers have key tables
    # and a head width of their own, and may
    # make keys and values with one
    # projection
    kv = 2
    one_projection = _flag(
        f, named, "attention_k_eq_v")
    if kind == "full_attention":
        own = "num_global_key_value_heads"
        if f.get(own) is not None:
            tables = own
            G = _size(f, named, own)
        d_head = _size(
            f, named, "global_head_dim",
            d_head)
        kv = 1 if one_projection else 2
    if H % G:
        field = named.get(tables, tables)
        raise ValueError(
            f"{field} = {G} must divide "
            f"num_attention_heads = {H} "
            "(each key table serves H / G "
            "heads)")
    # an output gate: W_Q is twice as wide,
    # a query and the gate's scores per head
    q_outputs = H
    if _flag(f, named, "attn_output_gate"):
        q_outputs = 2 * H
    n = d * (q_outputs + kv * G) * d_head
    n += H * d_head * d
    if _flag(f, named, "attention_bias"):
        n += d + (
            q_outputs + kv * G) * d_head
    if _flag(f, named, "use_qk_norm"):
        n += 2 * d_head
    # keys and values are cached apart even
    # when one projection makes both: a norm
    # and RoPE turn keys
    return n, 2 * G * d_head, 0, 0


def _latent(f, named, d, H):
    kv = _require(f, named, "kv_lora_rank")
    q = _size(f, named, "q_lora_rank", 0)
    nope = _require(
        f, named, "qk_nope_head_dim")
    rope = _size(
        f, named, "qk_rope_head_dim", 0)
    d_v = _require(f, named, "v_head_dim")
    # queries through their own latent, if
    # any
    q_width = H * (nope + rope)
    n = (d * q + q + q * q_width if q
         else d * q_width)
    n += d * (kv + rope) + kv
    n += kv * H * (nope + d_v) + H * d_v * d
    cached = kv + rope
    # DeepSeek's indexer
    if "index_topk" in f:
        heads = _require(
            f, named, "index_n_heads")
        width = _require(
            f, named, "index_head_dim")
        if not q:
            raise ValueError(
                "index_topk needs "
                "q_lora_rank: the indexer's "
                "queries read the query "
                "latent")
        n += q * heads * width + d * width
        n += 2 * width + d * heads
        cached += width
    return n, cached, 0, 0


def _linear(f, named, d):
    k_heads = _require(
        f, named, "linear_num_key_heads")
    v_heads = _require(
        f, named, "linear_num_value_heads")
    d_k = _require(
        f, named, "linear_key_head_dim")
    d_v = _require(
        f, named, "linear_value_head_dim")
    kernel = _size(
        f, named, "linear_conv_kernel_dim",
        default=1)
    if v_heads % k_heads:
        raise ValueError(
            "linear_num_value_heads = "
            f"{v_heads} must be a multiple "
            "of linear_num_key_heads = "
            f"{k_heads} (each key head "
            "serves v / k memories)")
    mixed = 2 * k_heads * d_k + v_heads * d_v
    n = d * (mixed + v_heads * d_v
             + 2 * v_heads)
    n += mixed * kernel + 2 * v_heads + d_v
    n += v_heads * d_v * d
    state = v_heads * d_k * d_v
    return n, 0, state, (kernel - 1) * mixed


def _ffn(f, named, L):
    """Per layer: (stored, read) feed-forward
    parameters."""
    d = f["hidden_size"]
    d_ff = _size(
        f, named, "intermediate_size", 0)
    dense = 3 * d * d_ff
    experts = _size(
        f, named, "n_routed_experts")
    if experts is None:
        return [(dense, dense)] * L
    k = _require(
        f, named, "num_experts_per_tok")
    if k > experts:
        asked = named["num_experts_per_tok"]
        pool = named["n_routed_experts"]
        raise ValueError(
            f"{asked} = {k} must be at most "
            f"the {experts} experts "
            f"({pool})")
    groups = _size(f, named, "n_group", 1)
    chosen = _size(
        f, named, "topk_group", groups)
    if experts % groups or chosen > groups:
        raise ValueError(
            f"n_group = {groups} must "
            f"divide the {experts} experts, "
            f"and topk_group = {chosen} be "
            "at most n_group")
    # Mixtral's and gpt-oss's experts are as
    # wide as the feed-forward layer they
    # replace
    width = _size(f, named,
                  "moe_intermediate_size",
                  d_ff or None)
    if width is None:
        raise ValueError(
            "moe_intermediate_size is "
            "missing, and intermediate_size "
            "too: an expert's width")
    shared = _size(
        f, named, "n_shared_experts", 0)
    shared_w = _size(
        f, named,
        "shared_expert_intermediate_size",
        shared * width)
    router = experts * d
    if f.get("scoring_func") == "sigmoid":
        # the bias used to choose
        router += experts
    common = router + 3 * d * shared_w
    moe = (common + experts * 3 * d * width,
           common + k * 3 * d * width)
    field = "first_k_dense_replace"
    first = _size(f, named, field, 0)
    every = _size(
        f, named, "moe_layer_freq", 1)
    if first > L:
        raise ValueError(
            f"{named[field]} = {first} is "
            f"more than the {L} layers")
    # Qwen's rule: experts where (i + 1) is
    # a multiple of the step
    step = _size(
        f, named, "decoder_sparse_step", 1)
    dense_only = _listed_layers(f, named, L)
    return [moe
            if i >= first and i % every == 0
            and (i + 1) % step == 0
            and i not in dense_only
            else (dense, dense)
            for i in range(L)]


def _listed_layers(f, named, L):
    """mlp_only_layers, checked: numbers of
    layers, from 0 to L - 1."""
    listed = f.get("mlp_only_layers", [])
    if listed is None:
        return set()
    if not (isinstance(listed, list)
            and all(_is_whole(i)
                    and 0 <= i < L
                    for i in listed)):
        raise _field_error(
            named["mlp_only_layers"], listed,
            "a list of layer numbers "
            f"from 0 to {L - 1}")
    return set(listed)


def _context_limit(f, named):
    longest = _size(
        f, named, "max_position_embeddings")
    if longest is not None:
        return longest
    base = _size(
        f, named,
        "original_max_position_embeddings")
    factor = f.get("rope_scaling_factor")
    if base is None or factor is None:
        return base
    return int(base * factor)


def read_config(config, context=4096,
                n_bytes=2, state_bytes=4):
    """Every layer's attention, the cache and
    the parameters.

    ``config`` is a model's configuration as
    a dict (``json.load`` of its config.json;
    other publishers' names are read through
    ``ALIASES``). ``context`` is the number
    of tokens the cache holds, ``n_bytes``
    the bytes of one cached number (2 for
    16-bit, 1 for 8-bit), ``state_bytes``
    those of a hybrid layer's fixed-size
    memory (4: float32, as reference code
    keeps it). Returns a dict: ``layers``
    (each layer's kind: ``full_attention``,
    ``sliding_attention``,
    ``linear_attention`` or ``latent``),
    ``cache_bytes`` (for ``context`` tokens,
    all layers), ``total`` and ``active``
    parameters, ``context_limit`` (the
    longest context the config states, or
    None) and ``unknown`` (the fields it did
    not read).

    >>> tiny = {"hidden_size": 64,
    ...         "num_hidden_layers": 2,
    ...         "num_attention_heads": 4,
    ...         "num_key_value_heads": 2,
    ...         "intermediate_size": 128,
    ...         "vocab_size": 100,
    ...         "bos_token_id": 1}
    >>> r = read_config(tiny, context=10)
    >>> r["layers"]
    ['full_attention', 'full_attention']
    >>> r["cache_bytes"], r["unknown"]
    (2560, ['bos_token_id'])
    >>> r["total"], r["active"]
    (86848, 80448)
    """
    arguments = {"context": context,
                 "n_bytes": n_bytes,
                 "state_bytes": state_bytes}
    for name, value in arguments.items():
        if not _is_whole(value) or value < 1:
            raise _field_error(
                name, value,
                "a whole number >= 1")
    context = int(context)
    n_bytes = int(n_bytes)
    state_bytes = int(state_bytes)
    f, unknown, named = _canonical(config)
    _check_other(f, named)
    for name in NUMBERS:
        value = f.get(name)
        if value is None:
            continue
        if (not _is_number(value)
                or not math.isfinite(value)):
            raise _field_error(
                named[name], value,
                "a finite number")
    d = _require(f, named, "hidden_size")
    L = _require(
        f, named, "num_hidden_layers")
    vocab = _require(f, named, "vocab_size")
    window = _size(
        f, named, "sliding_window")
    kinds = _layer_kinds(f, named, L)
    sliding = "sliding_attention" in kinds
    if sliding and window is None:
        raise ValueError(
            "layer_types has sliding layers "
            "but sliding_window is missing")
    cache, attention = 0, []
    for kind in kinds:
        sizes = _attention(f, named, kind)
        n, per_token, state, conv = sizes
        held = context
        if kind == "sliding_attention":
            held = min(context, window)
        cache += per_token * held * n_bytes
        cache += state * state_bytes
        cache += conv * n_bytes
        attention.append(n)
    norms = 2 * d
    # the final norm
    stored = read = d
    ffn = _ffn(f, named, L)
    for n, (ffn_stored, ffn_read) in zip(
            attention, ffn, strict=True):
        stored += n + norms + ffn_stored
        read += n + norms + ffn_read
    table = vocab * d
    tied = _flag(
        f, named, "tie_word_embeddings")
    # untied, the logits have a table of
    # their own
    tables = 1 if tied else 2
    limit = _context_limit(f, named)
    return {
        "layers": kinds,
        "cache_bytes": cache,
        "total": stored + table * tables,
        "active": read + table,
        "context_limit": limit,
        "unknown": unknown,
    }
