// The workflow bundle's entry point: every workflow type the controller worker registers, each
// under its export name. Clients start them by the contract's WORKFLOW_TYPES and function types
// (never by importing this code), so the annotation below makes a workflow missing, renamed or
// typed otherwise than the contract says a compile error here, not "workflow type not found".
import type { DatumWorkflows } from '../contract';
import { reconcileNode as reconcileNodeWorkflow } from './reconcileNode';
import { rollout as rolloutWorkflow } from './rollout';
import { workItem as workItemWorkflow } from './workItem';
import { importNode as importNodeWorkflow } from './importNode';
import { rolloutGate as rolloutGateWorkflow } from './rolloutGate';
import { removal as removalWorkflow } from './removal';
import { fleet as fleetWorkflow } from './fleet';

export const { reconcileNode, rollout, workItem, importNode, rolloutGate, removal, fleet }: DatumWorkflows = {
  reconcileNode: reconcileNodeWorkflow,
  rollout: rolloutWorkflow,
  workItem: workItemWorkflow,
  importNode: importNodeWorkflow,
  rolloutGate: rolloutGateWorkflow,
  removal: removalWorkflow,
  fleet: fleetWorkflow,
};
