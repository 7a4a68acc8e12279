"""Two tiny kernels whose only job is to put tensor-core MMAs inside a runtime-trip-count loop.

They are compiled on the CPU and disassembled, never launched: shared memory is left
uninitialised. Each wraps its phases in ``cutlass.utils.profiling.Scope`` blocks so the role
attribution has something to find.

* ``build_sm90``: one warpgroup issues FP8 wgmma (QGMMA) over shared-memory operands,
  ``k_iters`` times, then stores the register accumulator with SIMT stores.
* ``build_sm100``: warp 0 issues tcgen05 MMAs (UTCHMMA) into TMEM ``k_iters`` times, commits to
  an mbarrier; all warps load TMEM and store with SIMT stores.
"""

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import tcgen05, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.utils.profiling import Scope

BLOCK_K = 128


def build_sm90(m: int = 64, n: int = 128) -> None:

    ab_dtype, acc_dtype = cutlass.Float8E4M3FN, cutlass.Float32

    @cute.kernel
    def kernel(
        tmma: cute.TiledMma,
        c: cute.Tensor,
        k_iters: cutlass.Int32,
        sa_layout: cute.ComposedLayout,
        sb_layout: cute.ComposedLayout,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        smem = cutlass.memory.SmemAllocator()
        sA = smem.allocate_tensor(ab_dtype, sa_layout.outer, byte_alignment=1024, swizzle=sa_layout.inner)
        sB = smem.allocate_tensor(ab_dtype, sb_layout.outer, byte_alignment=1024, swizzle=sb_layout.inner)
        thr = tmma.get_slice(tidx)
        fa = tmma.make_fragment_A(thr.partition_A(sA))
        fb = tmma.make_fragment_B(thr.partition_B(sB))
        gC = cute.local_tile(c, (m, n), (0, 0))
        tCgC = thr.partition_C(gC)
        acc = cute.make_rmem_tensor(tCgC.shape, acc_dtype)
        acc.fill(0.0)
        with Scope("mainloop"):
            for _k in cutlass.range(k_iters):
                warpgroup.fence()
                for kb in cutlass.range_constexpr(cute.size(fa, mode=[2])):
                    tmma.set(warpgroup.Field.ACCUMULATE, True)
                    cute.gemm(tmma, acc, fa[(None, None, kb)], fb[(None, None, kb)], acc)
                warpgroup.commit_group()
                warpgroup.wait_group(0)
        with Scope("epilogue"):
            out = cute.make_rmem_tensor(tCgC.shape, cutlass.Float32)
            out.store(acc.load())
            cute.autovec_copy(out, tCgC)

    @cute.jit
    def host(c: cute.Tensor, k_iters: cutlass.Int32):
        k_mode = cute.nvgpu.OperandMajorMode.K
        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            ab_dtype, ab_dtype, k_mode, k_mode, acc_dtype, (1, 1, 1), tiler_mn=(m, n)
        )
        row = cutlass.tensor_utils.LayoutEnum.ROW_MAJOR
        a_atom = warpgroup.make_smem_layout_atom(sm90_utils.get_smem_layout_atom(row, ab_dtype, BLOCK_K), ab_dtype)
        b_atom = warpgroup.make_smem_layout_atom(sm90_utils.get_smem_layout_atom(row, ab_dtype, BLOCK_K), ab_dtype)
        sa_layout = cute.tile_to_shape(a_atom, (m, BLOCK_K), order=(0, 1))
        sb_layout = cute.tile_to_shape(b_atom, (n, BLOCK_K), order=(0, 1))
        kernel(tiled_mma, c, k_iters, sa_layout, sb_layout).launch(
            grid=(1, 1, 1), block=(128, 1, 1), smem=(m + n) * BLOCK_K + 4096
        )

    c = make_fake_compact_tensor(cutlass.Float32, (m, n), stride_order=(1, 0), assumed_align=16)
    cute.compile(host, c, cutlass.Int32(4))


