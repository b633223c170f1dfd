import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { buildProgram } from './program';

/*
 * docs/cli.md, generated from the command tree (`npm run docs:cli`): each command's help exactly
 * as `datum … --help` prints it, at a fixed width so the file does not depend on the terminal.
 * test/cli/generated.test.ts fails when the committed file differs from what the tree generates.
 */

const WIDTH = 110;

function commandsOf(program: CommandUnknownOpts): Array<{ path: string; command: CommandUnknownOpts }> {
  const out: Array<{ path: string; command: CommandUnknownOpts }> = [];
  const visit = (c: CommandUnknownOpts, path: string) => {
    c.configureHelp({ helpWidth: WIDTH });
    out.push({ path, command: c });
    for (const s of c.commands) visit(s, `${path} ${s.name()}`);
  };
  visit(program, program.name());
  return out;
}

const anchor = (path: string) => path.replace(/ /g, '-');

export function renderCliDocs(): string {
  const commands = commandsOf(buildProgram());
  const toc = commands
    .slice(1)
    .map(({ path, command }) => `- [\`${path}\`](#${anchor(path)}): ${command.summary() || command.description()}`)
    .join('\n');
  const sections = commands.map(
    ({ path, command }) =>
      `<a id="${anchor(path)}"></a>\n\n## \`${path}\`\n\n\`\`\`text\n${command.helpInformation().trimEnd()}\n\`\`\``,
  );
  return `# The \`datum\` command line

Generated from the command tree in \`src/cli/program.ts\` by \`npm run docs:cli\`; do not edit by hand
(a test fails when this file and the tree disagree). Every command also prints its part with \`--help\`.

Conventions, for every command:

- Exit codes: \`0\` done (for \`status\`, \`validate\` and \`diff\`: nothing found), \`1\` a finding or a
  failure, \`2\` a usage error (an unknown command or option, a missing argument, a bad value), with the
  usage on stderr.
- Errors go to stderr as \`<what is wrong> — fix: <what to do>\`; a mistyped command or option gets a
  "did you mean".
- \`-o text|json|jsonl\` on every command that reads: \`json\` is one stable document, \`jsonl\` one
  object a line (progress lines for \`rollout … --wait\`); \`--json\` is \`-o json\`.
- Temporal: the \`temporal\` CLI's connection flags, on top of envconfig (\`TEMPORAL_ADDRESS\`,
  \`TEMPORAL_NAMESPACE\`, \`TEMPORAL_API_KEY\`, \`TEMPORAL_TLS_*\`, \`TEMPORAL_PROFILE\`,
  \`TEMPORAL_CONFIG_FILE\`): a flag wins over the environment, which wins over the profile.
- Datum's own variables: \`DATUM_FLEET\` (\`--fleet\`), \`DATUM_DATA\` (\`--data\`), \`DATUM_LEDGER_URL\`
  (the ledger store), \`DATUM_METRICS_ADDRESS\` (\`--metrics-address\`).
- Shell completion: \`datum completion bash|zsh|fish\`.

${toc}

${sections.join('\n\n')}
`;
}
