"""Checking the prices against before/after pairs (scripts/price_pairs.py, tests/data/price/): the
projection for each pair from its "before" report alone (the price of the advice line the pair's
label says the "after" follows), and the score of those projections against measured speedups.

Pure functions over extracted launches: ``{op: [launch entry, ...]}`` where an entry holds the
launch's ``columns`` (:mod:`.extract`) and ncu's ``rules``, in launch order.
"""

from __future__ import annotations

import math
import statistics
from fnmatch import fnmatch

from bsprof.analyzers.ncu.price import Price, headroom, order_key, price_sequence_with_ncu
from bsprof.analyzers.ncu.verdict import classify

# the score's targets (docs/verdict.md, "What the prices are worth")
TARGETS = {"inside_share": 0.80, "median_width": 1.5, "median_ratio": (0.8, 1.25), "miss_above": 1.1}


def _clean(v):
    if hasattr(v, "item"):
        v = v.item()
    return None if isinstance(v, float) and math.isnan(v) else v


def launches_by_range(ex) -> dict[str, list[dict]]:
    """op -> its launches (``columns`` and ncu's ``rules``) from an :class:`~.extract.Extraction` whose
    launches sit in NVTX ranges ``pair_<side>_<op>`` (scripts/price_pairs.py)."""
    out: dict[str, list[dict]] = {}
    for i, (_, row) in enumerate(ex.table.iterrows()):
        rng = next((r for r in reversed(str(row["nvtx"]).split(" / ")) if r.startswith("pair_")), "")
        op = rng.split("_", 2)[-1]
        cols = {c: _clean(v) for c, v in row.items() if _clean(v) is not None and c != "notes"}
        out.setdefault(op, []).append({"launch_in_report": i, "columns": cols, "rules": ex.rules[i]})
    return out


def project_pairs(before: dict[str, list[dict]], labels: dict, pairs: dict[str, list[str]]) -> dict:
    """pair -> :func:`project_pair` of its before launches (``pairs``: pair -> [before op, after op])."""
    out = {}
    for pair, lab in labels["pairs"].items():
        op = pairs[pair][0]
        if op not in before:
            out[pair] = {
                "follows": lab["follows"],
                "advice": None,
                "before": op,
                "before_us": None,
                "lines": [],
                "price": Price("", False, why="no report of the before launch").as_dict(),
            }
            continue
        out[pair] = project_pair(before[op], lab["follows"])
        out[pair]["before"] = op
        out[pair]["ncu_top_pct"] = _clean(ncu_top(before[op]))
    return out


def duration_ratio(before: dict[str, list[dict]], after: dict[str, list[dict]], pairs: dict) -> dict[str, float]:
    """pair -> the before launches' ncu duration over the after launches' (ncu's own measurement)."""
    out = {}
    for pair, (b, a) in pairs.items():
        if before.get(b) and after.get(a):
            out[pair] = sum(e["columns"]["duration_ns"] for e in before[b]) / sum(
                e["columns"]["duration_ns"] for e in after[a]
            )
    return out


def _matches(pid: str, follows: list[str]) -> bool:
    return any(pid == f or fnmatch(pid, f.replace("*", "[*]")) for f in follows)


def project_pair(launches: list[dict], follows: list[str]) -> dict:
    """The projection for one pair: every advice line of the before launch(es) with its price, and the
    labelled line's (the first of ``follows`` the verdict gives). Several launches: the sequence's
    fusion and batching prices, and each launch's own lines."""
    lines, verdicts = [], []
    for i, e in enumerate(launches):
        v = classify(e["columns"], rules=e.get("rules"))
        verdicts.append(v)
        for pid, text, p in zip(v.advice_ids, v.candidates, v.prices):
            lines.append({"launch": i, "verdict": v.label, "advice": pid, "text": text, "price": p.as_dict()})
    seq = (
        price_sequence_with_ncu([e["columns"] for e in launches], [v.prices for v in verdicts])
        if len(launches) > 1
        else {}
    )
    for pid, p in seq.items():
        lines.insert(
            0,
            {"launch": "all", "verdict": "sequence", "advice": pid, "text": "fuse the sequence", "price": p.as_dict()},
        )
    chosen = next(
        (ln for ln in lines if _matches(ln["advice"], follows) and (len(launches) == 1 or ln["launch"] == "all")), None
    )
    if chosen is None:
        chosen = next((ln for ln in lines if _matches(ln["advice"], follows)), None)
    if chosen is None:
        # no line names the lever the change pulls: what bsprof says of it is the headroom, the most any
        # change buys that keeps the launch's work
        room = headroom([e["columns"] for e in launches])
        chosen = {"advice": room.advice if room.bounded else None, "price": room.as_dict()}
    return {
        "follows": follows,
        "advice": chosen["advice"],
        "price": chosen["price"],
        "before_us": sum(e["columns"].get("duration_ns", math.nan) for e in launches) / 1e3,
        "lines": lines,
    }


