"""Plain-text rendering for the CLI: the day table, the drill-down and a progress bar."""

from __future__ import annotations

from decimal import Decimal
from typing import TextIO

from driftgauge.engine.payloads import DrillOut
from driftgauge.engine.result import RunResult, measures_text

COLUMNS = ("day", "expected", "excluded", "visible", "missing", "extra", "mismatched", "status")


def render_run(result: RunResult) -> str:
    """Return the per-day table of a run, with totals."""
    rows: list[tuple[str, ...]] = [COLUMNS]
    for b in result.buckets:
        rows.append(
            (
                b.start.date().isoformat(),
                str(b.expected),
                str(b.excluded_total),
                str(b.visible),
                str(b.missing),
                str(b.extra),
                str(b.mismatched),
                b.status,
            )
        )
    judged = [b for b in result.buckets if b.status != "settling"]
    rows.append(
        (
            "total",
            *(
                str(sum(getattr(b, c) for b in judged))
                for c in ("expected", "excluded_total", "visible", "missing", "extra", "mismatched")
            ),
            result.status,
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(
            c.rjust(w) if i not in (0, 7) else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    drifted = [b for b in result.buckets if b.status == "drift"]
    for b in drifted[:10]:
        lines.append(f"{b.start.date()}: " + "; ".join(b.reasons))
        for k in b.samples[:5]:
            lines.append(f"    {k.kind:<10} {'NULL' if k.key is None else k.key}")
    for b in [b for b in result.buckets if b.status == "error"][:10]:
        lines.append(f"{b.start.date()}: error: " + "; ".join(b.reasons))
    if result.status == "nothing_judged":
        settling = sum(b.status == "settling" for b in result.buckets)
        lines.append(
            f"nothing judged: {settling} of {len(result.buckets)} day buckets "
            "settling, none old enough to judge; this is not a pass"
        )
    lines.extend(render_totals(result))
    lines.append(
        f"{len(result.buckets)} day buckets, {result.queries} store queries, "
        f"{result.rows_fetched} rows fetched, {result.rows_scanned} rows scanned, "
        f"row hash {result.row_hash}"
    )
    return "\n".join(lines)


def render_totals(result: RunResult) -> list[str]:
    """Return each day's measure totals, source then reader, a differing one marked."""
    lines: list[str] = []
    for b in result.buckets:
        src = measures_text(b.source) or {}
        rdr = measures_text(b.reader) or {}
        for name in sorted(src.keys() | rdr.keys()):
            if not lines:
                lines.append("measure totals (source / reader):")
            a, z = src.get(name, "0"), rdr.get(name, "0")
            mark = "  <--" if Decimal(a) != Decimal(z) else ""
            lines.append(f"  {b.start.date()} {name} {a} / {z}{mark}")
    return lines


def render_drill(report: DrillOut) -> str:
    """Return one drill-down level as text: nodes that differ first, then keys."""
    head = f"{report.check} {report.day}"
    if report.hour is not None:
        head += f" hour {report.hour}"
    if report.prefix:
        head += f" prefix {report.prefix}"
    lines = [head, f"{'node':<28} {'source':>9} {'reader':>9}  differs"]
    for n in report.nodes:
        mark = "  <--" if n.differs else ""
        lines.append(
            f"{n.label:<28} {n.source.count:>9} {n.reader.count:>9}"
            f"  {'yes' if n.differs else 'no'}{mark}"
        )
    for n in report.nodes:
        for name in sorted((n.source.measures or {}).keys() | (n.reader.measures or {}).keys()):
            lines.append(
                f"  {n.label} {name} {(n.source.measures or {}).get(name, '0')} / "
                f"{(n.reader.measures or {}).get(name, '0')}"
            )
    if report.unexplained:
        lines.append(f"error: {report.unexplained}")
    if report.keys:
        lines.append("differing keys:")
        lines.extend(
            f"  {k.kind:<10} {k.key}  (source {k.source_copies}, reader {k.reader_copies})"
            for k in report.keys
        )
    return "\n".join(lines)


class ProgressBar:
    """A one-line progress bar on a terminal; silent when output is not a TTY."""

    def __init__(self, stream: TextIO, label: str, width: int = 30) -> None:
        self.stream, self.label, self.width = stream, label, width
        self.active = stream.isatty()

    def update(self, done: int, total: int) -> None:
        """Redraw the bar for `done` of `total` day buckets."""
        if not self.active or total <= 0:
            return
        filled = self.width * done // total
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} days"
        )
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.active:
            self.stream.write("\n")
            self.stream.flush()
