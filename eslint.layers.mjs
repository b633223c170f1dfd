// The `datum/layers` lint rule: which part of src/ may import which, and how. `no-restricted-imports`
// matches import strings, and a relative string means different places from different folders
// ('../activities' is src/activities from src/agent/worker.ts but src/agent/activities/ from
// src/agent/providers/*.ts), so this rule resolves each import to a path under the repository and
// judges that. An import is type-only when it is `import type`, or when every specifier is
// `type X`: TypeScript erases both, so they load nothing at run time.

import { existsSync } from 'node:fs';
import path from 'node:path';

const root = import.meta.dirname;

/** The repository-relative module an import names: 'src/contract/index', or null for a package. */
function resolveLocal(filename, source) {
  if (!source.startsWith('.')) return null;
  let target = path.resolve(path.dirname(filename), source).replace(/\.(js|ts|mjs|cjs)$/, '');
  if (existsSync(path.join(target, 'index.ts'))) target = path.join(target, 'index');
  return path.relative(root, target).split(path.sep).join('/');
}

const packageOf = (source) => (source.startsWith('@') ? source.split('/').slice(0, 2).join('/') : source.split('/')[0]);

function typeOnly(node) {
  if (node.importKind === 'type' || node.exportKind === 'type') return true;
  const specifiers = node.specifiers ?? [];
  return specifiers.length > 0 && specifiers.every((s) => s.importKind === 'type' || s.exportKind === 'type');
}

const under = (target, dirs) => dirs.some((d) => target === d.replace(/\/$/, '') || target.startsWith(d));

/**
 * Options: a list of zones, each
 *   { in: 'src/x/', forbid: ['src/y/'], except?: ['src/y/z/'], allowTypes?: true, message }
 * for imports of project files, or
 *   { in: 'src/x/', packages: ['zod', …], message }
 * for run-time imports of packages (any package not listed is refused unless type-only).
 */
export const layers = {
  meta: {
    type: 'problem',
    docs: { description: 'Keep the layers of src/ apart (see eslint.config.mjs for the zones).' },
    schema: [{ type: 'array', items: { type: 'object' } }],
    messages: { forbidden: '{{source}}: {{message}}' },
  },
  create(context) {
    const file = path.relative(root, context.filename).split(path.sep).join('/');
    const zones = context.options[0].filter((z) => file.startsWith(z.in));
    if (zones.length === 0) return {};
    const check = (node, sourceNode) => {
      if (!sourceNode || typeof sourceNode.value !== 'string') return;
      const source = sourceNode.value;
      const types = node.type !== 'ImportExpression' && typeOnly(node);
      const target = resolveLocal(context.filename, source);
      for (const zone of zones) {
        const refused =
          target === null
            ? zone.packages !== undefined && !types && !zone.packages.includes(packageOf(source))
            : zone.forbid !== undefined &&
              under(target, zone.forbid) &&
              !under(target, zone.except ?? []) &&
              !(zone.allowTypes && types);
        if (refused) context.report({ node: sourceNode, messageId: 'forbidden', data: { source, message: zone.message } });
      }
    };
    return {
      ImportDeclaration: (node) => check(node, node.source),
      ExportNamedDeclaration: (node) => check(node, node.source),
      ExportAllDeclaration: (node) => check(node, node.source),
      ImportExpression: (node) => check(node, node.source),
    };
  },
};

export default { rules: { layers } };
