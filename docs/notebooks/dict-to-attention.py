# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From a dict to equation (1)
#
# A recap of chapters 1 to 3 in small steps. We start from a plain Python
# dictionary lookup, `KVdict[q]`, and change it one step at a time until it
# is equation (1) of *Attention Is All You Need* (Vaswani et al., 2017), the
# paper that introduced the transformer. The equation says that
# Attention$(Q, K, V)$ is
#
# $$\operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# Every cell prints what it shows, and the last cell checks all of it. The
# notebook needs only Python and NumPy: download it with the button at the top
# of the page and run it anywhere.

# %%
import numpy as np

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## Step 0: the dictionary
#
# Five keys, each with a value; both are words. The query is one of the keys.

# %%
KVdict = {"rain": "umbrella", "sun": "hat", "snow": "boots",
          "wind": "kite", "night": "lamp"}
q = "snow"
print(f"KVdict[{q!r}] = {KVdict[q]!r}")

# %% [markdown]
# ## Step 1: every word as a one-hot vector
#
# The ten words (five keys, five values) get the ten rows of a $10 \times 10$
# identity matrix, stored as tuples so that they can be dictionary keys
# themselves. One map goes from a word to its vector, the other back.

# %%
words = list(KVdict) + list(KVdict.values())
token_to_vector = {word: tuple(int(x) for x in row)
                   for word, row in zip(words, np.eye(len(words)))}
vector_to_token = {vector: word for word, vector in token_to_vector.items()}

snow, boots = token_to_vector["snow"], token_to_vector["boots"]
print(f"snow  -> {snow}\nboots -> {boots}\n{boots} -> {vector_to_token[boots]}")

# %% [markdown]
# ## Step 2: the same dict, keyed by one-hot vectors
#
# Replace every key by its vector. Looking up the query's vector gives the same
# answer.

# %%
vector_dict = {token_to_vector[key]: value for key, value in KVdict.items()}
print(vector_dict[token_to_vector[q]])

# %% [markdown]
# ## Step 3: K and V as matrices
#
# Stack the keys' vectors as the rows of $K$ and the values' vectors, in the
# same order, as the rows of $V$. Row $s$ of each is one pair of the
# dictionary.

# %%
K = np.array([token_to_vector[key] for key in KVdict])
V = np.array([token_to_vector[value] for value in KVdict.values()])
print(f"K =\n{K}\nV =\n{V}")

# %% [markdown]
# ## Step 4: the largest dot product finds the key
#
# A one-hot query has dot product 1 with its own key and 0 with every other
# key, so the key with the **largest** dot product is the one we want: no
# hashing, only arithmetic.

# %%
q_vec = np.array(token_to_vector[q])
dots = K @ q_vec
best_value = vector_to_token[tuple(V[np.argmax(dots)])]
print(f"dot products with the keys: {dots}\nvalue of the best key: {best_value}")

# %% [markdown]
# ## Step 5: a weighted sum instead of argmax
#
# Weight every value by the dot product of the query with its key and add
# them up: $\sum_s (q \cdot k_s)\, v_s = q K^\top V$. Only the matching key
# has a nonzero weight, so the sum is that key's value.

# %%
weighted = q_vec @ K.T @ V
print(f"{weighted} -> {vector_to_token[tuple(weighted)]}")

# %% [markdown]
# ## Step 6: every query at once
#
# Stack a query for every key as the rows of $Q$. Row $t$ of $Q K^\top V$
# answers query $t$.

# %%
Q = np.array([token_to_vector[key] for key in KVdict])
lines = [f"{vector_to_token[tuple(query)]} -> {vector_to_token[tuple(row)]}"
         for query, row in zip(Q, Q @ K.T @ V)]
print(f"Q =\n{Q}\n" + "\n".join(lines))

# %% [markdown]
# ## Step 7: divide by the square root of d_k
#
# Equation (1) divides the scores by $\sqrt{d_k}$, the square root of the
# length of a key (here 10). Chapter 3 showed why: the scores of keys made of
# many random numbers spread wider as $d_k$ grows. Without a softmax, dividing
# only shrinks the answer: it still points at the right value, but it is no
# longer one-hot.

