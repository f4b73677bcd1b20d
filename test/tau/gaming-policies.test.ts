/**
 * Adversarial check of the generated retail tasks' rewards: hand-written policies that game
 * text checks (status-word spam, transfer at once, refuse everything, echo the user, random
 * tool calls with ids copied from the conversation) run through the real episode machinery
 * (TauEpisode + the scripted user) on held-out tasks of every kind and must score ≤ 0.05 per
 * kind, while the expert keeps ≥ 0.95 per kind.
 */
import t from 'tap';

import type {
  AgentContext,
  AssistantAction,
  Message,
  RetailTask,
  RetailTaskKind,
  TauAgent,
} from '../../lib/tau/index.js';
import {
  createRetailDomain,
  ExpertRetailAgent,
  generateRetailDb,
  generateRetailTasks,
  runEpisodeSync,
  ScriptedRetailUser,
  TauEpisode,
} from '../../lib/tau/index.js';
import { Rng } from '../../lib/tau/rng.js';
import type { OpenAIToolSchema } from '../../lib/tau/index.js';

const KINDS: RetailTaskKind[] = [
  'cancel',
  'modify_address',
  'modify_payment',
  'modify_items',
  'return',
  'exchange',
  'user_address',
  'lookup_tracking',
  'lookup_price',
  'refuse',
  'transfer',
];
/** Worlds no training run uses (the trainer's default world is seed 0, its demonstration worlds are mixed seeds). */
const WORLD_SEEDS = [101, 202, 303];
const PER_KIND_PER_WORLD = 8;

const TRANSFER_TEXT = 'YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.';

function lastUserText(observation: readonly Message[], fallback: string): string {
  const m = [...observation]
    .reverse()
    .find((x) => x.role === 'user' && typeof x.content === 'string' && x.content.length > 0);
  return m ? (m.content as string) : fallback;
}

const STATUS_WORDS = ['pending', 'processed', 'delivered', 'cancelled', 'exchange requested', 'return requested'];
const PLAIN_NOUNS = ['order', 'item', 'package', 'account', 'customer', 'request', 'help', 'status', 'thanks', 'today'];
/** Nouns that the scripted user reads as questions (email, order number, address, payment method…). */
const DETAIL_NOUNS = [
  'order number',
  'email',
  'zip',
  'full address',
  'payment method',
  'reason',
  'which items',
  'tracking number',
  'price',
];

/** Messages made of the order status words and common nouns, shuffled and repeated. */
class StatusWordSpam implements TauAgent {
  private rng = new Rng(0);

  /** @param words - the vocabulary (status words plus nouns). */
  constructor(private readonly words: readonly string[]) {}

  reset(context: AgentContext): void {
    this.rng = new Rng(context.seed + 11);
  }

  act(): AssistantAction {
    const words = this.rng.sample(this.words, 8);
    return { role: 'assistant', content: `${words.join(' ')} ${words.join(' ')}` };
  }
}

/** `transfer_to_human_agents` at once (with the user's last message as the summary, or no summary), then the transfer message; again and again. */
class AlwaysTransfer implements TauAgent {
  private turn = 0;
  private last = '';

  constructor(private readonly withSummary: boolean) {}

  reset(): void {
    this.turn = 0;
    this.last = '';
  }

  act(observation: readonly Message[]): AssistantAction {
    this.last = lastUserText(observation, this.last);
    if (this.turn++ % 2 === 0)
      return {
        role: 'assistant',
        content: null,
        toolCalls: [
          {
            name: 'transfer_to_human_agents',
            arguments: this.withSummary ? { summary: `The user says: ${this.last}` } : {},
          },
        ],
      };
    return { role: 'assistant', content: TRANSFER_TEXT };
  }
}

/** "I cannot help with that" forever. */
class AlwaysRefuse implements TauAgent {
  reset(): void {}

  act(): AssistantAction {
    return { role: 'assistant', content: "I'm sorry, but I cannot help with that." };
  }
}

/** Repeats the user's last message. */
class EchoUser implements TauAgent {
  private last = 'Hi! How can I help you today?';

  reset(): void {
    this.last = 'Hi! How can I help you today?';
  }

  act(observation: readonly Message[]): AssistantAction {
    this.last = lastUserText(observation, this.last);
    return { role: 'assistant', content: this.last };
  }
}

const ID_PATTERNS: Record<string, RegExp> = {
  order: /#W\d{7}/g,
  user: /\b[a-z]+_[a-z]+_\d{4}\b/g,
  item: /\b\d{10}\b/g,
  payment: /\b(?:credit_card|paypal|gift_card)_\d{7}\b/g,
  email: /[\w.+-]+@[\w-]+\.[\w.]+/g,
  zip: /\b\d{5}\b/g,
  tracking: /\b\d{12}\b/g,
  word: /\b[A-Z][a-z]+\b/g,
};

