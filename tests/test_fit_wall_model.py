"""benchmarks/fit_wall_model.py without a GPU: the shipped wall-time constants checked on the stored
H100 pairs, and bad input in one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "fit_wall_model.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_the_shipped_constants_on_every_stored_set_of_pairs():
    # the grid they were fitted on and the pairs of four other calls (docs/perf.md, thirteenth and
    # fourteenth sessions): each within 0.045 rms of the measured ratios, and every pair of the
    # thirteenth session's call 6 (128x192 2x1 against 192x128) ordered right
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    rms = dict(re.findall(r"^(\w+): \d+ pairs, rms log error ([\d.]+)", proc.stdout, re.M))
    assert set(rms) == {"grid", "ab", "call5", "call6", "call8"}
    assert all(float(v) < 0.045 for v in rms.values()), rms
    assert re.search(r"^grid: 110 pairs", proc.stdout, re.M)
    assert re.search(r"^call6: 12 pairs, rms log error [\d.]+, ordered right 8 of 8", proc.stdout, re.M)


def test_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "run.json"
    bad.write_text("{not json")
    for args, says in ((["--runs", str(bad)], "not a bench run's JSON"), (["--fit-on", "nope"], "no such set")):
        proc = _run(*args)
        assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr
