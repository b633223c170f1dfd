import type { CommandUnknownOpts, Option } from '@commander-js/extra-typings';
import { UsageError } from '../args';
import { withFix } from '../errors';
import { print } from '../output';
import type { CommandModule } from '../command';

/*
 * Shell completion scripts generated from the command tree: every command, subcommand and
 * option `datum --help` shows, the choices of an option that has them (-o), and file or
 * directory names for the options that take a path. A new option completes without editing this.
 */

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
type Shell = (typeof SHELLS)[number];

/** `tree`: the command tree this invocation parsed (the module never imports the tree that loads it). */
interface CompletionInput {
  shell: Shell;
  tree: CommandUnknownOpts;
}

export const completionCommand: CommandModule<{ shell: string; tree: CommandUnknownOpts }, CompletionInput> = {
  input({ shell, tree }) {
    if (!(SHELLS as readonly string[]).includes(shell))
      throw new UsageError(withFix(`no completion for shell "${shell}"`, `use one of ${SHELLS.join(', ')}`));
    return { shell: shell as Shell, tree };
  },
  run({ shell, tree }) {
    print(completionScript(shell, commandNodes(tree)));
    return Promise.resolve(0);
  },
};

/** One command of the tree: its path ("rollout start"), subcommands, options. */
interface Node {
  path: string;
  summary: string;
  subcommands: Array<{ name: string; summary: string }>;
  options: Array<{ flags: string[]; description: string; takesValue: boolean; choices: string[]; path: 'file' | 'dir' | null }>;
  /** The first argument's values, when they are a closed set (completion SHELL). */
  argumentChoices: string[];
}

const DIR_OPTIONS = new Set(['--fleet', '--data']);
const FILE_OPTIONS = new Set(['--config', '--config-file', '--tls-cert-path', '--tls-key-path', '--tls-ca-path']);

function optionOf(o: Option) {
  const flags = [o.short, o.long].filter((f): f is string => typeof f === 'string');
  const long = o.long ?? '';
  return {
    flags,
    description: o.description,
    takesValue: o.required || o.optional,
    choices: [...(o.argChoices ?? [])],
    path: DIR_OPTIONS.has(long) ? ('dir' as const) : FILE_OPTIONS.has(long) ? ('file' as const) : null,
  };
}

/** Every command of the tree, depth first, with `--help` (and `--version` at the top). */
export function commandNodes(program: CommandUnknownOpts): Node[] {
  const out: Node[] = [];
  const visit = (c: CommandUnknownOpts, path: string) => {
    const help = { flags: ['-h', '--help'], description: 'show help', takesValue: false, choices: [], path: null };
    const options = (c.options as unknown as Option[]).map(optionOf);
    out.push({
      path,
      summary: c.summary() || c.description(),
      subcommands: c.commands.map((s) => ({ name: s.name(), summary: s.summary() || s.description() })),
      options: [...options, help],
      argumentChoices: c.name() === 'completion' ? [...SHELLS] : [],
    });
    for (const s of c.commands) visit(s, path ? `${path} ${s.name()}` : s.name());
  };
  visit(program, '');
  return out;
}

export function completionScript(shell: Shell, nodes: Node[]): string {
  return shell === 'bash' ? bashScript(nodes) : shell === 'zsh' ? zshScript(nodes) : fishScript(nodes);
}

const words = (xs: string[]) => xs.join(' ');
const valueOptions = (nodes: Node[], kind: 'dir' | 'file') =>
  [...new Set(nodes.flatMap((n) => n.options.filter((o) => o.path === kind).flatMap((o) => o.flags)))].sort();
const choiceOptions = (nodes: Node[]) => {
  const seen = new Map<string, string[]>();
  for (const o of nodes.flatMap((n) => n.options)) if (o.choices.length) for (const f of o.flags) seen.set(f, o.choices);
  return [...seen.entries()];
};

/** The command path of the words typed so far: each word that names a subcommand of the path before it. */
/**
 * The step bash and zsh both take for each word typed so far (in `w`): a word that names a
 * subcommand of the path so far extends the path, so options complete for the command typed.
 */
function pathStep(nodes: Node[]): string {
  const cases = nodes
    .filter((n) => n.subcommands.length)
    .map((n) => `      "${n.path}") subs="${words(n.subcommands.map((s) => s.name))}" ;;`)
    .join('\n');
  return `    subs=""
    case "$path" in
${cases}
    esac
    if [[ " $subs " == *" $w "* ]]; then path="\${path:+$path }$w"; fi`;
}

function bashScript(nodes: Node[]): string {
  const cases = nodes
    .map((n) => {
      const all = [...n.subcommands.map((s) => s.name), ...n.options.flatMap((o) => o.flags), ...n.argumentChoices];
      return `    "${n.path}") opts="${words(all)}" ;;`;
    })
    .join('\n');
  const choices = choiceOptions(nodes)
    .map(([flag, values]) => `    ${flag}) COMPREPLY=($(compgen -W "${words(values)}" -- "$cur")); return ;;`)
    .join('\n');
  return `# bash completion for datum, generated from its command tree (datum completion bash).
_datum_path() {
  local path="" w i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
${pathStep(nodes)}
  done
  printf '%s' "$path"
}
_datum() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" opts=""
  case "$prev" in
${choices}
    ${valueOptions(nodes, 'dir').join('|')}) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    ${valueOptions(nodes, 'file').join('|')}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case "$(_datum_path)" in
${cases}
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -F _datum datum`;
}

const zq = (s: string) => s.replace(/'/g, "'\\''").replace(/:/g, '\\:');

function zshScript(nodes: Node[]): string {
  const cases = nodes
    .map((n) => {
      const entries = [
        ...n.subcommands.map((s) => `'${zq(s.name)}:${zq(s.summary)}'`),
        ...n.options.flatMap((o) => o.flags.map((f) => `'${zq(f)}:${zq(o.description)}'`)),
        ...n.argumentChoices.map((c) => `'${c}:shell'`),
      ];
      return `    "${n.path}") items=(${entries.join(' ')}) ;;`;
    })
    .join('\n');
  const choices = choiceOptions(nodes)
    .map(([flag, values]) => `    ${flag}) compadd -- ${words(values)}; return ;;`)
    .join('\n');
  return `#compdef datum
# zsh completion for datum, generated from its command tree (datum completion zsh).
_datum() {
  local path="" w i subs
  local -a items
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
${pathStep(nodes)}
  done
  case "\${words[CURRENT-1]}" in
${choices}
    ${valueOptions(nodes, 'dir').join('|')}) _files -/; return ;;
    ${valueOptions(nodes, 'file').join('|')}) _files; return ;;
  esac
  case "$path" in
${cases}
  esac
  _describe -t datum 'datum' items
}
if [[ "\${funcstack[1]}" == _datum ]]; then _datum "$@"; else compdef _datum datum; fi`;
}

const fq = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function fishScript(nodes: Node[]): string {
  const lines: string[] = [];
  for (const n of nodes) {
    const when = `-n ${fq(`__datum_path_is ${fq(n.path)}`)}`;
    for (const s of n.subcommands) lines.push(`complete -c datum -f ${when} -a ${fq(s.name)} -d ${fq(s.summary)}`);
    if (n.argumentChoices.length) lines.push(`complete -c datum -f ${when} -a ${fq(words(n.argumentChoices))}`);
    for (const o of n.options) {
      const flags = o.flags.map((f) => (f.startsWith('--') ? `-l ${f.slice(2)}` : `-s ${f.slice(1)}`)).join(' ');
      const value = o.choices.length
        ? ` -x -a ${fq(words(o.choices))}`
        : o.path === 'dir'
          ? ' -x -a "(__fish_complete_directories)"'
          : o.path === 'file'
            ? ' -r -F'
            : o.takesValue
              ? ' -x'
              : '';
      lines.push(`complete -c datum ${when} ${flags}${value} -d ${fq(o.description)}`);
    }
  }
  const cases = nodes
    .filter((n) => n.subcommands.length)
    .map((n) => `      case ${fq(n.path)}\n        set subs ${n.subcommands.map((s) => s.name).join(' ')}`)
    .join('\n');
  return `# fish completion for datum, generated from its command tree (datum completion fish).
function __datum_path
  set -l path ''
  set -l typed (commandline -opc)
  set -e typed[1]
  for w in $typed
    set -l subs
    switch $path
${cases}
    end
    if contains -- $w $subs
      set path (string trim -- "$path $w")
    end
  end
  echo $path
end
function __datum_path_is
  test (__datum_path) = "$argv[1]"
end
complete -c datum -f
${lines.join('\n')}`;
}
