/**
 * The telecom domain: backend + phone state, the agent's and the user's toolkits, tau2's
 * synchronisation of the backend into the phone's surroundings after every step, the env
 * assertions, and how a task's initial state is built (initialization data and actions).
 * @module
 */
import type { TauDomain } from '../../domain.js';
import type { EnvFunctionCall, TauTask } from '../../task.js';
import type { Toolkit } from '../../tools.js';
import { billById, customerByPhone, dataExceeded, lineByPhone } from './backend.js';
import type { TelecomUserDb } from './device.js';
import { TelecomUserDb as UserDb } from './device.js';
import { TELECOM_POLICY } from './policy.js';
import type { TelecomData } from './schema.js';
import { TelecomDb } from './schema.js';
import { TelecomState } from './state.js';
import { TELECOM_AGENT_ASSERTIONS, TELECOM_AGENT_ENV_FUNCTIONS, telecomAgentToolkit } from './tools.js';
import { TELECOM_USER_ASSERTIONS, TELECOM_USER_ENV_FUNCTIONS, telecomUserToolkit } from './user-tools.js';

/**
 * tau2's `TelecomEnvironment.sync_tools`: when the phone belongs to a known line, copies into
 * its surroundings whether the line is active, whether roaming is allowed and whether the data
 * allowance is used up; marks the bill of a paid payment request as Paid and clears the
 * request; and, when no request is pending, raises one for the customer's first bill awaiting
 * payment. It does not search the network again: the phone notices a resumed line only after a
 * reboot or another search, as in tau2. Throws when the phone number matches no line.
 */
export function syncTelecom(state: TelecomState): void {
  const s = state.user.surroundings;
  if (s.phone_number === null) return;
  let line;
  try {
    line = lineByPhone(state.db, s.phone_number);
  } catch {
    throw new Error(`Wrong scenario, line not found for phone number: ${s.phone_number}`);
  }
  s.line_active = line.status === 'Active';
  s.roaming_allowed = line.roaming_enabled;
  s.mobile_data_usage_exceeded = dataExceeded(state.db, line);
  if (s.payment_request !== null && s.payment_request.paid) {
    const bill = billById(state.db, s.payment_request.bill_id);
    state.db.putBill({ ...bill, status: 'Paid' });
    s.payment_request = null;
  }
  if (s.payment_request === null) {
    // the line's owner (tau2 looks the customer up by the phone number, which is the same
    // customer unless the number is an alias: then tau2 fails to find one)
    let customer = [...state.db.customers.values()].find((c) => c.line_ids.includes(line.line_id));
    customer ??= customerByPhone(state.db, s.phone_number);
    for (const id of customer.bill_ids) {
      const b = billById(state.db, id);
      if (b.status === 'Awaiting Payment') {
        s.payment_request = { bill_id: b.bill_id, amount_due: b.total_due, paid: false };
        break;
      }
    }
  }
}

/** Options of {@link createTelecomDomain}. */
export interface TelecomDomainOptions {
  /** The backend (tau2's `db.toml` loaded with `loadTelecomDb`, or a generated one). */
  db: TelecomDb;
  /** The phone before any task set-up (tau2's `user_db.toml`); default tau2's default phone. */
  userDb?: TelecomUserDb;
  /** The policy; default the embedded sinkflex telecom policy. */
  policy?: string;
}

/** The telecom domain type. */
export type TelecomDomain = TauDomain<TelecomState> & {
  readonly db: TelecomDb;
  readonly userDb: TelecomUserDb;
  readonly tools: Toolkit<TelecomState>;
  readonly userTools: Toolkit<TelecomState>;
  /** Runs one set-up function or tool of a task's `initialization_actions` (then syncs), returning its result. */
  runEnvFunction(state: TelecomState, call: EnvFunctionCall): unknown;
};

/** Creates the telecom domain. */
export function createTelecomDomain(options: TelecomDomainOptions): TelecomDomain {
  const tools = telecomAgentToolkit();
  const userTools = telecomUserToolkit();
  const agentFns = new Map([...tools.tools, ...TELECOM_AGENT_ENV_FUNCTIONS].map((t) => [t.name, t]));
  const userFns = new Map([...userTools.tools, ...TELECOM_USER_ENV_FUNCTIONS].map((t) => [t.name, t]));
  const db = options.db;
  const userDb = options.userDb ?? UserDb.fromJSON({});

  function runEnvFunction(state: TelecomState, call: EnvFunctionCall): unknown {
    const fn = (call.env_type === 'user' ? userFns : agentFns).get(call.func_name);
    if (!fn) throw new TypeError(`unknown ${call.env_type} function '${call.func_name}'`);
    const checked = fn.validate(call.arguments ?? {});
    if (!checked.ok) throw new TypeError(checked.message);
    const out = fn.run(state, checked.args);
    syncTelecom(state);
    return out;
  }

  return {
    name: 'telecom',
    policy: options.policy ?? TELECOM_POLICY,
    tools,
    userTools,
    db,
    userDb,
    assertions: { ...TELECOM_AGENT_ASSERTIONS, ...TELECOM_USER_ASSERTIONS },
    sync: syncTelecom,
    runEnvFunction,
    initialState(task?: TauTask): TelecomState {
      let state = new TelecomState(db.fork(), userDb.fork());
      syncTelecom(state);
      const init = task?.initial_state;
      const data = init?.initialization_data;
      if (data?.agent_data) state = new TelecomState(patchBackend(state.db, data.agent_data), state.user);
      if (data?.user_data) state.user.update(data.user_data);
      for (const action of init?.initialization_actions ?? []) {
        try {
          runEnvFunction(state, action);
        } catch (e) {
          throw new Error(
            `initialization action ${action.env_type}.${action.func_name} failed: ${(e as Error).message}`,
            { cause: e },
          );
        }
      }
      syncTelecom(state);
      return state;
    },
  };
}

/** tau2's `update_db` on the backend: each top-level list given replaces that table (validated). */
function patchBackend(db: TelecomDb, patch: Record<string, unknown>): TelecomDb {
  const data = db.toJSON() as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch)) {
    if (!['plans', 'customers', 'lines', 'bills', 'devices', 'phone_number_aliases'].includes(k))
      throw new TypeError(`initialization_data: unknown telecom table '${k}'`);
    data[k] = v;
  }
  return TelecomDb.fromJSON(data as unknown as TelecomData);
}
