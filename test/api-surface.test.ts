// The public surface of the package, pinned: the names the root exports (`sinkflex-rl`) and the
// names each subpath export (`sinkflex-rl/<layer>`) package.json declares exports. A change to any
// is deliberate: edit the index file and these lists together. No subpath exports a raw addon
// handle or a benchmark helper (benches import those by path). Also checked: every index file lists its exports
// (no `export *`), its runtime exports are exactly its non-type names, every root name comes from
// its layer's subpath, and the imports in the docs' code examples name exported things.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import t from 'tap';
import ts from 'typescript';

const root = process.cwd();

/** The subpath exports besides `.` and `./package.json`: one per layer, `lib/<layer>/index.ts`. */
const SUBPATHS = ['native', 'attention', 'tau', 'gym', 'rollout', 'model', 'grpo', 'openai', 'trainer'];

/** The root's exports, sorted by name; `type ` marks a type-only export. */
const ROOT = [
  'type AdvantageOptions', 'AgentLoop', 'type AgentLoopOptions', 'type AnyEnv', 'AsyncTauEnv',
  'type AttentionOptions', 'type AttentionShape', 'type Backend', 'type ChatFormat', 'type ChatMessage',
  'type ChatModel', 'type ChatPolicy', 'type ChatServer', 'type ChatServerOptions', 'ChatTemplate',
  'ChatTokenPolicy', 'CheckpointError', 'ConfigError', 'DataProto', 'type Device', 'DeviceError',
  'type DeviceRequest', 'type DeviceTensor', 'DeviceUnavailableError', 'type EpisodeRecord',
  'type EvaluatePolicyOptions', 'type EvaluationResult', 'ExpertAirlineAgent', 'ExpertChatPolicy', 'ExpertRetailAgent',
  'ExpertTelecomAgent', 'ExpertTokenPolicy', 'type GenerativeModel', 'HfConfigError', 'HfTokenizer',
  'LlmUserSimulator', 'type LoadPretrainedOptions', 'type LoadedPolicy', 'type LoraConfig', 'type MaskSpec', 'type MemoryStats',
  'type Message', 'type ModelConfig', 'ModelConfigError', 'type ModelConfigInput', 'type ModelHandle',
  'type ModelSession', 'type NativeBuildInfo', 'NativeLoadError', 'OpenAIChatClient', 'OpenAIChatPolicy',
  'type OpenAIClientOptions', 'OpenAIError', 'type OpenAIPolicyOptions', 'type OpenModelOptions', 'OutOfMemoryError', 'ParamStore',
  'PeftAdapterError', 'type PolicyLossInputs', 'type PolicyLossOptions', 'type PolicyLossResult',
  'type PresetName', 'PretrainedModel', 'RandomAgent', 'type RewardInfo', 'RunFolderError', 'ScriptedRetailUser',
  'ScriptedTelecomUser', 'type SimulationRun', 'SinkAttention', 'type TauAgent', 'type TauDomain', 'TauEnv',
  'type TauEnvOptions', 'TauEpisode', 'TauEvaluator', 'type TauTask', 'type TauTaskSource', 'TauWorld',
  'TemplateChatModel', 'type TokenPolicy', 'type TokenSession', 'Tokenizer', 'type ToolSchema',
  'type TrainConfig', 'type TrainEvent', 'type TrainOptions', 'type TrainResult', 'type TrainablePolicy',
  'Transformer', 'TransformerPolicy', 'type UserSimulator', 'addLora', 'applyPeftAdapter', 'attentionInfo',
  'backends', 'balanceBatch', 'broadcastAdvantages', 'buildInfo', 'buildWorld', 'computeAdvantages',
  'computeAdvantagesAsync', 'createAirlineDomain', 'createRetailDomain', 'createTauEnv', 'createTelecomDomain', 'cudaAvailable',
  'episodesToDataProto', 'evaluatePolicy', 'generateRetailDb', 'generateRetailTasks', 'generateTelecomDb',
  'generateTelecomTasks', 'generateWithDynamicSampling', 'groupIds', 'isDeviceError', 'isDeviceTensor',
  'isOutOfMemoryError', 'loadChatFormat', 'loadCheckpoint', 'loadHfCheckpoint', 'loadPolicy', 'loadPretrained',
  'loadTau2Airline', 'loadTau2Retail', 'loadTau2Telecom', 'loadTauWorld', 'memory', 'mergeLora', 'mixSeed', 'modelConfig',
  'openModel', 'packMicroBatches', 'packSequences', 'parseHfConfig', 'passHatK', 'policyLoss', 'policyLossAsync',
  'readConfigFile', 'readPeftAdapter', 'resolveConfig', 'runEpisode', 'runEpisodeSync', 'saveCheckpoint',
  'saveHf', 'savePeftAdapter', 'sinkAttentionBackward', 'sinkAttentionBackwardAsync', 'sinkAttentionForward',
  'sinkAttentionForwardAsync', 'startChatServer', 'taskKind', 'toDevice', 'train', 'trainChatTokenizer',
  'trainEnvFactory', 'trajectoriesToJsonl', 'version', 'writeTrajectories',
];

