from __future__ import annotations

print("fetch weather")
