export { SeededRandom } from './seeded-random';
export {
  FAULT_LABELS,
  FAULT_MODES,
  MATRIX_MODEL,
  TOPOLOGY_LABELS,
  TOPOLOGY_NAMES,
  deployServer,
  deployTopology,
  isMultimodal,
  runFaultScenario,
  scenarioLabel,
  scenariosOf,
  stagesOf,
} from './fault-matrix';
export type {
  DeployedTopology,
  FaultModeName,
  FaultScenario,
  FaultableSim,
  MatrixSimOptions,
  MatrixStack,
  ScenarioOptions,
  ScenarioResult,
  StageName,
  TopologyName,
} from './fault-matrix';
export { fuzzAnswerProblem, fuzzCase, runFuzz } from './fuzz-bodies';
export type { FuzzCase, FuzzOptions, FuzzReport } from './fuzz-bodies';
