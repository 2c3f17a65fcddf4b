"""Bounded deletes: many short statements of at most one batch of rows each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftgauge.pg.calls import PgCalls

BATCH = 5000
"""Rows per statement: small enough that no delete holds its locks for long."""


@dataclass(frozen=True)
class Tally:
    """Which counter series a deleted row still counts in, by which columns."""

    series: str
    name: str
    label: str


@dataclass(frozen=True)
class Family:
    """Rows of a table past retention, and the rows of other tables that hang off them.

    `where` selects the rows to delete, over the unaliased table, with `args` as $1, $2, …
    With `children`, the table has an `id` and each child is (table, column holding it);
    children go first, a batch at a time, so no cascade deletes an unbounded number of rows.
    """

    table: str
    where: str
    args: tuple[Any, ...] = ()
    children: tuple[tuple[str, str], ...] = ()
    tally: Tally | None = None

    def tables(self) -> list[str]:
        """Return the tables this family deletes from, in order."""
        return [*(t for t, _ in self.children), self.table]


class Batches:
    """Delete a family's rows (or, dry, count them), each statement under the deadline."""

    def __init__(self, db: PgCalls, size: int = BATCH) -> None:
        self._db = db
        self.size = size

    async def count(self, fam: Family) -> dict[str, int]:
        """Return how many rows of each table the family would delete now."""
        out: dict[str, int] = {}
        async with self._db.conn(f"count rows to prune in {fam.table}", scale=3) as conn:
            for child, column in fam.children:
                out[child] = int(
                    await conn.fetchval(
                        f"SELECT count(*) FROM {child} WHERE {column} IN"
                        f" (SELECT id FROM {fam.table} WHERE {fam.where})",
                        *fam.args,
                    )
                )
            out[fam.table] = int(
                await conn.fetchval(
                    f"SELECT count(*) FROM {fam.table} WHERE {fam.where}", *fam.args
                )
            )
        return out

    async def delete(self, fam: Family) -> dict[str, int]:
        """Delete the family's rows a batch at a time; return how many per table."""
        out = dict.fromkeys(fam.tables(), 0)
        n = len(fam.args)
        if not fam.children:
            pick = (
                f"ctid = ANY(ARRAY(SELECT ctid FROM {fam.table} WHERE {fam.where} LIMIT ${n + 1}))"
            )
            out[fam.table] = await self._drain(
                fam.table, self._statement(fam, pick), *fam.args, self.size
            )
            return out
        while True:
            ids = [
                r["id"]
                for r in await self._db.fetch(
                    f"list rows to prune in {fam.table}",
                    f"SELECT id FROM {fam.table} WHERE {fam.where} ORDER BY id LIMIT ${n + 1}",
                    *fam.args,
                    self.size,
                )
            ]
            if not ids:
                return out
            for child, column in fam.children:
                out[child] += await self._drain(
                    child,
                    f"WITH gone AS (DELETE FROM {child} WHERE ctid = ANY(ARRAY("
                    f"SELECT ctid FROM {child} WHERE {column} = ANY($1::bigint[]) LIMIT $2))"
                    " RETURNING 1) SELECT count(*) FROM gone",
                    ids,
                    self.size,
                )
            # The predicate is checked again: a row it no longer selects stays.
            statement = self._statement(fam, f"id = ANY(${n + 1}::bigint[]) AND {fam.where}")
            async with self._db.transaction(f"prune {fam.table}", scale=3) as conn:
                gone = int(await conn.fetchval(statement, *fam.args, ids))
            out[fam.table] += gone
            if gone == 0 or len(ids) < self.size:
                return out

    def _statement(self, fam: Family, pick: str) -> str:
        """Return a delete of the rows `pick` selects that tallies them and returns a count."""
        if fam.tally is None:
            return (
                f"WITH gone AS (DELETE FROM {fam.table} WHERE {pick} RETURNING 1)"
                " SELECT count(*) FROM gone"
            )
        t = fam.tally
        return (
            f"WITH gone AS (DELETE FROM {fam.table} WHERE {pick}"
            f" RETURNING {t.name} AS name, {t.label} AS label),"
            " tallied AS (INSERT INTO pruned_counts (series, name, label, n)"
            f" SELECT '{t.series}', name, label, count(*) FROM gone"
            " WHERE label IS NOT NULL GROUP BY name, label"
            " ON CONFLICT (series, name, label) DO UPDATE SET n = pruned_counts.n + EXCLUDED.n)"
            " SELECT count(*) FROM gone"
        )

    async def _drain(self, table: str, statement: str, *args: Any) -> int:
        """Run a delete of at most one batch until it deletes less than a batch."""
        total = 0
        while True:
            async with self._db.transaction(f"prune {table}", scale=3) as conn:
                gone = int(await conn.fetchval(statement, *args))
            total += gone
            if gone < self.size:
                return total
