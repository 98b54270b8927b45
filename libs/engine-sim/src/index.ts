export { startSimEngine } from './start-sim-engine';
export { EcConnectorKindSchema, EngineKindSchema, FaultSpecSchema, SimRoleSchema } from './options';
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
export type { CounterName } from './counters';
