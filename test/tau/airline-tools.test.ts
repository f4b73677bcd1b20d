import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';

import { loadTau2Airline } from '../../lib/tau/index.js';
import { AIRLINE_DIR as DIR } from './fixtures/airline.js';

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
  scripts: Record<
    string,
    { calls: { name: string; arguments: Record<string, unknown> }[]; outputs: Expected[]; hash: string }
  >;
}
const REF = JSON.parse(
  readFileSync(join(import.meta.dirname, 'fixtures', 'airline-tau2-reference.json'), 'utf8'),
) as Reference;

/** An output in the reference's form: its text when the reference keeps the text, else its SHA-256 and length. */
function asStored(out: string, exp: Expected): Expected {
  return exp.text !== undefined
    ? { text: out }
    : { sha256: createHash('sha256').update(out, 'utf8').digest('hex'), length: out.length };
}

t.test(
  "tau2's initial database hash and every gold call's output and resulting hash, byte for byte",
  { skip },
  async (t) => {
    const { domain, tasks } = loadTau2Airline(DIR, { split: 'train' });
    t.equal(tasks.length, 30);
    t.same(domain.db.statistics(), {
      num_flights: 300,
      num_flights_instances: 9000,
      num_users: 500,
      num_reservations: 2000,
    });
    t.equal(domain.initialState().hash(), REF.initial_hash);
    for (const task of tasks) {
      const state = domain.initialState(task);
      const ref = REF.tasks[task.id];
      for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
        const m = domain.tools.call(state, {
          id: `g${i}`,
          name: a.name,
          arguments: a.arguments,
          requestor: 'assistant',
        });
        t.same(asStored(m.content ?? '', ref.outputs[i]), ref.outputs[i], `task ${task.id} ${a.name}`);
      }
      t.equal(state.hash(), ref.hash, `task ${task.id}: hash after the gold calls = tau2's`);
    }
  },
);

t.test("tool error cases and writes give tau2's outputs and hashes", { skip }, async (t) => {
  const { domain } = loadTau2Airline(DIR, { split: 'train' });
  for (const [name, script] of Object.entries(REF.scripts)) {
    const state = domain.initialState();
    for (const [i, c] of script.calls.entries()) {
      const m = domain.tools.call(state, { id: `s${i}`, name: c.name, arguments: c.arguments, requestor: 'assistant' });
      t.same(
        asStored(m.content ?? '', script.outputs[i]),
        script.outputs[i],
        `${name}[${i}] ${c.name} ${JSON.stringify(c.arguments).slice(0, 120)}`,
      );
      t.equal(m.error, (script.outputs[i].text ?? '').startsWith('Error: '), `${name}[${i}]: error flag`);
    }
    t.equal(state.hash(), script.hash, `${name}: final hash = tau2's`);
  }
});

