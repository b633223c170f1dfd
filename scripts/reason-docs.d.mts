// Types for scripts/reason-docs.mjs, so TypeScript can import it.
import type * as vocabulary from '../src/contract/vocabulary';
import type * as conditions from '../src/domain/conditions';
import type { GATES, GATE_CONDITIONS } from '../src/domain/gates';
import type { LADDER } from '../src/domain/ladder';
import type { FLEET_CONDITION_MEANINGS, FLEET_CONDITION_TYPES } from '../src/contract/fleet';
import type { FLEET_WORK_CONDITIONS } from '../src/domain/work-rules';

export declare const REASONS_DOC: string;
export declare const REGENERATE: string;
export declare function renderReasonDocs(code: {
  vocabulary: typeof vocabulary;
  gates: typeof GATES;
  gateConditions: typeof GATE_CONDITIONS;
  ladder: typeof LADDER;
  conditions: typeof conditions;
  fleet: {
    FLEET_CONDITION_TYPES: typeof FLEET_CONDITION_TYPES;
    FLEET_CONDITION_MEANINGS: typeof FLEET_CONDITION_MEANINGS;
    FLEET_WORK_CONDITIONS: typeof FLEET_WORK_CONDITIONS;
  };
}): string;
