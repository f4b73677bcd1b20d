/**
 * The retail domain: tau2's schema and 16 tools, loaders for tau2's files, seeded generators,
 * the scripted customer and the expert agent.
 * @module
 */
export * from './calculate.js';
export * from './catalog.js';
export * from './domain.js';
export * from './expert.js';
export * from './generate-db.js';
export * from './generate-tasks.js';
export * from './loader.js';
export * from './policy.js';
export * from './scenario.js';
export * from './schema.js';
export * from './scripted-user.js';
export * from './tools.js';
