"""Role / phase attribution from a kernel's Python source (read with ast)."""

from __future__ import annotations

import textwrap

from bsprof.analyzers.sass import analyze_sass_text
from bsprof.analyzers.sass.roles import LineMap, parse_source

SRC = textwrap.dedent("""\
    from cutlass.utils.profiling import Scope, WarpScope

    class K:
        def _issue(self, acc):
            cute.gemm(acc)                       # 5
            commit()                             # 6

        @cute.kernel
        def kernel(self, warp_idx):
            setup()                              # 10
            scope = WarpScope("LoadWarp", warp_start=0, warp_end=1)
            if warp_idx == self.tma_warp_id:     # 12
                load()                           # 13
            scope.switch("MmaWarp", warp_start=1, warp_end=2)
            if warp_idx == self.mma_warp_id:     # 15
                with Scope("mainloop"):          # 16
                    self._issue(acc)             # 17
            scope.switch("EpilogueWarps", warp_start=2, warp_end=6)
            with Scope(("epilogue", "tmem_load")):
                ld()                             # 20
            scope.close()
            teardown()                           # 22

        def helper_everywhere(self):
            pass                                 # 25
    """)


def _lm() -> LineMap:
    return LineMap(*parse_source(SRC))


def test_flat_warpscope_switch_and_with_blocks():
    lm = _lm()
    assert lm.label(13) == ("LoadWarp/tma_warp", "scope")
    assert lm.label(17)[0] == "MmaWarp/mma_warp/mainloop"
    assert lm.label(20)[0] == "EpilogueWarps/epilogue/tmem_load"
    assert lm.label(10) == ("kernel()", "function")
    assert lm.label(22) == ("kernel()", "function")
    assert lm.label(9)[0] == "kernel()"  # the decorator line belongs to the function


def test_helper_inherits_its_call_site_scope():
    # CuTe DSL line info has no inlining chain: the MMA in _issue must still land in the MMA warp
    lm = _lm()
    assert lm.label(5)[0] == "MmaWarp/mma_warp/mainloop"
    assert lm.label(25) == ("helper_everywhere()", "function")


def test_warp_if_without_scopes():
    src = textwrap.dedent("""\
        def kernel(warp_idx):
            if warp_idx == self.epilog_warp_id[0]:
                store()
            elif warp_idx < self.mma_warp_id:
                mma()
        """)
    lm = LineMap(*parse_source(src))
    assert lm.label(3) == ("epilog_warp", "warp-if")
    # an ordering test (`<`) does not say which role runs: those lines fall back to the function
    assert lm.label(5) == ("kernel()", "function")
    assert LineMap(*parse_source("def broken(:\n")).label(1) is None


def test_listing_with_line_info_and_source(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(SRC)
    listing = "\n".join(
        [
            f'//## File "{src}", line 13',
            "/*0000*/ UTMALDG.2D [UR8], [UR4] ;",
            f'//## File "{src}", line 5',
            "/*0010*/ UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR9], idesc[UR10], UPT ;",
            f'//## File "{src}", line 20',
            "/*0020*/ LDTM.x32 R4, tmem[UR4] ;",
            "/*0030*/ EXIT ;",
        ]
    )
    (fa,) = analyze_sass_text(listing, arch="sm_100a")
    assert fa.roles_source == "scope"
    assert fa.roles == [
        "LoadWarp/tma_warp",
        "MmaWarp/mma_warp/mainloop",
        "EpilogueWarps/epilogue/tmem_load",
        "EpilogueWarps/epilogue/tmem_load",
    ]
    # --source redirects a path recorded on another machine
    moved = listing.replace(str(src), "/elsewhere/k.py")
    (fb,) = analyze_sass_text(moved, arch="sm_100a", kernel_source=src)
    assert fb.roles == fa.roles
    (fc,) = analyze_sass_text(moved, arch="sm_100a")
    assert fc.roles_source == "loops" and "pass --source" in " ".join(fc.notes)
