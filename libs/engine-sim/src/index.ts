export { startSimEngine } from './start-sim-engine';
export {
  EcConnectorKindSchema,
  EngineKindSchema,
  FaultSpecSchema,
  KvEventsSimOptionsSchema,
  SimRoleSchema,
  VllmKvConnectorSchema,
} from './options';
export type {
  EcConnectorKind,
  EngineCoreOptions,
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
  VllmKvConnector,
} from './options';
export type { CounterName } from './counters';
