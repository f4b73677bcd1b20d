import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';


import { loadTau2Airline } from '../../lib/tau/index.js';

const DIR = process.env.SINKFLEX_TAU2_DIR ? join(process.env.SINKFLEX_TAU2_DIR, 'airline') : join(process.cwd(), '..', 'shared', 'tau2', 'airline');
const skip = existsSync(DIR) ? false : `tau2 data not found at ${DIR} (set SINKFLEX_TAU2_DIR)`;

/**
 * Outputs and database hashes produced by tau2's own airline code (tau2-bench
 * src/tau2/domains/airline/{data_model,tools}.py run unmodified under CPython 3.11 + pydantic
 * 2.13 on tau2's db.json; see fixtures/airline-tau2-reference.py): the initial hash, each train
 * task's gold-call outputs and the hash after them, and two scripts of calls (error cases on one
 * database; a sequence of writes on another) with each output and the final hash. Outputs over
 * 300 characters are stored as SHA-256 and length, so no tau2 data is copied here.
 */
interface Expected {
  text?: string;
  sha256?: string;
  length?: number;
}
interface Reference {
  initial_hash: string;
  tasks: Record<string, { hash: string; outputs: Expected[] }>;
  scripts: Record<string, { calls: { name: string; arguments: Record<string, unknown> }[]; outputs: Expected[]; hash: string }>;
}
const REF = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'airline-tau2-reference.json'), 'utf8')) as Reference;

function sameOutput(t: { equal(a: unknown, b: unknown, m?: string): unknown; same(a: unknown, b: unknown, m?: string): unknown }, out: string, exp: Expected, what: string): void {
  if (exp.text !== undefined) t.equal(out, exp.text, what);
  else t.same({ sha256: createHash('sha256').update(out, 'utf8').digest('hex'), length: out.length }, { sha256: exp.sha256, length: exp.length }, `${what} (${out.slice(0, 80)}…)`);
}

t.test("tau2's initial database hash and every gold call's output and resulting hash, byte for byte", { skip }, async (t) => {
  const { domain, tasks } = loadTau2Airline(DIR, { split: 'train' });
  t.equal(tasks.length, 30);
  t.same(domain.db.statistics(), { num_flights: 300, num_flights_instances: 9000, num_users: 500, num_reservations: 2000 });
  t.equal(domain.initialState().hash(), REF.initial_hash);
  for (const task of tasks) {
    const state = domain.initialState(task);
    const ref = REF.tasks[task.id];
    for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
      const m = domain.tools.call(state, { id: `g${i}`, name: a.name, arguments: a.arguments, requestor: 'assistant' });
      sameOutput(t, m.content ?? '', ref.outputs[i], `task ${task.id} ${a.name}`);
    }
    t.equal(state.hash(), ref.hash, `task ${task.id}: hash after the gold calls = tau2's`);
  }
});

t.test("tool error cases and writes give tau2's outputs and hashes", { skip }, async (t) => {
  const { domain } = loadTau2Airline(DIR, { split: 'train' });
  for (const [name, script] of Object.entries(REF.scripts)) {
    const state = domain.initialState();
    for (const [i, c] of script.calls.entries()) {
      const m = domain.tools.call(state, { id: `s${i}`, name: c.name, arguments: c.arguments, requestor: 'assistant' });
      sameOutput(t, m.content ?? '', script.outputs[i], `${name}[${i}] ${c.name} ${JSON.stringify(c.arguments).slice(0, 120)}`);
      t.equal(m.error, (script.outputs[i].text ?? '').startsWith('Error: '), `${name}[${i}]: error flag`);
    }
    t.equal(state.hash(), script.hash, `${name}: final hash = tau2's`);
  }
});
