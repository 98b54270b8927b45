/** The logger methods admission uses (pino-compatible); the library never logs credentials. */
export interface AdmissionLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = (): void => undefined;

/** Used when no logger is given. */
export const SILENT_LOGGER: AdmissionLogger = { debug: noop, info: noop, warn: noop, error: noop };
