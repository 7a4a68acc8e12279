#!/bin/bash
# device call helper (untracked): $1 = phase name
source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
mkdir -p $OUT/r; R=$OUT/r
nvidia-smi --query-gpu=name,power.limit,temperature.gpu,clocks.sm --format=csv > $R/gpu.txt
