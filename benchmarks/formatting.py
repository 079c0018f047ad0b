"""How the benchmarks write a time: shared by run.py's tables and the docs' tables (scripts/docs-tables)."""


def format_seconds(seconds):
    """``"125 µs"``, ``"22.3 ms"``, ``"1.31 s"``; ``"-"`` for a time not measured."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"
