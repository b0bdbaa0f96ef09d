"""Which significant results the tables and the heatmap mark as evidence of a bias.

The tests are two-sided, so a q below 0.05 can belong to a shift against the prediction: that is
no evidence of the bias, and every place that marks significance says so alike."""

from __future__ import annotations

ALPHA = 0.05


def called(q: float | None, effect: float | None) -> str | None:
    """'predicted' or 'opposite' for a significant effect by its sign, None otherwise."""
    if q is None or effect is None or not q < ALPHA or effect == 0:
        return None
    return "predicted" if effect > 0 else "opposite"


def star(q: float | None, effect: float | None) -> str:
    """The table's marker after a q: ' *' in the predicted direction, ' (opposite)' against it."""
    return {"predicted": " *", "opposite": " (opposite)", None: ""}[called(q, effect)]
