export { ErrorCode, TriadError, isTriadError } from './triad-error';
export type { ErrorCodeValue } from './triad-error';