def build_sm100(m: int = 128, n: int = 128) -> None:

    ab_dtype, acc_dtype = cutlass.Float16, cutlass.Float32
    tiler = (m, n, 64)
    threads = 128

    @cute.struct
    class Storage:
        acc_bar: cute.struct.MemRange[cutlass.Int64, 2]
        tmem_slot: cutlass.Int32

    @cute.kernel
    def kernel(
        tmma: cute.TiledMma,
        c: cute.Tensor,
        k_iters: cutlass.Int32,
        sa_layout: cute.ComposedLayout,
        sb_layout: cute.ComposedLayout,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        smem = cutlass.memory.SmemAllocator()
        st = smem.allocate(Storage)
        sA = smem.allocate_tensor(ab_dtype, sa_layout.outer, byte_alignment=1024, swizzle=sa_layout.inner)
        sB = smem.allocate_tensor(ab_dtype, sb_layout.outer, byte_alignment=1024, swizzle=sb_layout.inner)
        tmem = cutlass.memory.TmemAllocator(
            st.tmem_slot.ptr, barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=1, num_threads=threads)
        )
        tmem.allocate(512)
        acc_prod, acc_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=1,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, threads),
            barrier_storage=st.acc_bar.data_ptr(),
        ).make_participants()
        thr = tmma.get_slice(0)
        fa = tmma.make_fragment_A(sA)
        fb = tmma.make_fragment_B(sB)
        acc_shape = tmma.partition_shape_C(tiler[:2])
        tAcc = tmma.make_fragment_C(acc_shape)
        gC = cute.local_tile(c, tiler, (0, 0, None), proj=(1, 1, None))
        tCgC = thr.partition_C(gC)
        tmem.wait_for_alloc()
        tAcc = cute.make_tensor(tmem.retrieve_ptr(acc_dtype), tAcc.layout)
        if warp_idx == 0:
            with Scope("mma"):
                slot = acc_prod.acquire_and_advance()
                for _k in cutlass.range(k_iters):
                    for kb in cutlass.range_constexpr(cute.size(fa, mode=[2])):
                        cute.gemm(tmma, tAcc, fa[(None, None, kb, 0)], fb[(None, None, kb, 0)], tAcc)
                        tmma.set(tcgen05.Field.ACCUMULATE, True)
                slot.commit()
        tmem.relinquish_alloc_permit()
        with Scope("epilogue"):
            ready = acc_cons.wait_and_advance()
            ld = tcgen05.make_tmem_copy(
                cute.make_copy_atom(tcgen05.Ld32x32bOp(tcgen05.Repetition.x32), acc_dtype), tAcc
            )
            tld = ld.get_slice(tidx)
            src = tld.partition_S(tAcc)
            dst = tld.partition_D(tCgC)
            regs = cute.make_rmem_tensor(dst.shape, acc_dtype)
            cute.copy(ld, src, regs)
            cute.autovec_copy(regs, dst)
            ready.release()
        pipeline.sync(barrier_id=1)
        tmem.free(tAcc.iterator)

    @cute.jit
    def host(c: cute.Tensor, k_iters: cutlass.Int32):
        k_mode = tcgen05.OperandMajorMode.K
        op = tcgen05.MmaF16BF16Op(
            ab_dtype, acc_dtype, (m, n, 16), tcgen05.CtaGroup.ONE, tcgen05.OperandSource.SMEM, k_mode, k_mode
        )
        tiled_mma = cute.make_tiled_mma(op)
        sa_layout = sm100_utils.make_smem_layout_a(tiled_mma, tiler, ab_dtype, 1)
        sb_layout = sm100_utils.make_smem_layout_b(tiled_mma, tiler, ab_dtype, 1)
        kernel(tiled_mma, c, k_iters, sa_layout, sb_layout).launch(grid=(1, 1, 1), block=(threads, 1, 1))

    c = make_fake_compact_tensor(cutlass.Float32, (m, n), stride_order=(1, 0), assumed_align=16)
    cute.compile(host, c, cutlass.Int32(4))


