"""Exercise: a scratchpad for the addition transformer, and the sums that are hard for it
(chapter 26).

`compare/addition.py: encode` writes a sum as `047+385=2340`: the answer reversed, so that
each answer digit needs only its own column and the carry from the column before. The carry
itself is never written: the model has to work it out inside. A **scratchpad** writes it: for
each column j, least significant first, the carry into the column and then the sum's digit,
`047+385=02131400` reads (carry 0, digit 2), (carry 1, digit 3), (carry 1, digit 4),
(carry 0, digit 0). Write
`encode_scratchpad` with the same contract as `addition.encode` (tokens and targets, IGNORE on
the prompt), `read_answer` that turns a row of answer tokens back into the integer, and
`longest_carry_chain`, the longest run of consecutive columns that each pass a carry on: the
sums whose carry travels far are the ones a model gets wrong first.
"""

from __future__ import annotations

import numpy as np

from compare import addition  # noqa: F401


def encode_scratchpad(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums a+b of numbers below 10**n -> (x, y) int32[N, 4n+3]: `a+b=` zero padded, then
    for each of the n+1 answer columns (least significant first) the carry into it and its
    digit; x is the sequence without its last token, y the next-token targets, IGNORE except
    at the 2(n+1) answer tokens."""
    raise NotImplementedError("encode_scratchpad")


def read_answer(answer: np.ndarray, n: int) -> np.ndarray:
    """int32[N, 2(n+1)] answer tokens (carry, digit pairs) -> int64[N], the sums they spell."""
    raise NotImplementedError("read_answer")


def longest_carry_chain(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """int[N]: the longest run of consecutive columns that each produce a carry (0 when no
    column carries)."""
    raise NotImplementedError("longest_carry_chain")
