"""Errors of the run ledger; the API maps them to 404, 409 and 422."""

from __future__ import annotations

from driftgauge.core.errors import DriftgaugeError, FieldError


class RunNotFound(DriftgaugeError):
    """No ledger run has that id."""


class LedgerConflict(DriftgaugeError):
    """The request contradicts what the ledger already recorded (nothing was changed)."""


class LedgerInputError(FieldError):
    """A payload field is valid on its own but not for this ledger; `field` names it."""
