#!/usr/bin/env bash
# One GPU check, sized for about 5 minutes on a machine with an NVIDIA GPU (e.g. one H200 with
# PyTorch and 16 cores): build the CUDA addon for this GPU's architecture, run the GPU tests
# (every CUDA function against the CPU kernels: attention, GRPO, model ops with float32 and
# bfloat16 weights, the MoE layer, the transformer training and sampling on the GPU for the
# built-in model and the Qwen3/gpt-oss/Llama-shaped configs), print the GPU timings of the GRPO kernels and of one
# model-op training step, one line timing a policy train step and a sampling run of the
# built-in transformer on the GPU vs the CPU, the pretrained-model benchmark (a random
# Qwen3-0.6B-shaped checkpoint with --device auto: on the GPU where the CUDA transformer runs
# its architecture, else on this machine's CPU with the reason printed), run the GPU attention
# benchmark at the gpt-oss-20b layer shape (eager vs fused peak memory and time, PyTorch
# FlexAttention/SDPA when `python3 -c 'import torch'` works) and print its Markdown table; print
# TFLOP/s against the device's dense bf16 peak (worked out at run time: SMs x max SM clock x the
# per-SM rate) of the GEMMs at 4096^3 and the gpt-oss-20b layer shapes (the float32 kernel and the
# bf16 tensor-core kernel of matmulPrecision 'medium', bench/gemm-gpu.ts) and of the attention
# benchmark's forward and backward rows, ours and PyTorch's.
# Results and logs go to $OUT when it is set (else bench/results/). Without a GPU it says so
# and exits 0.
#
#   bench/gpu-check.sh                  # everything
#   SEQS=1024,4096 bench/gpu-check.sh   # fewer sequence lengths
# Environment: SEQS (benchmark lengths), BUDGET (seconds for our timed points, default 90),
# TORCH_BUDGET (seconds for PyTorch, default 75), GEMM_TOKENS (tokens of the layer shapes, default 4096), NODE (node binary), SKIP_BUILD=1, SKIP_TESTS=1,
# STAGES (which parts run, in this order; default tests,kernels,transformer,pretrained,gemm,attention),
# TEST_TIMEOUT (seconds per test file when the tests were compiled into dist/test, default 300),
# GPU_TESTS (the test files to run, space-separated; default: every file with CUDA parts),
# GPU_TESTS_SKIP (files to leave out of that list).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/results}"
mkdir -p "$out"
node="${NODE:-node}"
say() { echo "gpu-check: $*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  say "no NVIDIA GPU here (nvidia-smi missing or sees no device): nothing to check"
  echo "no GPU" >"$out/gpu-check.txt"
  exit 0
fi
gpu="$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | head -1)"
say "GPU: $gpu"
if ! command -v "$node" >/dev/null 2>&1; then
  say "Node.js (>= 20) is needed but '$node' was not found; set NODE=/path/to/node"
  exit 1
fi
start=$(date +%s)
status=0

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -x node_modules/.bin/tsc ] || [ ! -d node_modules/cmake-js ]; then
    say "npm ci --ignore-scripts"
    npm ci --ignore-scripts >"$out/npm-ci.log" 2>&1 || { say "npm ci failed (see $out/npm-ci.log; no network? carry node_modules)"; exit 1; }
  fi
  say "npm run build:ts"
  npm run build:ts >"$out/build-ts.log" 2>&1 || { say "TypeScript build failed (see $out/build-ts.log)"; exit 1; }
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
  say "npm run build:cuda (sm_${cap:-90} only)"
  npm run build:cuda -- "--CDSINKFLEX_CUDA_ARCHITECTURES=${cap:-90}" >"$out/build-cuda.log" 2>&1 \
    || { say "CUDA build failed (see $out/build-cuda.log)"; tail -30 "$out/build-cuda.log"; exit 1; }
  say "built in $(( $(date +%s) - start )) s"
fi

"$node" -e "
Promise.all([import('./dist/lib/native/index.js'), import('./dist/lib/attention/index.js'), import('./dist/lib/native/loader.js')]).then(([m, attention, loader]) => {
  const i = attention.attentionInfo(), a = loader.loadAddon(), st = a.cudaStatus();
  console.log('gpu-check: addon', m.buildInfo().version, 'cudaCompiled', m.buildInfo().cudaCompiled, 'cudaKernels', i.cudaKernels,
    'grpo', a.grpoDevices().join('/'), 'model ops', a.modelOpsDevices().join('/'), 'devices', st.devices, st.reason);
  if (!i.cudaKernels || st.devices < 1) process.exit(3);
});" || { say "the addon sees no usable GPU (see the line above)"; exit 1; }

# the tensor-core kernels' tests first (a time-boxed stage reaches them); GPU_TESTS (space-separated)
# replaces the list, GPU_TESTS_SKIP leaves files out (e.g. those whose fixtures are missing)
gpu_tests=(test/model/cuda-gemm-tc.test.ts test/model/cuda-gemm-tc-f16.test.ts test/attention/cuda-tensor-cores.test.ts
  test/attention/cuda-tensor-cores-f16.test.ts test/attention/cuda.test.ts test/model/cuda-ops.test.ts test/model/cuda-moe.test.ts
  test/model/transformer-cuda.test.ts test/model/lora-cuda.test.ts test/grpo/cuda.test.ts test/native/device-tensor.test.ts
  test/model/transformer-cuda-architectures.test.ts test/model/bench-transformer-gpu.test.ts
  test/model/hf/pretrained-api.test.ts)
