"""Reader for the preregistered "AI Judge History" study format (seed 002).

Each judged task becomes an experiment with three conditions: blind, history-framing and
history-anchor. The prompts come from templates (`promptTemplates` in the job file, else the
defaults below) in which only the history sentence differs between conditions: the question,
rubric, candidate answer and output format are the same bytes in all three.
"""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import UserError
from orchestrator.spec.loading import validate
from orchestrator.spec.models import (
    Condition,
    Experiment,
    Job,
    JudgedItem,
    Metric,
    ResponseContract,
    Variant,
)

CONDITIONS = ("blind", "history-framing", "history-anchor")
BODY = (
    "Question: ${question}\n\nRubric: ${rubric}\n\nCandidate answer: ${candidateAnswer}\n\n"
    "${outputFormat}"
)
DEFAULT_TEMPLATES = {
    "system": "You are an evaluator. Judge the candidate answer only against the rubric.",
    "blind": BODY,
    "history-framing": "This answer was reviewed before, in an earlier evaluation round. "
    "Evaluate it now.\n\n" + BODY,
    "history-anchor": "This answer was reviewed before, in an earlier evaluation round. The "
    "previous review gave it a score of ${priorScore} out of 5 (verdict: "
    "${priorVerdict}). Evaluate it now.\n\n" + BODY,
}


class _Model(BaseModel):
    # Strict, as configs are: `promptTemplate` or `scorerange` would silently change nothing
    # (a judge's 7 on a 1-10 scale planned as 1-5). The seed-002 format's descriptive fields
    # are declared (Any), so a file of the published format reads as it is.
    model_config = ConfigDict(extra="forbid")


class JudgeTask(_Model):
    id: str = Field(pattern=r"^[a-z0-9-]+$")
    question: str
    rubric: str
    candidateAnswer: str
    goldScore: int = Field(ge=1, le=5)
    priorScore: int = Field(ge=1, le=5)
    priorVerdict: str


class Design(_Model):
    conditions: list[str]
    recommendedRepetitionsPerCondition: int = Field(default=3, ge=1)
    type: Any = None
    conditionDefinitions: Any = None
    freshContextRule: Any = None
    minimumRepetitionsPerCondition: Any = None
    randomization: Any = None
    recommendedModels: Any = None
    settingsRule: Any = None


class OutputContract(_Model):
    format: str
    score: str
    verdict: str
    reason: str


class AnalysisPlan(_Model):
    scoreRange: tuple[int, int] = (1, 5)
    missingData: Any = None
    multiModelRule: Any = None
    reasonText: Any = None
    resultGate: Any = None
    unitOfAnalysis: Any = None
    verdictRule: Any = None


class Templates(BaseModel):
    model_config = ConfigDict(extra="forbid")
    system: str
    blind: str
    history_framing: str = Field(alias="history-framing")
    history_anchor: str = Field(alias="history-anchor")


class JudgeStudy(_Model):
    studyId: str
    version: int = 1
    title: str = ""
    design: Design
    outputContract: OutputContract
    analysisPlan: AnalysisPlan = AnalysisPlan()
    tasks: list[JudgeTask] = Field(min_length=1)
    promptTemplates: Templates | None = None
    # published, descriptive only
    canonicalUrl: Any = None
    hypothesis: Any = None
    instrumentUrl: Any = None
    limitationsPlanned: Any = None
    plainLanguage: Any = None
    preregisteredAt: Any = None
    primaryOutcome: Any = None
    protocol: Any = None
    researchBackground: Any = None
    researchQuestion: Any = None
    secondaryOutcomes: Any = None
    shortTitle: Any = None
    status: Any = None
    track: Any = None


def is_seed002(data: Any) -> bool:
    return isinstance(data, dict) and "studyId" in data and "tasks" in data and "design" in data


def output_format(contract: OutputContract) -> str:
    return (
        f"{contract.format} score: {contract.score} verdict: {contract.verdict} "
        f"reason: {contract.reason}"
    )


def job_from_seed002(data: Any, path: Path, job_id: str) -> Job:
    study: JudgeStudy = validate(JudgeStudy, data, path)
    if tuple(study.design.conditions) != CONDITIONS:
        raise UserError(
            f"conditions must be {list(CONDITIONS)}",
            file=path,
            field="design.conditions",
            fix="use the study's three conditions in that order",
        )
    templates = (
        study.promptTemplates.model_dump(by_alias=True)
        if study.promptTemplates
        else DEFAULT_TEMPLATES
    )
    low, high = study.analysisPlan.scoreRange
    contract = ResponseContract(
        kind="judgment", field="score", minimum=low, maximum=high, options=("pass", "fail")
    )
    seen: set[str] = set()
    experiments = []
    for i, task in enumerate(study.tasks):
        if task.id in seen:
            raise UserError(
                f"duplicate task id '{task.id}'",
                file=path,
                field=f"tasks[{i}].id",
                fix="give every task its own id",
            )
        seen.add(task.id)
        fields = {**task.model_dump(), "outputFormat": output_format(study.outputContract)}
        conditions = []
        for index, name in enumerate(CONDITIONS):
            try:
                prompt = Template(templates[name]).substitute(fields)
            except (KeyError, ValueError) as exc:
                raise UserError(
                    f"template '{name}' has an unknown or malformed placeholder: {exc}",
                    file=path,
                    field=f"promptTemplates.{name}",
                    fix="use ${question} ${rubric} ${candidateAnswer} ${outputFormat} "
                    "${priorScore} ${priorVerdict}",
                ) from None
            conditions.append(
                Condition(
                    index=index,
                    label=name,
                    variants=(Variant(id="v1", prompt=prompt, contract=contract),),
                )
            )
        experiments.append(
            Experiment(
                slug=task.id,
                metric=Metric(type="prior-score-pull"),
                conditions=tuple(conditions),
                judged=JudgedItem(
                    question=task.question,
                    rubric=task.rubric,
                    candidate_answer=task.candidateAnswer,
                    gold_score=task.goldScore,
                    prior_score=task.priorScore,
                    prior_verdict=task.priorVerdict,
                ),
            )
        )
    return Job(
        id=job_id,
        title=study.title,
        system_prompt=templates["system"],
        min_samples=study.design.recommendedRepetitionsPerCondition,
        experiments=tuple(experiments),
        kind="judge-history",
        study_id=study.studyId,
        spec_version=study.version,
    )
