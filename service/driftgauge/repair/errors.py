"""Errors of the repair layer: a refused step names its rule; bad input names its field."""

from __future__ import annotations

from driftgauge.core.errors import DriftgaugeError, FieldError


class RepairError(DriftgaugeError):
    """Base class of repair errors."""


class NotFound(RepairError):
    """A watermark, consumer or backfill that does not exist."""


class RepairInputError(RepairError, FieldError):
    """Input that names something impossible; `field` says which input."""


class Refused(RepairError):
    """A step the rules forbid now; `rule` is the rule's stable name, `status` 409 or 422."""

    def __init__(self, step: str, rule: str, detail: str, *, status: int = 409) -> None:
        super().__init__(f"{step} refused ({rule}): {detail}")
        self.step = step
        self.rule = rule
        self.detail = detail
        self.status = status
        self.backfill_id: int | None = None
        """The backfill the refusal is about, when it is not the one asked for."""
