source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p $OUT/r; R=$OUT/r
timeout 150 python3 -m pytest -n 8 -m gpu tests/test_fp8_gpu.py -q -rf --tb=short > $R/t.txt 2>&1; echo "rc=$?" >> $R/t.txt; tail -4 $R/t.txt
if grep -q " passed" $R/t.txt && ! grep -q "failed" $R/t.txt; then
S='384,3584,18944;96,5120,18944;200,4096,28672;512,2560,18944;3000,2048,20480;4096,1536,18432;1024,8192,28672'
timeout 250 python3 benchmarks/fp8_blockwise.py --suite heldout --kernels 'optimized optimized:sfb_smem=0' --rounds 5 --jobs 14 --shapes "$S" --json $R/stash.json > $R/stash.txt 2>&1
grep -B2 -A14 "round by round" $R/stash.txt | grep "│"; grep -A12 "optimized / DeepGEMM" $R/stash.txt | tail -12
timeout 120 python3 benchmarks/fp8_blockwise.py --suite heldout --kernels optimized --rounds 5 --jobs 14 --shapes '96,5120,13824@tile_m=64,tile_n=80;64,32000,4096@tile_m=64,tile_n=128,cluster_m=2,cluster_n=1' --json $R/given.json > $R/given.txt 2>&1
grep -A8 "round by round" $R/given.txt | grep "│"
fi
cd $OUT && tar cJf r.tar.xz r && rm -rf r
