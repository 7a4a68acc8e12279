"""Summary statistics of a timing table: what `bsprof timing` prints and its JSON artifact holds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bsprof.analyzers.timing.schema import PHASES, ROLES
from bsprof.errors import BsprofError


@dataclass
class ClockFit:
    """SM clock measured during the run: a least-squares fit of clock64 against %globaltimer with
    one intercept per SM (clock64 is per SM and not synchronized; the slope is shared)."""

    cycles_per_ns: float  # 0.0 when the globaltimer did not advance (too short a run)
    pairs: int
    span_ns: int  # longest per-SM span the fit saw
    residual_ns_p95: float  # how far single stamps sit from the fit (timer granularity)
    offsets: dict[int, float] = field(default_factory=dict)  # sm -> ns at clock 0 (for traces)

    @property
    def ghz(self) -> float:
        return self.cycles_per_ns

    def to_ns(self, sm, clock):
        """Cycles of SM ``sm`` → globaltimer nanoseconds (vectorised over numpy arrays)."""
        import numpy as np

        off = np.vectorize(lambda s: self.offsets.get(int(s), 0.0), otypes=[float])(sm)
        return off + np.asarray(clock, dtype=float) / self.cycles_per_ns


def fit_clock(table) -> ClockFit:
    import numpy as np

    if "start_ns" not in table.columns or "end_ns" not in table.columns:
        raise BsprofError(
            "timing table has no start_ns/end_ns columns; the clock rate cannot be measured "
            "(capture with `bsprof timing`, which records %globaltimer)"
        )
    sm = np.concatenate([table["sm"].to_numpy(), table["sm"].to_numpy()]).astype(np.int64)
    clk = np.concatenate([table["start"].to_numpy(), table["end"].to_numpy()]).astype(np.float64)
    ns = np.concatenate([table["start_ns"].to_numpy(), table["end_ns"].to_numpy()]).astype(np.float64)
    keep = ns > 0
    sm, clk, ns = sm[keep], clk[keep], ns[keep]
    if len(sm) < 2:
        raise BsprofError("timing table has fewer than two %globaltimer stamps; cannot measure the clock")
    # Center per SM, then one shared slope: cycles = rate * ns + b_sm.
    sms, inv = np.unique(sm, return_inverse=True)
    cnt = np.bincount(inv).astype(float)
    mc = np.bincount(inv, clk) / cnt
    mn = np.bincount(inv, ns) / cnt
    dc, dn = clk - mc[inv], ns - mn[inv]
    hi = np.full(len(sms), -np.inf)
    np.maximum.at(hi, inv, ns)
    lo = np.full(len(sms), np.inf)
    np.minimum.at(lo, inv, ns)
    span = float((hi - lo).max())
    den = float((dn * dn).sum())
    if den <= 0 or span <= 0:
        return ClockFit(0.0, int(len(sm)), int(span), float("nan"), {})
    rate = float((dc * dn).sum() / den)
    if not rate > 0:
        raise BsprofError(f"measured SM clock is {rate:.3f} cycles/ns; the clock64/globaltimer stamps are inconsistent")
    # ns at clock 0 for each SM: mn - mc / rate
    offsets = {int(s): float(mn[i] - mc[i] / rate) for i, s in enumerate(sms)}
    resid = dn - dc / rate
    return ClockFit(rate, int(len(sm)), int(span), float(np.percentile(np.abs(resid), 95)), offsets)


def phase_stats(table):
    """Per role and phase: rows, mean, p50, p95, max of the duration (cycles)."""
    import pandas as pd

    dur = (table["end"] - table["start"]).astype("int64")
    g = dur.groupby([table["role"], table["phase"]])
    out = pd.DataFrame(
        {
            "n": g.size(),
            "mean": g.mean(),
            "p50": g.quantile(0.5),
            "p95": g.quantile(0.95),
            "max": g.max(),
        }
    ).reset_index()
    order = {(r, p): i for i, (r, p) in enumerate((r, p) for r in ROLES for p in PHASES[r])}
    out["_o"] = [order.get((r, p), 99) for r, p in zip(out["role"], out["phase"])]
    return out.sort_values("_o").drop(columns="_o").reset_index(drop=True)


def warp_stats(table, role: str = "epilogue", phase: str = "phase1"):
    """Per warp: mean and p95 of one phase (the model's per-warp epilogue inputs)."""
    import pandas as pd

    sel = table[(table["role"] == role) & (table["phase"] == phase)]
    dur = (sel["end"] - sel["start"]).astype("int64")
    g = dur.groupby(sel["warp"])
    return pd.DataFrame({"n": g.size(), "mean": g.mean(), "p95": g.quantile(0.95)}).reset_index()


def epilogue_spread(table, phase: str = "phase1") -> dict:
    """Per tile, max − min of the phase's duration over the epilogue warps: mean and p95."""
    sel = table[(table["role"] == "epilogue") & (table["phase"] == phase)]
    if sel.empty:
        return {"phase": phase, "tiles": 0, "mean": None, "p95": None, "warps_per_tile": 0}
    dur = (sel["end"] - sel["start"]).astype("int64")
    g = dur.groupby([sel["cta"], sel["tile"]])
    spread = g.max() - g.min()
    return {
        "phase": phase,
        "tiles": int(len(spread)),
        "mean": float(spread.mean()),
        "p95": float(spread.quantile(0.95)),
        "warps_per_tile": int(g.size().median()),
    }


def tiles_per_sm(table, sample_every: int = 1) -> dict:
    ref = table[table["role"] == "mma"] if (table["role"] == "mma").any() else table
    per = ref.groupby("sm")[["cta", "tile"]].apply(lambda d: len(d.drop_duplicates())) * sample_every
    return {
        "sms": int(len(per)),
        "mean": float(per.mean()),
        "min": int(per.min()),
        "max": int(per.max()),
        "sample_every": int(sample_every),
    }


@dataclass
class TimingSummary:
    phases: list[dict]
    warps: list[dict]
    spread: dict
    tiles: dict
    clock: dict
    rows: int

    def to_json(self) -> dict:
        return asdict(self)


def summarize(table, sample_every: int | None = None) -> TimingSummary:
    if sample_every is None:
        sample_every = int(table.attrs.get("sample_every", 1))
    fit = fit_clock(table)
    return TimingSummary(
        phases=phase_stats(table).to_dict("records"),
        warps=warp_stats(table).to_dict("records"),
        spread=epilogue_spread(table),
        tiles=tiles_per_sm(table, sample_every),
        clock={
            "cycles_per_ns": fit.cycles_per_ns,
            "ghz": fit.cycles_per_ns,
            "pairs": fit.pairs,
            "span_ns": fit.span_ns,
            "residual_ns_p95": fit.residual_ns_p95,
        },
        rows=int(len(table)),
    )


def measured_tile_period(table) -> float:
    """Median cycles between consecutive tile starts of the same MMA-role warp (steady state)."""
    import numpy as np

    sel = table[table["role"] == "mma"]
    first = sel.sort_values("start").groupby(["cta", "warp", "tile"])["start"].min().reset_index()
    first = first.sort_values(["cta", "warp", "tile"])
    d = first.groupby(["cta", "warp"])["start"].diff().dropna()
    if d.empty:
        raise BsprofError("timing table has fewer than two tiles per warp; cannot measure the tile period")
    return float(np.median(d.to_numpy()))
