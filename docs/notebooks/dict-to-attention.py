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
# This notebook starts from a plain Python dictionary lookup, `KVdict[q]`, and
# changes it one small step at a time until it is equation (1) of
# *Attention Is All You Need*:
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# Every cell checks that the answer is still the dictionary's answer. It needs
# only Python and NumPy: download it with the button at the top of the page and
# run it anywhere.

# %%
import numpy as np

# %% [markdown]
# ## Step 0: the dictionary
#
# Five keys, each with a value; both are words. The query is one of the keys.

# %%
KVdict = {"rain": "umbrella", "sun": "hat", "snow": "boots", "wind": "kite", "night": "lamp"}
q = "snow"
print(f"KVdict[{q!r}] = {KVdict[q]!r}")
assert KVdict[q] == "boots"

# %% [markdown]
# ## Step 1: every word as a one-hot vector
#
# The ten words (five keys, five values) get the ten rows of a $10 \times 10$
# identity matrix, as tuples so that they can be dictionary keys themselves.
# `token_to_vector` and `vector_to_token` are inverse maps.

# %%
words = list(KVdict) + list(KVdict.values())
token_to_vector = {word: tuple(int(x) for x in row) for word, row in zip(words, np.eye(len(words)))}
vector_to_token = {vector: word for word, vector in token_to_vector.items()}

print(token_to_vector["snow"])
assert all(vector_to_token[token_to_vector[word]] == word for word in words)

# %% [markdown]
# ## Step 2: the same dict, keyed by one-hot vectors
#
# Replace every key by its vector. Looking up the query's vector gives the same
# answer.

# %%
q_vec = token_to_vector[q]
vector_dict = {token_to_vector[key]: value for key, value in KVdict.items()}
print(vector_dict[q_vec])
assert vector_dict[q_vec] == KVdict[q]

# %% [markdown]
# ## Step 3: find the key by the largest dot product
#
# A one-hot query has dot product 1 with its own key and 0 with every other
# key, so the key with the **largest** dot product is the one we want: no
# hashing, only arithmetic.

# %%
key_vectors = [token_to_vector[key] for key in KVdict]
dots = np.array(key_vectors) @ np.array(q_vec)
best = key_vectors[int(np.argmax(dots))]
print("dot products with the keys:", dots)
print("value of the best key:", vector_dict[best])
assert vector_dict[best] == KVdict[q]

# %% [markdown]
# ## Step 4: values as vectors too
#
# Store the values' one-hot vectors as well, and turn the answer back into a
# word only at the end.

# %%
K = np.array([token_to_vector[key] for key in KVdict])
V = np.array([token_to_vector[value] for value in KVdict.values()])
answer_vec = V[int(np.argmax(K @ np.array(q_vec)))]
print(vector_to_token[tuple(answer_vec)])
assert vector_to_token[tuple(answer_vec)] == KVdict[q]

# %% [markdown]
# ## Step 5: a weighted sum instead of argmax
#
# Weight every value by the dot product of the query with its key and add
# them up: $\sum_i (q \cdot k_i)\, v_i = q K^\top V$. Only the matching key
# has a nonzero weight, so the sum is that key's value. No `argmax` needed.

# %%
q_row = np.array(q_vec)
weighted = q_row @ K.T @ V
print(weighted)
assert vector_to_token[tuple(weighted)] == KVdict[q]

# %% [markdown]
# ## Step 6: divide by the square root of d_k
#
# Equation (1) divides the scores by $\sqrt{d_k}$. In a transformer $d_k$ is
# the length of the key vectors (here it would be 10), and chapter 3 shows why
# dividing by its square root keeps the softmax usable. In this notebook we use
# the divisor as a dial instead, to see what it does to the lookup. Without a
# softmax, dividing changes the size of the answer, so the only setting that
# keeps our one-hot answers exact is $d_k = 1$: it divides by 1.

# %%
d_k = 1.0
scaled = (q_row @ K.T) / np.sqrt(d_k) @ V
assert vector_to_token[tuple(scaled)] == KVdict[q]
print(vector_to_token[tuple(scaled)])

# %% [markdown]
# ## Step 7: every query at once
#
# Stack every key's vector as a query: row $t$ of $Q K^\top V / \sqrt{d_k}$
# answers query $t$. Decoding each row gives back the whole dictionary.

# %%
Q = np.array([token_to_vector[key] for key in KVdict])
answers = (Q @ K.T) / np.sqrt(d_k) @ V
recovered = {vector_to_token[tuple(query)]: vector_to_token[tuple(row)] for query, row in zip(Q, answers)}
print(recovered)
assert recovered == KVdict

# %% [markdown]
# ## Step 8: the softmax, and a tiny d_k
#
# Equation (1) turns each row of scores into weights that are positive and
# sum to 1 with the softmax, $\operatorname{softmax}(x)_i = e^{x_i} / \sum_j e^{x_j}$.
# With scores of 1 and 0 the weights would be soft: about 0.40 on the match and
# 0.15 on each other key. Now the dial matters: dividing by $\sqrt{d_k}$ with a
# **tiny** $d_k$ makes the scores large, and the softmax then puts nearly all
# the weight on the largest score: the exact lookup again. (Chapter 3 calls
# this dial the *temperature* and keeps $d_k$ for the length of the keys.)
#
# (Subtracting the row maximum before `exp` changes nothing mathematically and
# keeps `exp` from overflowing on large scores.)

# %%
def softmax(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


soft_weights = softmax(Q @ K.T / np.sqrt(1.0))
print("weights with d_k = 1:", np.round(soft_weights[0], 2))
assert np.isclose(soft_weights[0].max(), np.e / (np.e + 4))
assert round(soft_weights[0].max(), 2) == 0.40 and round(soft_weights[0].min(), 2) == 0.15

tiny_d_k = 0.001
attention = softmax(Q @ K.T / np.sqrt(tiny_d_k)) @ V
print("largest distance from an exact one-hot answer:", np.abs(attention - Q @ K.T @ V).max())
assert np.abs(attention - Q @ K.T @ V).max() < 1e-12

# %% [markdown]
# The answers are one-hot vectors up to a rounding error below $10^{-12}$;
# rounding them gives back every value of the dictionary:

# %%
recovered = {vector_to_token[tuple(query)]: vector_to_token[tuple(np.round(row).astype(int))]
             for query, row in zip(Q, attention)}
for key, value in recovered.items():
    print(f"{key:>5} -> {value}")
assert recovered == KVdict

# %% [markdown]
# That is equation (1), computed with one-hot keys and values and a tiny $d_k$:
# it returned exactly what `KVdict[q]` returns, for every query. The next
# chapters let the keys and queries be any vectors, so that a query can match
# several keys a little instead of one key entirely.
