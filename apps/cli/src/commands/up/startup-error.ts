/**
 * A start-up failure the user can fix (port taken, nats-server missing, invalid config...). Its message is the
 * whole story, written for a person: `triad up` prints it as is, without a stack trace.
 */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}
