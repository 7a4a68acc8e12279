"""Launch one peer kernel a few times on the bench inputs, for Nsight Compute to profile
(`ncu -k regex:... --launch-skip 3 --launch-count 1 python3 benchmarks/peer_once.py deepgemm`).

    python3 benchmarks/peer_once.py deepgemm|cublas_blockwise [M,N,K]
"""

from __future__ import annotations

import argparse
import sys


def _mnk(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a problem is M,N,K (e.g. 4096,4096,4096)") from None
    if min(m, n, k) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: M, N and K must be positive")
    return m, n, k


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="peer_once.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("peer", nargs="?", default="deepgemm", help="deepgemm or cublas_blockwise")
    p.add_argument("mnk", nargs="?", type=_mnk, default=(4096, 4096, 4096), help="the problem, M,N,K")
    args = p.parse_args(argv)
    peer, (m, n, k) = args.peer, args.mnk
    import torch

    from bsprof.kernels.fp8_blockwise.quant import make_operands
    from bsprof.profile.bench.fp8_blockwise import peer_fns

    fns, skipped = peer_fns(make_operands((m, n, k, 1)), (m, n, k, 1))
    if peer not in fns:
        print(f"error: peer {peer!r} cannot run here: {skipped.get(peer, 'unknown peer')}", file=sys.stderr)
        return 2
    fn = fns[peer][0]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
