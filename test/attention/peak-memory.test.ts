// Peak resident memory of the fused CPU forward + backward as the operating system sees it
// (VmHWM), not only as the tracked allocator counts it: the extra memory of one causal
// forward + backward at 16 query heads, 2 kv heads, headDim 64 must stay within 1.2x the bytes
// of what it returns (out + lse + dq + dk + dv), and the tracked counter must see all of it.
// The measurement runs in a child process (two kernel threads), so nothing else in the test
// runner moves the high-water mark.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import t from 'tap';

interface Measured {
  /** VmHWM after the call minus VmRSS when the high-water mark was reset (bytes). */
  osExtra: number;
  /** Tracked allocator: peak during the call minus current before it (bytes). */
  trackedExtra: number;
  /** Bytes of out + lse + dq + dk + dv. */
  resultBytes: number;
  /** Whether /proc/self/clear_refs reset the high-water mark (else VmHWM before is the base). */
  reset: boolean;
}

// A plain Node child (no TypeScript loader, whose background compilation would move the mark)
// loads the addon the way lib/native/loader.ts does. Inputs are allocated first; a tiny call
// beforehand starts the thread pool and faults in the kernels' code, which is paid once per
// process and is not memory of the call.
const script = (seqLen: number) => `
  import { createRequire } from 'node:module';
  import { readFileSync, writeFileSync } from 'node:fs';
  const root = process.cwd();
  const addon = createRequire(root + '/package.json')('node-gyp-build')(root);
  const status = (key) => Number(new RegExp(key + ':\\\\s+(\\\\d+) kB').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
  let seed = 12345;
  const floats = (n) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; a[i] = seed / 2 ** 32 - 0.5; }
    return a;
  };
  const inputs = (s) => {
    const n = s.seqLen * s.qHeads * s.headDim, nk = s.seqLen * s.kvHeads * s.headDim;
    return { q: floats(n), k: floats(nk), v: floats(nk), sinks: floats(s.qHeads), dOut: floats(n) };
  };
  const run = (s, x) => {
    const f = addon.attentionForward(x.q, x.k, x.v, x.sinks, s, { device: 'cpu' });
    const g = addon.attentionBackward(x.q, x.k, x.v, x.sinks, f.out, f.lse, x.dOut, s, { device: 'cpu' });
    return [f.out, f.lse, g.dq, g.dk, g.dv];
  };
  const shape = { batch: 1, seqLen: ${seqLen}, qHeads: 16, kvHeads: 2, headDim: 64 };
  run({ ...shape, seqLen: 64 }, inputs({ ...shape, seqLen: 64 }));
  const x = inputs(shape);
  globalThis.gc();
  let reset = true;
  try { writeFileSync('/proc/self/clear_refs', '5'); } catch { reset = false; }
  const base = reset ? status('VmRSS') : status('VmHWM');
  const tracked0 = addon.memoryStats('cpu').currentBytes;
  addon.resetPeak('cpu');
  const results = run(shape, x);
  const osExtra = status('VmHWM') - base;
  const trackedExtra = addon.memoryStats('cpu').peakBytes - tracked0;
  const resultBytes = results.reduce((s, a) => s + a.byteLength, 0);
  console.log(JSON.stringify({ osExtra, trackedExtra, resultBytes, reset }));`;

function measure(seqLen: number): Measured {
  const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script(seqLen)], {
    env: { ...process.env, SINKFLEX_NUM_THREADS: '2' },
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    encoding: 'utf8',
  });
  if (child.status !== 0) throw new Error(`measuring child failed: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').pop()!) as Measured;
}

t.test(
  'fused forward + backward: extra peak RSS <= 1.2x the results, all of it tracked',
  { skip: !existsSync('/proc/self/status') && 'needs /proc (Linux)' },
  async (t) => {
    const r = measure(4096);
    const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
    t.comment(
      `results ${mib(r.resultBytes)}, extra peak RSS ${mib(r.osExtra)} (${(r.osExtra / r.resultBytes).toFixed(3)}x), ` +
        `tracked ${mib(r.trackedExtra)} (${(r.trackedExtra / r.resultBytes).toFixed(3)}x), high-water mark reset: ${r.reset}`,
    );
    t.equal(r.resultBytes, 4 * (2 * 4096 * 16 * 64 + 16 * 4096 + 2 * 4096 * 2 * 64), 'out + lse + dq + dk + dv');
    t.ok(r.osExtra >= r.resultBytes, 'the results themselves are resident');
    t.ok(r.osExtra <= 1.2 * r.resultBytes, `extra peak RSS ${(r.osExtra / r.resultBytes).toFixed(3)}x <= 1.2x`);
    t.ok(
      r.trackedExtra <= 1.2 * r.resultBytes,
      `tracked extra ${(r.trackedExtra / r.resultBytes).toFixed(3)}x <= 1.2x`,
    );
    t.ok(
      r.osExtra - r.trackedExtra <= 0.05 * r.resultBytes,
      `what the OS sees beyond the tracked counter (${mib(r.osExtra - r.trackedExtra)}) is under 5% of the results`,
    );
  },
);
