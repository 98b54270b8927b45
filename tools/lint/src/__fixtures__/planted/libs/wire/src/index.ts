import type { Model } from '@fx/app';
export * from './other';
export const send = (m: Model) => m;
