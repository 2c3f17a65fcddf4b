"""Bad config values, field by field: a valid base config and what each bad value must say."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

HIDE = {"exists": {"field": "driftgauge_canary"}}
TIERS = {"terms": {"review_tier": ["first_tier", "second_tier"]}}


def tier_reader(time: str) -> dict[str, Any]:
    """Return an OpenSearch reader of review tiers by task_id that leaves out canary documents."""
    return {
        "store": "os",
        "index": "conv",
        "key": "task_id",
        "time": time,
        "fields": {"label": "review_tier"},
        "filter": {"bool": {"filter": [TIERS], "must_not": [HIDE]}},
    }


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
                    "reader": tier_reader("completed_at"),
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


class _Drop:
    """As a case's value: remove the key instead of setting it."""

    def __repr__(self) -> str:
        # A stable repr keeps the case ids the same from run to run.
        return "<drop>"


DROP = _Drop()


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


WRONG_KINDS = {
    "pg": "mysql",
    "os": "elastic",
    "trino": "presto",
    "spark": "sparks",
    "my": "mysql",
    "es": "elastic",
    "duck": "sqlite",
    "api": "http",
}
"""A kind tag no store kind has, for a store of each kind."""


SECRETS = (
    "stores.pg.dsn",
    "stores.trino.password",
    "stores.spark.token",
    "stores.my.dsn",
    "stores.api.auth.bearer",
    "stores.os_sync.password",
)
"""Secret fields of the base config: each is refused naming the unset variable it refers to."""


def at(path: str, value: Any, message: str, where: str | None = None) -> Case:
    """Return the case whose problem is `message` located at `where`, by default at `path`."""
    return Case(path, value, f"{path if where is None else where}: {message}")


def unset(path: str) -> Case:
    """Return the case of a secret at `path` that names the unset DG_FUZZ_UNSET."""
    return at(path, "env:DG_FUZZ_UNSET", "environment variable DG_FUZZ_UNSET is not set")


def above(path: str, value: Any, message: str) -> Case:
    """Return the case whose problem is located at the mapping that holds `path`."""
    return at(path, value, message, path.rsplit(".", 1)[0])


def within(path: str, value: Any, inner: str, message: str) -> Case:
    """Return the case whose problem is located inside the bad value, at `path` + `inner`."""
    return at(path, value, message, path + inner)


