export { yamlFilesUnder, parseManifestFile, where, kindOf, nameOf } from './documents';
export type { ManifestDoc, ParsedFile } from './documents';
export { BUILT_IN_KINDS, WORKLOAD_KINDS } from './kinds';
export { loadKustomization, kustomizationDirs } from './kustomize';
export type { KustomizeUnit } from './kustomize';
export { commandHelp, commandsHelp, cliCommands } from './cli-help';
export type { CommandHelp } from './cli-help';
export {
  TRIAD_IMAGE,
  TRIAD_SERVICES,
  crdInfos,
  checkKinds,
  checkTriadResources,
  checkWorkloads,
  checkReferences,
  checkTriadContainers,
  checkMonitors,
  triadCommandsUsed,
  checkModelServerWorkloads,
  checkSchedulerConfigs,
} from './checks';
export type { CrdInfo } from './checks';
export { checkNatsCluster } from './nats-cluster';
