#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run the CUDA tests, the scheme tests on the
# GPU and the ops benchmark; logs and JSON under $OUT (or ./out).
# Usage: bash scripts/gpu_check.sh [all|tests|bench|bts|helr|tfhe|large|switch|digits|digits-split|resnet-lut-split|profile|bytes|resnet|distributed|ab|figures|dram] [bts presets] [bts repeat]
#   digits: models.digits_cnn (GELU, MaxPool2d by lookup tables) encrypted on n16-bts40, $2 images
#   with the default 4-bit grid, $3 with tfhe-6bit (carry .wheels: scikit-learn).
#   digits-split: the digits CNN encrypted over the test split (or its first $3 images), grid of the TFHE
#   set $2 (default tfhe-6bit), one shard per GPU of the machine, merged (models.digits_cnn --merge).
#   resnet-lut-split: ResNet-20 with relu="lut" (n16-bts40, 4-bit grid, product form, the step sharpened: 2 stages)
#   encrypted on evaluation images [$2, $2 + $3) (default 0 and 384: all of them), contiguous ranges, one process
#   per GPU (each its own keys), each --json written after every image; then merged with the earlier runs of the
#   same setting kept as benchmarks/results/*resnet20-relu-lut-sharpen2-from*.json (models.evaluate_resnet20
#   --merge). Needs the CIFAR-10 data ($FHETORCH_DATA); $4: seconds per process. The rest: 108 276.
#   switch: the switching cuda tests (and the switching tests on the GPU), the switch suite
#   ($2 = value counts, default 1024,4096,32768; $3 = repeat).
#   tfhe: the TFHE cuda tests and the tfhe suite ($2 = presets, default tfhe-4bit-p128,tfhe-4bit),
#   then TFHE-rs's anchor where a copy of ../shared/anchors/tfhers is carried as .anchors/tfhers.
#   large: the large-ring rotation (N >= 2^12, csrc/cuda/fourier_split_core.cuh): the TFHE cuda tests,
#   one rotation per preset of $2 (default tfhe-6bit,tfhe-8bit,tfhe-8bit-p128) with its kernels' times,
#   the tfhe suite's PBS at batches 1, 132, 1024 for those presets, and the 10-bit switch of $3 values
#   (default 1024; 0 skips it).
#   resnet: the cuda linear-transform / nn tests and the resnet20 suite (CIFAR-10 where
#   $FHETORCH_DATA or ../shared/data has the data; $2 = images, $3 = presets, space-separated).
#   bts: the cuda bootstrapping tests and the bts suite (presets may be variants,
#   e.g. n16-bts40:user_levels=13+evalmod_bits=60).
#   ab: this tree against the code in $2 (default .ab/base, made where git is: `git archive <commit> csrc setup.py
#   fhetorch benchmarks scripts pyproject.toml | tar -x -C .ab/base`, and carried to the GPU machine), built side by
#   side and timed alternately, twice each: scripts/ks_bench.py 48x12 and the bts suite at n16-bts40, after the CUDA
#   parity tests of the ops (JSON ab-{ks,bts}-{head,base}{1,2}.json).
#   figures: issue 14's figures in one call (~6 min on an H200): ks_bench 48x12, bootstrapping n16-bts40 and
#   n16-bts35, HELR, ResNet-20 (CIFAR-10 from $FHETORCH_DATA, else a copy of ../shared/data carried as .data),
#   the sort of 2^14 values, then every cuda test (JSON and logs under $OUT).
#   dram: one HRot and one HMult + rescale at 48x12 under Nsight Compute in application replay (scripts/ks_ncu.py):
#   each kernel's time and DRAM bytes as the L2 carries them between kernels (ncu_ks.csv, ncu_ks.txt).
#   distributed: on every GPU of the machine (one rank each): the 2-rank NCCL tests, the
#   distributed suite (a 2^16-PBS wave, HELR) and ResNet-20 encrypted on $2 images (default 16,
#   preset $3, default n16-bts35) on 1 GPU and on all, through torchrun (needs the CIFAR-10 data).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
python3 -c "import fhetorch; assert fhetorch._ops.has_cuda(), 'CUDA kernels missing'; print('CUDA kernels: yes')" || exit 1
STAGE="${1:-all}"
gpu_count() { python3 -c "import torch; print(torch.cuda.device_count())"; }  # the split and distributed stages
if [ "$STAGE" = all ] || [ "$STAGE" = tests ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUT/cuda_tests.log" | tail -25
  FHETORCH_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider -m "not slow" tests/_ckks tests/tensor 2>&1 \
    | tee "$OUT/scheme_cuda.log" | tail -15
fi
if [ "$STAGE" = all ] || [ "$STAGE" = bench ]; then
  timeout 400 python3 -m benchmarks --suite ops --device cuda --json "$OUT/ops.json" 2>&1 | tee "$OUT/bench.log" | tail -60
fi
if [ "$STAGE" = bts ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/circuits 2>&1 | tee "$OUT/bts_tests.log" | tail -15
  timeout 480 python3 -m benchmarks --suite bts --device cuda --shapes "${2:-n16-bts40,n16-bts35}" --repeat "${3:-5}" \
    --warmup 1 --json "$OUT/bts.json" 2>&1 | tee "$OUT/bts.log" | tail -45
fi
if [ "$STAGE" = switch ]; then
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/circuits/test_switching.py tests/_tfhe 2>&1 \
    | tee "$OUT/switch_tests.log" | tail -8
  FHETORCH_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -p no:cacheprovider tests/circuits/test_switching.py 2>&1 \
    | tee "$OUT/switch_cuda_device.log" | tail -8
  timeout 420 python3 -m benchmarks --suite switch --device cuda ${2:+--batches "$2"} --repeat "${3:-3}" \
    --json "$OUT/switch.json" 2>&1 | tee "$OUT/switch.log" | tail -20
fi
if [ "$STAGE" = resnet ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/nn tests/models 2>&1 \
    | tee "$OUT/nn_tests.log" | tail -15
  for preset in ${3:-n16-bts40}; do
    timeout 400 python3 -m benchmarks --suite resnet20 --device cuda --preset "$preset" --repeat "${2:-3}" \
      --json "$OUT/resnet20-$preset.json" 2>&1 | tee "$OUT/resnet20-$preset.log" | tail -14
  done
fi
if [ "$STAGE" = digits ]; then  # the digits CNN (GELU, MaxPool2d by lookup tables) encrypted; needs scikit-learn
  [ -d .wheels ] && python3 -m pip install -q --no-index --no-deps .wheels/*.whl
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/circuits/test_switching.py 2>&1 | tail -3
  timeout 250 python3 -m models.digits_cnn --device cuda --preset n16-bts40 --encrypted "${2:-20}" 2>&1 \
    | tee "$OUT/digits_cnn.log" | grep -v "it/s\]$" | tail -6
  timeout 300 python3 -m models.digits_cnn --device cuda --preset n16-bts40 --lut-tfhe tfhe-6bit \
    --encrypted "${3:-4}" 2>&1 | tee "$OUT/digits_cnn_6bit.log" | grep -v "it/s\]$" | tail -6
fi
if [ "$STAGE" = digits-split ]; then  # one process per GPU, each with its own keys; then the totals
  gpus=$(gpu_count)
  echo "GPUs: $gpus"
  python3 -c "from models.digits_cnn import trained_model; trained_model()"  # trained once, before the shards read it
  for k in $(seq 0 $((gpus - 1))); do
    CUDA_VISIBLE_DEVICES=$k timeout "${4:-540}" python3 -m models.digits_cnn --device cuda --preset n16-bts40 \
      --lut-tfhe "${2:-tfhe-6bit}" --encrypted "${3:-all}" --shard "$k/$gpus" --json "$OUT/digits-shard$k.json" \
      > "$OUT/digits-shard$k.log" 2>&1 &
  done
  wait
  for k in $(seq 0 $((gpus - 1))); do grep -v "it/s\]$\|image/s\]$" "$OUT/digits-shard$k.log" | tail -2; done
  python3 -m models.digits_cnn --merge "$OUT"/digits-shard*.json | tee "$OUT/digits-split.log"
fi
if [ "$STAGE" = resnet-lut-split ]; then
  gpus=$(gpu_count)
  first="${2:-0}"; count="${3:-384}"; per=$(( (count + gpus - 1) / gpus ))
  echo "GPUs: $gpus, evaluation images $first..$((first + count - 1)), $per a GPU"
  for k in $(seq 0 $((gpus - 1))); do
    from=$((first + k * per)); n=$(( per < first + count - from ? per : first + count - from ))
    [ "$n" -gt 0 ] || continue
    CUDA_VISIBLE_DEVICES=$k timeout "${4:-540}" python3 -m models.evaluate_resnet20 --device cuda --preset n16-bts40 \
      --relu lut --encrypted "$n" --encrypted-from "$from" --json "$OUT/resnet-lut-from$from.json" \
      > "/tmp/resnet-lut-shard$k.log" 2>&1 &
  done
  wait
  for k in $(seq 0 $((gpus - 1))); do tail -3 "/tmp/resnet-lut-shard$k.log" 2>/dev/null | grep -v "image/s\]$"; done
  python3 -m models.evaluate_resnet20 --merge $(ls benchmarks/results/*resnet20-relu-lut-sharpen2-from*.json 2>/dev/null) \
    "$OUT"/resnet-lut-from*.json
  # the device tool brings back at most 8 files a call: the shards' JSONs travel as one tar beyond 4 GPUs
  if [ "$gpus" -gt 4 ]; then tar -C "$OUT" -cf "$OUT/resnet-lut-split.tar" $(cd "$OUT" && ls resnet-lut-from*.json) \
    && rm -f "$OUT"/resnet-lut-from*.json; fi
fi
if [ "$STAGE" = helr ]; then  # HELR (8 batched ciphertexts per iteration) and its CUDA tests
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/models/test_helr.py 2>&1 | tail -5
  timeout 300 python3 -m benchmarks --suite helr --device cuda --json "$OUT/helr.json" 2>&1 | tee "$OUT/helr.log" | tail -20
fi
if [ "$STAGE" = tfhe ]; then
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/_tfhe tests/tfhe 2>&1 | tail -5
  timeout 330 python3 -m benchmarks --suite tfhe --device cuda --shapes "${2:-tfhe-4bit-p128,tfhe-4bit}" \
    --json "$OUT/tfhe.json" 2>&1 | tee "$OUT/tfhe.log" | grep -A12 "^| preset"
  if [ -x .anchors/tfhers/bench_pbs_sm90 ]; then
    OUT="$OUT" timeout 200 bash .anchors/tfhers/run.sh --ops pbs,kspbs --batches 1,1024,16384 | grep -E "^(pbs|ks\+)"
  fi
fi
if [ "$STAGE" = large ]; then
  presets="${2:-tfhe-6bit,tfhe-8bit,tfhe-8bit-p128}"
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/_tfhe tests/tfhe 2>&1 \
    | tee "$OUT/tfhe_tests.log" | tail -5
  for p in ${presets//,/ }; do
    timeout 120 python3 scripts/fourier_rotate_timing.py 256 16 3 --preset "$p" --kernels 2>&1 | tee -a "$OUT/rotation.log"
  done
  timeout 400 python3 -m benchmarks --suite tfhe --device cuda --shapes "$presets" --batches 1,132,1024 \
    --ops pbs,ks_pbs --repeat 3 --warmup 1 --max-call-s 20 --no-circuits --json "$OUT/tfhe-large.json" 2>&1 \
    | tee "$OUT/tfhe-large.log" | grep -E "^== |check|^\| "
  if [ "${3:-1024}" != 0 ]; then
    timeout 300 python3 -m benchmarks --suite switch --device cuda --shapes "n16-bts40:tfhe-8bit-p128:10" \
      --batches "${3:-1024}" --repeat 1 --json "$OUT/switch-10bit.json" 2>&1 | tee "$OUT/switch-10bit.log" | tail -6
  fi
fi
if [ "$STAGE" = distributed ]; then  # NVLink multicast stays off (the device tool's KINDS.md)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  gpus=$(gpu_count)
  echo "GPUs: $gpus"
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/distributed 2>&1 \
    | tee "$OUT/distributed_tests.log" | tail -5
  timeout 400 torchrun --standalone --nproc-per-node "$gpus" -m benchmarks --suite distributed \
    --json "$OUT/distributed.json" 2>&1 | tee "$OUT/distributed.log" | grep -E "^(suite|  pbs|  helr|wrote)|Error"
  k="${2:-16}"
  timeout 500 torchrun --standalone --nproc-per-node "$gpus" -m models.evaluate_resnet20 --distributed \
    --encrypted "$k" --count $((128 + k)) --preset "${3:-n16-bts35}" --json "$OUT/resnet20-distributed.json" 2>&1 \
    | tee "$OUT/resnet20-distributed.log" | grep -v "it/s\]$\|image/s\]$\|input/s\]$" | tail -14
fi
if [ "$STAGE" = profile ]; then
  timeout 400 python3 scripts/bts_profile.py --preset "${2:-n16-bts40}" --json "$OUT/bts_profile.json" 2>&1 \
    | tee "$OUT/bts_profile.log" | tail -120
fi
if [ "$STAGE" = bytes ]; then  # DRAM and L2 bytes of one bootstrapping (Nsight Compute; caches flushed per kernel: upper bounds)
  timeout 500 ncu --profile-from-start off --clock-control none --csv --print-units base \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
    python3 scripts/bts_profile.py --preset "${2:-n16-bts40}" --ncu-window > "$OUT/bts_ncu.csv" 2> "$OUT/bts_ncu.err"
  echo "ncu exit $?"; tail -3 "$OUT/bts_ncu.err"; wc -l "$OUT/bts_ncu.csv"
fi
if [ "$STAGE" = figures ]; then
  [ -z "${FHETORCH_DATA:-}" ] && [ -d .data ] && export FHETORCH_DATA="$(pwd)/.data"
  timeout 60 python3 scripts/ks_bench.py --shapes 48x12 --no-profile --json "$OUT/ks_bench.json" 2>&1 \
    | grep -E "hmult |hrot |rescale "
  timeout 150 python3 -m benchmarks --suite bts --device cuda --shapes n16-bts40,n16-bts35 --repeat 7 --warmup 1 \
    --json "$OUT/bts.json" 2>&1 | grep -E "\(graph\)|bits " | grep -v "^n16"
  timeout 90 python3 -m benchmarks --suite helr --device cuda --json "$OUT/helr.json" 2>&1 | grep "per iteration"
  timeout 150 python3 -m benchmarks --suite resnet20 --device cuda --json "$OUT/resnet20.json" 2>&1 | grep -E "^per image"
  timeout 120 python3 -m benchmarks --suite sort --device cuda --shapes n16-bts40 --json "$OUT/sort.json" 2>&1 \
    | grep -E "values,|graph"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUT/cuda_tests.log" | tail -2
fi
if [ "$STAGE" = dram ]; then
  timeout 300 ncu --replay-mode application --profile-from-start off --cache-control none --clock-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    --csv --print-units base python3 scripts/ks_ncu.py > "$OUT/ncu_ks.csv" 2> "$OUT/ncu_ks.err"
  python3 scripts/ks_ncu.py --summary "$OUT/ncu_ks.csv" | tee "$OUT/ncu_ks.txt"
fi
if [ "$STAGE" = ab ]; then
  BASE="${2:-.ab/base}"; AOUT="$(cd "$OUT" && pwd)"
  [ -f "$BASE/setup.py" ] || { echo "ab: no code at $BASE (git archive <commit> ... | tar -x -C $BASE)"; exit 1; }
  (cd "$BASE" && python3 setup.py -q build_ext --inplace > "$AOUT/build_base.log" 2>&1) \
    || { tail -20 "$AOUT/build_base.log"; exit 1; }
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/_ops 2>&1 | tee "$OUT/ab_parity.log" | tail -2
  for run in 1 2; do
    for v in head base; do
      d=.; [ $v = base ] && d="$BASE"
      (cd "$d" && timeout 60 python3 scripts/ks_bench.py --shapes 48x12 --no-profile --json "$AOUT/ab-ks-$v$run.json" 2>&1 \
        | grep -E "hmult |hrot |rescale " | sed "s/^/$v$run /")
      (cd "$d" && timeout 90 python3 -m benchmarks --suite bts --device cuda --shapes n16-bts40 --repeat 5 --warmup 1 \
        --json "$AOUT/ab-bts-$v$run.json" 2>&1 | grep -E "bootstrap full" | sed "s/^/$v$run /")
    done
  done
fi
