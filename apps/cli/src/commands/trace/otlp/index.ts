// The OTLP receiver behind `triad trace serve`. The other files of this folder are byte-for-byte copies of
// libs/testing/src/otlp (`@triad/testing/otlp`), which the CLI may not import: the boundary rules keep
// `type:testing` libraries out of shipped code, and apps/cli does not depend on the library that could host a
// shared copy. test/trace-receiver-copy.test.ts fails when the two copies drift; change both together.
export { startOtlpReceiver } from './receiver';
export type { OtlpReceiver } from './receiver';
export { buildSpanTree } from './span-tree';
export type { SpanTreeNode, TraceSummary } from './span-tree';
export type { ReceivedSpan, AttrValue, AttrMap } from './span-model';
