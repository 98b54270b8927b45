// Only `main` is a value export, so `triad webhook --help` loads nothing else.
export { main } from './cli';
export type { Webhook, StartWebhookOptions } from './server';
export type { WebhookConfig } from './config';
