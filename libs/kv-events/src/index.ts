// @triad/kv-events: the engines' KV-cache events — block hashing as vLLM and SGLang do it, the KVEventBatch wire
// format, ZMQ transport, the indexer that turns event sockets into NATS deltas, and the feed that applies them.

// Block hashing (router side and simulated engines).
export { VllmBlockHasher, VLLM_HASH_ALGOS, extraKeys } from './hashing/vllm-block-hash';
export type { VllmHashAlgo, VllmHasherOptions, VllmExtraKeySource, VllmMmItem } from './hashing/vllm-block-hash';
export { sglangBlockDigests, sglangBlockKeys } from './hashing/sglang-block-hash';
export { keyOfBytes, keyOfInt, keyOfEngineHash, groupKey } from './hashing/block-key';
export { pickleDumps } from './hashing/pickle';
export { cborDumps } from './hashing/cbor';
export type { PyValue } from './hashing/py-value';

// Tokenizing prompts as the engines do (gateway, simulated engines).
export { loadTokenizer, promptTokenIds, tokenizePrompt } from './tokenize/tokenizer';
export type { ModelTokenizer, LoadTokenizerOptions, PromptTokens } from './tokenize/tokenizer';
export { UnsupportedChatError } from './tokenize/chat-messages';
export type { ChatMediaPart } from './tokenize/chat-messages';
export type { RenderedChat } from './tokenize/render-chat';

// Wire format.
export { decodeKvEventBatch, KvEventDecodeError } from './wire/decode-batch';
export { encodeKvEventBatch } from './wire/encode-batch';
export type { KvEventOut, KvWireForm } from './wire/encode-batch';
export type { KvEvent, KvEventBatch } from './wire/kv-event';

// ZMQ transport.
export { EventStream } from './zmq/event-stream';
export type { EventStreamOptions, EventStreamHandlers, StreamMessage, ReplayResult } from './zmq/event-stream';
export { ZmqEventPublisher } from './zmq/event-publisher';
export type { EventPublisherOptions } from './zmq/event-publisher';

// Indexer.
export { SourceFollower } from './indexer/source-follower';
export type { SourceFollowerOptions } from './indexer/source-follower';
export type {
  FollowerSink,
  FollowerMetrics,
  FollowerLogger,
  FollowerLimits,
  FollowerCounter,
  SourceDelta,
  SourcePosition,
} from './indexer/follower-types';
export { IndexPublisher } from './indexer/index-publisher';
export type { IndexPublisherOptions, SnapshotSource } from './indexer/index-publisher';
export { KvIndexer } from './indexer/kv-indexer';
export type { KvIndexerOptions } from './indexer/kv-indexer';
export { sourcesOf } from './indexer/sources';
export type { SourceSpec } from './indexer/sources';

// Feed (scheduler replicas, in-process gateways).
export { startKvIndexFeed } from './feed/kv-index-feed';
export type { KvIndexFeed, KvIndexFeedOptions, KvIndexFeedStats } from './feed/kv-index-feed';
