#!/usr/bin/env bash
# What a GPU session carries to the device machine, made here on the CPU before the machine starts (no device
# time is spent on it), then the device call that carries it:
#
#   bash bench/gpu_prepare.sh          # .whl/ and .devdata/; what is already there is kept
#
# .whl/      the wheels the GPU machine lacks, for its python 3.12, each at the version installed here
#            (/work/.library/device/KINDS.md lists what its image holds: torch, jinja2, sentencepiece, sacrebleu,
#            tensorboard, matplotlib, transformers, tokenizers, pytest-xdist... but not pydantic, lark or torchao),
#            and typing-extensions, of which pydantic 2.13 needs a newer one than an image may hold
# .devdata/  de-en-37k   DATA of bench/gpu_session.sh: ../shared/data/de-en train + phrases, valid and test,
#                        one shared vocabulary of 37,000 (the paper's base)
#            de-en-4k    SWEEP_DATA: the same training pairs, a vocabulary of 4,000, validated on the first 300
#                        valid pairs (docs/results.md's Table 3 sweep on the CPU)
#            de-en-test  test.en, test.de: TEST_SRC and TEST_REF, the test set as text
#
# Both are ignored by git, so the device call names them in `carry` (64 MiB in all, checked below).
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED_DATA:-../shared/data/de-en}
python=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}  # one with attncomp
attncomp=(${ATTNCOMP:-$python -m attncomp.cli.main})
[ -f "$shared/train.en.gz" ] || { echo "gpu_prepare: no de-en corpus at $shared (set SHARED_DATA)" >&2; exit 2; }

version() { "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

mkdir -p .whl
for name in pydantic pydantic-core annotated-types typing-inspection typing-extensions lark torchao; do
  pinned="$name==$(version "$name")"
  if ls .whl | grep -qi "^$(echo "$name" | tr - _)-$(version "$name")-"; then continue; fi
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$pinned"
done
echo "wheels: $(ls .whl | tr '\n' ' ')"

if [ ! -f .devdata/de-en-37k/manifest.json ]; then
  "${attncomp[@]}" data prepare --train "$shared/train" "$shared/phrases" --valid "$shared/valid" \
    --test "$shared/test" --src en --tgt de --vocab-size 37000 --out .devdata/de-en-37k --force
fi
if [ ! -f .devdata/de-en-4k/manifest.json ]; then
  mkdir -p .devdata/valid300
  for lang in en de; do zcat "$shared/valid.$lang.gz" | head -300 > ".devdata/valid300/valid.$lang"; done
  "${attncomp[@]}" data prepare --train "$shared/train" "$shared/phrases" --valid .devdata/valid300/valid \
    --src en --tgt de --vocab-size 4000 --out .devdata/de-en-4k --force
  rm -r .devdata/valid300
fi
mkdir -p .devdata/de-en-test
for lang in en de; do zcat "$shared/test.$lang.gz" > ".devdata/de-en-test/test.$lang"; done

size=$(du -sbc .whl .devdata | tail -1 | cut -f1)
echo "carry: .whl and .devdata, $((size / 1048576)) MiB of the 64 MiB a call carries (the tracked tree comes too)"
[ "$size" -lt $((56 * 1048576)) ] || { echo "gpu_prepare: over 56 MiB: leave a data set out" >&2; exit 1; }
cat <<'EOF'
The device call (run tool): carry [".whl", ".devdata"], and a command that starts
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD && ln -sfn ../cli attncomp/cli || exit
  ATTNCOMP="python3 -m attncomp.cli.main" bash bench/gpu_session.sh $OUT tests float8 variant 2>&1 | tee $OUT/session.log
EOF
