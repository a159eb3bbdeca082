"""Unit tests of snippets/paged_cache.py: a paged KV cache (chapter 15).

Attention over a sequence's pages must equal PyTorch's
``scaled_dot_product_attention`` over the same keys and values written in
one contiguous array, for sequences written in turns (so that their pages
interleave in the pool), with and without masks. Sharing a prefix must copy
nothing until a shared page would be written, and then copy only that page.
"""

import numpy as np
import pytest

from snippets.paged_cache import PagedKVCache, paged_attention
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-12


def test_pages_are_handed_out_as_needed_and_read_back_in_order():
    rng = np.random.default_rng(0)
    cache = PagedKVCache(n_pages=20, page_size=4, d_k=3, d_v=2)
    seqs = [cache.new_sequence() for _ in range(3)]
    written = {seq: ([], []) for seq in seqs}
    for n in (3, 1, 6, 2, 5):                      # turns: the pages of the sequences interleave
        for seq in seqs:
            K, V = rng.normal(size=(n, 3)), rng.normal(size=(n, 2))
            cache.append(seq, K, V)
            written[seq][0].append(K)
            written[seq][1].append(V)
    for seq in seqs:
        K, V = cache.read(seq)
        assert np.array_equal(K, np.vstack(written[seq][0])) and np.array_equal(V, np.vstack(written[seq][1]))
        assert len(cache.page_table(seq)) == -(-cache.length(seq) // 4) == 5
    assert cache.free_pages == 20 - 15
    tables = [set(cache.page_table(seq)) for seq in seqs]
    assert not (tables[0] & tables[1]) and not (tables[1] & tables[2])


@pytest.mark.parametrize(("page_size", "lengths", "T", "d_k", "d_v"), [(4, (7, 13), 3, 5, 2), (1, (5, 2), 2, 3, 4),
                                                                       (16, (40, 3), 4, 8, 8)])
def test_paged_attention_equals_pytorch_over_the_contiguous_cache(page_size, lengths, T, d_k, d_v):
    torch = require_torch()
    rng = np.random.default_rng(page_size)
    cache = PagedKVCache(n_pages=64, page_size=page_size, d_k=d_k, d_v=d_v)
    seqs = [cache.new_sequence() for _ in lengths]
    for step in range(max(lengths)):
        for seq, length in zip(seqs, lengths, strict=True):
            if step < length:
                cache.append(seq, rng.normal(size=(1, d_k)), rng.normal(size=(1, d_v)))
    for seq, S in zip(seqs, lengths, strict=True):
        K, V = cache.read(seq)
        Q = rng.normal(size=(2, T, d_k))
        # the last T entries are the queries' own tokens: query t sees entries up to S - T + t
        mask = np.arange(S)[None, :] <= np.arange(S - T, S)[:, None] if S >= T else None
        table = torch.tensor(cache.page_table(seq))
        theirs = reference.paged_attention(*reference.tensors([Q, cache.K_pages, cache.V_pages]), table, S,
                                           reference.tensors(mask)).numpy()
        assert np.abs(theirs - reference.scaled_dot_product_attention(*reference.tensors([Q, K, V, mask])).numpy()).max() \
            < TOLERANCE
        output, weights = paged_attention(Q, cache, seq, mask=mask)
        assert weights.shape == (2, T, S)
        assert np.abs(output - theirs).max() < TOLERANCE


def test_a_shared_prefix_is_copied_only_where_it_is_written():
    rng = np.random.default_rng(1)
    cache = PagedKVCache(n_pages=10, page_size=4, d_k=2, d_v=2)
    prompt = cache.new_sequence()
    K, V = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    cache.append(prompt, K, V)
    answer = cache.share_prefix(prompt)
    assert cache.page_table(answer) == cache.page_table(prompt) and cache.free_pages == 8
    cache.append(answer, np.ones((1, 2)), np.ones((1, 2)))      # writes into the shared, half-full page 1
    assert cache.page_table(answer)[0] == cache.page_table(prompt)[0]
    assert cache.page_table(answer)[1] != cache.page_table(prompt)[1] and cache.free_pages == 7
    assert np.array_equal(cache.read(prompt)[0], K)             # the prompt's entries as they were
    assert np.array_equal(cache.read(answer)[0], np.vstack([K, np.ones((1, 2))]))
    cache.append(prompt, np.zeros((1, 2)), np.zeros((1, 2)))    # page 1 is the prompt's alone now: no copy
    assert cache.free_pages == 7
    cache.free(prompt)
    assert cache.free_pages == 8                                # page 0 is still the answer's
    cache.free(answer)
    assert cache.free_pages == 10


def test_a_full_cache_writes_nothing_and_says_so():
    cache = PagedKVCache(n_pages=2, page_size=2, d_k=1, d_v=1)
    seq = cache.new_sequence()
    cache.append(seq, np.ones((3, 1)), np.ones((3, 1)))
    with pytest.raises(ValueError, match="2 new entries need 1 free pages, the cache has 0"):
        cache.append(seq, np.ones((2, 1)), np.ones((2, 1)))
    assert cache.length(seq) == 3 and cache.read(seq)[0].shape == (3, 1)


@pytest.mark.parametrize(("call", "words"), [
    (lambda c, s: c.append(s, np.ones((2, 3)), np.ones((2, 2))), "K must have shape (n, d_k) with d_k = 2"),
    (lambda c, s: c.append(s, np.ones((2, 2)), np.ones((3, 2))), "K and V must have the same number of rows"),
    (lambda c, s: c.read(7), "seq = 7 is not a sequence of this cache"),
    (lambda c, s: paged_attention(np.ones((1, 2)), c, c.new_sequence()), "holds no entries yet"),
    (lambda c, s: paged_attention(np.ones((1, 2)), "cache", s), "cache must be a PagedKVCache"),
    (lambda c, s: paged_attention(np.ones((1, 2)), c, s, mask=np.ones((1, 5), bool)), "end in the sequence's S = 3"),
])
def test_bad_input_is_named(call, words):
    cache = PagedKVCache(n_pages=4, page_size=2, d_k=2, d_v=2)
    seq = cache.new_sequence()
    cache.append(seq, np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises((ValueError, TypeError)) as caught:
        call(cache, seq)
    assert words in str(caught.value)


def test_a_pool_larger_than_memory_gets_the_librarys_message(monkeypatch):
    """Past the machine's memory, check_fits refuses it; an allocation that fails below it names the pool too."""
    with pytest.raises(ValueError, match=r"n_pages = 1099511627776 and page_size = 1024 .* more than this machine"):
        PagedKVCache(n_pages=2**40, page_size=2**10, d_k=4, d_v=4)

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np, "zeros", no_memory)
    with pytest.raises(MemoryError, match=r"n_pages = 8, page_size = 4, d_k = 3, d_v = 2: the pool of K_pages"):
        PagedKVCache(n_pages=8, page_size=4, d_k=3, d_v=2)
