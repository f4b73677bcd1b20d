/**
 * `sinkflex-rl/tau`: the dual-control tau world: messages, tools, tasks, the episode driver
 * (tau2's orchestrator), tau2-compatible grading and pass^k, user simulators, agents, and the
 * airline, retail and telecom domains (schemas, loaders for tau2's files, seeded generators, scripted
 * users and expert agents).
 * @packageDocumentation
 */
export {
  normalizeAction,
  parseActionText,
  type AssistantAction,
  type NormalizedAction,
  type ToolCallInput,
} from './action.js';
export {
  RandomAgent,
  runEpisode,
  runEpisodeSync,
  type AgentContext,
  type EpisodeResult,
  type TauAgent,
} from './agents.js';
export { CowMap } from './cow.js';
export type { StateAssertion, TauDomain, WorldState } from './domain.js';
export { createAirlineDomain, type AirlineDomain, type AirlineDomainOptions } from './domains/airline/domain.js';
export { ExpertAirlineAgent } from './domains/airline/expert.js';
export { loadTau2Airline, type Tau2AirlineData } from './domains/airline/loader.js';
export {
  AirlineDb,
  type AirlineAddress,
  type AirlineCreditCard,
  type AirlineData,
  type AirlineGiftCard,
  type AirlinePayment,
  type AirlinePaymentMethod,
  type AirlineTable,
  type AirlineUser,
  type CabinClass,
  type CabinNumbers,
  type Certificate,
  type Flight,
  type FlightDateAvailable,
  type FlightDateCancelled,
  type FlightDateDelayed,
  type FlightDateFlying,
  type FlightDateLanded,
  type FlightDateOnTime,
  type FlightDateStatus,
  type FlightType,
  type Insurance,
  type MembershipLevel,
  type Passenger,
  type Reservation,
  type ReservationFlight,
} from './domains/airline/schema.js';
export { createRetailDomain, type RetailDomain, type RetailDomainOptions } from './domains/retail/domain.js';
export { ExpertRetailAgent } from './domains/retail/expert.js';
export { generateRetailDb, type GenerateDbOptions } from './domains/retail/generate-db.js';
export { generateRetailTasks, type GenerateTasksOptions, type RetailTask } from './domains/retail/generate-tasks.js';
export { loadTau2Retail, type LoadTasksOptions, type Tau2RetailData } from './domains/retail/loader.js';
export type { RetailRequest, RetailScenario, RetailTaskKind, ScenarioItem } from './domains/retail/scenario.js';
export {
  RetailDb,
  type Address,
  type CreditCard,
  type Fulfillment,
  type GiftCard,
  type Order,
  type OrderItem,
  type OrderPayment,
  type OrderStatus,
  type PaymentMethod,
  type Paypal,
  type Product,
  type RetailData,
  type User,
  type Variant,
} from './domains/retail/schema.js';
export { ScriptedRetailUser, type ScriptedUserOptions } from './domains/retail/scripted-user.js';
export type { RetailToolOptions } from './domains/retail/tools.js';
export {
  TelecomUserDb,
  type ApnName,
  type ApnSettings,
  type AppPermission,
  type AppStatus,
  type NetworkModePreference,
  type NetworkStatus,
  type NetworkTechnology,
  type PaymentRequest,
  type PerformanceLevel,
  type PhoneDevice,
  type SignalStrength,
  type SimStatus,
  type Surroundings,
  type TelecomUserData,
  type VpnDetails,
} from './domains/telecom/device.js';
export { createTelecomDomain, type TelecomDomain, type TelecomDomainOptions } from './domains/telecom/domain.js';
export { ExpertTelecomAgent } from './domains/telecom/expert.js';
export { TELECOM_FAULTS, type FaultContext, type FaultSpec } from './domains/telecom/faults.js';
export { generateTelecomDb, type GenerateTelecomDbOptions } from './domains/telecom/generate-db.js';
export {
  generateTelecomTasks,
  type GenerateTelecomTasksOptions,
  type TelecomTask,
} from './domains/telecom/generate-tasks.js';
export { loadTau2Telecom, type Tau2TelecomData } from './domains/telecom/loader.js';
export {
  scenarioFromTau2Task,
  type TelecomCategory,
  type TelecomPersona,
  type TelecomScenario,
} from './domains/telecom/scenario.js';
export {
  TelecomDb,
  type AccountStatus,
  type BillStatus,
  type DeviceType,
  type LineStatus,
  type PaymentMethodType,
  type TelecomAddress,
  type TelecomBill,
  type TelecomCustomer,
  type TelecomData,
  type TelecomDevice,
  type TelecomLine,
  type TelecomLineItem,
  type TelecomPaymentMethod,
  type TelecomPlan,
} from './domains/telecom/schema.js';
export { ScriptedTelecomUser, type ScriptedTelecomUserOptions } from './domains/telecom/scripted-user.js';
export { TelecomState } from './domains/telecom/state.js';
export { TauEpisode, type EpisodeStep, type TauEpisodeOptions } from './episode.js';
export {
  isSuccess,
  passHatK,
  TauEvaluator,
  type ActionCheck,
  type CommunicateCheck,
  type DbCheck,
  type EnvAssertionCheck,
  type EvaluateOptions,
  type GoldActionError,
  type NLAssertionCheck,
  type NLJudge,
  type RewardInfo,
  type SimulationRun,
  type TerminationReason,
  type TrialResult,
} from './evaluate.js';
export {
  toOpenAIMessages,
  transcript,
  type AssistantMessage,
  type Message,
  type OpenAIChatMessage,
  type SystemMessage,
  type ToolCall,
  type ToolMessage,
  type ToolRequestor,
  type UserMessage,
} from './messages.js';
export { DEFAULT_GREETING } from './prompts.js';
export { explainReward, type RewardReason } from './reward-explanation.js';
export { mulberry32 } from '../util/random.js';
export { TASK_KIND_PATTERN, taskKind } from './task-kind.js';
export type {
  EnvAssertion,
  EnvFunctionCall,
  EvaluationCriteria,
  InitialState,
  RewardType,
  StructuredUserInstructions,
  TaskAction,
  TauTask,
  UserScenario,
} from './task.js';
export {
  ToolError,
  Toolkit,
  type JsonSchema,
  type OpenAIToolSchema,
  type ResultSerializer,
  type Tool,
  type ToolKind,
} from './tools.js';
export { LlmUserError, LlmUserSimulator, type LlmUserOptions } from './users/llm.js';
export type { StopMarker, UserReply, UserSimulator, UserTurnInput } from './users/types.js';
