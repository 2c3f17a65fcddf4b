"""The reader_api store's settings: the `stores.NAME` model and the runtime store built from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Self

from pydantic import Field, model_validator

from driftgauge.config.secrets import Secret
from driftgauge.config.values import NonEmpty, Seconds, SecretRef, Strict
from driftgauge.stores.registry import StoreLimits, StoreModel

Paging = Literal["cursor", "page", "offset", "none"]
BOUNDS = ("{start}", "{end}")
"""Placeholders of the bucket's bounds, replaced by UTC ISO 8601 instants."""


class AuthModel(Strict):
    bearer: SecretRef | None = Field(None, description="Bearer token (env:NAME or file:/path).")
    username: NonEmpty | None = Field(None, description="Basic auth user name.")
    password: SecretRef | None = Field(
        None, description="Basic auth password (env:NAME or file:/path)."
    )

    @model_validator(mode="after")
    def _one_scheme(self) -> Self:
        basic = self.username is not None or self.password is not None
        if (self.bearer is not None) == basic:
            raise ValueError("give either 'bearer' or 'username' and 'password'")
        if basic and (self.username is None or self.password is None):
            raise ValueError("basic auth needs both 'username' and 'password'")
        return self


class PaginationModel(Strict):
    style: Paging = Field(
        "none",
        description="cursor: follow `cursor_path`; page: page "
        "numbers from `first_page`; offset: rows so far; none: one request. "
        "page and offset stop at the first empty page.",
    )
    cursor_path: NonEmpty | None = Field(
        None,
        description="cursor: JSON path (dotted) of the "
        "next cursor in a response; absent or null ends.",
    )
    cursor_param: NonEmpty = Field(
        "cursor", description="cursor: the query parameter carrying the cursor."
    )
    page_param: NonEmpty = "page"
    first_page: int = Field(1, ge=0)
    offset_param: NonEmpty = "offset"
    size_param: NonEmpty | None = Field(
        "limit", description="Query parameter of the page size; null: the API's own."
    )

    @model_validator(mode="after")
    def _cursor_path(self) -> Self:
        if self.style == "cursor" and self.cursor_path is None:
            raise ValueError("cursor pagination needs 'cursor_path'")
        return self


class ReaderApiStoreModel(StoreModel):
    kind: Literal["reader_api"]
    url: NonEmpty = Field(
        description="URL template of the reader's endpoint; {start} and "
        "{end} (here or in params) become the bucket's bounds in UTC ISO "
        "8601."
    )
    params: dict[NonEmpty, str] = Field(
        default_factory=dict, description="Extra query parameters ({start}/{end} allowed)."
    )
    auth: AuthModel | None = None
    rows_path: str = Field(
        "",
        description="JSON path (dotted; '' the body itself) of the "
        "list of rows in a response. Views name each field by its JSON "
        "path inside a row.",
    )
    pagination: PaginationModel = Field(default_factory=PaginationModel)
    page_size: int = Field(500, ge=1, le=100_000)
    rate_limit: float | None = Field(
        None, gt=0, le=10_000, description="Requests per second at most."
    )
    max_rows: int = Field(
        100_000,
        ge=1,
        le=100_000_000,
        description="Rows one run may "
        "read; more is an error naming this cap, never a truncated count.",
    )
    max_window_days: int = Field(
        7,
        ge=1,
        le=366,
        description="The check runs on a bounded recent window: a longer window is refused.",
    )
    timeout_seconds: Seconds = 30.0
    verify_certs: bool = True


@dataclass(frozen=True)
class ReaderApiStore(StoreLimits):
    """An application's HTTP endpoint, read as its readers read it."""

    name: str
    url: str
    params: tuple[tuple[str, str], ...] = ()
    bearer: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    rows_path: str = ""
    paging: Paging = "none"
    cursor_path: str | None = None
    cursor_param: str = "cursor"
    page_param: str = "page"
    first_page: int = 1
    offset_param: str = "offset"
    size_param: str | None = "limit"
    page_size: int = 500
    rate_limit: float | None = None
    max_rows: int = 100_000
    max_window_days: int = 7
    timeout: float = 30.0
    verify_certs: bool = True
    kind: str = field(default="reader_api")

    @property
    def mode(self) -> str:
        """Return how the check bounds its cost, as results and docs say it."""
        return f"bounded window of at most {self.max_window_days} days"
