export { startSimEngine } from './start-sim-engine';
export {
  EcConnectorKindSchema,
  EngineKindSchema,
  FaultModeSchema,
  FaultSpecSchema,
  LatencyOverridesSchema,
  LatencyProfileNameSchema,
  SimRoleSchema,
} from './options';
export type {
  EcConnectorKind,
  EngineKind,
  FaultMode,
  FaultSpec,
  LatencyOverrides,
  LatencyProfileName,
  LoggedRequest,
  SimEngineHandle,
  SimEngineOptions,
  SimLogger,
  SimRole,
} from './options';
export { COUNTER_NAMES } from './counters';
export type { CounterName } from './counters';
