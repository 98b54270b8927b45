export { ErrorCode, TriadError, ConfigError, isTriadError, isErrorCode } from './triad-error';
export type { ErrorCodeValue } from './triad-error';
