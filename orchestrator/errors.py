"""Errors a user can act on. Each says what was wrong, where, and how to fix it."""

from __future__ import annotations

from os import PathLike


class UserError(Exception):
    """Bad input from the user: reported in one message, exit code 2, nothing started."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | PathLike[str] | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        # a path as given, or None (a campaign built in Python has no file)
        self.file = str(file) if file is not None else None
        self.field, self.fix, self.detail = field, fix, message
        super().__init__(self._render())

    def _render(self) -> str:
        kind = "option" if self.field and self.field.startswith("--") else "field"
        where = ": ".join(
            p for p in (self.file, f"{kind} '{self.field}'" if self.field else None) if p
        )
        text = f"{where}: {self.detail}" if where else self.detail
        return f"{text}\n  fix: {self.fix}" if self.fix else text


class PlanChangedError(UserError):
    """The plan in a run directory differs from the one the config now yields."""
