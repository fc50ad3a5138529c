"""Demo tools on the bundled retail domain (``hermes_fsm/data/retail.yaml``).

They make the default configuration a real agent: stock by warehouse and by store, prices
now and on a date, the caller's orders, reminders with exact due times (kept per user in
the data directory), contacts, sales reports written as files, and an outbox for e-mail
(its contract asks for approval). The rules brain plans them and answers from their
results. Their contracts are pinned in ``contracts/tools/``. A tool that depends on the
user reads the caller from the engine (:func:`hermes_fsm.tools.calling.current_caller`),
never from its arguments.

>>> registry = build_demo_registry()
>>> registry.names()  # doctest: +NORMALIZE_WHITESPACE
['contact_lookup', 'create_reminder', 'inventory_lookup', 'list_reminders', 'order_status',
 'price_lookup', 'sales_report', 'send_email', 'store_stock']
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import threading
from datetime import date, timedelta, tzinfo
from functools import cache
from pathlib import Path
from typing import Any

from hermes_fsm._internal.data import data_path
from hermes_fsm.conversation.times import zone_of
from hermes_fsm.demo.retail import RetailData
from hermes_fsm.errors import ToolCallFailed, ToolError
from hermes_fsm.sources import Clock, SystemClock
from hermes_fsm.tools.calling import current_caller
from hermes_fsm.tools.registry import ToolRegistry

__all__ = ["DEMO_TOOLS", "build_demo_registry", "inventory_data", "warehouse_code"]

DEMO_TOOLS = ("contact_lookup", "create_reminder", "inventory_lookup", "list_reminders",
              "order_status", "price_lookup", "sales_report", "send_email", "store_stock")
"""The names of the demo tools, sorted."""


@cache
def inventory_data() -> dict[str, Any]:
    """Warehouses (``names``, ``label``) and products with their warehouse stock, from the
    retail dataset (the shape of the old ``inventory.json``)."""
    retail = RetailData.default()
    warehouses = {code: {"names": [code, *w["aliases"]], "label": w["en"], "zh": w["zh"]}
                  for code, w in retail.warehouses().items()}
    names = {p["sku"]: p["name"] for p in retail.doc["products"]}
    items = [{"sku": sku, "name": names[sku], "stock": dict(stock)}
             for sku, stock in retail.doc["warehouse_stock"].items()]
    return {"warehouses": warehouses, "items": items}


def warehouse_code(name: str) -> str | None:
    """The warehouse code (``east`` …) for a name in English or Chinese, or ``None``."""
    wanted = name.strip().lower()
    for code, info in inventory_data()["warehouses"].items():
        if wanted == code or wanted in (n.lower() for n in info["names"]):
            return str(code)
    return None


def _contract(name: str) -> Path:
    return data_path("contracts", "tools", f"{name}.yaml")


def _not_found(message: str) -> ToolCallFailed:
    return ToolCallFailed("NOT_FOUND", message, False)


def _caller() -> str:
    return current_caller() or "anonymous"


class _UserFiles:
    """Per-user JSON lists (reminders, outbox) in a directory, or in memory without one."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def _path(self, user: str) -> Path:
        assert self.directory is not None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user) or "_"
        return self.directory / f"{safe}.json"

    def read(self, user: str) -> list[dict[str, Any]]:
        if self.directory is None:
            return [dict(r) for r in self._memory.get(user, ())]
        path = self._path(user)
        return list(json.loads(path.read_text("utf-8"))) if path.exists() else []

    def append(self, user: str, make: Any) -> dict[str, Any]:
        """Append ``make(entries)`` to the user's list, durably (write, fsync, rename)."""
        with self._lock:
            entries = self.read(user)
            entry: dict[str, Any] = make(entries)
            entries.append(entry)
            if self.directory is None:
                self._memory[user] = entries
                return dict(entry)
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(user)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entries, out, ensure_ascii=False, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            return dict(entry)


