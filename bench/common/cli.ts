/**
 * The command line of a benchmark. Every benchmark module exports one entry,
 * `main(argv = process.argv.slice(2), cli = {})`, that parses its arguments with commander:
 * `--help` shows the options without running anything, unknown options are refused, `--json
 * [file]` writes the results as JSON to the file (or prints JSON instead of the table), and
 * `--quick` makes a small, fast run. `node dist/bench/<name>.js [args]` and `sinkflex bench
 * <name> [args]` both call it with exactly the arguments after the script or the name. The
 * settings let the CLI name the program (`sinkflex bench gym`) and let tests catch help and
 * errors instead of exiting the process.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

import { Command, type OutputConfiguration } from 'commander';

import { invokedDirectly } from './entry.js';

/** How a benchmark's command line runs (all optional). */
export interface BenchCliSettings {
  /** The program name in the usage line (default: the script, e.g. `node dist/bench/gym.js`). */
  name?: string;
  /** Where help and errors are written (default stdout and stderr). */
  output?: OutputConfiguration;
  /**
   * Throw commander's error (`code` `commander.helpDisplayed` after `--help`,
   * `commander.unknownOption`, …) instead of exiting the process.
   */
  exitOverride?: boolean;
}

/** A benchmark's entry: parses `argv` (the arguments after the script or the bench's name) and runs. */
export type BenchMain = (argv?: readonly string[], cli?: BenchCliSettings) => unknown;

/** The options every benchmark has. */
export interface CommonBenchOptions {
  /** `--json [file]`: a file name, or true for JSON on stdout instead of the table. */
  json?: string | true;
  /** `--quick`: a small, fast run. */
  quick?: true;
}

/**
 * A commander program for the benchmark `bench` (its module is `bench/<bench>.ts`), named and
 * wired as `settings` say, with the common `--quick` and `--json [file]` options.
 */
export function benchProgram(bench: string, description: string, settings: BenchCliSettings = {}): Command {
  const program = new Command(settings.name ?? `node dist/bench/${bench}.js`)
    .description(description)
    .allowExcessArguments(false);
  if (settings.output) program.configureOutput(settings.output);
  if (settings.exitOverride) program.exitOverride();
  return program
    .option('--quick', 'a small, fast run (the options it sets apply unless given)')
    .option('--json [file]', 'write the results as JSON to the file (or print JSON instead of the table)');
}

/**
 * Parses `argv` (the arguments after the script) and returns the options; with `--quick`,
 * every option of `quick` that the command line did not give takes its value from there.
 */
export function parseBench<T extends CommonBenchOptions>(
  program: Command,
  argv: readonly string[],
  quick: Partial<Record<keyof T, string | boolean>> = {},
): T {
  program.parse([...argv], { from: 'user' });
  const opts = program.opts<T>();
  if (opts.quick) {
    for (const [key, value] of Object.entries(quick)) {
      const source = program.getOptionValueSource(key);
      if (source === undefined || source === 'default') (opts as Record<string, unknown>)[key] = value;
    }
  }
  return opts;
}

/** The command line of a run, for the result files: the program name and the arguments. */
export function commandLine(program: Command, argv: readonly string[]): string {
  return [program.name(), ...argv].join(' ');
}

/** Where progress lines and the table go: nowhere when `--json` prints JSON on stdout, else `print`. */
export function tableLog(
  json: CommonBenchOptions['json'],
  print: (line: string) => void = (line) => console.log(line),
): (line: string) => void {
  return json === true ? () => undefined : print;
}

/** Writes `result` as `--json` asks: to the file (its folder created), or on stdout; nothing without it. */
export function writeJson(json: CommonBenchOptions['json'], result: unknown): void {
  if (json === undefined) return;
  const text = JSON.stringify(result, null, 2);
  if (json === true) {
    console.log(text);
    return;
  }
  mkdirSync(dirname(json), { recursive: true });
  writeFileSync(json, `${text}\n`);
}

/**
 * Runs `main` with the process arguments when `moduleUrl` (the caller's `import.meta.url`) is
 * the script node was started with; an error is printed as `<bench>: <message>` and sets exit
 * code 1.
 */
export function runWhenInvoked(moduleUrl: string, bench: string, main: BenchMain): void {
  if (!invokedDirectly(moduleUrl)) return;
  Promise.resolve()
    .then(() => main(process.argv.slice(2)))
    .catch((e: unknown) => {
      console.error(`${bench} bench: ${e instanceof Error ? e.message : String(e)}`);
      process.exitCode = 1;
    });
}
