"""Correctness + timing of the FP8-blockwise kernels beside their peers, in one process.

Peers (same fresh random inputs, same timing loop): cuBLAS blockwise FP8 (``torch._scaled_mm``
with 1x128 / 128x128 scales), cuBLAS tensorwise FP8, bf16 cuBLAS (``torch.matmul``) and DeepGEMM
(``deep_gemm.fp8_gemm_nt``) when it imports. Every kernel is timed the same way: CUDA events around
each launch, warm L2 (the same operands every iteration), the median of ``iters`` launches, after
``warmup_s`` seconds of warm-up so every kernel is measured at the clocks it sustains (a GPU
fresh from idle boosts higher for a while, which favours whichever kernel is timed first). Every
kernel, ours and the peers, launches as a one-launch CUDA graph (the peers eagerly on request), so
all pay the same launch path.
"""

from __future__ import annotations

import statistics

from bsprof.artifacts import document
from bsprof.errors import BsprofError, one_line
from bsprof.kernels.fp8_blockwise.config import parse_spec
from bsprof.profile.timer import launch_times_ms

PEERS = ("cublas_blockwise", "cublas_tensorwise", "cublas_bf16", "deepgemm")
# relative Frobenius error against float64 above which a kernel computed a wrong product (every
# correct kernel here, ours and the peers, sits at 1.7e-3 on these inputs)
WRONG_PRODUCT = 1e-2
# `bsprof bench`'s rounds when none are asked for: enough for a median, a spread and one round on
# each of three copies of the operands, at ~3x one pass's time
VERB_ROUNDS = 3


def time_fn(fn, warmup: int, iters: int, warmup_s: float, sensors=None, hold: bool = True) -> tuple[float, dict]:
    """Median milliseconds of ``iters`` launches of ``fn`` (each timed alone with CUDA events),
    after ``warmup`` launches and at least ``warmup_s`` seconds of them; with ``sensors``, also the
    SM clock and power read while the timed launches ran (else an empty dict). ``hold``: queue
    the launches behind a spin kernel so they run back to back (``timer.launch_times_ms``)."""
    from bsprof.profile.sensors import SensorLog

    log = SensorLog(sensors) if sensors is not None else None
    ms = statistics.median(
        launch_times_ms(fn, warmup, iters, warmup_s, while_running=log.poll if log else None, hold=hold)
    )
    return ms, (log.summary() if log else {})


def _row(name: str, ours: bool, ms: float, flops: float, err, clocks: dict, num_sms: int) -> dict:
    from bsprof.profile.sensors import flop_per_sm_cycle

    return dict(
        name=name,
        ours=ours,
        ms=ms,
        tflops=flops / ms / 1e9,
        rel_err=err,
        sm_mhz=clocks.get("sm_mhz"),
        watts=clocks.get("watts"),
        clock_limiters=clocks.get("clock_limiters"),
        flop_per_sm_cycle=flop_per_sm_cycle(flops, ms, clocks.get("sm_mhz"), num_sms),
    )


def graphed(p):
    """Our kernel as a one-launch CUDA graph replay, and how it is launched: an eager CuTe DSL
    launch costs the host ~125 us, so back-to-back eager launches leave the GPU idle between them
    and it runs cooler (higher clocks) than a peer launched back to back. Eager when the build
    cannot be captured."""
    from bsprof.profile.timing_capture import graph_launcher

    fn = graph_launcher(p, 1)
    return (fn, "graph") if fn else (p.launch, "eager")


def torch_graphed(fn):
    """A peer (a torch call) as a one-launch CUDA graph replay, so it is launched the way ours is;
    eager when it cannot be captured."""
    from bsprof.profile.timing_capture import graph_replay

    replay = graph_replay(lambda _side: fn())  # torch calls go to the current (capture) stream
    return (replay, "graph") if replay else (fn, "eager")


