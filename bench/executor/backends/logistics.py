"""Reference backend of the ``logistics`` toolset (warehouses, parcels, routes, claims), on the
generated shop database. Writes run sandboxed (rolled back) and return ids derived from their
arguments; routes use deterministic pseudo-coordinates of each address.
"""

from __future__ import annotations

import hashlib
import math
from datetime import date, datetime, timedelta
from typing import Any

from bench.executor.backends.base import (Handler, ShopDB, check_date_range, cooperative,
                                          not_found, stable_id)
from bench.executor.backends.shopdb import TODAY, alias_key
from bench.executor.outcome import CallContext, permanent_error, validation_error

# price per billed kg and base fee in CNY, and transit days, per (carrier, service level)
_RATES = {"sf": (12, 4.0, 2), "jd": (10, 3.5, 2), "zto": (6, 2.0, 3), "yto": (6, 2.0, 3),
          "sto": (5, 2.0, 4), "ems": (8, 3.0, 4), "ups": (90, 40.0, 6), "fedex": (95, 42.0, 5)}
_SERVICE = {"standard": (1.0, 0), "express": (1.6, -1), "same_day": (3.0, None)}
_DOMESTIC = ("sf", "jd", "zto", "yto", "sto", "ems")
_SPEED_KMH = {"van": 30, "truck_3t": 25, "truck_8t": 20}
_SCAN_CODES = ("created", "picked_up", "arrived_hub", "departed_hub", "out_for_delivery",
               "delivered", "exception")


def billed_weight(parcel: dict[str, Any]) -> float:
    """The larger of real weight and volumetric weight l*w*h/6000 (kg), per the spec."""
    # numbers: the tools' input schemas say so
    dims: dict[str, float] = parcel["dims_cm"]
    weight: float = parcel["weight_kg"]
    return round(max(weight, dims["l"] * dims["w"] * dims["h"] / 6000), 2)


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def _clock(minutes: float) -> str:
    minutes = int(round(minutes))
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _point(address: str) -> tuple[float, float]:
    """Deterministic pseudo-coordinates (km) of an address within a 30 km city square."""
    digest = hashlib.sha256(address.strip().casefold().encode("utf-8")).digest()
    return digest[0] / 255 * 30, digest[1] / 255 * 30


