import type { AllowEntry } from './allow-list';

/**
 * Differences Triad makes on purpose, with the reason. Each entry is as narrow as the behaviour it allows; an entry
 * that matches nothing in a run is reported, so the list cannot grow stale unnoticed.
 */
export const ALLOW_LIST: readonly AllowEntry[] = [];
