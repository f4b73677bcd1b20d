/**
 * The built-in chat template's conversation decoder (it lives with the template in
 * `model/conversation-decoder.ts`; re-exported here, where the rollout layer has always had it).
 * @module
 */
export { ConversationDecoder, ConversationDecodeError } from '../model/conversation-decoder.js';
