"""Bad config values, field by field: a valid base config and what each bad value must say."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

HIDE = {"exists": {"field": "driftgauge_canary"}}
TIERS = {"terms": {"review_tier": ["first_tier", "second_tier"]}}
ENV = {
    "DG_FUZZ_TOKEN": "t0ken",
    "DG_FUZZ_PASSWORD": "pw",
    "DG_FUZZ_EMPTY": "",
    "DG_FUZZ_DSN": "postgresql://u:pw@127.0.0.1:1/x",
    "DG_FUZZ_BAD_DSN": "mysql://u@h/x",
    "DG_FUZZ_MY_DSN": "mysql://u:pw@127.0.0.1:1/shop",
}
"""The environment the base config's secret references resolve in (DG_FUZZ_UNSET is unset)."""


def base() -> dict[str, Any]:
    """Return a valid config that sets every section (state on a port nothing listens on)."""
    return copy.deepcopy(
        {
            "stores": {
                "pg": {
                    "kind": "postgres",
                    "dsn": "env:DG_FUZZ_DSN",
                    "timeout_seconds": 30,
                    "pool_max": 4,
                },
                "os": {
                    "kind": "opensearch",
                    "url": "http://127.0.0.1:9250",
                    "timeout_seconds": 30,
                    "verify_certs": True,
                },
                "os_sync": {
                    "kind": "opensearch",
                    "url": "http://127.0.0.1:9250",
                    "username": "review-sync",
                    "password": "env:DG_FUZZ_PASSWORD",
                },
                "es": {
                    "kind": "elasticsearch",
                    "url": "http://127.0.0.1:9260",
                    "username": "reader",
                    "password": "env:DG_FUZZ_PASSWORD",
                    "timeout_seconds": 30,
                    "verify_certs": True,
                },
                "my": {
                    "kind": "mariadb",
                    "dsn": "env:DG_FUZZ_MY_DSN",
                    "timeout_seconds": 30,
                    "pool_max": 4,
                },
                "api": {
                    "kind": "reader_api",
                    "url": "http://127.0.0.1:1/v1/x?from={start}",
                    "params": {"to": "{end}"},
                    "auth": {"bearer": "env:DG_FUZZ_TOKEN"},
                    "rows_path": "data.items",
                    "page_size": 100,
                    "rate_limit": 10,
                    "max_rows": 1000,
                    "max_window_days": 7,
                    "timeout_seconds": 30,
                    "verify_certs": True,
                    "pagination": {
                        "style": "cursor",
                        "cursor_path": "meta.next",
                        "cursor_param": "cursor",
                        "page_param": "page",
                        "first_page": 1,
                        "offset_param": "offset",
                        "size_param": "limit",
                    },
                },
                "api_basic": {
                    "kind": "reader_api",
                    "url": "http://127.0.0.1:1/{start}/{end}",
                    "auth": {"username": "reader", "password": "env:DG_FUZZ_PASSWORD"},
                },
                "spark": {
                    "kind": "spark",
                    "url": "sc://127.0.0.1:1",
                    "token": "env:DG_FUZZ_TOKEN",
                    "timeout_seconds": 30,
                },
                "trino": {
                    "kind": "trino",
                    "url": "https://127.0.0.1:1",
                    "catalog": "hive",
                    "schema": "sales",
                    "user": "reader",
                    "password": "env:DG_FUZZ_PASSWORD",
                    "verify": True,
                    "timeout_seconds": 30,
                },
                "trino_jwt": {
                    "kind": "trino",
                    "url": "http://127.0.0.1:1",
                    "token": "env:DG_FUZZ_TOKEN",
                },
                "duck": {
                    "kind": "duckdb",
                    "database": "shop.duckdb",
                    "timeout_seconds": 30,
                    "threads": 2,
                    "files": {
                        "orders": {"parquet": "exports/*.parquet", "hive_partitioning": True}
                    },
                },
            },
            "state": {
                "dsn": "postgresql://u@127.0.0.1:1/state",
                "schema": "driftgauge",
                "retention": {"runs": "30d", "ledger": "400d"},
                "lease": {"heartbeat": "15s", "expires": "60s"},
            },
            "api": {"tokens": ["env:DG_FUZZ_TOKEN"], "public_read": True, "sample_keys": 100},
            "checks": {
                "reviews": {
                    "description": "fuzz base",
                    "source": {
                        "store": "pg",
                        "query": "SELECT 1",
                        "key": "task_id",
                        "time": "completed_at",
                        "fields": {"label": "label"},
                    },
                    "reader": {
                        "store": "os",
                        "index": "conv",
                        "key": "task_id",
                        "time": "completed_at",
                        "fields": {"label": "review_tier"},
                        "filter": {"bool": {"filter": [TIERS], "must_not": [HIDE]}},
                    },
                    "key_type": "string",
                    "fields": {"label": "string"},
                    "timezone": "Europe/Berlin",
                    "exclusions": [{"reason": "no_join_key", "where": "conversation_key IS NULL"}],
                    "settle": "3h",
                    "tolerance": {
                        "missing_ratio": 0.0,
                        "extra": 0,
                        "mismatched": 0,
                        "exclusion_rate": {"no_join_key": 0.5},
                    },
                    "drilldown": {
                        "leaf_rows": 2000,
                        "dense_ratio": 0.2,
                        "max_depth": 4,
                        "slot_first_pass_days": 62,
                    },
                    "schedule": {
                        "recent": {"every": "1h", "days": 7},
                        "full": {"cron": "0 3 * * 0", "days": 400},
                    },
                    "ledger": {
                        "job": "review-sync",
                        "summary_deadline": "6h",
                        "no_match_rate": 0.05,
                        "settle": "15m",
                    },
                    "canary": {
                        "store": "os_sync",
                        "index": "conv",
                        "write": "update",
                        "document": {"review_tier": "first_tier"},
                        "marker": "driftgauge_canary",
                        "cron": "0 12 * * *",
                        "timeout_seconds": 30,
                        "key_query": "SELECT task_id FROM tasks LIMIT 1",
                    },
                    "vocabulary": {
                        "label": {"accepted": ["first_tier"], "filter_field": "review_tier"}
                    },
                    "volume": {"trailing": 30, "sigmas": 3},
                }
            },
        }
    )


