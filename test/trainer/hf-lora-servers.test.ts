// Issue 19, "Rollouts on a serving engine" end to end: the smoke preset with LoRA on a tiny random
// Qwen3 checkpoint (the real Qwen3 tokenizer and template), its rollouts and validations on two
// `sinkflex serve --model-dir` child processes (the CLI as users run it), which load each step's
// adapter through POST /v1/load_lora_adapter and sample from base + adapter. What it shows:
// - every metric equals the in-process run's (timings aside): the servers sample exactly what the
//   trainer's own policy samples, and `rollout/logprob_abs_diff` is logged and small;
// - each policy (after SFT, after each GRPO step) was loaded into both servers under its own
//   name and the previous one unloaded (the servers' logs), and the next requests named it;
// - one server killed (SIGKILL) during a rollout: the run finishes on the other, the failed
//   requests retried there and counted, the dead server out of routing.
// The servers run dist/lib/cli/main.js when it was built from the current sources (npx tsc -p
// tsconfig.json), else lib/cli/main.ts through this test's own TypeScript loader.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import t, { type Test } from 'tap';

import { resolveConfig, train, type MetricsRow, type TrainConfig } from '../../lib/trainer/index.js';
import { writeTinyCheckpoint } from '../model/hf/fixtures/tiny-checkpoint.js';
import { sameMetrics } from './fixtures/same-metrics.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'sinkflex-hf-servers-'));
const base = join(tmp, 'qwen3-tiny');
writeTinyCheckpoint(base, { family: 'qwen3', tokenizer: 'qwen3' });

/** Every `.ts` file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** How to run the CLI: dist's build when every lib/ source is older than its output, else the sources. */
function cliArgs(): { argv: string[]; via: string } {
  const stale = sources(join(root, 'lib')).filter((f) => {
    const js = join(root, 'dist', relative(root, f).replace(/\.ts$/, '.js'));
    return !existsSync(js) || statSync(js).mtimeMs < statSync(f).mtimeMs;
  });
  if (stale.length === 0) return { argv: [join(root, 'dist/lib/cli/main.js')], via: 'dist/lib/cli/main.js' };
  return {
    argv: [...process.execArgv, join(root, 'lib/cli/main.ts')],
    via: `lib/cli/main.ts (dist is missing or older than ${relative(root, stale[0])})`,
  };
}

/** A `sinkflex serve --model-dir` child process. */
interface ServeProcess {
  baseURL: string;
  child: ChildProcess;
  /** Its stderr lines so far (the request and admin log). */
  log: string[];
  /** Called with each new stderr line. */
  onLine: ((line: string) => void) | null;
  /** Resolves when it has exited. */
  exited: Promise<void>;
}

const cli = cliArgs();
t.comment(`the servers run ${cli.via}`);
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  await Promise.all(
    children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)),
  );
  rmSync(tmp, { recursive: true, force: true });
});

async function startServe(): Promise<ServeProcess> {
  // an IPC channel: the server exits when this test process goes away, however it ends
  const child = spawn(
    process.execPath,
    [
      '--import',
      'data:text/javascript,process.on("disconnect",()=>process.exit(0))',
      ...cli.argv,
      'serve',
      '--model-dir',
      base,
      '--port',
      '0',
      '--model-name',
      'tiny',
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    },
  );
  children.push(child);
  const p: ServeProcess = {
    baseURL: '',
    child,
    log: [],
    onLine: null,
    exited: new Promise((r) => child.once('exit', () => r())),
  };
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    const lines = err.split('\n');
    err = lines.pop()!;
    for (const l of lines) {
      p.log.push(l);
      p.onLine?.(l);
    }
  });
  let out = '';
  p.baseURL = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = / at (http:\/\/[^\s;]+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) =>
      reject(new Error(`sinkflex serve exited (${String(code)}) before listening: ${out} ${p.log.join('\n')}${err}`)),
    );
  });
  return p;
}

function readRows(out: string): MetricsRow[] {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as MetricsRow);
}