def k_blocks_padded(sfb):
    """The 128x128-block scales (N/128, K/128) padded with zeros to a multiple of 4 K blocks, the
    layout cuBLASLt reads them in: torch's explicit-recipe ``scaled_mm`` takes them as
    (round_up(K/128, 4), N/128) at stride (1, round_up(K/128, 4)). Handed rows packed at K/128
    through ``torch._scaled_mm`` cuBLAS computed a wrong product where K/128 is not a multiple of 4
    (H100: relative error 1.1 at K = 13,696, 31 at K = 768), and ``_scaled_mm`` refuses the padded
    layout, whose shape no longer names the recipe."""
    rows, kb = sfb.shape
    if kb % 4 == 0:
        return sfb
    padded = sfb.new_zeros(rows, -(-kb // 4) * 4)
    padded[:, :kb] = sfb
    return padded


def cublas_blockwise(a, b, sfa, sfb, out):
    """cuBLAS blockwise FP8 (1x128 scales on A, 128x128 on B) as a launch function and where its
    product lands. Where K/128 is a multiple of 4 torch's ``_scaled_mm`` infers the recipe from the
    scales' shapes and writes into ``out``; elsewhere only the explicit-recipe ``scaled_mm`` takes
    the padded scales, and its output is whatever the last launch returned."""
    import torch

    if sfb.shape[1] % 4 == 0:

        def bw():
            return torch._scaled_mm(a, b.t(), scale_a=sfa, scale_b=sfb.t(), out_dtype=torch.bfloat16, out=out)

        return bw, lambda: out
    F = torch.nn.functional
    if not hasattr(F, "scaled_mm"):
        raise BsprofError(
            f"K/128 = {sfb.shape[1]} is not a multiple of 4: cuBLAS takes its scales then only "
            "through torch.nn.functional.scaled_mm, which this torch lacks"
        )
    padded, last = k_blocks_padded(sfb), {}

    def bw():
        last["out"] = F.scaled_mm(
            a,
            b.t(),
            sfa,
            F.ScalingType.BlockWise1x128,
            padded.t(),
            F.ScalingType.BlockWise128x128,
            output_dtype=torch.bfloat16,
        )
        return last["out"]

    return bw, lambda: last["out"]


def peer_fns(ops, mnkl, cute_example=None, only=PEERS):
    """name -> (launch fn, its output: a tensor, a function returning it, or None). Peers that
    cannot run here are left out with a reason. ``cute_example``: where NVIDIA's CuTe DSL dense GEMM example is (no block scaling;
    its output is checked only on unit-scale inputs, the only ones it computes the same product on).
    ``only``: the peers to set up."""
    import torch

    m, n, k, batches = mnkl
    fns: dict = {}
    skipped: dict = {}
    if batches != 1:
        asked = PEERS + (("cute_dense_fp8",) if cute_example else ())
        return fns, {p: "batched (L > 1) problems have no peer here" for p in asked}
    a, b = ops.a[0], ops.b[0]
    sfa = ops.sfa[0].t()  # (M, K/128), column-major: what cuBLAS wants
    sfb = ops.sfb[0]  # (N/128, K/128)

    try:
        bw, out_bw = cublas_blockwise(a, b, sfa, sfb, torch.empty(m, n, device="cuda", dtype=torch.bfloat16))
        bw()
        fns["cublas_blockwise"] = (bw, out_bw)
    except Exception as exc:  # noqa: BLE001 - a peer we cannot run is reported, not fatal
        skipped["cublas_blockwise"] = one_line(exc)

    one = torch.ones((), device="cuda", dtype=torch.float32)
    out_tw = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def tw():
        return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=out_tw)

    try:
        tw()
        fns["cublas_tensorwise"] = (tw, None)
    except Exception as exc:  # noqa: BLE001
        skipped["cublas_tensorwise"] = one_line(exc)

    if "cublas_bf16" in only:
        a16 = a.to(torch.bfloat16)
        b16 = b.to(torch.bfloat16)
        out16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fns["cublas_bf16"] = (lambda: torch.matmul(a16, b16.t(), out=out16), None)

    try:
        if "deepgemm" not in only:
            raise ImportError("not asked for")
        import deep_gemm  # noqa: F401

        out_dg = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def dg():
            deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), out_dg)

        dg()
        fns["deepgemm"] = (dg, out_dg)
    except Exception as exc:  # noqa: BLE001
        skipped["deepgemm"] = one_line(exc)
    if cute_example:
        from bsprof.kernels.fp8_blockwise.cute_example_peer import dense_fp8_launcher

        out_cx = torch.empty(1, m, n, device="cuda", dtype=torch.bfloat16)
        unit = bool((ops.sfa == 1).all()) and bool((ops.sfb == 1).all())
        try:
            fns["cute_dense_fp8"] = (
                dense_fp8_launcher(cute_example, ops.a, ops.b, out_cx),
                out_cx[0] if unit else None,
            )
        except Exception as exc:  # noqa: BLE001
            skipped["cute_dense_fp8"] = one_line(exc)
    return fns, skipped