/** Each subpath's exports (`sinkflex-rl/<layer>`), sorted by name; `type ` marks a type-only export. */
const SUBPATH_NAMES: Record<string, string[]> = {
  native: [
    'type Backend', 'type CpuBackend', 'type CudaBackend', 'type DType', 'type Device', 'DeviceError',
    'type DeviceRequest', 'type DeviceTensor', 'DeviceUnavailableError', 'type MemoryDevice', 'type MemoryStats',
    'type NativeBuildInfo', 'NativeLoadError', 'OutOfMemoryError', 'type TensorDevice', 'type ToDeviceOptions',
    'backends', 'buildInfo', 'cudaAvailable', 'isDeviceError', 'isDeviceTensor', 'isOutOfMemoryError', 'memory',
    'resolveDevice', 'toDevice', 'version',
  ],
  attention: [
    'type AttentionBackwardOptions', 'type AttentionForwardResult', 'type AttentionGradients', 'type AttentionImpl',
    'type AttentionInfo', 'type AttentionMask', 'type AttentionOptions', 'type AttentionShape',
    'type AttentionTensor', 'type BackwardSplit', 'BlockMask', 'type BlockState', 'type CpuKernel', 'type DenseMask',
    'type DeviceAttentionForwardResult', 'type DeviceAttentionGradients', 'type MaskPredicate', 'type MaskSpec',
    'SinkAttention', 'type SinkAttentionBackwardOptions', 'type SinkAttentionOptions', 'allKeys', 'and',
    'attentionInfo', 'causal', 'createBlockMask', 'createMask', 'describeMask', 'documents', 'maskFromOptions', 'not',
    'or', 'prefix', 'sinkAttentionBackward', 'sinkAttentionBackwardAsync', 'sinkAttentionForward',
    'sinkAttentionForwardAsync', 'slidingWindow',
  ],
  tau: [
    'type AccountStatus', 'type ActionCheck', 'type Address', 'type AgentContext', 'type AirlineAddress',
    'type AirlineCreditCard', 'type AirlineData', 'AirlineDb', 'type AirlineDomain', 'type AirlineDomainOptions',
    'type AirlineGiftCard', 'type AirlinePayment', 'type AirlinePaymentMethod', 'type AirlineTable',
    'type AirlineUser', 'type ApnName', 'type ApnSettings', 'type AppPermission', 'type AppStatus',
    'type AssistantAction', 'type AssistantMessage', 'type BillStatus', 'type CabinClass', 'type CabinNumbers',
    'type Certificate', 'type CommunicateCheck', 'CowMap', 'type CreditCard', 'DEFAULT_GREETING', 'type DbCheck',
    'type DeviceType', 'type EnvAssertion', 'type EnvAssertionCheck', 'type EnvFunctionCall', 'type EpisodeResult',
    'type EpisodeStep', 'type EvaluateOptions', 'type EvaluationCriteria', 'ExpertAirlineAgent', 'ExpertRetailAgent',
    'ExpertTelecomAgent', 'type FaultContext', 'type FaultSpec', 'type Flight', 'type FlightDateAvailable',
    'type FlightDateCancelled', 'type FlightDateDelayed', 'type FlightDateFlying', 'type FlightDateLanded',
    'type FlightDateOnTime', 'type FlightDateStatus', 'type FlightType', 'type Fulfillment', 'type GenerateDbOptions',
    'type GenerateTasksOptions', 'type GenerateTelecomDbOptions', 'type GenerateTelecomTasksOptions', 'type GiftCard',
    'type GoldActionError', 'type InitialState', 'type Insurance', 'type JsonSchema', 'type LineStatus',
    'LlmUserError', 'type LlmUserOptions', 'LlmUserSimulator', 'type LoadTasksOptions', 'type MembershipLevel',
    'type Message', 'type NLAssertionCheck', 'type NLJudge', 'type NetworkModePreference', 'type NetworkStatus',
    'type NetworkTechnology', 'type NormalizedAction', 'type OpenAIChatMessage', 'type OpenAIToolSchema',
    'type Order', 'type OrderItem', 'type OrderPayment', 'type OrderStatus', 'type Passenger', 'type PaymentMethod',
    'type PaymentMethodType', 'type PaymentRequest', 'type Paypal', 'type PerformanceLevel', 'type PhoneDevice',
    'type Product', 'RandomAgent', 'type Reservation', 'type ReservationFlight', 'type ResultSerializer',
    'type RetailData', 'RetailDb', 'type RetailDomain', 'type RetailDomainOptions', 'type RetailRequest',
    'type RetailScenario', 'type RetailTask', 'type RetailTaskKind', 'type RetailToolOptions', 'type RewardInfo',
    'type RewardReason', 'type RewardType', 'type ScenarioItem', 'ScriptedRetailUser', 'ScriptedTelecomUser',
    'type ScriptedTelecomUserOptions', 'type ScriptedUserOptions', 'type SignalStrength', 'type SimStatus',
    'type SimulationRun', 'type StateAssertion', 'type StopMarker', 'type StructuredUserInstructions',
    'type Surroundings', 'type SystemMessage', 'TASK_KIND_PATTERN', 'TELECOM_FAULTS', 'type TaskAction',
    'type Tau2AirlineData', 'type Tau2RetailData', 'type Tau2TelecomData', 'type TauAgent', 'type TauDomain',
    'TauEpisode', 'type TauEpisodeOptions', 'TauEvaluator', 'type TauTask', 'type TelecomAddress', 'type TelecomBill',
    'type TelecomCategory', 'type TelecomCustomer', 'type TelecomData', 'TelecomDb', 'type TelecomDevice',
    'type TelecomDomain', 'type TelecomDomainOptions', 'type TelecomLine', 'type TelecomLineItem',
    'type TelecomPaymentMethod', 'type TelecomPersona', 'type TelecomPlan', 'type TelecomScenario', 'TelecomState',
    'type TelecomTask', 'type TelecomUserData', 'TelecomUserDb', 'type TerminationReason', 'type Tool',
    'type ToolCall', 'type ToolCallInput', 'ToolError', 'type ToolKind', 'type ToolMessage', 'type ToolRequestor',
    'Toolkit', 'type TrialResult', 'type User', 'type UserMessage', 'type UserReply', 'type UserScenario',
    'type UserSimulator', 'type UserTurnInput', 'type Variant', 'type VpnDetails', 'type WorldState',
    'createAirlineDomain', 'createRetailDomain', 'createTelecomDomain', 'explainReward', 'generateRetailDb',
    'generateRetailTasks', 'generateTelecomDb', 'generateTelecomTasks', 'isSuccess', 'loadTau2Airline',
    'loadTau2Retail', 'loadTau2Telecom', 'mulberry32', 'normalizeAction', 'parseActionText', 'passHatK', 'runEpisode',
    'runEpisodeSync', 'scenarioFromTau2Task', 'taskKind', 'toOpenAIMessages', 'transcript',
  ],
  gym: [
    'ActionWrapper', 'AlreadyPendingCallError', 'type AnyEnv', 'type AnySpace', 'AsyncActionWrapper', 'AsyncEnv',
    'AsyncObservationWrapper', 'AsyncOrderEnforcing', 'AsyncPassiveEnvChecker', 'AsyncRecordEpisodeStatistics',
    'AsyncRewardWrapper', 'AsyncTauEnv', 'AsyncTimeLimit', 'AsyncVectorEnv', 'type AsyncVectorEnvOptions',
    'AsyncWrapper', 'AutoresetMode', 'Box', 'type BoxBound', 'type BoxOptions', 'CartPoleEnv', 'type CartPoleOptions',
    'type ChatMessage', 'type ChatRole', 'type ChatToolCall', 'type CheckEnvOptions', 'type ChoiceOptions',
    'ClosedEnvironmentError', 'type CompositeOptions', 'type DType', 'DeprecatedEnv', 'Dict', 'Discrete',
    'type DiscreteOptions', 'Env', 'EnvBase', 'EnvCheckError', 'type EnvCreator', 'type EnvKwargs',
    'type EnvMetadata', 'type EnvSource', 'EnvSpec', 'type EnvSpecInit', 'type EpisodeStatistics',
    'type GeneratedTaskSource', 'GymError', 'type IdEnvSource', 'type Info', 'type IntDType', 'type JsonSchema',
    'type JsonType', 'type MakeOptions', 'type MakeVecOptions', 'Message', 'type MessageMask', 'type MessageOptions',
    'type ModuleEnvSource', 'MultiBinary', 'type MultiBinaryOptions', 'MultiDiscrete', 'type MultiDiscreteMask',
    'type MultiDiscreteOptions', 'NameNotFound', 'NamespaceNotFound', 'type NestedNumbers', 'NoAsyncCallError',
    'NotImplementedError', 'ObservationWrapper', 'OrderEnforcing', 'type OrderEnforcingOptions', 'PassiveEnvChecker',
    'RandomGenerator', 'type RandomState', 'RecordEpisodeStatistics', 'type RecordEpisodeStatisticsOptions',
    'RegistrationError', 'type RenderFrame', 'type ResetArgs', 'ResetNeeded', 'type ResetResult', 'RewardWrapper',
    'type RgbArray', 'type Seed', 'type SeedTree', 'Sequence', 'type SequenceLength', 'type SequenceOptions',
    'type SequenceValue', 'type SetWrapperAttrOptions', 'Space', 'type SpaceJSON', 'type SpaceMask',
    'type SpaceProbability', 'type SpaceReviver', 'type SpaceValue', 'type StepResult', 'type SubEnvFailure',
    'SyncToAsyncEnv', 'SyncVectorEnv', 'type SyncVectorEnvOptions', 'type Tau2TaskSource', 'type TauDomainName',
    'TauEnv', 'type TauEnvAction', 'type TauEnvOptions', 'type TauEnvView', 'type TauObservation',
    'type TauResetOptions', 'type TauTaskSource', 'type TauUserOptions', 'TauWorld', 'Text', 'type TextMask',
    'type TextOptions', 'TimeLimit', 'type ToolInput', 'type ToolSpec', 'TransformAction', 'TransformObservation',
    'TransformReward', 'Tuple', 'type TypedArrayMap', 'UnregisteredEnv', 'VectorEnvBase', 'VectorEnvError',
    'type VectorEnvOptions', 'type VectorResetArgs', 'type VectorResetResult', 'type VectorSeed',
    'type VectorStepResult', 'VersionNotFound', 'type WaitOptions', 'type WarningHandler', 'type WarningKind',
    'WorkerExitedError', 'WorkerTimeoutError', 'Wrapper', 'type WrapperCreator', 'type WrapperSpec', 'batchSpace',
    'captureWarnings', 'captureWarningsAsync', 'checkAsyncEnv', 'checkEnv', 'concatenate', 'createTauEnv', 'iterate',
    'loadEntryPoint', 'loadTauWorld', 'logger', 'make', 'makeAsync', 'makeVec', 'namespace', 'npRandom',
    'pprintRegistry', 'register', 'registerSpaceType', 'registry', 'setWarningHandler', 'spaceFromJSON', 'spec',
    'toAsyncEnv',
  ],
  rollout: [
    'AgentLoop', 'type AgentLoopLimits', 'type AgentLoopOptions', 'type AgentLoopSampling', 'type BalanceOptions',
    'type BalanceResult', 'type ChatConversation', 'type ChatPolicy', 'type ChatPolicyRequest',
    'type ChatSampleParams', 'ChatTokenPolicy', 'type ChatTurn', 'CompletionTokenPolicy',
    'type CompletionTokenPolicyOptions', 'DataProto', 'DataProtoError', 'type DataProtoInit', 'type DataProtoItem',
    'DynamicSamplingError', 'type DynamicSamplingOptions', 'type EpisodeEnd', 'type EpisodeRecord',
    'type EpisodesToDataProtoOptions', 'type EvaluatePolicyOptions', 'type EvaluationResult', 'ExpertChatPolicy',
    'type ExpertPolicyOptions', 'ExpertTokenPolicy', 'type ExportOptions', 'GenerationScheduler',
    'type KindEvaluation', 'type PackOptions', 'type PackedMicroBatch', 'type PartitionMethod', 'type RolloutJob',
    'type RolloutRequest', 'type SampleOptions', 'type SchedulerStats', 'type SelectKeys', 'type SessionContext',
    'type TaskEvaluation', 'type TaskLookup', 'type TensorColumn', 'type TensorData', 'type TensorInput',
    'type TokenCompletion', 'type TokenCompletionRequest', 'type TokenCompletions', 'type TokenPolicy',
    'type TokenSampleRequest', 'type TokenSampleResult', 'type TokenSession', 'type TokenizationCheck',
    'type TokenizationSanityCheck', 'balanceBatch', 'episodesToDataProto', 'evaluatePolicy', 'generateBatch',
    'generateWithDynamicSampling', 'greedyPartition', 'groupIds', 'karmarkarKarp', 'mixSeed', 'packMicroBatches',
    'partitionByBudget', 'rawActionText', 'rolloutMetrics', 'tauMessageOf', 'trajectoriesToJsonl', 'unpackDocuments',
    'writeTrajectories',
  ],
  model: [
    'type ActivationCheckpointing', 'type AdamWStepOptions', 'type AdamWStepResult', 'type ChatAssistantMessage',
    'type ChatCompletion', 'type ChatFormat', 'type ChatFormatAppendOptions', 'type ChatFormatOptions',
    'type ChatFormatRenderOptions', 'type ChatFormatTokenizer', 'type ChatMessage', 'type ChatModel',
    'type ChatOptions', 'ChatTemplate', 'ChatTemplateError', 'type ChatToolCall', 'type Checkpoint',
    'CheckpointError', 'ConversationDecodeError', 'ConversationDecoder', 'type ConversationReader',
    'type DecodeOptions', 'type FinishReason', 'type ForwardBackwardResult', 'type ForwardPass', 'type GemmArgs',
    'type GemmInfo', 'type GenerateRequest', 'type GenerativeModel', 'HarmonyChatFormat',
    'type HarmonyChatFormatOptions', 'type HarmonyRenderChatOptions', 'type HfArchitecture', 'type HfCheckpoint',
    'HfCheckpointReader', 'HfConfigError', 'type HfConfigInfo', 'type HfConfigOptions', 'type HfDecodeOptions',
    'type HfDtypeOption', 'type HfEncodeOptions', 'type HfFileDtype', 'type HfFingerprintFile',
    'type HfFolderFingerprint', 'type HfLoadOptions', 'type HfLoadedTensor', 'type HfMxfp4Option',
    'type HfMxfp4Tensor', 'type HfSpecialTokens', 'type HfTensor', 'HfTensorError', 'type HfTensorInfo',
    'type HfTensorSource', 'HfTokenizer', 'HfTokenizerError', 'type HfTokenizerFiles', 'type HfTokenizerOptions',
    'JinjaChatFormat', 'type JinjaChatFormatOptions', 'type JinjaRenderOptions', 'LORA_EXPERT_TARGETS',
    'LORA_MLP_TARGETS', 'LORA_TARGETS', 'type LayerType', 'type LayoutParamSpec', 'type LinearRopeScaling',
    'type LinearShape', 'type Llama3RopeScaling', 'type LoadPretrainedOptions', 'type LogProbOptions',
    'type LogProbResult', 'type LogitsInput', 'type LogprobsMode', 'type LoraAdapterSlot', 'type LoraConfig',
    'type LoraConfigInput', 'type LoraOptionInput', 'type LoraTarget', 'type MatmulOptions', 'type MatmulPrecision',
    'type ModelConfig', 'ModelConfigError', 'type ModelConfigInput', 'type ModelPreset', 'type ModelSession',
    'type MoeExpertLora', 'type MoeForwardResult', 'type MoeGradients', 'type MoeShape', 'type MoeState',
    'type MoeWeights', 'type Mxfp4Data', 'type NativeJob', 'type NativeRunResult', 'type OpDevice',
    'type OptimizerState', 'type OptimizerStepOptions', 'type OptionalModelConfigField', 'PEFT_CONFIG_FILE',
    'PEFT_WEIGHTS_FILE', 'type PackedBatch', 'type PackedSequences', 'type ParamBufferName', 'type ParamDtype',
    'type ParamInfo', 'type ParamInit', 'type ParamSpec', 'ParamStore', 'type ParamStoreOptions', 'type ParseResult',
    'type ParsedCompletion', 'type PeftAdapter', 'PeftAdapterError', 'type PolicySaveOptions',
    'type PretrainedChatFormat', 'type PretrainedLogProbOptions', 'PretrainedModel', 'type PretrainedSaveOptions',
    'type ReasoningEffort', 'type RenderOptions', 'type RenderedChat', 'type RopeParameters', 'type RopeScaling',
    'type RopeShape', 'type RunOptions', 'type SafeTensor', 'type SafetensorsArray', 'type SafetensorsDType',
    'SafetensorsError', 'type SampleOptions', 'type SampleResult', 'type SaveCheckpointOptions', 'type SaveHfOptions',
    'type SaveHfResult', 'type SaveOptimizerStateOptions', 'type SavePeftOptions', 'type SequenceToPack',
    'type SessionOptions', 'type StoreDevice', 'type SwiGluParams', 'type SwiGluVariant', 'TemplateChatModel',
    'type TensorDtype', 'type TokenGradients', 'type TokenLoss', 'type TokenSampleResult', 'type TokenSession',
    'Tokenizer', 'TokenizerError', 'type TokenizerJSON', 'type TokenizerTrainOptions', 'type ToolSchema',
    'TrainForward', 'type TrainStepOptions', 'type TrainStepResult', 'type TrainablePolicy', 'Transformer',
    'TransformerPolicy', 'type TransformerPolicyOptions', 'TransformerPolicySession', 'TransformerSession',
    'type WeightArray', 'type YarnRopeScaling', 'adamwUpdate', 'addLora', 'appendTokens', 'applyPeftAdapter',
    'checkPeftAdapter', 'crossEntropyBackward', 'crossEntropyForward', 'cudaRefusal', 'decodeWtf8', 'describeLora',
    'embeddingBackward', 'embeddingForward', 'fingerprintDifference', 'gemm', 'gemmAsync', 'gemmInfo',
    'hfFolderFingerprint', 'isSlidingLayer', 'linearBackward', 'linearForward', 'loadChatFormat', 'loadCheckpoint',
    'loadHfCheckpoint', 'loadOptimizerState', 'loadPretrained', 'logSoftmaxBackward', 'logSoftmaxForward',
    'loraAdapterSlots', 'matmul', 'matmulPrecision', 'mergeLora', 'modelConfig', 'modelOpsDevice', 'moeBackward',
    'moeForward', 'opsIsa', 'packSequences', 'parameterLayout', 'parseHfConfig', 'peftAdapterKey',
    'peftAdapterValues', 'readPeftAdapter', 'removeLora', 'resolveLoraTargets', 'restoreOptimizerState',
    'restoreParamStore', 'rmsnormBackward', 'rmsnormForward', 'ropeBackward', 'ropeForward', 'ropeParameters',
    'sameLoraSettings', 'saveCheckpoint', 'saveHf', 'saveOptimizerState', 'savePeftAdapter', 'setMatmulPrecision',
    'sumSquares', 'swigluBackward', 'swigluForward', 'trainChatTokenizer', 'validateModelConfig',
  ],
  grpo: [
    'type AdvantageEstimator', 'type AdvantageOptions', 'type BroadcastOptions', 'type GrpoFloats', 'type KlType',
    'type LossAggMode', 'type PolicyLossInputs', 'type PolicyLossMetrics', 'type PolicyLossOptions',
    'type PolicyLossResult', 'type PolicyLossShape', 'broadcastAdvantages', 'broadcastAdvantagesAsync',
    'computeAdvantages', 'computeAdvantagesAsync', 'policyLoss', 'policyLossAsync',
  ],
  openai: [
    'type AdapterHost', 'type AdapterHostStats', 'type AdapterLoadResult', 'AdapterNotFoundError', 'type AdminEvent',
    'type AnsweredCompletion', 'type CallOptions', 'type ChatCompletionChoice', 'type ChatCompletionRequest',
    'type ChatCompletionResponse', 'type ChatCompletionResult', 'ChatEngine', 'type ChatEngineOptions',
    'type ChatRequest', 'type ChatServer', 'type ChatServerOptions', 'type CompleteOptions', 'CompletionFormatError',
    'type CompletionResponse', 'type EndpointStats', 'type EngineResult', 'OpenAIChatClient', 'OpenAIChatPolicy',
    'type OpenAIClientOptions', 'OpenAIError', 'type OpenAIErrorKind', 'type OpenAIPolicyOptions',
    'OpenAITokenCompletions', 'type OpenAITokenCompletionsOptions', 'type OpenAITurnLog', 'PretrainedAdapterHost',
    'type PretrainedAdapterHostOptions', 'type RequestedSampling', 'type ResolvedSampling', 'type RoutingPolicy',
    'SAMPLING_FIELDS', 'type SamplingDefaults', 'type SeedMode', 'type TokenCompletionsStats', 'type WeightsHost',
    'generationConfigDefaults', 'readTokenCompletion', 'resolveSampling', 'startChatServer', 'transformerWeightsHost',
  ],
  trainer: [
    'type AdapterHostOptions', 'ConfigError', 'type DemonstrationFormat', 'type KindGain', 'type LoadPolicyOptions',
    'type LoadedPolicy', 'type LogProbSource', 'type MetricsRow', 'type ModelAdapterHost', 'type ModelAdapters',
    'type ModelHandle', 'type ModelKind', 'type ModelLocation', 'OffPolicyError', 'type OpenModelOptions',
    'type PolicyUpdate', 'type PresetName', 'type PromptSettings', 'type PublishAdapter', 'type PublishWeights',
    'REPORT_TRANSCRIPT_CAPS', 'ROLLOUT_ENGINE_FIELDS', 'type ReferencePolicy', 'type ResolveConfigOptions',
    'type RolloutEnginePatch', 'RunFolderError', 'type RunInfo', 'type RunLimits', 'TRAIN_ENV_IDS',
    'type TrainConfig', 'TrainConfigSchema', 'type TrainEnvId', 'type TrainEvent', 'type TrainOptions',
    'type TrainResult', 'type TrainWorld', 'type TranscriptCaps', 'buildWorld', 'loadPolicy', 'locateModel',
    'openModel', 'parseOverride', 'readConfigFile', 'resolveConfig', 'resumeRunFolder', 'train', 'trainEnvFactory',
    'valSourceName',
  ],
};

