"""Timing-table loading for the model: every malformed input is one BsprofError line naming the fix."""

from __future__ import annotations

import pytest
from test_model_calibrate import blackwell_table

from bsprof.analyzers.timing.table import load, validate
from bsprof.errors import BsprofError


@pytest.fixture(scope="module")
def good():
    return blackwell_table(tiles=20, ctas=1)


def _err(fn, *a):
    with pytest.raises(BsprofError) as ei:
        fn(*a)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def test_good_table_round_trips_csv_and_parquet(good, tmp_path):
    good.to_csv(tmp_path / "t.csv", index=False)
    good.to_parquet(tmp_path / "t.parquet")
    assert len(load(tmp_path / "t.csv")) == len(good) == len(load(tmp_path / "t.parquet"))


def test_missing_columns(good):
    assert "lacks column(s) phase, start" in _err(validate, good.drop(columns=["phase", "start"]))


def test_empty(good, tmp_path):
    assert "has no rows" in _err(validate, good.iloc[:0])
    (tmp_path / "e.csv").write_text("")
    assert "is empty" in _err(load, tmp_path / "e.csv")
    good.iloc[:0].to_csv(tmp_path / "h.csv", index=False)
    assert "has no rows" in _err(load, tmp_path / "h.csv")


def test_non_numeric(good, tmp_path):
    t = good.astype({"start": object}).copy()
    t.loc[5, "start"] = "soon"
    t.to_csv(tmp_path / "n.csv", index=False)
    assert "column 'start' row 5 is 'soon'" in _err(load, tmp_path / "n.csv")


def test_roles_and_phases(good):
    t = good.copy()
    t.loc[0, "role"] = "scheduler"
    assert "unknown role(s) scheduler" in _err(validate, t)
    assert "has no 'mma' rows" in _err(validate, good[good["role"] != "mma"])
    t = good.copy()
    t.loc[t["phase"] == "phase2", "phase"] = "phase3"
    assert "unknown phase(s) phase3" in _err(validate, t)
    assert "no epilogue phase1 rows" in _err(validate, good[good["phase"] != "phase1"])


def test_negative_duration(good):
    t = good.copy()
    t.loc[3, "end"] = t.loc[3, "start"] - 5
    assert "row 3" in _err(validate, t) and "negative duration" in _err(validate, t)


def test_paths(tmp_path):
    assert "holds no timing.parquet or timing.csv" in _err(load, tmp_path)
    (tmp_path / "x.json").write_text("{}")
    assert "neither .parquet nor .csv" in _err(load, tmp_path / "x.json")
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "cannot read timing table" in _err(load, tmp_path / "bad.parquet")