def measure(
    mnkl,
    variants=("optimized", "baseline"),
    *,
    warmup: int = 10,
    iters: int = 50,
    check: bool = True,
    seed: int = 0,
    peers: bool = True,
    config: dict | None = None,
    warmup_s: float = 0.3,
    rounds: int = 1,
    peers_graph: bool = True,
    launch_gaps: bool = False,
    inputs: str = "randn",
    cute_example=None,
    peer_names=PEERS,
    hold: bool = True,
    placements: int = 1,
) -> dict:
    """One problem: our variants and the peers on the same inputs. Returns a JSON-able dict.

    ``rounds`` > 1 times every kernel that many times, interleaved (A B C C B A ...), and keeps
    the median round: one pass moves a kernel by +-4% under the power cap, more than the
    changes an A/B decides on, and interleaving spreads the drift over every kernel alike.
    Ours run as CUDA-graph replays; ``peers_graph`` (the default) launches the peers that way too
    (the CUPTI launch gap is then 4-5 us for ours and DeepGEMM, 6.3 us for cuBLAS; each row
    says how it was launched). ``launch_gaps`` also traces 30 launches of every kernel with CUPTI
    and adds its GPU duration and the gap before it (``kernel_us``, ``gap_us``) to its row.
    ``inputs`` picks the operands (``quant.INPUTS``); ``cute_example`` adds NVIDIA's CuTe DSL
    dense FP8 GEMM (no block scaling) from that path as a peer. ``hold`` (the default) queues each
    kernel's timed launches behind a spin kernel, so a kernel shorter than the host's time per
    launch is timed, not the host. A spec this problem refuses (a switch it cannot take) is
    named in ``skipped`` with the reason, as a peer that could not run is; only when every spec
    is refused does the problem raise.

    ``placements`` > 1 makes that many copies of the operands (the same values, each in its own
    allocation, every kernel with its own output per copy) and runs every kernel of round r on
    copy ``placement_of(r, placements)``. Where the operands sit in memory decides a DRAM-bound
    problem's time for the whole process: at 128x24576x1536 one kernel ran 16.5-19.5 us over four
    copies of the same inputs, each copy within 1% over its rounds, and two kernels did not
    favour the same copies (docs/perf.md), so one allocation made the run's verdict on that row."""
    import torch

    from bsprof.kernels.fp8_blockwise.launch import prepare
    from bsprof.kernels.fp8_blockwise.quant import make_operands, rel_error
    from bsprof.profile.sensors import torch_device_sensors

    m, n, k, batches = mnkl
    flops = 2.0 * m * n * k * batches
    sensors = torch_device_sensors()
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    check_rounds(rounds, placements)
    first = None
    copies: list = []  # the operands of each placement (copy 0 is the first kernel's)
    # (name, ours, [(launch fn, how) per placement], rel. error: ours the worst copy's, a peer's on copy 0)
    timed: list[tuple[str, bool, list, object]] = []
    configs: dict[int, dict] = {}
    refused: dict[str, str] = {}
    for spec in variants:
        v, over = parse_spec(spec)
        try:
            p = prepare(v, mnkl, seed=seed, inputs=inputs, **{**(config or {}), **over})
        except BsprofError as exc:
            # a switch this problem cannot take drops that column, not the problem's other kernels
            refused[spec] = one_line(exc)
            continue
        if first is None:
            first = p
            copies = [p.ops] + [make_operands(mnkl, seed=seed, inputs=inputs) for _ in range(placements - 1)]
        else:
            p = _rebind(p, first)  # same inputs for every kernel
            p._ref = first._ref
        others = [_on_copy(p, ops) for ops in copies[1:]]
        # checked on every copy: a kernel wrong on one placement is wrong
        err = max([p.check()] + [q.check() for q in others]) if check else None
        timed.append((spec, True, [graphed(p)] + [graphed(q) for q in others], err))
        configs[len(timed) - 1] = config_fields(p)
    if first is None:
        raise BsprofError("; ".join(f"{spec}: {why}" for spec, why in refused.items()))
    skipped = {}
    if peers:
        per_copy = [peer_fns(ops, mnkl, cute_example, peer_names) for ops in copies]
        fns, skipped = per_copy[0]
        skipped = {k: v for k, v in skipped.items() if k in peer_names or k == "cute_dense_fp8"}
        ref = first.reference() if check else None
        for name, (fn, out) in fns.items():
            err = None
            if check and out is not None:
                fn()
                torch.cuda.synchronize()
                try:
                    err = rel_error((out() if callable(out) else out).unsqueeze(0), ref)
                except BsprofError as exc:
                    err = f"{exc}"
            launchers = [other[0].get(name, fns[name])[0] for other in per_copy]
            timed.append((name, False, [torch_graphed(f) if peers_graph else (f, "eager") for f in launchers], err))
    # by position, not name: the same spec twice is how one measures the noise floor
    runs: list[list] = [[] for _ in timed]
    for r in range(max(1, rounds)):
        for at in round_order(len(timed), r):
            got = runs[at]
            got.append(time_fn(timed[at][2][placement_of(r, placements)][0], warmup, iters, warmup_s, sensors, hold))
    rows = []
    for at, ((name, ours, launchers, err), got) in enumerate(zip(timed, runs)):
        fn, how = launchers[0]
        ms, clocks = median_round(got)
        row = _row(name, ours, ms, flops, err, clocks, num_sms)
        row.update(configs.get(at, {}))
        row["launch"] = how
        if launch_gaps:
            row.update(_launch_gap_fields(fn, warmup_s))
        if len(got) > 1:
            row["ms_rounds"] = [r[0] for r in got]
            if placements > 1:
                row["placement_rounds"] = [placement_of(r, placements) for r in range(len(got))]
            # the clock of every round, not just the median's: a round that ran slow at the same
            # clock lost cycles; one that ran slow at a lower clock lost the clock
            if any(r[1].get("sm_mhz") for r in got):
                row["sm_mhz_rounds"] = [r[1].get("sm_mhz") for r in got]
                row["watts_rounds"] = [r[1].get("watts") for r in got]
        rows.append(row)
    base = {r["name"]: r for r in rows}.get("cublas_blockwise")
    for r in rows:
        r["vs_cublas_blockwise"] = (base["ms"] / r["ms"]) if base else None
    return dict(
        mnkl=list(mnkl),
        rows=rows,
        skipped={**refused, **skipped},
        warmup=warmup,
        iters=iters,
        warmup_s=warmup_s,
        rounds=max(1, rounds),
        inputs=inputs,
        hold=hold,
        placements=placements,
    )