/** Names no public index may export: raw addon handles and loaders, benchmark helpers. */
const INTERNAL = /^(loadAddon|packageRoot|[a-z]+Addon|[A-Z][A-Za-z]*Addon|NativeParamStore|NativeSession|NativeTransformer|gemmNaive|fmaPeakGflops|run[A-Za-z]*Bench|[A-Za-z]*BenchOptions|[A-Za-z]*BenchResult)$/;

interface Exported {
  name: string;
  type: boolean;
  /** The module it is re-exported from (`./tau/index.js`), or null when declared in the file. */
  from: string | null;
}

/** The exports an index file lists (syntax only): fails on `export *` and `export * as`. */
function listExports(file: string): Exported[] {
  const text = readFileSync(join(root, file), 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: Exported[] = [];
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st)) {
      const from = st.moduleSpecifier !== undefined && ts.isStringLiteral(st.moduleSpecifier) ? st.moduleSpecifier.text : null;
      if (st.exportClause === undefined || !ts.isNamedExports(st.exportClause)) throw new Error(`${file}: \`${st.getText(sf)}\` is not an explicit export list`);
      for (const el of st.exportClause.elements) out.push({ name: el.name.text, type: st.isTypeOnly || el.isTypeOnly, from });
      continue;
    }
    const exported = ts.canHaveModifiers(st) && (ts.getModifiers(st) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (!exported) continue;
    if (ts.isFunctionDeclaration(st) || ts.isClassDeclaration(st) || ts.isEnumDeclaration(st)) out.push({ name: st.name!.text, type: false, from: null });
    else if (ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st)) out.push({ name: st.name.text, type: true, from: null });
    else if (ts.isVariableStatement(st)) for (const d of st.declarationList.declarations) out.push({ name: (d.name as ts.Identifier).text, type: false, from: null });
  }
  return out;
}