def ncu_top(launches: list[dict]) -> float:
    """ncu's largest estimated speedup (%) over the launch's rules (the first launch of a sequence)."""
    vals = [r["speedup_pct"] for r in launches[0].get("rules") or [] if r.get("speedup_pct") is not None]
    return max(vals) if vals else math.nan


def _speedup(pct) -> float:
    return 1.0 / (1.0 - min(float(pct), 99.9) / 100.0) if pct is not None and not math.isnan(pct) else math.nan


def score(projections: dict, measured: dict, two_lines: dict) -> dict:
    """``projections``: pair -> :func:`project_pair`; ``measured``: pair -> measured speedup;
    ``two_lines``: before op -> [pair, pair] whose lines' order is checked."""
    rows = []
    for pair, proj in projections.items():
        m = measured.get(pair)
        p = proj["price"]
        bounded = bool(p.get("bounded"))
        lo, hi = (p["low"], p["high"]) if bounded else (math.nan, math.nan)
        inside = bounded and m is not None and lo <= m <= hi
        miss = (not bounded and m is not None and m > TARGETS["miss_above"]) or (bounded and not inside)
        ncu = _speedup(p.get("ncu_pct"))
        rows.append(
            {
                "pair": pair,
                "advice": proj["advice"],
                "measured": m,
                "low": lo,
                "high": hi,
                "width": hi / lo if bounded else math.nan,
                "mid": p.get("mid") if bounded else math.nan,
                "ratio": (p["mid"] / m) if bounded and m else math.nan,
                "inside": inside,
                "miss": miss,
                "ncu_rule": p.get("ncu_rule"),
                "ncu_speedup": ncu,
                "ncu_ratio": ncu / m if m and not math.isnan(ncu) else math.nan,
                "binds": p.get("binds", ""),
            }
        )
    n = len(rows)
    hits = sum(r["inside"] for r in rows)
    counted = [r for r in rows if r["inside"] or r["miss"]]
    widths = [r["width"] for r in rows if not math.isnan(r["width"])]
    ratios = [r["ratio"] for r in rows if not math.isnan(r["ratio"])]
    ncu_ratios = [r["ncu_ratio"] for r in rows if not math.isnan(r["ncu_ratio"])]
    both = [r for r in rows if not math.isnan(r["ratio"]) and not math.isnan(r["ncu_ratio"])]
    order = {}
    for before, pairs in two_lines.items():
        prices = [projections[p]["price"] for p in pairs]
        mids = [q.get("mid") if q.get("bounded") else None for q in prices]
        meas = [measured.get(p) for p in pairs]
        if None in meas:
            continue
        pred = _first_above(prices, mids)
        order[before] = {
            "pairs": pairs,
            "projected_mid": mids,
            "measured": meas,
            "match": pred is not None and pred == (meas[0] > meas[1]),
        }
    return {
        "pairs": rows,
        "n": n,
        "inside": hits,
        "inside_share": hits / n if n else math.nan,
        "counted": len(counted),
        "median_width": statistics.median(widths) if widths else math.nan,
        "median_ratio": statistics.median(ratios) if ratios else math.nan,
        "spread": log_spread(ratios),
        "ncu_median_ratio": statistics.median(ncu_ratios) if ncu_ratios else math.nan,
        "ncu_spread": log_spread(ncu_ratios),
        "ncu_n": len(ncu_ratios),
        "spread_same_pairs": log_spread([r["ratio"] for r in both]),
        "ncu_spread_same_pairs": log_spread([r["ncu_ratio"] for r in both]),
        "same_pairs": len(both),
        "order": order,
        "targets": TARGETS,
    }


def _first_above(prices: list[dict], mids: list) -> bool | None:
    """Whether the first line is priced above the second, in the order the verdict gives its lines
    (``price.order_key``); None where the projection cannot order them (an unbounded line, or one key:
    projections made before the work left was recorded tie)."""
    if None in mids:
        return None
    keys = [
        order_key(Price("", True, low=q["low"], high=q["high"], work_left_us=q.get("work_left_us") or math.nan))
        for q in prices
    ]
    return None if keys[0] == keys[1] else keys[0] < keys[1]


def log_spread(ratios: list[float]) -> float:
    """The median factor by which a projection misses the measured speedup: exp(median |ln ratio|)."""
    vals = [abs(math.log(r)) for r in ratios if r and r > 0 and not math.isnan(r)]
    return math.exp(statistics.median(vals)) if vals else math.nan