def build_sm100_tma(cache_hint: bool = False, stages: int = 3, m: int = 128, n: int = 128) -> None:
    """warp 0 streams A/B tiles with TMA through a ``stages``-deep mbarrier ring and issues tcgen05
    MMAs on each; ``cache_hint`` adds an L2 evict-first policy to the TMA loads."""
    from cutlass.cute.nvgpu import cpasync

    ab_dtype, acc_dtype = cutlass.Float16, cutlass.Float32
    tiler = (m, n, 64)
    threads = 128
    evict_first = 0x12F0000000000000

    @cute.struct
    class Storage:
        ab_bar: cute.struct.MemRange[cutlass.Int64, stages * 2]
        acc_bar: cute.struct.MemRange[cutlass.Int64, 2]
        tmem_slot: cutlass.Int32

    @cute.kernel
    def kernel(
        tmma: cute.TiledMma,
        atom_a: cute.CopyAtom,
        tma_a: cute.Tensor,
        atom_b: cute.CopyAtom,
        tma_b: cute.Tensor,
        c: cute.Tensor,
        sa_layout: cute.ComposedLayout,
        sb_layout: cute.ComposedLayout,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        smem = cutlass.memory.SmemAllocator()
        st = smem.allocate(Storage)
        sA = smem.allocate_tensor(ab_dtype, sa_layout.outer, byte_alignment=1024, swizzle=sa_layout.inner)
        sB = smem.allocate_tensor(ab_dtype, sb_layout.outer, byte_alignment=1024, swizzle=sb_layout.inner)
        tmem = cutlass.memory.TmemAllocator(
            st.tmem_slot.ptr, barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=1, num_threads=threads)
        )
        tmem.allocate(512)
        tx_bytes = cute.size_in_bytes(ab_dtype, cute.select(sa_layout, mode=[0, 1, 2])) + cute.size_in_bytes(
            ab_dtype, cute.select(sb_layout, mode=[0, 1, 2])
        )
        ab_prod, ab_cons = pipeline.PipelineTmaUmma.create(
            num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            tx_count=tx_bytes,
            barrier_storage=st.ab_bar.data_ptr(),
        ).make_participants()
        acc_prod, acc_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=1,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, threads),
            barrier_storage=st.acc_bar.data_ptr(),
        ).make_participants()
        gA = cute.local_tile(tma_a, tiler, (0, 0, None), proj=(1, None, 1))
        gB = cute.local_tile(tma_b, tiler, (0, 0, None), proj=(None, 1, 1))
        gC = cute.local_tile(c, tiler, (0, 0, None), proj=(1, 1, None))
        thr = tmma.get_slice(0)
        tCgA = thr.partition_A(gA)
        tCgB = thr.partition_B(gB)
        tCgC = thr.partition_C(gC)
        fa = tmma.make_fragment_A(sA)
        fb = tmma.make_fragment_B(sB)
        tAcc = tmma.make_fragment_C(tmma.partition_shape_C(tiler[:2]))
        tAsA, tAgA = cpasync.tma_partition(
            atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 3), cute.group_modes(tCgA, 0, 3)
        )
        tBsB, tBgB = cpasync.tma_partition(
            atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 3), cute.group_modes(tCgB, 0, 3)
        )
        tmem.wait_for_alloc()
        tAcc = cute.make_tensor(tmem.retrieve_ptr(acc_dtype), tAcc.layout)
        k_tiles = cute.size(gA, mode=[2])
        if warp_idx == 0:
            with Scope("mainloop"):
                slot = acc_prod.acquire_and_advance()
                for _k in cutlass.range(k_tiles):
                    free = ab_prod.acquire_and_advance()
                    if cutlass.const_expr(cache_hint):
                        cute.copy(
                            atom_a,
                            tAgA[(None, free.count)],
                            tAsA[(None, free.index)],
                            tma_bar_ptr=free.barrier,
                            cache_policy=cutlass.Int64(evict_first),
                        )
                        cute.copy(
                            atom_b,
                            tBgB[(None, free.count)],
                            tBsB[(None, free.index)],
                            tma_bar_ptr=free.barrier,
                            cache_policy=cutlass.Int64(evict_first),
                        )
                    else:
                        cute.copy(atom_a, tAgA[(None, free.count)], tAsA[(None, free.index)], tma_bar_ptr=free.barrier)
                        cute.copy(atom_b, tBgB[(None, free.count)], tBsB[(None, free.index)], tma_bar_ptr=free.barrier)
                    full = ab_cons.wait_and_advance()
                    for kb in cutlass.range_constexpr(cute.size(fa, mode=[2])):
                        cute.gemm(tmma, tAcc, fa[(None, None, kb, full.index)], fb[(None, None, kb, full.index)], tAcc)
                        tmma.set(tcgen05.Field.ACCUMULATE, True)
                    full.release()
                slot.commit()
        tmem.relinquish_alloc_permit()
        with Scope("epilogue"):
            ready = acc_cons.wait_and_advance()
            ld = tcgen05.make_tmem_copy(
                cute.make_copy_atom(tcgen05.Ld32x32bOp(tcgen05.Repetition.x32), acc_dtype), tAcc
            )
            tld = ld.get_slice(tidx)
            src = tld.partition_S(tAcc)
            dst = tld.partition_D(tCgC)
            regs = cute.make_rmem_tensor(dst.shape, acc_dtype)
            cute.copy(ld, src, regs)
            cute.autovec_copy(regs, dst)
            ready.release()
        pipeline.sync(barrier_id=1)
        tmem.free(tAcc.iterator)

    @cute.jit
    def host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
        k_mode = tcgen05.OperandMajorMode.K
        op = tcgen05.MmaF16BF16Op(
            ab_dtype, acc_dtype, (m, n, 16), tcgen05.CtaGroup.ONE, tcgen05.OperandSource.SMEM, k_mode, k_mode
        )
        tiled_mma = cute.make_tiled_mma(op)
        sa_layout = sm100_utils.make_smem_layout_a(tiled_mma, tiler, ab_dtype, stages)
        sb_layout = sm100_utils.make_smem_layout_b(tiled_mma, tiler, ab_dtype, stages)
        g2s = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
        atom_a, tma_a = cute.nvgpu.make_tiled_tma_atom_A(
            g2s, a, cute.select(sa_layout, mode=[0, 1, 2]), tiler, tiled_mma
        )
        atom_b, tma_b = cute.nvgpu.make_tiled_tma_atom_B(
            g2s, b, cute.select(sb_layout, mode=[0, 1, 2]), tiler, tiled_mma
        )
        kernel(tiled_mma, atom_a, tma_a, atom_b, tma_b, c, sa_layout, sb_layout).launch(
            grid=(1, 1, 1), block=(threads, 1, 1)
        )

    k = cute.sym_int(divisibility=64)
    a = make_fake_compact_tensor(ab_dtype, (m, k), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(ab_dtype, (n, k), stride_order=(1, 0), assumed_align=16)
    c = make_fake_compact_tensor(cutlass.Float32, (m, n), stride_order=(1, 0), assumed_align=16)
    cute.compile(host, a, b, c)


def build_bad_branch() -> None:
    """Does not compile, on purpose: a run-time value in a plain Python ``if`` inside a kernel
    helper the DSL does not rewrite. CuTe DSL reports it as ``error[...]`` with the file and line,
    then several lines of suggestions: the build must surface the first, not the last."""

    def pick(x):
        return 1 if x > 0 else 2  # x is a run-time Int32

    @cute.kernel
    def kernel(c: cute.Tensor, n: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        c[tidx] = pick(n)

    @cute.jit
    def host(c: cute.Tensor, n: cutlass.Int32):
        kernel(c, n).launch(grid=(1, 1, 1), block=(32, 1, 1))

    c = make_fake_compact_tensor(cutlass.Int32, (32,))
    cute.compile(host, c, cutlass.Int32(4))
