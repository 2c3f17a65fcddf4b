"""Bearer tokens: key-revealing, write and live endpoints always need one, reads when private."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from fastapi import HTTPException, Request, status

from driftgauge.config.frozen import Api
from driftgauge.config.secrets import Secret
from driftgauge.core.errors import ConfigError, SecretError


def reveal_tokens(where: str, secrets: Sequence[Secret]) -> list[bytes]:
    """Return the tokens' values; a bad reference or an empty token is a ConfigError."""
    values = []
    for i, secret in enumerate(secrets):
        try:
            value = secret.reveal()
        except SecretError as exc:
            raise ConfigError([f"{where}.{i}: {exc.problems[0]}"]) from None
        if not value:
            raise ConfigError([f"{where}.{i}: the token is empty"])
        values.append(value.encode())
    return values


class TokenCheck:
    """Verify bearer tokens against the configured ones, in constant time."""

    def __init__(
        self,
        tokens: Sequence[bytes],
        public_read: bool,
        *,
        metrics_tokens: Sequence[bytes] = (),
        metrics_public: bool | None = None,
    ) -> None:
        self._tokens = tuple(tokens)
        self._metrics_tokens = tuple(metrics_tokens)
        self.public_read = public_read
        self.metrics_public = public_read if metrics_public is None else metrics_public

    @classmethod
    def from_config(cls, api: Api) -> TokenCheck:
        """Reveal the configured tokens now, so a bad reference fails at startup."""
        return cls(
            reveal_tokens("api.tokens", api.tokens),
            api.public_read,
            metrics_tokens=reveal_tokens("api.metrics_tokens", api.metrics_tokens),
            metrics_public=api.metrics_public,
        )

    def valid(self, given: str, tokens: Sequence[bytes] | None = None) -> bool:
        """Return True if `given` equals one of the tokens (every token is compared)."""
        raw = given.encode()
        matches = [
            hmac.compare_digest(raw, t) for t in (self._tokens if tokens is None else tokens)
        ]
        return any(matches)

    def _bearer(self, request: Request, tokens: Sequence[bytes]) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "Authorization: a bearer token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not self.valid(token.strip(), tokens):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "Authorization: the bearer token is not valid",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def require(self, request: Request) -> None:
        """Raise 401/403 unless the request carries a valid bearer token."""
        if not self._tokens:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                "no API tokens are configured (api.tokens); this endpoint "
                "reveals row keys or changes state and is disabled",
            )
        self._bearer(request, self._tokens)

    def require_read(self, request: Request) -> None:
        """Raise unless reads are public or the request carries a valid token."""
        if not self.public_read:
            self.require(request)

    def require_metrics(self, request: Request) -> None:
        """Raise unless /metrics is public or the request carries an API or scrape token."""
        if self.metrics_public:
            return
        tokens = (*self._tokens, *self._metrics_tokens)
        if not tokens:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                "/metrics is private (api.metrics_public: false) and no "
                "token is configured (api.tokens, api.metrics_tokens)",
            )
        self._bearer(request, tokens)
