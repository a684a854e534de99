"""The reference shop database: a SQLite file generated deterministically from a fixed seed.

Tables (the ecommerce ``query_database`` spec lists the first five; the rest serve the other
tools): ``orders, order_items, products, customers, shipments, shipment_events, coupons,
customer_coupons, points_ledger, vip_levels, refunds, support_tickets, cities, city_aliases,
weather_daily, warehouses``. Sizes: 300 customers, 500 products, 2,600 orders (1,300 per year
2025 and 2026, ids ``ORD<year><4-digit sequence>``), their items, shipments and scan events.

The data's "today" is :data:`TODAY` (not the wall clock) so every run sees the same data. The
file is built once into the cache folder, keyed by :data:`GENERATOR_VERSION` and the seed,
written to a temporary name and renamed, so concurrent builders never see a half file.
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path


GENERATOR_VERSION = 2
DEFAULT_SEED = 20261129
TODAY = date(2026, 11, 29)
N_CUSTOMERS = 300
N_PRODUCTS = 500
ORDERS_PER_YEAR = 1300
CATEGORIES = ("electronics", "clothing", "home", "beauty", "food", "sports", "books", "toys")
ORDER_STATUSES = ("pending_payment", "paid", "shipped", "delivered", "cancelled", "refunded")
CARRIERS = ("sf", "jd", "zto", "yto", "sto", "ems", "ups", "fedex")

# (name_zh, name_en) product bases per category; variants add brand/size words.
_PRODUCTS = {
    "electronics": [("蓝牙耳机", "Bluetooth Earphones"), ("无线降噪耳机", "Noise Cancelling Headphones"),
                    ("USB-C充电器", "USB-C Charger"), ("手机壳", "Phone Case"),
                    ("扫地机器人", "Robot Vacuum"), ("移动电源", "Power Bank"),
                    ("智能手表", "Smart Watch"), ("机械键盘", "Mechanical Keyboard"),
                    ("电动牙刷", "Electric Toothbrush"), ("平板电脑", "Tablet"),
                    ("AirPods Pro", "AirPods Pro"), ("蓝牙音箱", "Bluetooth Speaker")],
    "clothing": [("羽绒服", "Down Jacket"), ("冬季夹克", "Winter Jacket"), ("速干T恤", "Quick-dry T-shirt"),
                 ("保暖内衣", "Thermal Underwear"), ("牛仔裤", "Jeans"), ("卫衣", "Hoodie"),
                 ("羊毛围巾", "Wool Scarf"), ("衬衫", "Shirt"), ("连衣裙", "Dress"), ("袜子", "Socks")],
    "home": [("空气炸锅", "Air Fryer"), ("保温杯", "Thermos Cup"), ("咖啡机", "Coffee Machine"),
             ("雨伞", "Umbrella"), ("四件套床品", "Bedding Set"), ("电饭煲", "Rice Cooker"),
             ("收纳盒", "Storage Box"), ("台灯", "Desk Lamp"), ("加湿器", "Humidifier"),
             ("不粘锅", "Non-stick Pan")],
    "beauty": [("口红", "Lipstick"), ("防晒霜", "Sunscreen"), ("香水礼盒", "Perfume Gift Set"),
               ("面膜", "Face Mask"), ("洗面奶", "Facial Cleanser"), ("精华液", "Serum"),
               ("护手霜", "Hand Cream"), ("眼影盘", "Eyeshadow Palette")],
    "food": [("咖啡豆", "Coffee Beans"), ("零食大礼包", "Snack Gift Box"), ("坚果", "Mixed Nuts"),
             ("绿茶", "Green Tea"), ("巧克力", "Chocolate"), ("燕麦片", "Oatmeal"),
             ("牛肉干", "Beef Jerky"), ("蜂蜜", "Honey")],
    "sports": [("瑜伽垫", "Yoga Mat"), ("跑步鞋", "Running Shoes"), ("哑铃", "Dumbbells"),
               ("运动水壶", "Sports Bottle"), ("速干T恤", "Quick-dry Sports T-shirt"),
               ("羽毛球拍", "Badminton Racket"), ("登山包", "Hiking Backpack"),
               ("跳绳", "Jump Rope")],
    "books": [("三体", "The Three-Body Problem"), ("家常菜谱", "Home Cooking Cookbook"),
              ("精装菜谱", "Hardcover Cookbook"), ("Python编程", "Python Programming"),
              ("红楼梦", "Dream of the Red Chamber"), ("儿童绘本", "Children's Picture Book"),
              ("英语词典", "English Dictionary"), ("历史故事", "History Stories")],
    "toys": [("乐高积木", "LEGO Bricks"), ("桌游", "Board Game"), ("儿童桌游", "Kids Board Game"),
             ("遥控汽车", "RC Car"), ("拼图", "Jigsaw Puzzle"), ("毛绒玩具", "Plush Toy"),
             ("积木火车", "Building Block Train"), ("魔方", "Rubik's Cube")],
}
_PRICE = {"electronics": (59, 4999), "clothing": (39, 1299), "home": (19, 1999),
          "beauty": (29, 899), "food": (9, 299), "sports": (19, 1499), "books": (15, 199),
          "toys": (19, 1299)}
_VARIANTS = [("", ""), ("经典款", "Classic"), ("升级版", "Plus"), ("迷你", "Mini"),
             ("旗舰款", "Pro"), ("家庭装", "Family Pack"), ("限量版", "Limited Edition"),
             ("礼盒装", "Gift Box"), ("大号", "Large"), ("轻量款", "Lite")]

# (city_id, name_en, name_zh, country, typical Nov temperature C, aliases)
CITIES = [
    ("beijing", "Beijing", "北京", "CN", 6, ["Peking"]),
    ("shanghai", "Shanghai", "上海", "CN", 13, []),
    ("guangzhou", "Guangzhou", "广州", "CN", 22, ["Canton"]),
    ("shenzhen", "Shenzhen", "深圳", "CN", 23, []),
    ("chengdu", "Chengdu", "成都", "CN", 13, []),
    ("hangzhou", "Hangzhou", "杭州", "CN", 13, []),
    ("suzhou", "Suzhou", "苏州", "CN", 12, []),
    ("harbin", "Harbin", "哈尔滨", "CN", -8, []),
    ("shenyang", "Shenyang", "沈阳", "CN", -2, []),
    ("changchun", "Changchun", "长春", "CN", -5, []),
    ("chongqing", "Chongqing", "重庆", "CN", 14, []),
    ("xian", "Xi'an", "西安", "CN", 7, ["Xian"]),
    ("wuhan", "Wuhan", "武汉", "CN", 12, []),
    ("nanjing", "Nanjing", "南京", "CN", 11, []),
    ("qingdao", "Qingdao", "青岛", "CN", 9, []),
    ("xiamen", "Xiamen", "厦门", "CN", 20, ["Amoy"]),
    ("fuzhou", "Fuzhou", "福州", "CN", 19, []),
    ("kunming", "Kunming", "昆明", "CN", 13, []),
    ("tianjin", "Tianjin", "天津", "CN", 6, []),
    ("hongkong", "Hong Kong", "香港", "HK", 22, ["HK"]),
    ("berlin", "Berlin", "柏林", "DE", 5, []),
    ("london", "London", "伦敦", "GB", 8, []),
    ("paris", "Paris", "巴黎", "FR", 8, []),
    ("madrid", "Madrid", "马德里", "ES", 11, []),
    ("newyork", "New York", "纽约", "US", 8, ["New York City", "NYC"]),
    ("chicago", "Chicago", "芝加哥", "US", 4, []),
    ("tokyo", "Tokyo", "东京", "JP", 13, []),
    ("seoul", "Seoul", "首尔", "KR", 6, []),
    ("sydney", "Sydney", "悉尼", "AU", 21, []),
    ("singapore", "Singapore", "新加坡", "SG", 27, []),
]
CONDITIONS = ("sunny", "cloudy", "rain", "snow", "storm", "fog")
_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
_GIVEN = ["伟", "芳", "娜", "敏", "静", "磊", "洋", "勇", "艳", "杰", "娟", "涛", "明", "超", "秀英",
          "霞", "平", "刚", "桂英", "丽"]
_EN_FIRST = ["Alice", "Ben", "Chloe", "David", "Emma", "Frank", "Grace", "Henry", "Ivy", "Jack",
             "Kate", "Leo", "Mia", "Noah", "Olivia"]
_EN_LAST = ["Smith", "Brown", "Wilson", "Taylor", "Clark", "Lee", "Walker", "Hall", "Young", "King"]
_NOTES = ["生日礼物", "送给妈妈", "birthday gift", "office supplies", "请尽快发货", "gift wrap please",
          "", "", "", "", "", ""]
VIP_LEVELS = [("regular", 0, 100, 0, 0), ("silver", 1000, 100, 1, 0), ("gold", 5000, 95, 1, 0),
              ("platinum", 20000, 95, 1, 1), ("diamond", 50000, 90, 1, 1)]
WAREHOUSES = [("SH01", "Shanghai", "上海"), ("BJ01", "Beijing", "北京"),
              ("GZ01", "Guangzhou", "广州"), ("CD01", "Chengdu", "成都"), ("WH01", "Wuhan", "武汉")]

SCHEMA = """
CREATE TABLE customers (customer_id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
  city TEXT NOT NULL, language TEXT NOT NULL, created_at TEXT NOT NULL, phone TEXT NOT NULL,
  vip_level TEXT NOT NULL, growth_value REAL NOT NULL, birthday TEXT NOT NULL);
