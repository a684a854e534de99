"""Reference backend of the ``analytics`` toolset, on the generated shop database.

Analysts see the five public tables with the columns their specs list. ``sort_order`` is
checked against the backend's own configured values, exactly (default ``ASC``/``DESC``): a
description that teaches ``asc`` while the backend wants ``ASC`` fails here, as it would in
production. Every result carries a ``result_id`` (``res_`` + 8 hex, derived from the call) that
``export_report`` accepts while this backend lives.
"""

from __future__ import annotations

import re
import statistics
import threading
from datetime import date, timedelta
from typing import Any, Sequence

from bench.executor.backends.base import (Handler, ShopDB, check_date_range, cooperative,
                                          stable_id)
from bench.executor.backends.shopdb import TODAY
from bench.executor.outcome import CallContext, permanent_error, validation_error

PUBLIC_COLUMNS = {
    "orders": ("order_id", "customer_id", "status", "total_cny", "created_at"),
    "order_items": ("order_id", "product_id", "quantity", "unit_price_cny"),
    "products": ("product_id", "name_zh", "name_en", "category", "price_cny", "stock",
                 "sales_30d"),
    "customers": ("customer_id", "name", "email", "city", "language", "created_at"),
    "shipments": ("tracking_number", "order_id", "carrier", "status", "shipped_at",
                  "delivered_at"),
}
DATE_COLUMN = {"orders": "created_at", "customers": "created_at", "shipments": "shipped_at"}
TABLE_NOTES = {"orders": "one row per order", "order_items": "one row per product line",
               "products": "the current catalogue", "customers": "registered customers",
               "shipments": "one row per parcel"}
COMPANY_DOMAINS = ("@shop.example.com", "@partner.example.com")
REVENUE_STATUSES = "('paid', 'shipped', 'delivered')"
_PERIOD_SQL = {"day": "substr({c}, 1, 10)", "month": "substr({c}, 1, 7)",
               "week": "date({c}, 'weekday 0', '-6 days')", "total": "'total'"}
# a column name may hold digits after its first letter (sales_30d), as the schema's pattern allows
_METRIC = re.compile(r"^(count\(\*\)|(count_distinct|sum|avg|min|max)\(([a-z_][a-z0-9_]*)\))$")


def _period(granularity: str, column: str) -> str:
    return _PERIOD_SQL[granularity].format(c=column)


def _dates(args: dict[str, Any], column: str, where: list[str], params: list[object]) -> None:
    if args.get("date_from"):
        where.append(f"substr({column}, 1, 10) >= ?")
        params.append(args["date_from"])
    if args.get("date_to"):
        where.append(f"substr({column}, 1, 10) <= ?")
        params.append(args["date_to"])


