/**
 * `sinkflex bench [name]`: the benchmarks of bench/. Every one has one entry, the `main` of its
 * module, which parses the arguments given after its name (`sinkflex bench <name> --help` shows
 * its options; `--quick` and `--json [file]` are common to all). Without a name it lists them.
 * A benchmark's module is loaded only when its command runs: no other command (`sinkflex
 * train`, …) loads benchmark code.
 */
import type { Command } from 'commander';

import type { BenchCliSettings, BenchMain } from '../../../bench/common/cli.js';

/** One benchmark the CLI exposes. */
export interface BenchEntry {
  name: string;
  description: string;
}

/** The benchmarks `sinkflex bench` lists, in order, and how each module is loaded (on demand). */
const ENTRIES: readonly (BenchEntry & { load: () => Promise<{ main: BenchMain }> })[] = [
  {
    name: 'memory',
    description:
      "peak memory, eager vs fused: attention path and whole training step over sequence lengths, OOM marked (the paper's table)",
    load: () => import('../../../bench/memory.js'),
  },
  {
    name: 'speed',
    description:
      'time, tokens/s and GFLOP/s, eager vs fused attention and training step, against the measured FMA peak',
    load: () => import('../../../bench/speed.js'),
  },
  {
    name: 'attention',
    description: 'sink attention CPU kernels: memory and speed at the gpt-oss-20b shape (bench/attention.ts)',
    load: () => import('../../../bench/attention.js'),
  },
  {
    name: 'attention-gpu',
    description: 'sink attention CUDA kernels (and PyTorch when present) (bench/attention-gpu.ts)',
    load: () => import('../../../bench/attention-gpu.js'),
  },
  {
    name: 'gemm-gpu',
    description:
      'CUDA GEMM TFLOP/s against the device peak: 4096^3 and the gpt-oss-20b layer shapes, float32 and tensor-core kernels (bench/gemm-gpu.ts)',
    load: () => import('../../../bench/gemm-gpu.js'),
  },
  {
    name: 'model-train',
    description: 'built-in transformer: training and sampling tokens/s, step memory (bench/model-train.ts)',
    load: () => import('../../../bench/model-train.js'),
  },
  {
    name: 'train-step',
    description:
      "the default run's SFT step and GRPO micro-batch on the CPU, addon variants side by side (bench/train-step.ts)",
    load: () => import('../../../bench/train-step.js'),
  },
  {
    name: 'gpt-oss-20b',
    description:
      'gpt-oss-20b at its real shape (random MXFP4 checkpoint, ~13.8 GB): load, log-probs, LoRA SFT and GRPO steps on the CPU, memory plan for the CPU and one GPU (bench/gpt-oss-20b.ts)',
    load: () => import('../../../bench/gpt-oss-20b.js'),
  },
  {
    name: 'pretrained',
    description:
      'a Hugging Face-shaped model (Qwen3-0.6B shape): memory after load vs checkpoint bytes, forward and sampling tokens/s (bench/pretrained.ts)',
    load: () => import('../../../bench/pretrained.js'),
  },
  {
    name: 'concurrency',
    description:
      'batched sampling of N seeded sessions vs the same N one by one: wall and CPU time, ratio, same tokens (bench/concurrency.ts)',
    load: () => import('../../../bench/concurrency.js'),
  },
  {
    name: 'model-ops',
    description: 'model ops: GEMM GFLOP/s vs a naive loop and the FMA peak, a tiny training step (bench/model-ops.ts)',
    load: () => import('../../../bench/model-ops.js'),
  },
  {
    name: 'transformer-gpu',
    description: 'built-in transformer on the GPU vs the CPU: train step and sampling (bench/transformer-gpu.ts)',
    load: () => import('../../../bench/transformer-gpu.js'),
  },
  {
    name: 'grpo',
    description: 'GRPO advantages and policy loss kernels (bench/grpo.ts)',
    load: () => import('../../../bench/grpo.js'),
  },
  {
    name: 'gpu-kernels',
    description: 'GRPO kernels and a model-op step on the GPU vs the CPU (bench/gpu-kernels.ts)',
    load: () => import('../../../bench/gpu-kernels.js'),
  },
  {
    name: 'rollout',
    description: 'agent-loop rollouts through the tau envs (bench/rollout.ts)',
    load: () => import('../../../bench/rollout.js'),
  },
  {
    name: 'gym',
    description: 'Gymnasium env step rates, sync and async vector envs (bench/gym.ts)',
    load: () => import('../../../bench/gym.js'),
  },
  {
    name: 'tau',
    description: 'tau retail world: reset, grading, expert episodes (bench/tau.ts)',
    load: () => import('../../../bench/tau.js'),
  },
  {
    name: 'tau-telecom',
    description: 'tau telecom world (bench/tau-telecom.ts)',
    load: () => import('../../../bench/tau-telecom.js'),
  },
];

/** The benchmarks `sinkflex bench` lists, in order. */
export const BENCHES: readonly BenchEntry[] = ENTRIES.map(({ name, description }) => ({ name, description }));

/**
 * Runs the benchmark `name` with the arguments given after its name: it parses them itself (its
 * `main`), so `--help` shows its options and runs nothing, and unknown options are refused.
 * `settings` name the program in the usage line and, in tests, catch help and errors instead
 * of exiting. The benchmark's module is loaded only here.
 */
export async function runBench(name: string, args: readonly string[], settings: BenchCliSettings = {}): Promise<void> {
  const entry = ENTRIES.find((e) => e.name === name);
  if (!entry) throw new RangeError(`unknown benchmark '${name}' (known: ${BENCHES.map((b) => b.name).join(', ')})`);
  const { main } = await entry.load();
  await main(args, { name: `sinkflex bench ${name}`, ...settings });
}

/** Registers `sinkflex bench` and its subcommands on `program`. */
export function registerBench(program: Command): void {
  const bench = program
    .command('bench')
    .description("benchmarks: eager vs fused memory and speed, and each layer's own (run without a name to list them)")
    .action(() => {
      console.log('benchmarks (sinkflex bench <name> --help for the options; all take --quick and --json [file]):');
      for (const b of BENCHES) console.log(`  ${b.name.padEnd(15)} ${b.description}`);
    });
  for (const b of BENCHES) {
    bench
      .command(b.name)
      .description(b.description)
      .helpOption(false)
      .allowUnknownOption()
      .allowExcessArguments()
      .argument('[args...]', 'options passed to the benchmark')
      .action(async (args: string[]) => runBench(b.name, args));
  }
}
