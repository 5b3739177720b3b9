"""The cost ledger: every LLM call's tokens, by phase and model, and what they cost.

Why in the ledger's database: the numbers outlive the daemon, and a user
deciding whether LLM answers (or, later, extraction) are worth it needs totals
over weeks, not over one run. Prices are the user's (config ``llm_prices``,
per million tokens), since only they know their contract.
"""

from __future__ import annotations

import time
from typing import Any

from wikid.store._sqlite import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_calls (
    ts REAL NOT NULL, phase TEXT NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, reported INTEGER NOT NULL);
"""


class CostLedger:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.conn.executescript(SCHEMA)

    def record(
        self, phase: str, model: str, input_tokens: int, output_tokens: int, reported: bool
    ) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO llm_calls VALUES (?, ?, ?, ?, ?, ?)",
                (time.time(), phase, model, input_tokens, output_tokens, int(reported)),
            )

    def totals(self, prices: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls and tokens by phase and model, with an estimated price where the model
        has one (``prices[model] = [input, output]`` per million tokens)."""
        prices = prices or {}
        rows = self.db.conn.execute(
            "SELECT phase, model, count(*), sum(input_tokens), sum(output_tokens) "
            "FROM llm_calls GROUP BY phase, model ORDER BY phase, model"
        ).fetchall()
        out: list[dict[str, Any]] = []
        for phase, model, calls, tin, tout in rows:
            price = prices.get(model)
            cost = (tin * float(price[0]) + tout * float(price[1])) / 1e6 if price else None
            out.append(
                {
                    "phase": phase,
                    "model": model,
                    "calls": calls,
                    "input_tokens": tin,
                    "output_tokens": tout,
                    "cost": None if cost is None else round(cost, 6),
                }
            )
        priced = [r["cost"] for r in out if r["cost"] is not None]
        return {
            "by_phase": out,
            "calls": sum(r["calls"] for r in out),
            "input_tokens": sum(r["input_tokens"] for r in out),
            "output_tokens": sum(r["output_tokens"] for r in out),
            "cost": round(sum(priced), 6) if priced else None,
            "unpriced_models": sorted({r["model"] for r in out if r["cost"] is None}),
        }
