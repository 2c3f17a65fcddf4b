"""Bearer tokens: key-revealing and write endpoints always need one, reads when not public."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from fastapi import HTTPException, Request, status

from driftgauge.config.runtime import Api
from driftgauge.errors import ConfigError, SecretError


class TokenCheck:
    """Verify bearer tokens against the configured ones, in constant time."""

    def __init__(self, tokens: Sequence[bytes], public_read: bool) -> None:
        self._tokens = tuple(tokens)
        self.public_read = public_read

    @classmethod
    def from_config(cls, api: Api) -> TokenCheck:
        """Reveal the configured tokens now, so a bad reference fails at startup."""
        values = []
        for i, secret in enumerate(api.tokens):
            try:
                value = secret.reveal()
            except SecretError as exc:
                raise ConfigError([f"api.tokens.{i}: {exc.problems[0]}"]) from None
            if not value:
                raise ConfigError([f"api.tokens.{i}: the token is empty"])
            values.append(value.encode())
        return cls(values, api.public_read)

    def valid(self, given: str) -> bool:
        """Return True if `given` equals one of the tokens (every token is compared)."""
        raw = given.encode()
        matches = [hmac.compare_digest(raw, t) for t in self._tokens]
        return any(matches)

    def require(self, request: Request) -> None:
        """Raise 401/403 unless the request carries a valid bearer token."""
        if not self._tokens:
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                "no API tokens are configured (api.tokens); this endpoint "
                                "reveals row keys or changes state and is disabled")
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "Authorization: a bearer token is required",
                                headers={"WWW-Authenticate": "Bearer"})
        if not self.valid(token.strip()):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "Authorization: the bearer token is not valid",
                                headers={"WWW-Authenticate": "Bearer"})

    def require_read(self, request: Request) -> None:
        """Raise unless reads are public or the request carries a valid token."""
        if not self.public_read:
            self.require(request)