CREATE TABLE inventory (sku TEXT NOT NULL, warehouse_id TEXT NOT NULL, on_hand INTEGER NOT NULL,
  reserved INTEGER NOT NULL, incoming INTEGER NOT NULL, PRIMARY KEY (sku, warehouse_id));
CREATE TABLE products (product_id TEXT PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name_zh TEXT NOT NULL, name_en TEXT NOT NULL,
  category TEXT NOT NULL, price_cny REAL NOT NULL, stock INTEGER NOT NULL,
  sales_30d INTEGER NOT NULL, listed_at TEXT NOT NULL);
CREATE TABLE orders (order_id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers,
  status TEXT NOT NULL, payment_status TEXT NOT NULL, total_cny REAL NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL, note TEXT NOT NULL,
  shipping_address TEXT NOT NULL, recipient_name TEXT NOT NULL, recipient_phone TEXT NOT NULL,
  coupon_id TEXT, points_used INTEGER NOT NULL DEFAULT 0);
CREATE TABLE order_items (order_id TEXT NOT NULL REFERENCES orders, product_id TEXT NOT NULL
  REFERENCES products, quantity INTEGER NOT NULL, unit_price_cny REAL NOT NULL);
CREATE TABLE shipments (tracking_number TEXT PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders,
  carrier TEXT NOT NULL, status TEXT NOT NULL, shipped_at TEXT NOT NULL, delivered_at TEXT,
  estimated_delivery TEXT NOT NULL, warehouse_id TEXT NOT NULL, destination_city TEXT NOT NULL,
  delivery_address TEXT NOT NULL, fee_cny REAL NOT NULL);
