"""What every report figure shares: a headless matplotlib, and SVG text (inlined in the HTML, so
it opens with no network) with an optional PNG beside the Markdown report. Studies draw their
own figures (studies/<study>/plots.py) and finish them here."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

from orchestrator.engine.files import write_file  # noqa: E402

__all__ = ["finish", "plt"]


def finish(fig, png: Path | None) -> str:
    if png is not None:  # by the one writer: a link at the name is replaced, never followed
        write_file(png, lambda f: fig.savefig(f, format="png", dpi=110, bbox_inches="tight"))
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]  # drop the XML prolog: it is inlined in HTML
