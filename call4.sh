source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p $OUT/r; R=$OUT/r
S='70,6144,5120@tile_m=128,tile_n=64,cluster_m=1,cluster_n=1,split_k=1;86,4608,10240@tile_m=128,tile_n=48,cluster_m=1,cluster_n=1,split_k=1;104,3584,7168@tile_m=128,tile_n=64,cluster_m=1,cluster_n=1,split_k=2;120,6144,3072@tile_m=128,tile_n=64,cluster_m=1,cluster_n=1,split_k=1;126,4608,7168@tile_m=128,tile_n=48,cluster_m=1,cluster_n=1,split_k=1;72,6144,8192@tile_m=128,tile_n=64,cluster_m=1,cluster_n=1,split_k=1;100,8192,5120@tile_m=128,tile_n=80,cluster_m=1,cluster_n=1,split_k=1;116,5120,7168@tile_m=128,tile_n=48,cluster_m=1,cluster_n=1,split_k=1;88,10240,4096@tile_m=64,tile_n=160,cluster_m=1,cluster_n=1;92,7168,3584@tile_m=64,tile_n=112,cluster_m=1,cluster_n=1'
timeout 200 python3 benchmarks/fp8_blockwise.py --suite heldout --kernels optimized --rounds 3 --jobs 14 --shapes "$S" --json $R/below128.json > $R/below128.txt 2>&1
grep -A14 "round by round" $R/below128.txt | grep "│"; grep -A14 "optimized / DeepGEMM" $R/below128.txt | grep "│"
S2='384,3584,18944;200,4096,28672;512,2560,18944;3000,2048,20480;1024,8192,28672'
timeout 220 python3 benchmarks/fp8_blockwise.py --no-peers --kernels 'optimized optimized:sfb_smem=0' --rounds 7 --jobs 14 --shapes "$S2" --json $R/stash7.json > $R/stash7.txt 2>&1
grep -A9 "round by round" $R/stash7.txt | grep "│"; grep -A9 "FLOP per SM" $R/stash7.txt | grep "│"
cd $OUT && tar cJf r.tar.xz r && rm -rf r