def placement_of(round_index: int, placements: int) -> int:
    """The copy of the operands round ``round_index`` runs on: the copies in turn, so every kernel
    meets each one equally often (rounds a multiple of the copies), and over 2 x copies rounds each
    copy once in a forward round and once in a reversed one (``round_order``): with an even number
    of copies every other pass over them starts one copy later, else a copy would always meet
    the same order."""
    shift = round_index // placements if placements % 2 == 0 else 0
    return (round_index + shift) % placements


def check_rounds(rounds: int, placements: int) -> None:
    """Refuse, in one line, copies of the operands the rounds cannot all visit."""
    if placements < 1:
        raise BsprofError(f"--placements {placements}: give 1 or more copies of the operands")
    if placements > max(1, rounds):
        raise BsprofError(
            f"--placements {placements} > --rounds {max(1, rounds)}: a copy no round runs on "
            f"measures nothing; give at least as many rounds as copies"
        )


def placements_for(rounds: int, asked: int | None) -> int:
    """Copies of the operands a run uses: as asked, else 3 when there are 3 rounds or more to
    spread over them (one round per copy at the least), else 1."""
    if asked is not None:
        return asked
    return 3 if rounds >= 3 else 1


def round_order(count: int, round_index: int) -> list[int]:
    """The order of the kernels in one round: forward in even rounds, reversed in odd ones.
    Under the power cap the clock a kernel gets follows the draw of what ran just before it, so a
    fixed order would hand every kernel the same predecessor in every round."""
    order = list(range(count))
    return order[::-1] if round_index % 2 else order


