"""`bsprof.artifacts.dumps`, the one JSON encoder, takes json's C encoder for speed: its output
must parse to exactly what the plain route (`json.dumps(jsonable(x), allow_nan=False)`) gives,
strictly (no NaN / Infinity tokens), on a real `bsprof sass` contract and on anything hypothesis
builds from NaN, infinities, numpy values, tuples, paths, dataclasses and odd dict keys."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path, PurePosixPath

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsprof import artifacts
from bsprof.analyzers.sass.result import analyze_inputs

FIXTURE = Path(__file__).parent / "data" / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"


def _strict(text: str):
    def refuse(token):
        raise AssertionError(f"{token} in strict JSON")

    return json.loads(text, parse_constant=refuse)


def _plain(obj) -> object:
    return json.loads(json.dumps(artifacts.jsonable(obj), allow_nan=False))


def _all_forms(obj) -> None:
    want = _plain(obj)
    for kw in ({}, {"indent": 1}, {"indent": 0}, {"indent": None}, {"compact": True}):
        assert _strict(artifacts.dumps(obj, **kw)) == want, kw


def test_sass_contract_parses_as_the_plain_encoder_gives_it():
    res = analyze_inputs([FIXTURE], tiles=[1000], mma_detail=True, by="roles")
    data = res.data
    gaps = [g for d in data["functions"][0]["mma_detail"] for g in d["gaps"] if g["stream"]]
    assert len(gaps) >= 2
    # a NaN and an infinity where a renderer could meet one, beside the real rows
    data["functions"][0]["regions"][0]["overhead_per_mma"] = math.nan
    gaps[0]["stream"][0]["executed"] = math.inf
    _all_forms(data)
    # indented, each instruction of a gap's stream is one line (a 50,000-instruction listing
    # stays scrollable), written as json writes that row on its own
    lines = {ln.strip().rstrip(",") for ln in artifacts.dumps(data, indent=1).splitlines()}
    rows = [x for g in gaps[1:] for x in g["stream"]]
    assert len(rows) > 20 and all(json.dumps(x) in lines for x in rows)


def test_strings_that_spell_nan_stay_strings():
    obj = {"note": 'NaN and -Infinity "quoted" \\ NaN', "v": [math.nan, "Infinity"], "NaN": -math.inf}
    assert _strict(artifacts.dumps(obj)) == {"note": obj["note"], "v": [None, "Infinity"], "NaN": None}


@dataclasses.dataclass
class _Row:
    name: str
    value: float
    where: PurePosixPath


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        [
            np.float32(1.5),
            np.float64("nan"),
            np.int64(-3),
            np.bool_(True),
            np.array([1.0, np.inf]),
            PurePosixPath("/a/b"),
        ]
    )
    | st.builds(_Row, st.text(max_size=4), st.floats(), st.just(PurePosixPath("x")))
)
_keys = (
    st.text(max_size=6)
    | st.integers(-5, 5)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.tuples(st.integers(0, 3))
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys, inner, max_size=4)
        | st.frozensets(st.integers(0, 9), max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_any_value_parses_as_the_plain_encoder_gives_it(obj):
    _all_forms(obj)
