/**
 * The trainer: configuration, SFT warm start, GRPO steps (VERL order), validation, run
 * folders with checkpoints, metrics, samples and an HTML report.
 * @module
 */
export * from './config.js';
export * from './world.js';
export * from './checkpoint.js';
export * from './hf-run.js';
export * from './load-policy.js';
export * from './sft.js';
export * from './grpo-step.js';
export * from './report.js';
export * from './transcript-html.js';
export * from './validation-log.js';
export * from './trainer.js';
