/**
 * The chat format of a pretrained model folder: harmony for gpt-oss (`model_type` `gpt_oss` or
 * architecture `GptOssForCausalLM`, whose tokenizer_config.json has no chat template), else
 * the Jinja chat template (`chat_template.jinja`, else `tokenizer_config.json`'s
 * `chat_template`, a string or a list of named templates).
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { ChatTemplateError } from '../chat-template.js';
import { HfTokenizer, readJsonFile, type JsonObject } from './tokenizer.js';
import { HarmonyChatFormat, type HarmonyChatFormatOptions } from './harmony-format.js';
import { JinjaChatFormat, type JinjaChatFormatOptions } from './jinja-format.js';
import { optionKeys, refuseUnknownOptions } from '../../util/options.js';

/** A pretrained model's chat format. */
export type PretrainedChatFormat = JinjaChatFormat | HarmonyChatFormat;

/** Options of {@link createChatFormat} and {@link loadChatFormat}. */
export interface ChatFormatOptions {
  /** `auto` (default): harmony for gpt-oss, else the Jinja template. */
  format?: 'auto' | 'jinja' | 'harmony';
  /** Options of a Jinja format. */
  jinja?: JinjaChatFormatOptions;
  /** Options of the harmony format. */
  harmony?: HarmonyChatFormatOptions;
}

const CHAT_FORMAT_KEYS = optionKeys<ChatFormatOptions>({ format: true, jinja: true, harmony: true });

/** What decides a model's chat format. */
export interface ChatFormatSource {
  /** The model's tokenizer. */
  tokenizer: HfTokenizer;
  /** `config.json` (for `model_type` and `architectures`), if any. */
  config?: JsonObject | null;
  /** The contents of `chat_template.jinja`, if the folder has one (it wins over tokenizer_config.json's). */
  chatTemplateFile?: string | null;
}

/** Whether a config describes a gpt-oss model. */
export function isGptOss(config: JsonObject | null | undefined): boolean {
  if (!config) return false;
  const archs = Array.isArray(config.architectures) ? config.architectures : [];
  return config.model_type === 'gpt_oss' || archs.includes('GptOssForCausalLM');
}

/** The chat template(s) of tokenizer_config.json's `chat_template` (string, or a list of `{ name, template }`), or null. */
export function configTemplates(value: unknown): string | Record<string, string> | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const out: Record<string, string> = {};
    value.forEach((e, i) => {
      const o = e as { name?: unknown; template?: unknown };
      if (typeof o?.name !== 'string' || typeof o.template !== 'string')
        throw new ChatTemplateError(`tokenizer_config.json: chat_template[${i}] must be { name, template } strings`);
      out[o.name] = o.template;
    });
    return out;
  }
  throw new ChatTemplateError('tokenizer_config.json: chat_template must be a string or a list of { name, template }');
}

/** The chat format of a model (see the module description). */
export function createChatFormat(source: ChatFormatSource, options: ChatFormatOptions = {}): PretrainedChatFormat {
  refuseUnknownOptions(options, CHAT_FORMAT_KEYS, 'createChatFormat');
  const format = options.format ?? 'auto';
  if (format === 'harmony' || (format === 'auto' && isGptOss(source.config)))
    return new HarmonyChatFormat(source.tokenizer, options.harmony);
  const template = source.chatTemplateFile ?? configTemplates(source.tokenizer.config.chat_template);
  if (template === null) {
    throw new ChatTemplateError(
      'the model has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json) and is not gpt-oss (harmony)',
    );
  }
  return new JinjaChatFormat(source.tokenizer, template, options.jinja);
}

/** Reads a model folder's tokenizer, config.json and chat template, and makes its chat format. */
export async function loadChatFormat(
  dir: string,
  options: ChatFormatOptions & { tokenizer?: HfTokenizer } = {},
): Promise<PretrainedChatFormat> {
  refuseUnknownOptions(options, [...CHAT_FORMAT_KEYS, 'tokenizer'], 'loadChatFormat');
  const { tokenizer: given, ...formatOptions } = options;
  const tokenizer = given ?? (await HfTokenizer.fromDir(dir));
  const config = await readJsonFile(join(dir, 'config.json'), true);
  let chatTemplateFile: string | null = null;
  try {
    chatTemplateFile = await readFile(join(dir, 'chat_template.jinja'), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new ChatTemplateError(`cannot read ${join(dir, 'chat_template.jinja')}: ${(e as Error).message}`);
  }
  return createChatFormat({ tokenizer, config, chatTemplateFile }, formatOptions);
}