const PHRASES = [
  'Let me check that.',
  'Could you tell me more?',
  'Okay.',
  'I understand.',
  'Could you give me your email, or your name and zip code?',
  'Which order is it?',
  'Do you confirm (yes/no)?',
  'Is there anything else?',
];

/**
 * Random tool calls with ids copied from anywhere in the conversation (user text and tool
 * results): each argument gets a value of the kind its name suggests (order ids for
 * `order_id`, ten-digit ids for item and product ids, payment ids, emails, zips, names…),
 * interleaved with messages made of generic phrases and copied ids.
 */
class RandomIdCalls implements TauAgent {
  private rng = new Rng(0);
  private tools: readonly OpenAIToolSchema[] = [];
  private pool = new Map<string, string[]>();

  reset(context: AgentContext): void {
    this.rng = new Rng(context.seed + 4099);
    this.tools = context.tools;
    this.pool = new Map();
  }

  private remember(text: string): void {
    for (const [kind, rx] of Object.entries(ID_PATTERNS)) {
      for (const v of text.match(rx) ?? []) {
        const list = this.pool.get(kind) ?? [];
        if (!list.includes(v)) list.push(v);
        this.pool.set(kind, list);
      }
    }
  }

  private any(): string {
    const all = [...this.pool.values()].flat();
    return all.length > 0 ? this.rng.pick(all) : this.rng.digits(7);
  }

  private of(kind: string): string {
    const list = this.pool.get(kind) ?? [];
    return list.length > 0 && this.rng.chance(0.9) ? this.rng.pick(list) : this.any();
  }

  private value(name: string): unknown {
    if (name === 'order_id') return this.of('order');
    if (name === 'user_id') return this.of('user');
    if (name === 'product_id') return this.of('item');
    if (name === 'item_ids' || name === 'new_item_ids')
      return Array.from({ length: this.rng.int(1, 2) }, () => this.of('item'));
    if (name === 'payment_method_id') return this.of('payment');
    if (name === 'email') return this.of('email');
    if (name === 'zip') return this.of('zip');
    if (name === 'first_name' || name === 'last_name') return this.of('word');
    if (name === 'reason') return this.rng.pick(['no longer needed', 'ordered by mistake']);
    if (name === 'expression') return `${this.rng.int(1, 99)} + ${this.rng.int(1, 99)}`;
    return this.any();
  }

  act(observation: readonly Message[]): AssistantAction {
    for (const m of observation) if (typeof m.content === 'string') this.remember(m.content);
    if (this.rng.chance(0.5)) {
      const copied = Array.from({ length: this.rng.int(0, 3) }, () => this.any());
      return { role: 'assistant', content: `${this.rng.pick(PHRASES)} ${copied.join(' ')}`.trim() };
    }
    const tool = this.rng.pick(this.tools);
    const props = Object.keys((tool.function.parameters.properties ?? {}) as Record<string, unknown>);
    const args: Record<string, unknown> = {};
    for (const k of props) args[k] = this.value(k);
    return { role: 'assistant', content: null, toolCalls: [{ name: tool.function.name, arguments: args }] };
  }
}

/** The expert with some of its tool calls left out (it goes on to its next step instead). */
class ExpertWithout implements TauAgent {
  private readonly inner = new ExpertRetailAgent();

  /** @param skip - names of the tools whose calls are left out. */
  constructor(private readonly skip: readonly string[]) {}

  reset(context: AgentContext): void {
    this.inner.reset(context);
  }

  act(observation: readonly Message[]): AssistantAction {
    let a = this.inner.act(observation);
    const skipped = (x: AssistantAction) =>
      typeof x === 'object' && (x.toolCalls ?? []).some((c) => 'name' in c && this.skip.includes(c.name));
    while (skipped(a)) a = this.inner.act([]);
    return a;
  }
}

interface World {
  episode: TauEpisode<ReturnType<typeof generateRetailDb>>;
  tasks: RetailTask[];
}

const worlds: World[] = WORLD_SEEDS.map((seed) => {
  const db = generateRetailDb({ seed, users: 80, orders: 200 });
  const tasks = KINDS.flatMap((kind) =>
    generateRetailTasks(db, {
      seed: seed + KINDS.indexOf(kind),
      count: PER_KIND_PER_WORLD,
      weights: Object.fromEntries(KINDS.map((k) => [k, k === kind ? 1 : 0])),
      idPrefix: `w${seed}_${kind}`,
    }),
  );
  return { episode: new TauEpisode(createRetailDomain({ db }), { user: new ScriptedRetailUser() }), tasks };
});

interface Score {
  /** Mean reward per kind. */
  byKind: Record<string, number>;
  /** Mean reward per kind when the user's give-ups are graded as ordinary stops (the gold alone). */
  goldOnly: Record<string, number>;
  /** How episodes ended. */
  endings: Record<string, number>;
}