def config_fields(p) -> dict:
    """Our kernel's tile, cluster and stages as run, and why that tile (when it was chosen per problem)."""
    kw = p.config
    tile = f"{kw['tile_m']}x{kw['tile_n']} cluster {kw.get('cluster_m', 1)}x{kw.get('cluster_n', 1)}"
    if kw.get("split_k", 1) > 1:
        tile += f" split-K {kw['split_k']}"
    return dict(tile=tile, choice=p.choice)


def _launch_gap_fields(fn, warmup_s: float) -> dict:
    """The kernel's GPU duration and the launch gap before it (medians over 30 traced launches)."""
    from bsprof.analyzers.kernel_trace import launch_summary
    from bsprof.profile.timer import trace_launches

    summary = launch_summary(trace_launches(fn, 30, warmup_s))
    return dict(kernel_us=summary["kernel_us"], gap_us=summary["gap_us"])


def median_round(runs: list[tuple[float, dict]]) -> tuple[float, dict]:
    """The round with the median time (its clock readings with it)."""
    ordered = sorted(runs, key=lambda r: r[0])
    return ordered[(len(ordered) - 1) // 2]


def _on_copy(p, ops):
    """A second handle on a prepared kernel, pointed at another copy of the operands (``p`` keeps its own)."""
    import copy

    from bsprof.kernels.fp8_blockwise.launch import rebind

    return rebind(copy.copy(p), ops)


def _rebind(p, first):
    """Point a second prepared kernel at the first one's operands (one set of inputs per problem)."""
    from bsprof.kernels.fp8_blockwise.launch import rebind

    return rebind(p, first.ops)


def run(request) -> tuple[dict, list[str]]:
    """`bsprof bench --family fp8-blockwise`: the chosen variant (and the other one) beside the peers.
    Returns the bench artifact and the kernels that computed a wrong product (one line each)."""
    from bsprof.gpu import device_info
    from bsprof.kernels.fp8_blockwise.quant import check_shape

    check_shape(request.mnkl)  # a shape the kernel cannot take is reported on any machine, GPU or not
    rounds = VERB_ROUNDS if request.rounds is None else request.rounds
    placements = placements_for(rounds, request.placements)
    check_rounds(rounds, placements)  # and so are copies no round would visit
    cute_example = None
    if request.cute_example:
        from bsprof.kernels.fp8_blockwise.cute_example_peer import example_file

        cute_example = str(example_file(request.cute_example))  # and a wrong path
    info = device_info()
    close = (
        close_call_specs(request.variant, request.mnkl, info["sm_count"], request.config) if request.close_calls else []
    )
    # a spec with switches is timed beside the plain variants it departs from
    variants = (request.variant, *close) + tuple(v for v in ("optimized", "baseline") if v != request.variant)
    res = measure(
        request.mnkl,
        variants,
        warmup=request.warmup,
        iters=request.iters,
        check=not request.skip_ref_check,
        seed=request.seed,
        config=request.config,
        inputs=request.inputs,
        cute_example=cute_example,
        rounds=rounds,
        placements=placements,
    )
    failed = [
        f"{r['name']} relative error {r['rel_err']:.3e} > {WRONG_PRODUCT:g} on {request.mnkl}: kernel bug"
        for r in res["rows"]
        if r["ours"] and isinstance(r["rel_err"], float) and r["rel_err"] > WRONG_PRODUCT
    ]
    extra = {"close_calls": close} if request.close_calls else {}
    return document(
        "bench", {"family": "fp8-blockwise", "variant": request.variant, "device": info, **res, **extra}
    ), failed


def close_call_specs(spec: str, mnkl, num_sms: int, config: dict | None = None) -> list[str]:
    """The kernel specs of the close calls of ``spec``'s pick at ``mnkl`` on ``num_sms`` SMs (built with
    the family flags ``config``, as :func:`measure` builds it): the spec with each configuration's tile
    and cluster added; none where the spec or the flags fix them."""
    from bsprof.kernels.fp8_blockwise.launch import plan

    variant, over = parse_spec(spec)
    sep = "," if ":" in spec else ":"
    knobs = plan(variant, mnkl, num_sms=num_sms, **{**(config or {}), **over})["close_calls"]
    return [spec + sep + k for k in knobs]
