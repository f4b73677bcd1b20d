/**
 * Spaces (Gymnasium's `gymnasium.spaces`): Discrete, Box, MultiDiscrete, MultiBinary, Text,
 * Dict, Tuple, Sequence and Message (chat messages with tool calls), their batching for vector
 * environments, and JSON (de)serialisation.
 * @module
 */
export {
  Space,
  TYPED_ARRAYS,
  DTYPE_RANGE,
  canCast,
  dtypeOf,
  isDType,
  isFloatDType,
  shapeSize,
  type DType,
  type SeedTree,
  type SpaceJSON,
  type TypedArray,
  type TypedArrayMap,
} from './space.js';
export { Discrete, type DiscreteOptions } from './discrete.js';
export { Box, type BoxBound, type BoxOptions } from './box.js';
export { MultiDiscrete, type IntDType, type MultiDiscreteMask, type MultiDiscreteOptions } from './multi-discrete.js';
export { MultiBinary, type MultiBinaryOptions } from './multi-binary.js';
export { Text, ALPHANUMERIC, type TextMask, type TextOptions } from './text.js';
export { Dict, Tuple, type AnySpace, type CompositeOptions, type SpaceMask, type SpaceProbability, type SpaceValue } from './composite.js';
export { Sequence, batchLength, type SequenceLength, type SequenceOptions, type SequenceValue } from './sequence.js';
export {
  Message,
  type ChatMessage,
  type ChatRole,
  type ChatToolCall,
  type MessageMask,
  type MessageOptions,
  type ToolInput,
  type ToolSpec,
} from './message.js';
export { validateJson, sampleJson, type JsonSchema, type JsonType } from './json-schema.js';
export { flattenNested, toNested, type NestedNumbers } from './nested.js';
export { batchSpace, concatenate, createEmptyArray, deepCopy, iterate, typedBatchLayout } from './batch.js';
export { registerSpaceType, spaceFromJSON, type SpaceReviver } from './serialize.js';