/** The smoke preset with LoRA on the tiny checkpoint (short sequences keep the 151,936-entry LM head cheap). */
function hfConfig(rollout: Partial<TrainConfig['rollout']> = {}): TrainConfig {
  return resolveConfig({
    preset: 'smoke',
    patches: [
      {
        model: {
          source: `hf:${base}`,
          context: 512,
          lora: { rank: 8, alpha: 16, targets: 'all-linear', rslora: false },
        },
        rollout: { maxContextTokens: 512, ...rollout },
        sft: { tokensPerStep: 512, lr: 1e-2 },
        grpo: { microBatchTokens: 512 },
      },
    ],
  });
}

/** The admin lines of a server's log: `load <name>` / `unload <name>` (each must have answered 200). */
function adminCalls(t: Test, log: readonly string[]): string[] {
  const calls: string[] = [];
  for (const l of log) {
    const m = /^\S+ (load_lora_adapter|unload_lora_adapter) "([^"]+)"(?: "[^"]*")? (\d+) /.exec(l);
    if (!m) continue;
    if (m[3] !== '200') t.fail(`the server answered ${m[3]}: ${l}`);
    calls.push(`${m[1] === 'load_lora_adapter' ? 'load' : 'unload'} ${m[2]}`);
  }
  return calls;
}

const local = join(tmp, 'local');
let localRows: MetricsRow[] = [];
let servers: ServeProcess[] = [];
const timings: string[] = [];

