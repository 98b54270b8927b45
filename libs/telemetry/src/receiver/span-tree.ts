import type { ReceivedSpan } from './span-model';

export interface SpanTreeNode {
  readonly span: ReceivedSpan;
  /** Ordered by start time, then end time, then name (the SDK stamps starts with millisecond resolution). */
  readonly children: SpanTreeNode[];
}

/** A tree reduced to labels, for exact structural assertions (`expect(shape).toEqual(...)`). */
export interface SpanShape {
  readonly name: string;
  readonly children: SpanShape[];
}

/** One line of `triad trace list` / `GET /api/traces`. */
export interface TraceSummary {
  readonly traceId: string;
  /** Name and service of the earliest root span ('' while the root has not arrived). */
  readonly rootName: string;
  readonly rootService: string;
  readonly services: string[];
  readonly spanCount: number;
  readonly startMs: number;
  readonly durationMs: number;
  readonly errors: number;
}

function byStart(a: SpanTreeNode, b: SpanTreeNode): number {
  return (
    a.span.startMs - b.span.startMs ||
    a.span.endMs - b.span.endMs ||
    a.span.name.localeCompare(b.span.name) ||
    a.span.spanId.localeCompare(b.span.spanId)
  );
}

/**
 * Links spans by parent span id. Roots are spans without a parent and spans whose parent is not among `spans`
 * (not exported yet, or sampled out upstream), so nothing is ever lost from the view.
 */
export function buildSpanTree(spans: readonly ReceivedSpan[]): SpanTreeNode[] {
  const nodes = new Map<string, SpanTreeNode>();
  for (const span of spans) nodes.set(span.spanId, { span, children: [] });
  const roots: SpanTreeNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.span.parentSpanId ? nodes.get(node.span.parentSpanId) : undefined;
    if (parent && parent !== node) parent.children.push(node);
    else roots.push(node);
  }
  const sort = (list: SpanTreeNode[]) => {
    list.sort(byStart);
    for (const n of list) sort(n.children);
  };
  sort(roots);
  return roots;
}

/**
 * The tree as labels only; `label` defaults to the span name. With `sorted`, siblings are ordered by label
 * instead of time: JS SDK span starts have millisecond resolution, so siblings started within the same
 * millisecond have no reliable time order, and exact structural assertions should not depend on one.
 */
export function treeShape(
  roots: readonly SpanTreeNode[],
  label: (span: ReceivedSpan) => string = (s) => s.name,
  opts: { sorted?: boolean } = {},
): SpanShape[] {
  const shapes = roots.map((n) => ({ name: label(n.span), children: treeShape(n.children, label, opts) }));
  return opts.sorted ? shapes.sort((a, b) => a.name.localeCompare(b.name)) : shapes;
}

/** Summarizes one trace's spans (all with the same trace id). */
export function summarizeTrace(traceId: string, spans: readonly ReceivedSpan[]): TraceSummary {
  let start = Infinity;
  let end = -Infinity;
  let errors = 0;
  const services = new Set<string>();
  let root: ReceivedSpan | undefined;
  for (const s of spans) {
    start = Math.min(start, s.startMs);
    end = Math.max(end, s.endMs);
    if (s.status.code === 'ERROR') errors++;
    if (s.serviceName) services.add(s.serviceName);
    if (!s.parentSpanId && (!root || s.startMs < root.startMs)) root = s;
  }
  return {
    traceId,
    rootName: root?.name ?? '',
    rootService: root?.serviceName ?? '',
    services: [...services].sort(),
    spanCount: spans.length,
    startMs: Number.isFinite(start) ? start : 0,
    durationMs: Number.isFinite(end - start) ? end - start : 0,
    errors,
  };
}
