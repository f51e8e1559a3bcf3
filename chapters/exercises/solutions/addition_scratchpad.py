"""Solution: a scratchpad for the addition transformer, and the sums that are hard for it
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

from compare import addition


def encode_scratchpad(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums a+b of numbers below 10**n -> (x, y) int32[N, 4n+3]: `a+b=` zero padded, then
    for each of the n+1 answer columns (least significant first) the carry into it and its
    digit; x is the sequence without its last token, y the next-token targets, IGNORE except
    at the 2(n+1) answer tokens."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    c = addition.carries(a, b, n)                        # [N, n+1], carry into each column
    s = addition.digits(a + b, n + 1)[:, ::-1]           # [N, n+1], least significant first
    answer = np.stack([c, s], axis=-1).reshape(len(a), -1)
    prompt = np.concatenate([addition.digits(a, n), np.full((len(a), 1), addition.PLUS),
                             addition.digits(b, n), np.full((len(a), 1), addition.EQUALS)], 1)
    seq = np.concatenate([prompt, answer], axis=1).astype(np.int32)
    y = seq[:, 1:].copy()
    y[:, :prompt.shape[1] - 1] = addition.IGNORE
    return seq[:, :-1], y


def read_answer(answer: np.ndarray, n: int) -> np.ndarray:
    """int32[N, 2(n+1)] answer tokens (carry, digit pairs) -> int64[N], the sums they spell."""
    digits = np.asarray(answer, np.int64).reshape(len(answer), n + 1, 2)[:, :, 1]
    return (digits * 10 ** np.arange(n + 1)).sum(axis=1)


def longest_carry_chain(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """int[N]: the longest run of consecutive columns that each produce a carry (0 when no
    column carries)."""
    out_carry = addition.carries(a, b, n)[:, 1:]         # carry out of columns 0..n-1
    best = run = np.zeros(len(out_carry), np.int64)
    for j in range(n):
        run = np.where(out_carry[:, j] == 1, run + 1, 0)
        best = np.maximum(best, run)
    return best