t.before(async () => {
  // the servers start while the in-process run trains
  const starting = Promise.all([startServe(), startServe()]);
  const t0 = performance.now();
  await train(hfConfig(), { out: local });
  timings.push(`in process: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  localRows = readRows(local);
  servers = await starting;
});

t.test(
  'rollouts on two sinkflex serve --model-dir processes: the in-process run’s metrics; an adapter per step loaded into both, the old one unloaded',
  async (t) => {
    const out = join(tmp, 'remote');
    const warnings: string[] = [];
    const config = hfConfig({
      engine: 'openai',
      servers: servers.map((s) => s.baseURL),
      sessions: true,
      timeoutS: 60,
      retries: 3,
    });
    const t0 = performance.now();
    const r = await train(config, { out, onEvent: (e) => e.kind === 'warning' && warnings.push(e.message) });
    timings.push(`on two servers: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    t.equal(r.step, config.grpo.steps, 'the run finished');
    t.same(warnings, [], 'no warnings');
    const rows = readRows(out);
    sameMetrics(t, localRows, rows, 'rollouts and validations on the servers');
    const grpo = rows.filter((x) => x.phase === 'grpo');
    t.equal(grpo.length, config.grpo.steps, 'a row per GRPO step');
    const diffs = grpo.map((x) => x['rollout/logprob_abs_diff']);
    t.ok(
      diffs.every((d) => typeof d === 'number' && d <= 1e-4),
      `rollout/logprob_abs_diff (the servers' log-probs against the trainer's recomputed ones) logged and ≤ 1e-4: ${diffs.join(', ')}`,
    );
    t.ok(
      grpo.every(
        (x) =>
          (x['rollout/remote_requests'] as number) > 0 &&
          x['rollout/remote_failures'] === 0 &&
          x['rollout/servers_up'] === 2,
      ),
      'every step sampled on the servers, no request failed, both servers up',
    );
    t.comment(`rollout/logprob_abs_diff per step: ${diffs.join(', ')}`);

    // each server loaded the adapter of every policy (after SFT: step 0, after each GRPO step)
    // under its own name and unloaded the one before once the new one was in
    const names = Array.from({ length: config.grpo.steps + 1 }, (_, k) => `remote-step-${k}`);
    const expected = names.flatMap((n, k) => (k === 0 ? [`load ${n}`] : [`load ${n}`, `unload ${names[k - 1]}`]));
    for (const s of servers) t.same(adminCalls(t, s.log), expected, `${s.baseURL}: ${expected.join(', ')}`);
    for (const s of servers) {
      const models = (await (await fetch(`${s.baseURL}/models`)).json()) as {
        data: { id: string; parent: string | null; root: string }[];
      };
      t.same(
        models.data.map((m) => [m.id, m.parent, m.root]),
        [
          ['tiny', null, 'tiny'],
          [names[names.length - 1], 'tiny', join(out, 'adapters', `step-${config.grpo.steps}`)],
        ],
        'the models list: the base and the last adapter (its path: the run’s adapters folder)',
      );
    }
    const answered = servers.map((s) => s.log.filter((l) => / 200 \d+ ms prompt \d+ completion \d+/.test(l)).length);
    t.ok(
      answered.every((n) => n > 1),
      `both servers sampled episodes (${answered.join(' + ')} completions, the first sync's probe included)`,
    );
  },
);

t.test(
  'one server killed (SIGKILL) mid-run, as a rollout begins: the run finishes on the other; the failed requests are retried and counted',
  async (t) => {
    const [victim, survivor] = servers;
    const out = join(tmp, 'killed');
    const warnings: string[] = [];
    let killedAt = -1;
    let step = 0;
    victim.onLine = (l) => {
      // once it has taken the adapter of step 1 (unloading step 0's ends that sync): the rollout of
      // GRPO step 2 starts now, so its requests to this server are either under way or about to be
      // sent, and fail either way
      if (killedAt < 0 && /unload_lora_adapter "killed-step-0" 200/.test(l)) {
        killedAt = step;
        victim.child.kill('SIGKILL');
      }
    };
    const config = hfConfig({
      engine: 'openai',
      servers: [victim.baseURL, survivor.baseURL],
      sessions: true,
      timeoutS: 60,
      retries: 3,
    });
    const t0 = performance.now();
    const r = await train(config, {
      out,
      onEvent: (e) => {
        if (e.kind === 'warning') warnings.push(e.message);
        if (e.kind === 'grpo') step = e.step;
      },
    });
    timings.push(`with a server killed: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await victim.exited;
    t.equal(victim.child.signalCode, 'SIGKILL', 'the server was killed');
    t.equal(killedAt, 1, 'after GRPO step 1, as the rollout of step 2 began');
    t.equal(r.step, config.grpo.steps, 'the run finished');
    const rows = readRows(out);
    const grpo = rows.filter((x) => x.phase === 'grpo');
    const after = rows.filter((x) => (x.step as number) >= 2);
    const retried = after.reduce((a, x) => a + ((x['rollout/remote_retries'] as number | undefined) ?? 0), 0);
    t.ok(
      retried >= 1,
      `the requests that failed on the dead server were retried on the other and counted in rollout/remote_retries (${retried})`,
    );
    t.ok(
      grpo.every((x) => x['rollout/aborted'] === 0 && x['rollout/remote_failures'] === 0),
      'no request failed after its retries, no episode was aborted',
    );
    t.same(
      grpo.map((x) => x['rollout/servers_up']),
      [2, 2, 1],
      'rollout/servers_up: the dead server is out of routing from the next sync on',
    );
    t.ok(
      warnings.some(
        (w) =>
          w.includes(victim.baseURL) &&
          /did not take the adapter killed-step-2 of step 2 and is out of routing/.test(w),
      ),
      `a warning names the server that missed the adapter: ${warnings.join(' | ')}`,
    );
    // Every episode here is a single request (the random model never ends its turn within
    // rollout.maxTokensPerTurn, which ends the episode), and a first request is a fresh session
    // seeded with the episode's seed on whichever server: the retried episodes sample on the
    // survivor what they would have sampled on the dead server. (A retried continuation of a
    // multi-turn episode would start afresh there, with other draws.)
    t.ok(
      grpo.every((x) => x['num_turns/max'] === 1),
      'every episode was one request',
    );
    sameMetrics(t, localRows, rows, 'with a server killed');
    t.ok(
      adminCalls(t, survivor.log).includes(`load killed-step-${config.grpo.steps}`),
      'the survivor took every adapter',
    );
    // what the docs' table reports
    t.comment(`wall times (smoke preset, LoRA rank 8, ${config.grpo.steps} GRPO steps): ${timings.join('; ')}`);
  },
);
