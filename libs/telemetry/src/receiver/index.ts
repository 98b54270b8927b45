// A local OTLP/HTTP trace receiver: `triad trace serve` runs it for users without Jaeger, and tests use it too.
export { startOtlpReceiver } from './receiver';
export type { OtlpReceiver, OtlpReceiverOptions, ReceiverStats } from './receiver';
export type { WaitForSpansOptions } from './span-store';
export { buildSpanTree, treeShape, summarizeTrace } from './span-tree';
export type { SpanTreeNode, SpanShape, TraceSummary } from './span-tree';
export { decodeProtobufTraces } from './otlp-protobuf';
export { decodeJsonTraces } from './otlp-json';
export type { ReceivedSpan, ReceivedEvent, ReceivedLink, AttrMap, AttrValue, SpanKindName, StatusCodeName } from './span-model';