[ -n "${GPU_TESTS:-}" ] && read -r -a gpu_tests <<<"$GPU_TESTS"
for skip in ${GPU_TESTS_SKIP:-}; do
  for i in "${!gpu_tests[@]}"; do [ "${gpu_tests[$i]}" = "$skip" ] && unset 'gpu_tests[i]'; done
done

stage_tests() {
  say "GPU tests"
  local t0 failed=0 f js
  t0=$(date +%s)
  : >"$out/gpu-tests.log"
  if [ -d dist/test ]; then
    # tests compiled ahead (`tsc` over test/ into dist/test): plain node runs each, no TypeScript
    # loader needed (a machine without network and with only tap's runtime packages)
    for f in "${gpu_tests[@]}"; do
      js="dist/${f%.ts}.js"
      if [ ! -f "$js" ]; then echo "# $f: not compiled, skipped" >>"$out/gpu-tests.log"; continue; fi
      echo "# file $f" >>"$out/gpu-tests.log"
      timeout "${TEST_TIMEOUT:-300}" "$node" "$js" >>"$out/gpu-tests.log" 2>&1 || { failed=1; say "FAILED: $f"; }
    done
  else
    npx tap --disable-coverage -R tap "${gpu_tests[@]}" >"$out/gpu-tests.log" 2>&1 || failed=1
  fi
  if [ "$failed" = 0 ]; then
    say "GPU tests passed in $(( $(date +%s) - t0 )) s: $(grep -cE '^ *ok ' "$out/gpu-tests.log") ok lines"
  else
    status=1
    say "GPU tests FAILED in $(( $(date +%s) - t0 )) s (see $out/gpu-tests.log):"
    grep -E "not ok|^# \{" "$out/gpu-tests.log" | head -40
  fi
}

stage_kernels() {
  say "GPU timings of the GRPO kernels and a model-op step (CPU side by side)"
  timeout 90 "$node" dist/bench/gpu-kernels.js --json "$out/gpu-kernels.json" 2>&1 | tee "$out/gpu-kernels.log" || status=1
}

stage_transformer() {
  say "the built-in transformer on the GPU vs the CPU (policy train step + sampling run)"
  timeout 240 "$node" dist/bench/transformer-gpu.js --json "$out/transformer-gpu.json" 2>&1 | tee "$out/transformer-gpu.log" || status=1
}

stage_pretrained() {
  say "pretrained model benchmark (--device auto)"
  timeout 300 "$node" dist/bench/pretrained.js --device auto --json "$out/pretrained.json" 2>&1 | tee "$out/pretrained.log" || status=1
}

stage_gemm() {
  say "GEMM TFLOP/s against the dense bf16 peak (4096^3 and the gpt-oss-20b layer shapes; float32 and tensor-core kernels)"
  timeout 240 "$node" dist/bench/gemm-gpu.js --tokens "${GEMM_TOKENS:-4096}" --json "$out/gemm-gpu.json" 2>&1 | tee "$out/gemm-gpu.log" || status=1
  if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    say "PyTorch (cuBLAS) bf16 and float32 matmul at 4096^3, side by side"
    timeout 60 python3 - <<'PY' 2>&1 | tee -a "$out/gemm-gpu.log"
import torch
n = 4096
for dtype, tf32 in ((torch.bfloat16, False), (torch.float32, False), (torch.float32, True)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        a @ b
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    name = str(dtype).replace("torch.", "") + (" (tf32)" if tf32 else "")
    print(f"torch matmul {name} {n}^3: {ms:.3f} ms, {2 * n**3 / ms / 1e9:.1f} TFLOP/s")
PY
  fi
}

stage_attention() {
  say "GPU attention benchmark"
  "$node" dist/bench/attention-gpu.js --seqs "${SEQS:-1024,2048,4096,8192,16384,32768}" --budget "${BUDGET:-90}" \
    --torch-budget "${TORCH_BUDGET:-75}" --json "$out/attention-gpu.json" --markdown "$out/attention-gpu.md" \
    2>&1 | tee "$out/attention-gpu.log" || status=1
  if [ -s "$out/attention-gpu.json" ]; then
    say "attention TFLOP/s against the dense bf16 peak (ours and PyTorch's, from the benchmark above)"
    timeout 60 "$node" dist/bench/gemm-gpu.js --only-attention --attention "$out/attention-gpu.json" \
      --json "$out/attention-tflops.json" 2>&1 | grep -E "peak|attention gpu" | tee "$out/attention-tflops.log" || status=1
  fi
}

stages="${STAGES:-tests,kernels,transformer,pretrained,gemm,attention}"
[ "${SKIP_TESTS:-0}" = 1 ] && stages="${stages//tests/}"
for stage in ${stages//,/ }; do
  case "$stage" in
    tests | kernels | transformer | pretrained | gemm | attention) "stage_$stage" ;;
    *) say "unknown stage '$stage' (STAGES lists tests, kernels, transformer, pretrained, gemm, attention)"; status=1 ;;
  esac
done
say "done in $(( $(date +%s) - start )) s (exit $status); results in $out"
exit $status
