// The workflow bundle's entry point: every workflow type the controller worker registers.
export { reconcileNode } from './reconcileNode';
export { rollout } from './rollout';
