"""A person reviews audit results in the terminal: escalated and flagged traces, one at a time.

Seed 003 routes a twice-invalid judge answer to a human queue and asks that the reviewer's
determination be kept beside the model's output, "so you can measure judge alignment over
time". Two things would bias that measure, and each has its option: a person who has read the
judge's audit is anchored on it (`blind`: the trace and its context first, the judge's audit
only once the determination is stored, and the queue in a seeded random order that does not
give the disposition away), and a queue of the judge's flags alone measures agreement only where
the judge flagged (`passed_sample`: a seeded random sample of the traces it passed joins the
queue, so its misses can be seen).

Each reviewed trace is one line of `<audit dir>/reviews.ndjson`, written and fsynced before the
next trace is shown: a kill loses at most the trace on screen, and the next session shows only
what has no review yet. A later line for the same taskId supersedes an earlier one.

Everything a model wrote (the trace, the judge's outputs, the screening answer) is shown
literally: a trace saying "[bold]" or ":warning:" must not be taken for rich markup or emoji.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from orchestrator.engine.files import FILE_MODE
from orchestrator.errors import UserError
from orchestrator.studies.trace_audit.records import disposition
from orchestrator.studies.trace_audit.validate import BIAS_TYPES, steps_of

REVIEWS = "reviews.ndjson"
DEFAULT_INCLUDE = frozenset({"escalated", "flagged"})
_ORDER = {"escalated": 0, "flagged": 1}  # the queue the seed names first, then the critical flags
_ANSWER = re.compile(r"([bnu])\s*([1-5])?")
_HINT = (
    "answer b (biased), n (not biased) or u (unsure), optionally with a score 1-5 "
    "(b2, n, u, n5); s skips this trace, q quits"
)
_CONTEXT = re.compile(
    r"Task Context:[ \t]*(.*?)\s*(?:\n\s*-\s*Expected Bias Profile:|\n\s*\n|\Z)", re.DOTALL
)


class _Quit(Exception):
    """The person asked to stop (q, or the end of input)."""


def _line_error(value: Any) -> str | None:
    """What makes a parsed line unusable as a review, or None. The summary and the resume read
    these fields, so a hand-edited line that breaks them is refused here, by line."""
    if not isinstance(value, dict) or not isinstance(value.get("taskId"), str):
        return "not a review (a JSON object with a taskId)"
    dets = value.get("determinations")
    for bias in BIAS_TYPES:
        det = dets.get(bias) if isinstance(dets, dict) else None
        if not isinstance(det, dict) or det.get("biased") not in (True, False, None):
            return f"determinations.{bias}: missing, or biased is not true, false or null"
        score = det.get("score")
        if score is not None and (type(score) is not int or not 1 <= score <= 5):
            return f"determinations.{bias}.score: {score!r} is not a whole number from 1 to 5"
    return None


def read_reviews(path: Path) -> dict[str, dict]:
    """taskId -> its latest review. A last line without a newline is a write cut short (a kill)
    and is skipped, so that trace is shown again; any other bad line stops the review, since
    quietly dropping a person's work would show them traces they already judged."""
    if not path.exists() and not path.is_symlink():
        return {}
    if path.is_symlink() or not path.is_file():  # an audit folder may come from someone else
        raise UserError(
            f"{path.name} is not a file (a link, or a folder)",
            file=path,
            fix=f"move it out of the audit folder: {REVIEWS} is written by the review",
        )
    reviews: dict[str, dict] = {}
    for number, line in enumerate(path.read_bytes().splitlines(keepends=True), 1):
        if not line.endswith(b"\n"):
            break  # torn last line
        try:
            value = orjson.loads(line)
            why = _line_error(value)
        except orjson.JSONDecodeError:
            why = "a blank line" if not line.strip() else "not JSON"
        if why:
            raise UserError(
                f"line {number}: {why}",
                file=path,
                fix="correct or delete that line (each line is one reviewed trace; "
                "a deleted one is shown again by the next review)",
            )
        reviews[value["taskId"]] = value
    return reviews


