import { list } from './verdict';
import { holdWords } from './holds';
import type { NodeHold } from '../contract/ledger';

/**
 * Why a planned action is not authorized, as a value. The ledger keeps the sentence
 * (`PlannedAction.withheld_because`, a string in ledger v1); the judgement reads the kind.
 * Listed in the order authorize() checks them.
 */
export type WithheldCause =
  | { kind: 'destructive'; obstruction: string }
  | { kind: 'observe' }
  | { kind: 'held'; hold: NodeHold }
  | { kind: 'conflict'; writers: string[] }
  | { kind: 'refused'; refusal: string }
  | { kind: 'budget'; attempts: number }
  | { kind: 'deadline'; deadline: string; started_at: string }
  | { kind: 'dependency'; on: string[] };

/** The ledger's sentence for a cause (ledger v1 wording; entries are stored and replayed). */
export function withheldBecause(cause: WithheldCause): string {
  switch (cause.kind) {
    case 'destructive':
      return `repair would be destructive: ${cause.obstruction}`;
    case 'observe':
      return 'observe mode: reported, not applied';
    case 'held':
      return `the node is ${holdWords(cause.hold)}: reported, not applied`;
    case 'conflict':
      return `repair is stopped while a conflicting writer on ${list(cause.writers)} is unresolved`;
    case 'refused':
      return `refused by the agent: ${cause.refusal}`;
    case 'budget':
      return `retry budget exhausted after ${cause.attempts} attempt(s)`;
    case 'deadline':
      return `repair_deadline ${cause.deadline} passed in the repair episode that began at ${cause.started_at}`;
    case 'dependency':
      return `depends on ${list(cause.on)}, which cannot be repaired now`;
  }
}
