/**
 * The standard wrappers (Gymnasium's `gymnasium.wrappers`), sync and async.
 * @module
 */
export { TimeLimit, AsyncTimeLimit } from './time-limit.js';
export { OrderEnforcing, AsyncOrderEnforcing, type OrderEnforcingOptions } from './order-enforcing.js';
export { PassiveEnvChecker, AsyncPassiveEnvChecker } from './passive-env-checker.js';
export {
  RecordEpisodeStatistics,
  AsyncRecordEpisodeStatistics,
  type EpisodeStatistics,
  type RecordEpisodeStatisticsOptions,
} from './record-episode-statistics.js';
