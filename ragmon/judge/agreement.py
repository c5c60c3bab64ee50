"""Agreement between a judge and human labels: Cohen's kappa, raw agreement, the confusion matrix.

Pure statistics over two equal-length label sequences (no I/O). Kappa corrects raw agreement for chance:
a judge that always says "pass" on a set that is mostly passes has high raw agreement and a kappa near 0.
Kappa is None when chance agreement is 1 (both raters used one and the same label throughout): agreement
beyond chance cannot be shown, and a gate must treat that as not shown.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Agreement:
    """Agreement of ``judge`` with ``human`` over ``n`` items.

    ``matrix[i][j]`` counts items the humans labelled ``labels[i]`` and the judge ``labels[j]``.
    """

    n: int
    labels: tuple[Hashable, ...]
    matrix: tuple[tuple[int, ...], ...]
    observed: float | None
    expected: float | None
    kappa: float | None


def cohen_kappa(human: Sequence[Hashable], judge: Sequence[Hashable],
                labels: Sequence[Hashable] | None = None) -> Agreement:
    """Cohen's kappa (unweighted) of two raters, with the confusion matrix and raw agreement.

    κ = (p_o − p_e) / (1 − p_e), p_o the share of items labelled alike, p_e the agreement expected by chance
    from each rater's label frequencies. ``labels`` fixes the matrix order (default: sorted labels seen).
    Raises ``ValueError`` when the sequences differ in length or a label is outside ``labels``.
    """
    if len(human) != len(judge):
        raise ValueError(f"human and judge label sequences differ in length: {len(human)} vs {len(judge)}")
    if labels is None:
        labels = sorted(set(human) | set(judge), key=repr)
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    matrix = [[0] * k for _ in range(k)]
    for h, j in zip(human, judge, strict=True):
        if h not in index or j not in index:
            raise ValueError(f"label {h if h not in index else j!r} is not one of {list(labels)!r}")
        matrix[index[h]][index[j]] += 1
    n = len(human)
    frozen = tuple(tuple(row) for row in matrix)
    if n == 0:
        return Agreement(0, tuple(labels), frozen, None, None, None)
    observed = sum(matrix[i][i] for i in range(k)) / n
    rows = [sum(matrix[i]) / n for i in range(k)]
    cols = [sum(matrix[i][j] for i in range(k)) / n for j in range(k)]
    expected = sum(r * c for r, c in zip(rows, cols, strict=True))
    kappa = None if expected >= 1.0 - 1e-12 else (observed - expected) / (1.0 - expected)
    return Agreement(n, tuple(labels), frozen, observed, expected, kappa)
