"""Exercise: sampling from a language model with temperature and top-k (chapter 19).

Greedy decoding (argmax at every step) repeats itself; sampling draws the next token from the
model's distribution instead, reshaped by two knobs: a **temperature** T divides the logits
(T < 1 sharpens the distribution, T > 1 flattens it), and **top-k** keeps only the k largest
logits of each row (the others get probability 0). Write `sample` for a module `J` (`jax` or
`minijax`) with an explicit PRNG key, so that the same key gives the same tokens in both
modules. The tests check top_k=1 against the argmax, that every token is among the top k,
minijax against JAX for the same keys, and the frequencies against the renormalized softmax.
"""

from __future__ import annotations


def sample(J, key, logits, temperature: float = 1.0, top_k: int | None = None):
    """logits f32[B,V] -> int32[B]: one token per row, drawn with `J.random.categorical`
    from softmax(logits / temperature) restricted to the `top_k` largest logits (all of
    them when top_k is None). Hint: `J.lax.top_k(logits, k)[0][..., -1:]` is each row's k-th
    largest logit."""
    raise NotImplementedError("sample: restrict to the top k, divide by the temperature, draw")
