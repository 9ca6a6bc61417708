"""The ``sql`` verb: run a query (text, a ``sql/`` file or a table name) and print a table."""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from pipeline.errors import TraceError
from pipeline.warehouse.db import (
    CHECKS_DIR,
    REPORTS_DIR,
    SQL_DIR,
    connect,
    describe_error,
    sql_text,
)

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NAME = re.compile(r"^[\w./-]+$")


def sql(
    db: Path, query_or_file: str, *, max_rows: int | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``query_or_file`` on warehouse ``db`` (read-only); its column names and rows.

    ``query_or_file`` is SQL text (several statements allowed, the last one's result is
    returned, e.g. ``SET VARIABLE baseline_policy = 'x'; FROM cost_savings``), a path to a
    ``.sql`` file, a name from ``sql/`` (``policy_summary``, ``checks/no_node_over_capacity``,
    ``every_task_accounted_for``), or a table or view name.  ``max_rows`` caps the rows fetched.
    """
    query, source = resolve_query(query_or_file)
    with connect(db, read_only=True) as con:
        try:
            result = con.execute(query)
            if result.description is None:
                return [], []
            columns = [d[0] for d in result.description]
            rows = result.fetchall() if max_rows is None else result.fetchmany(max_rows)
        except duckdb.CatalogException as exc:
            if IDENTIFIER.match(query_or_file.strip()):
                raise TraceError(unknown_name(con, query_or_file.strip()), source) from exc
            raise TraceError(describe_error(exc), source) from exc
        except duckdb.Error as exc:
            raise TraceError(describe_error(exc), source) from exc
    return columns, rows


def unknown_name(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The answer to a name that is no query, check, table or view: the names there are."""
    reports = sorted(p.stem for p in REPORTS_DIR.glob("*.sql"))
    checks = sorted(p.stem for p in CHECKS_DIR.glob("*.sql"))
    tables = sorted({r[0] for r in con.execute(
        "select table_name from information_schema.tables "
        "where table_schema = 'main'").fetchall()} - set(reports))
    close = difflib.get_close_matches(name, reports + checks + tables, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (f"no report query, check, table or view named '{name}'{hint}; report queries: "
            f"{', '.join(reports)}; checks: {', '.join(checks)}; tables: {', '.join(tables)}")


FORMATS = ("table", "csv", "json", "markdown")
CELL_CHARS = 60  # a table cell longer than this is shortened (csv and json keep it whole)


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table") -> str:
    """The result as ``fmt``: an aligned table, CSV, JSON lines or a Markdown table."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown format '{fmt}' (formats: {', '.join(FORMATS)})",
                         field="--format")
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_plain(v) for v in row] for row in rows)
        return out.getvalue().rstrip("\n")
    if fmt == "json":
        return "\n".join(json.dumps(dict(zip(columns, map(_json_value, row), strict=True)),
                                    default=str) for row in rows)
    if fmt == "markdown":
        cells = [[_short(format_value(_compact(v))).replace("|", "\\|") for v in row]
                 for row in rows]
        head = "| " + " | ".join(columns) + " |"
        rule = "|" + "|".join("---" for _ in columns) + "|"
        return "\n".join([head, rule, *("| " + " | ".join(r) + " |" for r in cells)])
    return format_table(columns, [[_compact(v) for v in row] for row in rows], short=True)


def _plain(value: Any) -> Any:
    return "" if value is None else value  # full precision: CSV is for programs


def _json_value(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _compact(value: Any) -> Any:
    """A JSON object's text as ``k=v, k=v`` (nested values as JSON), other values as they are."""
    parsed = _json_value(value)
    if isinstance(parsed, dict):
        return ", ".join(f"{k}={v if not isinstance(v, dict | list) else json.dumps(v)}"
                         for k, v in parsed.items())
    return value


def _short(text: str) -> str:
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "\u2026"


def resolve_query(query_or_file: str) -> tuple[str, str]:
    """The SQL to run for ``query_or_file`` and where it came from (for error messages)."""
    text = query_or_file.strip()
    if not NAME.match(text):
        return text, "query"
    path = find_sql_file(text)
    if path is not None:
        return sql_text(path), str(path)
    if text.endswith(".sql"):
        raise TraceError("no such SQL file (looked in the working directory and sql/)", text)
    if IDENTIFIER.match(text):
        return f'select * from "{text}"', text
    return text, "query"


def find_sql_file(name: str) -> Path | None:
    """The file ``name`` refers to: a path, or a name under sql/, sql/reports or sql/checks."""
    given = Path(name)
    if given.is_file():
        return given
    stems = [name] if name.endswith(".sql") else [name, f"{name}.sql"]
    for folder in (SQL_DIR, REPORTS_DIR, CHECKS_DIR):
        for stem in stems:
            path = folder / stem
            if path.is_file():
                return path
    return None


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                 short: bool = False) -> str:
    """A plain aligned text table: header, rule, rows (numbers right-aligned), row count;
    ``short``: cells longer than ``CELL_CHARS`` are cut with an ellipsis."""
    if not columns:
        return "(no result)"
    cells = [[_short(format_value(v)) if short else format_value(v) for v in row]
             for row in rows]
    numeric = [
        all(_is_number(row[i]) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(columns))
    ]
    widths = [
        max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)
    ]

    def line(values: Sequence[str]) -> str:
        padded = (
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        )
        return " | ".join(padded).rstrip()

    out = [line(list(columns)), "-+-".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def format_value(value: Any) -> str:
    """One cell as text: NULL, floats to 6 significant digits, dates in ISO form."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return _float_text(value)
    if isinstance(value, datetime | date):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def _float_text(value: float, digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits, in fixed notation unless tiny or huge."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value))) + 1
    if magnitude < -3 or magnitude > 15:
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{max(digits - magnitude, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)
