/**
 * The telecom domain (dual control: the user acts on their own phone): tau2's backend and
 * phone models, 13 agent tools and 30 user tools, the backend→phone synchronisation, loaders
 * for tau2's files, a seeded fault-scenario generator, the scripted user and the expert agent.
 * @module
 */
export { TELECOM_TODAY } from './backend.js';
export * from './device.js';
export * from './domain.js';
export * from './loader.js';
export * from './phone.js';
export * from './policy.js';
export * from './schema.js';
export * from './state.js';
export * from './tools.js';
export * from './user-tools.js';
export * from './faults.js';
export * from './generate-db.js';
export * from './generate-tasks.js';
export * from './scenario.js';
export * from './expert.js';
export * from './scripted-user.js';
