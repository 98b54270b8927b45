import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { AffinityRecord } from '@triad/bus';
import {
  definePlugin,
  type AffinityLearner,
  type CycleContext,
  type PostScheduleHook,
  type ProfileRole,
  type Scorer,
} from '../../framework/plugin';
import type { Candidates } from '../../framework/candidates';
import type { Endpoint } from '../../state/endpoint';
import { DEFAULT_LOAD_FLOOR, withinLoadBound } from '../bounded-load';

const SESSION_AFFINITY = 'session-affinity';

export const SessionAffinityParamsSchema = z
  .object({
    /** Bounded load: the session's pod keeps it while its in-flight count stays within loadFactor × the mean. */
    loadFactor: z.number().min(1).max(10).default(1.5),
    /** In-flight requests the session's pod may always run and keep the session (absolute floor). */
    loadFloor: z.number().int().min(0).max(1000).default(DEFAULT_LOAD_FLOOR),
    /** Past the bound, the session's pod keeps it while one more request joins its running batch (`hasBatchRoom`). */
    batchRoom: z.boolean().default(true),
    /** Sessions remembered per stage (least recently used forgotten first). */
    maxSessions: z.number().int().min(1).default(100_000),
  })
  .strict();
export type SessionAffinityParams = z.infer<typeof SessionAffinityParamsSchema>;

/**
 * Sends a session's requests back to the pod that served its previous turn, which holds the conversation's KV
 * blocks beyond what prompt-prefix hashing sees. `request.session` comes from the `x-session-id` header, else the
 * body's `session_id`, else `user`. Per stage (aggregated, decode, prefill), so a PD session keeps its pair. Score
 * 100 for the session's pod while it is within the load bound, 0 otherwise (the other scorers decide, and the
 * session moves to the new pod).
 */
export class SessionAffinityScorer implements Scorer, PostScheduleHook, AffinityLearner {
  readonly type = SESSION_AFFINITY;
  readonly name: string;
  readonly loadBoundedAffinity = true;
  readonly #params: SessionAffinityParams;
  readonly #byRole = new Map<ProfileRole, LRUCache<string, string>>();

  constructor(name: string, params: SessionAffinityParams) {
    this.name = name;
    this.#params = params;
  }

  /** The endpoint a session is pinned to in a stage (tests, explanations). */
  endpointOf(role: ProfileRole, session: string): string | undefined {
    return this.#byRole.get(role)?.peek(session);
  }

  score(ctx: CycleContext, c: Candidates, out: Float64Array): void {
    const session = ctx.request.session;
    if (session === undefined) return;
    // Scoring does not make a session recent; serving it (postSchedule, learn) does.
    const key = this.#byRole.get(ctx.role)?.peek(session);
    if (key === undefined) return;
    const pos = c.indexOf(key);
    if (pos < 0) return;
    if (withinLoadBound(c, this.#params.loadFactor, this.#params.loadFloor, this.#params.batchRoom)(pos)) out[pos] = 100;
    else ctx.loadBounded?.(this.name);
  }

  postSchedule(ctx: CycleContext, chosen: Endpoint): void {
    const session = ctx.request.session;
    if (session !== undefined && ctx.role !== 'encode') this.#remember(ctx.role, session, chosen.key);
  }

  learn(record: AffinityRecord): void {
    if (record.session !== undefined && record.role !== 'encode') this.#remember(record.role, record.session, record.endpoint);
  }

  #remember(role: ProfileRole, session: string, endpoint: string): void {
    let sessions = this.#byRole.get(role);
    if (!sessions) {
      sessions = new LRUCache({ max: this.#params.maxSessions });
      this.#byRole.set(role, sessions);
    }
    sessions.set(session, endpoint);
  }
}

export const sessionAffinityPlugin = definePlugin({
  type: SESSION_AFFINITY,
  kinds: ['scorer', 'post-schedule'],
  description: "Scores 100 for the pod that served the session's previous turn (per stage), within a load bound.",
  params: SessionAffinityParamsSchema,
  create: (name, params) => new SessionAffinityScorer(name, params),
});
