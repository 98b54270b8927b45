export { startSimEngine } from './start-sim-engine';
export type {
  EcConnectorKind,
  EngineCoreOptions,
  FaultSpec,
  KvEventsSimOptions,
  LatencyOverrides,
  SimEngineHandle,
  SimEngineOptions,
  SimRole,
} from './options';
