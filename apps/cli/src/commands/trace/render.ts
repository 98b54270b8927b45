import { buildSpanTree, type AttrValue, type ReceivedSpan, type SpanTreeNode, type TraceSummary } from '@triad/telemetry/receiver';

/** Attributes worth a glance, in display order; `--all-attributes` shows every one instead. */
const KEY_ATTRIBUTES = [
  'http.response.status_code',
  'error.type',
  'triad.request.id',
  'triad.mode',
  'triad.model_server',
  'triad.pd_group',
  'triad.endpoint.pod',
  'triad.encoder.item_index',
  'triad.encoder.modality',
  'triad.cache_affinity_hit',
  'triad.attempt',
  'gen_ai.request.model',
  'gen_ai.response.model',
  'gen_ai.request.max_tokens',
  'gen_ai.usage.input_tokens',
  'gen_ai.usage.output_tokens',
  'gen_ai.response.time_to_first_chunk',
  'triad.schedule.batch_size',
  'triad.schedule.local',
  'messaging.batch.message_count',
  'triad.decision.endpoint',
  'triad.decision.prefill',
  'triad.decision.encoders',
  'triad.decision.encoder_affinity_hits',
  'triad.decision.top_n',
  'triad.decision.error_code',
  'triad.scheduler.plugin',
  'triad.scheduler.candidates',
  'triad.scheduler.remaining',
  'triad.reconcile.endpoints_written',
  'triad.reconcile.endpoints_deleted',
];

const TIMELINE_WIDTH = 30;

export interface RenderOptions {
  readonly allAttributes?: boolean;
}

function ms(value: number): string {
  return value >= 100 ? value.toFixed(1) : value.toFixed(2);
}

function formatValue(v: AttrValue): string {
  if (Array.isArray(v)) return `[${v.map(formatValue).join(',')}]`;
  if (v !== null && typeof v === 'object') return JSON.stringify(v);
  if (typeof v === 'number' && !Number.isInteger(v)) return v.toFixed(4).replace(/0+$/, '');
  return String(v);
}

/** `server.address:port` as one item, then the key (or all) attributes as `k=v`. */
function attributeLine(span: ReceivedSpan, opts: RenderOptions): string {
  const a = span.attributes;
  const parts: string[] = [];
  if (a['server.address'] !== undefined) parts.push(`server=${formatValue(a['server.address'])}:${formatValue(a['server.port'] ?? '?')}`);
  const keys = opts.allAttributes
    ? Object.keys(a)
        .filter((k) => k !== 'server.address' && k !== 'server.port')
        .sort()
    : KEY_ATTRIBUTES;
  for (const k of keys) {
    const v = a[k];
    if (v !== undefined) parts.push(`${opts.allAttributes ? k : k.replace(/^(triad|gen_ai)\./, '')}=${formatValue(v)}`);
  }
  if (span.status.code === 'ERROR') parts.push(`status=ERROR${span.status.message ? ` "${span.status.message}"` : ''}`);
  return parts.join(' ');
}

/** A bar placing the span within the trace, so concurrent spans (the encode fan-out) line up visibly. */
function timeline(span: ReceivedSpan, start: number, total: number): string {
  if (total <= 0) return `[${'█'.repeat(TIMELINE_WIDTH)}]`;
  const from = Math.min(TIMELINE_WIDTH - 1, Math.floor(((span.startMs - start) / total) * TIMELINE_WIDTH));
  const to = Math.max(from + 1, Math.min(TIMELINE_WIDTH, Math.ceil(((span.endMs - start) / total) * TIMELINE_WIDTH)));
  return `[${' '.repeat(from)}${'█'.repeat(to - from)}${' '.repeat(TIMELINE_WIDTH - to)}]`;
}

interface Row {
  readonly label: string;
  readonly detailIndent: string;
  readonly span: ReceivedSpan;
}

