"""A paged KV cache: every sequence's keys
and values in fixed-size pages of one pool
(chapter 15).

A serving engine holds the caches of many
conversations at once, and does not know how
long each will grow. Reserving the longest
length for every sequence wastes what they
never use. A paged cache (vLLM's
PagedAttention) cuts the memory into pages of
``page_size`` entries, hands a sequence a
page only when its last one is full, and
finds a sequence's entries through its *page
table*, the list of its pages in order: entry
``s`` of a sequence is slot ``s % page_size``
of page ``table[s // page_size]``. CPython's
dict is built the same way: a small index
table that points into an array of entries.

Sequences can share pages:
:meth:`PagedKVCache.share_prefix` starts a
new sequence that holds the same entries as
another by pointing at the same pages. A page
shared by two sequences is never written in
place: the first append that would write into
it copies it first (copy on write).
tests/test_paged_cache.py checks
:func:`paged_attention` against PyTorch's
attention over the contiguous keys and
values.
"""

from __future__ import annotations

import numbers

import numpy as np

from snippets._checks import (
    as_float_array,
    as_mask,
    check_finite,
    check_fits,
    check_positive_int,
    describe,
)
from snippets.attention import (
    scaled_dot_product_attention,
)


class PagedKVCache:
    """Keys ``(d_k,)`` and values ``(d_v,)``
    of many sequences, in ``n_pages`` pages
    of ``page_size`` entries.

    The pool is two arrays,
    ``K_pages (n_pages, page_size, d_k)`` and
    ``V_pages (n_pages, page_size, d_v)``; a
    sequence is an id, with a page table (its
    pages, in order) and a length. Pages are
    handed out only as they are needed, and
    given back by :meth:`free`.

    >>> cache = PagedKVCache(
    ...     n_pages=8, page_size=4,
    ...     d_k=3, d_v=2)
    >>> seq = cache.new_sequence()
    >>> cache.append(seq, np.ones((6, 3)),
    ...              np.zeros((6, 2)))
    >>> (cache.page_table(seq),
    ...  cache.length(seq), cache.free_pages)
    ([0, 1], 6, 6)
    """

    def __init__(self, n_pages, page_size,
                 d_k, d_v):
        sizes = {"n_pages": n_pages,
                 "page_size": page_size,
                 "d_k": d_k, "d_v": d_v}
        for name, size in sizes.items():
            check_positive_int(name, size)
        K_shape = (n_pages, page_size, d_k)
        V_shape = (n_pages, page_size, d_v)
        shapes = {"K_pages": K_shape,
                  "V_pages": V_shape}
        for name, shape in shapes.items():
            check_fits(name, shape,
                       np.float64, **sizes)
        self.page_size = int(page_size)
        try:
            self.K_pages = np.zeros(K_shape)
            self.V_pages = np.zeros(V_shape)
        except MemoryError:
            error = _no_room(sizes, shapes)
            raise error from None
        n_pages = int(n_pages)
        # pop() hands out page 0 first
        pages = list(range(n_pages))
        self._free = pages[::-1]
        # how many sequences use each page
        self._users = np.zeros(n_pages,
                               np.int64)
        # sequence id -> its pages, in order
        self._tables = {}
        # sequence id -> how many entries
        self._lengths = {}
        self._next_id = 0

    @property
    def free_pages(self) -> int:
        """How many pages no sequence
        holds."""
        return len(self._free)

    def _check_seq(self, seq) -> int:
        if not _is_an_id(seq):
            raise TypeError(
                "seq must be a sequence id "
                "(an int from new_sequence)"
                f", got {describe(seq)}")
        if int(seq) not in self._tables:
            ids = sorted(self._tables)
            raise ValueError(
                f"seq = {seq!r} is not a "
                "sequence of this cache: "
                f"expected one of {ids} "
                "(new_sequence makes one)")
        return int(seq)

    def _take_page(self, needed: int) -> int:
        if not self._free:
            n_pages = len(self._users)
            raise ValueError(
                "K: the cache is full "
                f"({n_pages} pages of "
                f"{self.page_size} entries, "
                f"none free; {needed} more "
                "needed): free a sequence, "
                "or make a larger cache")
        page = self._free.pop()
        self._users[page] = 1
        return page

    def new_sequence(self) -> int:
        """Start an empty sequence; returns
        its id. It holds no page until its
        first append.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> (cache.new_sequence(),
        ...  cache.new_sequence())
        (0, 1)
        """
        seq = self._next_id
        self._next_id += 1
        self._tables[seq] = []
        self._lengths[seq] = 0
        return seq

    def append(self, seq, K, V) -> None:
        """Write the rows of ``K (n, d_k)``
        and ``V (n, d_v)`` after the entries
        of sequence ``seq``.

        A new page is taken from the pool
        whenever the last one is full; a last
        page that another sequence shares is
        copied before it is written (copy on
        write). Nothing is written if the
        pool has too few pages.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(
        ...     seq, [[1.0], [2.0], [3.0]],
        ...     [[10.0], [20.0], [30.0]])
        >>> table = cache.page_table(seq)
        >>> K, V = cache.read(seq)
        >>> table, V.ravel().tolist()
        ([0, 1], [10.0, 20.0, 30.0])
        """
        seq = self._check_seq(seq)
        d_k = self.K_pages.shape[2]
        d_v = self.V_pages.shape[2]
        K = as_float_array(K, "K")
        V = as_float_array(V, "V")
        if K.ndim != 2 or K.shape[1] != d_k:
            raise ValueError(
                "K must have shape (n, d_k) "
                f"with d_k = {d_k}, got "
                f"{describe(K)}")
        if V.ndim != 2 or V.shape[1] != d_v:
            raise ValueError(
                "V must have shape (n, d_v) "
                f"with d_v = {d_v}, got "
                f"{describe(V)}")
        if K.shape[0] != V.shape[0]:
            raise ValueError(
                "K and V must have the same "
                "number of rows n: got K "
                f"{K.shape} and V {V.shape}")
        check_finite(K, "K")
        check_finite(V, "V")
        with np.errstate(over="ignore"):
            K = K.astype(np.float64)
            V = V.astype(np.float64)
        K_pages = self.K_pages
        V_pages = self.V_pages
        users = self._users
        table = self._tables[seq]
        length = self._lengths[seq]
        n = K.shape[0]
        size = self.page_size
        slot = length % size
        shared_last = (
            bool(slot)
            and users[table[-1]] > 1)
        # the pages it will fill, less those
        # it holds, and a copy of a shared
        # last page that is to be written
        filled = -(-(length + n) // size)
        copy = shared_last and n > 0
        needed = filled - len(table) + copy
        available = len(self._free)
        if needed > available:
            raise ValueError(
                f"K: {n} new entries need "
                f"{needed} free pages, the "
                f"cache has {available} "
                f"({len(users)} pages of "
                f"{size} entries): free a "
                "sequence, or make a larger "
                "cache")
        if shared_last and n:
            # copy on write: the shared page
            # stays as the other sequences
            # see it
            page = self._take_page(needed)
            last = table[-1]
            K_pages[page] = K_pages[last]
            V_pages[page] = V_pages[last]
            users[last] -= 1
            table[-1] = page
        written = 0
        while written < n:
            if length % size == 0:
                new = self._take_page(needed)
                table.append(new)
            page = table[-1]
            slot = length % size
            count = min(size - slot,
                        n - written)
            rows = slice(written,
                         written + count)
            slots = slice(slot, slot + count)
            K_pages[page, slots] = K[rows]
            V_pages[page, slots] = V[rows]
            written += count
            length += count
        self._lengths[seq] = length

    def read(self, seq) -> tuple[np.ndarray,
                                 np.ndarray]:
        """The keys ``(S, d_k)`` and values
        ``(S, d_v)`` of sequence ``seq``, in
        order, as new contiguous arrays.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(
        ...     seq, [[1.0], [2.0], [3.0]],
        ...     [[10.0], [20.0], [30.0]])
        >>> K, V = cache.read(seq)
        >>> K.ravel().tolist()
        [1.0, 2.0, 3.0]
        """
        seq = self._check_seq(seq)
        table = self._tables[seq]
        length = self._lengths[seq]
        # (pages, page_size, d), a new array
        K = self.K_pages[table]
        V = self.V_pages[table]
        d_k, d_v = K.shape[2], V.shape[2]
        K = K.reshape(-1, d_k)[:length]
        V = V.reshape(-1, d_v)[:length]
        return K, V

    def page_table(self, seq) -> list[int]:
        """The pages of sequence ``seq``, in
        order (a copy): entry ``s`` is in
        page ``table[s // page_size]``.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.page_table(seq)
        []
        """
        seq = self._check_seq(seq)
        return list(self._tables[seq])

    def length(self, seq) -> int:
        """How many entries sequence ``seq``
        holds.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.length(seq)
        0
        """
        seq = self._check_seq(seq)
        return self._lengths[seq]

    def share_prefix(self, seq) -> int:
        """Start a new sequence holding
        sequence ``seq``'s entries, by
        sharing its pages; returns its id.

        No entry is copied. Both sequences
        read the shared pages; a full page is
        never written again, and a partly
        filled last page is copied by
        whichever sequence appends to it
        first.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> prompt = cache.new_sequence()
        >>> K = V = [[1.0], [2.0], [3.0]]
        >>> cache.append(prompt, K, V)
        >>> answer = cache.share_prefix(
        ...     prompt)
        >>> cache.page_table(answer)
        [0, 1]
        >>> cache.free_pages
        2
        """
        seq = self._check_seq(seq)
        new = self.new_sequence()
        table = self._tables[seq]
        self._tables[new] = list(table)
        length = self._lengths[seq]
        self._lengths[new] = length
        self._users[table] += 1
        return new

    def free(self, seq) -> None:
        """Forget sequence ``seq``; the pages
        no other sequence holds go back to
        the pool.

        >>> cache = PagedKVCache(
        ...     n_pages=4, page_size=2,
        ...     d_k=1, d_v=1)
        >>> seq = cache.new_sequence()
        >>> cache.append(seq,
        ...              np.ones((3, 1)),
        ...              np.ones((3, 1)))
        >>> cache.free(seq)
        >>> cache.free_pages
        4
        """
        seq = self._check_seq(seq)
        table = self._tables.pop(seq)
        for page in table[::-1]:
            self._users[page] -= 1
            if self._users[page] == 0:
                self._free.append(page)
        del self._lengths[seq]


def _is_an_id(seq):
    """An int, and not a bool: True is no
    sequence id, though it equals 1."""
    if isinstance(seq, (bool, np.bool_)):
        return False
    return isinstance(seq, numbers.Integral)


def _no_room(sizes, shapes):
    """The MemoryError for a pool larger than
    this machine could give."""
    given = ", ".join(
        f"{name} = {size!r}"
        for name, size in sizes.items())
    wanted = sum(
        8 * int(np.prod(shape, dtype=object))
        for shape in shapes.values())
    K_shape, V_shape = shapes.values()
    return MemoryError(
        f"{given}: the pool of K_pages "
        f"{K_shape} and V_pages {V_shape} "
        f"(float64) needs {wanted:.3g} "
        "bytes, more than this machine "
        "could give: make a smaller cache")


def paged_attention(Q, cache, seq, mask=None,
                    scale=None):
    """Attention of ``Q (..., T, d_k)`` over
    the keys and values of sequence ``seq``,
    read through its page table.

    The sequence's pages are gathered from
    the pool by their table, and the unused
    slots of the last page are masked out:
    the same output and weights as
    :func:`snippets.attention.scaled_dot_product_attention`
    over the contiguous keys ``(S, d_k)`` and
    values ``(S, d_v)``. ``mask`` (True where
    a query may look) and ``scale`` as there,
    over the sequence's ``S`` entries.
    Returns ``(output (..., T, d_v),
    weights (..., T, S))``.

    >>> cache = PagedKVCache(
    ...     n_pages=4, page_size=2,
    ...     d_k=2, d_v=1)
    >>> seq = cache.new_sequence()
    >>> cache.append(seq, [[1.0, 0.0],
    ...                    [0.0, 1.0],
    ...                    [1.0, 1.0]],
    ...              [[1.0], [2.0], [3.0]])
    >>> output, weights = paged_attention(
    ...     np.array([[4.0, 1.0]]), cache,
    ...     seq)
    >>> weights.round(3).tolist()
    [[0.318, 0.038, 0.644]]
    """
    if not isinstance(cache, PagedKVCache):
        raise TypeError(
            "cache must be a PagedKVCache, "
            f"got {describe(cache)}")
    seq = cache._check_seq(seq)
    table = cache._tables[seq]
    S = cache._lengths[seq]
    if S == 0:
        raise ValueError(
            f"seq = {seq} holds no entries "
            "yet: attention needs at least "
            "one key")
    Q = as_float_array(Q, "Q")
    if Q.ndim < 2:
        raise ValueError(
            "Q must have shape (..., T, "
            f"d_k), got {describe(Q)}")
    # (pages, page_size, d)
    K_pages = cache.K_pages[table]
    V_pages = cache.V_pages[table]
    K = K_pages.reshape(-1, K_pages.shape[2])
    V = V_pages.reshape(-1, V_pages.shape[2])
    slots = len(table) * cache.page_size
    # the last page's unused slots: False
    written = np.arange(slots) < S
    if mask is not None:
        allowed = as_mask(mask)
        if (np.ndim(mask) < 1
                or allowed.shape[-1] != S):
            got = describe(np.asarray(mask))
            raise ValueError(
                "mask must be boolean and "
                "end in the sequence's "
                f"S = {S} entries, "
                f"got {got}")
        shape = (*allowed.shape[:-1], slots)
        full = np.zeros(shape, dtype=bool)
        full[..., :S] = allowed
        written = full
    result = scaled_dot_product_attention(
        Q, K, V, mask=written, scale=scale)
    output, weights = result
    return output, weights[..., :S]