t.test(
  "policy-only rules stay the agent's; bad arguments and bad data are errors, never crashes; initial state and copies",
  { skip },
  async (t) => {
    const { domain } = loadTau2Airline(DIR, { split: 'train' });
    const s = domain.initialState();
    const call = (name: string, args: Record<string, unknown>) =>
      domain.tools.call(s, { id: 'c', name, arguments: args, requestor: 'assistant' });
    const basic = [...domain.db.reservations.values()].find(
      (r) =>
        r.cabin === 'basic_economy' &&
        r.status === null &&
        r.flights.every((f) => domain.db.flights.get(f.flight_number)?.dates[f.date]?.status === 'available'),
    );
    t.ok(basic, 'a basic economy reservation on available flights');
    const user = domain.db.users.get(basic!.user_id)!;
    const card = Object.values(user.payment_methods).find((p) => p.source === 'credit_card');
    if (card) {
      const up = call('update_reservation_flights', {
        reservation_id: basic!.reservation_id,
        cabin: 'business',
        flights: basic!.flights.map((f) => ({ flight_number: f.flight_number, date: f.date })),
        payment_id: card.id,
      });
      t.equal(
        up.error,
        false,
        "a cabin change of a basic economy reservation is accepted (the policy forbids it, tau2's tool does not)",
      );
      t.equal((JSON.parse(up.content ?? '{}') as { cabin: string }).cabin, 'business');
    }
    const old = [...domain.db.reservations.values()].find(
      (r) => r.insurance === 'no' && r.status === null && r.created_at < '2024-05-10',
    )!;
    t.equal(
      call('cancel_reservation', { reservation_id: old.reservation_id }).error,
      false,
      'cancelling without insurance long after booking is accepted (policy only)',
    );
    t.equal(
      domain.db.reservations.get(old.reservation_id)?.status,
      null,
      'the shared database is untouched: tools write to the copy',
    );
    t.not(s.hash(), domain.initialState().hash());

    const bad = [
      call('book_reservation', { user_id: 'x' }),
      call('update_reservation_baggages', {
        reservation_id: old.reservation_id,
        total_baggages: 1.5,
        nonfree_baggages: 0,
        payment_id: 'p',
      }),
      call('book_reservation', {
        ...Object.fromEntries(['user_id', 'origin', 'destination'].map((k) => [k, 'x'])),
        flight_type: 'two_way',
        cabin: 'economy',
        flights: [],
        passengers: [],
        payment_methods: [],
        total_baggages: 0,
        nonfree_baggages: 0,
        insurance: 'no',
      }),
      call('get_user_details', { user_id: 7 }),
      call('get_user_details', { user_id: 'a', extra: 1 }),
      call('no_such_tool', {}),
    ];
    t.ok(
      bad.every((m) => m.error && m.content?.startsWith('Error: ')),
      bad.map((m) => m.content).join('\n'),
    );
    t.match(bad[0].content, /missing required argument 'origin'/);
    t.match(bad[1].content, /total_baggages/);
    t.match(bad[2].content, /flight_type/);
    t.equal(bad[5].content, "Error: Tool 'no_such_tool' not found.");

    // initial_state: data patches merge into entities, then initialization actions run
    const u0 = [...domain.db.users.values()][0];
    const gift = Object.values(u0.payment_methods).find((p) => p.source !== 'credit_card');
    const task = {
      id: 'init',
      user_scenario: { instructions: 'x' },
      initial_state: {
        initialization_data: {
          agent_data: {
            users: {
              [u0.user_id]: {
                membership: 'silver',
                ...(gift ? { payment_methods: { [gift.id]: { amount: 12.5 } } } : {}),
              },
            },
          },
        },
        initialization_actions: [
          {
            env_type: 'assistant' as const,
            func_name: 'send_certificate',
            arguments: { user_id: u0.user_id, amount: 40 },
          },
        ],
      },
    };
    const init = domain.initialState(task as never);
    const u1 = init.users.get(u0.user_id)!;
    t.equal(u1.membership, 'silver');
    if (gift) t.equal((u1.payment_methods[gift.id] as { amount: number }).amount, 12.5);
    t.same(u1.payment_methods.certificate_3221322, { source: 'certificate', id: 'certificate_3221322', amount: 40 });
    t.same(u1.reservations, u0.reservations, 'unpatched fields kept');
    t.throws(
      () =>
        domain.initialState({
          ...task,
          initial_state: { initialization_data: { agent_data: { planes: {} } } },
        } as never),
      /unknown airline table 'planes'/,
    );
    t.throws(
      () =>
        domain.initialState({
          ...task,
          initial_state: {
            initialization_data: { agent_data: { users: { [u0.user_id]: { membership: 'platinum' } } } },
          },
        } as never),
      /membership/,
    );
    t.throws(
      () =>
        domain.initialState({
          ...task,
          initial_state: {
            initialization_actions: [
              { env_type: 'assistant', func_name: 'get_user_details', arguments: { user_id: 'nobody' } },
            ],
          },
        } as never),
      /initialization action get_user_details failed: Error: User nobody not found/,
    );
  },
);

t.test('AirlineDb.fromJSON names the bad field', async (t) => {
  const { AirlineDb } = await import('../../lib/tau/index.js');
  const flight = {
    flight_number: 'F1',
    origin: 'A',
    destination: 'B',
    scheduled_departure_time_est: '06:00:00',
    scheduled_arrival_time_est: '07:00:00',
    dates: { '2024-05-01': { status: 'cancelled' } },
  };
  t.equal(AirlineDb.fromJSON({ flights: { F1: flight }, users: {}, reservations: {} }).flights.size, 1);
  t.throws(
    () =>
      AirlineDb.fromJSON({
        flights: { F1: { ...flight, dates: { d: { status: 'boarding' } } } },
        users: {},
        reservations: {},
      }),
    /airline db: flights\.F1\.dates\.d\.status: unknown flight status "boarding"/,
  );
  t.throws(
    () =>
      AirlineDb.fromJSON({
        flights: {
          F1: { ...flight, dates: { d: { status: 'available', available_seats: { first: 1 }, prices: {} } } },
        },
        users: {},
        reservations: {},
      }),
    /available_seats key: expected one of/,
  );
  t.throws(
    () =>
      AirlineDb.fromJSON({
        flights: {
          F1: { ...flight, dates: { d: { status: 'available', available_seats: { economy: 1.5 }, prices: {} } } },
        },
        users: {},
        reservations: {},
      }),
    /available_seats\.economy: expected an integer/,
  );
  t.throws(() => AirlineDb.fromJSON({ flights: {}, users: {}, reservations: {}, planes: {} }), /planes: unknown table/);
  t.throws(() => AirlineDb.fromJSON({ flights: {}, users: [], reservations: {} }), /users: expected an object/);
});
