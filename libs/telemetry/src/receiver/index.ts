// A local OTLP/HTTP trace receiver: `triad trace serve` runs it for users without Jaeger, and tests use it too.
export { startOtlpReceiver } from './receiver';
export type { OtlpReceiver } from './receiver';
export { buildSpanTree, treeShape } from './span-tree';
export type { SpanTreeNode, SpanShape, TraceSummary } from './span-tree';
export type { ReceivedSpan, AttrValue } from './span-model';
