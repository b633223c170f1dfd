// Types for scripts/reason-docs.mjs, so TypeScript can import it.
import type * as vocabulary from '../src/contract/vocabulary';
import type * as conditions from '../src/domain/conditions';
import type { GATES, GATE_CONDITIONS } from '../src/domain/gates';
import type { LADDER } from '../src/domain/ladder';

export declare const REASONS_DOC: string;
export declare const REGENERATE: string;
export declare function renderReasonDocs(code: {
  vocabulary: typeof vocabulary;
  gates: typeof GATES;
  gateConditions: typeof GATE_CONDITIONS;
  ladder: typeof LADDER;
  conditions: typeof conditions;
}): string;
