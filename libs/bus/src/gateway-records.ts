import { z } from 'zod';
import { HttpPathMatchSchema, HttpUrlRewriteSchema } from '@triad/crd';
import { SCHEMA_VERSION } from './records';

const SchemaVersion = z.literal(SCHEMA_VERSION);

/**
 * A Gateway of one of Triad's GatewayClasses (or the default Gateway the pod-watcher defines, `virtual: true`),
 * with the HTTP listeners the gateway process must open. Key: `objectKey(namespace, name)` in
 * `triad_v1_gateways`.
 */
export const GatewayRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  gatewayClassName: z.string(),
  /** The default Gateway (Kthena creates one; Triad only publishes it): not an object in the API server. */
  virtual: z.boolean(),
  /** HTTP listeners: one server per port; requests are matched to a listener by Host (exact, then wildcard). */
  listeners: z.array(
    z.object({
      name: z.string(),
      port: z.number().int().min(1).max(65535),
      /** `host.example.com` or `*.example.com`; absent: any host. */
      hostname: z.string().optional(),
    }),
  ),
  /** Listeners not served (protocol other than HTTP), with why. */
  ignoredListeners: z.array(z.object({ name: z.string(), protocol: z.string(), reason: z.string() })),
});
export type GatewayRecord = z.infer<typeof GatewayRecordSchema>;

/** One InferencePool backend of a rule, resolved to the ModelServer its endpoints are published under. */
export const HttpRouteBackendSchema = z.object({
  namespace: z.string(),
  /** The InferencePool. */
  name: z.string(),
  /** Gateway API weight (omitted = 1; 0 gets no traffic). */
  weight: z.number().int().min(0),
  /** `inferencePoolServerName(name)`: what to put in `SchedulingRequest.modelServer`. */
  modelServer: z.string(),
  /** The pool's target port (every endpoint record carries it too). */
  port: z.number().int().min(1).max(65535),
});

export const HttpRouteRuleRecordSchema = z.object({
  /** Position in `spec.rules`: ties between equally specific matches go to the lower index. */
  index: z.number().int().min(0),
  name: z.string().optional(),
  /** Path matches, explicit (the default PathPrefix `/` filled in); empty: the rule matches nothing. */
  matches: z.array(HttpPathMatchSchema),
  /** Backends that exist; a rule whose backends are all missing has none (answer 500/503 as Gateway API says). */
  backends: z.array(HttpRouteBackendSchema),
  urlRewrite: HttpUrlRewriteSchema.optional(),
});
export type HttpRouteRuleRecord = z.infer<typeof HttpRouteRuleRecordSchema>;

/**
 * An HTTPRoute attached to at least one listener of Triad's Gateways, reduced to what Triad serves (path
 * matches, hostnames, weighted InferencePool backends, URLRewrite). Key: `objectKey(namespace, name)` in
 * `triad_v1_httproutes`. What was left out is on the route's status (`PartiallyInvalid`, `ResolvedRefs`).
 */
export const HttpRouteRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  creationTimestamp: z.string().optional(),
  /** Route hostnames (empty: any); matched against the request's Host, exact or `*.` wildcard. */
  hostnames: z.array(z.string()),
  /** Listeners the route is accepted on (parentRefs resolved against allowedRoutes, sectionName and port). */
  parents: z.array(z.object({ namespace: z.string(), gateway: z.string(), listener: z.string(), port: z.number().int() })),
  rules: z.array(HttpRouteRuleRecordSchema),
});
export type HttpRouteRecord = z.infer<typeof HttpRouteRecordSchema>;