DROP = object()
"""As a case's value: remove the key instead of setting it."""


@dataclass(frozen=True)
class Case:
    """One bad value: where it goes, and the problem (location first) it must produce."""

    path: str
    value: Any
    problem: str

    @property
    def id(self) -> str:
        return f"{self.path}={self.value!r}"[:80]

    def config(self) -> dict[str, Any]:
        """Return the base config with this case's value in place."""
        data = base()
        *parents, last = self.path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if self.value is DROP:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = copy.deepcopy(self.value)
        else:
            node[last] = copy.deepcopy(self.value)
        return data

    def text(self) -> str:
        """Return the config as YAML."""
        return yaml.safe_dump(self.config(), sort_keys=False)


C = "checks.reviews"
INF, NAN = float("inf"), float("nan")
CASES = [
    # Issue 10, finding 5: validate accepted what serve then crashed on.
    Case(
        f"{C}.schedule.full.cron",
        "0 99 * * 0",
        f"{C}.schedule.full.cron: hour: 99 is out of range 0-23",
    ),
    Case(
        "stores.os.url", "env:DG_FUZZ_URL", "stores.os.url: must be a URL, not a secret reference"
    ),
    # Issue 10, finding 9: both day fields restricted (crontab ORs them) is refused.
    Case(
        f"{C}.schedule.full.cron",
        "0 3 1 * 1",
        f"{C}.schedule.full.cron: '0 3 1 * 1' restricts both day of month",
    ),
    # Issue 16, finding 3.
    Case(f"{C}.settle", "9999999999d", f"{C}.settle: '9999999999d' is longer than 100 years"),
    Case(
        f"{C}.schedule.recent.every",
        "99999999999w",
        f"{C}.schedule.recent.every: '99999999999w' is longer than 100 years",
    ),
    Case(
        f"{C}.schedule.recent.every",
        "0s",
        f"{C}.schedule.recent.every: must be at least 1s, got 0s",
    ),
    Case(
        f"{C}.schedule.recent.every",
        "0.0000001s",
        f"{C}.schedule.recent.every: '0.0000001s' is not a whole number of seconds",
    ),
    Case("checks", {}, "checks: configure at least one check"),
    Case(
        f"{C}.tolerance.exclusion_rate",
        {"no_join_key": -1},
        f"{C}.tolerance.exclusion_rate.no_join_key: Input should be greater than or equal to 0",
    ),
    Case(
        f"{C}.tolerance.exclusion_rate",
        {"no_join_key": 5},
        f"{C}.tolerance.exclusion_rate.no_join_key: Input should be less than or equal to 1",
    ),
    Case(
        "stores.pg.timeout_seconds",
        INF,
        "stores.pg.timeout_seconds: Input should be a finite number",
    ),
    Case(
        "stores.os.url",
        "not a url",
        "stores.os.url: must be an http:// or https:// URL with a host, got 'not a url'",
    ),
    Case(f"{C}.source.key", "", f"{C}.source.key: must not be empty"),
    Case(f"{C}.exclusions.0.where", "", f"{C}.exclusions.0.where: must not be empty"),
    Case("api.tokens", [""], "api.tokens.0: must not be empty"),
    Case("api.tokens", ["env:DG_FUZZ_EMPTY"], "api.tokens.0: the token is empty"),
    # Every other field of the models.
    Case("stores.pg.kind", "mysql", "stores.pg: Input tag 'mysql' found using 'kind'"),
    Case("stores.pg.dsn", "", "stores.pg.dsn: must not be empty"),
    Case("stores.pg.dsn", "host=db user=me", "stores.pg.dsn: must be a postgresql:// URL"),
    Case(
        "stores.pg.dsn",
        "env:DG_FUZZ_UNSET",
        "stores.pg.dsn: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case(
        "stores.pg.dsn",
        "env:DG_FUZZ_BAD_DSN",
        "stores.pg.dsn: env:DG_FUZZ_BAD_DSN must be a postgresql:// URL",
    ),
    Case(
        "stores.pg.dsn",
        "file:/nonexistent/dg-secret",
        "stores.pg.dsn: secret file /nonexistent/dg-secret cannot be read",
    ),
    Case(
        "stores.pg.timeout_seconds", 0, "stores.pg.timeout_seconds: Input should be greater than 0"
    ),
    Case(
        "stores.pg.timeout_seconds",
        NAN,
        "stores.pg.timeout_seconds: Input should be a finite number",
    ),
    Case(
        "stores.pg.timeout_seconds",
        86400,
        "stores.pg.timeout_seconds: Input should be less than or equal to 3600",
    ),
    Case(
        "stores.pg.timeout_seconds",
        "fast",
        "stores.pg.timeout_seconds: Input should be a valid number",
    ),
    Case("stores.pg.pool_max", 0, "stores.pg.pool_max: Input should be greater than or equal"),
    Case("stores.pg.pool_max", 101, "stores.pg.pool_max: Input should be less than or equal"),
    Case("stores.pg.pool_max", True, "stores.pg.pool_max: Input should be a valid integer"),
    Case(
        "stores.pg.max_concurrent_queries",
        0,
        "stores.pg.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case(
        "stores.pg.max_concurrent_queries",
        1001,
        "stores.pg.max_concurrent_queries: Input should be less than or equal",
    ),
    Case(
        "stores.os.max_concurrent_queries",
        True,
        "stores.os.max_concurrent_queries: Input should be a valid integer",
    ),
    Case(
        "stores.my.max_concurrent_queries",
        -1,
        "stores.my.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case(
        "stores.es.max_concurrent_queries",
        0,
        "stores.es.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case(
        "stores.duck.max_concurrent_queries",
        "four",
        "stores.duck.max_concurrent_queries: Input should be a valid integer",
    ),
    Case(
        "stores.api.max_concurrent_queries",
        0,
        "stores.api.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case(
        "stores.pg.parallel_scans",
        0,
        "stores.pg.parallel_scans: Input should be greater than or equal",
    ),
    Case(
        "stores.os.parallel_scans",
        33,
        "stores.os.parallel_scans: Input should be less than or equal",
    ),
    Case(
        "stores.my.parallel_scans",
        "two",
        "stores.my.parallel_scans: Input should be a valid integer",
    ),
    Case(
        "stores.es.parallel_scans",
        -1,
        "stores.es.parallel_scans: Input should be greater than or equal",
    ),
    Case("stores.duck.parallel_scans", 2, "stores.duck.parallel_scans: a duckdb store runs one"),
    Case(
        "stores.api.parallel_scans",
        True,
        "stores.api.parallel_scans: Input should be a valid integer",
    ),
    Case("stores.spark.parallel_scans", 0, "stores.spark.parallel_scans: Input should be greater"),
    Case("stores.trino.parallel_scans", 99, "stores.trino.parallel_scans: Input should be less"),
    Case(
        "state.max_concurrent_runs",
        0,
        "state.max_concurrent_runs: Input should be greater than or equal",
    ),
    Case(
        "state.max_concurrent_runs",
        "many",
        "state.max_concurrent_runs: Input should be a valid integer",
    ),
    Case("stores.os.kind", "elastic", "stores.os: Input tag 'elastic' found using 'kind'"),
    Case("stores.trino.url", "trino://127.0.0.1:8080", "stores.trino.url: must be http(s)://"),
    Case("stores.trino.url", "https://u:p@127.0.0.1:8080", "stores.trino.url: must be http(s)://"),
    Case("stores.trino.url", "http://127.0.0.1:8080", "stores.trino.password: needs an https://"),
    Case("stores.trino.catalog", "", "stores.trino.catalog: must not be empty"),
    Case("stores.trino.schema", "", "stores.trino.schema: must not be empty"),
    Case("stores.trino.user", "", "stores.trino.user: must not be empty"),
    Case(
        "stores.trino.password",
        "env:DG_FUZZ_UNSET",
        "stores.trino.password: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case("stores.trino.verify", "", "stores.trino.verify"),
    Case(
        "stores.trino.timeout_seconds", 0, "stores.trino.timeout_seconds: Input should be greater"
    ),
    Case(
        "stores.trino.max_concurrent_queries",
        0,
        "stores.trino.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case("stores.trino.kind", "presto", "stores.trino: Input tag 'presto' found using 'kind'"),
    Case("stores.trino_jwt.token", "", "stores.trino_jwt.token: must not be empty"),
    Case(
        "stores.trino_jwt.password",
        "env:DG_FUZZ_PASSWORD",
        "stores.trino_jwt: give either 'password' or 'token'",
    ),
    Case("stores.spark.kind", "sparks", "stores.spark: Input tag 'sparks' found using 'kind'"),
    Case("stores.spark.url", "http://127.0.0.1:15002", "stores.spark.url: must be sc://host:port"),
    Case("stores.spark.url", "sc://127.0.0.1", "stores.spark.url: must be sc://host:port"),
    Case("stores.spark.token", "", "stores.spark.token: must not be empty"),
    Case(
        "stores.spark.token",
        "env:DG_FUZZ_UNSET",
        "stores.spark.token: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case(
        "stores.spark.timeout_seconds",
        0,
        "stores.spark.timeout_seconds: Input should be greater than 0",
    ),
    Case(
        "stores.spark.max_concurrent_queries",
        0,
        "stores.spark.max_concurrent_queries: Input should be greater than or equal",
    ),
    Case("stores.my.kind", "mysql", "stores.my: Input tag 'mysql' found using 'kind'"),
    Case("stores.my.dsn", "postgresql://u@h/x", "stores.my.dsn: must be a mysql://user:"),
    Case("stores.my.dsn", "mysql://u@h", "stores.my.dsn: must be a mysql://user:"),
    Case(
        "stores.my.dsn",
        "env:DG_FUZZ_UNSET",
        "stores.my.dsn: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case(
        "stores.my.timeout_seconds", 0, "stores.my.timeout_seconds: Input should be greater than 0"
    ),
    Case("stores.my.pool_max", 0, "stores.my.pool_max: Input should be greater than or equal"),
    Case("stores.es.kind", "elastic", "stores.es: Input tag 'elastic' found using 'kind'"),
    Case("stores.es.url", "ftp://127.0.0.1:9260", "stores.es.url: must be an http:// or"),
    Case("stores.es.username", "", "stores.es.username: must not be empty"),
    Case("stores.es.password", "", "stores.es.password: must not be empty"),
    Case(
        "stores.es.timeout_seconds", 0, "stores.es.timeout_seconds: Input should be greater than 0"
    ),
    Case("stores.es.verify_certs", "maybe", "stores.es.verify_certs: Input should be a valid"),
    Case("stores.duck.kind", "sqlite", "stores.duck: Input tag 'sqlite' found using 'kind'"),
    Case("stores.duck.database", "", "stores.duck.database: must not be empty"),
    Case(
        "stores.duck.timeout_seconds",
        0,
        "stores.duck.timeout_seconds: Input should be greater than 0",
    ),
    Case("stores.duck.threads", 0, "stores.duck.threads: Input should be greater than or equal"),
    Case("stores.duck.files", [], "stores.duck.files: Input should be a valid dictionary"),
    Case("stores.duck.files.orders.parquet", "", "stores.duck.files.orders.parquet: must not be"),
    Case(
        "stores.duck.files.orders.csv",
        "x.csv",
        "stores.duck.files.orders: give exactly one of 'parquet' or 'csv'",
    ),
    Case(
        "stores.duck.files.orders.hive_partitioning",
        "maybe",
        "stores.duck.files.orders.hive_partitioning: Input should be a valid boolean",
    ),
    Case("stores.api.kind", "http", "stores.api: Input tag 'http' found using 'kind'"),
    Case("stores.api.url", "ftp://h/{start}/{end}", "stores.api.url: must start with http://"),
    Case("stores.api.url", "http://h/x", "stores.api.url: {start} appears neither in url"),
    Case("stores.api.params", {"to": 1}, "stores.api.params.to: Input should be a valid string"),
    Case("stores.api.auth", {}, "stores.api.auth: give either 'bearer' or"),
    Case(
        "stores.api.auth.bearer",
        "env:DG_FUZZ_UNSET",
        "stores.api.auth.bearer: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case("stores.api_basic.auth.username", "", "stores.api_basic.auth.username: must not be"),
    Case("stores.api_basic.auth.password", DROP, "stores.api_basic.auth: basic auth needs both"),
    Case("stores.api.rows_path", 3, "stores.api.rows_path: Input should be a valid string"),
    Case("stores.api.page_size", 0, "stores.api.page_size: Input should be greater than or"),
    Case("stores.api.rate_limit", 0, "stores.api.rate_limit: Input should be greater than 0"),
    Case("stores.api.max_rows", 0, "stores.api.max_rows: Input should be greater than or"),
    Case(
        "stores.api.max_window_days",
        400,
        "stores.api.max_window_days: Input should be less than or equal",
    ),
    Case(
        "stores.api.timeout_seconds",
        0,
        "stores.api.timeout_seconds: Input should be greater than 0",
    ),
    Case(
        "stores.api.verify_certs",
        "maybe",
        "stores.api.verify_certs: Input should be a valid boolean",
    ),
    Case("stores.api.pagination", "cursor", "stores.api.pagination: Input should be a valid"),
    Case(
        "stores.api.pagination.style",
        "link",
        "stores.api.pagination.style: Input should be 'cursor', 'page', 'offset' or 'none'",
    ),
    Case(
        "stores.api.pagination.cursor_path",
        DROP,
        "stores.api.pagination: cursor pagination needs 'cursor_path'",
    ),
    Case(
        "stores.api.pagination.cursor_param",
        "",
        "stores.api.pagination.cursor_param: must not be empty",
    ),
    Case(
        "stores.api.pagination.page_param",
        "",
        "stores.api.pagination.page_param: must not be empty",
    ),
    Case(
        "stores.api.pagination.first_page",
        -1,
        "stores.api.pagination.first_page: Input should be greater than or equal to 0",
    ),
    Case(
        "stores.api.pagination.offset_param",
        "",
        "stores.api.pagination.offset_param: must not be empty",
    ),
    Case(
        "stores.api.pagination.size_param",
        "",
        "stores.api.pagination.size_param: must not be empty",
    ),
    Case("stores.os.url", "ftp://127.0.0.1:9250", "stores.os.url: must be an http:// or"),
    Case("stores.os.url", "http://", "stores.os.url: must be an http:// or https:// URL"),
    Case("stores.os.url", "http://127.0.0.1:99999", "stores.os.url: must be an http://"),
    Case(
        "stores.os.url",
        "http://admin:hunter2@127.0.0.1:9250",
        "stores.os.url: must not carry credentials",
    ),
    Case("stores.os.username", "", "stores.os.username: must not be empty"),
    Case("stores.os_sync.password", "", "stores.os_sync.password: must not be empty"),
    Case("stores.os_sync.password", "file:\x00", "stores.os_sync.password: file: needs a path"),
    Case("stores.pg.dsn", "env:", "stores.pg.dsn: env: needs an environment variable name"),
    Case("state.dsn", "env:A=B", "state.dsn: env: needs an environment variable name"),
    Case(
        "stores.os_sync.password",
        "env:DG_FUZZ_UNSET",
        "stores.os_sync.password: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case(
        "stores.os.timeout_seconds", -1, "stores.os.timeout_seconds: Input should be greater than 0"
    ),
    Case(
        "stores.os.verify_certs",
        "sometimes",
        "stores.os.verify_certs: Input should be a valid boolean",
    ),
    Case("state.dsn", "", "state.dsn: must not be empty"),
    Case("state.dsn", "mysql://u@h/db", "state.dsn: must be a postgresql:// URL"),
    Case("state.schema", "Bad-Schema", "state.schema: String should match pattern"),
    Case("state.retention.runs", "0s", "state.retention.runs: must be at least 1h, got 0s"),
    Case("state.retention.runs", "forever", "state.retention.runs: 'forever' is not a duration"),
    Case(
        "state.retention.ledger",
        "99999999999d",
        "state.retention.ledger: '99999999999d' is longer than 100 years",
    ),
    Case("state.lease", "60s", "state.lease: Input should be a valid dictionary"),
    Case("state.lease.heartbeat", "0s", "state.lease.heartbeat: must be at least 1s, got 0s"),
    Case(
        "state.lease.heartbeat",
        "31s",
        "state.lease: expires (60s) must be at least twice heartbeat (31s)",
    ),
    Case("state.lease.expires", "often", "state.lease.expires: 'often' is not a duration"),
    Case("state.lease.expires", "2d", "state.lease.expires: must be at most 1d, got 2d"),
    Case(
        "api.tokens",
        ["env:DG_FUZZ_UNSET"],
        "api.tokens.0: environment variable DG_FUZZ_UNSET is not set",
    ),
    Case("api.tokens", "t0ken", "api.tokens: Input should be a valid list"),
    Case("api.metrics_tokens", [""], "api.metrics_tokens.0: must not be empty"),
    Case("api.metrics_tokens", ["env:DG_FUZZ_EMPTY"], "api.metrics_tokens.0: the token is empty"),
    Case("api.metrics_public", "yes please", "api.metrics_public: Input should be a valid"),
    Case("api.live_concurrency", 0, "api.live_concurrency: Input should be greater than or"),
    Case("api.public_read", "maybe", "api.public_read: Input should be a valid boolean"),
    Case("api.sample_keys", 0, "api.sample_keys: Input should be greater than or equal to 1"),
    Case("api.sample_keys", 10_001, "api.sample_keys: Input should be less than or equal"),
    Case(
        "checks",
        {"Reviews!": base()["checks"]["reviews"]},
        "checks.Reviews!: (the name) String should match pattern",
    ),
    Case(f"{C}.description", 5, f"{C}.description: Input should be a valid string"),
    Case(f"{C}.source.store", "", f"{C}.source.store: must not be empty"),
    Case(f"{C}.source.store", "nowhere", f"{C}.source.store: unknown store 'nowhere'"),
    Case(f"{C}.source.query", "", f"{C}.source.query: must not be empty"),
    Case(f"{C}.source.table", "", f"{C}.source.table: must not be empty"),
    Case(
        f"{C}.source.table",
        "tasks",
        f"{C}.source: a postgres view needs exactly one of 'query' or 'table'",
    ),
    Case(f"{C}.source.index", "conv", f"{C}.source.index: only for opensearch views"),
    Case(f"{C}.source.filter", {}, f"{C}.source.filter: must not be empty"),
    Case(f"{C}.source.time", "", f"{C}.source.time: must not be empty"),
    Case(f"{C}.source.fields", {"label": ""}, f"{C}.source.fields.label: must not be empty"),
    Case(f"{C}.reader.index", "", f"{C}.reader.index: must not be empty"),
    Case(f"{C}.reader.index", DROP, f"{C}.reader.index: field required for an opensearch view"),
    Case(f"{C}.reader.filter", {}, f"{C}.reader.filter: must not be empty"),
    Case(
        f"{C}.reader.fields",
        {"nofield": "x"},
        f"{C}.reader.fields.nofield: not one of the check's fields",
    ),
    Case(f"{C}.reader.key", DROP, f"{C}.reader.key: field required"),
    Case(f"{C}.key_type", "uuid", f"{C}.key_type: Input should be 'string' or 'integer'"),
    Case(f"{C}.fields", {"label": "text"}, f"{C}.fields.label: Input should be 'string'"),
    Case(f"{C}.fields", {"": "string"}, f'{C}.fields."": (the name) must not be empty'),
    Case(
        f"{C}.measures",
        ["label"],
        f"{C}.measures[0]: field 'label' is string; a measure sums an integer or decimal",
    ),
    Case(f"{C}.measures", ["amount"], f"{C}.measures[0]: 'amount' is not one of the check's"),
    Case(f"{C}.measure_scale", 19, f"{C}.measure_scale: Input should be less than or equal"),
    Case(
        f"{C}.timestamp_precision",
        "ns",
        f"{C}.timestamp_precision: Input should be 'auto', 'ms' or 'us'",
    ),
    Case(f"{C}.row_hash", "crc", f"{C}.row_hash: Input should be 'auto', 'md5' or 'lookup3'"),
    Case(f"{C}.timezone", "Mars/Olympus", f"{C}.timezone: unknown time zone 'Mars/Olympus'"),
    Case(f"{C}.timezone", "", f"{C}.timezone: must not be empty"),
    Case(f"{C}.timezone", "x" * 300, f"{C}.timezone: unknown time zone 'xxx"),
    Case(
        f"{C}.exclusions.0.reason",
        "Bad Reason",
        f"{C}.exclusions.0.reason: String should match pattern",
    ),
    Case(f"{C}.exclusions.0.query", {}, f"{C}.exclusions.0.query: must not be empty"),
    Case(
        f"{C}.exclusions.0.query",
        {"term": {"a": 1}},
        f"{C}.exclusions.0: a postgres source excludes rows with 'where'",
    ),
    Case(f"{C}.exclusions", "none", f"{C}.exclusions: Input should be a valid list"),
    Case(f"{C}.settle", "-1h", f"{C}.settle: '-1h' is not a duration"),
    Case(f"{C}.settle", "91d", f"{C}.settle: must be at most 90d, got 91d"),
    Case(f"{C}.settle", "30m1h", f"{C}.settle: '30m1h': give each unit once, largest first"),
    Case(
        f"{C}.tolerance.missing_ratio",
        5,
        f"{C}.tolerance.missing_ratio: Input should be less than or equal to 1",
    ),
    Case(
        f"{C}.tolerance.missing_ratio",
        NAN,
        f"{C}.tolerance.missing_ratio: Input should be a finite number",
    ),
    Case(f"{C}.tolerance.extra", -1, f"{C}.tolerance.extra: Input should be greater than or"),
    Case(
        f"{C}.tolerance.mismatched",
        10**12,
        f"{C}.tolerance.mismatched: Input should be less than or equal to 1000000000",
    ),
    Case(
        f"{C}.tolerance.exclusion_rate",
        {"": 0.1},
        f'{C}.tolerance.exclusion_rate."": (the name) must not be empty',
    ),
    Case(f"{C}.drilldown.leaf_rows", 0, f"{C}.drilldown.leaf_rows: Input should be greater"),
    Case(f"{C}.drilldown.dense_ratio", 2, f"{C}.drilldown.dense_ratio: Input should be less"),
    Case(f"{C}.drilldown.max_depth", 9, f"{C}.drilldown.max_depth: Input should be less"),
    Case(
        f"{C}.drilldown.slot_first_pass_days",
        -1,
        f"{C}.drilldown.slot_first_pass_days: Input should be greater than or equal to 0",
    ),
    Case(f"{C}.schedule.recent.every", "often", f"{C}.schedule.recent.every: 'often' is not a"),
    Case(f"{C}.schedule.recent.days", 0, f"{C}.schedule.recent.days: Input should be greater"),
    Case(
        f"{C}.schedule.full",
        {"days": 30},
        f"{C}.schedule.full: give exactly one of 'every' or 'cron'",
    ),
    Case(f"{C}.schedule.full.every", "0s", f"{C}.schedule.full.every: must be at least 1s"),
    Case(f"{C}.schedule.full.cron", "* *", f"{C}.schedule.full.cron: expected 5 fields"),
    Case(f"{C}.schedule.full.cron", "0 0 30 2 *", f"{C}.schedule.full.cron: '0 0 30 2 *' never"),
    Case(f"{C}.schedule.full.days", 0, f"{C}.schedule.full.days: Input should be greater"),
    Case(
        f"{C}.schedule.recent",
        {"every": "1h", "days": 7, "day": 1},
        f"{C}.schedule.recent.day: unknown key",
    ),
    Case(f"{C}.ledger.job", "Bad Job", f"{C}.ledger.job: String should match pattern"),
    Case(
        f"{C}.ledger.summary_deadline",
        "31d",
        f"{C}.ledger.summary_deadline: must be at most 30d, got 31d",
    ),
    Case(f"{C}.ledger.no_match_rate", 2, f"{C}.ledger.no_match_rate: Input should be less"),
    Case(f"{C}.ledger.settle", "8d", f"{C}.ledger.settle: must be at most 7d, got 8d"),
    Case(f"{C}.canary.store", "", f"{C}.canary.store: must not be empty"),
    Case(f"{C}.canary.store", "pg", f"{C}.canary.store: the canary writes to OpenSearch"),
    Case(f"{C}.canary.index", "", f"{C}.canary.index: must not be empty"),
    Case(f"{C}.canary.document", "x", f"{C}.canary.document: Input should be a valid dict"),
    Case(
        f"{C}.canary.document",
        {"driftgauge_canary": 1},
        f"{C}.canary.document.driftgauge_canary: set by the canary itself",
    ),
    Case(f"{C}.canary.marker", "bad marker!", f"{C}.canary.marker: String should match"),
    Case(f"{C}.canary.write", "append", f"{C}.canary.write: Input should be 'index' or"),
    Case(f"{C}.canary.every", "0s", f"{C}.canary.every: must be at least 1m, got 0s"),
    Case(f"{C}.canary.every", "1s", f"{C}.canary.every: must be at least 1m, got 1s"),
    Case(f"{C}.canary.every", "1h", f"{C}.canary: give at most one of 'every' or 'cron'"),
    Case(f"{C}.canary.cron", "61 * * * *", f"{C}.canary.cron: minute: 61 is out of range"),
    Case(f"{C}.canary.timeout_seconds", INF, f"{C}.canary.timeout_seconds: Input should be a"),
    Case(f"{C}.canary.timeout_seconds", 601, f"{C}.canary.timeout_seconds: Input should be"),
    Case(f"{C}.canary.key_query", "", f"{C}.canary.key_query: must not be empty"),
    Case(f"{C}.vocabulary", {"nofield": {}}, f"{C}.vocabulary.nofield: not one of the check's"),
    Case(f"{C}.vocabulary.label.accepted", [], f"{C}.vocabulary.label.accepted: must list at"),
    Case(
        f"{C}.vocabulary.label.filter_field",
        "",
        f"{C}.vocabulary.label.filter_field: must not be empty",
    ),
    Case(f"{C}.volume.trailing", 1, f"{C}.volume.trailing: Input should be greater than"),
    Case(
        f"{C}.volume.min_history", 31, f"{C}.volume: min_history (31) must not exceed trailing (30)"
    ),
    Case(f"{C}.volume.min_history", 1, f"{C}.volume.min_history: Input should be greater"),
    Case(f"{C}.volume.sigmas", INF, f"{C}.volume.sigmas: Input should be a finite number"),
    Case(f"{C}.volume.sigmas", 0, f"{C}.volume.sigmas: Input should be greater than 0"),
    Case("state.colour", "blue", "state.colour: unknown key"),
]


def duplicated_key_text() -> str:
    """Return the base config with `settle` given twice in the check (the second would win)."""
    text = yaml.safe_dump(base(), sort_keys=False)
    return text.replace("    settle: 3h\n", "    settle: 3h\n    settle: 0s\n", 1)


DUPLICATE_PROBLEM = "checks.reviews.settle: duplicated key (lines"

# The findings of issues 10 and 16 plus one of each kind of check: run through `serve` and
# `config validate` as subprocesses (slower); every case goes through the shared loader.
SUBPROCESS_IDS = {
    f"{C}.schedule.full.cron='0 99 * * 0'",
    "stores.os.url='env:DG_FUZZ_URL'",
    f"{C}.settle='9999999999d'",
    f"{C}.schedule.recent.every='0s'",
    f"{C}.schedule.recent.every='0.0000001s'",
    f"{C}.canary.every='0s'",
    "checks={}",
    "api.tokens=['']",
    f"{C}.tolerance.exclusion_rate={{'no_join_key': 5}}",
    "stores.pg.dsn='env:DG_FUZZ_UNSET'",
}
SUBPROCESS = [c for c in CASES if c.id in SUBPROCESS_IDS]
