"""The demo retail domain (``hermes_fsm/data/retail.yaml``): data and the questions on it.

Products with aliases, warehouses, stores with their registry confidence, stock by
warehouse and by store (restock ETAs), price history, orders (each of one user), per-user
calendars, contacts and monthly sales. Relative days in the file (``day: +1``) are counted
from ``today``, which every function takes: the demo tools pass the date of their clock in
the configured timezone, so a test with a fixed clock gets fixed answers.

>>> retail = RetailData.default()
>>> retail.product("iphone 15")["sku"], retail.store("杭州市西湖区")["id"]
('IP15-128', 'hz_xh_001')
>>> retail.price_on("IP15-128", date(2026, 12, 1), date(2026, 11, 1))
5999
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import cache, cached_property
from importlib import resources
from typing import Any

import yaml

__all__ = ["STORE_CONFIDENCE_FLOOR", "RetailData"]

STORE_CONFIDENCE_FLOOR = 0.8
"""A store whose registry entry is less sure than this is refused until confirmed."""


class RetailData:
    """The retail dataset, read once; lookups by alias are case-insensitive."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    @classmethod
    def default(cls) -> RetailData:
        """The bundled dataset (``hermes_fsm/data/retail.yaml``), loaded once."""
        return _default()

    @cached_property
    def _products(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for item in self.doc["products"]:
            for name in (item["sku"], item["name"], item["zh"], *item["aliases"]):
                found.setdefault(name.strip().lower(), item)
        return found

    @cached_property
    def _stores(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for store in self.doc["stores"]:
            for name in (store["id"], store["name"], store["name_en"], *store["aliases"]):
                found.setdefault(name.strip().lower(), store)
        return found

    def product(self, name: str) -> dict[str, Any] | None:
        """The product a SKU or alias names, or ``None``."""
        return self._products.get(name.strip().lower())

    def store(self, name: str) -> dict[str, Any] | None:
        """The store an id or alias names, or ``None``."""
        return self._stores.get(name.strip().lower())

    def warehouses(self) -> dict[str, dict[str, Any]]:
        """Warehouse code → ``en``, ``zh``, ``aliases``."""
        return dict(self.doc["warehouses"])

    def store_stock(self, sku: str, store_id: str, today: date) -> dict[str, Any] | None:
        """``{units, eta}`` of a product in a store (``eta`` ISO or ``None``), or ``None``
        when the store does not carry it."""
        entry = self.doc["store_stock"].get(sku, {}).get(store_id)
        if entry is None:
            return None
        if isinstance(entry, int):
            return {"units": entry, "eta": None}
        eta = entry.get("eta_days")
        return {"units": int(entry["units"]),
                "eta": (today + timedelta(days=eta)).isoformat() if eta is not None else None}

    def price_on(self, sku: str, today: date, on: date) -> int | None:
        """The price in effect on ``on`` (the latest change on or before it), or ``None``."""
        history = sorted(self.doc["prices"].get(sku, ()), key=lambda p: p["day"])
        price = None
        for change in history:
            if today + timedelta(days=change["day"]) <= on:
                price = int(change["price"])
        return price

    def order(self, order_id: str) -> dict[str, Any] | None:
        """The order ``order_id`` (whoever it belongs to), or ``None``."""
        return next((o for o in self.doc["orders"] if o["id"] == order_id), None)

    def calendar(self, user: str, today: date) -> list[dict[str, Any]]:
        """The user's events and the shared ones, each with its ISO ``date``, by time."""
        entries = [*self.doc["calendar"].get(user, ()), *self.doc["calendar"].get("shared", ())]
        events = [{"date": (today + timedelta(days=e["day"])).isoformat(), "start": e["start"],
                   "end": e["end"], "title": e["title"], "title_en": e["title_en"]}
                  for e in entries]
        return sorted(events, key=lambda e: (e["date"], e["start"]))

    def contact(self, name: str) -> dict[str, Any] | None:
        """The contact a name (Chinese or English, any case) names, or ``None``."""
        wanted = name.strip().lower()
        return next((dict(c) for c in self.doc["contacts"]
                     if wanted in (c["name"].lower(), c["name_en"].lower())), None)

    def sales(self, first: date, last: date) -> dict[str, dict[str, int]]:
        """Units sold per month (``YYYY-MM``) of the months overlapping ``first``…``last``."""
        months = {}
        for month, units in self.doc["sales_units"].items():
            start = date.fromisoformat(f"{month}-01")
            if start <= last and _month_end(start) >= first:
                months[month] = {sku: int(n) for sku, n in units.items()}
        return dict(sorted(months.items()))


def _month_end(first: date) -> date:
    following = first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
    return following - timedelta(days=1)


@cache
def _default() -> RetailData:
    text = resources.files("hermes_fsm").joinpath("data/retail.yaml").read_text("utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return RetailData(yaml.load(text, Loader=loader))
