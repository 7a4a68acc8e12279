"""GPU side of the epilogue shared-path measurement (``bsprof model --measure-ceiling``): per-warp
time of a fixed epilogue-shaped work against the number of warps sharing one SM."""

from __future__ import annotations

import time

from bsprof import artifacts

WARP_COUNTS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)
ALU_ROUNDS = (1, 4)  # store-heavy and compute-heavier chunks


def measure(out_dir="bsprof-results", console=None, *, iters: int = 2048, repeats: int = 5) -> dict:
    """Run the micro-benchmark for every warp count and ALU mix; write ``epi_ceiling.json``."""
    import numpy as np

    from bsprof.analyzers.model.ceiling import curve_from_samples
    from bsprof.gpu import device_info
    from bsprof.io import results_dir
    from bsprof.kernels import epi_ceiling as K

    info = device_info()
    curves = {}
    for alu in ALU_ROUNDS:
        per_n = {}
        for n in WARP_COUNTS:
            cyc = K.run(n, iters=iters, alu=alu, repeats=repeats)
            per_n[n] = [float(x) for x in np.median(cyc.reshape(repeats, -1), axis=1)]
        curves[f"alu{alu}"] = curve_from_samples(
            per_n,
            device=info["name"],
            what=f"{alu * 4} FMA + one 16-byte st.shared per lane per chunk, {iters} chunks per warp, one CTA per SM",
        ).to_json()
        if console is not None:
            c = curves[f"alu{alu}"]
            console.print(f"alu{alu}: " + ", ".join(f"{n} warps {t:,.0f}" for n, t in zip(c["warps"], c["cycles"])))
    doc = artifacts.document(
        "epi_ceiling",
        {
            "device": info["name"],
            "date": time.strftime("%Y-%m-%d"),
            "iters": iters,
            "repeats": repeats,
            "curves": curves,
        },
    )
    with results_dir(out_dir, "epi_ceiling") as staged:
        artifacts.save(staged.path / "epi_ceiling.json", doc)
    d = staged.path
    if console is not None:
        console.print(f"wrote {d}/epi_ceiling.json", markup=False)
    return doc
