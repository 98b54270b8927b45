export { createLogger } from './logger';
export type { Logger, LoggerOptions } from './logger';
export { startOpsServer } from './ops-server';
export type { OpsServer, OpsServerOptions } from './ops-server';
export { onShutdown } from './shutdown';
export type { ShutdownOptions } from './shutdown';
export { resolveSettings, Setting } from './settings';
export type { SettingSource, SettingSources, SettingsLayers } from './settings';
