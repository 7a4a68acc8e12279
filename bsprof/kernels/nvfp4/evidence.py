"""SASS evidence for the NVFP4 kernels' optimizations, from a compiled cubin (no GPU needed).

Uses the SASS analyzer (:mod:`bsprof.analyzers.sass`) for the feature checklist and counts the
opcodes that prove each switch; register / local-memory use comes from ``cuobjdump -res-usage``
and the launch bound from the cubin's EIATTR_REQNTID attribute (``cuobjdump -elf``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from bsprof.errors import BsprofError

_RES_RE = re.compile(r"REG:(\d+).*?STACK:(\d+).*?SHARED:(\d+).*?LOCAL:(\d+)")
_NTID_RE = re.compile(r"\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
REGFILE = 65536


def resource_usage(cubin: str | Path) -> dict:
    """``{"registers", "stack", "shared", "local"}`` of the (single) kernel in ``cubin``."""
    from bsprof.analyzers.sass.disasm import tool_path

    proc = subprocess.run(
        [tool_path("cuobjdump"), "-res-usage", os.path.abspath(cubin)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise BsprofError(f"cuobjdump -res-usage {cubin} failed: {proc.stderr.strip()[:200]}")
    m = _RES_RE.search(proc.stdout)
    if not m:
        raise BsprofError(f"cuobjdump -res-usage printed no REG line for {cubin}; is it a CUDA cubin?")
    reg, stack, shared, local = (int(v) for v in m.groups())
    return {"registers": reg, "stack": stack, "shared": shared, "local": local}


def launch_threads(cubin: str | Path) -> int | None:
    """Threads per CTA the kernel is compiled for: EIATTR_REQNTID (or .reqntid/.maxntid) in the cubin."""
    from bsprof.analyzers.sass.disasm import tool_path

    proc = subprocess.run([tool_path("cuobjdump"), "-elf", os.path.abspath(cubin)], capture_output=True, text=True)
    text = proc.stdout
    m = re.search(r"EIATTR_(?:REQNTID|MAX_THREADS)\s+Format:\s+\S+\s+Value:\s+((?:0x[0-9a-f]+\s*)+)", text)
    if m:
        n = 1
        for v in m.group(1).split():
            n *= int(v, 16)
        return n
    m = _NTID_RE.search(text)
    if not m:
        return None
    n = 1
    for g in m.groups():
        if g:
            n *= int(g)
    return n


def sass_evidence(cubin: str | Path) -> dict:
    """Counts and analyzer verdicts for every switch of :mod:`bsprof.kernels.nvfp4.config`."""
    from bsprof.analyzers.sass import analyze_cubin

    fas = [fa for fa in analyze_cubin(cubin) if "Nvfp4Gemm" in fa.name] or analyze_cubin(cubin)
    fa = fas[0]
    ops = [(i.opcode, i.operands or "") for i in fa.instructions]

    def count(pred) -> int:
        return sum(1 for op, args in ops if pred(op, args))

    def base(op: str) -> str:
        return op.split(".")[0]

    ev = {
        "function": fa.name,
        "instructions": len(ops),
        "UTCOMMA": count(lambda o, a: base(o) == "UTCOMMA"),
        "UTCCP": count(lambda o, a: base(o) == "UTCCP"),
        "UTCQMMA": count(lambda o, a: base(o) == "UTCQMMA"),
        "2CTA": count(lambda o, a: ".2CTA" in o),
        "UTMALDG": count(lambda o, a: base(o) == "UTMALDG"),
        "UTMALDG.MULTICAST": count(lambda o, a: base(o) == "UTMALDG" and "MULTICAST" in o),
        "UTMALDG.cache_hint": count(lambda o, a: base(o) == "UTMALDG" and re.search(r"desc\[UR(?!Z)", a) is not None),
        "UTMASTG": count(lambda o, a: base(o) == "UTMASTG"),
        "STG": count(lambda o, a: base(o) == "STG"),
        "LDL/STL": count(lambda o, a: base(o) in ("LDL", "STL")),
        "features": {k: f.present for k, f in fa.features.items()},
        "pipeline_stages": fa.features["multi_stage_pipeline"].value if "multi_stage_pipeline" in fa.features else None,
    }
    ev.update(resource_usage(cubin))
    threads = launch_threads(cubin)
    ev["threads"] = threads
    ev["max_registers"] = min(255, REGFILE // threads) if threads else 255
    return ev
