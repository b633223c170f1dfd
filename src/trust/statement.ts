import { withFix } from '../contract/fix';

/*
 * The statement an operator signs for a decision that widens what a host may write
 * (docs/security.md, "Operator signatures"). It names exactly one decision: the node, the
 * decision, what it is about (a retake's resource key, an approval's work item), for an approval
 * every target with the sha256 the approver saw, who decides, and until when the statement
 * stands. One canonical text per decision, line by line, so the CLI that signs it and the host
 * that checks it agree byte for byte, and a statement that is not canonical is refused whole.
 */

export const STATEMENT_HEADER = 'datum-operator decision v1';
export const DECISIONS = ['retake', 'approve'] as const;
export type SignedDecision = (typeof DECISIONS)[number];

export interface DecisionStatement {
  node: string;
  decision: SignedDecision;
  /** retake: the resource key; approve: the work item's id. */
  subject: string;
  /** approve: each target the approval removes, with the sha256 of its bytes, sorted; retake: none. */
  targets: Array<{ target: string; sha256: string }>;
  by: string;
  /** ISO 8601, UTC: the host refuses the statement after it. */
  expires: string;
}

const FIELDS = ['node', 'decision', 'subject', 'by', 'expires'] as const;

/** A value that fits on its line: no line break, no leading or trailing space, not empty. */
const oneLine = (value: string) => value !== '' && !/[\r\n]/.test(value) && value.trim() === value;

const sortedTargets = (targets: DecisionStatement['targets']) =>
  [...targets].sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));

/** The canonical text of a decision; throws when a value cannot be written on one line. */
export function statementText(s: DecisionStatement): string {
  for (const field of FIELDS)
    if (!oneLine(s[field]))
      throw new Error(
        withFix(`the decision's ${field} ${JSON.stringify(s[field])} does not fit on one line`, 'name it without line breaks'),
      );
  const targets = sortedTargets(s.targets).map((t) => {
    if (!oneLine(t.target) || /\s/.test(t.sha256) || t.sha256 === '')
      throw new Error(withFix(`target ${JSON.stringify(t.target)} cannot be stated`, 'name targets as the plan lists them'));
    return `target ${t.sha256} ${t.target}`;
  });
  return [
    STATEMENT_HEADER,
    `node ${s.node}`,
    `decision ${s.decision}`,
    `subject ${s.subject}`,
    ...targets,
    `by ${s.by}`,
    `expires ${s.expires}`,
    '',
  ].join('\n');
}

/** The decision a statement's text names, or what is wrong with it; only the canonical text is read. */
export function parseStatement(text: string): DecisionStatement | { problem: string } {
  const lines = text.split('\n');
  if (lines[0] !== STATEMENT_HEADER) return { problem: `it does not begin with "${STATEMENT_HEADER}"` };
  const fields: Record<string, string> = {};
  const targets: DecisionStatement['targets'] = [];
  for (const line of lines.slice(1, -1)) {
    const space = line.indexOf(' ');
    const [name, value] = space < 0 ? [line, ''] : [line.slice(0, space), line.slice(space + 1)];
    if (name === 'target') {
      const at = value.indexOf(' ');
      targets.push({ sha256: value.slice(0, at), target: value.slice(at + 1) });
    } else if ((FIELDS as readonly string[]).includes(name) && !(name in fields)) fields[name] = value;
    else return { problem: `its line "${line.slice(0, 60)}" is not one a statement has` };
  }
  const missing = FIELDS.filter((f) => !(f in fields));
  if (missing.length > 0) return { problem: `it names no ${missing.join(', ')}` };
  if (!(DECISIONS as readonly string[]).includes(fields.decision))
    return { problem: `its decision "${fields.decision}" is not one an operator signs (${DECISIONS.join(', ')})` };
  const statement = {
    ...(fields as Omit<DecisionStatement, 'targets' | 'decision'>),
    decision: fields.decision as SignedDecision,
    targets,
  };
  let canonical: string;
  try {
    canonical = statementText(statement);
  } catch (error) {
    return { problem: (error as Error).message };
  }
  return canonical === text
    ? statement
    : { problem: 'it is not written as Datum writes a statement (order, spacing, a final newline)' };
}

/** Where the statement names another decision than the one at hand: the first field that differs, or null. */
export function otherDecision(signed: DecisionStatement, wanted: Omit<DecisionStatement, 'expires'>): string | null {
  for (const field of ['node', 'decision', 'subject', 'by'] as const)
    if (signed[field] !== wanted[field])
      return `it is signed for ${field} "${signed[field]}", and this decision's is "${wanted[field]}"`;
  const a = statementText({ ...signed, expires: 'x' });
  const b = statementText({ ...wanted, expires: 'x' });
  return a === b ? null : 'it names other targets (or other bytes of them) than this approval removes';
}
