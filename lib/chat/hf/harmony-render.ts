/**
 * Harmony messages and their rendering, written from the harmony format's specification
 * (`format.md` of openai/harmony): `<|start|>{header}<|message|>{content}<|end|>`, the header
 * being the role (a tool's name for tool messages), ` to={recipient}`, `<|channel|>{channel}`
 * and a content type (` <|constrain|>json`); an assistant message to a recipient (a tool call)
 * ends with `<|call|>`. The system message carries the model identity, knowledge cutoff,
 * current date, reasoning effort, built-in tool namespaces and the valid channels; the
 * developer message the instructions and the function tools.
 *
 * A rendering is a list of pieces: special tokens, and text that is tokenized as plain text on
 * its own (a message's content never turns into special tokens), as harmony's renderer does.
 * @module
 */
import { harmonyToolsSection, type HarmonyToolNamespace } from './harmony-schema.js';

/** Harmony roles. */
export type HarmonyRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

/** Reasoning effort of the system message. */
export type ReasoningEffort = 'low' | 'medium' | 'high';

/** The system message's content. Absent fields take harmony's defaults; null leaves a line out. */
export interface HarmonySystemContent {
  /** Default "You are ChatGPT, a large language model trained by OpenAI.". */
  modelIdentity?: string | null;
  /** `Knowledge cutoff: …`, default "2024-06". */
  knowledgeCutoff?: string | null;
  /** `Current date: …` (default none). */
  conversationStartDate?: string | null;
  /** `Reasoning: …`, default "medium". */
  reasoningEffort?: ReasoningEffort | null;
  /** Built-in tool namespaces (e.g. browser, python). */
  tools?: readonly HarmonyToolNamespace[];
  /** `# Valid channels: …`, default analysis, commentary, final (required). */
  channels?: { valid: readonly string[]; required: boolean } | null;
}

/** The developer message's content. */
export interface HarmonyDeveloperContent {
  /** `# Instructions` (the "system prompt"). */
  instructions?: string | null;
  /** Function tool namespaces (usually one, `functions`). */
  tools?: readonly HarmonyToolNamespace[];
}

/** A harmony message. */
export interface HarmonyMessage {
  /** The author's role. */
  role: HarmonyRole;
  /** The author's name: for a tool, the tool (e.g. `functions.get_weather`); for others written as `role:name`. */
  name?: string;
  /** The recipient (`functions.NAME` for a call, `assistant` for a tool's reply). */
  recipient?: string;
  /** The channel (`analysis`, `commentary`, `final`). */
  channel?: string;
  /** The content type (`<|constrain|>json`, `json`, `code`). */
  contentType?: string;
  /** Text, or the system / developer content. */
  content: string | { system: HarmonySystemContent } | { developer: HarmonyDeveloperContent };
}

/** One piece of a rendering. */
export type HarmonyPiece = { special: string } | { text: string };

/** The model identity harmony's system message has by default. */
export const DEFAULT_MODEL_IDENTITY = 'You are ChatGPT, a large language model trained by OpenAI.';
/** The knowledge cutoff harmony's system message has by default. */
export const DEFAULT_KNOWLEDGE_CUTOFF = '2024-06';
const DEFAULT_CHANNELS = { valid: ['analysis', 'commentary', 'final'], required: true };
const CONSTRAIN = '<|constrain|>';

/** Options of a conversation's rendering. */
export interface HarmonyRenderOptions {
  /**
   * Drop the analysis (chain of thought) of turns that ended in a final answer, as the spec
   * says (default true); the analysis before the conversation's last final message is kept when
   * the conversation ends with it and no generation prompt follows (a training rendering).
   */
  dropAnalysis?: boolean;
  /** End with `<|start|>assistant` (default false). */
  addGenerationPrompt?: boolean;
}

function hasFunctionTools(messages: readonly HarmonyMessage[]): boolean {
  return messages.some(
    (m) =>
      typeof m.content === 'object' &&
      'developer' in m.content &&
      (m.content.developer.tools ?? []).some((ns) => ns.name === 'functions' && ns.tools.length > 0),
  );
}

