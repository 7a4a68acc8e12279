"""Launch one peer kernel a few times on the bench inputs, for Nsight Compute to profile
(`ncu -k regex:... --launch-skip 3 --launch-count 1 python3 benchmarks/peer_once.py deepgemm`).

    python3 benchmarks/peer_once.py deepgemm|cublas_blockwise [M,N,K]
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import torch

    from bsprof.kernels.fp8_blockwise.quant import make_operands
    from bsprof.profile.bench.fp8_blockwise import peer_fns

    peer = argv[0] if argv else "deepgemm"
    m, n, k = (int(x) for x in (argv[1] if len(argv) > 1 else "4096,4096,4096").split(","))
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