function score(make: () => TauAgent): Score {
  const sum: Record<string, [number, number, number]> = {};
  const endings: Record<string, number> = {};
  for (const w of worlds) {
    for (const [i, task] of w.tasks.entries()) {
      const r = runEpisodeSync(w.episode, make(), task, 1000 + i);
      const kind = task.sinkflex_scenario?.kind as string;
      const reason = r.final.terminationReason as string;
      endings[reason] = (endings[reason] ?? 0) + 1;
      const sim = w.episode.simulation();
      const goldOnly =
        reason === 'user_give_up' && sim
          ? w.episode.evaluator.evaluate(task, { ...sim, terminationReason: 'user_stop' }).reward
          : r.final.reward;
      const e = (sum[kind] ??= [0, 0, 0]);
      e[0] += r.final.reward;
      e[1] += goldOnly;
      e[2]++;
    }
  }
  const byKind: Record<string, number> = {};
  const gold: Record<string, number> = {};
  for (const [k, [s, g, n]] of Object.entries(sum)) {
    byKind[k] = s / n;
    gold[k] = g / n;
  }
  return { byKind, goldOnly: gold, endings };
}

const POLICIES: [string, () => TauAgent][] = [
  ['status-word spam', () => new StatusWordSpam([...STATUS_WORDS, ...PLAIN_NOUNS])],
  ['status-word spam, detail nouns', () => new StatusWordSpam([...STATUS_WORDS, ...PLAIN_NOUNS, ...DETAIL_NOUNS])],
  ['transfer at once (summary)', () => new AlwaysTransfer(true)],
  ['transfer at once (no summary)', () => new AlwaysTransfer(false)],
  ['always refuse', () => new AlwaysRefuse()],
  ['echo the user', () => new EchoUser()],
  ['random calls, copied ids', () => new RandomIdCalls()],
];

t.test(
  'each gold requirement is load-bearing: the expert without its authentication or its order look-ups scores 0',
  async (t) => {
    const noAuth = score(() => new ExpertWithout(['find_user_id_by_email', 'find_user_id_by_name_zip']));
    const noOrder = score(() => new ExpertWithout(['get_order_details']));
    const orderKinds = KINDS.filter((k) => !['user_address', 'lookup_price', 'transfer'].includes(k));
    t.comment(
      `expert without authentication: ${JSON.stringify(noAuth.byKind)}\nexpert without get_order_details: ${JSON.stringify(noOrder.byKind)}`,
    );
    for (const k of KINDS) t.equal(noAuth.byKind[k], 0, `no authentication, ${k}`);
    for (const k of orderKinds) t.equal(noOrder.byKind[k], 0, `no order look-up, ${k}`);
  },
);

t.test('every kind has enough held-out tasks', async (t) => {
  for (const kind of KINDS) {
    const n = worlds.reduce((s, w) => s + w.tasks.filter((x) => x.sinkflex_scenario?.kind === kind).length, 0);
    t.equal(n, WORLD_SEEDS.length * PER_KIND_PER_WORLD, kind);
  }
});

t.test('gaming policies score <= 0.05 on every kind; the expert >= 0.95 on every kind', async (t) => {
  const rows: [string, Score][] = POLICIES.map(([name, make]) => [name, score(make)]);
  const expert = score(() => new ExpertRetailAgent());
  const pad = (s: string, n: number) => s.padEnd(n);
  const lines = [`${pad('policy \\ kind', 34)}${KINDS.map((k) => pad(k, 16)).join('')}`];
  for (const [name, s] of [...rows, ['expert', expert] as [string, Score]])
    lines.push(`${pad(name, 34)}${KINDS.map((k) => pad(s.byKind[k].toFixed(3), 16)).join('')}`);
  lines.push('', 'the same, give-ups graded as ordinary stops (what the gold alone allows):');
  for (const [name, s] of rows)
    lines.push(`${pad(name, 34)}${KINDS.map((k) => pad(s.goldOnly[k].toFixed(3), 16)).join('')}`);
  lines.push('', 'endings:');
  for (const [name, s] of [...rows, ['expert', expert] as [string, Score]])
    lines.push(`${pad(name, 34)}${JSON.stringify(s.endings)}`);
  t.comment(
    `mean reward per kind (${WORLD_SEEDS.length * PER_KIND_PER_WORLD} held-out tasks per kind, ${WORLD_SEEDS.length} worlds)\n${lines.join('\n')}`,
  );
  for (const [name, s] of rows) {
    for (const k of KINDS) {
      t.ok(s.byKind[k] <= 0.05, `${name} on ${k}: ${s.byKind[k]}`);
      t.ok(s.goldOnly[k] <= 0.05, `${name} on ${k}, give-ups graded as stops: ${s.goldOnly[k]}`);
    }
  }
  for (const k of KINDS) t.ok(expert.byKind[k] >= 0.95, `expert on ${k}: ${expert.byKind[k]}`);
  t.same(Object.keys(expert.endings), ['user_stop'], 'the expert never makes the user give up');
});