/** The text of a system message's content. */
export function harmonySystemText(sys: HarmonySystemContent, functionTools: boolean): string {
  const sections: string[] = [];
  const identity = sys.modelIdentity === undefined ? DEFAULT_MODEL_IDENTITY : sys.modelIdentity;
  const cutoff = sys.knowledgeCutoff === undefined ? DEFAULT_KNOWLEDGE_CUTOFF : sys.knowledgeCutoff;
  const top: string[] = [];
  if (identity !== null) top.push(identity);
  if (cutoff !== null) top.push(`Knowledge cutoff: ${cutoff}`);
  if (sys.conversationStartDate) top.push(`Current date: ${sys.conversationStartDate}`);
  if (top.length > 0) sections.push(top.join('\n'));
  const effort = sys.reasoningEffort === undefined ? 'medium' : sys.reasoningEffort;
  if (effort !== null) sections.push(`Reasoning: ${effort}`);
  if (sys.tools && sys.tools.length > 0) sections.push(harmonyToolsSection(sys.tools));
  const channels = sys.channels === undefined ? DEFAULT_CHANNELS : sys.channels;
  if (channels && channels.valid.length > 0) {
    let line = `# Valid channels: ${channels.valid.join(', ')}.`;
    if (channels.required) line += ' Channel must be included for every message.';
    if (functionTools) line += "\nCalls to these tools must go to the commentary channel: 'functions'.";
    sections.push(line);
  }
  return sections.join('\n\n');
}

/** The text of a developer message's content. */
export function harmonyDeveloperText(dev: HarmonyDeveloperContent): string {
  const sections: string[] = [];
  if (dev.instructions !== undefined && dev.instructions !== null) sections.push('# Instructions', dev.instructions);
  if (dev.tools && dev.tools.length > 0) sections.push(harmonyToolsSection(dev.tools));
  return sections.join('\n\n');
}

/** The pieces of one message. */
export function renderHarmonyMessage(m: HarmonyMessage, functionTools = false): HarmonyPiece[] {
  const out: HarmonyPiece[] = [{ special: '<|start|>' }];
  if (m.role === 'tool') {
    if (!m.name) throw new TypeError('a tool message needs the tool name (name)');
    out.push({ text: m.name });
  } else {
    out.push({ text: m.role });
    if (m.name) out.push({ text: `:${m.name}` });
  }
  if (m.recipient !== undefined && m.recipient !== 'all') out.push({ text: ` to=${m.recipient}` });
  if (m.channel !== undefined) out.push({ special: '<|channel|>' }, { text: m.channel });
  if (m.contentType !== undefined) {
    if (m.contentType.startsWith(CONSTRAIN)) {
      out.push({ text: ' ' }, { special: CONSTRAIN });
      const rest = m.contentType.slice(CONSTRAIN.length);
      if (rest.length > 0) out.push({ text: rest });
    } else out.push({ text: ` ${m.contentType}` });
  }
  out.push({ special: '<|message|>' });
  const c = m.content;
  let text: string;
  if (typeof c === 'string') text = c;
  else if ('system' in c) {
    if (m.role !== 'system') throw new TypeError('system content belongs in a system message');
    text = harmonySystemText(c.system, functionTools);
  } else {
    if (m.role !== 'developer') throw new TypeError('developer content belongs in a developer message');
    text = harmonyDeveloperText(c.developer);
  }
  if (text.length > 0) out.push({ text });
  out.push({ special: m.role === 'assistant' && m.recipient !== undefined ? '<|call|>' : '<|end|>' });
  return out;
}

/**
 * Which analysis messages are dropped: those before a final-channel assistant message, except
 * before the conversation's last message when it is that final one and no generation prompt
 * follows.
 */
function droppedAnalysis(messages: readonly HarmonyMessage[], addGenerationPrompt: boolean): Set<number> {
  const dropped = new Set<number>();
  let finalAfter = false;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'assistant' && m.channel === 'analysis' && finalAfter) dropped.add(i);
    if (m.role === 'assistant' && m.channel === 'final' && !(i === messages.length - 1 && !addGenerationPrompt))
      finalAfter = true;
  }
  return dropped;
}

/** The pieces of a conversation (see {@link HarmonyRenderOptions}). */
export function renderHarmonyConversation(
  messages: readonly HarmonyMessage[],
  options: HarmonyRenderOptions = {},
): HarmonyPiece[] {
  const functionTools = hasFunctionTools(messages);
  const dropped =
    options.dropAnalysis === false
      ? new Set<number>()
      : droppedAnalysis(messages, options.addGenerationPrompt === true);
  const out: HarmonyPiece[] = [];
  messages.forEach((m, i) => {
    if (!dropped.has(i)) out.push(...renderHarmonyMessage(m, functionTools));
  });
  if (options.addGenerationPrompt) out.push(...harmonyGenerationPrompt());
  return out;
}

/** `<|start|>assistant`. */
export function harmonyGenerationPrompt(): HarmonyPiece[] {
  return [{ special: '<|start|>' }, { text: 'assistant' }];
}

/** The text of pieces. */
export function harmonyPiecesText(pieces: readonly HarmonyPiece[]): string {
  return pieces.map((p) => ('special' in p ? p.special : p.text)).join('');
}