/** Depth-first rows with box-drawing prefixes; `indent` is what the ancestors draw to the left. */
function flatten(nodes: readonly SpanTreeNode[], indent: string, rows: Row[], depth: number): void {
  nodes.forEach((node, i) => {
    const last = i === nodes.length - 1;
    const branch = depth === 0 ? '' : last ? '└─ ' : '├─ ';
    const below = depth === 0 ? '' : last ? '   ' : '│  ';
    // The detail line continues this node's own line down to its children, if it has any.
    rows.push({
      label: `${indent}${branch}${node.span.name}`,
      detailIndent: `${indent}${below}${node.children.length ? '│  ' : '   '}`,
      span: node.span,
    });
    flatten(node.children, `${indent}${below}`, rows, depth + 1);
  });
}

function pad(s: string, width: number): string {
  return s + ' '.repeat(Math.max(0, width - [...s].length));
}

function padStart(s: string, width: number): string {
  return ' '.repeat(Math.max(0, width - s.length)) + s;
}

/**
 * The span tree of one trace as text: one line per span (tree, service, kind, start offset from the trace
 * start, duration, a timeline bar), then its key attributes and events on an indented line.
 */
export function renderTrace(traceId: string, spans: readonly ReceivedSpan[], opts: RenderOptions = {}): string {
  if (spans.length === 0) return `trace ${traceId}: no spans\n`;
  const start = Math.min(...spans.map((s) => s.startMs));
  const end = Math.max(...spans.map((s) => s.endMs));
  const total = end - start;
  const services = [...new Set(spans.map((s) => s.serviceName).filter(Boolean))].sort();
  const rows: Row[] = [];
  flatten(buildSpanTree(spans), '', rows, 0);
  const labelWidth = Math.max(4, ...rows.map((r) => [...r.label].length));
  const serviceWidth = Math.max(7, ...rows.map((r) => r.span.serviceName.length));
  const out: string[] = [];
  out.push(
    `trace ${traceId} · ${spans.length} span${spans.length === 1 ? '' : 's'} · ${services.join(', ') || 'no service'} · ${ms(total)} ms`,
    '',
  );
  out.push(
    `${pad('SPAN', labelWidth)}  ${pad('SERVICE', serviceWidth)}  ${pad('KIND', 8)}  ${padStart('START ms', 10)}  ` +
      `${padStart('DURATION ms', 11)}  TIMELINE`,
  );
  for (const row of rows) {
    const s = row.span;
    const mark = s.status.code === 'ERROR' ? ' ✗' : '';
    out.push(
      `${pad(row.label, labelWidth)}  ${pad(s.serviceName, serviceWidth)}  ${pad(s.kind, 8)}  ` +
        `${padStart(`+${ms(s.startMs - start)}`, 10)}  ${padStart(ms(s.durationMs), 11)}  ${timeline(s, start, total)}${mark}`,
    );
    const attrs = attributeLine(s, opts);
    if (attrs) out.push(`${row.detailIndent}  ${attrs}`);
    for (const e of s.events) {
      const at = Number(BigInt(e.timeUnixNano) / 1000n) / 1000 - start;
      const extra = Object.entries(e.attributes)
        .map(([k, v]) => `${k.replace(/^(triad|gen_ai)\./, '')}=${formatValue(v)}`)
        .join(' ');
      out.push(`${row.detailIndent}  · ${e.name} at +${ms(at)} ms${extra ? ` ${extra}` : ''}`);
    }
  }
  return `${out.join('\n')}\n`;
}

function localTime(epochMs: number): string {
  const d = new Date(epochMs);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`
  );
}

/** Recent traces, newest first, one line each. */
export function renderTraceList(traces: readonly TraceSummary[]): string {
  if (traces.length === 0) return 'no traces received yet\n';
  const lines = [
    `${pad('TRACE ID', 32)}  ${pad('START', 23)}  ${padStart('DURATION ms', 11)}  ${padStart('SPANS', 5)}  ` +
      `${padStart('ERRORS', 6)}  ROOT`,
  ];
  for (const t of traces) {
    const root = t.rootName ? `${t.rootService}: ${t.rootName}` : '(root span not received)';
    lines.push(
      `${t.traceId}  ${localTime(t.startMs)}  ${padStart(ms(t.durationMs), 11)}  ${padStart(String(t.spanCount), 5)}  ` +
        `${padStart(String(t.errors), 6)}  ${root}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
