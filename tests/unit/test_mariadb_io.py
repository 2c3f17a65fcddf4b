"""The MariaDB I/O boundary: DSNs, and which driver errors become which StoreErrors."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from driftgauge.core.errors import (
    StorePermissionError,
    StoreQueryError,
    StoreTimeout,
    StoreUnavailable,
)
from driftgauge.stores.mariadb import io
from driftgauge.stores.mariadb.settings import dsn_shape


@pytest.mark.parametrize("dsn", ["mysql://u:p@db:3306/shop", "mariadb://u@db/shop"])
def test_a_mysql_url_with_a_database_is_a_dsn(dsn: str) -> None:
    assert dsn_shape(dsn) is None


@pytest.mark.parametrize("dsn", ["postgresql://u@db/x", "mysql://u@db", "mysql:///x", "db:3306"])
def test_anything_else_is_refused_without_showing_it(dsn: str) -> None:
    problem = dsn_shape(dsn)
    assert problem is not None and "mysql://" in problem and dsn not in problem


def test_connect_args_unquote_the_credentials() -> None:
    assert io.connect_args("mysql://r%40x:p%2Fw@db:3307/sh%20op") == {
        "host": "db",
        "port": 3307,
        "user": "r@x",
        "password": "p/w",
        "db": "sh op",
    }


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (
            pymysql.err.OperationalError(1045, "Access denied for user 'r'"),
            StorePermissionError,
            "1045 Access denied",
        ),
        (pymysql.err.ProgrammingError(1142, "SELECT command denied"), StorePermissionError, "1142"),
        (
            pymysql.err.OperationalError(
                1969, "Query execution was interrupted (max_statement_time exceeded)"
            ),
            StoreTimeout,
            "no answer within the timeout",
        ),
        (TimeoutError(), StoreTimeout, "no answer within the timeout"),
        (
            pymysql.err.OperationalError(2003, "Can't connect to MySQL server"),
            StoreUnavailable,
            "cannot use the connection (Can't connect",
        ),
        (ConnectionResetError("reset"), StoreUnavailable, "cannot use the connection"),
        (
            pymysql.err.ProgrammingError(1146, "Table 'x.no_such_table' doesn't exist"),
            StoreQueryError,
            "1146 Table 'x.no_such_table'",
        ),
        (
            pymysql.err.OperationalError(1054, "Unknown column 'nope' in 'field list'"),
            StoreQueryError,
            "1054 Unknown column 'nope'",
        ),
    ],
)
def test_driver_errors_map_to_store_errors(exc: BaseException, kind: type, text: str) -> None:
    err = io.translate_error("my", "bucket digests on t", exc)
    assert type(err) is kind
    assert str(err).startswith("my: bucket digests on t: ") and text in str(err)


class _Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


class _Pool:
    """Our own stand-in for aiomysql's pool: hands out one connection."""

    def __init__(self) -> None:
        self.conn = _Conn()
        self.released: list[Any] = []

    async def acquire(self) -> _Conn:
        return self.conn

    async def release(self, conn: Any) -> None:
        self.released.append(conn)


async def test_a_bug_inside_a_call_propagates_as_itself_and_drops_the_connection() -> None:
    pool = _Pool()
    with pytest.raises(KeyError):
        async with io.connection(pool, "my", "prefix digests", 1.0):
            raise KeyError("bucket")
    assert pool.conn.closed and pool.released == [pool.conn]


async def test_a_sql_error_keeps_the_connection_for_reuse() -> None:
    pool = _Pool()
    with pytest.raises(StoreQueryError, match="1146"):
        async with io.connection(pool, "my", "prefix digests", 1.0):
            raise pymysql.err.ProgrammingError(1146, "Table 'x.t' doesn't exist")
    assert not pool.conn.closed and pool.released == [pool.conn]
