import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ObjectStore, collectionOf, matchesSelector, selectedEvent, type KubeObject, type StoredEvent } from './object-store';
import { applyJsonPatch, applyMergePatch, type JsonPatchOperation } from './patch';
import { readBody, route, sendJson, statusBody, type Route } from './rest';

/** A request the server received (for asserting relists, watch resumption, selectors). */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly verb: 'list' | 'watch' | 'get' | 'patch' | 'other';
}

/** A PATCH the server applied (or refused through an injected failure). */
export interface RecordedPatch {
  /** `api/v1/pods` or `apis/<group>/<version>/<plural>`. */
  readonly collection: string;
  readonly namespace: string | undefined;
  readonly name: string;
  /** `status` for the status subresource, undefined for the object itself. */
  readonly subresource: 'status' | undefined;
  readonly contentType: string;
  readonly body: unknown;
  /** HTTP status the server answered. */
  readonly status: number;
}

export type FailableVerb = 'list' | 'watch' | 'patch';

export interface FakeKubeServerOptions {
  readonly host?: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /**
   * Collections (`apis/<group>/<version>/<plural>`) whose CRD declares an empty status schema, as Kthena's
   * ModelServer and ModelRoute do: a status write is pruned to `{}`, as the API server would.
   */
  readonly prunedStatus?: readonly string[];
}

/** Arguments for `KubeConfig.loadFromOptions` that point a client at the fake server. */
export interface FakeKubeConfigOptions {
  clusters: { name: string; server: string; skipTLSVerify: boolean }[];
  users: { name: string; token: string }[];
  contexts: { name: string; cluster: string; user: string }[];
  currentContext: string;
}

export interface FakeKubeServer {
  readonly url: string;
  readonly port: number;
  /** Every request received, oldest first. */
  readonly requests: readonly RecordedRequest[];
  /** Every PATCH received, oldest first. */
  readonly patches: readonly RecordedPatch[];
  /** Creates or replaces an object (ADDED or MODIFIED to watchers); returns the stored copy with its resourceVersion. */
  apply(obj: KubeObject): KubeObject;
  /** Deletes an object (DELETED to watchers); returns the last stored copy, or undefined when it did not exist. */
  remove(apiVersion: string, kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): KubeObject | undefined;
  list(apiVersion: string, kind: string, namespace?: string): KubeObject[];
  /** The current cluster-wide resourceVersion. */
  resourceVersion(): string;
  /** Sends a BOOKMARK event at the current resourceVersion on every open watch. */
  bookmark(): void;
  /** Forgets the change log, so a watch resuming from an older resourceVersion gets 410 Gone. */
  compact(): void;
  /** Compacts, then sends a 410 `Expired` ERROR event on every open watch and closes it (the client must relist). */
  expireWatches(): void;
  /** Ends every open watch stream cleanly (the client resumes from its last resourceVersion). */
  closeWatches(): void;
  /** Answers the next `count` requests of `verb` (optionally only for one collection) with HTTP `status`. */
  failNext(verb: FailableVerb, count: number, status?: number, collection?: string): void;
  /** Number of watch streams open now (optionally for one collection). */
  openWatches(collection?: string): number;
  /** A kubeconfig file's YAML text for this server (insecure-skip-tls-verify, token auth). */
  kubeconfigYaml(): string;
  kubeConfigOptions(): FakeKubeConfigOptions;
  close(): Promise<void>;
}

interface OpenWatch {
  readonly collection: string;
  readonly namespace: string | undefined;
  readonly selector: string | null;
  readonly res: ServerResponse;
}

/**
 * A Kubernetes API server for tests, over plain HTTP: LIST and WATCH (NDJSON WatchEvents, resume from a
 * resourceVersion, bookmarks, 410 Gone after compaction) for any core or custom resource, GET of one object, and
 * PATCH (merge or JSON patch) of objects and their `/status` subresource, which it records. Failures can be
 * injected per verb. Objects are created and changed through the returned handle, not over HTTP.
 */