def build_demo_registry(*, clock: Clock | None = None, timezone: str | tzinfo | None = None,
                        data_dir: str | Path | None = None) -> ToolRegistry:
    """A fresh registry with the demo tools.

    Args:
        clock: what "today" is (default: the wall clock), in ``timezone`` (default: the
            machine's local zone): the dataset's relative days count from it.
        data_dir: where reminders, reports and the outbox live (``reminders/``,
            ``reports/``, ``outbox/``). Without one, reminders and the outbox are this
            registry's own, in memory, and reports go to a temporary directory.
    """
    registry = ToolRegistry()
    retail = RetailData.default()
    zone = zone_of(timezone)
    clock = clock or SystemClock()
    root = Path(data_dir).expanduser() if data_dir is not None else None
    reminders = _UserFiles(root / "reminders" if root is not None else None)
    outbox = _UserFiles(root / "outbox" if root is not None else None)
    reports: list[Path] = []  # the report directory, made at the first report

    def today() -> date:
        return clock.now().astimezone(zone).date()

    # in-memory and instant: called on the event loop, no worker thread (see Tool.inline)
    registry.provide_registry("stores", {s["id"]: s for s in retail.doc["stores"]})
    registry.provide_registry("catalog", {p["sku"]: p for p in retail.doc["products"]})

    @registry.tool(contract=_contract("inventory_lookup"), inline=True)
    def inventory_lookup(sku: str, warehouse: str | None = None) -> dict[str, Any]:
        items = {item["sku"]: item for item in inventory_data()["items"]}
        item = items.get(sku.upper())
        if item is None:
            raise ToolError(f"no product with SKU {sku!r}; known SKUs: {', '.join(sorted(items))}")
        if warehouse is None:
            return {"sku": item["sku"], "name": item["name"], "stock": dict(item["stock"]),
                    "total": sum(item["stock"].values())}
        code = warehouse_code(warehouse)
        if code is None:
            known = ", ".join(inventory_data()["warehouses"])
            raise ToolError(f"unknown warehouse {warehouse!r}; known warehouses: {known}")
        return {"sku": item["sku"], "name": item["name"], "warehouse": code,
                "quantity": item["stock"][code]}

    @registry.tool(contract=_contract("store_stock"), inline=True)
    def store_stock(sku: str, store: str) -> dict[str, Any]:
        product, shop = retail.product(sku), retail.store(store)
        if product is None:
            raise _not_found(f"no product with SKU {sku!r}")
        if shop is None or shop["id"] != store:
            raise _not_found(f"no store with id {store!r} in the registry")
        # a store below the registry's confidence floor, a discontinued product: refused by
        # the contract's preconditions (contracts/tools/store_stock.yaml) before this runs
        stock = retail.store_stock(product["sku"], store, today())
        if stock is None:
            raise _not_found(f"{shop['name_en']} ({store}) does not carry {product['sku']}")
        return {"sku": product["sku"], "name": product["name"], "name_zh": product["zh"],
                "store": store,
                "store_name": shop["name"], "store_name_en": shop["name_en"],
                "units": stock["units"], "restock_date": stock["eta"]}

    @registry.tool(contract=_contract("price_lookup"), inline=True)
    def price_lookup(sku: str, on: str | None = None) -> dict[str, Any]:
        product = retail.product(sku)
        now = today()
        price = retail.price_on(sku, now, now) if product is not None else None
        if product is None or price is None:
            raise _not_found(f"no price history for {sku!r}")
        found: dict[str, Any] = {"sku": product["sku"], "name": product["name"],
                                 "name_zh": product["zh"], "currency": "CNY",
                                 "date": now.isoformat(), "price": price}
        if on is not None:
            then = retail.price_on(sku, now, date.fromisoformat(on))
            if then is not None:
                found.update(then_date=on, then_price=then, change=price - then,
                             trend="up" if price > then else "down" if price < then
                             else "unchanged")
        return found

    @registry.tool(contract=_contract("order_status"), inline=True)
    def order_status(order_id: str) -> dict[str, Any]:
        order = retail.order(order_id)
        if order is None or order["user"] != _caller():  # another user's: no such order
            raise _not_found(f"you have no order {order_id}; check the number (it looks "
                             "like ORD-12345678)")
        now = today()
        product = retail.product(order["sku"])
        found: dict[str, Any] = {"order_id": order["id"], "sku": order["sku"],
                                 "name": product["name"] if product else order["sku"],
                                 "name_zh": product["zh"] if product else order["sku"],
                                 "qty": order["qty"], "status": order["status"]}
        for key in ("ordered", "promised", "shipped", "delivered"):
            if f"{key}_day" in order:
                found[f"{key}_date"] = (now + timedelta(days=order[f"{key}_day"])).isoformat()
        found.update({k: order[k] for k in ("carrier", "tracking") if k in order})
        return found

    @registry.tool(contract=_contract("create_reminder"), inline=True)
    def create_reminder(text: str, due: str) -> dict[str, Any]:
        return reminders.append(_caller(), lambda existing: {
            "id": f"r{len(existing) + 1}", "text": text, "due": due})

    @registry.tool(contract=_contract("list_reminders"), inline=True)
    def list_reminders() -> dict[str, Any]:
        kept = reminders.read(_caller())
        return {"reminders": kept[-10:], "total": len(kept)}

    @registry.tool(contract=_contract("contact_lookup"), inline=True)
    def contact_lookup(name: str) -> dict[str, Any]:
        contact = retail.contact(name)
        if contact is None:
            known = ", ".join(c["name_en"] for c in retail.doc["contacts"])
            raise _not_found(f"no contact named {name!r}; contacts: {known}")
        return contact

    @registry.tool(contract=_contract("sales_report"))
    def sales_report(start: str, end: str, format: str = "markdown") -> dict[str, Any]:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
        months = retail.sales(first, last)
        if not months:
            raise _not_found(f"no sales figures between {start} and {end}")
        units: dict[str, int] = {}
        for sold in months.values():
            for sku, n in sold.items():
                units[sku] = units.get(sku, 0) + n
        if not reports:
            reports.append(root / "reports" if root is not None
                           else Path(tempfile.mkdtemp(prefix="hermes-reports-")))
        reports[0].mkdir(parents=True, exist_ok=True)
        suffix = "csv" if format == "csv" else "md"
        path = reports[0] / f"sales_{start}_{end}.{suffix}"
        path.write_text(_report_text(months, units, start, end, format), "utf-8")
        return {"start": start, "end": end, "months": list(months), "units": units,
                "total": sum(units.values()), "path": str(path), "format": format}

    @registry.tool(contract=_contract("send_email"), inline=True)
    def send_email(to: str, subject: str, body: str, attachment: str | None = None
                   ) -> dict[str, Any]:
        user = _caller()
        sent = outbox.append(user, lambda existing: {
            "id": f"mail-{len(existing) + 1}", "to": to, "subject": subject, "body": body,
            "attachment": attachment, "status": "queued"})
        where = str(outbox._path(user)) if outbox.directory is not None else "memory"
        return {"id": sent["id"], "to": to, "subject": subject, "status": "queued",
                "path": where}

    return registry


def _report_text(months: dict[str, dict[str, int]], units: dict[str, int], start: str,
                 end: str, format: str) -> str:
    skus = sorted(units)
    if format == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["month", *skus])
        for month, sold in months.items():
            writer.writerow([month, *(sold.get(s, 0) for s in skus)])
        writer.writerow(["total", *(units[s] for s in skus)])
        return out.getvalue()
    lines = [f"# Sales {start} – {end} (units)", "", "| month | " + " | ".join(skus) + " |",
             "|---|" + "---|" * len(skus)]
    lines += [f"| {m} | " + " | ".join(str(sold.get(s, 0)) for s in skus) + " |"
              for m, sold in months.items()]
    lines.append("| **total** | " + " | ".join(f"**{units[s]}**" for s in skus) + " |")
    return "\n".join(lines) + "\n"
