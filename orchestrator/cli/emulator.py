"""`orchestrator emulate`: the emulator as a command, to rehearse a campaign on loopback."""

from __future__ import annotations

import os
from typing import Annotated

import typer

import orchestrator.cli.ui as ui
from orchestrator.errors import UserError

RATE = ui.number(0, 1, example="0.1")


def emulate(
    port: Annotated[
        int,
        typer.Option(
            callback=ui.number(0, 65535, example="0"),
            help="Port on 127.0.0.1 (0 picks a free one).",
        ),
    ] = 8765,
    rpm: Annotated[
        int | None,
        typer.Option(
            callback=ui.number(1, example="500"),
            help="Requests allowed per period, per API key and protocol.",
        ),
    ] = None,
    tpm: Annotated[
        int | None,
        typer.Option(
            callback=ui.number(1, example="200000"),
            help="Tokens (prompt + max_tokens) allowed per period.",
        ),
    ] = None,
    period_s: Annotated[
        float,
        typer.Option(
            callback=ui.number(0, above=True, example="60"),
            help="The window the limits count over, in seconds.",
        ),
    ] = 60.0,
    latency_ms: Annotated[
        float,
        typer.Option(callback=ui.number(0, example="50"), help="Delay before every answer."),
    ] = 0.0,
    error_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of answers that are 500s.")
    ] = 0.0,
    overload_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of 503/529 overload answers.")
    ] = 0.0,
    drop_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of connections dropped unanswered.")
    ] = 0.0,
    slow_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of answers delayed by --slow-s.")
    ] = 0.0,
    slow_s: Annotated[
        float,
        typer.Option(callback=ui.number(0, example="30"), help="How long a slow answer takes."),
    ] = 30.0,
    malformed_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of answers with no JSON in them.")
    ] = 0.0,
    refusal_rate: Annotated[
        float, typer.Option(callback=RATE, help="Share of answers the model refuses.")
    ] = 0.0,
    batch_s: Annotated[
        float,
        typer.Option(
            callback=ui.number(0, example="60"), help="How long a batch job takes to end."
        ),
    ] = 0.0,
    reasoning_model: Annotated[
        list[str] | None,
        typer.Option(
            help="A model name to answer as an OpenAI reasoning model (refusing max_tokens and "
            "temperature) besides o1-o9* and gpt-5*; repeatable."
        ),
    ] = None,
    reasoning_tokens: Annotated[
        int,
        typer.Option(
            callback=ui.number(0, example="128"),
            help="Hidden reasoning tokens an OpenAI reasoning model spends at medium effort.",
        ),
    ] = 128,
) -> None:
    """Serve OpenAI chat completions (/v1), Anthropic Messages and Gemini generateContent on
    loopback, with enforced limits (429s with the real headers) and injected faults, and the
    three batch APIs: rehearse a campaign before spending money. Models named missing-* answer 404.
    Reasoning models answer as their APIs do: o-series and gpt-5 refuse max_tokens and
    temperature, *reasoner and *-r1 models show reasoning_content, Claude thinking and Gemini
    thinkingConfig return their thinking apart from the answer."""
    import asyncio

    from orchestrator.emulator.batch import BatchBehaviour
    from orchestrator.emulator.server import Emulator, EmulatorConfig, Faults

    faults = Faults(
        server_error=error_rate,
        overloaded=overload_rate,
        dropped=drop_rate,
        slow=slow_rate,
        slow_s=slow_s,
        malformed=malformed_rate,
        refusal=refusal_rate,
    )
    emulator = Emulator(
        EmulatorConfig(
            rpm=rpm,
            tpm=tpm,
            period_s=period_s,
            latency_s=latency_ms / 1000,
            faults=faults,
            batch=BatchBehaviour(processing_s=batch_s),
            reasoning_models=frozenset(reasoning_model or ()),
            reasoning_tokens=reasoning_tokens,
        )
    )

    async def serve() -> None:
        try:
            await emulator.start(port)
        except OSError as exc:  # in use, or not ours to take
            raise UserError(
                f"cannot listen on 127.0.0.1:{port}: "
                f"{os.strerror(exc.errno) if exc.errno else exc}",
                field="--port",
                fix="pick another port, or --port 0 for any free one",
            ) from None
        ui.console.print(f"listening on {emulator.url}", highlight=False)
        ui.console.print(
            f'  openai:    base_url = "{emulator.base_url("openai")}"\n'
            f'  anthropic: base_url = "{emulator.base_url("anthropic")}"\n'
            f'  gemini:    base_url = "{emulator.base_url("gemini")}"\n(Ctrl-C stops it)',
            highlight=False,
        )
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except UserError as exc:
        ui.fail(exc)
    except KeyboardInterrupt:
        pass
    finally:
        emulator.batch.jobs.close()  # its batches' files


def add(app: typer.Typer) -> None:
    app.command()(emulate)
