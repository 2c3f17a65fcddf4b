"""Errors of the run ledger; the API maps them to 404, 409 and 422."""

from __future__ import annotations

from driftgauge.core.errors import DriftgaugeError, FieldError


class LedgerNotFound(DriftgaugeError):
    """The ledger holds no such record."""


class RunNotFound(LedgerNotFound):
    """No ledger run has that id."""


class BreachNotFound(LedgerNotFound):
    """No breach of that job, window and rule was recorded."""


class LedgerConflict(DriftgaugeError):
    """The request contradicts what the ledger already recorded (nothing was changed)."""


class LedgerInputError(FieldError):
    """A payload field is valid on its own but not for this ledger; `field` names it."""
