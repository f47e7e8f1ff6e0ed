set -x
export CXX=/usr/bin/g++ FUSER_CACHE_DIR=/tmp/fc
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 560 python3 -m fuser.bench --zoo --device cuda --size medium --dtype float32 --mode script,nnc,fuser --out $OUT/zoo32 > $OUT/zoo32.txt 2>&1
tail -60 $OUT/zoo32.txt
