// @triad/kv-events: the engines' KV-cache events — block hashing as vLLM and SGLang do it, the KVEventBatch wire
// format, ZMQ transport, the indexer that turns event sockets into NATS deltas, and the feed that applies them.

// Block hashing (router side and simulated engines).
export { VllmBlockHasher } from './hashing/vllm-block-hash';
export type { VllmHashAlgo, VllmExtraKeySource, VllmMmItem } from './hashing/vllm-block-hash';
export { sglangBlockDigests, sglangBlockKeys } from './hashing/sglang-block-hash';
export { keyOfBytes, groupKey } from './hashing/block-key';

// Tokenizing prompts as the engines do (gateway, simulated engines).
export { loadTokenizer, tokenizePrompt } from './tokenize/tokenizer';
export type { ModelTokenizer, PromptTokens } from './tokenize/tokenizer';
export { UnsupportedChatError } from './tokenize/chat-messages';
export type { ChatMediaPart } from './tokenize/chat-messages';

// Wire format.
export { decodeKvEventBatch } from './wire/decode-batch';
export { encodeKvEventBatch } from './wire/encode-batch';
export type { KvEventOut } from './wire/encode-batch';
export type { KvEvent } from './wire/kv-event';

// ZMQ transport.
export { EventStream } from './zmq/event-stream';
export type { StreamMessage } from './zmq/event-stream';
export { ZmqEventPublisher } from './zmq/event-publisher';

// Indexer.
export type { FollowerMetrics, FollowerCounter } from './indexer/follower-types';
export { KvIndexer } from './indexer/kv-indexer';

// Feed (scheduler replicas, in-process gateways).
export { startKvIndexFeed } from './feed/kv-index-feed';
export type { KvIndexFeed } from './feed/kv-index-feed';
