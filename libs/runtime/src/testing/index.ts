export { captureLogger, type CapturedLogger } from './capture-logger';