class AnalyticsBackend:
    """Handlers of the 11 analytics tools.

    Args:
        db: the shop database.
        sort_order_values: the accepted ``sort_order`` values, (ascending, descending).
    """

    def __init__(self, db: ShopDB, sort_order_values: Sequence[str] = ("ASC", "DESC")) -> None:
        self.db = db
        self.sort_values = tuple(sort_order_values)
        self._results: dict[str, int] = {}  # result_id -> rows, for export_report
        self._lock = threading.Lock()

    def handlers(self) -> dict[str, Handler]:
        """Tool name -> :class:`Handler` (all cooperative: SQLite stops at the deadline)."""
        return cooperative({
            "query_metrics": Handler(self.query_metrics, check=self._check_sorted),
            "run_sql": Handler(self.run_sql),
            "list_tables": Handler(self.list_tables),
            "describe_table": Handler(self.describe_table),
            "sales_summary": Handler(self.sales_summary, check=self._check_range),
            "top_products": Handler(self.top_products, check=self._check_sorted),
            "top_customers": Handler(self.top_customers, permission="sensitive",
                                     check=self._check_sorted),
            "cohort_retention": Handler(self.cohort_retention, check=check_date_range),
            "detect_anomalies": Handler(self.detect_anomalies, check=self._check_anomaly_range),
            "export_report": Handler(self.export_report, permission="write"),
            "schedule_report": Handler(self.schedule_report, permission="write",
                                       check=self._check_schedule),
        })

    # -- business rules ----------------------------------------------------------------------

    def _check_sorted(self, args: dict[str, Any]) -> None:
        check_date_range(args)
        value = args.get("sort_order")
        if value is not None and value not in self.sort_values:
            raise validation_error("invalid_sort_order", f"sort_order must be exactly one of "
                                   f"{', '.join(self.sort_values)}; got {value!r}")

    @staticmethod
    def _check_range(args: dict[str, Any]) -> None:
        check_date_range(args)
        if args.get("granularity") == "day" and \
                date.fromisoformat(args["date_to"]) - date.fromisoformat(args["date_from"]) \
                > timedelta(days=3 * 366):
            raise validation_error("range_too_long", "more than 3 years by day; use week or "
                                   "month")

    @staticmethod
    def _check_anomaly_range(args: dict[str, Any]) -> None:
        check_date_range(args)
        days = (date.fromisoformat(args["date_to"]) - date.fromisoformat(args["date_from"])).days
        if days + 1 < (56 if args.get("granularity") == "week" else 14):
            raise validation_error("period_too_short", "fewer than 14 days (or 8 weeks); "
                                   "widen the range")

    @staticmethod
    def _check_schedule(args: dict[str, Any]) -> None:
        if args["frequency"] == "weekly" and not args.get("day_of_week"):
            raise validation_error("missing_day", "a weekly report needs day_of_week")
        if args["frequency"] == "monthly" and not args.get("day_of_month"):
            raise validation_error("missing_day", "a monthly report needs day_of_month")
        bad = [r for r in args["recipients"] if not r.lower().endswith(COMPANY_DOMAINS)]
        if bad:
            raise validation_error("recipient_rejected", f"not a company address: "
                                   f"{', '.join(bad)}; ask for a {' or '.join(COMPANY_DOMAINS)}"
                                   " address")

    def _descending(self, args: dict[str, Any]) -> bool:
        descending: bool = args.get("sort_order", self.sort_values[1]) == self.sort_values[1]
        return descending

    def _issue(self, tool: str, args: dict[str, Any], rows: int) -> str:
        result_id = stable_id("res_", tool, sorted(args.items()))
        with self._lock:
            self._results[result_id] = rows
        return result_id

    def _table(self, tool: str, args: dict[str, Any], columns: list[str],
               rows: list[list[Any]], truncated: bool = False) -> dict[str, Any]:
        return {"columns": columns, "rows": rows, "row_count": len(rows),
                "truncated": truncated, "result_id": self._issue(tool, args, len(rows))}

    # -- tools -----------------------------------------------------------------------------

    def query_metrics(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """One aggregate over one table, optionally grouped, filtered by dates, sorted."""
        table = args["table"]
        columns = PUBLIC_COLUMNS[table]
        match = _METRIC.match(args["metric"])
        if match is None:
            raise validation_error("invalid_metric", "metric must be count(*) or "
                                   "count_distinct|sum|avg|min|max(<column>)")
        if match.group(3) and match.group(3) not in columns:
            raise validation_error("unknown_column", f"{table} has no column "
                                   f"{match.group(3)!r}; columns: {', '.join(columns)}")
        function, column = match.group(2), match.group(3)
        expression = "COUNT(*)" if column is None else (
            f"COUNT(DISTINCT {column})" if function == "count_distinct"
            else f"{function.upper()}({column})")
        where: list[str] = ["1"]
        params: list[object] = []  # SQL parameters: the call's JSON values
        if args.get("date_from") or args.get("date_to"):
            if table not in DATE_COLUMN:
                raise validation_error("no_date_column", f"{table} has no date column; send "
                                       "no dates for it")
            _dates(args, DATE_COLUMN[table], where, params)
        group = args.get("group_by")
        select, group_sql = "", ""
        if group:
            name, _, grain = group.partition(":")
            if name not in columns:
                raise validation_error("unknown_column", f"{table} has no column {name!r}; "
                                       f"columns: {', '.join(columns)}")
            if grain and name not in {*DATE_COLUMN.values(), "delivered_at"}:
                raise validation_error("invalid_group_by", f"{name} is not a date column; "
                                       f"':{grain}' applies to date columns only")
            key = _period(grain, name) if grain else name
            select, group_sql = f"{key} AS grp, ", " GROUP BY grp"
        limit = args.get("limit", 100)
        order = "DESC" if self._descending(args) else "ASC"
        sql = (f"SELECT {select}{expression} AS value FROM {table} WHERE {' AND '.join(where)}"
               f"{group_sql} ORDER BY value {order}{', grp' if group else ''} LIMIT ?")
        with self.db.reading(ctx) as conn:
            fetched = conn.execute(sql, [*params, limit + 1]).fetchall()
        rows = [list(r) for r in fetched[:limit]]
        return self._table("query_metrics", args, [group or "all", args["metric"]]
                           if group else [args["metric"]],
                           rows if group else [[r[0]] for r in rows], len(fetched) > limit)

    def run_sql(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """One read-only SELECT (see :meth:`ShopDB.select`), plus a result_id."""
        result = self.db.select(args["sql"], args.get("limit", 100), ctx)
        result["result_id"] = self._issue("run_sql", args, result["row_count"])
        return result

    def list_tables(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """The five public tables, with row counts on request."""
        tables = [{"name": t, "description": TABLE_NOTES[t]} for t in PUBLIC_COLUMNS]
        if args.get("include_row_counts"):
            with self.db.reading(ctx) as conn:
                for entry in tables:
                    entry["row_count"] = conn.execute(
                        f"SELECT COUNT(*) FROM {entry['name']}").fetchone()[0]
        return {"tables": tables}

    def describe_table(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Columns (name, type, nullable), keys and optional sample rows of one table."""
        table = args["table"]
        public = PUBLIC_COLUMNS[table]
        with self.db.reading(ctx) as conn:
            info = {r["name"]: r for r in conn.execute(f"PRAGMA table_info({table})")}
            keys = [dict(r) for r in conn.execute(f"PRAGMA foreign_key_list({table})")]
            sample = []
            if args.get("sample_rows"):
                sample = [list(r) for r in conn.execute(
                    f"SELECT {', '.join(public)} FROM {table} ORDER BY rowid LIMIT ?",
                    (args["sample_rows"],))]
        return {"table": table,
                "columns": [{"name": c, "type": info[c]["type"],
                             "nullable": not info[c]["notnull"], "primary_key":
                             bool(info[c]["pk"])} for c in public],
                "foreign_keys": [{"column": k["from"], "references": k["table"]}
                                 for k in keys if k["from"] in public],
                "sample_rows": sample}

    def sales_summary(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Revenue, orders, average order value and refunds per period."""
        granularity = args.get("granularity", "total")
        rows = self._sales(args["date_from"], args["date_to"], granularity, args.get("city"),
                           ctx)
        compare = args.get("compare_to", "none")
        columns = ["period", "revenue_cny", "orders", "avg_order_value_cny", "refunded_cny"]
        if compare != "none":
            start, end = date.fromisoformat(args["date_from"]), date.fromisoformat(
                args["date_to"])
            if compare == "previous_period":
                shift = end - start + timedelta(days=1)
                before = (start - shift, end - shift)
            else:
                before = (start.replace(year=start.year - 1), end.replace(year=end.year - 1))
            earlier = self._sales(before[0].isoformat(), before[1].isoformat(), "total",
                                  args.get("city"), ctx)
            base = earlier[0][1] if earlier else 0.0
            columns.append("change_pct")
            total = sum(r[1] for r in rows)
            rows = [r + [round((total - base) / base * 100, 1) if base else None]
                    for r in rows]
        return self._table("sales_summary", args, columns, rows)

    def _sales(self, start: str, end: str, granularity: str, city: str | None,
               ctx: CallContext) -> list[list[Any]]:
        where, params = ["substr(o.created_at, 1, 10) BETWEEN ? AND ?"], [start, end]
        if city:
            where.append("o.customer_id IN (SELECT customer_id FROM customers WHERE city = ?)")
            params.append(city)
        sql = (f"SELECT {_period(granularity, 'o.created_at')} AS period, "
               f"ROUND(SUM(CASE WHEN o.status IN {REVENUE_STATUSES} THEN o.total_cny ELSE 0 "
               f"END), 2), SUM(o.status IN {REVENUE_STATUSES}), ROUND(AVG(CASE WHEN o.status "
               f"IN {REVENUE_STATUSES} THEN o.total_cny END), 2), ROUND(SUM(CASE WHEN "
               f"o.status = 'refunded' THEN o.total_cny ELSE 0 END), 2) FROM orders o WHERE "
               f"{' AND '.join(where)} GROUP BY period ORDER BY period")
        with self.db.reading(ctx) as conn:
            rows = [list(r) for r in conn.execute(sql, params)]
        if city and not rows:
            with self.db.reading(ctx) as conn:
                known = conn.execute("SELECT 1 FROM customers WHERE city = ? LIMIT 1",
                                     (city,)).fetchone()
            if known is None:
                raise permanent_error("unknown_city", f"no customers in {city!r}; check the "
                                      "spelling (cities are stored as customers wrote them)")
        return rows

    def top_products(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Products ranked by revenue, units or orders in a period."""
        rank_by = args.get("rank_by", "revenue")
        join = ["o.status IN " + REVENUE_STATUSES]
        params: list[object] = []
        _dates(args, "o.created_at", join, params)
        where = ["1"]
        if args.get("category"):
            where.append("p.category = ?")
        order = "DESC" if self._descending(args) else "ASC"
        sql = (f"SELECT p.product_id, p.name_zh, p.name_en, p.category, "
               f"ROUND(COALESCE(SUM(i.quantity * i.unit_price_cny), 0), 2) AS revenue, "
               f"COALESCE(SUM(i.quantity), 0) AS units, COUNT(DISTINCT i.order_id) AS orders "
               f"FROM products p LEFT JOIN (SELECT i.* FROM order_items i JOIN orders o USING "
               f"(order_id) WHERE {' AND '.join(join)}) i USING (product_id) WHERE "
               f"{' AND '.join(where)} GROUP BY p.product_id ORDER BY {rank_by} {order}, "
               f"p.product_id LIMIT ?")
        values = [*params, *([args["category"]] if args.get("category") else []),
                  args.get("limit", 10)]
        with self.db.reading(ctx) as conn:
            rows = [[rank, *r] for rank, r in enumerate(conn.execute(sql, values), start=1)]
        return self._table("top_products", args, ["rank", "product_id", "name_zh", "name_en",
                                                  "category", "revenue_cny", "units", "orders"],
                           rows)

    def top_customers(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Customers ranked by spend or order count (personal data)."""
        where = ["o.status IN " + REVENUE_STATUSES]
        params: list[object] = []
        _dates(args, "o.created_at", where, params)
        if args.get("city"):
            where.append("c.city = ?")
            params.append(args["city"])
        rank = "spent" if args.get("rank_by", "total_spent") == "total_spent" else "n"
        order = "DESC" if self._descending(args) else "ASC"
        sql = (f"SELECT c.customer_id, c.name, c.email, c.city, ROUND(SUM(o.total_cny), 2) AS "
               f"spent, COUNT(*) AS n FROM orders o JOIN customers c USING (customer_id) WHERE "
               f"{' AND '.join(where)} GROUP BY c.customer_id ORDER BY {rank} {order}, "
               f"c.customer_id LIMIT ?")
        with self.db.reading(ctx) as conn:
            rows = [[i, *r] for i, r in enumerate(conn.execute(sql, [*params,
                                                                       args.get("limit", 10)]),
                                                  start=1)]
        return self._table("top_customers", args, ["rank", "customer_id", "name", "email",
                                                   "city", "total_spent_cny", "order_count"],
                           rows)

    def cohort_retention(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Share of each cohort that ordered again in each later period."""
        period = args.get("period", "month")
        periods = args.get("periods", 6)
        start_col = "first" if args.get("cohort_by", "first_order") == "first_order" \
            else "c.created_at"
        city_sql, params = ("AND c.city = ?", [args["city"]]) if args.get("city") else ("", [])
        sql = (f"WITH firsts AS (SELECT customer_id, MIN(created_at) AS first FROM orders "
               f"WHERE status IN {REVENUE_STATUSES} GROUP BY customer_id), "
               f"members AS (SELECT c.customer_id, {start_col} AS start FROM customers c JOIN "
               f"firsts f USING (customer_id) WHERE 1 {city_sql}) "
               f"SELECT m.customer_id, m.start, o.created_at FROM members m LEFT JOIN orders o "
               f"ON o.customer_id = m.customer_id AND o.status IN {REVENUE_STATUSES}")
        with self.db.reading(ctx) as conn:
            records = conn.execute(sql, params).fetchall()

        def index(moment: str) -> int:
            day = date.fromisoformat(moment[:10])
            return day.year * 12 + day.month - 1 if period == "month" else \
                (day - date(2000, 1, 3)).days // 7

        cohorts: dict[int, dict[str, set[int]]] = {}
        labels: dict[int, str] = {}
        for customer, start, ordered in records:
            if not args["date_from"] <= start[:10] <= args["date_to"]:
                continue
            key = index(start)
            labels[key] = start[:7] if period == "month" else start[:10]
            steps = cohorts.setdefault(key, {}).setdefault(customer, set())
            if ordered:
                steps.add(index(ordered) - key)
        if not cohorts:
            raise permanent_error("empty_cohorts", "no customers started in the range; widen "
                                  "it")
        now = index(TODAY.isoformat())
        rows = []
        for key in sorted(cohorts):
            members = cohorts[key]
            row: list[Any] = [labels[key], len(members)]
            for k in range(1, periods + 1):
                row.append(round(100 * sum(1 for s in members.values() if k in s)
                                 / len(members), 1) if key + k <= now else None)
            rows.append(row)
        return self._table("cohort_retention", args, ["cohort", "size", *(
            f"retained_pct_{k}" for k in range(1, periods + 1))], rows)

    _THRESHOLD = {"low": 3.0, "medium": 2.5, "high": 2.0}  # z-scores that count as unusual
    _SERIES = {
        "revenue": ("orders", "created_at", f"SUM(CASE WHEN status IN {REVENUE_STATUSES} "
                    "THEN total_cny ELSE 0 END)"),
        "order_count": ("orders", "created_at", "COUNT(*)"),
        "avg_order_value": ("orders", "created_at", "AVG(total_cny)"),
        "refund_rate": ("orders", "created_at", "100.0 * AVG(status = 'refunded')"),
        "cancel_rate": ("orders", "created_at", "100.0 * AVG(status = 'cancelled')"),
        "new_customers": ("customers", "created_at", "COUNT(*)"),
        "late_deliveries": ("shipments", "shipped_at",
                            "SUM(delivered_at IS NOT NULL AND substr(delivered_at, 1, 10) > "
                            "estimated_delivery)"),
    }

    def detect_anomalies(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Points whose value is far (z-score) from the trailing 28 days or 8 weeks."""
        table, column, expression = self._SERIES[args["metric"]]
        weekly = args.get("granularity", "day") == "week"
        key = _period("week" if weekly else "day", column)
        start = date.fromisoformat(args["date_from"]) - timedelta(days=56 if weekly else 28)
        with self.db.reading(ctx) as conn:
            series = conn.execute(f"SELECT {key} AS k, {expression} FROM {table} WHERE "
                                  f"substr({column}, 1, 10) BETWEEN ? AND ? GROUP BY k "
                                  f"ORDER BY k", (start.isoformat(), args["date_to"])).fetchall()
        values = [(k, float(v or 0)) for k, v in series]
        window = 8 if weekly else 28
        limit = self._THRESHOLD[args.get("sensitivity", "medium")]
        anomalies = []
        for i, (k, value) in enumerate(values):
            if k < args["date_from"] or i < 7:
                continue
            history = [v for _, v in values[max(0, i - window):i]]
            mean = statistics.fmean(history)
            spread = statistics.pstdev(history) or 1e-9
            if abs(value - mean) / spread >= limit:
                anomalies.append({"date": k, "value": round(value, 2),
                                  "expected": round(mean, 2),
                                  "deviation_pct": round((value - mean) / mean * 100, 1)
                                  if mean else None,
                                  "direction": "up" if value > mean else "down"})
        return {"metric": args["metric"], "anomalies": anomalies,
                "result_id": self._issue("detect_anomalies", args, len(anomalies))}

    def export_report(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """A file for an earlier result (sandboxed: no file is written)."""
        with self._lock:
            rows = self._results.get(args["result_id"])
        if rows is None:
            raise permanent_error("unknown_result", f"result {args['result_id']} does not exist "
                                  "or expired; rerun the analysis and use its result_id")
        if args["format"] == "pdf" and rows > 1000:
            raise permanent_error("too_many_rows", f"{rows} rows exceed the PDF limit of 1,000; "
                                  "use csv")
        email = args.get("email_to")
        if email and not email.lower().endswith(COMPANY_DOMAINS):
            raise validation_error("email_rejected", f"{email} is not a company address; ask "
                                   "for another")
        name = f"{args.get('file_name') or args['result_id']}.{args['format']}"
        return {"download_url": f"https://reports.shop.example.com/{name}", "file_name": name,
                "size_bytes": 512 + 64 * rows, "rows": rows, "emailed": bool(email)}

    def schedule_report(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """A recurring report schedule (sandboxed: nothing is stored)."""
        hour = args.get("hour", 9)
        day = TODAY + timedelta(days=1)
        if args["frequency"] == "weekly":
            wanted = ("mon", "tue", "wed", "thu", "fri", "sat", "sun").index(args["day_of_week"])
            day = TODAY + timedelta(days=(wanted - TODAY.weekday() - 1) % 7 + 1)
        elif args["frequency"] == "monthly":
            day = date(TODAY.year + TODAY.month // 12, TODAY.month % 12 + 1,
                       args["day_of_month"])
        settings = {k: args.get(k) for k in ("report", "frequency", "day_of_week",
                                             "day_of_month", "recipients")}
        settings.update(hour=hour, format=args.get("format", "pdf"))
        return {"schedule_id": stable_id("sch_", sorted(settings.items(), key=str)),
                "next_run_at": f"{day.isoformat()} {hour:02d}:00:00", "settings": settings}
