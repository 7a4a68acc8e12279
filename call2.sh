source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p $OUT/r; R=$OUT/r
timeout 120 python3 -m pytest -n 8 -m gpu tests/test_fp8_gpu.py -k "shifted or chosen" -q -rf --tb=short > $R/t.txt 2>&1; echo "rc=$?" >> $R/t.txt; tail -3 $R/t.txt
S='48,12288,5120;96,5120,13824;200,18944,3584;384,3584,18944;520,6144,4096;777,4096,11008;1111,11008,4096;1536,2560,10240;2304,13824,5120;3333,8192,1024;5000,1280,5120;6000,7168,4608;64,32000,4096'
DG_PRINT_CONFIGS=1 timeout 400 python3 benchmarks/fp8_blockwise.py --suite heldout --kernels optimized --rounds 3 --jobs 12 --shapes "$S" --json $R/fresh.json > $R/fresh.txt 2>&1
grep -A40 "DeepGEMM" $R/fresh.txt | tail -45
cd $OUT && tar cJf r.tar.xz r && rm -rf r
