export { parseGoDuration, checkDuration } from './duration';
export type { DurationRule } from './duration';
export { checkByteSize } from './byte-size';
export type { UnitResult } from './result';
