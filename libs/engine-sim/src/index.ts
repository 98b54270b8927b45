export { startSimEngine } from './start-sim-engine';
export { EcConnectorKindSchema, EngineKindSchema, FaultSpecSchema, KvEventsSimOptionsSchema, SimRoleSchema } from './options';
export type {
  EcConnectorKind,
  EngineKind,
  FaultMode,
  FaultSpec,
  KvEventsSimOptions,
  LatencyOverrides,
  LatencyProfileName,
  LoggedRequest,
  SimEngineHandle,
  SimEngineOptions,
  SimLogger,
  SimRole,
} from './options';
export type { CounterName } from './counters';
