"""Prices moved to ``brutus.pricing`` (one place for every cost brutus computes); kept here for imports."""

from __future__ import annotations

from ..pricing import PRICES, Price, cost_of, price_of

__all__ = ["PRICES", "Price", "cost_of", "price_of"]