# %%
d_k = K.shape[1]
scaled = Q @ K.T / np.sqrt(d_k) @ V
print(f"d_k = {d_k}\nanswer to 'snow': {scaled[2]}")

# %% [markdown]
# ## Step 8: the softmax
#
# Equation (1) turns each row of scores into weights that are positive and
# sum to 1 with the softmax of chapter 3. At the scale $1/\sqrt{d_k}$ of
# equation (1), the one-hot scores 1 and 0 give soft weights: the match gets
# the most, but every key gets some.

# %%
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


weights = softmax(Q @ K.T / np.sqrt(d_k))
print(f"weights of 'snow': {weights[2]}\n"
      f"sum of the weights: {round(weights[2].sum(), 12)}")

# %% [markdown]
# ## Step 9: a temperature brings the exact lookup back
#
# Chapter 3 calls the divisor of the scores the *temperature*, $\tau$: the
# weights are $\operatorname{softmax}(Q K^\top / \tau)$, and equation (1) is
# the case $\tau = \sqrt{d_k}$. The lower the temperature, the more of the
# weight goes to the largest score.

# %%
lines = []
for tau in (np.sqrt(d_k), 1.0, 0.1, 0.001):
    w = softmax(Q @ K.T / tau)[2]
    lines.append(f"tau = {tau:5.3f}: weight on 'snow' {w[2]:.6f},"
                 f" largest other {np.delete(w, 2).max():.1e}")
print("\n".join(lines))

# %% [markdown]
# At $\tau = 0.001$ every other weight is $e^{-1000}$, which is too small for a
# float and becomes exactly 0. The soft lookup is then the exact one, for every
# query:

# %%
tau = 0.001
attention = softmax(Q @ K.T / tau) @ V
recovered = {vector_to_token[tuple(query)]: vector_to_token[tuple(row)]
             for query, row in zip(Q, attention)}
lines = [f"{key:>5} -> {value}" for key, value in recovered.items()]
print(f"{attention}\n" + "\n".join(lines))

# %% [markdown]
# That is equation (1), computed with one-hot keys and values and a low
# temperature: it returned exactly what `KVdict[q]` returns, for every query.
# Chapter 4 lets a program *learn* the queries, which only a soft lookup
# allows.
#
# ## Checks
#
# Every claim printed above, checked in one place.

# %%
match = np.exp(1 / np.sqrt(d_k))
answers = Q @ K.T @ V
one_hot_weights = softmax(Q @ K.T / tau)
checks = {
    "the two maps are inverse":
        all(vector_to_token[token_to_vector[w]] == w for w in words),
    "vectors are one-hot":
        all(sorted(v) == [0] * 9 + [1] for v in token_to_vector.values()),
    "vector dict = dict": vector_dict[token_to_vector[q]] == KVdict[q],
    "K, V shapes (S, d_k), (S, d_v)": K.shape == V.shape == (5, 10),
    "dots: 1 on the match only": dots.tolist() == [0, 0, 1, 0, 0],
    "argmax finds the value":
        vector_to_token[tuple(V[np.argmax(dots)])] == "boots",
    "weighted sum = dict": vector_to_token[tuple(weighted)] == KVdict[q],
    "Q K^T V answers every query":
        [vector_to_token[tuple(r)] for r in answers] == list(KVdict.values()),
    "dividing by sqrt(d_k) shrinks": np.allclose(scaled, answers / np.sqrt(10)),
    "weights at sqrt(d_k)": np.isclose(weights[2, 2], match / (match + 4)),
    "weights sum to 1": np.allclose(weights.sum(axis=-1), 1),
    "tau = 0.001: exact one-hot weights":
        np.array_equal(one_hot_weights, Q @ K.T),
    "equation (1) = the dict": recovered == KVdict,
}
print("\n".join(f"{'ok    ' if ok else 'FAILED'} {name}" for name, ok in checks.items()))
assert all(checks.values())
