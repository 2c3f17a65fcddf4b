"""The driftgauge exception tree; adapters translate driver errors into it."""


class DriftgaugeError(Exception):
    """Base of every error driftgauge raises on purpose."""


class ConfigError(DriftgaugeError):
    """The configuration is invalid; `problems` lists each one with its location."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class SecretError(ConfigError):
    """A secret reference could not be resolved."""


class StoreError(DriftgaugeError):
    """A store call failed; `store` names the configured store."""

    def __init__(self, store: str, message: str) -> None:
        self.store = store
        super().__init__(f"{store}: {message}")


class StoreUnavailable(StoreError):
    """The store could not be reached or refused the connection."""


class StoreTimeout(StoreError):
    """A store call exceeded its deadline."""


class StoreQueryError(StoreError):
    """The store rejected a query or returned a response we cannot use."""


class StorePermissionError(StoreError):
    """The store refused the operation for lack of permission (or a write block)."""


class IncompleteExport(StoreError):
    """A row export returned fewer or more rows than the store said it would."""


class StateError(DriftgaugeError):
    """The state database failed or holds something we cannot read."""


class FieldError(DriftgaugeError):
    """A request field valid on its own but not here; `field` names it, `problem` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class UnknownCheck(DriftgaugeError):
    """No check of that name is configured."""


class SchemaError(ConfigError):
    """A configured field does not fit what its store holds (found by the preflight)."""
