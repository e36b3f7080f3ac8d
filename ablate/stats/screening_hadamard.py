"""Two-level orthogonal arrays for screening: Plackett–Burman designs from Hadamard matrices.

A PB design of size N (a multiple of 4) is N rows × (N − 1) balanced, pairwise orthogonal ±1 columns (Plackett
RL, Burman JP, "The design of optimum multifactorial experiments", Biometrika 33:305–325, 1946): a normalised
Hadamard matrix without its all-ones column. :func:`pb_columns` tries, in order, Sylvester (powers of two,
``scipy.linalg.hadamard``); PB's cyclic generators for N = p + 1, p a prime ≡ 3 (mod 4): + at 0 and at the
quadratic residues mod p (Paley REAC, "On orthogonal matrices", J Math Phys 12:311–320, 1933; exactly PB's
published first row for 12, 20 and 24), its N − 1 cyclic shifts and a row of −; Paley's second construction
for N = 2(q + 1), q a prime ≡ 1 (mod 4); doubling ``[[H, H], [H, −H]]``. Sizes none reaches (52 first) take
the next constructible one (:func:`pb_size`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

#: The largest design size searched; 4 · 64 rows is far beyond any setup's pieces.
MAX_SIZE = 256


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


def _residues(p: int) -> set[int]:
    return {(i * i) % p for i in range(1, p)}


def cyclic_generator(p: int) -> list[int]:
    """PB's cyclic generator for N = p + 1 (p prime ≡ 3 mod 4): + at 0 and at the quadratic residues mod p."""
    if not (_is_prime(p) and p % 4 == 3):
        raise ValueError(f"p={p}: a cyclic generator needs a prime ≡ 3 (mod 4)")
    qr = _residues(p)
    return [1 if i == 0 or i in qr else -1 for i in range(p)]


def _cyclic(p: int) -> IntArray:
    """The PB design itself (N rows × N − 1 columns): the generator's cyclic shifts, then a row of −."""
    g = np.array(cyclic_generator(p), dtype=np.int64)
    rows = [np.roll(g, r) for r in range(p)]
    return np.vstack([*rows, -np.ones(p, dtype=np.int64)])


def _paley2(q: int) -> IntArray:
    """A Hadamard matrix of order 2(q + 1) for a prime q ≡ 1 (mod 4) (Paley 1933, construction II)."""
    qr = _residues(q)
    chi = np.array([0] + [1 if i in qr else -1 for i in range(1, q)], dtype=np.int64)
    jacobsthal = np.array([[chi[(j - i) % q] for j in range(q)] for i in range(q)], dtype=np.int64)
    conference = np.zeros((q + 1, q + 1), dtype=np.int64)
    conference[0, 1:] = 1
    conference[1:, 0] = 1
    conference[1:, 1:] = jacobsthal
    a = np.array([[1, -1], [-1, -1]], dtype=np.int64)
    b = np.array([[1, 1], [1, -1]], dtype=np.int64)
    return np.asarray(np.kron(conference, a) + np.kron(np.eye(q + 1, dtype=np.int64), b), dtype=np.int64)


def hadamard(n: int) -> IntArray | None:
    """A Hadamard matrix of order ``n`` by the constructions above, or None when none of them reaches n."""
    if n < 1 or (n > 2 and n % 4):
        return None
    if n & (n - 1) == 0:
        from scipy import linalg  # on use: `ablate run` starts without scipy

        return np.asarray(linalg.hadamard(n), dtype=np.int64)
    if _is_prime(n - 1) and (n - 1) % 4 == 3:
        return np.hstack([np.ones((n, 1), dtype=np.int64), _cyclic(n - 1)])
    q = n // 2 - 1
    if _is_prime(q) and q % 4 == 1:
        return _paley2(q)
    half = hadamard(n // 2)
    return None if half is None else np.asarray(np.block([[half, half], [half, -half]]), dtype=np.int64)


def pb_size(factors: int) -> int:
    """The size of the design :func:`pb_columns` gives ``factors`` columns: the smallest constructible multiple
    of 4 with at least factors + 1 rows."""
    if factors < 1:
        raise ValueError(f"factors={factors}: a design needs at least one column")
    n = max(4, 4 * -(-(factors + 1) // 4))
    while n <= MAX_SIZE:
        if hadamard(n) is not None:
            return n
        n += 4
    raise ValueError(f"factors={factors}: no design of at most {MAX_SIZE} rows")


def pb_columns(factors: int) -> IntArray:
    """A PB design for ``factors`` columns (size :func:`pb_size`), its first row all +: the first ``factors``
    balanced, orthogonal columns of the normalised Hadamard matrix (first column, then first row made +, which
    flips whole columns of PB's published layout and keeps every property of the design)."""
    n = pb_size(factors)
    h = hadamard(n)
    if h is None:  # pragma: no cover - pb_size only returns constructible sizes
        raise ValueError(f"no Hadamard matrix of order {n}")
    h = h * h[:, :1]
    h = h * h[:1, :]
    return np.asarray(h[:, 1 : factors + 1], dtype=np.int64)
