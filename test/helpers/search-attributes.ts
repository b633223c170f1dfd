// Datum's search attribute keys (DESIGN.md, "Temporal contract"). Workflow-safe: imported by
// workflow code inside the sandbox as well as by tests, so it must import nothing but
// @temporalio/common. Interim home: these move to a shared src/ module, same names and types.

import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const DatumNode = defineSearchAttributeKey('DatumNode', SearchAttributeType.KEYWORD);
export const DatumGeneration = defineSearchAttributeKey('DatumGeneration', SearchAttributeType.INT);
export const DatumDigest = defineSearchAttributeKey('DatumDigest', SearchAttributeType.KEYWORD);
export const DatumStatus = defineSearchAttributeKey('DatumStatus', SearchAttributeType.KEYWORD);
export const DatumConditions = defineSearchAttributeKey('DatumConditions', SearchAttributeType.KEYWORD_LIST);
export const DatumMode = defineSearchAttributeKey('DatumMode', SearchAttributeType.KEYWORD);

/** Every key a Temporal server must have registered before Datum's workflows can upsert them. */
export const DATUM_SEARCH_ATTRIBUTES = [
  DatumNode,
  DatumGeneration,
  DatumDigest,
  DatumStatus,
  DatumConditions,
  DatumMode,
] as const;