export async function startFakeKubeServer(options: FakeKubeServerOptions = {}): Promise<FakeKubeServer> {
  const store = new ObjectStore();
  const requests: RecordedRequest[] = [];
  const patches: RecordedPatch[] = [];
  const watches = new Set<OpenWatch>();
  const failures: { verb: FailableVerb; remaining: number; status: number; collection: string | undefined }[] = [];

  const takeFailure = (verb: FailableVerb, collection: string): number | undefined => {
    const f = failures.find((x) => x.verb === verb && x.remaining > 0 && (x.collection === undefined || x.collection === collection));
    if (!f) return undefined;
    f.remaining -= 1;
    return f.status;
  };

  const writeEvent = (w: OpenWatch, type: string, object: unknown) => {
    if (!w.res.writableEnded) w.res.write(`${JSON.stringify({ type, object })}\n`);
  };

  store.onEvent((e: StoredEvent) => {
    for (const w of watches) {
      if (w.collection !== e.collection) continue;
      if (w.namespace !== undefined && e.object.metadata.namespace !== w.namespace) continue;
      const type = selectedEvent(e, w.selector);
      if (type) writeEvent(w, type, e.object);
    }
  });

  // Lists in pages as the API server does (`limit`, then `continue` with the token of the previous page): items in
  // namespace/name order, a page going on after the last key of the one before, so objects added or removed
  // between pages shift nothing. Unlike etcd, later pages are cut from the current state rather than from the
  // first page's snapshot; they carry the first page's resourceVersion, and a watch from there replays whatever
  // changed meanwhile. A token from before the last compaction is 410 Expired, as a real server's.
  const handleList = (r: Route, url: URL, res: ServerResponse) => {
    const selector = url.searchParams.get('labelSelector');
    const known = store.kindOf(r.collection);
    let rv = store.resourceVersion;
    let after: { rv: number; key: string } | undefined;
    const token = url.searchParams.get('continue');
    if (token) {
      try {
        after = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { rv: number; key: string };
      } catch {
        sendJson(res, 400, statusBody(400, 'BadRequest', 'invalid continue token'));
        return;
      }
      if (after.rv < store.compactedResourceVersion) {
        sendJson(res, 410, statusBody(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.'));
        return;
      }
      rv = after.rv;
    }
    // Each object's key made once, not in every comparison of the sort.
    let keyed = store
      .list(r.collection, r.namespace)
      .filter((o) => matchesSelector(o.metadata.labels, selector))
      .map((o) => ({ key: `${o.metadata.namespace ?? ''}/${o.metadata.name}`, o }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    if (after !== undefined) {
      const from = after.key;
      keyed = keyed.filter((k) => k.key > from);
    }
    const limit = Number(url.searchParams.get('limit') ?? 0);
    let next: string | undefined;
    if (Number.isInteger(limit) && limit > 0 && keyed.length > limit) {
      keyed = keyed.slice(0, limit);
      next = Buffer.from(JSON.stringify({ rv, key: (keyed[keyed.length - 1] as { key: string }).key }), 'utf8').toString('base64url');
    }
    sendJson(res, 200, {
      apiVersion: known?.apiVersion ?? 'v1',
      kind: `${known?.kind ?? ''}List`,
      metadata: { resourceVersion: String(rv), ...(next !== undefined ? { continue: next } : {}) },
      items: keyed.map((k) => k.o),
    });
  };

  const handleWatch = (r: Route, url: URL, req: IncomingMessage, res: ServerResponse) => {
    const selector = url.searchParams.get('labelSelector');
    const rvParam = url.searchParams.get('resourceVersion');
    const since = rvParam ? Number(rvParam) : 0;
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // Without this the client's informer.start() waits for the first event before it resolves.
    res.flushHeaders();
    const w: OpenWatch = { collection: r.collection, namespace: r.namespace, selector, res };
    if (since > 0 && since < store.compactedResourceVersion) {
      writeEvent(w, 'ERROR', statusBody(410, 'Expired', `too old resource version: ${since} (${store.compactedResourceVersion})`));
      res.end();
      return;
    }
    if (since === 0) {
      // No resourceVersion: synthetic ADDED events for the current state, then live changes.
      for (const o of store.list(r.collection, r.namespace)) if (matchesSelector(o.metadata.labels, selector)) writeEvent(w, 'ADDED', o);
    } else {
      for (const e of store.eventsSince(r.collection, since, r.namespace)) {
        const type = selectedEvent(e, selector);
        if (type) writeEvent(w, type, e.object);
      }
    }
    watches.add(w);
    const drop = () => watches.delete(w);
    req.on('close', drop);
    res.on('close', drop);
  };

  const handlePatch = async (r: Route, req: IncomingMessage, res: ServerResponse) => {
    const contentType =
      String(req.headers['content-type'] ?? '')
        .split(';')[0]
        ?.trim() ?? '';
    const text = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      sendJson(res, 400, statusBody(400, 'BadRequest', 'body is not JSON'));
      return;
    }
    const name = r.name as string;
    const subresource = r.subresource === 'status' ? 'status' : undefined;
    const record = (status: number) =>
      patches.push({
        collection: r.collection,
        namespace: r.namespace,
        name,
        subresource,
        contentType,
        body,
        status,
      });
    const injected = takeFailure('patch', r.collection);
    if (injected !== undefined) {
      record(injected);
      sendJson(res, injected, statusBody(injected, 'InternalError', 'injected failure'));
      return;
    }
    const current = store.get(r.collection, r.namespace, name);
    if (!current) {
      record(404);
      sendJson(res, 404, statusBody(404, 'NotFound', `${r.collection} "${name}" not found`));
      return;
    }
    let patched: KubeObject;
    try {
      if (contentType === 'application/json-patch+json') patched = applyJsonPatch(current, body as JsonPatchOperation[]) as KubeObject;
      else if (contentType === 'application/merge-patch+json' || contentType === 'application/strategic-merge-patch+json')
        patched = applyMergePatch(current, body) as KubeObject;
      else {
        record(415);
        sendJson(res, 415, statusBody(415, 'UnsupportedMediaType', `unsupported patch type ${contentType}`));
        return;
      }
    } catch (err) {
      record(422);
      sendJson(res, 422, statusBody(422, 'Invalid', (err as Error).message));
      return;
    }
    // The status subresource only changes status; the main resource never changes status.
    const status = options.prunedStatus?.includes(r.collection) ? {} : patched.status;
    const next: KubeObject = subresource === 'status' ? { ...current, status } : { ...patched, status: current.status };
    const specChanged = subresource !== 'status' && JSON.stringify(current.spec) !== JSON.stringify(next.spec);
    const stored = store.replaceExisting(next, specChanged);
    record(200);
    sendJson(res, 200, stored);
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const r = route(url.pathname);
    const method = req.method ?? 'GET';
    const isWatch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const verb: RecordedRequest['verb'] = !r
      ? 'other'
      : method === 'PATCH'
        ? 'patch'
        : method !== 'GET'
          ? 'other'
          : r.name
            ? 'get'
            : isWatch
              ? 'watch'
              : 'list';
    requests.push({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), verb });
    if (!r) {
      sendJson(res, 404, statusBody(404, 'NotFound', `no route for ${url.pathname}`));
      return;
    }
    if (verb === 'list' || verb === 'watch') {
      const injected = takeFailure(verb, r.collection);
      if (injected !== undefined) {
        sendJson(res, injected, statusBody(injected, injected === 410 ? 'Expired' : 'InternalError', 'injected failure'));
        return;
      }
      if (verb === 'list') handleList(r, url, res);
      else handleWatch(r, url, req, res);
      return;
    }
    if (verb === 'get') {
      const o = store.get(r.collection, r.namespace, r.name as string);
      if (o) sendJson(res, 200, o);
      else sendJson(res, 404, statusBody(404, 'NotFound', `${r.collection} "${r.name}" not found`));
      return;
    }
    if (verb === 'patch' && r.name) {
      handlePatch(r, req, res).catch((err: Error) => sendJson(res, 500, statusBody(500, 'InternalError', err.message)));
      return;
    }
    sendJson(res, 405, statusBody(405, 'MethodNotAllowed', `${method} is not supported by the fake server`));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${options.host ?? '127.0.0.1'}:${port}`;

  const endWatch = (w: OpenWatch) => {
    watches.delete(w);
    if (!w.res.writableEnded) w.res.end();
  };

  return {
    url,
    port,
    requests,
    patches,
    apply: (obj) => store.put(obj),
    remove: (apiVersion, kind, namespace, name) => store.remove(collectionOf(apiVersion, kind), namespace, name),
    get: (apiVersion, kind, namespace, name) => store.get(collectionOf(apiVersion, kind), namespace, name),
    list: (apiVersion, kind, namespace) => store.list(collectionOf(apiVersion, kind), namespace),
    resourceVersion: () => String(store.resourceVersion),
    bookmark: () => {
      for (const w of watches) {
        const known = store.kindOf(w.collection);
        writeEvent(w, 'BOOKMARK', {
          apiVersion: known?.apiVersion ?? 'v1',
          kind: known?.kind ?? '',
          metadata: { resourceVersion: String(store.resourceVersion) },
        });
      }
    },
    compact: () => store.compact(),
    expireWatches: () => {
      store.compact();
      for (const w of [...watches]) {
        writeEvent(w, 'ERROR', statusBody(410, 'Expired', 'too old resource version'));
        endWatch(w);
      }
    },
    closeWatches: () => {
      for (const w of [...watches]) endWatch(w);
    },
    failNext: (verb, count, status = 500, collection) => {
      failures.push({ verb, remaining: count, status, collection });
    },
    openWatches: (collection) => [...watches].filter((w) => collection === undefined || w.collection === collection).length,
    kubeconfigYaml: () =>
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: fake\n  cluster:\n    server: ${url}\n    insecure-skip-tls-verify: true`,
        'users:',
        '- name: fake\n  user:\n    token: fake-token',
        'contexts:',
        '- name: fake\n  context:\n    cluster: fake\n    user: fake',
        'current-context: fake',
        '',
      ].join('\n'),
    kubeConfigOptions: () => ({
      clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
      users: [{ name: 'fake', token: 'fake-token' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
      currentContext: 'fake',
    }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const w of [...watches]) endWatch(w);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
