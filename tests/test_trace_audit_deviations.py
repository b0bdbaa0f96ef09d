"""The trace audit's report and README state where it departs from seed 003 (issue 29, item 9),
and that the shipped figures come from a simulated judge drawing from the golden labels."""

from __future__ import annotations

import re

import pytest

from orchestrator.studies.trace_audit.deviations import DEVIATIONS
from tests.conftest import ROOT

README = ROOT / "orchestrator" / "studies" / "trace_audit" / "README.md"
REQUIRED = {
    "one-author labels": r"labels are one author's",
    "severity schema replaced": r"low / medium / high severity",
    "evidence in the context": r"evidence the model was given is listed under the task context",
    "escalation wrapper API": r"no audit\\?_bias\(trace, context, evidence\).*EscalationRequired",
    "context none": r"--context none` audits a run's trace with no task context",
}


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", REQUIRED)
def test_each_required_deviation_is_in_deviations_and_the_readme(name):
    pattern = REQUIRED[name]
    assert any(re.search(pattern, flat(d.what)) for d in DEVIATIONS), name
    assert re.search(pattern, flat(README.read_text())), name


def test_the_report_prints_the_deviations():
    from orchestrator.studies.trace_audit import TraceAudit

    assert TraceAudit.deviations == DEVIATIONS  # render.py prints a study's deviations table


def test_the_readme_says_the_shipped_figures_come_from_a_simulated_judge():
    text = flat(README.read_text())
    assert "The shipped figures are simulated." in text
    assert re.search(
        r"come from the simulated judge, which draws each score from the golden "
        r"set's own reference labels",
        text,
    )
