"""The keys and header values a campaign's models read from the environment: each set, and
usable as a header (never printed)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.spec.campaign import Campaign


def check_credentials(campaign: Campaign) -> None:
    """Every API key variable the models name is set (keys are read from the environment only)."""
    named = [(f"models[{i}]", m) for i, m in enumerate(campaign.config.models)]
    named += campaign.config.helpers()
    for where, model in named:
        needed = [("api_key_env", model.api_key_env, "your key")] if model.api_key_env else []
        needed += [
            (f"headers_env.{h}", e, "its value") for h, e in (model.headers_env or {}).items()
        ]
        for field, env, what in needed:
            value = os.environ.get(env)
            if not value:
                raise UserError(
                    f"environment variable {env} is not set",
                    file=campaign.source,
                    field=f"{where}.{field}",
                    fix=f"export {env}=<{what}> before running",
                )
            if any(ord(c) < 32 or ord(c) == 127 for c in value):  # never the value itself
                raise UserError(
                    f"environment variable {env} holds a control character (a line end from "
                    "a file with CRLF lines, say): no server would take it",
                    file=campaign.source,
                    field=f"{where}.{field}",
                    fix=f"export {env} again without it (e.g. strip the file's \\r: "
                    "sed -i 's/\\r$//' FILE)",
                )
