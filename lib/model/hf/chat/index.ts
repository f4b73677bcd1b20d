/**
 * Tokenizers and chat formats of pretrained models: {@link HfTokenizer} (`tokenizer.json` through
 * `@huggingface/tokenizers`), Jinja chat templates through `@huggingface/jinja`
 * ({@link JinjaChatFormat}), gpt-oss's harmony format ({@link HarmonyChatFormat}), and the factory
 * that picks a model folder's ({@link loadChatFormat}). All are {@link ChatFormat}s for the agent loop.
 * @module
 */
export * from '../tokenizer.js';
export * from './hermes.js';
export * from './jinja-format.js';
export * from './harmony-schema.js';
export * from './harmony-render.js';
export * from './harmony-parse.js';
export * from './harmony-format.js';
export * from './factory.js';