class LogisticsBackend:
    """Handlers of the 11 logistics tools."""

    def __init__(self, db: ShopDB) -> None:
        self.db = db

    def handlers(self) -> dict[str, Handler]:
        """Tool name -> :class:`Handler` (all cooperative: SQLite stops at the deadline)."""
        return cooperative({
            "get_tracking_events": Handler(self.get_tracking_events),
            "search_shipments": Handler(self.search_shipments, check=check_date_range),
            "check_inventory": Handler(self.check_inventory),
            "get_shipping_quote": Handler(self.get_shipping_quote),
            "plan_route": Handler(self.plan_route, check=self._check_windows),
            "create_shipment": Handler(self.create_shipment, permission="write"),
            "cancel_shipment": Handler(self.cancel_shipment, permission="write"),
            "schedule_pickup": Handler(self.schedule_pickup, permission="write",
                                       check=self._check_pickup),
            "create_transfer": Handler(self.create_transfer, permission="write",
                                       check=self._check_transfer),
            "file_claim": Handler(self.file_claim, permission="sensitive"),
            "update_delivery_address": Handler(self.update_delivery_address,
                                               permission="sensitive"),
        })

    def _shipment(self, conn: Any, number: str) -> Any:
        row = conn.execute("SELECT * FROM shipments WHERE tracking_number = ?",
                           (number,)).fetchone()
        if row is None:
            raise not_found("shipment with number", number, "ask the customer to check it")
        return row

    # -- reads -----------------------------------------------------------------------------

    def get_tracking_events(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Status, newest-first scans, estimate and address of one shipment."""
        number, carrier = args["tracking_number"], args.get("carrier")
        with self.db.reading(ctx) as conn:
            ship = self._shipment(conn, number)
            if carrier and carrier != ship["carrier"]:
                raise validation_error("carrier_mismatch", f"{number} is a {ship['carrier']} "
                                       f"parcel, not {carrier}; retry once without carrier")
            events = conn.execute("SELECT event_time AS time, location, status AS code, note "
                                  "FROM shipment_events WHERE tracking_number = ? ORDER BY "
                                  "event_time DESC LIMIT ?",
                                  (number, args.get("limit", 20))).fetchall()
        return {"tracking_number": number, "carrier": ship["carrier"], "status": ship["status"],
                "estimated_delivery": ship["estimated_delivery"],
                "delivery_address": ship["delivery_address"], "events": [dict(e) for e in events]}

    def search_shipments(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Shipments by warehouse, carrier, status and ship date, newest first."""
        where, params = ["1"], []
        for column, key in (("warehouse_id", "warehouse"), ("carrier", "carrier"),
                            ("status", "status")):
            if args.get(key):
                where.append(f"{column} = ?")
                params.append(args[key])
        for op, key in ((">=", "date_from"), ("<=", "date_to")):
            if args.get(key):
                where.append(f"substr(shipped_at, 1, 10) {op} ?")
                params.append(args[key])
        sql_where = " AND ".join(where)
        with self.db.reading(ctx) as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM shipments WHERE {sql_where}",
                                 params).fetchone()[0]
            rows = conn.execute(f"SELECT tracking_number, order_id, carrier, status, shipped_at, "
                                f"warehouse_id AS warehouse FROM shipments WHERE {sql_where} "
                                f"ORDER BY shipped_at DESC, tracking_number LIMIT ?",
                                [*params, args.get("limit", 50)]).fetchall()
        return {"shipments": [dict(r) for r in rows], "total_count": total}

    def check_inventory(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Stock per SKU and warehouse; unknown SKUs are listed apart."""
        skus = args["skus"]
        where = f"sku IN ({', '.join('?' * len(skus))})"
        params: list[Any] = list(skus)
        if args.get("warehouse"):
            where += " AND warehouse_id = ?"
            params.append(args["warehouse"])
        with self.db.reading(ctx) as conn:
            rows = conn.execute(f"SELECT sku, warehouse_id AS warehouse, on_hand, reserved, "
                                f"on_hand - reserved AS available, incoming FROM inventory "
                                f"WHERE {where} ORDER BY sku, warehouse_id", params).fetchall()
        found = {r["sku"] for r in rows}
        stock = [{**dict(r), "low": r["available"] < 20} for r in rows]
        return {"stock": stock, "unknown_skus": [s for s in skus if s not in found]}

    def get_shipping_quote(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Prices and transit days per carrier and service level, cheapest first."""
        with self.db.reading(ctx) as conn:
            city = conn.execute("SELECT c.* FROM city_aliases a JOIN cities c USING (city_id) "
                                "WHERE a.alias = ?", (alias_key(args["to_city"]),)).fetchone()
            home = conn.execute("SELECT city_en FROM warehouses WHERE warehouse_id = ?",
                                (args["from_warehouse"],)).fetchone()
        if city is None:
            raise permanent_error("unknown_city", f"{args['to_city']!r} is not served; check "
                                  "the spelling")
        weight = round(sum(billed_weight(p) for p in args["parcels"]), 2)
        carriers = _DOMESTIC if city["country"] == "CN" else ("ups", "fedex")
        levels = [args["service_level"]] if args.get("service_level") else list(_SERVICE)
        quotes = []
        for carrier in carriers:
            per_kg, base, days = _RATES[carrier]
            for level in levels:
                factor, faster = _SERVICE[level]
                if level == "same_day" and city["name_en"] != home["city_en"]:
                    continue
                transit = 0 if faster is None else max(1, days + faster)
                price = round((base * len(args["parcels"]) + per_kg * weight) * factor, 2)
                quotes.append({"carrier": carrier, "service_level": level, "price_cny": price,
                               "billed_weight_kg": weight, "transit_days": transit})
        if not quotes:
            raise permanent_error("no_service", "nothing offers that speed on this route; try "
                                  "express or standard")
        quotes.sort(key=lambda q: (q["price_cny"], q["carrier"], q["service_level"]))
        return {"to_city": city["name_en"], "quotes": quotes}

    @staticmethod
    def _check_windows(args: dict[str, Any]) -> None:
        for index, stop in enumerate(args["stops"]):
            window = stop.get("time_window")
            if window and _minutes(window["start"]) >= _minutes(window["end"]):
                raise validation_error("invalid_argument", f"stops[{index}].time_window starts "
                                       "after it ends")

    def plan_route(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Greedy route: among reachable stops, earliest window end first, then nearest."""
        speed = _SPEED_KMH[args.get("vehicle", "van")]
        by_distance = args.get("optimize_for", "time") == "distance"
        here, now = (15.0, 15.0), 8 * 60.0
        todo = list(enumerate(args["stops"]))
        ordered, late, total_km = [], [], 0.0
        while todo:
            def cost(item: tuple[int, dict[str, Any]]) -> tuple[float, float]:
                distance = math.dist(here, _point(item[1]["address"]))
                end = _minutes(item[1]["time_window"]["end"]) if item[1].get("time_window") \
                    else 20 * 60
                return (distance, end) if by_distance else (end, distance)
            index, stop = min(todo, key=cost)
            todo.remove((index, stop))
            point = _point(stop["address"])
            km = math.dist(here, point)
            total_km += km
            arrive = now + km / speed * 60
            window = stop.get("time_window")
            if window:
                arrive = max(arrive, _minutes(window["start"]))
                if arrive > _minutes(window["end"]):
                    late.append(index)
            depart = arrive + 10  # unloading, per the spec
            ordered.append({"stop": index, "address": stop["address"], "eta": _clock(arrive),
                            "departure": _clock(depart), "km": round(km, 1)})
            here, now = point, depart
        if args.get("return_to_depot", True):
            km = math.dist(here, (15.0, 15.0))
            total_km += km
            now += km / speed * 60
        return {"warehouse": args["warehouse"], "date": args["date"], "stops": ordered,
                "total_km": round(total_km, 1), "total_minutes": round(now - 8 * 60),
                "late_stops": late}

    # -- writes (sandboxed) ----------------------------------------------------------------

    def create_shipment(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Book a carrier for a paid, unshipped order; one tracking number per parcel."""
        with self.db.reading(ctx) as conn:
            order = conn.execute("SELECT status FROM orders WHERE order_id = ?",
                                 (args["order_id"],)).fetchone()
            shipped = conn.execute("SELECT 1 FROM shipments WHERE order_id = ? AND status != "
                                   "'cancelled'", (args["order_id"],)).fetchone()
        if order is None:
            raise not_found("order", args["order_id"], "check the order id")
        if order["status"] != "paid" or shipped is not None:
            raise permanent_error("order_not_paid", f"{args['order_id']} is {order['status']}"
                                  f"{' and already has a shipment' if shipped else ''}; only "
                                  "paid, unshipped orders can ship")
        level = args.get("service_level", "standard")
        if level == "same_day" and args["carrier"] not in ("sf", "jd"):
            raise permanent_error("service_unavailable", f"{args['carrier']} offers no same_day "
                                  "service; choose sf or jd, or another level")
        per_kg, base, _ = _RATES[args["carrier"]]
        weight = sum(billed_weight(p) for p in args["parcels"])
        price = round((base * len(args["parcels"]) + per_kg * weight) * _SERVICE[level][0], 2)
        shipment_id = stable_id("SHP", args["order_id"], args["carrier"], level, weight)
        numbers = [args["carrier"].upper()[:2] + stable_id("", shipment_id, i, length=10).upper()
                   for i in range(len(args["parcels"]))]
        with self.db.sandbox() as conn:
            for number in numbers:
                conn.execute("INSERT INTO shipments VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (number, args["order_id"], args["carrier"], "label_created",
                              f"{TODAY} 12:00:00", None, str(TODAY + timedelta(days=3)),
                              args["warehouse"], "", "", price))
        return {"shipment_id": shipment_id, "tracking_numbers": numbers,
                "label_url": f"https://labels.shop.example.com/{shipment_id}.pdf",
                "price_cny": price}

    def cancel_shipment(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Void a label that the carrier has not picked up."""
        with self.db.reading(ctx) as conn:
            ship = self._shipment(conn, args["tracking_number"])
        if ship["status"] == "cancelled":
            raise permanent_error("already_cancelled", "the shipment is already cancelled")
        if ship["status"] != "label_created":
            raise permanent_error("too_late", f"the parcel is {ship['status']}; use "
                                  "update_delivery_address or a return")
        with self.db.sandbox() as conn:
            conn.execute("UPDATE shipments SET status = 'cancelled' WHERE tracking_number = ?",
                         (ship["tracking_number"],))
            items = conn.execute("SELECT COUNT(*) FROM order_items WHERE order_id = ?",
                                 (ship["order_id"],)).fetchone()[0]
        return {"tracking_number": ship["tracking_number"], "cancelled": True,
                "label_fee_refunded_cny": ship["fee_cny"], "stock_returned_lines": items,
                "reason": args["reason"]}

    @staticmethod
    def _check_pickup(args: dict[str, Any]) -> None:
        window = args.get("time_window") or {"start": "14:00", "end": "18:00"}
        if _minutes(window["end"]) - _minutes(window["start"]) < 120:
            raise validation_error("window_too_short", "a pickup window needs at least 2 hours")
        if args["date"] < TODAY.isoformat():
            raise validation_error("cutoff_passed", f"{args['date']} is in the past; offer "
                                   f"{TODAY + timedelta(days=1)}")

    def schedule_pickup(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Book a carrier pickup at a warehouse."""
        window = args.get("time_window") or {"start": "14:00", "end": "18:00"}
        truck = args["parcel_count"] > 100 or args.get("total_weight_kg", 0) > 1000
        return {"pickup_id": stable_id("PU", args["carrier"], args["warehouse"], args["date"],
                                       window["start"], args["parcel_count"]),
                "date": args["date"], "window": window, "vehicle": "truck" if truck else "van",
                "driver": None}

    @staticmethod
    def _check_transfer(args: dict[str, Any]) -> None:
        if args["from_warehouse"] == args["to_warehouse"]:
            raise validation_error("same_warehouse", "source and destination are the same "
                                   "warehouse")

    def create_transfer(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Reserve stock at the source warehouse for an internal transfer."""
        skus = [line["sku"] for line in args["items"]]
        with self.db.reading(ctx) as conn:
            stock = {r[0]: r[1] for r in conn.execute(
                f"SELECT sku, on_hand - reserved FROM inventory WHERE warehouse_id = ? AND sku IN "
                f"({', '.join('?' * len(skus))})", [args["from_warehouse"], *skus])}
        for line in args["items"]:
            if line["sku"] not in stock:
                raise permanent_error("unknown_sku", f"{line['sku']} does not exist")
            if stock[line["sku"]] < line["quantity"]:
                raise permanent_error("insufficient_stock", f"{line['sku']} has "
                                      f"{stock[line['sku']]} available at "
                                      f"{args['from_warehouse']}, {line['quantity']} asked; "
                                      "check_inventory shows where stock is")
        with self.db.sandbox() as conn:
            for line in args["items"]:
                conn.execute("UPDATE inventory SET reserved = reserved + ? WHERE sku = ? AND "
                             "warehouse_id = ?", (line["quantity"], line["sku"],
                                                  args["from_warehouse"]))
        start = date.fromisoformat(args["ship_date"]) if args.get("ship_date") else TODAY
        days = 1 if args.get("priority") == "urgent" else 3
        return {"transfer_id": stable_id("TR", args["from_warehouse"], args["to_warehouse"],
                                         sorted((i["sku"], i["quantity"]) for i in args["items"])),
                "status": "created", "eta_date": str(start + timedelta(days=days)),
                "lines": [{"sku": i["sku"], "reserved": i["quantity"]} for i in args["items"]],
                "manager_check": sum(i["quantity"] for i in args["items"]) > 2000}

    def file_claim(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """File a carrier claim for a lost or damaged parcel or missing items."""
        with self.db.reading(ctx) as conn:
            ship = self._shipment(conn, args["tracking_number"])
            last = conn.execute("SELECT MAX(event_time) FROM shipment_events WHERE "
                                "tracking_number = ?", (ship["tracking_number"],)).fetchone()[0]
            claimed = conn.execute("SELECT claim_id FROM claims WHERE tracking_number = ?",
                                   (ship["tracking_number"],)).fetchone()
        if claimed is not None:
            raise permanent_error("duplicate_claim", f"claim {claimed[0]} exists for this parcel")
        shipped = datetime.fromisoformat(ship["shipped_at"]).date()
        if (TODAY - shipped).days > 30:
            raise permanent_error("claim_window_closed", f"shipped on {shipped}, more than 30 "
                                  "days ago")
        if args["claim_type"] == "lost" and last and \
                (TODAY - datetime.fromisoformat(last).date()).days < 5:
            raise permanent_error("too_early", "the last scan is less than 5 days old; wait "
                                  "before claiming a lost parcel")
        value = sum(i["quantity"] * i["value_cny"] for i in args["items"])
        claim_id = stable_id("CLM", ship["tracking_number"], args["claim_type"], value)
        with self.db.sandbox() as conn:
            conn.execute("INSERT INTO claims VALUES (?,?,?,?,?)", (claim_id,
                         ship["tracking_number"], args["claim_type"], "submitted",
                         f"{TODAY} 12:00:00"))
        return {"claim_id": claim_id, "status": "submitted",
                "max_payout_cny": round(min(value, 20 * ship["fee_cny"]), 2)}

    def update_delivery_address(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """Redirect an undelivered domestic shipment."""
        with self.db.reading(ctx) as conn:
            ship = self._shipment(conn, args["tracking_number"])
        if ship["status"] in ("out_for_delivery", "delivered", "cancelled", "returned"):
            raise permanent_error("too_late", f"the parcel is {ship['status']}; suggest a return "
                                  "or a new shipment")
        if ship["carrier"] in ("ups", "fedex"):
            raise permanent_error("not_redirectable", "international parcels cannot be "
                                  "redirected")
        new = args["new_address"]
        same_city = alias_key(new["city"]) == alias_key(ship["destination_city"])
        text = " ".join(new.get(k, "") for k in ("province", "city", "district", "street",
                                                  "postal_code") if new.get(k))
        with self.db.sandbox() as conn:
            conn.execute("UPDATE shipments SET delivery_address = ? WHERE tracking_number = ?",
                         (text, ship["tracking_number"]))
            stored = conn.execute("SELECT delivery_address FROM shipments WHERE "
                                  "tracking_number = ?", (ship["tracking_number"],)).fetchone()[0]
        eta = date.fromisoformat(ship["estimated_delivery"]) + timedelta(days=0 if same_city
                                                                          else 1)
        return {"tracking_number": ship["tracking_number"], "address": stored,
                "change_fee_cny": 0 if same_city else 10, "estimated_delivery": str(eta)}
