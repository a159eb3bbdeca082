"""A paged KV cache: every sequence's keys and values in fixed-size pages of one pool (chapter 15).

A serving engine holds the caches of many conversations at once, and does
not know how long each will grow. Reserving the longest length for every
sequence wastes what they never use. A paged cache (vLLM's PagedAttention)
cuts the memory into pages of ``page_size`` entries, hands a sequence a page
only when its last one is full, and finds a sequence's entries through its
*page table*, the list of its pages in order: entry ``s`` of a sequence is
slot ``s % page_size`` of page ``table[s // page_size]``. CPython's dict is
built the same way: a small index table that points into an array of
entries.

Sequences can share pages: :meth:`PagedKVCache.share_prefix` starts a new
sequence that holds the same entries as another by pointing at the same
pages. A page shared by two sequences is never written in place: the first
append that would write into it copies it first (copy on write).
tests/test_paged_cache.py checks :func:`paged_attention` against PyTorch's
attention over the contiguous keys and values.
"""

from __future__ import annotations

import numbers

import numpy as np

from snippets._checks import as_float_array, as_mask, check_finite, check_fits, check_positive_int, describe
from snippets.attention import scaled_dot_product_attention


class PagedKVCache:
    """Keys ``(d_k,)`` and values ``(d_v,)`` of many sequences, in ``n_pages`` pages of ``page_size`` entries.

    The pool is two arrays, ``K_pages (n_pages, page_size, d_k)`` and
    ``V_pages (n_pages, page_size, d_v)``; a sequence is an id, with a page
    table (its pages, in order) and a length. Pages are handed out only as
    they are needed, and given back by :meth:`free`.

    >>> cache = PagedKVCache(n_pages=8, page_size=4, d_k=3, d_v=2)
    >>> seq = cache.new_sequence()
    >>> cache.append(seq, np.ones((6, 3)), np.zeros((6, 2)))
    >>> cache.page_table(seq), cache.length(seq), cache.free_pages
    ([0, 1], 6, 6)
    """

    def __init__(self, n_pages, page_size, d_k, d_v):
        for name, size in (("n_pages", n_pages), ("page_size", page_size), ("d_k", d_k), ("d_v", d_v)):
            check_positive_int(name, size)
        sizes = {"n_pages": n_pages, "page_size": page_size, "d_k": d_k, "d_v": d_v}
        check_fits("K_pages", (n_pages, page_size, d_k), np.float64, **sizes)
        check_fits("V_pages", (n_pages, page_size, d_v), np.float64, **sizes)
        self.page_size = int(page_size)
        shapes = {"K_pages": (n_pages, page_size, d_k), "V_pages": (n_pages, page_size, d_v)}
        try:
            self.K_pages = np.zeros(shapes["K_pages"])
            self.V_pages = np.zeros(shapes["V_pages"])
        except MemoryError:
            given = ", ".join(f"{name} = {size!r}" for name, size in sizes.items())
            wanted = sum(8 * int(np.prod(shape, dtype=object)) for shape in shapes.values())
            raise MemoryError(f"{given}: the pool of K_pages {shapes['K_pages']} and V_pages {shapes['V_pages']} "
                              f"(float64) needs {wanted:.3g} bytes, more than this machine could give: "
                              "make a smaller cache") from None
        self._free = list(range(int(n_pages)))[::-1]     # pop() hands out page 0 first
        self._users = np.zeros(int(n_pages), dtype=np.int64)  # how many sequences point at each page
        self._tables: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}
        self._next_id = 0

    @property
    def free_pages(self) -> int:
        """How many pages no sequence holds."""
        return len(self._free)

    def _check_seq(self, seq) -> int:
        if isinstance(seq, (bool, np.bool_)) or not isinstance(seq, numbers.Integral):
            raise TypeError(f"seq must be a sequence id (an int from new_sequence), got {describe(seq)}")
        if int(seq) not in self._tables:
            raise ValueError(f"seq = {seq!r} is not a sequence of this cache: expected one of "
                             f"{sorted(self._tables)} (new_sequence makes one)")
        return int(seq)

    def _take_page(self, needed: int, name: str) -> int:
        if not self._free:
            raise ValueError(f"{name}: the cache is full ({len(self._users)} pages of {self.page_size} entries, "
                             f"none free; {needed} more needed): free a sequence, or make a larger cache")
        page = self._free.pop()
        self._users[page] = 1
        return page

    def new_sequence(self) -> int:
        """Start an empty sequence; returns its id. It holds no page until its first append.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> cache.new_sequence(), cache.new_sequence()
        (0, 1)
        """
        seq = self._next_id
        self._next_id += 1
        self._tables[seq], self._lengths[seq] = [], 0
        return seq

    def append(self, seq, K, V) -> None:
        """Write the rows of ``K (n, d_k)`` and ``V (n, d_v)`` after the entries of sequence ``seq``.

        A new page is taken from the pool whenever the last one is full; a
        last page that another sequence shares is copied before it is written
        (copy on write). Nothing is written if the pool has too few pages.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(seq, [[1.0], [2.0], [3.0]], [[10.0], [20.0], [30.0]])
        >>> cache.page_table(seq), cache.read(seq)[1].ravel().tolist()
        ([0, 1], [10.0, 20.0, 30.0])
        """
        seq = self._check_seq(seq)
        d_k, d_v = self.K_pages.shape[2], self.V_pages.shape[2]
        K, V = as_float_array(K, "K"), as_float_array(V, "V")
        if K.ndim != 2 or K.shape[1] != d_k:
            raise ValueError(f"K must have shape (n, d_k) with d_k = {d_k}, got {describe(K)}")
        if V.ndim != 2 or V.shape[1] != d_v:
            raise ValueError(f"V must have shape (n, d_v) with d_v = {d_v}, got {describe(V)}")
        if K.shape[0] != V.shape[0]:
            raise ValueError(f"K and V must have the same number of rows n: got K {K.shape} and V {V.shape}")
        check_finite(K, "K")
        check_finite(V, "V")
        with np.errstate(over="ignore"):
            cast = K.astype(np.float64), V.astype(np.float64)
        table, length, n = self._tables[seq], self._lengths[seq], K.shape[0]
        size = self.page_size
        slot = length % size
        shared_last = bool(slot) and self._users[table[-1]] > 1
        needed = -(-(length + n) // size) - len(table) + (shared_last and n > 0)
        if needed > len(self._free):
            raise ValueError(f"K: {n} new entries need {needed} free pages, the cache has {len(self._free)} "
                             f"({len(self._users)} pages of {size} entries): free a sequence, or make a larger cache")
        if shared_last and n:   # copy on write: the shared page stays as the other sequences see it
            page = self._take_page(needed, "K")
            self.K_pages[page], self.V_pages[page] = self.K_pages[table[-1]], self.V_pages[table[-1]]
            self._users[table[-1]] -= 1
            table[-1] = page
        written = 0
        while written < n:
            if length % size == 0:
                table.append(self._take_page(needed, "K"))
            page, slot = table[-1], length % size
            count = min(size - slot, n - written)
            self.K_pages[page, slot : slot + count] = cast[0][written : written + count]
            self.V_pages[page, slot : slot + count] = cast[1][written : written + count]
            written += count
            length += count
        self._lengths[seq] = length

    def read(self, seq) -> tuple[np.ndarray, np.ndarray]:
        """The keys ``(S, d_k)`` and values ``(S, d_v)`` of sequence ``seq``, in order, as new contiguous arrays.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(seq, [[1.0], [2.0], [3.0]], [[10.0], [20.0], [30.0]])
        >>> cache.read(seq)[0].ravel().tolist()
        [1.0, 2.0, 3.0]
        """
        seq = self._check_seq(seq)
        table, length = self._tables[seq], self._lengths[seq]
        K = self.K_pages[table].reshape(-1, self.K_pages.shape[2])[:length]
        V = self.V_pages[table].reshape(-1, self.V_pages.shape[2])[:length]
        return K, V

    def page_table(self, seq) -> list[int]:
        """The pages of sequence ``seq``, in order (a copy): entry ``s`` is in page ``table[s // page_size]``.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> cache.page_table(cache.new_sequence())
        []
        """
        return list(self._tables[self._check_seq(seq)])

    def length(self, seq) -> int:
        """How many entries sequence ``seq`` holds.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> cache.length(cache.new_sequence())
        0
        """
        return self._lengths[self._check_seq(seq)]

    def share_prefix(self, seq) -> int:
        """Start a new sequence holding sequence ``seq``'s entries, by sharing its pages; returns its id.

        No entry is copied. Both sequences read the shared pages; a full
        page is never written again, and a partly filled last page is copied
        by whichever sequence appends to it first.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> prompt = cache.new_sequence()
        >>> cache.append(prompt, [[1.0], [2.0], [3.0]], [[1.0], [2.0], [3.0]])
        >>> answer = cache.share_prefix(prompt)
        >>> cache.page_table(answer), cache.free_pages
        ([0, 1], 2)
        """
        seq = self._check_seq(seq)
        new = self.new_sequence()
        self._tables[new], self._lengths[new] = list(self._tables[seq]), self._lengths[seq]
        self._users[self._tables[seq]] += 1
        return new

    def free(self, seq) -> None:
        """Forget sequence ``seq``; the pages no other sequence holds go back to the pool.

        >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(seq, np.ones((3, 1)), np.ones((3, 1)))
        >>> cache.free(seq)
        >>> cache.free_pages
        4
        """
        seq = self._check_seq(seq)
        for page in self._tables.pop(seq)[::-1]:
            self._users[page] -= 1
            if self._users[page] == 0:
                self._free.append(page)
        del self._lengths[seq]


def paged_attention(Q, cache, seq, mask=None, scale=None):
    """Attention of ``Q (..., T, d_k)`` over the keys and values of sequence ``seq``, read through its page table.

    The sequence's pages are gathered from the pool by their table, and the
    unused slots of the last page are masked out: the same output and weights
    as :func:`snippets.attention.scaled_dot_product_attention` over the
    contiguous keys ``(S, d_k)`` and values ``(S, d_v)``. ``mask`` (True where
    a query may look) and ``scale`` as there, over the sequence's ``S`` entries.
    Returns ``(output (..., T, d_v), weights (..., T, S))``.

    >>> cache = PagedKVCache(n_pages=4, page_size=2, d_k=2, d_v=1)
    >>> seq = cache.new_sequence()
    >>> cache.append(seq, [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[1.0], [2.0], [3.0]])
    >>> output, weights = paged_attention(np.array([[4.0, 1.0]]), cache, seq)
    >>> weights.round(3).tolist()
    [[0.318, 0.038, 0.644]]
    """
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"cache must be a PagedKVCache, got {describe(cache)}")
    seq = cache._check_seq(seq)
    table, length = cache._tables[seq], cache._lengths[seq]
    if length == 0:
        raise ValueError(f"seq = {seq} holds no entries yet: attention needs at least one key")
    Q = as_float_array(Q, "Q")
    if Q.ndim < 2:
        raise ValueError(f"Q must have shape (..., T, d_k), got {describe(Q)}")
    K_pages, V_pages = cache.K_pages[table], cache.V_pages[table]       # (pages, page_size, d)
    K = K_pages.reshape(-1, K_pages.shape[2])
    V = V_pages.reshape(-1, V_pages.shape[2])
    slots = len(table) * cache.page_size
    written = np.arange(slots) < length                                  # the last page's unused slots: False
    if mask is not None:
        mask_array = as_mask(mask)
        if np.ndim(mask) < 1 or mask_array.shape[-1] != length:
            raise ValueError(f"mask must be boolean and end in the sequence's S = {length} entries, "
                             f"got {describe(np.asarray(mask))}")
        full = np.zeros((*mask_array.shape[:-1], slots), dtype=bool)
        full[..., :length] = mask_array
        written = full
    output, weights = scaled_dot_product_attention(Q, K, V, mask=written, scale=scale)
    return output, weights[..., :length]
