// The pure reconcile core. Safe to import from workflow code: no I/O, no clock, no Node built-ins.
// The formats it reads and writes, and the closed sets they use, are the contract's; re-exported
// here for the domain's callers.
export * from '../contract/vocabulary';
export type * from '../contract/desired';
export type * from '../contract/observation';
export * from '../contract/ledger';
export type * from '../contract/history';
export type { RecordDecisionRequest } from '../contract/agent';
export * from './canonical';
export * from './duration';
export * from './rootPath';
export * from './errors';
export * from './desired';
export * from './history';
export * from './classify';
export * from './plan';
export * from './conditions';
export * from './decide';
export * from './signals';
export * from './loop';
export * from './watch';
export * from './pass';
export * from './targets';
export {
  artifactDigestFix,
  kindOfAction,
  debianVersionProblem,
  missingArtifactFix,
  ownFile,
  packageNameProblem,
  unitNameProblem,
} from './resources';
export * from './markers';
export * from './decisions';
export * from './written';
export * from './redact';
export * from './work-rules';
export * from './work-payloads';
export * from './work-items';
export * from './work-reports';
export * from './selector';
export * from './waves';
export * from './decision-items';
export * from './intended';
export * from './fleet';
export * from './holds';
