/**
 * How a benchmark module knows it is the script node was started with (`node dist/bench/x.js`)
 * rather than a module imported by the CLI or a test. Node imports only, so that any benchmark
 * can use it without loading more.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/**
 * True when `moduleUrl` (the caller's `import.meta.url`) is the script node runs, with symlinks
 * resolved (as node resolves the main module).
 */
export function invokedDirectly(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined || script === '') return false;
  try {
    return moduleUrl === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false; // the script path does not exist (e.g. `node -e`)
  }
}
