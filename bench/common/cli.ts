/**
 * The command line of a benchmark. Every benchmark module exports a `main` that parses its
 * arguments with commander: `--help` shows the options without running anything, unknown
 * options are refused, and `sinkflex bench <name> [args]` hands it exactly the arguments after
 * the name. The settings let the CLI name the program (`sinkflex bench gym`) and let tests
 * catch help and errors instead of exiting the process.
 */
import { Command, type OutputConfiguration } from 'commander';

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

/** A commander program for a benchmark, named and wired as `settings` say. */
export function benchProgram(defaultName: string, description: string, settings: BenchCliSettings = {}): Command {
  const program = new Command(settings.name ?? defaultName).description(description).allowExcessArguments(false);
  if (settings.output) program.configureOutput(settings.output);
  if (settings.exitOverride) program.exitOverride();
  return program;
}
