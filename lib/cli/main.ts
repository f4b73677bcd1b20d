#!/usr/bin/env node
/**
 * The `sinkflex` command line. Each command lives in its own module under lib/cli/ and
 * registers itself on the program built here.
 */
import { Command } from 'commander';

import { backends, buildInfo, version } from '../native/index.js';
import { registerBench } from './commands/bench.js';
import { registerEval } from './commands/eval.js';
import { registerServe } from './commands/serve.js';
import { registerEnv } from './commands/env.js';
import { registerTrain } from './commands/train.js';

/** Builds the `sinkflex` program with every command registered. */
export function buildProgram(): Command {
  const program = new Command('sinkflex')
    .description('RL training of tool-use agents: tau2-style worlds, GRPO and sink-aware attention')
    .version(version());

  program
    .command('info')
    .description('print the version, the native build and the compute backends')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) => {
      const info = { version: version(), build: buildInfo(), backends: backends() };
      if (opts.json) {
        console.log(JSON.stringify(info, null, 2));
        return;
      }
      console.log(
        `sinkflex-rl ${info.version} (N-API ${info.build.napiVersion}, ${info.build.compiler}, CUDA kernels ${info.build.cudaCompiled ? 'built in' : 'not built'})`,
      );
      for (const b of info.backends) {
        if (b.name === 'cpu')
          console.log(`  cpu      ${b.threads} threads, features: ${b.features.join(', ') || 'none'}`);
        else
          console.log(
            `  ${b.device}   ${b.deviceName}, ${(b.totalMemory / 2 ** 30).toFixed(1)} GiB, sm_${b.computeCapability.replace('.', '')}`,
          );
      }
    });
  registerBench(program);
  registerServe(program);
  registerEval(program);
  registerTrain(program);
  registerEnv(program);
  return program;
}

/** Runs the CLI with `argv` (defaults to the process arguments). */
export async function main(argv: string[] = process.argv): Promise<void> {
  await buildProgram().parseAsync(argv);
}

const invokedDirectly =
  process.argv[1] !== undefined &&
  import.meta.url ===
    (await import('node:url')).pathToFileURL((await import('node:fs')).realpathSync(process.argv[1])).href;
if (invokedDirectly) {
  main().catch((e: unknown) => {
    console.error(`sinkflex: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 1;
  });
}
