import { parseDocument } from 'yaml';
import { InvalidAgentConfig, InvalidDesiredState, problemsFromZod, type InvalidInputError, type Problem } from './errors';
import { bindIntent, validateDesiredState, type BoundIntent } from './desired';
import { agentConfig, type AgentConfig, type DesiredProvenance } from './schemas';

/*
 * Text → validated documents. Pure (no file access): callers read the bytes and pass them in
 * with the path they came from, so every error can name the file.
 */

function parseYaml(text: string, source: string, fail: (problems: Problem[]) => InvalidInputError): unknown {
  if (text.includes('\u0000'))
    throw fail([{ field: '(file)', problem: 'is binary, not YAML', fix: 'point Datum at the YAML text file' }]);
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw fail(
      doc.errors.map((e) => ({
        field: e.linePos ? `(line ${e.linePos[0].line}, column ${e.linePos[0].col})` : '(file)',
        problem: `is not valid YAML: ${e.message.split('\n')[0]}`,
        fix: 'correct the YAML syntax (indentation, quotes, colons) at that position',
      })),
    );
  }
  const data: unknown = doc.toJS();
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw fail([
      { field: '(file)', problem: 'is not a YAML mapping', fix: 'write the document as key: value pairs, as README.md shows' },
    ]);
  }
  return data;
}

export function parseDesiredStateText(
  text: string,
  source: string,
  provenance: Omit<DesiredProvenance, 'source'>,
  expectedNode?: string,
): BoundIntent {
  const data = parseYaml(text, source, (p) => new InvalidDesiredState(source, p));
  return bindIntent(validateDesiredState(data, source, expectedNode), { source, ...provenance });
}

export function parseAgentConfigText(text: string, source: string): AgentConfig {
  const data = parseYaml(text, source, (p) => new InvalidAgentConfig(source, p));
  return validateAgentConfig(data, source);
}

export function validateAgentConfig(data: unknown, source: string): AgentConfig {
  const parsed = agentConfig.safeParse(data, { reportInput: true });
  if (!parsed.success) throw new InvalidAgentConfig(source, problemsFromZod(parsed.error));
  return parsed.data;
}
