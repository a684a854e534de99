"""Reference backend of the ``ecommerce`` toolset, on the generated shop database.

Conventions (see each spec under ``descriptions/ecommerce/specs``):
- The signed-in customer is ``RunContext.user_id``. Without one, order tools act for the
  order's owner (the staff view) and account tools (points, VIP, coupons) for
  :data:`DEFAULT_CUSTOMER`.
- Writes (cancel, refund, hand-off, address change) really run their UPDATE/INSERT, inside a
  transaction that is rolled back, and return ids derived from the arguments, so the same
  call always returns the same result.
- Lookups treat alike what the shop treats alike: city names in any listed language, tracking
  numbers in any letter case, English plural words in product searches.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta
from typing import Any

from bench.executor.backends.base import (Handler, ShopDB, check_date_range, cooperative,
                                          not_found, stable_id)
from bench.executor.backends.shopdb import TODAY, alias_key
from bench.executor.outcome import CallContext, permanent_error, validation_error

DEFAULT_CUSTOMER = "C0001"
_CARRIER_PREFIXES = (("JD", "jd"), ("SF", "sf"), ("YT", "yto"), ("1Z", "ups"))
_OUTSIDE_MAINLAND = ("香港", "澳门", "台湾", "hong kong", "macau", "macao", "taiwan", "usa",
                     "japan", "日本", "美国", "singapore", "新加坡", "london", "germany")


def _customer(ctx: CallContext) -> str:
    return ctx.run.user_id or DEFAULT_CUSTOMER


def _order(conn: sqlite3.Connection, order_id: str, ctx: CallContext) -> sqlite3.Row:
    # ShopDB.reading and .sandbox yield connections whose rows are sqlite3.Row
    row: sqlite3.Row | None = conn.execute("SELECT * FROM orders WHERE order_id = ?",
                                           (order_id,)).fetchone()
    if row is None or (ctx.run.user_id and row["customer_id"] != ctx.run.user_id):
        raise not_found("order", order_id, "check the id with the customer, or find the order "
                        "with search_orders")
    return row


def _words(text: str) -> list[str]:
    """Search words: split on spaces; English plurals reduced ('mats' -> 'mat')."""
    out = []
    for word in text.casefold().split():
        if len(word) > 3 and word.endswith("es") and word[:-2].endswith(("sh", "ch", "x")):
            word = word[:-2]
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def _text_filter(columns: tuple[str, ...], text: str) -> tuple[str, list[str]]:
    """SQL requiring every word to occur in one of ``columns`` (case-insensitive LIKE)."""
    clauses, params = [], []
    for word in _words(text):
        clauses.append("(" + " OR ".join(f"lower({c}) LIKE ?" for c in columns) + ")")
        params += [f"%{word}%"] * len(columns)
    return " AND ".join(clauses) or "1", params


class EcommerceBackend:
    """Handlers of the 13 ecommerce tools over one :class:`ShopDB`."""

    def __init__(self, db: ShopDB) -> None:
        self.db = db

    def handlers(self) -> dict[str, Handler]:
        """Tool name -> :class:`Handler` (all cooperative: SQLite stops at the deadline)."""
        return cooperative({
            "get_order_status": Handler(self.get_order_status),
            "search_orders": Handler(self.search_orders, check=check_date_range),
            "search_products": Handler(self.search_products, check=self._check_prices),
            "track_shipment": Handler(self.track_shipment),
            "get_weather": Handler(self.get_weather),
            "query_database": Handler(self.query_database),
            "get_points_balance": Handler(self.get_points_balance),
            "get_vip_benefits": Handler(self.get_vip_benefits),
            "list_coupons": Handler(self.list_coupons),
            "cancel_order": Handler(self.cancel_order, permission="write"),
            "request_refund": Handler(self.request_refund, permission="write"),
            "transfer_to_human_agent": Handler(self.transfer_to_human_agent, permission="write"),
            "update_shipping_address": Handler(self.update_shipping_address,
                                               permission="sensitive",
                                               check=self._check_address_change),
        })

    # -- reads -----------------------------------------------------------------------------

    def get_order_status(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Order state, payment state, update time; tracking once shipped."""
        with self.db.reading(ctx) as conn:
            order = _order(conn, args["order_id"], ctx)
            result = {"order_id": order["order_id"], "status": order["status"],
                      "payment_status": order["payment_status"],
                      "updated_at": order["updated_at"], "total_cny": order["total_cny"]}
            ship = conn.execute("SELECT tracking_number, carrier FROM shipments WHERE "
                                "order_id = ?", (order["order_id"],)).fetchone()
        if ship is not None:
            result.update(tracking_number=ship["tracking_number"], carrier=ship["carrier"])
        return result

    def search_orders(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """A page of orders, newest first, filtered by keyword, status and dates."""
        where, params = ["1"], []
        if ctx.run.user_id:
            where.append("o.customer_id = ?")
            params.append(ctx.run.user_id)
        if args.get("status"):
            where.append("o.status = ?")
            params.append(args["status"])
        if args.get("date_from"):
            where.append("substr(o.created_at, 1, 10) >= ?")
            params.append(args["date_from"])
        if args.get("date_to"):
            where.append("substr(o.created_at, 1, 10) <= ?")
            params.append(args["date_to"])
        if args.get("keyword"):
            text_sql, text_params = _text_filter(("p.name_zh", "p.name_en", "o.note"),
                                                 args["keyword"])
            where.append(f"o.order_id IN (SELECT i.order_id FROM order_items i JOIN products p "
                         f"USING (product_id) JOIN orders o USING (order_id) WHERE {text_sql})")
            params += text_params
        page, size = args.get("page", 1), args.get("page_size", 10)
        sql_where = " AND ".join(where)
        with self.db.reading(ctx) as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM orders o WHERE {sql_where}",
                                 params).fetchone()[0]
            rows = conn.execute(
                f"SELECT o.order_id, o.created_at, o.status, o.total_cny, (SELECT "
                f"group_concat(p.name_zh || ' / ' || p.name_en, '; ') FROM order_items i JOIN "
                f"products p USING (product_id) WHERE i.order_id = o.order_id) AS items "
                f"FROM orders o WHERE {sql_where} ORDER BY o.created_at DESC, o.order_id DESC "
                f"LIMIT ? OFFSET ?", [*params, size, (page - 1) * size]).fetchall()
        orders = [{"order_id": r["order_id"], "placed_at": r["created_at"],
                   "status": r["status"], "total_cny": r["total_cny"],
                   "items": (r["items"] or "").split("; ")} for r in rows]
        return {"orders": orders, "page": page, "page_size": size, "total_count": total}

    @staticmethod
    def _check_prices(args: dict[str, Any]) -> None:
        low, high = args.get("min_price"), args.get("max_price")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
            raise validation_error("invalid_price_range",
                                   f"min_price {low} is above max_price {high}; swap them")

    def search_products(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Up to 20 products matching the words, category, price range and stock."""
        text_sql, params = _text_filter(("name_zh", "name_en"), args["query"])
        where = [text_sql]
        for column, key, op in (("category", "category", "="), ("price_cny", "min_price", ">="),
                                ("price_cny", "max_price", "<=")):
            if args.get(key) is not None:
                where.append(f"{column} {op} ?")
                params.append(args[key])
        if args.get("in_stock_only"):
            where.append("stock > 0")
        order = {"relevance": "sales_30d DESC, product_id", "price_asc": "price_cny, product_id",
                 "price_desc": "price_cny DESC, product_id", "sales": "sales_30d DESC, product_id",
                 "newest": "listed_at DESC, product_id"}[args.get("sort_by", "relevance")]
        sql_where = " AND ".join(where)
        with self.db.reading(ctx) as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM products WHERE {sql_where}",
                                 params).fetchone()[0]
            rows = conn.execute(f"SELECT product_id, name_zh, name_en, category, price_cny, "
                                f"stock, sales_30d FROM products WHERE {sql_where} "
                                f"ORDER BY {order} LIMIT 20", params).fetchall()
        return {"products": [dict(r) for r in rows], "total_count": total}

    def track_shipment(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Carrier, status, estimate and scan events (newest first) of one parcel."""
        number = args["tracking_number"].upper()
        detected = next((c for p, c in _CARRIER_PREFIXES if number.startswith(p)), None)
        if number.startswith("E") and number.endswith("CN"):
            detected = "ems"
        carrier = args.get("carrier")
        if carrier and detected and carrier != detected:
            raise validation_error("carrier_mismatch", f"{number} is a {detected} number, not "
                                   f"{carrier}; retry once without carrier")
        with self.db.reading(ctx) as conn:
            ship = conn.execute("SELECT * FROM shipments WHERE tracking_number = ?",
                                (number,)).fetchone()
            if ship is None or (carrier and ship["carrier"] != carrier):
                raise not_found("parcel", number, "new labels take up to a day to show scans; "
                                "ask the customer to check the number")
            events = conn.execute("SELECT event_time, location, status, note FROM "
                                  "shipment_events WHERE tracking_number = ? ORDER BY "
                                  "event_time DESC", (number,)).fetchall()
        return {"tracking_number": number, "carrier": ship["carrier"], "status": ship["status"],
                "estimated_delivery": ship["estimated_delivery"],
                "events": [dict(e) for e in events]}

    def get_weather(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Current weather and ``days`` forecast entries for one city."""
        fahrenheit = args.get("unit", "celsius") == "fahrenheit"
        days = args.get("days", 1)
        with self.db.reading(ctx) as conn:
            city = conn.execute("SELECT c.* FROM city_aliases a JOIN cities c USING (city_id) "
                                "WHERE a.alias = ?", (alias_key(args["city"]),)).fetchone()
            if city is None:
                raise not_found("city named", repr(args["city"]),
                                "ask for the city (and country) in another spelling")
            rows = conn.execute("SELECT * FROM weather_daily WHERE city_id = ? AND day <= ? "
                                "ORDER BY day", (city["city_id"], days)).fetchall()

        def temp(c: float) -> float:
            return round(c * 9 / 5 + 32, 1) if fahrenheit else c

        forecast = [{"date": r["date"], "high": temp(r["temp_high_c"]),
                     "low": temp(r["temp_low_c"]), "condition": r["condition"],
                     "wind_kph": r["wind_kph"], "humidity_pct": r["humidity_pct"]} for r in rows]
        today = rows[0]
        return {"city": city["name_en"], "city_zh": city["name_zh"],
                "unit": "fahrenheit" if fahrenheit else "celsius",
                "current": {"temperature": temp(round((today["temp_high_c"]
                                                       + today["temp_low_c"]) / 2, 1)),
                            "condition": today["condition"], "wind_kph": today["wind_kph"],
                            "humidity_pct": today["humidity_pct"]},
                "forecast": forecast}

    def query_database(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """One read-only SELECT (see :meth:`ShopDB.select`)."""
        return self.db.select(args["sql"], args.get("limit", 100), ctx)

    def get_points_balance(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Points balance, points expiring at the end of this year, optional history."""
        customer = _customer(ctx)
        with self.db.reading(ctx) as conn:
            balance = conn.execute("SELECT COALESCE(SUM(change), 0) FROM points_ledger WHERE "
                                   "customer_id = ?", (customer,)).fetchone()[0]
            earned_last_year = conn.execute(
                "SELECT COALESCE(SUM(change), 0) FROM points_ledger WHERE customer_id = ? AND "
                "created_at < ?", (customer, f"{TODAY.year}-01-01")).fetchone()[0]
            result: dict[str, Any] = {"customer_id": customer, "balance": balance,
                                      "expiring_points": max(0, min(balance, earned_last_year)),
                                      "expiring_at": f"{TODAY.year}-12-31"}
            if args.get("include_history"):
                since = (TODAY - timedelta(days=args.get("days", 30))).isoformat()
                rows = conn.execute("SELECT substr(created_at, 1, 10) AS date, change, reason, "
                                    "order_id FROM points_ledger WHERE customer_id = ? AND "
                                    "created_at >= ? ORDER BY created_at DESC, entry_id DESC",
                                    (customer, since)).fetchall()
                result["history"] = [dict(r) for r in rows]
        return result

    _BENEFITS = {
        "shipping": ("silver", "free standard shipping on every order"),
        "discount": ("gold", "95% member prices (diamond: 90%)"),
        "returns": ("platinum", "free return pick-up within 15 days"),
        "service": ("platinum", "7x24 priority customer service"),
        "birthday": ("silver", "a birthday coupon in the birthday month"),
    }
    _LEVELS = ("regular", "silver", "gold", "platinum", "diamond")

    def get_vip_benefits(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """A level's perks; without ``level`` the customer's own level and progress."""
        with self.db.reading(ctx) as conn:
            levels = {r["level"]: r["min_growth"] for r in
                      conn.execute("SELECT level, min_growth FROM vip_levels")}
            result: dict[str, Any] = {}
            level = args.get("level")
            if level is None:
                row = conn.execute("SELECT vip_level, growth_value FROM customers WHERE "
                                   "customer_id = ?", (_customer(ctx),)).fetchone()
                if row is None:
                    raise permanent_error("not_signed_in", "no signed-in customer; ask the "
                                          "customer to sign in, do not retry")
                level = row["vip_level"]
                index = self._LEVELS.index(level)
                nxt = self._LEVELS[index + 1] if index + 1 < len(self._LEVELS) else None
                result = {"growth_value": row["growth_value"], "next_level": nxt,
                          "growth_needed": round(levels[nxt] - row["growth_value"], 2)
                          if nxt else 0}
        rank = self._LEVELS.index(level)
        wanted = args.get("benefit_type", "all")
        benefits = [{"type": kind, "description": text}
                    for kind, (needed, text) in self._BENEFITS.items()
                    if self._LEVELS.index(needed) <= rank and wanted in ("all", kind)]
        return {"level": level, **result, "benefits": benefits}

    def list_coupons(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """The customer's coupons by status, category, or usable on one unpaid order."""
        with self.db.reading(ctx) as conn:
            customer = _customer(ctx)
            where, params = ["cc.customer_id = ?", "cc.status = ?"], [customer]
            params.append(args.get("status", "available"))
            if args.get("order_id"):
                order = _order(conn, args["order_id"], ctx)
                if order["status"] != "pending_payment":
                    raise permanent_error("order_not_eligible", f"order {order['order_id']} is "
                                          f"{order['status']}; coupons apply only to unpaid "
                                          "orders")
                params[0] = order["customer_id"]
                where.append("c.threshold_cny <= ?")
                params.append(order["total_cny"])
            if args.get("category"):
                where.append("(c.category IS NULL OR c.category = ?)")
                params.append(args["category"])
            rows = conn.execute("SELECT c.coupon_id, c.kind, c.value, c.threshold_cny, "
                                "c.category, c.expires_at, cc.status FROM customer_coupons cc "
                                "JOIN coupons c USING (coupon_id) WHERE " + " AND ".join(where)
                                + " ORDER BY c.expires_at, c.coupon_id", params).fetchall()
        return {"coupons": [dict(r) for r in rows], "total_count": len(rows)}

    # -- writes (sandboxed) ----------------------------------------------------------------

    def cancel_order(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Cancel an unshipped order; a paid one is refunded in full."""
        with self.db.reading(ctx) as conn:
            order = _order(conn, args["order_id"], ctx)
        if order["status"] == "cancelled":
            raise permanent_error("already_cancelled", f"{order['order_id']} is already "
                                  "cancelled; nothing to do, do not retry")
        if order["status"] not in ("pending_payment", "paid"):
            raise permanent_error("not_cancellable", f"{order['order_id']} is "
                                  f"{order['status']}; offer request_refund after delivery")
        refund = order["total_cny"] if order["status"] == "paid" else 0.0
        with self.db.sandbox() as conn:
            conn.execute("UPDATE orders SET status = 'cancelled', payment_status = ? WHERE "
                         "order_id = ?", ("refunding" if refund else "unpaid",
                                          order["order_id"]))
            status = conn.execute("SELECT status FROM orders WHERE order_id = ?",
                                  (order["order_id"],)).fetchone()[0]
        return {"order_id": order["order_id"], "status": status, "refund_amount_cny": refund,
                "refund_eta": "1-3 days" if refund else None,
                "reason": args.get("reason", "other")}

    def request_refund(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Open a refund for a shipped or delivered order."""
        with self.db.reading(ctx) as conn:
            order = _order(conn, args["order_id"], ctx)
            ship = conn.execute("SELECT delivered_at, estimated_delivery FROM shipments WHERE "
                                "order_id = ?", (order["order_id"],)).fetchone()
            open_refund = conn.execute("SELECT refund_id FROM refunds WHERE order_id = ? AND "
                                       "status = 'under_review'", (order["order_id"],)).fetchone()
        if open_refund is not None:
            raise permanent_error("duplicate_request", f"refund {open_refund[0]} is already "
                                  "open; report its status, do not retry")
        if order["status"] in ("pending_payment", "paid"):
            raise permanent_error("not_refundable", f"{order['order_id']} has not shipped; use "
                                  "cancel_order instead")
        if order["status"] in ("cancelled", "refunded"):
            raise permanent_error("not_refundable", f"{order['order_id']} is "
                                  f"{order['status']}; there is nothing to refund")
        if args["reason"] == "not_received" and ship is not None and \
                ship["estimated_delivery"] >= TODAY.isoformat():
            raise permanent_error("not_refundable", "the delivery estimate "
                                  f"{ship['estimated_delivery']} has not passed yet; track the "
                                  "parcel instead")
        amount = args.get("amount_cny", order["total_cny"])
        if amount > order["total_cny"]:
            raise validation_error("invalid_amount", f"{amount} CNY is above the "
                                   f"{order['total_cny']} CNY paid; ask the customer to check")
        refund_id = stable_id("RF", order["order_id"], args["reason"], amount)
        kind = args.get("refund_type", "return_and_refund")
        with self.db.sandbox() as conn:
            conn.execute("INSERT INTO refunds VALUES (?,?,?,?,?,?,?)",
                         (refund_id, order["order_id"], amount, args["reason"], kind,
                          "under_review", f"{TODAY.isoformat()} 12:00:00"))
            stored = conn.execute("SELECT status FROM refunds WHERE refund_id = ?",
                                  (refund_id,)).fetchone()[0]
        result = {"refund_id": refund_id, "order_id": order["order_id"], "status": stored,
                  "amount_cny": amount, "refund_type": kind}
        if kind == "return_and_refund":
            result["return_address"] = "上海市青浦区华新镇 退货仓 (Returns, SH01)"
        return result

    def transfer_to_human_agent(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Open a hand-off ticket; urgent tickets jump the queue."""
        customer = _customer(ctx)
        if args.get("order_id"):
            with self.db.reading(ctx) as conn:
                customer = _order(conn, args["order_id"], ctx)["customer_id"]
        urgent = args.get("priority", "normal") == "urgent"
        ticket = stable_id("TK", customer, args["reason"], args.get("order_id"), urgent)
        with self.db.sandbox() as conn:
            conn.execute("INSERT INTO support_tickets VALUES (?,?,?,?,?,?,?)",
                         (ticket, customer, args.get("order_id"), args["reason"],
                          "urgent" if urgent else "normal", "open",
                          f"{TODAY.isoformat()} 14:00:00"))
            queued = conn.execute("SELECT COUNT(*) FROM support_tickets WHERE status = 'open' "
                                  "AND priority = ?", ("urgent" if urgent else "normal",)
                                  ).fetchone()[0]
        return {"ticket_id": ticket, "queue_position": queued,
                "estimated_wait_minutes": 2 if urgent else 10}

    @staticmethod
    def _check_address_change(args: dict[str, Any]) -> None:
        if not any(args.get(k) for k in ("address", "recipient_name", "phone")):
            raise validation_error("nothing_to_change", "send at least one of address, "
                                   "recipient_name or phone")
        if len(args.get("address") or "") > 120 or len(args.get("recipient_name") or "") > 30:
            raise validation_error("invalid_argument", "address is limited to 120 characters "
                                   "and recipient_name to 30")
        address = (args.get("address") or "").casefold()
        if any(place in address for place in _OUTSIDE_MAINLAND):
            raise validation_error("outside_delivery_area", "the address is outside mainland "
                                   "China; deliveries go to mainland addresses only")

    def update_shipping_address(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Change address, recipient or phone of an order that has not shipped."""
        with self.db.reading(ctx) as conn:
            order = _order(conn, args["order_id"], ctx)
        if order["status"] not in ("pending_payment", "paid"):
            raise permanent_error("already_shipped", f"{order['order_id']} is "
                                  f"{order['status']}; too late to change it, offer "
                                  "transfer_to_human_agent")
        with self.db.sandbox() as conn:
            conn.execute("UPDATE orders SET shipping_address = COALESCE(?, shipping_address), "
                         "recipient_name = COALESCE(?, recipient_name), recipient_phone = "
                         "COALESCE(?, recipient_phone) WHERE order_id = ?",
                         (args.get("address"), args.get("recipient_name"), args.get("phone"),
                          order["order_id"]))
            row = conn.execute("SELECT shipping_address, recipient_name, recipient_phone FROM "
                               "orders WHERE order_id = ?", (order["order_id"],)).fetchone()
        address, name, phone = row
        return {"order_id": order["order_id"],
                "address": address[:6] + "****" if len(address) > 6 else "****",
                "recipient_name": name[:1] + "*" * max(1, len(name) - 1),
                "phone": re.sub(r"^(\d{3})\d{4}(\d{4})$", r"\1****\2", phone),
                "estimated_delivery": (TODAY + timedelta(days=3)).isoformat()}