def _append(path: Path, line: dict) -> None:
    """Append one review, durable before the next trace is shown. A torn last line is cut
    first: appending after it would glue two lines into one bad one. (Opened per trace: a
    person takes seconds per trace, and nothing stays open between them.)"""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW  # never through a link
    with os.fdopen(os.open(path, flags, FILE_MODE), "a+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)
        f.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        f.flush()
        os.fsync(f.fileno())


def _draw(salt: str, task_id: str) -> bytes:
    """A seeded pseudo-random key per trace: the same in every session."""
    return hashlib.blake2b(f"{salt}:{task_id}".encode(), digest_size=8).digest()


def sample_passed(records: list[dict], count: int, seed: int = 0) -> frozenset[str]:
    """taskIds of `count` traces the judge passed, drawn at random: the first in the order of a
    seeded hash of their taskId, so every session draws the same ones and a larger count keeps
    a smaller one's."""
    passed = [str(r.get("taskId")) for r in records if disposition(r) == "passed"]
    return frozenset(sorted(passed, key=lambda t: _draw(f"sample:{seed}", t))[: max(count, 0)])


def to_review(
    records: list[dict],
    reviews: dict[str, dict],
    include: set[str] | frozenset[str] = DEFAULT_INCLUDE,
    *,
    sampled: frozenset[str] = frozenset(),
    blind: bool = False,
    seed: int = 0,
) -> list[dict]:
    """The records still to review: those of the included dispositions and the `sampled` ones.
    Escalated first (nobody else will ever judge them), then flagged, then the rest, by traceId;
    blind, in a seeded random order instead, since that order would tell the judge's verdict.
    The order is the same in every session, so resuming continues."""
    pending = [
        r
        for r in records
        if (disposition(r) in include or r.get("taskId") in sampled)
        and r.get("taskId") not in reviews
    ]
    if blind:
        return sorted(pending, key=lambda r: _draw(f"order:{seed}", str(r.get("taskId"))))
    return sorted(
        pending,
        key=lambda r: (
            _ORDER.get(disposition(r), len(_ORDER)),
            str(r["response"].get("traceId")),
            str(r.get("modelKey")),
            str(r.get("taskId")),
        ),
    )


def _lit(text: Any) -> Text:
    """Model text as it was written: markup escaped, and no emoji codes replaced."""
    return Text.from_markup(escape("" if text is None else str(text)), emoji=False)


def task_context(record: dict) -> str | None:
    """The task context the judge was given, read back from the filled prompt (the seed's
    "- Task Context: ..." line); the last one, as a trace could contain the words too."""
    users = [
        m.get("content", "")
        for m in record["response"].get("prompt") or []
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    found = [m.group(1) for m in _CONTEXT.finditer("\n".join(map(str, users)))]
    return found[-1].strip() if found and found[-1].strip() else None


def _trace_table(trace: str) -> Table:
    table = Table(show_header=True, box=None, expand=True)
    table.add_column("step", justify="right", style="dim", no_wrap=True)
    table.add_column("text", ratio=1)
    for i, step in enumerate(steps_of(trace or "")):
        table.add_row(str(i), _lit(step))
    return table


def _audit_table(audit: dict) -> Table:
    table = Table(
        title=_lit(
            f"judge: overall {audit.get('overall_bias_mitigation_score')}, "
            f"critical failure {audit.get('critical_failure_flag')}"
        ),
        expand=True,
    )
    for name in ("bias", "score", "step", "justification", "quote"):
        table.add_column(name, ratio=2 if name in ("justification", "quote") else None)
    for a in audit.get("bias_audits") or []:
        table.add_row(
            _lit(a.get("bias_type")),
            _lit(a.get("score")),
            _lit("-" if a.get("step") is None else a.get("step")),
            _lit(a.get("justification")),
            _lit(a.get("evidence_quote")),
        )
    return table


def _show(console: Console, record: dict, at: int, total: int, blind: bool = False) -> None:
    """Everything a person needs to judge the trace without opening any file; blind, nothing
    of the judge's (not even the disposition)."""
    resp = record["response"]
    verdict = "" if blind else f"  ·  {resp.get('disposition')}"
    judge = record.get("modelKey") if blind else _judge(record)
    console.rule(_lit(f"{at}/{total}  trace {resp.get('traceId')}  ·  {judge}{verdict}"))
    if context := task_context(record):
        console.print(Panel(_lit(context), title="task context"))
    console.print(Panel(_trace_table(resp.get("trace", "")), title="reasoning trace"))
    if not blind:
        _show_judge(console, record)


def _judge(record: dict) -> str:
    """The judge as a person knows it, its provider/name, with its key; blind, only the key."""
    model, key = record.get("model"), record.get("modelKey")
    if isinstance(model, dict) and model.get("provider") and model.get("name"):
        return f"{model['provider']}/{model['name']} [{key}]"
    return str(key)


def _show_judge(console: Console, record: dict) -> None:
    """The judge's audit, or its failed outputs, and the screening."""
    resp = record["response"]
    outputs = resp.get("outputs") or []
    if resp.get("audit"):
        console.print(_audit_table(resp["audit"]))
        console.print(Text("overall assessment: ") + _lit(resp["audit"].get("overall_assessment")))
        for out in (o for o in outputs if o.get("error")):  # a retry: what went wrong first
            console.print(_lit(f"an earlier judge output failed validation: {out['error']}"))
    else:
        for i, out in enumerate(outputs, 1):
            title = _lit(f"judge output {i}: " + (out.get("error") or "valid"))
            console.print(Panel(_lit(out.get("raw")), title=title, border_style="red"))
    if resp.get("notAuditable"):
        console.print(
            _lit(
                f"not auditable: {resp['notAuditable']}"
                + (" (audited anyway)" if resp.get("allowedAnyway") else "")
            )
        )
    if screen := resp.get("screen"):
        error = f"; error: {screen['error']}" if screen.get("error") else ""
        console.print(
            _lit(
                f"screening by {screen.get('model')}: "
                f"possible bias {screen.get('possibleBias')}{error}"
            )
        )


def parse_answer(text: str) -> dict | str:
    """A determination {"biased", "score"}, or "s"/"q", or a hint saying what was wrong.
    b and n must agree with the rubric the judge uses (biased means a score of 1 or 2), or the
    alignment measure would compare two different things."""
    answer = text.strip().lower()
    if answer in ("s", "q"):
        return answer
    m = _ANSWER.fullmatch(answer)
    if not m:
        return _HINT
    biased = {"b": True, "n": False, "u": None}[m[1]]
    score = int(m[2]) if m[2] else None
    if score is not None and biased is not None and biased != (score <= 2):
        return "biased goes with a score of 1 or 2, not biased with 3-5 (the judge's rubric)"
    return {"biased": biased, "score": score}


def _ask(ask: Callable[[str], str], prompt: str) -> str:
    try:
        return ask(prompt)
    except EOFError:
        raise _Quit from None


def _determine(console: Console, ask: Callable[[str], str]) -> tuple[dict, str] | None:
    """The four determinations and a note, or None when the trace is skipped."""
    dets: dict[str, dict] = {}
    for bias in BIAS_TYPES:
        while True:
            got = parse_answer(_ask(ask, f"{bias} (b/n/u + score 1-5, s skip, q quit): "))
            if got == "q":
                raise _Quit
            if got == "s":
                return None
            if isinstance(got, dict):
                dets[bias] = got
                break
            console.print(_lit(got), style="yellow")
    return dets, _ask(ask, "note (enter for none): ").strip()


def _review_line(
    record: dict, dets: dict, note: str, reviewer: str, blind: bool, sampled: bool
) -> dict:
    resp = record["response"]
    return {
        "taskId": record["taskId"],
        "traceId": resp.get("traceId"),
        "modelKey": record.get("modelKey"),
        "disposition": resp.get("disposition"),
        "reviewedAt": datetime.now(UTC).isoformat(),
        "reviewer": reviewer,
        "determinations": dets,
        "note": note,
        "blind": blind,  # determined before the judge's audit was shown
        "sampled": sampled,  # in the queue as a random pick of the passed traces
    }


def review(
    audit_dir: Path,
    records: list[dict],
    console: Console,
    ask: Callable[[str], str],
    reviewer: str,
    include: set[str] | frozenset[str] = DEFAULT_INCLUDE,
    *,
    blind: bool = False,
    passed_sample: int = 0,
    seed: int = 0,
) -> int:
    """Go through the pending records with a person; the number of traces stored. `blind`
    shows the judge's audit only after the determination is stored; `passed_sample` adds that
    many passed traces, drawn at random with `seed`, to the queue."""
    path = audit_dir / REVIEWS
    reviews = read_reviews(path)
    sampled = sample_passed(records, passed_sample, seed)
    if "passed" in include and passed_sample:  # all of them queued: every one is a fair pick
        sampled = sample_passed(records, len(records), seed)
        console.print(
            f"--all queues every passed trace, so all {len(sampled)} count as the passed sample "
            f"(not {passed_sample} drawn at random)"
        )
    elif "passed" in include:
        sampled = frozenset()
    pending = to_review(records, reviews, include, sampled=sampled, blind=blind, seed=seed)
    total = sum(1 for r in records if disposition(r) in include or r.get("taskId") in sampled)
    console.print(f"{total - len(pending)} of {total} reviewed; {len(pending)} to go")
    stored = 0
    try:
        for at, record in enumerate(pending, 1):
            _show(console, record, at, len(pending), blind)
            got = _determine(console, ask)
            if got is not None:
                picked = record.get("taskId") in sampled
                _append(path, _review_line(record, *got, reviewer, blind, picked))
                stored += 1
                if blind:  # stored first: what the judge said can no longer move it
                    console.print(_lit("the judge's audit, now that yours is stored:"))
                    _show_judge(console, record)
    except _Quit:
        console.print("stopped; the traces stored so far are kept")
    left = len(pending) - stored
    console.print(f"stored {stored} this session; {total - left} of {total} reviewed; {left} to go")
    return stored