CREATE TABLE shipment_events (tracking_number TEXT NOT NULL REFERENCES shipments,
  event_time TEXT NOT NULL, location TEXT NOT NULL, status TEXT NOT NULL, note TEXT NOT NULL);
CREATE TABLE coupons (coupon_id TEXT PRIMARY KEY, kind TEXT NOT NULL, value REAL NOT NULL,
  threshold_cny REAL NOT NULL, category TEXT, expires_at TEXT NOT NULL);
CREATE TABLE customer_coupons (customer_id TEXT NOT NULL REFERENCES customers,
  coupon_id TEXT NOT NULL REFERENCES coupons, status TEXT NOT NULL, claimed_at TEXT NOT NULL,
  used_order_id TEXT);
CREATE TABLE points_ledger (entry_id INTEGER PRIMARY KEY, customer_id TEXT NOT NULL,
  change INTEGER NOT NULL, reason TEXT NOT NULL, order_id TEXT, created_at TEXT NOT NULL);
CREATE TABLE vip_levels (level TEXT PRIMARY KEY, min_growth REAL NOT NULL, price_pct INTEGER NOT NULL,
  free_shipping INTEGER NOT NULL, service_24h INTEGER NOT NULL);
CREATE TABLE refunds (refund_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount_cny REAL NOT NULL,
  reason TEXT NOT NULL, refund_type TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE claims (claim_id TEXT PRIMARY KEY, tracking_number TEXT NOT NULL,
  claim_type TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE support_tickets (ticket_id TEXT PRIMARY KEY, customer_id TEXT NOT NULL,
  order_id TEXT, reason TEXT NOT NULL, priority TEXT NOT NULL, status TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE TABLE cities (city_id TEXT PRIMARY KEY, name_en TEXT NOT NULL, name_zh TEXT NOT NULL,
  country TEXT NOT NULL);
CREATE TABLE city_aliases (alias TEXT PRIMARY KEY, city_id TEXT NOT NULL REFERENCES cities);
CREATE TABLE weather_daily (city_id TEXT NOT NULL REFERENCES cities, day INTEGER NOT NULL,
  date TEXT NOT NULL, temp_high_c REAL NOT NULL, temp_low_c REAL NOT NULL, condition TEXT NOT NULL,
  wind_kph INTEGER NOT NULL, humidity_pct INTEGER NOT NULL, PRIMARY KEY (city_id, day));
CREATE TABLE warehouses (warehouse_id TEXT PRIMARY KEY, city_en TEXT NOT NULL, city_zh TEXT NOT NULL);
CREATE INDEX orders_customer ON orders(customer_id, created_at);
CREATE INDEX orders_created ON orders(created_at);
CREATE INDEX items_order ON order_items(order_id);
CREATE INDEX shipments_order ON shipments(order_id);
CREATE INDEX events_tracking ON shipment_events(tracking_number, event_time);
CREATE INDEX ledger_customer ON points_ledger(customer_id, created_at);
"""


def alias_key(name: str) -> str:
    """How a city name is looked up: case-folded, spaces/'-' and a trailing 市 removed."""
    key = "".join(name.split()).replace("-", "").replace("'", "").casefold()
    return key[:-1] if key.endswith("市") and len(key) > 1 else key


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _tracking_number(rng: random.Random, carrier: str) -> str:
    def digits(n: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(n))

    formats: dict[str, Callable[[], str]] = {
        "sf": lambda: "SF" + digits(10), "jd": lambda: "JDVA" + digits(11),
        "yto": lambda: "YT" + digits(10), "zto": lambda: "7" + digits(13),
        "sto": lambda: "773" + digits(12), "ems": lambda: "E" + rng.choice("ABM")
        + digits(9) + "CN", "ups": lambda: "1Z" + "".join(
            rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(16)),
        "fedex": lambda: digits(12)}
    return formats[carrier]()


def generate(path: Path, seed: int = DEFAULT_SEED) -> None:
    """Write the shop database to ``path`` (overwritten), deterministically from ``seed``.

    No journal and no sync per statement (SQLite's ``journal_mode=OFF``, ``synchronous=OFF``):
    the file is written once, then synced once; a caller that needs it whole after a crash
    writes a temporary file and renames it
    (:func:`bench.executor.backends.shopcache.shop_db_path`). An fsync per statement
    made the first run's start-up 0.4 s longer here.

    The steps draw from one random generator in a fixed order (places and weather,
    customers, products, inventory, orders, coupons, coupons held): the same seed gives the
    same file, byte for byte.
    """
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.executescript(SCHEMA)
    _insert_places(conn, rng)
    customers = _customers(rng)
    products = _products(rng)
    conn.executemany("INSERT INTO products VALUES (?,?,?,?,?,?,?,?,?)", products)
    conn.executemany("INSERT INTO inventory VALUES (?,?,?,?,?)", [
        (p[1], w[0], on_hand, rng.randint(0, min(on_hand, 30)), rng.choice([0, 0, 0, 50, 100]))
        for p in products for w in WAREHOUSES for on_hand in [rng.randint(0, 300)]])
    sales = _Sales()
    for year in (2025, 2026):
        _sell_year(rng, year, customers, products, sales)
    for n, customer in enumerate(customers):
        growth = round(sales.spend.get(customer[0], 0.0), 2)
        level = [lvl[0] for lvl in VIP_LEVELS if growth >= lvl[1]][-1]
        customers[n] = (*customer[:7], level, growth, customer[9])
    conn.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?,?,?,?,?)", customers)
    conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", sales.orders)
    conn.executemany("INSERT INTO order_items VALUES (?,?,?,?)", sales.items)
    conn.executemany("INSERT INTO shipments VALUES (?,?,?,?,?,?,?,?,?,?,?)", sales.shipments)
    conn.executemany("INSERT INTO shipment_events VALUES (?,?,?,?,?)", sales.events)
    conn.executemany("INSERT INTO points_ledger (customer_id, change, reason, order_id, "
                     "created_at) VALUES (?,?,?,?,?)", sales.ledger)
    coupons = _coupons(rng)
    conn.executemany("INSERT INTO coupons VALUES (?,?,?,?,?,?)", coupons)
    conn.executemany("INSERT INTO customer_coupons VALUES (?,?,?,?,?)",
                     _held_coupons(rng, customers, coupons))
    conn.commit()
    conn.close()
    with open(path, "rb") as written:  # on disk before a caller renames it into place
        os.fsync(written.fileno())


#: A customer row: (customer_id, name, email, city, lang, created_at, phone, vip level,
#: growth, birthday); the level and growth are set once the orders are made.
_Customer = tuple[str, str, str, str, str, str, str, str, float, str]
#: A product row: (product_id, sku, name_zh, name_en, category, price, sales, stock hint,
#: listed_at), as the ``products`` table holds it.
_Product = tuple[str, str, str, str, str, float, int, int, str]
#: A coupon row: (coupon_id, kind, value, threshold, category or None, expires_at).
_Coupon = tuple[str, str, int, int, str | None, str]


def _insert_places(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Insert the cities, their aliases, a week of weather per city, the warehouses and the
    VIP levels."""
    city_rows = [(c[0], c[1], c[2], c[3]) for c in CITIES]
    conn.executemany("INSERT INTO cities VALUES (?,?,?,?)", city_rows)
    aliases = {}
    for city_id, en, zh, _, _, extra in CITIES:
        for name in (en, zh, city_id, *extra):
            aliases[alias_key(name)] = city_id
    conn.executemany("INSERT INTO city_aliases VALUES (?,?)", sorted(aliases.items()))
    weather = []
    for city_id, _, _, _, base, _ in CITIES:
        for day in range(1, 8):
            high = base + rng.uniform(-4, 4)
            cond = rng.choices(CONDITIONS, weights=(30, 30, 20, 8 if base < 5 else 1, 3, 8))[0]
            weather.append((city_id, day, (TODAY + timedelta(days=day - 1)).isoformat(),
                            round(high, 1), round(high - rng.uniform(4, 10), 1), cond,
                            rng.randint(3, 45), rng.randint(25, 95)))
    conn.executemany("INSERT INTO weather_daily VALUES (?,?,?,?,?,?,?,?)", weather)
    conn.executemany("INSERT INTO warehouses VALUES (?,?,?)", WAREHOUSES)
    conn.executemany("INSERT INTO vip_levels VALUES (?,?,?,?,?)", VIP_LEVELS)


def _customers(rng: random.Random) -> list[_Customer]:
    """:data:`N_CUSTOMERS` customers, 70% Chinese-speaking (mostly in Chinese cities), all
    ``regular`` with no growth yet."""
    cn_cities = [c for c in CITIES if c[3] == "CN"]
    customers: list[_Customer] = []
    for i in range(1, N_CUSTOMERS + 1):
        is_zh = rng.random() < 0.7
        home = rng.choice(cn_cities if is_zh or rng.random() < 0.6 else CITIES)
        name = rng.choice(_SURNAMES) + rng.choice(_GIVEN) if is_zh else \
            f"{rng.choice(_EN_FIRST)} {rng.choice(_EN_LAST)}"
        created = datetime(2023, 1, 1) + timedelta(minutes=rng.randint(0, 60 * 24 * 1000))
        customers.append((f"C{i:04d}", name, f"user{i:04d}@mail.example.com", home[2] if is_zh
                          else home[1], "zh" if is_zh else "en", _ts(created),
                          "1" + rng.choice("3456789") + "".join(rng.choice("0123456789")
                                                                for _ in range(9)),
                          "regular", 0.0, f"{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"))
    return customers


def _products(rng: random.Random) -> list[_Product]:
    """:data:`N_PRODUCTS` products spread over :data:`CATEGORIES` (base names times
    variants), priced within their category's range."""
    products = []
    counter = 0
    for index, category in enumerate(CATEGORIES):
        bases = _PRODUCTS[category]
        per_category = N_PRODUCTS // len(CATEGORIES) + (index < N_PRODUCTS % len(CATEGORIES))
        combos = [(b, v) for v in _VARIANTS for b in bases]
        for (zh, en), (vzh, ven) in combos[:per_category]:
            counter += 1
            low, high = _PRICE[category]
            price = round(rng.uniform(low, high) if rng.random() < 0.3 else
                          rng.uniform(low, (low + high) / 3), 0) - 0.1 * rng.randint(0, 1)
            listed = datetime(2024, 1, 1) + timedelta(days=rng.randint(0, 1060))
            products.append((f"P{counter:04d}", f"SKU-{100000 + counter:06d}", f"{vzh}{zh}".strip(), f"{en} {ven}".strip(),
                             category, round(price, 2), rng.choice([0, 0] + list(range(1, 400))),
                             rng.randint(0, 900), _ts(listed)))
    return products


class _Sales:
    """The rows the orders make (:func:`_sell_year`): ``orders``, their ``items``,
    ``shipments`` and their tracking ``events``, the points ``ledger``, and each customer's
    ``spend`` (the growth their VIP level follows). A plain class: this file runs as a
    child that imports as little as it can (``python -I -S shopdb.py``)."""

    def __init__(self) -> None:
        self.orders: list[tuple[object, ...]] = []
        self.items: list[tuple[object, ...]] = []
        self.shipments: list[tuple[object, ...]] = []
        self.events: list[tuple[object, ...]] = []
        self.ledger: list[tuple[object, ...]] = []
        self.spend: dict[str, float] = {}


def _sell_year(rng: random.Random, year: int, customers: Sequence[_Customer],
               products: Sequence[_Product], sales: _Sales) -> None:
    """Add :data:`ORDERS_PER_YEAR` orders of ``year`` (up to :data:`TODAY`) to ``sales``,
    each with its items, points and, once paid, its shipment."""
    start = datetime(year, 1, 1)
    span = ((datetime(TODAY.year, TODAY.month, TODAY.day, 12) if year == TODAY.year
             else datetime(year + 1, 1, 1)) - start).total_seconds()
    moments = sorted(start + timedelta(seconds=rng.uniform(0, span))
                     for _ in range(ORDERS_PER_YEAR))
    for seq, created in enumerate(moments, start=1):
        order_id = f"ORD{year}{seq:04d}"
        customer = customers[min(int(rng.paretovariate(1.2)) - 1, N_CUSTOMERS - 1)
                             if rng.random() < 0.15 else rng.randrange(N_CUSTOMERS)]
        age = (datetime(TODAY.year, TODAY.month, TODAY.day, 23) - created).days
        if age < 2:
            status = rng.choice(["pending_payment", "paid", "paid", "shipped"])
        elif age < 8:
            status = rng.choice(["paid", "shipped", "shipped", "delivered", "cancelled"])
        else:
            status = rng.choices(ORDER_STATUSES, weights=(1, 1, 2, 80, 9, 7))[0]
        lines = rng.sample(products, k=rng.choice([1, 1, 1, 2, 2, 3]))
        total = 0.0
        for product in lines:
            qty = rng.choice([1, 1, 1, 2, 3])
            sales.items.append((order_id, product[0], qty, product[5]))
            total += qty * product[5]
        total = round(total, 2)
        payment = {"pending_payment": "unpaid", "cancelled": rng.choice(["unpaid",
                                                                         "refunded"]),
                   "refunded": "refunded"}.get(status, "paid")
        updated = created + timedelta(hours=rng.randint(1, 72))
        city = customer[3]
        sales.orders.append((order_id, customer[0], status, payment, total, _ts(created),
                             _ts(min(updated, datetime(TODAY.year, TODAY.month, TODAY.day,
                                                       23))),
                             rng.choice(_NOTES), f"{city} {rng.randint(1, 999)}号",
                             customer[1], customer[6], None, 0))
        if status in ("paid", "shipped", "delivered", "refunded"):
            sales.spend[customer[0]] = sales.spend.get(customer[0], 0.0) + (
                total if status != "refunded" else 0.0)
            sales.ledger.append((customer[0], int(total), "order", order_id,
                                 _ts(created + timedelta(hours=1))))
            if status == "refunded":
                sales.ledger.append((customer[0], -int(total), "refund", order_id,
                                     _ts(updated + timedelta(days=3))))
        if status in ("shipped", "delivered", "refunded") or (
                status == "paid" and rng.random() < 0.4):
            _ship(rng, order_id, status, created, city, sales)


def _ship(rng: random.Random, order_id: str, status: str, created: datetime, city: str,
          sales: _Sales) -> None:
    """Add the shipment of order ``order_id`` (its last order row: the address) and its
    tracking events up to :data:`TODAY` to ``sales``; its state follows the order's
    ``status``."""
    carrier = rng.choices(CARRIERS, weights=(30, 20, 15, 12, 10, 6, 4, 3))[0]
    number = _tracking_number(rng, carrier)
    shipped = created + timedelta(hours=rng.randint(6, 48))
    eta = (shipped + timedelta(days=rng.randint(2, 5))).date()
    delivered = None
    ship_status = "in_transit"
    if status == "paid":
        ship_status = "label_created"
    elif status != "shipped":
        delivered = shipped + timedelta(hours=rng.randint(30, 130))
        ship_status = "delivered"
    elif rng.random() < 0.1:
        ship_status = "exception"
    elif (TODAY - shipped.date()).days >= 2:
        ship_status = "out_for_delivery"
    warehouse = rng.choice(WAREHOUSES)
    sales.shipments.append((number, order_id, carrier, ship_status, _ts(shipped),
                            _ts(delivered) if delivered else None, eta.isoformat(),
                            warehouse[0], city, sales.orders[-1][8],
                            round(8 + 4 * rng.random() * (1 + (carrier in ("ups", "fedex"))),
                                  1)))
    stops = [(shipped - timedelta(hours=2), warehouse[2] + "仓", "created",
              "电子面单已打印 label created")]
    if ship_status != "label_created":
        stops += [(shipped, warehouse[2] + "仓", "picked_up", "已揽收 picked up"),
                  (shipped + timedelta(hours=rng.randint(4, 20)),
                   warehouse[2] + "转运中心", "departed_hub", "已发出 departed hub"),
                  (shipped + timedelta(hours=rng.randint(24, 40)), city + "转运中心",
                   "arrived_hub", "到达目的地 arrived in destination city")]
    if ship_status == "out_for_delivery":
        stops.append((shipped + timedelta(hours=42), city, "out_for_delivery",
                      "派送中 out for delivery"))
    if ship_status == "exception":
        stops.append((shipped + timedelta(hours=44), city, "exception",
                      "地址不详 address problem, contact customer service"))
    if delivered:
        stops.append((delivered, city, "delivered", "已签收 delivered"))
    for moment, location, ev_status, note in stops:
        if moment.date() <= TODAY:
            sales.events.append((number, _ts(moment), location, ev_status, note))


def _coupons(rng: random.Random) -> list[_Coupon]:
    """Forty coupons (fixed, percent or free shipping), some of them expired."""
    coupons: list[_Coupon] = []
    for i in range(1, 41):
        kind = rng.choice(["fixed", "fixed", "percent", "free_shipping"])
        threshold = rng.choice([0, 99, 199, 300, 500, 1000])
        value = {"fixed": rng.choice([10, 20, 30, 50, 100]), "percent": rng.choice([90, 85, 95]),
                 "free_shipping": 0}[kind]
        expires = TODAY + timedelta(days=rng.randint(-90, 120))
        coupons.append((f"CPN{i:04d}", kind, value, threshold,
                        rng.choice([None, None, *CATEGORIES]), expires.isoformat() + " 23:59:59"))
    return coupons


def _held_coupons(rng: random.Random, customers: Sequence[_Customer],
                  coupons: Sequence[_Coupon]) -> list[tuple[str, str, str, str, None]]:
    """Up to five coupons per customer: expired, available or used."""
    held = []
    for customer in customers:
        for coupon in rng.sample(coupons, k=rng.randint(0, 5)):
            expired = coupon[5][:10] < TODAY.isoformat()
            status = "expired" if expired else rng.choice(["available", "available", "used"])
            held.append((customer[0], coupon[0], status,
                         _ts(datetime(2026, 1, 1) + timedelta(days=rng.randint(0, 300))), None))
    return held


def write_whole(path: Path, seed: int = DEFAULT_SEED) -> None:
    """Generate the database for ``seed`` into a temporary file beside ``path`` and rename it
    to ``path``: readers see the whole file or none (a temporary file is removed on error).

    Raises:
        OSError: the folder cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".shop-", suffix=".tmp")
    os.close(fd)
    try:
        Path(tmp).unlink()
        generate(Path(tmp), seed)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _exit_on(signum: int, frame: object) -> None:
    """A stop signal in the child: exit through :func:`write_whole`'s cleanup."""
    sys.exit(128 + signum)


if __name__ == "__main__":  # python shopdb.py SEED PATH: a child that imports nothing of bench
    import signal

    # bench's process group gets SIGTERM (``timeout``, a CI job cancelled) or SIGHUP (its
    # terminal closed) during start-up: by default the child would die with its temporary
    # file left in the cache folder, ~3.6 MB each time; SIGINT already raises
    for stop in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, stop):
            signal.signal(getattr(signal, stop), _exit_on)
    write_whole(Path(sys.argv[2]), int(sys.argv[1]))
