export { parseGoDuration, parseDuration, formatDuration, durationHint, checkDuration } from './duration';
export type { BareDurationUnit, DurationRule } from './duration';
export { parseByteSize, formatByteSize, checkByteSize, BYTE_SIZE_HINT } from './byte-size';
export type { ByteSizeRule } from './byte-size';
export type { UnitResult } from './result';