const byName = (a: string, b: string): number => {
  const x = a.replace(/^type /, '');
  const y = b.replace(/^type /, '');
  return x < y ? -1 : x > y ? 1 : 0;
};
const pinned = (list: Exported[]): string[] => list.map((e) => (e.type ? `type ${e.name}` : e.name)).sort(byName);
const indexFile = (layer: string | null): string => (layer === null ? 'lib/index.ts' : `lib/${layer}/index.ts`);

t.test('package.json declares the root and one subpath per layer', async (t) => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  t.same(Object.keys(pkg.exports), ['.', ...SUBPATHS.map((l) => `./${l}`), './package.json']);
  t.same(pkg.exports['.'], { types: './dist/lib/index.d.ts', import: './dist/lib/index.js' });
  for (const l of SUBPATHS) t.same(pkg.exports[`./${l}`], { types: `./dist/lib/${l}/index.d.ts`, import: `./dist/lib/${l}/index.js` }, `./${l}`);
  t.equal(pkg.exports['./package.json'], './package.json');
});

t.test('no index file under lib/ re-exports with export *', async (t) => {
  const indexes: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${dir}/${e.name}`);
      else if (e.name === 'index.ts') indexes.push(`${dir}/${e.name}`);
    }
  };
  walk('lib');
  t.same(indexes.sort(), [null, ...SUBPATHS].map(indexFile).sort(), 'an index file per export, no other');
  for (const f of indexes) t.doesNotThrow(() => listExports(f), f);
});

t.test('the root exports exactly the pinned names, each from its layer subpath', async (t) => {
  const rootList = listExports('lib/index.ts');
  t.same(pinned(rootList), ROOT);
  const layers = new Map(SUBPATHS.map((l) => [l, listExports(indexFile(l))]));
  for (const e of rootList) {
    const layer = /^\.\/([a-z]+)\/index\.js$/.exec(e.from ?? '')?.[1];
    const sub = layer === undefined ? undefined : layers.get(layer)?.find((x) => x.name === e.name);
    t.ok(sub !== undefined && sub.type === e.type, `${e.name}: re-exported from a layer subpath (${e.from}) that exports it`);
  }
  const counts = SUBPATHS.map((l) => `sinkflex-rl/${l} ${layers.get(l)!.length}`).join(', ');
  const values = rootList.filter((e) => !e.type).length;
  t.comment(`sinkflex-rl: ${rootList.length} names (${values} values, ${rootList.length - values} types); ${counts}`);
});

t.test('each subpath exports exactly its pinned names', async (t) => {
  t.same(Object.keys(SUBPATH_NAMES), SUBPATHS, 'a pinned list per subpath');
  for (const l of SUBPATHS) t.same(pinned(listExports(indexFile(l))), SUBPATH_NAMES[l], `sinkflex-rl/${l}`);
});

t.test('no public index exports a raw addon handle or a benchmark helper', async (t) => {
  for (const layer of [null, ...SUBPATHS]) {
    const leaked = listExports(indexFile(layer)).map((e) => e.name).filter((n) => INTERNAL.test(n));
    t.same(leaked, [], indexFile(layer));
  }
  t.ok(INTERNAL.test('loadAddon') && INTERNAL.test('modelAddon') && INTERNAL.test('runGrpoBench') && !INTERNAL.test('attentionInfo'), 'the pattern catches what it names');
});

t.test('each index exports at run time exactly its non-type names', async (t) => {
  for (const layer of [null, ...SUBPATHS]) {
    const file = indexFile(layer);
    const mod = (await import(pathToFileURL(join(root, file)).href)) as Record<string, unknown>;
    const values = listExports(file).filter((e) => !e.type).map((e) => e.name).sort();
    t.same(Object.keys(mod).sort(), values, `${file}: runtime exports (a missing \`type\` marks a type as a value)`);
  }
});

t.test("the docs' code examples import names their module exports", async (t) => {
  const exportsOf = new Map<string, Set<string>>([['sinkflex-rl', new Set(listExports('lib/index.ts').map((e) => e.name))]]);
  for (const l of SUBPATHS) exportsOf.set(`sinkflex-rl/${l}`, new Set(listExports(indexFile(l)).map((e) => e.name)));
  const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  let checked = 0;
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const m of text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'(sinkflex-rl[^']*)'/g)) {
      const names = exportsOf.get(m[3]);
      if (names === undefined) {
        t.fail(`${page}: imports from '${m[3]}', which is not an export of the package`);
        continue;
      }
      for (const raw of m[2].split(',')) {
        const name = raw.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0];
        if (name === '') continue;
        checked++;
        t.ok(names.has(name), `${page}: '${m[3]}' exports ${name}`);
      }
    }
    for (const m of text.matchAll(/import\s+\*\s+as\s+\w+\s+from\s+'(sinkflex-rl[^']*)'/g)) t.ok(exportsOf.has(m[1]), `${page}: '${m[1]}' is an export of the package`);
  }
  t.ok(checked > 0, `${checked} imported names checked`);
});
