#!/usr/bin/env bash
# Every GPU check and measurement of the project, for one call on a GPU machine:
#
#   bash bench/gpu_session.sh OUT STAGE...
#
# stages:
#   tests     pytest -m gpu (fused vs unfused in bf16 under each SDPA backend, padding masks, training, decoding)
#   eager     bench/throughput.py, base and big, every configuration without torch.compile, plus real batches
#   compile   bench/throughput.py, every configuration (torch.compile included), one spec: SPEC (default base)
#   table     bench/throughput.py, base then big, the configurations in CONFIGS (default: the bar's rows first,
#             then the eager ones) in that order, each spec cut at TABLE_LIMIT seconds (default 250; rows so far kept)
#   bar       the bar's rows, base then big, BAR_base and BAR_big (comma-separated configurations, in order):
#             each spec's first WARM_base / WARM_big configurations are compiled at once, one process each
#             (one step; this fills Inductor's caches), with the GPU tests beside base's when WITH_TESTS=1;
#             then one bench/throughput.py run times them all one by one, the compiled ones from the caches;
#             limits WARM_LIMIT, TESTS_LIMIT, TABLE_LIMIT_base, TABLE_LIMIT_big (seconds)
#   quality   bench/quality.py --only SIDE (attncomp, the default, or reference) on de-en: specs/base.attn on the GPU
#             with --compile for QUALITY_MINUTES (10), checkpoints every 2 minutes, the last 5 averaged, scored
#             on TEST_SRC/TEST_REF (.devdata/de-en-test/test.{en,de}); it runs in a session of its own (setsid)
#             under /tmp/quality, so it outlasts this call: the stage waits at most QUALITY_WAIT seconds
#             (540) and copies its log; `quality-wait` (the next call, on the same warm machine) waits for the
#             rest and copies results.json
#   gpu-decode  bench/gpu_decode.py on /tmp/quality/attncomp/checkpoint_avg.pt: attncomp eval (DTYPES,
#             default float32,bfloat16) beside its CTranslate2 export (CT2, default float16,bfloat16), beam 4
#   sweep     Table 3 in direction: `attncomp sweep specs/table3-small` on SWEEP_DATA (de-en, 4000 vocabulary:
#             .devdata/de-en-4k) for SWEEP_STEPS updates a row (5000), SWEEP_PARALLEL rows at once on the GPU (6),
#             validating every SWEEP_EVERY updates (500), BLEU on 300 validation sentences; beside it the
#             base row with seeds 2 and 3 (the seed band); under /tmp/sweep*, so that a call cut at SWEEP_LIMIT
#             (540 s) can run the stage again on the same warm machine and resume. Files: sweep.log,
#             sweep-results.{md,json} (the main sweep), sweep-seeds.md, sweep-valid.log (every row's
#             validations, to see whether perplexity levelled off)
#   train     `attncomp train specs/base.attn --gpus 1` on real de-en batches for TRAIN_MINUTES (default 1.5)
#   train-compile   the same with --compile (compiling takes minutes: give it TRAIN_MINUTES=5 TRAIN_LIMIT=330)
#   float8    bench/throughput.py, base then big (FLOAT8_SPECS), the float8 rows (issue 45 item 3): FLOAT8_CONFIGS
#             (default: attncomp + compile + float8, nn.Transformer + loss compiled + float8), each after its bf16
#             counterpart in the same run (the loss comparison's reference); each spec cut at FLOAT8_LIMIT seconds
#             (default 270; rows so far kept). Needs torchao (the float8 extra's wheel among the carried .whl)
#   real      bench/throughput.py --real-only: the runner's real batches, eager and compiled, one spec
#   updates   bench/compile_updates.py: each of the first compiled updates, which compiled and why, one spec
#   profile   bench/profile_step.py: the GPU kernels of each configuration's step (CONFIG, comma-separated;
#             default attncomp), SPEC; ROWS kernels (40); TRACE=1 also writes each trace
#   flex      bench/flex.py: FlexAttention against the explicit form in bf16 (error, ms) for each composition
#   variant   bench/variant.py: bench/variant.attn compiled by attncomp beside the same model written by hand
#             (bench/variant_reference.py, FlexAttention), both under torch.compile, VARIANT_CONFIGS (default: the
#             two compiled rows), cut at VARIANT_LIMIT seconds (300; rows so far kept in variant.json)
#   loss      bench/loss.py: the plain and the fused projection + loss alone, base and big widths
#   decode    `attncomp eval` of a bench/quality.py checkpoint on the de-en test set: BLEU and sentences/s
#
# On the GPU machine (PyTorch there, no pydantic/lark): carry the wheels and the prepared data that
# `bash bench/gpu_prepare.sh` makes here beforehand (.whl and .devdata; it prints the device call), then: pip install --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site:$PWD;
# ln -sfn ../cli attncomp/cli; ATTNCOMP="python3 -m attncomp.cli.main". Results: bench/results/ (h100-DATE/: logs).
#
# Inputs (environment): DATA, de-en prepared with a 37000 vocabulary (`attncomp data prepare ... --vocab-size
# 37000`); TEST_SRC, TEST_REF, the de-en test set as text (`zcat ../shared/data/de-en/test.en.gz >
# .devdata/de-en-test/test.en`, and .de); CKPT, SRC, REF for decode; ATTNCOMP, the command (default `attncomp`). Logs and JSON go to OUT.
set -u
[ $# -ge 2 ] || { echo "usage: bash bench/gpu_session.sh OUT STAGE...  (stages: see the head of this file)" >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
data=${DATA:-.devdata/de-en-37k}
attncomp=${ATTNCOMP:-attncomp}
minutes=${TRAIN_MINUTES:-1.5}
test_src=${TEST_SRC:-.devdata/de-en-test/test.en}
test_ref=${TEST_REF:-.devdata/de-en-test/test.de}
export PYTHONUNBUFFERED=1

train() {  # train NAME EXTRA-ARGS...
  local name=$1
  shift
  timeout -k 90 "${TRAIN_LIMIT:-300}" $attncomp train specs/base.attn --data "$data" --gpus 1 --out "/tmp/$name" \
    --time-limit "$minutes" --set train.checkpoint.every=250 --log-interval 10 "$@" 2>&1 | tr '\r' '\n' \
    | tee "$out/$name.log"
  cp "/tmp/$name/run.json" "$out/$name.run.json" 2>/dev/null
}

quality_wait() {  # quality_wait SECONDS: until bench/quality.py (started by the stage quality) ends, at most SECONDS
  local waited=0
  local pid
  pid=$(cat /tmp/quality/pid)
  while [ "$waited" -lt "$1" ] && kill -0 "$pid" 2> /dev/null; do sleep 10; waited=$((waited + 10)); done
  kill -0 "$pid" 2> /dev/null && echo "bench/quality.py still runs after $1 s"
  cp /tmp/quality/*.log "$out/" 2>/dev/null
  tail -5 /tmp/quality/*.log
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  case $stage in
    tests) timeout "${TESTS_LIMIT:-300}" python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tee "$out/tests.log" ;;
    eager) timeout 360 python3 bench/throughput.py --spec base --spec big --no-compile --data "$data" \
             --json "$out/eager.json" 2>&1 | tee "$out/eager.log" ;;
    compile) timeout "${COMPILE_LIMIT:-540}" python3 bench/throughput.py --spec "${SPEC:-base}" --data "$data" \
               --json "$out/compile-${SPEC:-base}.json" 2>&1 | tee "$out/compile-${SPEC:-base}.log" ;;
    table) for spec in base big; do
             timeout -k 20 "${TABLE_LIMIT:-250}" python3 bench/throughput.py --spec $spec \
               --configs "${CONFIGS:-attncomp + compile,nn.Transformer + loss compiled,attncomp,nn.Transformer,attncomp unfused,attncomp - fuse_qkv,attncomp - fused loss,attncomp - dense graph,naive,attncomp + compile + CUDA graphs,nn.Transformer + compile}" \
               --json "$out/throughput-$spec.json" 2>&1 | tee "$out/throughput-$spec.log"
           done ;;
    bar) for spec in base big; do
           configs_var=BAR_$spec warm_var=WARM_$spec limit_var=TABLE_LIMIT_$spec
           IFS=, read -ra configs <<< "${!configs_var}"
           for config in "${configs[@]:0:${!warm_var:-3}}"; do
             (timeout -k 10 "${WARM_LIMIT:-150}" python3 bench/throughput.py --spec $spec --configs "$config" \
                --steps 1 --warmup 1 2>&1 | sed "s/^/[$spec $config] /" >> "$out/warm.log") &
           done
           if [ $spec = base ] && [ -n "${WITH_TESTS:-}" ]; then
             (timeout "${TESTS_LIMIT:-150}" python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider \
                > "$out/tests.log" 2>&1; tail -3 "$out/tests.log") &
           fi
           wait
           echo "=== $spec compiled side by side $(date +%T)"
           timeout -k 20 "${!limit_var:-250}" python3 bench/throughput.py --spec $spec --configs "${!configs_var}" \
             --json "$out/throughput-$spec.json" 2>&1 | tee "$out/throughput-$spec.log"
         done ;;
    profile) IFS=, read -ra configs <<< "${CONFIG:-attncomp}"
             for config in "${configs[@]}"; do
               name=profile-${SPEC:-base}-$(echo "$config" | tr -c 'a-zA-Z0-9\n' '-')
               timeout 240 python3 bench/profile_step.py --spec "${SPEC:-base}" --config "$config" \
                 --rows "${ROWS:-40}" ${TRACE:+--trace "$out/$name.json.gz"} 2>&1 | tee "$out/$name.log"
             done ;;
    flex) timeout "${FLEX_LIMIT:-200}" python3 bench/flex.py --json "$out/flex.json" 2>&1 | tee "$out/flex.log" ;;
    variant) timeout -k 20 "${VARIANT_LIMIT:-300}" python3 bench/variant.py \
               --configs "${VARIANT_CONFIGS:-attncomp + compile,hand-written + compile}" \
               --json "$out/variant.json" 2>&1 | tee "$out/variant.log" ;;
    loss) for d in 512 1024; do
            timeout 120 python3 bench/loss.py --device cuda --tokens 25000 --d-model $d 2>&1 | tee "$out/loss-$d.log"
          done ;;
    float8) for spec in ${FLOAT8_SPECS:-base big}; do
              timeout -k 20 "${FLOAT8_LIMIT:-270}" python3 bench/throughput.py --spec "$spec" \
                --configs "${FLOAT8_CONFIGS:-attncomp + compile + float8,nn.Transformer + loss compiled + float8}" \
                --json "$out/float8-$spec.json" 2>&1 | tee "$out/float8-$spec.log"
            done ;;
    real) timeout "${REAL_LIMIT:-300}" python3 bench/throughput.py --spec "${SPEC:-base}" \
            --configs "attncomp + compile" --real-only --data "$data" --json "$out/real-${SPEC:-base}.json" 2>&1 \
            | tee "$out/real-${SPEC:-base}.log" ;;
    updates) TORCH_LOGS=recompiles timeout "${REAL_LIMIT:-300}" python3 bench/compile_updates.py \
               --spec "${SPEC:-base}" --data "$data" 2>&1 | tee "$out/updates-${SPEC:-base}.log" ;;
    quality) mkdir -p /tmp/quality
             setsid nohup python3 bench/quality.py --spec specs/base.attn --device cuda --compile \
               --minutes "${QUALITY_MINUTES:-10}" --only "${SIDE:-attncomp}" --set train.checkpoint.every=2min \
               --prepared "$data" --src "$test_src" --ref "$test_ref" --out /tmp/quality \
               > "/tmp/quality/${SIDE:-attncomp}.log" 2>&1 < /dev/null &
             echo $! > /tmp/quality/pid
             quality_wait "${QUALITY_WAIT:-540}" ;;
    quality-wait) quality_wait "${QUALITY_WAIT:-300}"
                  cp /tmp/quality/results.json "$out/quality-results.json" ;;
    gpu-decode) timeout "${DECODE_LIMIT:-300}" python3 bench/gpu_decode.py /tmp/quality/attncomp/checkpoint_avg.pt \
                  --src "$test_src" --ref "$test_ref" --dtypes "${DTYPES:-float32,bfloat16}" \
                  --ct2 "${CT2:-float16,bfloat16}" --json "$out/gpu-decode.json" 2>&1 | tee "$out/gpu-decode.log" ;;
    sweep) sweep_args=(--data "${SWEEP_DATA:-.devdata/de-en-4k}" --steps "${SWEEP_STEPS:-5000}" --bleu-sentences 300
                       --set "train.checkpoint.every=${SWEEP_EVERY:-500}")
           for seed in 2 3; do
             timeout -k 30 "${SWEEP_LIMIT:-540}" $attncomp sweep specs/table3-small/base.attn "${sweep_args[@]}" \
               --set train.seed=$seed --out /tmp/sweep-seed$seed > /tmp/sweep-seed$seed.log 2>&1 &
           done
           timeout -k 30 "${SWEEP_LIMIT:-540}" $attncomp sweep specs/table3-small "${sweep_args[@]}" \
             --parallel "${SWEEP_PARALLEL:-6}" --out /tmp/sweep 2>&1 | tee "$out/sweep.log"
           wait
           cp /tmp/sweep/results.md "$out/sweep-results.md"; cp /tmp/sweep/results.json "$out/sweep-results.json"
           for seed in 2 3; do echo "seed $seed"; cat /tmp/sweep-seed$seed/results.md; done > "$out/sweep-seeds.md"
           for log in /tmp/sweep*/rows/*/train.log; do
             grep -h "valid loss" "$log" | sed "s|^|$(basename "$(dirname "$(dirname "$(dirname "$log")")")")/$(basename "$(dirname "$log")") |"
           done > "$out/sweep-valid.log" ;;
    train) train train-base ;;
    train-compile) train train-base-compile --compile ;;
    decode) for tokens in 6000 24000; do
              timeout "${DECODE_LIMIT:-240}" $attncomp eval "$CKPT" --src "$SRC" --ref "$REF" --device cuda --json \
                --batch-tokens $tokens --output "$out/decode.hyp" 2>&1 | tee "$out/decode-$tokens.json"
            done ;;
    *) echo "unknown stage $stage (tests table bar float8 quality quality-wait gpu-decode sweep eager compile real updates profile flex variant loss train train-compile decode)" >&2 ;;
  esac
done
echo "=== done $(date +%T)"
