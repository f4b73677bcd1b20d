/**
 * `sinkflex bench [name]`: the benchmarks. `memory` and `speed` are the side-by-side eager vs
 * fused comparisons (bench/memory.ts, bench/speed.ts); the layers' own benchmarks are exposed
 * under their names and take their own options (`sinkflex bench <name> --help` shows them). Without
 * a name it lists them. The layers' benchmark modules are loaded only when their command runs.
 */
import type { Command } from 'commander';

import type { BenchCliSettings } from '../../../bench/common/cli.js';
import { memoryCommand, memoryFromCli } from '../../../bench/memory.js';
import { speedCommand, speedFromCli } from '../../../bench/speed.js';

/** One benchmark the CLI exposes. */
export interface BenchEntry {
  name: string;
  description: string;
}

/** The benchmarks `sinkflex bench` lists, in order. */
export const BENCHES: readonly BenchEntry[] = [
  { name: 'memory', description: 'peak memory, eager vs fused: attention path and whole training step over sequence lengths, OOM marked (the paper\'s table)' },
  { name: 'speed', description: 'time, tokens/s and GFLOP/s, eager vs fused attention and training step, against the measured FMA peak' },
  { name: 'attention', description: 'sink attention CPU kernels: memory and speed at the gpt-oss-20b shape (bench/attention.ts)' },
  { name: 'attention-gpu', description: 'sink attention CUDA kernels (and PyTorch when present) (bench/attention-gpu.ts)' },
  { name: 'model-train', description: 'built-in transformer: training and sampling tokens/s, step memory (bench/model-train.ts)' },
  { name: 'pretrained', description: 'pretrained model (random, Qwen3-0.6B-shaped): memory after load, forward and sampling tokens/s, MXFP4 factor (bench/pretrained.ts)' },
  { name: 'grpo', description: 'GRPO advantages and policy loss kernels (bench/grpo.ts)' },
  { name: 'rollout', description: 'agent-loop rollouts through the tau envs (bench/rollout.ts)' },
  { name: 'gym', description: 'Gymnasium env step rates, sync and async vector envs (bench/gym.ts)' },
  { name: 'tau', description: 'tau retail world: reset, grading, expert episodes (bench/tau.ts)' },
  { name: 'tau-telecom', description: 'tau telecom world (bench/tau-telecom.ts)' },
];

/**
 * Runs the layer benchmark `name` with the arguments given after its name: each parses them
 * itself (its `main`), so `--help` shows its options and runs nothing, and unknown options are
 * refused. `settings` name the program in the usage line and, in tests, catch help and errors
 * instead of exiting. The benchmark's module is loaded only here.
 */
export async function runBench(name: string, args: readonly string[], settings: BenchCliSettings = {}): Promise<void> {
  const cli: BenchCliSettings = { name: `sinkflex bench ${name}`, ...settings };
  switch (name) {
    case 'attention':
      return (await import('../../../bench/attention.js')).main(['node', name, ...args], cli);
    case 'attention-gpu':
      return (await import('../../../bench/attention-gpu.js')).main(['node', name, ...args], cli);
    case 'model-train':
      await (await import('../../../bench/model-train.js')).main(args, cli);
      return;
    case 'pretrained':
      await (await import('../../../bench/pretrained.js')).main(args, cli);
      return;
    case 'grpo':
      (await import('../../../bench/grpo.js')).main(args, cli);
      return;
    case 'rollout':
      await (await import('../../../bench/rollout.js')).main(args, cli);
      return;
    case 'gym':
      await (await import('../../../bench/gym.js')).main(args, cli);
      return;
    case 'tau':
      (await import('../../../bench/tau.js')).main(args, cli);
      return;
    case 'tau-telecom':
      (await import('../../../bench/tau-telecom.js')).main(args, cli);
      return;
    default:
      throw new RangeError(`unknown benchmark '${name}' (known: ${BENCHES.map((b) => b.name).join(', ')})`);
  }
}

/** Registers `sinkflex bench` and its subcommands on `program`. */
export function registerBench(program: Command): void {
  const bench = program
    .command('bench')
    .description("benchmarks: eager vs fused memory and speed, and each layer's own (run without a name to list them)")
    .action(() => {
      console.log('benchmarks (sinkflex bench <name> --help for the options):');
      for (const b of BENCHES) console.log(`  ${b.name.padEnd(13)} ${b.description}`);
    });
  const memory = memoryCommand(bench.command('memory'));
  memory.action(async () => {
    await memoryFromCli(memory.opts<Record<string, string | undefined>>(), `sinkflex ${process.argv.slice(2).join(' ')}`);
  });
  const speed = speedCommand(bench.command('speed'));
  speed.action(async () => {
    await speedFromCli(speed.opts<Record<string, string | undefined>>(), `sinkflex ${process.argv.slice(2).join(' ')}`);
  });
  for (const b of BENCHES.slice(2)) {
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
