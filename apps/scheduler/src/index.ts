export { main } from './cli';
export { startScheduler } from './runner';
export type { SchedulerService, StartOptions } from './runner';
export { parseOptions } from './options';
export type { SchedulerServiceOptions } from './options';
