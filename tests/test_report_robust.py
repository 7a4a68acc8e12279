"""Whatever a producer writes, the report renders: mutated real artifacts never raise from build()."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsprof.errors import BsprofError
from bsprof.reports.build import build
from bsprof.reports.samples import RUN

ARTIFACTS = sorted(p for p in RUN.rglob("*.json")) if RUN.is_dir() else []
JUNK = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(obj, prefix=()):
    """Every (path) to a value inside a JSON document, bounded so huge lists are sampled."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in list(obj.items())[:40]:
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value, delete):
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    if delete and isinstance(cur, dict):
        cur.pop(path[-1], None)
    else:
        cur[path[-1]] = value


@pytest.mark.skipif(not ARTIFACTS, reason="no shipped samples (scripts/make_samples.sh)")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_artifact_never_raises(tmp_path_factory, data):
    src = data.draw(st.sampled_from(ARTIFACTS))
    doc = json.loads(src.read_text())
    paths = [p for p in _paths(doc) if len(p) >= 2 or (len(p) == 1 and p[0] != "bsprof")]
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(paths))
        try:
            _set(doc, path, data.draw(JUNK), data.draw(st.booleans()))
        except (KeyError, IndexError, TypeError):
            continue
    run = tmp_path_factory.mktemp("mut") / src.parent.name
    shutil.copytree(src.parent, run)
    (run / src.name).write_text(json.dumps(doc))
    try:
        html, info = build([run])
    except BsprofError as exc:  # the clean refusal (e.g. the "bsprof" tag itself was mutated): one line
        assert "\n" not in str(exc) and "nothing to render" in str(exc)
        return
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    for key in info.failed:  # a section that gave up is a marked warning on the page, not a crash
        assert "could not be rendered" in html, key
