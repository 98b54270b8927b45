export {
  MATRIX_MODEL,
  TOPOLOGY_LABELS,
  TOPOLOGY_NAMES,
  deployServer,
  deployTopology,
  isMultimodal,
  runFaultScenario,
  scenarioLabel,
  scenariosOf,
} from './fault-matrix';
export type { DeployedTopology, FaultScenario, FaultableSim, MatrixStack, ScenarioResult, StageName, TopologyName } from './fault-matrix';
export { fuzzCase, runFuzz } from './fuzz-bodies';
export { ANSWER_TOKENS, DEATH_POINTS, runMidStreamScenario, tokensBeforeDeath } from './mid-stream-deaths';
export type { MidStreamResult } from './mid-stream-deaths';
export { chatBody, counterTotal, FailureTally, forEachConcurrently, sendChat } from './client';
export { SeededRandom } from './seeded-random';