C = "checks.reviews"
INF, NAN = float("inf"), float("nan")
CASES = [
    # Issue 10, finding 5: validate accepted what serve then crashed on.
    at(f"{C}.schedule.full.cron", "0 99 * * 0", "hour: 99 is out of range 0-23"),
    at("stores.os.url", "env:DG_FUZZ_URL", "must be a URL, not a secret reference"),
    # Issue 10, finding 9: both day fields restricted (crontab ORs them) is refused.
    at(f"{C}.schedule.full.cron", "0 3 1 * 1", "'0 3 1 * 1' restricts both day of month"),
    # Issue 16, finding 3.
    at(f"{C}.settle", "9999999999d", "'9999999999d' is longer than 100 years"),
    at(f"{C}.schedule.recent.every", "99999999999w", "'99999999999w' is longer than 100 years"),
    at(f"{C}.schedule.recent.every", "0s", "must be at least 1s, got 0s"),
    at(f"{C}.schedule.recent.every", "0.0000001s", "'0.0000001s' is not a whole number of seconds"),
    at("checks", {}, "configure at least one check"),
    within(
        f"{C}.tolerance.exclusion_rate",
        {"no_join_key": -1},
        ".no_join_key",
        "Input should be greater than or equal to 0",
    ),
    within(
        f"{C}.tolerance.exclusion_rate",
        {"no_join_key": 5},
        ".no_join_key",
        "Input should be less than or equal to 1",
    ),
    at("stores.pg.timeout_seconds", INF, "Input should be a finite number"),
    at(
        "stores.os.url",
        "not a url",
        "must be an http:// or https:// URL with a host, got 'not a url'",
    ),
    at(f"{C}.source.key", "", "must not be empty"),
    at(f"{C}.exclusions.0.where", "", "must not be empty"),
    within("api.tokens", [""], ".0", "must not be empty"),
    within("api.tokens", ["env:DG_FUZZ_EMPTY"], ".0", "the token is empty"),
    # Every other field of the models.
    *(
        at(f"stores.{name}.kind", tag, f"Input tag '{tag}' found using 'kind'", f"stores.{name}")
        for name, tag in WRONG_KINDS.items()
    ),
    at("stores.pg.dsn", "", "must not be empty"),
    at("stores.pg.dsn", "host=db user=me", "must be a postgresql:// URL"),
    *(unset(path) for path in SECRETS),
    at("stores.pg.dsn", "env:DG_FUZZ_BAD_DSN", "env:DG_FUZZ_BAD_DSN must be a postgresql:// URL"),
    at(
        "stores.pg.dsn",
        "file:/nonexistent/dg-secret",
        "secret file /nonexistent/dg-secret cannot be read",
    ),
    at("stores.pg.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.pg.timeout_seconds", NAN, "Input should be a finite number"),
    at("stores.pg.timeout_seconds", 86400, "Input should be less than or equal to 3600"),
    at("stores.pg.timeout_seconds", "fast", "Input should be a valid number"),
    at("stores.pg.pool_max", 0, "Input should be greater than or equal"),
    at("stores.pg.pool_max", 101, "Input should be less than or equal"),
    at("stores.pg.pool_max", True, "Input should be a valid integer"),
    at("stores.pg.max_concurrent_queries", 0, "Input should be greater than or equal"),
    at("stores.pg.max_concurrent_queries", 1001, "Input should be less than or equal"),
    at("stores.os.max_concurrent_queries", True, "Input should be a valid integer"),
    at("stores.my.max_concurrent_queries", -1, "Input should be greater than or equal"),
    at("stores.es.max_concurrent_queries", 0, "Input should be greater than or equal"),
    at("stores.duck.max_concurrent_queries", "four", "Input should be a valid integer"),
    at("stores.api.max_concurrent_queries", 0, "Input should be greater than or equal"),
    at("stores.pg.parallel_scans", 0, "Input should be greater than or equal"),
    at("stores.os.parallel_scans", 33, "Input should be less than or equal"),
    at("stores.my.parallel_scans", "two", "Input should be a valid integer"),
    at("stores.es.parallel_scans", -1, "Input should be greater than or equal"),
    at("stores.duck.parallel_scans", 2, "a duckdb store runs one"),
    at("stores.api.parallel_scans", True, "Input should be a valid integer"),
    at("stores.spark.parallel_scans", 0, "Input should be greater"),
    at("stores.trino.parallel_scans", 99, "Input should be less"),
    at("state.max_concurrent_runs", 0, "Input should be greater than or equal"),
    at("state.max_concurrent_runs", "many", "Input should be a valid integer"),
    at("stores.trino.url", "trino://127.0.0.1:8080", "must be http(s)://"),
    at("stores.trino.url", "https://u:p@127.0.0.1:8080", "must be http(s)://"),
    at("stores.trino.url", "http://127.0.0.1:8080", "needs an https://", "stores.trino.password"),
    at("stores.trino.catalog", "", "must not be empty"),
    at("stores.trino.schema", "", "must not be empty"),
    at("stores.trino.user", "", "must not be empty"),
    Case("stores.trino.verify", "", "stores.trino.verify"),
    at("stores.trino.timeout_seconds", 0, "Input should be greater"),
    at("stores.trino.max_concurrent_queries", 0, "Input should be greater than or equal"),
    at("stores.trino_jwt.token", "", "must not be empty"),
    above("stores.trino_jwt.password", "env:DG_FUZZ_PASSWORD", "give either 'password' or 'token'"),
    at("stores.spark.url", "http://127.0.0.1:15002", "must be sc://host:port"),
    at("stores.spark.url", "sc://127.0.0.1", "must be sc://host:port"),
    at("stores.spark.token", "", "must not be empty"),
    at("stores.spark.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.spark.max_concurrent_queries", 0, "Input should be greater than or equal"),
    at("stores.my.dsn", "postgresql://u@h/x", "must be a mysql://user:"),
    at("stores.my.dsn", "mysql://u@h", "must be a mysql://user:"),
    at("stores.my.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.my.pool_max", 0, "Input should be greater than or equal"),
    at("stores.es.url", "ftp://127.0.0.1:9260", "must be an http:// or"),
    at("stores.es.username", "", "must not be empty"),
    at("stores.es.password", "", "must not be empty"),
    at("stores.es.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.es.verify_certs", "maybe", "Input should be a valid"),
    at("stores.duck.database", "", "must not be empty"),
    at("stores.duck.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.duck.threads", 0, "Input should be greater than or equal"),
    at("stores.duck.files", [], "Input should be a valid dictionary"),
    at("stores.duck.files.orders.parquet", "", "must not be"),
    above("stores.duck.files.orders.csv", "x.csv", "give exactly one of 'parquet' or 'csv'"),
    at("stores.duck.files.orders.hive_partitioning", "maybe", "Input should be a valid boolean"),
    at("stores.api.url", "ftp://h/{start}/{end}", "must start with http://"),
    at("stores.api.url", "http://h/x", "{start} appears neither in url"),
    within("stores.api.params", {"to": 1}, ".to", "Input should be a valid string"),
    at("stores.api.auth", {}, "give either 'bearer' or"),
    at("stores.api_basic.auth.username", "", "must not be"),
    above("stores.api_basic.auth.password", DROP, "basic auth needs both"),
    at("stores.api.rows_path", 3, "Input should be a valid string"),
    at("stores.api.page_size", 0, "Input should be greater than or"),
    at("stores.api.rate_limit", 0, "Input should be greater than 0"),
    at("stores.api.max_rows", 0, "Input should be greater than or"),
    at("stores.api.max_window_days", 400, "Input should be less than or equal"),
    at("stores.api.timeout_seconds", 0, "Input should be greater than 0"),
    at("stores.api.verify_certs", "maybe", "Input should be a valid boolean"),
    at("stores.api.pagination", "cursor", "Input should be a valid"),
    at(
        "stores.api.pagination.style",
        "link",
        "Input should be 'cursor', 'page', 'offset' or 'none'",
    ),
    above("stores.api.pagination.cursor_path", DROP, "cursor pagination needs 'cursor_path'"),
    at("stores.api.pagination.cursor_param", "", "must not be empty"),
    at("stores.api.pagination.page_param", "", "must not be empty"),
    at("stores.api.pagination.first_page", -1, "Input should be greater than or equal to 0"),
    at("stores.api.pagination.offset_param", "", "must not be empty"),
    at("stores.api.pagination.size_param", "", "must not be empty"),
    at("stores.os.url", "ftp://127.0.0.1:9250", "must be an http:// or"),
    at("stores.os.url", "http://", "must be an http:// or https:// URL"),
    at("stores.os.url", "http://127.0.0.1:99999", "must be an http://"),
    at("stores.os.url", "http://admin:hunter2@127.0.0.1:9250", "must not carry credentials"),
    at("stores.os.username", "", "must not be empty"),
    at("stores.os_sync.password", "", "must not be empty"),
    at("stores.os_sync.password", "file:\x00", "file: needs a path"),
    at("stores.pg.dsn", "env:", "env: needs an environment variable name"),
    at("state.dsn", "env:A=B", "env: needs an environment variable name"),
    at("stores.os.timeout_seconds", -1, "Input should be greater than 0"),
    at("stores.os.verify_certs", "sometimes", "Input should be a valid boolean"),
    at("state.dsn", "", "must not be empty"),
    at("state.dsn", "mysql://u@h/db", "must be a postgresql:// URL"),
    at("state.schema", "Bad-Schema", "String should match pattern"),
    at("state.retention.runs", "0s", "must be at least 1h, got 0s"),
    at("state.retention.runs", "forever", "'forever' is not a duration"),
    at("state.retention.ledger", "99999999999d", "'99999999999d' is longer than 100 years"),
    at("state.lease", "60s", "Input should be a valid dictionary"),
    at("state.lease.heartbeat", "0s", "must be at least 1s, got 0s"),
    above("state.lease.heartbeat", "31s", "expires (60s) must be at least twice heartbeat (31s)"),
    at("state.lease.expires", "often", "'often' is not a duration"),
    at("state.lease.expires", "2d", "must be at most 1d, got 2d"),
    within(
        "api.tokens", ["env:DG_FUZZ_UNSET"], ".0", "environment variable DG_FUZZ_UNSET is not set"
    ),
    at("api.tokens", "t0ken", "Input should be a valid list"),
    within("api.metrics_tokens", [""], ".0", "must not be empty"),
    within("api.metrics_tokens", ["env:DG_FUZZ_EMPTY"], ".0", "the token is empty"),
    at("api.metrics_public", "yes please", "Input should be a valid"),
    at("api.live_concurrency", 0, "Input should be greater than or"),
    at("api.public_read", "maybe", "Input should be a valid boolean"),
    at("api.sample_keys", 0, "Input should be greater than or equal to 1"),
    at("api.sample_keys", 10_001, "Input should be less than or equal"),
    within(
        "checks",
        {"Reviews!": base()["checks"]["reviews"]},
        ".Reviews!",
        "(the name) String should match pattern",
    ),
    at(f"{C}.description", 5, "Input should be a valid string"),
    at(f"{C}.source.store", "", "must not be empty"),
    at(f"{C}.source.store", "nowhere", "unknown store 'nowhere'"),
    at(f"{C}.source.query", "", "must not be empty"),
    at(f"{C}.source.table", "", "must not be empty"),
    above(f"{C}.source.table", "tasks", "a postgres view needs exactly one of 'query' or 'table'"),
    at(f"{C}.source.index", "conv", "only for opensearch views"),
    at(f"{C}.source.filter", {}, "must not be empty"),
    at(f"{C}.source.time", "", "must not be empty"),
    within(f"{C}.source.fields", {"label": ""}, ".label", "must not be empty"),
    at(f"{C}.reader.index", "", "must not be empty"),
    at(f"{C}.reader.index", DROP, "field required for an opensearch view"),
    at(f"{C}.reader.filter", {}, "must not be empty"),
    within(f"{C}.reader.fields", {"nofield": "x"}, ".nofield", "not one of the check's fields"),
    at(f"{C}.reader.key", DROP, "field required"),
    at(f"{C}.key_type", "uuid", "Input should be 'string' or 'integer'"),
    within(f"{C}.fields", {"label": "text"}, ".label", "Input should be 'string'"),
    within(f"{C}.fields", {"": "string"}, '.""', "(the name) must not be empty"),
    within(
        f"{C}.measures",
        ["label"],
        "[0]",
        "field 'label' is string; a measure sums an integer or decimal",
    ),
    within(f"{C}.measures", ["amount"], "[0]", "'amount' is not one of the check's"),
    at(f"{C}.measure_scale", 19, "Input should be less than or equal"),
    at(f"{C}.timestamp_precision", "ns", "Input should be 'auto', 'ms' or 'us'"),
    at(f"{C}.row_hash", "crc", "Input should be 'auto', 'md5' or 'lookup3'"),
    at(f"{C}.timezone", "Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    at(f"{C}.timezone", "", "must not be empty"),
    at(f"{C}.timezone", "x" * 300, "unknown time zone 'xxx"),
    at(f"{C}.exclusions.0.reason", "Bad Reason", "String should match pattern"),
    at(f"{C}.exclusions.0.query", {}, "must not be empty"),
    above(
        f"{C}.exclusions.0.query",
        {"term": {"a": 1}},
        "a postgres source excludes rows with 'where'",
    ),
    at(f"{C}.exclusions", "none", "Input should be a valid list"),
    at(f"{C}.settle", "-1h", "'-1h' is not a duration"),
    at(f"{C}.settle", "91d", "must be at most 90d, got 91d"),
    at(f"{C}.settle", "30m1h", "'30m1h': give each unit once, largest first"),
    at(f"{C}.tolerance.missing_ratio", 5, "Input should be less than or equal to 1"),
    at(f"{C}.tolerance.missing_ratio", NAN, "Input should be a finite number"),
    at(f"{C}.tolerance.extra", -1, "Input should be greater than or"),
    at(f"{C}.tolerance.mismatched", 10**12, "Input should be less than or equal to 1000000000"),
    within(f"{C}.tolerance.exclusion_rate", {"": 0.1}, '.""', "(the name) must not be empty"),
    at(f"{C}.drilldown.leaf_rows", 0, "Input should be greater"),
    at(f"{C}.drilldown.dense_ratio", 2, "Input should be less"),
    at(f"{C}.drilldown.max_depth", 9, "Input should be less"),
    at(f"{C}.drilldown.slot_first_pass_days", -1, "Input should be greater than or equal to 0"),
    at(f"{C}.schedule.recent.every", "often", "'often' is not a"),
    at(f"{C}.schedule.recent.days", 0, "Input should be greater"),
    at(f"{C}.schedule.full", {"days": 30}, "give exactly one of 'every' or 'cron'"),
    at(f"{C}.schedule.full.every", "0s", "must be at least 1s"),
    at(f"{C}.schedule.full.cron", "* *", "expected 5 fields"),
    at(f"{C}.schedule.full.cron", "0 0 30 2 *", "'0 0 30 2 *' never"),
    at(f"{C}.schedule.full.days", 0, "Input should be greater"),
    within(f"{C}.schedule.recent", {"every": "1h", "days": 7, "day": 1}, ".day", "unknown key"),
    at(f"{C}.ledger.job", "Bad Job", "String should match pattern"),
    at(f"{C}.ledger.summary_deadline", "31d", "must be at most 30d, got 31d"),
    at(f"{C}.ledger.no_match_rate", 2, "Input should be less"),
    at(f"{C}.ledger.settle", "8d", "must be at most 7d, got 8d"),
    at(f"{C}.canary.store", "", "must not be empty"),
    at(f"{C}.canary.store", "pg", "the canary writes to OpenSearch"),
    at(f"{C}.canary.index", "", "must not be empty"),
    at(f"{C}.canary.document", "x", "Input should be a valid dict"),
    within(
        f"{C}.canary.document",
        {"driftgauge_canary": 1},
        ".driftgauge_canary",
        "set by the canary itself",
    ),
    at(f"{C}.canary.marker", "bad marker!", "String should match"),
    at(f"{C}.canary.write", "append", "Input should be 'index' or"),
    at(f"{C}.canary.every", "0s", "must be at least 1m, got 0s"),
    at(f"{C}.canary.every", "1s", "must be at least 1m, got 1s"),
    above(f"{C}.canary.every", "1h", "give at most one of 'every' or 'cron'"),
    at(f"{C}.canary.cron", "61 * * * *", "minute: 61 is out of range"),
    at(f"{C}.canary.timeout_seconds", INF, "Input should be a"),
    at(f"{C}.canary.timeout_seconds", 601, "Input should be"),
    at(f"{C}.canary.key_query", "", "must not be empty"),
    within(f"{C}.vocabulary", {"nofield": {}}, ".nofield", "not one of the check's"),
    at(f"{C}.vocabulary.label.accepted", [], "must list at"),
    at(f"{C}.vocabulary.label.filter_field", "", "must not be empty"),
    at(f"{C}.volume.trailing", 1, "Input should be greater than"),
    above(f"{C}.volume.min_history", 31, "min_history (31) must not exceed trailing (30)"),
    at(f"{C}.volume.min_history", 1, "Input should be greater"),
    at(f"{C}.volume.sigmas", INF, "Input should be a finite number"),
    at(f"{C}.volume.sigmas", 0, "Input should be greater than 0"),
    at("state.colour", "blue", "unknown key"),
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
