"""Plotly figures of model results, built from the JSON the command writes."""

from __future__ import annotations

import pytest

from bsprof.analyzers.model import default_params, parse_sweep, project, sweep
from bsprof.reports.figures_model import figure_for, metrics, projection_figure, sweep_figure, write_html


@pytest.fixture(scope="module")
def p():
    return default_params()


def test_two_axis_sweep_is_a_heatmap_of_percent_change(p, tmp_path):
    doc = sweep(p, parse_sweep("kloop=-600:0:50,phase1=-600:0:50"), tiles=5000).to_json()
    fig = sweep_figure(doc)
    (hm,) = fig.data
    assert hm.type == "heatmap" and len(hm.z) == 13 and len(hm.z[0]) == 13
    # rows are K-loop, columns Phase 1: the K-loop has slack, Phase 1 pays 1:1
    assert hm.z[0][-1] == pytest.approx(0.0, abs=0.1)  # kloop -600, phase1 0
    assert hm.z[-1][0] == pytest.approx(-600 / 6067 * 100, abs=0.3)  # kloop 0, phase1 -600
    write_html(fig, tmp_path / "s.html")
    assert (tmp_path / "s.html").stat().st_size > 100_000  # plotly.js inlined: opens offline


def test_one_axis_sweep_has_both_models_and_no_band(p):
    doc = sweep(p, parse_sweep("phase1=-400:0:100"), tiles=5000).to_json()
    names = [t.name for t in sweep_figure(doc).data]
    assert names == ["stochastic mean", "deterministic"]


def test_projection_bars_and_metrics(p):
    doc = project(p, {"phase1": -79}, tiles=5000).to_json()
    fig = projection_figure(doc)
    assert [t.name for t in fig.data] == ["baseline", "projected"]
    assert fig.data[1].y[0] == pytest.approx(5988)
    assert figure_for(doc).data[0].type == "bar"
    m = metrics(doc)
    assert m[("model deterministic projected wall ratio", "lower")] == pytest.approx(5988 / 6067)
